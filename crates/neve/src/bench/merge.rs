//! `neve bench merge`: load the taxi table in small inserts (many small files), then merge
//! and GC; print merge throughput (MB/s of output, per core), files before/after, wall time,
//! peak memory of the merge process, and the six seed queries before and after.
//!
//! The merge runs as a child `neve merge` process, so its peak memory (VmHWM) is its own.

use std::time::{Duration, Instant};

use neve_core::Table;
use serde_json::{json, Value};

use super::ingest::remove_table;
use super::query::neve_seed_queries;
use super::{median, taxi};
use crate::cli::BenchMergeArgs;
use crate::error::{CliError, Result};
use crate::output::{bytes, count};

pub async fn run(a: BenchMergeArgs) -> Result<()> {
    let address = format!("{}/taxi-merge", a.target.trim_end_matches('/'));
    remove_table(&address).await?;
    let table = Table::at(&address)?;
    table.create(super::taxi_layout()).await?;

    // Load in small inserts, like a stream of micro-batches.
    let started = Instant::now();
    let inserts = super::load_taxi(&table, a.rows, a.insert_rows, a.seed).await?;
    let before = table.snapshot().await?;
    eprintln!(
        "loaded {} rows in {inserts} inserts: {} files, {} ({:.1}s)",
        count(before.rows()),
        before.files.len(),
        bytes(before.bytes()),
        started.elapsed().as_secs_f64()
    );

    eprintln!("seed queries before the merge:");
    let q_before = neve_seed_queries(&address, a.runs).await?;

    // Plan time (what every merge pays first), median of a few.
    let mut plan_s = Vec::new();
    for _ in 0..5 {
        let t = Table::at(&address)?;
        let s = Instant::now();
        t.plan_merge(&Default::default()).await?;
        plan_s.push(s.elapsed().as_secs_f64());
    }

    let (merge, peak_kb) = run_child(&["merge", &address, "--json"]).await?;
    let after = table.snapshot().await?;
    let (gc, _) = run_child(&[
        "gc",
        &address,
        "--grace",
        "0s",
        "--retention",
        "0s",
        "--json",
    ])
    .await?;
    eprintln!("seed queries after the merge:");
    let q_after = neve_seed_queries(&address, a.runs).await?;

    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let secs = merge["elapsed_ms"].as_f64().unwrap_or(f64::NAN) / 1000.0;
    let out_mb = merge["bytes_out"].as_f64().unwrap_or(0.0) / 1e6;
    let result = json!({
        "target": a.target, "rows": before.rows(), "inserts": inserts,
        "files_before": before.files.len(), "files_after": after.files.len(),
        "bytes_before": before.bytes(), "bytes_after": after.bytes(),
        "merge_s": secs, "merge_output_mb_s": out_mb / secs,
        "merge_output_mb_s_per_core": out_mb / secs / cores as f64, "cores": cores,
        "merge_peak_rss_mb": peak_kb as f64 / 1024.0,
        "plan_median_ms": median(plan_s) * 1000.0,
        "gc_deleted_files": gc["tombstones_deleted"],
        "queries_before": q_before, "queries_after": q_after,
    });
    let mut result = result;
    if !a.python.is_empty() {
        let delta = run_delta(&a).await?;
        let d_secs = delta["compact_s"].as_f64().unwrap_or(f64::NAN);
        let d_mb = delta["bytes_out"].as_f64().unwrap_or(f64::NAN) / 1e6;
        result["delta_compact_s"] = d_secs.into();
        result["delta_output_mb_s"] = (d_mb / d_secs).into();
        result["delta_files_before"] = delta["files_before"].clone();
        result["delta_files_after_added"] = delta["files_added"].clone();
        result["delta_over_neve"] = (d_secs / secs).into();
    }
    if a.json {
        println!("{result}");
    } else {
        print_result(&result);
    }
    if !a.keep {
        remove_table(&address).await?;
    }
    Ok(())
}

fn print_result(r: &Value) {
    let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
    println!(
        "merge of {} rows loaded in {} inserts into {}",
        count(r["rows"].as_u64().unwrap_or(0)),
        r["inserts"],
        r["target"].as_str().unwrap_or_default()
    );
    println!(
        "  files {} -> {}, bytes {} -> {}",
        r["files_before"],
        r["files_after"],
        bytes(r["bytes_before"].as_u64().unwrap_or(0)),
        bytes(r["bytes_after"].as_u64().unwrap_or(0))
    );
    println!(
        "  merge {:.2}s, {:.1} MB/s of output, {:.1} MB/s per core ({} cores), peak memory {:.0} MB, plan {:.1} ms",
        f("merge_s"),
        f("merge_output_mb_s"),
        f("merge_output_mb_s_per_core"),
        r["cores"],
        f("merge_peak_rss_mb"),
        f("plan_median_ms")
    );
    println!("  gc deleted {} merged-away files", r["gc_deleted_files"]);
    if r["delta_compact_s"].is_number() {
        println!(
            "  delta-rs optimize.compact() on the same inserts: {:.2}s, {:.1} MB/s of output, {} files -> {} added; delta-rs time / neve time = {:.2}x (delta-rs does not sort)",
            f("delta_compact_s"),
            f("delta_output_mb_s"),
            r["delta_files_before"],
            r["delta_files_after_added"],
            f("delta_over_neve")
        );
    }
    println!(
        "{:<26} {:>12} {:>12} {:>12} {:>12}",
        "query", "before ms", "before read", "after ms", "after read"
    );
    let empty = vec![];
    let before = r["queries_before"].as_array().unwrap_or(&empty);
    let after = r["queries_after"].as_array().unwrap_or(&empty);
    for (b, a) in before.iter().zip(after) {
        println!(
            "{:<26} {:>12.1} {:>12} {:>12.1} {:>12}",
            b["query"].as_str().unwrap_or_default(),
            b["neve_median_s"].as_f64().unwrap_or(f64::NAN) * 1000.0,
            bytes(b["neve_bytes_read"].as_u64().unwrap_or(0)),
            a["neve_median_s"].as_f64().unwrap_or(f64::NAN) * 1000.0,
            bytes(a["neve_bytes_read"].as_u64().unwrap_or(0)),
        );
    }
}

const DELTA_SCRIPT: &str = include_str!("../../../../scripts/bench_merge_delta.py");

/// delta-rs on the same rows: the same generator and seed, appended in the same inserts, then
/// compacted; only the compaction is compared.
async fn run_delta(a: &BenchMergeArgs) -> Result<Value> {
    let dir = tempfile::tempdir()?;
    let ipc = dir.path().join("taxi.arrow");
    {
        let f = std::fs::File::create(&ipc)?;
        let mut w = arrow::ipc::writer::FileWriter::try_new(f, &taxi::schema())
            .map_err(|e| CliError::Core(e.into()))?;
        let mut gen = taxi::TaxiGenerator::new(a.seed);
        let mut left = a.rows;
        while left > 0 {
            let n = left.min(a.insert_rows.max(1));
            for b in gen.batches(n, 65_536) {
                w.write(&b).map_err(|e| CliError::Core(e.into()))?;
            }
            left -= n;
        }
        w.finish().map_err(|e| CliError::Core(e.into()))?;
    }
    let script = dir.path().join("bench_merge_delta.py");
    std::fs::write(&script, DELTA_SCRIPT)?;
    let target = format!("{}/delta-merge", a.target.trim_end_matches('/'));
    remove_table(&target).await?;
    let target_uri = if target.starts_with("s3://") {
        target.clone()
    } else {
        std::path::absolute(&target)?.display().to_string()
    };
    let (input, rows) = (ipc.display().to_string(), a.insert_rows.to_string());
    let v = super::run_python_peer(
        &a.python,
        "delta-rs",
        &script,
        &[
            "--input",
            &input,
            "--target",
            &target_uri,
            "--insert-rows",
            &rows,
        ],
    )
    .await?;
    eprintln!("  delta-rs: {v}");
    remove_table(&target).await?;
    Ok(v)
}

/// Run this neve binary with `args`, watching its peak resident memory (VmHWM, KiB).
async fn run_child(args: &[&str]) -> Result<(Value, u64)> {
    let exe = std::env::current_exe()?;
    let child = tokio::process::Command::new(exe)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let pid = child.id().unwrap_or(0);
    let watch = tokio::spawn(async move {
        let mut peak = 0u64;
        loop {
            let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
                return peak;
            };
            if let Some(kb) = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            {
                peak = peak.max(kb);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let out = child.wait_with_output().await?;
    // The watcher stops once the reaped child's /proc entry is gone.
    let peak = watch.await.unwrap_or(0);
    if !out.status.success() {
        return Err(CliError::PeerFailed {
            peer: format!("neve {}", args[0]),
            reason: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    let v = serde_json::from_slice(&out.stdout).map_err(|e| CliError::PeerFailed {
        peer: format!("neve {}", args[0]),
        reason: e.to_string(),
    })?;
    Ok((v, peak))
}
