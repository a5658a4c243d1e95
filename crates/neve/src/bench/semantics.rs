//! `neve bench merge-semantics`: a `replace` table loaded in many inserts that update and
//! delete earlier keys; exact reads against `--raw` reads of the same files before any merge,
//! after a partial merge and after a full one; the merge's throughput against a plain merge of
//! the same rows; and chdb's ReplacingMergeTree `FINAL` on the same rows, in the same run.

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{BooleanArray, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use neve_core::merge::MergeOptions;
use neve_core::{CreateOptions, InsertOptions, QueryEngine, Table};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use super::ingest::remove_table;
use super::median;
use crate::cli::BenchSemanticsArgs;
use crate::error::Result;
use crate::output::count;

const REGIONS: [&str; 8] = ["af", "ap", "ca", "eu", "me", "sa", "us-east", "us-west"];

/// The queries, neve's SQL (chdb's is the same with `FINAL` after the table), each with its
/// floor: a raw read that decodes every column an exact read of it must (the key, version and
/// deleted flag of every row it touches), so the exact read's cost over the floor is the merge.
pub const QUERIES: [(&str, &str, &str); 3] = [
    (
        "count_sum",
        "SELECT count(*), sum(x) FROM users",
        "SELECT count(*), sum(x), sum(user_id), max(updated_at), sum(CAST(is_deleted AS INT)) FROM users",
    ),
    (
        "lookup",
        "SELECT user_id, x, region FROM users WHERE user_id = 424242",
        "SELECT user_id, x, region, updated_at, is_deleted FROM users WHERE user_id = 424242",
    ),
    (
        "by_region",
        "SELECT region, count(*), sum(x) FROM users GROUP BY region ORDER BY region",
        "SELECT region, count(*), sum(x), sum(user_id), max(updated_at), sum(CAST(is_deleted AS INT)) \
         FROM users GROUP BY region ORDER BY region",
    ),
];

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("user_id", DataType::Int64, false),
        Field::new(
            "updated_at",
            DataType::Timestamp(TimeUnit::Microsecond, None),
            false,
        ),
        Field::new("is_deleted", DataType::Boolean, false),
        Field::new("x", DataType::Int64, false),
        Field::new("region", DataType::Utf8, false),
    ]))
}

/// Insert `i` of `n`: `rows` rows, each a version of a key drawn uniformly from `keys` (so
/// most rows update an earlier key), a delete with probability `deletes`; versions grow with
/// the row number, so they never tie.
fn insert_batch(i: usize, rows: usize, keys: u64, deletes: f64, seed: u64) -> RecordBatch {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed ^ (i as u64).wrapping_mul(0x9e37_79b9));
    let base = 1_767_225_600_000_000i64 + (i * rows) as i64 * 1_000;
    let ids: Vec<i64> = (0..rows)
        .map(|_| rng.random_range(0..keys) as i64)
        .collect();
    let ts: Vec<i64> = (0..rows).map(|r| base + r as i64 * 1_000).collect();
    let del: Vec<bool> = (0..rows).map(|_| rng.random_bool(deletes)).collect();
    let x: Vec<i64> = (0..rows).map(|_| rng.random_range(0..1000)).collect();
    let region: Vec<&str> = ids.iter().map(|k| REGIONS[(*k % 8) as usize]).collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(TimestampMicrosecondArray::from(ts)),
            Arc::new(BooleanArray::from(del)),
            Arc::new(Int64Array::from(x)),
            Arc::new(StringArray::from(region)),
        ],
    )
    .expect("bench batch")
}

async fn create(address: &str, merge: bool) -> Result<Table> {
    remove_table(address).await?;
    let table = Table::at(address)?;
    table
        .create(CreateOptions {
            sort_by: vec!["user_id".into(), "updated_at".into()],
            merge: merge
                .then(|| {
                    "replace(key = [user_id], version = updated_at, deleted = is_deleted)".parse()
                })
                .transpose()?,
            ..Default::default()
        })
        .await?;
    Ok(table)
}

/// Each query `runs` times, exact and raw, each run a fresh engine that opens the table; then
/// `exact_warm`: an engine that opened the table once and ran the query once (the table
/// handle a server keeps, and the state chdb's already loaded table is in). Medians in
/// seconds, and the exact answers.
async fn time_queries(address: &str, runs: usize) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for (name, sql, floor) in QUERIES {
        let mut result = json!({ "query": name });
        for (key, raw, sql) in [
            ("exact", false, sql),
            ("raw", true, sql),
            ("floor", true, floor),
        ] {
            let mut secs = Vec::new();
            let mut answer = String::new();
            for _ in 0..runs.max(1) {
                let started = Instant::now();
                let mut engine = QueryEngine::new();
                engine.set_raw(raw);
                engine.register("users", address, None).await?;
                let batches = engine.collect(sql).await?;
                secs.push(started.elapsed().as_secs_f64());
                answer = arrow::util::pretty::pretty_format_batches(&batches)
                    .map(|t| t.to_string())
                    .unwrap_or_default();
            }
            eprintln!("  {name} {key}: runs {secs:.3?}");
            result[format!("{key}_median_s")] = json!(median(secs.clone()));
            result[format!("{key}_runs_s")] = json!(secs);
            if key == "exact" {
                result["answer"] = json!(answer);
            }
        }
        let mut engine = QueryEngine::new();
        engine.register("users", address, None).await?;
        engine.collect(sql).await?;
        let mut secs = Vec::new();
        for _ in 0..runs.max(1) {
            let started = Instant::now();
            engine.collect(sql).await?;
            secs.push(started.elapsed().as_secs_f64());
        }
        eprintln!("  {name} exact_warm: runs {secs:.3?}");
        result["exact_warm_median_s"] = json!(median(secs.clone()));
        result["exact_warm_runs_s"] = json!(secs);
        out.push(result);
    }
    Ok(out)
}

async fn merge(table: &Table, opts: &MergeOptions) -> Result<Value> {
    let started = Instant::now();
    let r = table
        .merge(opts, Arc::new(neve_core::write::NoProgress))
        .await?;
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "  merged {} files ({} rows) into {} in {secs:.2}s",
        r.files_in,
        count(r.rows),
        r.files_out
    );
    Ok(json!({
        "files_in": r.files_in, "files_out": r.files_out, "rows_in": r.rows,
        "bytes_in": r.bytes_in, "bytes_out": r.bytes_out, "seconds": secs,
        "input_mb_s": r.bytes_in as f64 / 1e6 / secs,
    }))
}

pub async fn run(a: BenchSemanticsArgs) -> Result<()> {
    let root = a.target.trim_end_matches('/');
    let address = format!("{root}/users-replace");
    let plain_address = format!("{root}/users-plain");
    let table = create(&address, true).await?;
    let plain = create(&plain_address, false).await?;
    let per_insert = a.rows / a.inserts.max(1);
    let started = Instant::now();
    for i in 0..a.inserts {
        let b = insert_batch(i, per_insert, a.keys, a.deletes, a.seed);
        for t in [&table, &plain] {
            t.insert_batches(
                schema(),
                vec![b.clone()],
                &InsertOptions::default(),
                Arc::new(neve_core::write::NoProgress),
            )
            .await?;
        }
    }
    let snap = table.snapshot().await?;
    eprintln!(
        "loaded {} rows over {} keys in {} inserts ({:.1}s)",
        count(snap.rows()),
        count(a.keys),
        a.inserts,
        started.elapsed().as_secs_f64()
    );
    if a.load_only {
        println!("{address}\n{plain_address}");
        return Ok(());
    }
    // The files in commit order, for chdb to insert as the same parts.
    let mut files: Vec<_> = snap.files.values().collect();
    files.sort_by_key(|f| f.seq);
    let urls: Vec<String> = files
        .iter()
        .map(|f| table.location().file_url(&f.path))
        .collect();

    eprintln!("unmerged:");
    let unmerged = time_queries(&address, a.runs).await?;
    eprintln!("partial merge (groups of {} files):", a.partial_group);
    let partial = merge(
        &table,
        &MergeOptions {
            min_files: 2,
            max_files_per_group: a.partial_group,
            ..Default::default()
        },
    )
    .await?;
    let after_partial = time_queries(&address, a.runs).await?;
    eprintln!("full merge:");
    let full_opts = MergeOptions {
        min_files: 2,
        max_files_per_group: usize::MAX,
        ..Default::default()
    };
    let full = merge(&table, &full_opts).await?;
    let after_full = time_queries(&address, a.runs).await?;
    eprintln!("plain merge of the same rows:");
    let plain_merge = merge(&plain, &full_opts).await?;

    let chdb = if a.python.is_empty() {
        Value::Null
    } else {
        let dir = tempfile::tempdir()?;
        let script = dir.path().join("semantics_chdb.py");
        std::fs::write(&script, include_str!("../../../../bench/semantics_chdb.py"))?;
        let list = dir.path().join("files.json");
        std::fs::write(&list, json!(urls).to_string())?;
        let runs = a.runs.to_string();
        super::run_python_peer(
            &a.python,
            "chdb",
            &script,
            &["--files", &list.display().to_string(), "--runs", &runs],
        )
        .await?
    };
    let result = json!({
        "target": a.target, "rows": snap.rows(), "keys": a.keys, "inserts": a.inserts,
        "unmerged": unmerged, "partial_merge": partial, "after_partial": after_partial,
        "full_merge": full, "after_full": after_full, "plain_merge": plain_merge, "chdb": chdb,
    });
    print_table(&result);
    println!("{result}");
    if !a.keep {
        remove_table(&address).await?;
        remove_table(&plain_address).await?;
    }
    Ok(())
}

fn print_table(r: &Value) {
    let ms = |v: &Value| format!("{:.1}", v.as_f64().unwrap_or(f64::NAN) * 1000.0);
    println!("| query | state | exact ms | raw ms | exact / raw | floor ms | floor / raw | exact warm ms | chdb FINAL ms | chdb ms | exact warm / chdb FINAL |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (state, key, chdb_key) in [
        ("unmerged", "unmerged", Some("unmerged")),
        ("partial merge", "after_partial", None),
        ("full merge", "after_full", Some("optimized")),
    ] {
        for (i, q) in r[key].as_array().into_iter().flatten().enumerate() {
            let exact = q["exact_median_s"].as_f64().unwrap_or(f64::NAN);
            let raw = q["raw_median_s"].as_f64().unwrap_or(f64::NAN);
            let floor = q["floor_median_s"].as_f64().unwrap_or(f64::NAN);
            let warm = q["exact_warm_median_s"].as_f64().unwrap_or(f64::NAN);
            let ch = chdb_key.map(|k| &r["chdb"][k][i]);
            let fin = ch
                .and_then(|c| c["final_median_s"].as_f64())
                .unwrap_or(f64::NAN);
            let plain = ch
                .and_then(|c| c["plain_median_s"].as_f64())
                .unwrap_or(f64::NAN);
            println!(
                "| {} | {state} | {} | {} | {:.2}× | {} | {:.2}× | {} | {} | {} | {:.2}× |",
                q["query"].as_str().unwrap_or_default(),
                ms(&q["exact_median_s"]),
                ms(&q["raw_median_s"]),
                exact / raw,
                ms(&q["floor_median_s"]),
                floor / raw,
                ms(&q["exact_warm_median_s"]),
                ms(&json!(fin)),
                ms(&json!(plain)),
                warm / fin
            );
        }
    }
    let f = r["full_merge"]["input_mb_s"].as_f64().unwrap_or(f64::NAN);
    let p = r["plain_merge"]["input_mb_s"].as_f64().unwrap_or(f64::NAN);
    println!(
        "\nfull merge {f:.1} MB/s of input ({:.2}s), plain merge {p:.1} MB/s ({:.2}s): {:.2}× the plain merge's throughput",
        r["full_merge"]["seconds"].as_f64().unwrap_or(f64::NAN),
        r["plain_merge"]["seconds"].as_f64().unwrap_or(f64::NAN),
        f / p
    );
}
