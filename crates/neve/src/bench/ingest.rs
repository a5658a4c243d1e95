//! `neve bench ingest`: month-partitioned, sorted loads of generated taxi rows, side by side
//! with delta-rs `write_deltalake` on the same Arrow data in the same run.

use std::sync::Arc;
use std::time::Instant;

use futures::TryStreamExt;
use neve_core::storage::StoreKind;
use neve_core::write::NoProgress;
use neve_core::{InsertOptions, Table, TableLocation};
use object_store::ObjectStoreExt;

use super::{median, taxi};
use crate::cli::BenchIngestArgs;
use crate::error::{CliError, Result};
use crate::output::count;

const DELTA_SCRIPT: &str = include_str!("../../../../scripts/bench_delta.py");

pub async fn run(a: BenchIngestArgs) -> Result<()> {
    let base = a.target.trim_end_matches('/').to_string();
    let stamp = chrono::Utc::now().format("%Y%m%d%H%M%S");
    for &rows in &a.rows {
        let t = Instant::now();
        let batches = taxi::TaxiGenerator::new(a.seed).batches(rows, 65_536);
        let arrow_bytes: usize = batches.iter().map(|b| b.get_array_memory_size()).sum();
        eprintln!(
            "generated {} rows ({} MB of Arrow) in {:.1}s",
            count(rows as u64),
            arrow_bytes / 1_000_000,
            t.elapsed().as_secs_f64()
        );
        let mut secs = Vec::new();
        let mut phases = Vec::new();
        let mut written = 0u64;
        let mut files = 0u64;
        for run in 0..a.runs {
            let address = format!("{base}/neve-{rows}-{stamp}-{run}");
            let table = Table::at(&address)?;
            table.create(super::taxi_layout()).await?;
            let mark = super::phases::Mark::now();
            let started = Instant::now();
            let report = table
                .insert_batches(
                    taxi::schema(),
                    batches.clone(),
                    &InsertOptions::default(),
                    Arc::new(NoProgress),
                )
                .await?;
            let s = started.elapsed().as_secs_f64();
            let p = mark.phases();
            eprintln!(
                "  neve run {}: {:.2}s, {} files; CPU {:.2}s: splitting batches (conform, partitions) {:.2}s, grouping them by partition {:.2}s, sorting parts {:.2}s, encoding them {:.2}s, their statistics {:.2}s",
                run + 1, s, report.files, p.cpu_s, p.split_s, p.group_s, p.sort_s, p.encode_s, p.stats_s
            );
            secs.push(s);
            phases.push(p);
            written = report.bytes;
            files = report.files;
            remove_table(&address).await?;
        }
        let neve_s = median(secs.clone());
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let encode_s = median(phases.iter().map(|p| p.encode_s).collect());
        let mut result = serde_json::json!({
            "bench": "ingest", "target": base, "rows": rows, "runs": a.runs,
            "neve_median_s": neve_s, "neve_rows_per_s": rows as f64 / neve_s,
            "neve_mb_per_s_written": written as f64 / 1e6 / neve_s,
            "neve_mb_per_s_arrow": arrow_bytes as f64 / 1e6 / neve_s,
            "neve_files": files, "neve_bytes": written, "neve_runs_s": secs,
            "neve_cpu_runs_s": phases.iter().map(|p| p.cpu_s).collect::<Vec<_>>(),
            "neve_split_runs_s": phases.iter().map(|p| p.split_s).collect::<Vec<_>>(),
            "neve_group_runs_s": phases.iter().map(|p| p.group_s).collect::<Vec<_>>(),
            "neve_sort_runs_s": phases.iter().map(|p| p.sort_s).collect::<Vec<_>>(),
            "neve_stats_runs_s": phases.iter().map(|p| p.stats_s).collect::<Vec<_>>(),
            "neve_encode_runs_s": phases.iter().map(|p| p.encode_s).collect::<Vec<_>>(),
            "cores": cores,
            // No insert of these rows can end sooner, however fast the rest became.
            "encode_floor_s": encode_s / cores as f64,
        });
        if !a.python.is_empty() {
            let (delta_s, delta_runs) =
                run_delta(&a, &base, rows, &batches, &stamp.to_string()).await?;
            result["delta_median_s"] = delta_s.into();
            result["delta_rows_per_s"] = (rows as f64 / delta_s).into();
            result["delta_runs_s"] = delta_runs.into();
            result["ratio_rows_per_s"] = (delta_s / neve_s).into();
        }
        if a.json {
            println!("{result}");
        } else {
            println!(
                "ingest {} rows into {}: neve {:.2}s median of {} = {} rows/s, {:.1} MB/s written ({} files)",
                count(rows as u64), base, neve_s, a.runs, count((rows as f64 / neve_s) as u64),
                written as f64 / 1e6 / neve_s, files
            );
            println!(
                "  Parquet encoding alone {:.2} CPU-s (median): on {} cores no insert of these rows ends before {:.2}s",
                encode_s, cores, encode_s / cores as f64
            );
            if let Some(d) = result.get("delta_median_s").and_then(|v| v.as_f64()) {
                println!(
                    "  delta-rs write_deltalake {:.2}s median = {} rows/s; neve/delta-rs = {:.2}x",
                    d,
                    count((rows as f64 / d) as u64),
                    d / neve_s
                );
            }
        }
    }
    Ok(())
}

async fn run_delta(
    a: &BenchIngestArgs,
    base: &str,
    rows: usize,
    batches: &[arrow::array::RecordBatch],
    stamp: &str,
) -> Result<(f64, Vec<f64>)> {
    let target = format!("{base}/delta-{rows}-{stamp}");
    delta_peer(&a.python, &target, &taxi::schema(), batches, a.runs, &[]).await
}

/// delta-rs `write_deltalake` of `batches` into `{target}-{run}` for each run, partitioned by a
/// string derived from a timestamp (`extra`: `--ts-column`, `--ts-format`; the taxi month by
/// default); only the write is timed. The tables are removed afterwards. Returns the median
/// and each run's seconds.
pub async fn delta_peer(
    python: &str,
    target: &str,
    schema: &arrow::datatypes::SchemaRef,
    batches: &[arrow::array::RecordBatch],
    runs: usize,
    extra: &[&str],
) -> Result<(f64, Vec<f64>)> {
    let dir = tempfile::tempdir()?;
    let ipc = dir.path().join("input.arrow");
    {
        let f = std::fs::File::create(&ipc)?;
        let mut w = arrow::ipc::writer::FileWriter::try_new(f, schema)
            .map_err(|e| CliError::Core(e.into()))?;
        for b in batches {
            w.write(b).map_err(|e| CliError::Core(e.into()))?;
        }
        w.finish().map_err(|e| CliError::Core(e.into()))?;
    }
    let script = dir.path().join("bench_delta.py");
    std::fs::write(&script, DELTA_SCRIPT)?;
    let target_uri = if target.starts_with("s3://") {
        target.to_string()
    } else {
        std::path::absolute(target)?.display().to_string()
    };
    let input = ipc.display().to_string();
    let runs_arg = runs.to_string();
    let mut args = vec![
        "--input",
        &input,
        "--target",
        &target_uri,
        "--runs",
        &runs_arg,
    ];
    args.extend_from_slice(extra);
    let v = super::run_python_peer(python, "delta-rs", &script, &args).await?;
    let secs: Vec<f64> = v["runs_s"]
        .as_array()
        .map(|r| r.iter().filter_map(|x| x.as_f64()).collect())
        .unwrap_or_default();
    for (i, s) in secs.iter().enumerate() {
        eprintln!("  delta-rs run {}: {:.2}s", i + 1, s);
    }
    for run in 0..runs {
        remove_table(&format!("{target}-{run}")).await?;
    }
    Ok((median(secs.clone()), secs))
}

/// Delete a benchmark table (untimed).
pub async fn remove_table(address: &str) -> Result<()> {
    let loc = TableLocation::parse(address)?;
    match &loc.kind {
        StoreKind::Local { dir } => {
            if dir.exists() {
                std::fs::remove_dir_all(dir)?;
            }
        }
        _ => {
            let paths: Vec<_> = loc
                .store
                .list(Some(&loc.root))
                .map_ok(|m| m.location)
                .try_collect()
                .await
                .map_err(|e| CliError::Core(e.into()))?;
            for p in paths {
                loc.store
                    .delete(&p)
                    .await
                    .map_err(|e| CliError::Core(e.into()))?;
            }
        }
    }
    Ok(())
}
