//! `neve bench iceberg`: what Iceberg metadata costs. Per commit: inserts into two tables of
//! the same layout, one writing Iceberg metadata with each commit and one not, alternating,
//! with the PUTs and bytes the metadata added. After many commits: a full sync's time and an
//! insert's time with and without the metadata. And the read half (bench/iceberg.py): the
//! seed queries through Iceberg against Parquet globs and `neve sql`.

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use futures::TryStreamExt;
use neve_core::iceberg::SyncOptions;
use neve_core::log::TableSettings;
use neve_core::write::NoProgress;
use neve_core::{CreateOptions, InsertOptions, Table, TableBuilder, TableLocation};
use object_store::ObjectStoreExt;
use serde_json::json;

use super::{load_taxi, median, taxi, taxi_layout};
use crate::cli::BenchIcebergArgs;
use crate::error::{CliError, Result};

const READ_SCRIPT: &str = include_str!("../../../../bench/iceberg.py");
const CLUSTER_SCRIPT: &str = include_str!("../../../../bench/spark_cluster.py");
const QUERIES: &str = include_str!("../../../../bench/seed_queries.json");

pub async fn run(a: BenchIcebergArgs) -> Result<()> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    let root = format!("{}/iceberg-{stamp}", a.target.trim_end_matches('/'));
    for rows in a.rows.split(',').filter(|s| !s.trim().is_empty()) {
        let rows: usize = rows
            .trim()
            .parse()
            .map_err(|_| CliError::Usage(format!("--rows: '{rows}' is not a number")))?;
        commit_cost(
            &root,
            rows,
            a.inserts,
            a.iceberg_metrics.as_deref(),
            a.merge.as_deref(),
            a.background,
        )
        .await?;
    }
    if a.commits > 0 {
        at_many_commits(&root, a.commits, a.runs).await?;
    }
    if let Some(python) = &a.python {
        read_half(&a, python).await?;
    }
    Ok(())
}

fn with_iceberg(opts: CreateOptions) -> CreateOptions {
    CreateOptions {
        settings: TableSettings {
            iceberg: true,
            ..opts.settings
        },
        ..opts
    }
}

/// Objects under `metadata/` and their bytes.
async fn metadata_objects(loc: &TableLocation) -> Result<(u64, u64)> {
    let list: Vec<_> = loc
        .store
        .list(Some(&loc.child("metadata")))
        .try_collect()
        .await
        .map_err(neve_core::Error::from)?;
    Ok((list.len() as u64, list.iter().map(|m| m.size).sum()))
}

async fn timed_insert(table: &Table, schema: SchemaRef, batches: Vec<RecordBatch>) -> Result<f64> {
    let t = Instant::now();
    table
        .insert_batches(
            schema,
            batches,
            &InsertOptions::default(),
            Arc::new(NoProgress),
        )
        .await?;
    Ok(t.elapsed().as_secs_f64())
}

/// An insert's wall time, and the process's CPU time over it (both seconds).
async fn timed_insert_cpu(
    table: &Table,
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
) -> Result<(f64, f64)> {
    // Its CPU beside its wall time says how much of the cores the insert left idle: room the
    // metadata's work could take without adding wall time.
    let c = super::phases::process_cpu_s();
    let wall = timed_insert(table, schema, batches).await?;
    Ok((wall, super::phases::process_cpu_s() - c))
}

/// Inserts of `rows` taxi rows into a table with and one without Iceberg metadata, in turns.
async fn commit_cost(
    root: &str,
    rows: usize,
    inserts: usize,
    metrics: Option<&str>,
    merge: Option<&str>,
    background: bool,
) -> Result<()> {
    let mut base = taxi_layout();
    if let Some(spec) = merge {
        let spec: neve_core::merge::MergeSpec = spec.parse()?;
        let mut sort: Vec<String> = spec.key().to_vec();
        if let neve_core::merge::MergeSpec::Replace {
            version: Some(v), ..
        } = &spec
        {
            sort.push(v.clone());
        }
        base.sort_by = sort;
        base.merge = Some(spec);
    }
    let plain = Table::at(&format!("{root}/commit-{rows}/plain"))?;
    plain.create(base.clone()).await?;
    let ice = neve_core::TableBuilder::new(TableLocation::parse(&format!(
        "{root}/commit-{rows}/iceberg"
    ))?)
    .with_iceberg_in_background(background)
    .build();
    let mut layout = with_iceberg(base);
    if let Some(m) = metrics {
        layout.settings.set("iceberg_metrics", m)?;
    }
    ice.create(layout).await?;
    let (files_before, bytes_before) = metadata_objects(ice.location()).await?;
    let mut gen = taxi::TaxiGenerator::new(7);
    let (mut plain_s, mut ice_s) = (Vec::new(), Vec::new());
    let (mut plain_cpu, mut ice_cpu) = (Vec::new(), Vec::new());
    // With `background`: from each insert's answer until its metadata is written.
    let mut lag_s = Vec::new();
    let settle = async |lag_s: &mut Vec<f64>| {
        let t = Instant::now();
        ice.iceberg_settled().await;
        if background {
            lag_s.push(t.elapsed().as_secs_f64());
        }
    };
    for i in 0..inserts {
        let batches = gen.batches(rows, 65_536);
        // Who goes first alternates, so neither always gets the warmer cache.
        // A background sync is waited for before the next turn, so the plain insert after
        // it is not slowed by it (the stream below measures that contention).
        let (without, with) = if i % 2 == 0 {
            let without = timed_insert_cpu(&plain, taxi::schema(), batches.clone()).await?;
            let with = timed_insert_cpu(&ice, taxi::schema(), batches).await?;
            settle(&mut lag_s).await;
            (without, with)
        } else {
            let with = timed_insert_cpu(&ice, taxi::schema(), batches.clone()).await?;
            settle(&mut lag_s).await;
            (
                timed_insert_cpu(&plain, taxi::schema(), batches).await?,
                with,
            )
        };
        plain_s.push(without.0);
        plain_cpu.push(without.1);
        ice_s.push(with.0);
        ice_cpu.push(with.1);
    }
    let (files_after, bytes_after) = metadata_objects(ice.location()).await?;
    let stream = if background {
        Some(stream_cost(&plain, &ice, &mut gen, rows, inserts).await?)
    } else {
        None
    };
    // Every sync also rewrites `version-hint.text` (a PUT of a few bytes).
    let hint = 4;
    let n = inserts.max(1) as f64;
    let (p, i) = (median(plain_s.clone()), median(ice_s.clone()));
    let line = json!({
        "bench": "iceberg-commit", "table": root, "rows_per_insert": rows, "inserts": inserts,
        "iceberg_metrics": metrics, "merge": merge,
        "plain_insert_median_ms": p * 1e3,
        "iceberg_insert_median_ms": i * 1e3,
        "added_ms_per_commit": (i - p) * 1e3,
        "added_fraction": i / p - 1.0,
        "plain_insert_cpu_median_ms": median(plain_cpu) * 1e3,
        "iceberg_insert_cpu_median_ms": median(ice_cpu) * 1e3,
        "puts_per_commit": (files_after - files_before) as f64 / n + 1.0,
        "bytes_per_commit": (bytes_after - bytes_before) as f64 / n + hint as f64,
        "plain_runs_ms": plain_s.iter().map(|s| s * 1e3).collect::<Vec<_>>(),
        "iceberg_runs_ms": ice_s.iter().map(|s| s * 1e3).collect::<Vec<_>>(),
        "background": background,
        "lag_median_ms": (!lag_s.is_empty()).then(|| median(lag_s.clone()) * 1e3),
        "lag_max_ms": lag_s.iter().copied().reduce(f64::max).map(|s| s * 1e3),
        "stream_plain_s": stream.map(|s| s.0),
        "stream_iceberg_s": stream.map(|s| s.1),
        "stream_added_fraction": stream.map(|s| s.1 / s.0 - 1.0),
    });
    eprintln!(
        "commit of {rows} rows: plain {:.1} ms, with Iceberg {:.1} ms (+{:.1}%), {:.1} PUTs and {:.0} bytes more",
        p * 1e3,
        i * 1e3,
        (i / p - 1.0) * 100.0,
        line["puts_per_commit"].as_f64().unwrap_or_default(),
        line["bytes_per_commit"].as_f64().unwrap_or_default()
    );
    if let (Some(lag), Some((sp, si))) = (line["lag_median_ms"].as_f64(), stream) {
        eprintln!(
            "  metadata written {lag:.1} ms after the answer (median); {inserts} inserts back to back: plain {sp:.2} s, with Iceberg {si:.2} s (+{:.1}%)",
            (si / sp - 1.0) * 100.0
        );
    }
    println!("{line}");
    Ok(())
}

/// `inserts` inserts in a row into each table (the Iceberg table's metadata written in the
/// background, the last waited for): seconds for each stream. What a server answering a
/// stream of inserts pays for the metadata it writes between them.
async fn stream_cost(
    plain: &Table,
    ice: &Table,
    gen: &mut taxi::TaxiGenerator,
    rows: usize,
    inserts: usize,
) -> Result<(f64, f64)> {
    let inputs: Vec<Vec<RecordBatch>> = (0..inserts).map(|_| gen.batches(rows, 65_536)).collect();
    let t = Instant::now();
    for b in inputs.clone() {
        timed_insert(plain, taxi::schema(), b).await?;
    }
    let plain_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for b in inputs {
        timed_insert(ice, taxi::schema(), b).await?;
    }
    ice.iceberg_settled().await;
    Ok((plain_s, t.elapsed().as_secs_f64()))
}

fn one_row(schema: &SchemaRef, n: i64) -> Result<RecordBatch> {
    RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(vec![n]))])
        .map_err(|e| CliError::Core(e.into()))
}

/// A table of `commits` one-row commits (metadata not written while it is built); then a
/// full sync, and inserts with and without the metadata, timed.
async fn at_many_commits(root: &str, commits: u64, runs: usize) -> Result<()> {
    let address = format!("{root}/commits-{commits}");
    let location = TableLocation::parse(&address)?;
    let quiet = Arc::new(
        TableBuilder::new(location.clone())
            .with_iceberg_after_commit(false)
            .build(),
    );
    let with = TableBuilder::new(location.clone()).build();
    let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, true)]));
    quiet.create(with_iceberg(CreateOptions::default())).await?;
    super::log::one_row_commits(quiet.clone(), commits, 4).await?;

    let t = Instant::now();
    let full = quiet
        .iceberg_sync(&SyncOptions {
            full: true,
            ..Default::default()
        })
        .await?;
    let full_s = t.elapsed().as_secs_f64();
    let json_bytes = location
        .store
        .head(&location.child(&format!(
            "metadata/v{}.metadata.json",
            full.metadata_version
        )))
        .await
        .map_err(neve_core::Error::from)?
        .size;
    let (mut with_s, mut without_s, mut sync_s) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs {
        // With the metadata written by the commit; then without, and the sync on its own.
        with_s
            .push(timed_insert(&with, schema.clone(), vec![one_row(&schema, -(i as i64))?]).await?);
        without_s.push(
            timed_insert(&quiet, schema.clone(), vec![one_row(&schema, -(i as i64))?]).await?,
        );
        let t = Instant::now();
        quiet.iceberg_sync(&SyncOptions::default()).await?;
        sync_s.push(t.elapsed().as_secs_f64());
    }
    let (w, wo) = (median(with_s.clone()), median(without_s.clone()));
    let line = json!({
        "bench": "iceberg-at-commits", "table": address, "commits": commits,
        "full_sync_s": full_s, "snapshots": full.snapshots,
        "files_written": full.files_written, "bytes_written": full.bytes_written,
        "metadata_json_bytes": json_bytes,
        "insert_with_iceberg_median_ms": w * 1e3,
        "insert_without_median_ms": wo * 1e3,
        "added_fraction": w / wo - 1.0,
        "incremental_sync_median_ms": median(sync_s.clone()) * 1e3,
        "runs": runs,
    });
    eprintln!(
        "at {commits} commits: full sync {full_s:.2} s ({} snapshots, metadata JSON {json_bytes} bytes); one-row insert {:.1} ms with Iceberg, {:.1} ms without",
        full.snapshots,
        w * 1e3,
        wo * 1e3
    );
    println!("{line}");
    Ok(())
}

/// The seed queries through Iceberg, through globs and through `neve sql` (bench/iceberg.py).
async fn read_half(a: &BenchIcebergArgs, python: &str) -> Result<()> {
    let (Some(jar), Some(table)) = (&a.jar, &a.read_table) else {
        return Err(CliError::Usage(
            "the read half needs --jar (Iceberg's Spark runtime) and --read-table (a local folder)"
                .into(),
        ));
    };
    let t = Table::at(table)?;
    if t.snapshot().await.is_err() {
        t.create(with_iceberg(taxi_layout())).await?;
        load_taxi(&t, a.read_rows, 1_000_000, 1).await?;
    }
    let dir = tempfile::tempdir()?;
    for (name, text) in [
        ("iceberg.py", READ_SCRIPT),
        ("spark_cluster.py", CLUSTER_SCRIPT),
        ("seed_queries.json", QUERIES),
        ("ports.py", super::PORTS_MODULE),
    ] {
        std::fs::write(dir.path().join(name), text)?;
    }
    let me = std::env::current_exe()?.display().to_string();
    let queries = dir.path().join("seed_queries.json").display().to_string();
    let runs = a.read_runs.to_string();
    let out = super::run_python_peer(
        python,
        "bench/iceberg.py",
        &dir.path().join("iceberg.py"),
        &[
            "--neve-bin",
            &me,
            "--table",
            table,
            "--queries",
            &queries,
            "--jar",
            jar,
            "--python",
            python,
            "--runs",
            &runs,
        ],
    )
    .await?;
    println!("{out}");
    Ok(())
}
