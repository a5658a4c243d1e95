//! `neve bench query`: the six seed queries over a taxi table through neve's engine, and in
//! the same run through DuckDB and chdb over the same Parquet files (a glob), with medians,
//! ratios and the bytes neve read from storage.

use std::time::Instant;

use neve_core::{QueryEngine, Table};
use serde_json::{json, Value};

use super::median;
use crate::cli::BenchQueryArgs;
use crate::error::Result;
use crate::output::count;

pub const SEED_QUERIES: &str = include_str!("../../../../bench/seed_queries.json");
const PEER_SCRIPT: &str = include_str!("../../../../scripts/bench_query_peers.py");

pub async fn run(a: BenchQueryArgs) -> Result<()> {
    let table = Table::at(&a.table)?;
    match table.snapshot().await {
        Ok(s) => eprintln!(
            "using {} (version {}, {} rows, {} files)",
            a.table,
            s.version,
            count(s.rows()),
            s.files.len()
        ),
        Err(neve_core::Error::TableNotFound { .. }) => {
            eprintln!(
                "creating {} with {} generated taxi rows",
                a.table,
                count(a.rows as u64)
            );
            table.create(super::taxi_layout()).await?;
            super::load_taxi(&table, a.rows, 2_000_000, a.seed).await?;
        }
        Err(e) => return Err(e.into()),
    }

    let mut results = neve_seed_queries(&a.table, a.runs).await?;

    if !a.python.is_empty() {
        let peers = run_peers(&a).await?;
        for r in &mut results {
            let name = r["query"].as_str().unwrap_or_default().to_string();
            for peer in ["duckdb", "chdb"] {
                if let Some(runs) = peers[peer][&name].as_array() {
                    let runs: Vec<f64> = runs.iter().filter_map(Value::as_f64).collect();
                    let m = median(runs.clone());
                    r[format!("{peer}_median_s")] = m.into();
                    r[format!("{peer}_runs_s")] = runs.into();
                    r[format!("{peer}_over_neve")] =
                        (m / r["neve_median_s"].as_f64().unwrap_or(f64::NAN)).into();
                }
            }
        }
    }

    if a.json {
        for r in &results {
            println!("{r}");
        }
        return Ok(());
    }
    println!(
        "seed queries over {} (medians of {} runs; ratio = peer time / neve time, above 1 means neve is faster)",
        a.table, a.runs
    );
    println!(
        "{:<26} {:>10} {:>12} {:>10} {:>8} {:>10} {:>8}",
        "query", "neve ms", "neve read", "duckdb ms", "ratio", "chdb ms", "ratio"
    );
    let ms = |v: &Value| {
        v.as_f64()
            .map(|s| format!("{:.1}", s * 1000.0))
            .unwrap_or_else(|| "-".into())
    };
    let ratio = |v: &Value| {
        v.as_f64()
            .map(|x| format!("{x:.2}x"))
            .unwrap_or_else(|| "-".into())
    };
    for r in &results {
        println!(
            "{:<26} {:>10} {:>12} {:>10} {:>8} {:>10} {:>8}",
            r["query"].as_str().unwrap_or_default(),
            ms(&r["neve_median_s"]),
            humansize::format_size(
                r["neve_bytes_read"].as_u64().unwrap_or(0),
                humansize::DECIMAL
            ),
            ms(&r["duckdb_median_s"]),
            ratio(&r["duckdb_over_neve"]),
            ms(&r["chdb_median_s"]),
            ratio(&r["chdb_over_neve"]),
        );
    }
    Ok(())
}

/// The six seed queries through neve, `runs` times each, as `neve sql` runs them (open the
/// table, plan, run): one JSON object per query with the median, the runs and bytes read.
pub async fn neve_seed_queries(address: &str, runs: usize) -> Result<Vec<Value>> {
    let queries: Value = serde_json::from_str(SEED_QUERIES).expect("valid seed_queries.json");
    let queries = queries["queries"].as_array().expect("queries").clone();
    let mut results = Vec::new();
    for q in &queries {
        let name = q["name"].as_str().unwrap_or_default().to_string();
        let sql = q["neve"]
            .as_str()
            .unwrap_or_default()
            .replace("{table}", "taxi");
        let mut secs = Vec::new();
        let mut bytes = 0;
        let mut rows = 0;
        for _ in 0..runs.max(1) {
            let started = Instant::now();
            let mut engine = QueryEngine::new();
            let session = started.elapsed();
            engine.register("taxi", address, None).await?;
            let opened = started.elapsed();
            let batches = engine.collect(&sql).await?;
            secs.push(started.elapsed().as_secs_f64());
            tracing::debug!(
                query = %name,
                session_ms = session.as_secs_f64() * 1e3,
                open_ms = (opened - session).as_secs_f64() * 1e3,
                run_ms = (started.elapsed() - opened).as_secs_f64() * 1e3,
                "seed query timings"
            );
            bytes = engine.reads().bytes();
            rows = batches.iter().map(|b| b.num_rows()).sum::<usize>();
        }
        eprintln!("  neve {name}: {rows} rows, runs {secs:.3?}");
        results.push(json!({
            "query": name, "neve_median_s": median(secs.clone()), "neve_runs_s": secs,
            "neve_bytes_read": bytes, "rows": rows,
        }));
    }
    Ok(results)
}

async fn run_peers(a: &BenchQueryArgs) -> Result<Value> {
    let dir = tempfile::tempdir()?;
    let script = dir.path().join("bench_query_peers.py");
    let queries = dir.path().join("seed_queries.json");
    std::fs::write(&script, PEER_SCRIPT)?;
    std::fs::write(&queries, SEED_QUERIES)?;
    let data = if a.table.starts_with("s3://") {
        a.table.clone()
    } else {
        std::path::absolute(a.table.trim_start_matches("file://"))?
            .display()
            .to_string()
    };
    let queries = queries.display().to_string();
    let runs = a.runs.to_string();
    super::run_python_peer(
        &a.python,
        "duckdb/chdb",
        &script,
        &["--queries", &queries, "--data", &data, "--runs", &runs],
    )
    .await
}
