//! `neve insert`.

use std::time::Instant;

use neve_core::write::input::{InputFormat, ReadOptions};
use neve_core::write::WriteOptions;
use neve_core::{CreateOptions, InsertOptions, Table};

use crate::cli::{FormatArg, InsertArgs};
use crate::error::{CliError, Result};
use crate::output::{bytes, count};
use crate::progress::with_bar;

/// `--create` of a table that exists: the layout flags given must be the table's, or the
/// insert would go on under a layout the user did not ask for.
async fn same_layout(table: &Table, a: &InsertArgs, given: &CreateOptions) -> Result<()> {
    use neve_core::partition::format_spec;
    let m = table.metadata().await?;
    let differs = |what: String| {
        Err(CliError::Usage(format!(
            "the table exists with {what}: leave out the flag, or `neve alter` the table"
        )))
    };
    let quoted = |s: String| {
        if s.is_empty() {
            "none".into()
        } else {
            format!("'{s}'")
        }
    };
    if !a.layout.partition_by.trim().is_empty() && m.partition_by != given.partition_by {
        return differs(format!(
            "partitions {}, not {}",
            quoted(format_spec(&m.partition_by)),
            quoted(format_spec(&given.partition_by))
        ));
    }
    if !given.sort_by.is_empty() && m.sort_by != given.sort_by {
        return differs(format!(
            "sort keys '{}', not '{}'",
            m.sort_by.join(","),
            given.sort_by.join(",")
        ));
    }
    if let Some(g) = given
        .merge
        .as_ref()
        .filter(|g| m.merge.as_ref() != Some(*g))
    {
        let t = m.merge.as_ref().map(ToString::to_string);
        return differs(format!(
            "merge semantics '{}', not '{g}'",
            t.as_deref().unwrap_or("none")
        ));
    }
    let mut wanted = m.settings.clone();
    super::apply_settings(&mut wanted, &a.layout.settings)?;
    if wanted != m.settings {
        return differs(format!(
            "other settings than --set {}",
            a.layout.settings.join(" --set ")
        ));
    }
    Ok(())
}

pub async fn run(a: InsertArgs) -> Result<()> {
    let table = Table::at(&a.table)?;
    // Every flag is checked before anything is made: a failed `--create` of a new table
    // leaves nothing behind.
    let layout = &a.layout;
    if !a.create
        && (!layout.partition_by.is_empty()
            || layout.sort_by.iter().any(|s| !s.is_empty())
            || layout.merge.is_some()
            || !layout.settings.is_empty())
    {
        return Err(CliError::Usage(
            "--partition-by/--sort-by/--merge/--set apply with --create or `neve create` \
             (an existing table's settings change with `neve alter TABLE set KEY=VALUE`)"
                .into(),
        ));
    }
    let delimiter = match a.delimiter.as_str() {
        "\\t" | "tab" => b'\t',
        d if d.len() == 1 => d.as_bytes()[0],
        d => {
            return Err(CliError::Usage(format!(
                "--delimiter must be one character, got '{d}'"
            )))
        }
    };
    if a.inputs.iter().filter(|i| *i == "-").count() > 1 {
        return Err(CliError::Usage("stdin (`-`) can be given once".into()));
    }
    let epoch_unit = a
        .epoch_unit
        .as_deref()
        .map(str::parse)
        .transpose()
        .map_err(CliError::Usage)?;
    if a.create {
        let opts = super::create_options(&a.layout, false)?;
        // A missing input is found before the table is made. (A bad value deep in an input
        // is found only while inserting; the table is created by then, and stays, empty.)
        for input in a.inputs.iter().filter(|i| *i != "-" && !i.contains("://")) {
            if let Err(source) = std::fs::metadata(input) {
                return Err(neve_core::Error::InputUnreadable {
                    input: input.clone(),
                    source,
                }
                .into());
            }
        }
        match table.create(opts.clone()).await {
            Ok(_) => {}
            Err(neve_core::Error::TableExists { .. }) => same_layout(&table, &a, &opts).await?,
            Err(e) => return Err(e.into()),
        }
    }
    let opts = InsertOptions {
        read: ReadOptions {
            format: a.format.map(|f| match f {
                FormatArg::Parquet => InputFormat::Parquet,
                FormatArg::Csv => InputFormat::Csv,
                FormatArg::Ndjson => InputFormat::Ndjson,
                FormatArg::Json => InputFormat::Json,
                FormatArg::Arrow => InputFormat::Arrow,
            }),
            infer_rows: a.infer_rows.max(1),
            csv_delimiter: delimiter,
            csv_header: !a.no_header,
            text: neve_core::write::text::TextOptions { epoch_unit },
            ..Default::default()
        },
        write: WriteOptions {
            chunk_rows: a.chunk_rows.max(1),
            ..Default::default()
        },
        ..Default::default()
    };
    let started = Instant::now();
    let report = with_bar("inserting", |bar| table.insert_files(&a.inputs, &opts, bar)).await?;
    let secs = started.elapsed().as_secs_f64();
    if a.json {
        println!(
            "{}",
            serde_json::to_string(&report).expect("report serializes")
        );
        return Ok(());
    }
    match report.version {
        None => println!("no rows in the input; nothing committed"),
        Some(v) => println!(
            "inserted {} rows into {} files ({}) across {} partitions as version {v} in {secs:.2}s ({} rows/s){}",
            count(report.rows),
            report.files,
            bytes(report.bytes),
            report.partitions,
            count((report.rows as f64 / secs.max(1e-9)) as u64),
            if report.schema_changed { "; schema evolved" } else { "" }
        ),
    }
    Ok(())
}
