//! `neve bench ...` and `neve quickstart`: commands that print figures, never tests.

mod iceberg;
mod ingest;
mod log;
mod merge;
mod nested;
pub mod phases;
mod query;
mod semantics;
mod serve;
mod stream;
pub mod taxi;

use std::sync::Arc;

use neve_core::partition::parse_spec;
use neve_core::{CreateOptions, InsertOptions, Table};

use crate::cli::{BenchCommand, BenchGenArgs, QuickstartArgs};
use crate::error::{CliError, Result};
use crate::output;

pub async fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Ingest(a) => ingest::run(a).await,
        BenchCommand::Nested(a) => nested::run(a).await,
        BenchCommand::Log(a) => log::run(a).await,
        BenchCommand::Gen(a) => gen(a),
        BenchCommand::Query(a) => query::run(a).await,
        BenchCommand::Merge(a) => merge::run(a).await,
        BenchCommand::MergeSemantics(a) => semantics::run(a).await,
        BenchCommand::Serve(a) => serve::run(a).await,
        BenchCommand::Proxy(a) => proxy(a).await,
        BenchCommand::Iceberg(a) => iceberg::run(a).await,
        BenchCommand::Stream(a) => stream::run(a).await,
        BenchCommand::StreamClient(a) => stream::client(a).await,
        BenchCommand::Relay(a) => stream::relay(a).await,
    }
}

/// The taxi table layout used by the quick start and the benchmarks.
pub fn taxi_layout() -> CreateOptions {
    CreateOptions {
        partition_by: parse_spec("month(trip_start_timestamp) as d").expect("valid spec"),
        sort_by: vec!["payment_type".into(), "trip_start_timestamp".into()],
        ..Default::default()
    }
}

pub async fn quickstart(a: QuickstartArgs) -> Result<()> {
    let address = format!("{}/taxi", a.dir.trim_end_matches('/'));
    let table = Table::at(&address)?;
    match table.create(taxi_layout()).await {
        Ok(_) => println!("created {address} partitioned by month(trip_start_timestamp) as d, sorted by payment_type, trip_start_timestamp"),
        Err(neve_core::Error::TableExists { .. }) => println!("{address} exists; adding more rows"),
        Err(e) => return Err(e.into()),
    }
    let seed = table.snapshot().await?.version;
    let batches = taxi::TaxiGenerator::new(seed).batches(a.rows, 65_536);
    let bar = Arc::new(crate::progress::Bar::new("loading taxi rows"));
    let started = std::time::Instant::now();
    let report = table
        .insert_batches(
            taxi::schema(),
            batches,
            &InsertOptions::default(),
            bar.clone(),
        )
        .await;
    bar.finish();
    let report = report?;
    println!(
        "inserted {} generated taxi rows into {} files in {:.2}s\n",
        output::count(report.rows),
        report.files,
        started.elapsed().as_secs_f64()
    );
    let s = table.snapshot().await?;
    print!("{}", output::info_text(&address, &s));
    quickstart_queries(&address).await?;
    println!(
        "\nnext: neve sql \"SELECT ...\" --table taxi={address} | neve history {address} | neve files {address} --format duckdb"
    );
    Ok(())
}

/// A few of the seed queries over the demo table, printed as tables.
async fn quickstart_queries(address: &str) -> Result<()> {
    let mut engine = neve_core::QueryEngine::new();
    engine.register("taxi", address, None).await?;
    for sql in [
        "SELECT count(*) AS trips, payment_type FROM taxi GROUP BY payment_type ORDER BY trips DESC",
        "SELECT date_trunc('month', trip_start_timestamp) AS month, count(*) AS trips FROM taxi \
         WHERE trip_start_timestamp >= '2021-01-01' AND trip_start_timestamp < '2022-01-01' \
         GROUP BY 1 ORDER BY 1",
        "SELECT extract(year FROM trip_start_timestamp) AS year, round(avg(fare), 2) AS avg_fare, \
         round(avg(tips), 2) AS avg_tips FROM taxi GROUP BY 1 ORDER BY 1",
    ] {
        let started = std::time::Instant::now();
        let batches = engine.collect(sql).await?;
        println!("\nneve sql \"{sql}\"");
        println!(
            "{}",
            arrow::util::pretty::pretty_format_batches(&batches)
                .map_err(|e| CliError::Core(e.into()))?
        );
        println!("({:.0} ms)", started.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(())
}

fn gen(a: BenchGenArgs) -> Result<()> {
    let batches = taxi::TaxiGenerator::new(a.seed).batches(a.rows, 65_536);
    let schema = taxi::schema();
    let file = std::fs::File::create(&a.output)?;
    let ext = std::path::Path::new(&a.output)
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("");
    let arrow_err = |e: arrow::error::ArrowError| CliError::Core(e.into());
    match ext {
        "parquet" => {
            let mut w = parquet::arrow::ArrowWriter::try_new(file, schema, None)
                .map_err(|e| CliError::Core(e.into()))?;
            for b in &batches {
                w.write(b).map_err(|e| CliError::Core(e.into()))?;
            }
            w.close().map_err(|e| CliError::Core(e.into()))?;
        }
        "csv" => {
            let mut w = arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(file);
            for b in &batches {
                w.write(b).map_err(arrow_err)?;
            }
        }
        "ndjson" | "jsonl" | "json" => {
            let mut w = arrow::json::LineDelimitedWriter::new(std::io::BufWriter::new(file));
            for b in &batches {
                w.write(b).map_err(arrow_err)?;
            }
            w.finish().map_err(arrow_err)?;
        }
        "arrow" | "ipc" => {
            let mut w =
                arrow::ipc::writer::FileWriter::try_new(file, &schema).map_err(arrow_err)?;
            for b in &batches {
                w.write(b).map_err(arrow_err)?;
            }
            w.finish().map_err(arrow_err)?;
        }
        other => {
            return Err(CliError::Usage(format!(
                "unknown output extension '.{other}' (parquet, csv, ndjson, arrow)"
            )))
        }
    }
    eprintln!("wrote {} rows to {}", a.rows, a.output);
    Ok(())
}

/// Load `rows` generated taxi rows (from `seed`) in inserts of `per_insert` rows; returns the
/// number of inserts.
pub async fn load_taxi(table: &Table, rows: usize, per_insert: usize, seed: u64) -> Result<usize> {
    let mut gen = taxi::TaxiGenerator::new(seed);
    let mut left = rows;
    let mut inserts = 0;
    while left > 0 {
        let n = left.min(per_insert.max(1));
        table
            .insert_batches(
                taxi::schema(),
                gen.batches(n, 65_536),
                &InsertOptions::default(),
                Arc::new(neve_core::write::NoProgress),
            )
            .await?;
        left -= n;
        inserts += 1;
    }
    settle().await;
    Ok(inserts)
}

/// After a load, let the machine write back what it buffered (the page cache, MinIO's own
/// work) before anything is timed: queries run right after writing 1.2 GB measured that
/// writeback too. The peers, which run later, would otherwise get a quieter machine.
async fn settle() {
    let _ = tokio::process::Command::new("sync").status().await;
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
}

/// Run a benchmark peer's Python script and parse the one JSON object it prints.
pub async fn run_python_peer(
    python: &str,
    peer: &str,
    script: &std::path::Path,
    args: &[&str],
) -> Result<serde_json::Value> {
    let out = tokio::process::Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .await?;
    let failed = |reason: String| CliError::PeerFailed {
        peer: peer.into(),
        reason,
    };
    if !out.status.success() {
        return Err(failed(String::from_utf8_lossy(&out.stderr).into_owned()));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| failed(format!("bad output: {e}")))
}

/// Median of measurements (seconds).
pub fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    match xs.len() {
        0 => f64::NAN,
        n if !n.is_multiple_of(2) => xs[n / 2],
        n => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

/// The driver of `neve bench proxy` (it is mostly chdb and boto3 calls).
const PROXY_SCRIPT: &str = include_str!("../../../../bench/proxy.py");
/// The benches' own module the drivers import, written beside them.
pub(crate) const PORTS_MODULE: &str = include_str!("../../../../bench/ports.py");

/// `neve bench proxy`: run the driver with this binary as the proxy; it prints its runs on
/// stderr, the table and a JSON summary on stdout.
async fn proxy(a: crate::cli::BenchProxyArgs) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let script = dir.path().join("proxy.py");
    std::fs::write(&script, PROXY_SCRIPT)?;
    std::fs::write(dir.path().join("ports.py"), PORTS_MODULE)?;
    let me = std::env::current_exe()?;
    let status = tokio::process::Command::new(&a.python)
        .arg(&script)
        .args([
            "--neve-bin",
            &me.display().to_string(),
            "--toxiproxy",
            &a.toxiproxy,
        ])
        .args([
            "--table",
            &a.table,
            "--rows",
            &a.rows.to_string(),
            "--runs",
            &a.runs.to_string(),
        ])
        .args([
            "--threads",
            &a.threads,
            "--latency-ms",
            &a.latency_ms.to_string(),
        ])
        .args(["--rate-kbs", &a.rate_kbs.to_string()])
        .status()
        .await?;
    if !status.success() {
        return Err(CliError::PeerFailed {
            peer: "bench/proxy.py".into(),
            reason: format!("exited with {status}"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The Python drivers the binary carries run from a folder of their own, where only what
    /// the bench writes beside them can be imported: a driver importing another of the repo's
    /// modules fails there (as `proxy.py` did once it imported `ports`).
    #[test]
    fn drivers_import_only_what_is_written_beside_them() {
        let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        // Each embedded driver, and the modules its bench writes beside it.
        let drivers: [(&str, &[&str]); 9] = [
            ("bench/proxy.py", &["ports"]),
            ("bench/iceberg.py", &["spark_cluster", "ports"]),
            ("bench/spark_cluster.py", &["iceberg", "ports"]),
            ("bench/semantics_chdb.py", &[]),
            ("bench/stream.py", &[]),
            ("scripts/bench_delta.py", &[]),
            ("scripts/bench_merge_delta.py", &[]),
            ("scripts/bench_query_peers.py", &[]),
            ("scripts/bench_duckdb_ndjson.py", &[]),
        ];
        for (driver, beside) in drivers {
            let text = std::fs::read_to_string(repo.join(driver)).unwrap();
            for line in text.lines().map(str::trim_start) {
                let module = line
                    .strip_prefix("from ")
                    .or_else(|| line.strip_prefix("import "))
                    .and_then(|rest| rest.split([' ', '.', ',']).next())
                    .unwrap_or("");
                let local = !module.is_empty()
                    && ["bench", "scripts"]
                        .iter()
                        .any(|d| repo.join(d).join(format!("{module}.py")).exists());
                assert!(
                    !local || beside.contains(&module),
                    "{driver} imports {module}, which is not written beside it"
                );
            }
        }
    }
}
