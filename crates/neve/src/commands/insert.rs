//! `neve insert`.

use std::time::Instant;

use neve_core::write::input::{InputFormat, ReadOptions};
use neve_core::write::WriteOptions;
use neve_core::{InsertOptions, Table};

use crate::cli::{FormatArg, InsertArgs};
use crate::error::{CliError, Result};
use crate::output::{bytes, count};
use crate::progress::with_bar;

pub async fn run(a: InsertArgs) -> Result<()> {
    let table = Table::at(&a.table)?;
    if a.create {
        let opts = super::create_options(&a.layout, false)?;
        match table.create(opts).await {
            Ok(_) | Err(neve_core::Error::TableExists { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    } else if !a.layout.partition_by.is_empty() || a.layout.sort_by.iter().any(|s| !s.is_empty()) {
        return Err(CliError::Usage(
            "--partition-by/--sort-by apply with --create or `neve create`".into(),
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
            text: neve_core::write::text::TextOptions {
                epoch_unit: a
                    .epoch_unit
                    .as_deref()
                    .map(str::parse)
                    .transpose()
                    .map_err(CliError::Usage)?,
            },
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
