//! `neve bench nested`: insert rate of a nested event shape (10 top-level columns: 7 scalars,
//! a struct of 8 fields, a list of strings, a map), day-partitioned and sorted, from Arrow and
//! from NDJSON, with delta-rs `write_deltalake` of the same Arrow data and DuckDB's
//! `read_json` of the same NDJSON into partitioned Parquet in the same run.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{
    Array, ArrayRef, Decimal128Array, Int32Array, Int64Array, ListBuilder, MapBuilder, RecordBatch,
    StringArray, StringBuilder, StructArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use neve_core::partition::parse_spec;
use neve_core::write::NoProgress;
use neve_core::{CreateOptions, InsertOptions, Table};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::ingest::{delta_peer, remove_table};
use super::{median, run_python_peer};
use crate::cli::BenchNestedArgs;
use crate::error::{CliError, Result};
use crate::output::count;

const DUCKDB_SCRIPT: &str = include_str!("../../../../scripts/bench_duckdb_ndjson.py");

/// The same columns for DuckDB's `read_json(columns = ...)`.
const DUCKDB_COLUMNS: &str = "{'event_id': 'VARCHAR', 'ts': 'TIMESTAMPTZ', 'user_id': 'BIGINT', \
    'event_type': 'VARCHAR', 'page': 'VARCHAR', 'duration_ms': 'INTEGER', 'revenue': 'DECIMAL(12,2)', \
    'ctx': 'STRUCT(browser VARCHAR, os VARCHAR, version INTEGER, screen_w INTEGER, screen_h INTEGER, \
    lang VARCHAR, referrer VARCHAR, campaign VARCHAR)', 'tags': 'VARCHAR[]', 'attrs': 'MAP(VARCHAR, VARCHAR)'}";

/// The table's declared schema, as `neve create --schema` takes it.
pub const SCHEMA: &str = "event_id string, ts timestamp(UTC), user_id int64, event_type string, \
    page string, duration_ms int32, revenue decimal(12,2), \
    ctx struct<browser string, os string, version int32, screen_w int32, screen_h int32, \
    lang string, referrer string, campaign string>, tags list<string>, attrs map<string, string>";

fn ctx_fields() -> Fields {
    Fields::from(vec![
        Field::new("browser", DataType::Utf8, true),
        Field::new("os", DataType::Utf8, true),
        Field::new("version", DataType::Int32, true),
        Field::new("screen_w", DataType::Int32, true),
        Field::new("screen_h", DataType::Int32, true),
        Field::new("lang", DataType::Utf8, true),
        Field::new("referrer", DataType::Utf8, true),
        Field::new("campaign", DataType::Utf8, true),
    ])
}

fn schema() -> SchemaRef {
    let tags = ListBuilder::new(StringBuilder::new()).finish();
    let attrs = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new()).finish();
    Arc::new(Schema::new(vec![
        Field::new("event_id", DataType::Utf8, true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("user_id", DataType::Int64, true),
        Field::new("event_type", DataType::Utf8, true),
        Field::new("page", DataType::Utf8, true),
        Field::new("duration_ms", DataType::Int32, true),
        Field::new("revenue", DataType::Decimal128(12, 2), true),
        Field::new("ctx", DataType::Struct(ctx_fields()), true),
        Field::new("tags", tags.data_type().clone(), true),
        Field::new("attrs", attrs.data_type().clone(), true),
    ]))
}

const TYPES: [&str; 6] = ["view", "click", "signup", "purchase", "scroll", "share"];
const BROWSERS: [&str; 4] = ["chrome", "firefox", "safari", "edge"];
const OSES: [&str; 4] = ["linux", "macos", "windows", "ios"];
const LANGS: [&str; 5] = ["en", "de", "fr", "ja", "pt"];
const TAGS: [&str; 8] = [
    "new",
    "returning",
    "beta",
    "promo",
    "ab_a",
    "ab_b",
    "mobile",
    "vip",
];

/// `rows` events over 30 days of 2024, in random order, in batches of `batch` rows.
fn generate(rows: usize, batch: usize, seed: u64) -> Vec<RecordBatch> {
    let mut rng = StdRng::seed_from_u64(seed);
    let start = 1_704_067_200_000_000i64; // 2024-01-01
    let mut out = Vec::new();
    let mut done = 0;
    while done < rows {
        let n = batch.min(rows - done);
        let pick = |rng: &mut StdRng, xs: &[&'static str]| xs[rng.random_range(0..xs.len())];
        let ids: StringArray = (0..n)
            .map(|i| Some(format!("{seed:x}-{:012x}", done + i)))
            .collect();
        let ts: Vec<i64> = (0..n)
            .map(|_| start + rng.random_range(0..30 * 86_400_000_000i64))
            .collect();
        let users: Vec<i64> = (0..n).map(|_| rng.random_range(0..100_000)).collect();
        let types: StringArray = (0..n).map(|_| Some(pick(&mut rng, &TYPES))).collect();
        let pages: StringArray = (0..n)
            .map(|_| Some(format!("/p/{}", rng.random_range(0..500))))
            .collect();
        let durations: Vec<i32> = (0..n).map(|_| rng.random_range(0..60_000)).collect();
        let revenue = Decimal128Array::from(
            (0..n)
                .map(|_| {
                    rng.random_bool(0.1)
                        .then(|| rng.random_range(0..100_000i128))
                })
                .collect::<Vec<_>>(),
        )
        .with_precision_and_scale(12, 2)
        .expect("valid decimal");
        let s = |rng: &mut StdRng, xs: &[&'static str]| -> ArrayRef {
            Arc::new((0..n).map(|_| Some(pick(rng, xs))).collect::<StringArray>())
        };
        let i32s = |rng: &mut StdRng, lo: i32, hi: i32| -> ArrayRef {
            Arc::new(Int32Array::from(
                (0..n).map(|_| rng.random_range(lo..hi)).collect::<Vec<_>>(),
            ))
        };
        let ctx = StructArray::new(
            ctx_fields(),
            vec![
                s(&mut rng, &BROWSERS),
                s(&mut rng, &OSES),
                i32s(&mut rng, 80, 130),
                i32s(&mut rng, 320, 3840),
                i32s(&mut rng, 480, 2160),
                s(&mut rng, &LANGS),
                Arc::new(
                    (0..n)
                        .map(|_| {
                            rng.random_bool(0.3)
                                .then(|| format!("https://ref{}.example/", rng.random_range(0..50)))
                        })
                        .collect::<StringArray>(),
                ),
                Arc::new(
                    (0..n)
                        .map(|_| {
                            rng.random_bool(0.2)
                                .then(|| format!("spring-{}", rng.random_range(0..10)))
                        })
                        .collect::<StringArray>(),
                ),
            ],
            None,
        );
        let mut tags = ListBuilder::new(StringBuilder::new());
        let mut attrs = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
        for _ in 0..n {
            for _ in 0..rng.random_range(0..4) {
                tags.values().append_value(pick(&mut rng, &TAGS));
            }
            tags.append(true);
            for k in 0..rng.random_range(0..3) {
                attrs.keys().append_value(format!("k{k}"));
                attrs
                    .values()
                    .append_value(format!("v{}", rng.random_range(0..100)));
            }
            attrs.append(true).expect("map entry");
        }
        let cols: Vec<ArrayRef> = vec![
            Arc::new(ids),
            Arc::new(TimestampMicrosecondArray::from(ts).with_timezone("UTC")),
            Arc::new(Int64Array::from(users)),
            Arc::new(types),
            Arc::new(pages),
            Arc::new(Int32Array::from(durations)),
            Arc::new(revenue),
            Arc::new(ctx),
            Arc::new(tags.finish()),
            Arc::new(attrs.finish()),
        ];
        out.push(RecordBatch::try_new(schema(), cols).expect("valid batch"));
        done += n;
    }
    out
}

fn layout() -> Result<CreateOptions> {
    Ok(CreateOptions {
        schema: neve_core::schema::parse_schema(SCHEMA)?,
        partition_by: parse_spec("day(ts)")?,
        sort_by: vec!["event_type".into(), "ts".into()],
        ..Default::default()
    })
}

pub async fn run(a: BenchNestedArgs) -> Result<()> {
    let base = a.target.trim_end_matches('/').to_string();
    let stamp = chrono::Utc::now().format("%Y%m%d%H%M%S").to_string();
    let rows = a.rows;
    let batches = generate(rows, 65_536, a.seed);
    let arrow_bytes: usize = batches.iter().map(|b| b.get_array_memory_size()).sum();
    let dir = tempfile::tempdir()?;
    let ndjson = dir.path().join("events.ndjson");
    {
        let mut w = arrow::json::LineDelimitedWriter::new(std::io::BufWriter::new(
            std::fs::File::create(&ndjson)?,
        ));
        for b in &batches {
            w.write(b).map_err(|e| CliError::Core(e.into()))?;
        }
        w.finish().map_err(|e| CliError::Core(e.into()))?;
        w.into_inner().flush()?;
    }
    let ndjson_bytes = std::fs::metadata(&ndjson)?.len();
    eprintln!(
        "generated {} events ({} MB of Arrow, {} MB of NDJSON)",
        count(rows as u64),
        arrow_bytes / 1_000_000,
        ndjson_bytes / 1_000_000
    );
    let mut arrow_s = Vec::new();
    let mut json_s = Vec::new();
    let mut files = 0;
    for run in 0..a.runs {
        for from_json in [false, true] {
            let address = format!(
                "{base}/nested-{}-{stamp}-{run}",
                if from_json { "ndjson" } else { "arrow" }
            );
            let table = Table::at(&address)?;
            table.create(layout()?).await?;
            let started = Instant::now();
            let report = if from_json {
                table
                    .insert_files(
                        &[ndjson.display().to_string()],
                        &InsertOptions::default(),
                        Arc::new(NoProgress),
                    )
                    .await?
            } else {
                table
                    .insert_batches(
                        schema(),
                        batches.clone(),
                        &InsertOptions::default(),
                        Arc::new(NoProgress),
                    )
                    .await?
            };
            let s = started.elapsed().as_secs_f64();
            assert_eq!(report.rows, rows as u64, "every event inserted");
            files = report.files;
            eprintln!(
                "  neve from {} run {}: {s:.2}s, {} files",
                if from_json { "NDJSON" } else { "Arrow" },
                run + 1,
                report.files
            );
            if from_json {
                json_s.push(s)
            } else {
                arrow_s.push(s)
            }
            remove_table(&address).await?;
        }
    }
    let (arrow_m, json_m) = (median(arrow_s.clone()), median(json_s.clone()));
    let mut result = serde_json::json!({
        "bench": "nested", "target": base, "rows": rows, "runs": a.runs, "files": files,
        "arrow_mb": arrow_bytes as f64 / 1e6, "ndjson_mb": ndjson_bytes as f64 / 1e6,
        "neve_arrow_median_s": arrow_m, "neve_arrow_rows_per_s": rows as f64 / arrow_m,
        "neve_arrow_mb_per_s": arrow_bytes as f64 / 1e6 / arrow_m, "neve_arrow_runs_s": arrow_s,
        "neve_ndjson_median_s": json_m, "neve_ndjson_rows_per_s": rows as f64 / json_m,
        "neve_ndjson_mb_per_s": ndjson_bytes as f64 / 1e6 / json_m, "neve_ndjson_runs_s": json_s,
    });
    if !a.python.is_empty() {
        let target = format!("{base}/nested-delta-{stamp}");
        let (d, runs) = delta_peer(
            &a.python,
            &target,
            &schema(),
            &batches,
            a.runs,
            &["--ts-column", "ts", "--ts-format", "%Y-%m-%d"],
        )
        .await?;
        result["delta_median_s"] = d.into();
        result["delta_rows_per_s"] = (rows as f64 / d).into();
        result["delta_runs_s"] = runs.into();
        result["ratio_arrow"] = (d / arrow_m).into();
        result["ratio_ndjson"] = (d / json_m).into();
        // From NDJSON, the peer is DuckDB: delta-rs does not read NDJSON, and pyarrow's JSON
        // reader cannot read a map column. Always into a local folder.
        let out = tempfile::tempdir()?;
        let script = out.path().join("bench_duckdb_ndjson.py");
        std::fs::write(&script, DUCKDB_SCRIPT)?;
        let input = ndjson.display().to_string();
        let target = out.path().join("duckdb").display().to_string();
        let runs_arg = a.runs.to_string();
        let v = run_python_peer(
            &a.python,
            "DuckDB",
            &script,
            &[
                "--input",
                &input,
                "--target",
                &target,
                "--runs",
                &runs_arg,
                "--columns",
                DUCKDB_COLUMNS,
            ],
        )
        .await?;
        let runs: Vec<f64> = v["runs_s"]
            .as_array()
            .map(|r| r.iter().filter_map(|x| x.as_f64()).collect())
            .unwrap_or_default();
        for (i, s) in runs.iter().enumerate() {
            eprintln!("  DuckDB from NDJSON run {}: {s:.2}s", i + 1);
        }
        let m = median(runs.clone());
        result["duckdb_ndjson_median_s"] = m.into();
        result["duckdb_ndjson_rows_per_s"] = (rows as f64 / m).into();
        result["duckdb_ndjson_runs_s"] = runs.into();
        result["ratio_ndjson_duckdb"] = (m / json_m).into();
    }
    if a.json {
        println!("{result}");
        return Ok(());
    }
    println!(
        "nested events, {} rows into {base} (day-partitioned, sorted by event_type, ts; medians of {}):",
        count(rows as u64),
        a.runs
    );
    println!(
        "  neve from Arrow   {arrow_m:.2}s = {} rows/s, {:.1} MB/s of Arrow",
        count((rows as f64 / arrow_m) as u64),
        arrow_bytes as f64 / 1e6 / arrow_m
    );
    println!(
        "  neve from NDJSON  {json_m:.2}s = {} rows/s, {:.1} MB/s of NDJSON",
        count((rows as f64 / json_m) as u64),
        ndjson_bytes as f64 / 1e6 / json_m
    );
    if let Some(d) = result.get("delta_median_s").and_then(|v| v.as_f64()) {
        println!(
            "  delta-rs write_deltalake (Arrow) {d:.2}s = {} rows/s; neve/delta-rs: Arrow {:.2}x, NDJSON {:.2}x",
            count((rows as f64 / d) as u64),
            d / arrow_m,
            d / json_m
        );
    }
    if let Some(m) = result
        .get("duckdb_ndjson_median_s")
        .and_then(|v| v.as_f64())
    {
        println!(
            "  DuckDB read_json -> partitioned Parquet (local folder) {m:.2}s = {} rows/s; neve NDJSON / DuckDB {:.2}x",
            count((rows as f64 / m) as u64),
            m / json_m
        );
    }
    Ok(())
}
