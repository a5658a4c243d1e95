//! Unit tests of the query engine on the in-memory store: answers, pruning, counts from the
//! log, time travel and errors.

use std::sync::Arc;

use arrow::array::{AsArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use object_store::ObjectStoreExt;

use super::*;
use crate::partition::parse_spec;
use crate::table::{CreateOptions, InsertOptions, Table, TableBuilder};
use crate::write::NoProgress;

mod edges;
mod head;

const DAY_US: i64 = 86_400_000_000;
/// 2021-01-01T00:00:00 in microseconds.
const JAN_2021: i64 = 1_609_459_200_000_000;

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        Field::new("kind", DataType::Utf8, true),
        Field::new("fare", DataType::Float64, true),
    ]))
}

/// `days` consecutive days from 2021-01-01, `per_day` rows each; kinds alternate a/b.
fn rows(first_id: i64, start_day: i64, days: i64, per_day: i64) -> RecordBatch {
    let n = (days * per_day) as usize;
    let ids: Vec<i64> = (0..n as i64).map(|i| first_id + i).collect();
    let ts: Vec<i64> = (0..n as i64)
        .map(|i| JAN_2021 + (start_day + i / per_day) * DAY_US + (i % per_day) * 1_000_000)
        .collect();
    let kinds: Vec<&str> = (0..n).map(|i| if i % 2 == 0 { "a" } else { "b" }).collect();
    let fares: Vec<f64> = (0..n).map(|i| (i % 50) as f64 + 0.5).collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(arrow::array::TimestampMicrosecondArray::from(ts)),
            Arc::new(StringArray::from(kinds)),
            Arc::new(Float64Array::from(fares)),
        ],
    )
    .unwrap()
}

/// A month-partitioned table with two inserts: 2021-01-01..2021-04-10 (100 days × 10 rows),
/// then 2021-08-01..2021-08-31 (31 days × 10 rows).
async fn table() -> Table {
    let t = created(
        "q",
        3,
        CreateOptions {
            partition_by: parse_spec("month(ts) as m").unwrap(),
            sort_by: vec!["kind".into(), "ts".into()],
            ..Default::default()
        },
    )
    .await;
    for b in [rows(0, 0, 100, 10), rows(10_000, 212, 31, 10)] {
        insert(&t, b).await;
    }
    t
}

/// A new table on the in-memory store.
async fn created(name: &str, seed: u64, opts: CreateOptions) -> Table {
    let t = TableBuilder::new(TableLocation::memory(name))
        .with_seed(seed)
        .build();
    t.create(opts).await.unwrap();
    t
}

/// One insert of `batch` (its own schema) in one commit.
async fn insert(t: &Table, batch: RecordBatch) {
    t.insert_batches(
        batch.schema(),
        vec![batch],
        &InsertOptions::default(),
        Arc::new(NoProgress),
    )
    .await
    .unwrap();
}

async fn engine(t: &Table) -> QueryEngine {
    let mut e = QueryEngine::new();
    e.register_snapshot("t", t.location().clone(), t.snapshot().await.unwrap())
        .unwrap();
    e
}

fn int(batches: &[RecordBatch], col: usize) -> Vec<i64> {
    batches
        .iter()
        .flat_map(|b| {
            let c = arrow::compute::cast(b.column(col), &DataType::Int64).unwrap();
            c.as_primitive::<arrow::datatypes::Int64Type>()
                .iter()
                .map(|v| v.unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[tokio::test]
async fn answers_match_the_data() {
    let t = table().await;
    let e = engine(&t).await;
    let b = e
        .collect("SELECT count(*), sum(id), count(DISTINCT kind) FROM t")
        .await
        .unwrap();
    let n = 1310i64;
    let expected_sum: i64 = (0..1000).sum::<i64>() + (10_000..10_310).sum::<i64>();
    assert_eq!(int(&b, 0), vec![n]);
    assert_eq!(int(&b, 1), vec![expected_sum]);
    assert_eq!(int(&b, 2), vec![2]);
}

#[tokio::test]
async fn filters_on_the_partition_source_prune_files() {
    let t = table().await;
    let e = engine(&t).await;
    let files = t.snapshot().await.unwrap().files.len();
    assert_eq!(files, 5, "Jan, Feb, Mar, Apr, Aug");
    let provider = e.ctx.table_provider("t").await.unwrap();
    let table = provider.downcast_ref::<SnapshotTable>().unwrap();
    let kept = |sql: &'static str| {
        let e = &e;
        async move {
            let plan = e.ctx.sql(sql).await.unwrap().into_optimized_plan().unwrap();
            let mut filters = Vec::new();
            plan.apply(|p| {
                if let datafusion::logical_expr::LogicalPlan::TableScan(s) = p {
                    filters.extend(s.filters.clone());
                }
                Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
            })
            .unwrap();
            table
                .prune(table.stats().unwrap(), &filters)
                .iter()
                .filter(|k| **k)
                .count()
        }
    };
    use datafusion::common::tree_node::TreeNode;
    assert_eq!(kept("SELECT id FROM t WHERE ts >= '2021-08-01'").await, 1);
    assert_eq!(
        kept("SELECT id FROM t WHERE ts >= '2021-02-15' AND ts < '2021-03-02'").await,
        2
    );
    assert_eq!(
        kept("SELECT id FROM t WHERE extract(month FROM ts) = 8").await,
        1
    );
    assert_eq!(
        kept("SELECT id FROM t WHERE date_trunc('month', ts) >= '2021-03-01' AND date_trunc('month', ts) <= '2021-04-30'").await,
        2
    );
    assert_eq!(kept("SELECT id FROM t WHERE id < 5").await, 1);
    assert_eq!(kept("SELECT id FROM t WHERE kind = 'c'").await, 0);
    assert_eq!(kept("SELECT id FROM t WHERE fare > 0").await, 5);

    // Pruned or not, the answers are the same as without pruning.
    let b = e
        .collect("SELECT count(*) FROM t WHERE extract(month FROM ts) = 8 AND kind = 'a'")
        .await
        .unwrap();
    assert_eq!(int(&b, 0), vec![155]);
}

#[tokio::test]
async fn counts_by_month_come_from_the_log() {
    let t = table().await;
    let e = engine(&t).await;
    let sql = "SELECT date_trunc('month', ts) AS m, count(*) AS n FROM t \
               WHERE ts >= '2021-02-01' GROUP BY 1 ORDER BY 1";
    let b = e.collect(sql).await.unwrap();
    assert_eq!(e.reads().bytes(), 0, "no data file was read");
    assert_eq!(int(&b, 1), vec![280, 310, 100, 310]);
    let months: Vec<String> = b
        .iter()
        .flat_map(|b| {
            let c = arrow::compute::cast(b.column(0), &DataType::Utf8).unwrap();
            c.as_string::<i32>()
                .iter()
                .map(|v| v.unwrap()[..7].to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(months, ["2021-02", "2021-03", "2021-04", "2021-08"]);

    let b = e
        .collect("SELECT count(*) FROM t WHERE extract(month FROM ts) = 8")
        .await
        .unwrap();
    assert_eq!(int(&b, 0), vec![310]);
    let b = e
        .collect("SELECT count(*), count(kind) FROM t")
        .await
        .unwrap();
    assert_eq!((int(&b, 0), int(&b, 1)), (vec![1310], vec![1310]));
    assert_eq!(e.reads().bytes(), 0, "still no data file read");

    // Not decidable per file: must read data, and still be right.
    let b = e
        .collect("SELECT count(*) FROM t WHERE kind = 'a'")
        .await
        .unwrap();
    assert_eq!(int(&b, 0), vec![655]);
    assert!(e.reads().bytes() > 0);
    let b = e
        .collect("SELECT count(*) FROM t WHERE ts < '2021-01-05 12:00:00'")
        .await
        .unwrap();
    // Jan 1-4 (40 rows) and the ten rows of Jan 5, stamped 00:00:00..00:00:09.
    assert_eq!(int(&b, 0), vec![50]);
    // A month with no rows gives an empty group result, not an error.
    let b = e
        .collect("SELECT date_trunc('month', ts), count(*) FROM t WHERE extract(month FROM ts) = 6 GROUP BY 1")
        .await
        .unwrap();
    assert_eq!(b.iter().map(|b| b.num_rows()).sum::<usize>(), 0);
}

#[tokio::test]
async fn limit_reads_one_file() {
    let t = table().await;
    let e = engine(&t).await;
    let total = t.snapshot().await.unwrap().bytes();
    let b = e.collect("SELECT * FROM t LIMIT 3").await.unwrap();
    assert_eq!(b.iter().map(|b| b.num_rows()).sum::<usize>(), 3);
    let read = e.reads().bytes();
    assert!(read > 0 && read < total / 2, "read {read} of {total} bytes");
}

/// `GROUP BY kind` over `t` in a fresh engine with `limits`: the answer as text, and the
/// requests and bytes it read from the store.
async fn by_kind(t: &Table, limits: crate::query::QueryLimits) -> (String, u64, u64) {
    let mut e = QueryEngine::with_limits(limits);
    e.register_snapshot("t", t.location().clone(), t.snapshot().await.unwrap())
        .unwrap();
    let q = "SELECT kind, count(*), sum(fare) FROM t GROUP BY kind ORDER BY kind";
    let b = e.collect(q).await.unwrap();
    let text = arrow::util::pretty::pretty_format_batches(&b)
        .unwrap()
        .to_string();
    (text, e.reads().requests(), e.reads().bytes())
}

/// Engines sharing a footer cache read each file's footer once, and its page index once more:
/// a repeated query then fetches only data, and answers the same.
#[tokio::test]
async fn a_shared_footer_cache_spares_later_queries_the_footers() {
    let t = table().await;
    let snap = t.snapshot().await.unwrap();
    let files = snap.files.len() as u64;
    let footers = crate::query::FooterCache::new(1 << 20);
    let run = |footers: Option<crate::query::FooterCache>| {
        by_kind(
            &t,
            crate::query::QueryLimits {
                footers,
                ..Default::default()
            },
        )
    };
    let (plain, plain_requests, plain_bytes) = run(None).await;
    assert!(footers.is_empty());
    let (first, first_requests, first_bytes) = run(Some(footers.clone())).await;
    assert_eq!(footers.len() as u64, files, "one entry per file read");
    let (second, ..) = run(Some(footers.clone())).await;
    // The second read of a held footer also reads the file's page index, once, so that later
    // queries with filters do not read and parse it again (DataFusion keeps footers only).
    assert_eq!(footers.with_page_index() as u64, files);
    let (third, third_requests, third_bytes) = run(Some(footers.clone())).await;
    assert_eq!(first, plain);
    assert_eq!(second, plain);
    assert_eq!(third, plain);
    assert_eq!((first_requests, first_bytes), (plain_requests, plain_bytes));
    assert_eq!(
        third_requests,
        plain_requests - files,
        "one footer request fewer per file"
    );
    assert!(third_bytes < plain_bytes, "{third_bytes} of {plain_bytes}");
}

/// With footers and data ranges both kept, a repeated query reads nothing from the store and
/// answers the same; rows committed since are read (their files are new), and a cache too
/// small to hold a range keeps nothing.
#[tokio::test]
async fn a_shared_chunk_cache_serves_repeated_queries_from_memory() {
    let t = table().await;
    let footers = crate::query::FooterCache::new(1 << 20);
    let run = |chunks: Option<crate::query::ChunkCache>| {
        let limits = crate::query::QueryLimits {
            footers: Some(footers.clone()),
            chunks,
            ..Default::default()
        };
        let t = &t;
        async move {
            let (text, requests, _) = by_kind(t, limits).await;
            (text, requests)
        }
    };
    let (plain, _) = run(None).await;
    // The second run also takes in the page indexes; the third reads data only.
    run(None).await;
    let (plain_again, data_requests) = run(None).await;
    assert_eq!(plain_again, plain);
    assert!(data_requests > 0, "footers cached, data still read");

    let chunks = crate::query::ChunkCache::new(8 << 20);
    let (first, first_requests) = run(Some(chunks.clone())).await;
    assert_eq!(
        (first.as_str(), first_requests),
        (plain.as_str(), data_requests)
    );
    assert!(chunks.usage() > 0);
    let (second, second_requests) = run(Some(chunks.clone())).await;
    assert_eq!(second, plain);
    assert_eq!(second_requests, 0, "everything from memory");

    // New rows are new files: read, and counted in the answer.
    let before = t.snapshot().await.unwrap().files.len();
    insert(&t, rows(20_000, 400, 3, 10)).await;
    let after = t.snapshot().await.unwrap().files.len();
    let (third, third_requests) = run(Some(chunks.clone())).await;
    assert_ne!(third, plain);
    assert!(third_requests > 0 && third_requests <= 4 * (after - before) as u64);
    let (fourth, fourth_requests) = run(None).await;
    assert_eq!(third, fourth, "the same answer as without the cache");
    assert!(fourth_requests > third_requests);

    // The new files' page indexes were taken in by the fourth run; from now on, data only.
    let (_, data_only) = run(None).await;
    let tiny = crate::query::ChunkCache::new(16);
    run(Some(tiny.clone())).await;
    let (_, tiny_requests) = run(Some(tiny)).await;
    assert_eq!(tiny_requests, data_only, "nothing kept");
}

#[tokio::test]
async fn time_travel_sees_the_old_snapshot() {
    let t = table().await;
    let mut e = QueryEngine::new();
    let v1 = t.snapshot_as_of(crate::AsOf::Version(1)).await.unwrap();
    e.register_snapshot("t", t.location().clone(), v1).unwrap();
    let b = e.collect("SELECT count(*), max(id) FROM t").await.unwrap();
    assert_eq!((int(&b, 0), int(&b, 1)), (vec![1000], vec![999]));
}

#[tokio::test]
async fn strings_are_scanned_as_views_and_returned_as_the_table_types() {
    let t = table().await;
    let e = engine(&t).await;
    let provider = e.ctx.table_provider("t").await.unwrap();
    let kind = provider.schema().field_with_name("kind").unwrap().clone();
    assert_eq!(kind.data_type(), &DataType::Utf8View);

    let b = e
        .collect(
            "SELECT kind, count(*) AS n, max(kind || '!') AS x FROM t GROUP BY kind ORDER BY kind",
        )
        .await
        .unwrap();
    let schema = b[0].schema();
    assert_eq!(schema.field(0).data_type(), &DataType::Utf8);
    assert_eq!(schema.field(2).data_type(), &DataType::Utf8);
    let kinds: Vec<&str> = b
        .iter()
        .flat_map(|b| b.column(0).as_string::<i32>().iter().map(Option::unwrap))
        .collect();
    assert_eq!(kinds, ["a", "b"]);
    assert_eq!(int(&b, 1), vec![655, 655]);

    // Filters on strings still prune by the log's statistics, casts included.
    let before = e.reads().bytes();
    for sql in [
        "SELECT count(*) FROM t WHERE kind > 'b'",
        "SELECT count(*) FROM t WHERE CAST(kind AS VARCHAR) = 'c'",
        "SELECT count(*) FROM t WHERE kind IN ('x', 'y')",
    ] {
        assert_eq!(int(&e.collect(sql).await.unwrap(), 0), vec![0], "{sql}");
    }
    assert_eq!(e.reads().bytes(), before, "no file was opened");

    // Counts by a string partition come from the log, in the table's type.
    let by_kind = created(
        "qk",
        4,
        CreateOptions {
            partition_by: parse_spec("kind").unwrap(),
            ..Default::default()
        },
    )
    .await;
    insert(&by_kind, rows(0, 0, 10, 10)).await;
    let e = engine(&by_kind).await;
    let b = e
        .collect("SELECT kind, count(*) FROM t WHERE kind <> 'c' GROUP BY kind ORDER BY kind")
        .await
        .unwrap();
    assert_eq!(e.reads().bytes(), 0, "answered from the log");
    assert_eq!(b[0].schema().field(0).data_type(), &DataType::Utf8);
    assert_eq!(int(&b, 1), vec![50, 50]);
}

#[tokio::test]
async fn catalog_statements_show_the_tables_own_types() {
    let t = table().await;
    let e = engine(&t).await;
    let strings = |b: &[RecordBatch], col: usize| -> Vec<String> {
        b.iter()
            .flat_map(|b| {
                let c = arrow::compute::cast(b.column(col), &DataType::Utf8).unwrap();
                c.as_string::<i32>()
                    .iter()
                    .map(|v| v.unwrap_or("").to_string())
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let expected = ["Int64", "Timestamp(µs)", "Utf8", "Float64"];

    let b = e.collect("DESCRIBE t").await.unwrap();
    assert_eq!(strings(&b, 0), ["id", "ts", "kind", "fare"]);
    assert_eq!(strings(&b, 1), expected);

    let b = e
        .collect(
            "SELECT column_name, data_type FROM information_schema.columns \
             WHERE table_name = 't' ORDER BY ordinal_position",
        )
        .await
        .unwrap();
    assert_eq!(strings(&b, 1), expected);
    let b = e.collect("SHOW COLUMNS FROM t").await.unwrap();
    let at = b[0].schema().index_of("data_type").unwrap();
    assert_eq!(strings(&b, at), expected);

    // In a subquery, and beside a scan of the table itself, which still reads views.
    let b = e
        .collect(
            "SELECT count(*) FROM t WHERE kind IN (SELECT data_type FROM information_schema.columns \
             WHERE column_name = 'kind') OR kind = 'a'",
        )
        .await
        .unwrap();
    assert_eq!(int(&b, 0), vec![655]);
    let b = e
        .collect(
            "SELECT count(*) FROM t WHERE 'Utf8' IN (SELECT data_type FROM \
             information_schema.columns WHERE column_name = 'kind')",
        )
        .await
        .unwrap();
    assert_eq!(
        int(&b, 0),
        vec![1310],
        "the subquery sees the table's own type"
    );
    let b = e
        .collect(
            "SELECT c.data_type, count(*) FROM t JOIN information_schema.columns c \
             ON c.column_name = 'kind' AND c.table_name = 't' GROUP BY 1",
        )
        .await
        .unwrap();
    assert_eq!(strings(&b, 0), ["Utf8"]);
    assert_eq!(int(&b, 1), vec![1310]);
}

/// A warehouse with one table whose log cannot be read: the others are queried, and a query
/// of the broken one says why it is missing.
#[tokio::test]
async fn a_broken_table_does_not_hide_a_warehouses_others() {
    let dir = tempfile::tempdir().unwrap();
    let good = Table::at(&dir.path().join("good").display().to_string()).unwrap();
    good.create(CreateOptions::default()).await.unwrap();
    insert(&good, rows(1, 0, 3, 10)).await;
    let log = dir.path().join("broken/_log");
    std::fs::create_dir_all(&log).unwrap();
    std::fs::write(log.join("00000000000000000000.json"), b"{ not json").unwrap();

    let mut e = QueryEngine::new();
    let names = e
        .register_warehouse(&dir.path().display().to_string(), None)
        .await
        .unwrap();
    assert_eq!(names, ["good"]);
    let n = e.collect("SELECT count(*) FROM good").await.unwrap();
    assert_eq!(int(&n, 0), vec![30]);
    let err = e.collect("SELECT * FROM broken").await.unwrap_err();
    assert!(matches!(err, Error::UnknownTable { .. }), "{err:?}");
    assert!(
        err.to_string().contains("'broken' could not be opened"),
        "{err}"
    );
}

#[tokio::test]
async fn errors_say_what_and_where() {
    let t = table().await;
    let e = engine(&t).await;
    let err = e.collect("SELEC 1").await.unwrap_err();
    assert!(matches!(err, Error::SqlSyntax { .. }), "{err:?}");
    assert!(err.to_string().contains("SELEC"), "{err}");
    // Cut short: where the statement ends.
    let err = e
        .collect("SELECT id\nFROM t\nWHERE (id =  \n")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SqlSyntax { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("EOF at the end of the statement (line 3, column 12)"),
        "{err}"
    );

    let err = e.collect("SELECT nope FROM t").await.unwrap_err();
    assert!(matches!(err, Error::InvalidQuery { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("nope") && msg.contains("line 1, column 8"),
        "{msg}"
    );

    // What the data does to an expression is the query's fault, not neve's (65, not 70).
    for q in [
        "SELECT id / (id - id) FROM t",
        "SELECT CAST(kind AS INT) FROM t",
    ] {
        let err = e.collect(q).await.unwrap_err();
        assert!(matches!(err, Error::InvalidQuery { .. }), "{q}: {err:?}");
        assert_eq!(err.exit_code(), 65, "{q}");
    }

    let err = e.collect("SELECT * FROM missing").await.unwrap_err();
    assert!(matches!(err, Error::UnknownTable { .. }), "{err:?}");
    assert!(err.to_string().contains("missing"), "{err}");
    assert_eq!(err.exit_code(), 66);
}

#[tokio::test]
async fn struct_fields_prune_by_the_logs_statistics() {
    use arrow::array::{ArrayRef, StructArray};
    use arrow::datatypes::Fields;
    let t = created("nested", 11, CreateOptions::default()).await;
    let fields = Fields::from(vec![
        Field::new("plan", DataType::Utf8, true),
        Field::new("seats", DataType::Int64, true),
    ]);
    let batch = |plan: &str, seats: i64, n: usize| {
        let user = StructArray::new(
            fields.clone(),
            vec![
                Arc::new(StringArray::from(vec![plan; n])) as ArrayRef,
                Arc::new(Int64Array::from(vec![seats; n])),
            ],
            None,
        );
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new(
                "user",
                DataType::Struct(fields.clone()),
                true,
            )])),
            vec![Arc::new(user)],
        )
        .unwrap()
    };
    insert(&t, batch("free", 1, 30)).await;
    insert(&t, batch("pro", 10, 20)).await;
    let e = engine(&t).await;
    let n = |sql: &'static str| {
        let e = &e;
        async move { int(&e.collect(sql).await.unwrap(), 0)[0] }
    };
    assert_eq!(
        n("SELECT count(*) FROM t WHERE \"user\".plan = 'nothing'").await,
        0
    );
    assert_eq!(
        n("SELECT count(*) FROM t WHERE \"user\".seats > 100").await,
        0
    );
    assert_eq!(
        e.reads().bytes(),
        0,
        "every file was pruned by user.plan / user.seats"
    );
    // Files where the filter holds for every row are counted from the log, too.
    assert_eq!(
        n("SELECT count(*) FROM t WHERE \"user\".plan = 'pro'").await,
        20
    );
    assert_eq!(e.reads().bytes(), 0);
    let seats = e
        .collect("SELECT \"user\".seats FROM t WHERE \"user\".plan = 'pro'")
        .await
        .unwrap();
    assert_eq!(int(&seats, 0), vec![10; 20]);
    assert!(e.reads().bytes() > 0, "rows are read from the file");
    assert_eq!(
        n("SELECT count(*) FROM t WHERE \"user\".seats < 5").await,
        30
    );
    assert_eq!(
        n("SELECT count(*) FROM t WHERE \"user\".plan >= 'a'").await,
        50
    );
    // Unquoted, `user` is the SQL keyword; dotted, it can only be the column.
    assert_eq!(n("SELECT count(*) FROM t WHERE user.plan >= 'a'").await, 50);
}

/// Rows of every split of `t` at `version`, read one split at a time with `predicate`.
async fn rows_of_splits(t: &Table, s: &Splits, predicate: Option<&str>) -> usize {
    use futures::TryStreamExt;
    let mut n = 0;
    for split in &s.splits {
        let batches: Vec<RecordBatch> = scan_split(t, s.version, &split.paths, predicate)
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        n += batches.iter().map(|b| b.num_rows()).sum::<usize>();
    }
    n
}

#[tokio::test]
async fn splits_keep_partitions_apart_and_prune_as_a_query_does() {
    let t = table().await;
    insert(&t, rows(20_000, 0, 5, 10)).await; // a second January file
    let all = plan_splits(&t, AsOf::Latest, None, u64::MAX).await.unwrap();
    let parts: Vec<(&str, usize)> = all
        .splits
        .iter()
        .map(|s| (s.partition.as_str(), s.paths.len()))
        .collect();
    assert_eq!(
        parts,
        vec![
            ("m=2021-01", 2),
            ("m=2021-02", 1),
            ("m=2021-03", 1),
            ("m=2021-04", 1),
            ("m=2021-08", 1)
        ]
    );
    assert_eq!(all.version, 3);
    assert_eq!(rows_of_splits(&t, &all, None).await, 1360);
    // Cut at one byte: a file a split.
    let small = plan_splits(&t, AsOf::Latest, None, 1).await.unwrap();
    assert_eq!(small.splits.len(), 6);
    assert_eq!(rows_of_splits(&t, &small, None).await, 1360);
    // A filter on the partition's source column: only August is read, and filtered again.
    let p = "ts >= TIMESTAMP '2021-08-01 00:00:00' AND kind = 'a'";
    let aug = plan_splits(&t, AsOf::Latest, Some(p), u64::MAX)
        .await
        .unwrap();
    assert_eq!(aug.splits.len(), 1);
    assert_eq!(aug.splits[0].partition, "m=2021-08");
    assert_eq!(rows_of_splits(&t, &aug, Some(p)).await, 155);
    // A filter nothing passes reads nothing; an older version has its own files.
    let none = plan_splits(&t, AsOf::Latest, Some("1 = 0"), u64::MAX)
        .await
        .unwrap();
    assert!(none.splits.is_empty());
    let old = plan_splits(&t, AsOf::Version(1), None, u64::MAX)
        .await
        .unwrap();
    assert_eq!((old.version, old.splits.len()), (1, 4));
    assert_eq!(rows_of_splits(&t, &old, None).await, 1000);
    // A path that is not alive at the version is refused.
    let e = scan_split(&t, 1, &all.splits[4].paths, None)
        .await
        .err()
        .unwrap();
    assert!(matches!(e, Error::FileNotAlive { version: 1, .. }), "{e}");
}

#[tokio::test]
async fn a_merge_tables_splits_hold_whole_partitions_and_read_exact() {
    let t = created(
        "qm",
        5,
        CreateOptions {
            sort_by: vec!["id".into()],
            merge: Some("replace(key = [id])".parse().unwrap()),
            ..Default::default()
        },
    )
    .await;
    // Three overlapping inserts: ids 0..100, 50..150, 0..10 again.
    for b in [rows(0, 0, 10, 10), rows(50, 20, 10, 10), rows(0, 40, 1, 10)] {
        insert(&t, b).await;
    }
    let s = plan_splits(&t, AsOf::Latest, None, 1).await.unwrap();
    assert_eq!(s.splits.len(), 1);
    assert_eq!(s.splits[0].paths.len(), 3);
    assert_eq!(rows_of_splits(&t, &s, None).await, 150);
    // A key filter prunes files whose keys it excludes; the read still has the newest row.
    let k = plan_splits(&t, AsOf::Latest, Some("id = 120"), 1)
        .await
        .unwrap();
    assert_eq!(k.splits[0].paths.len(), 1);
    assert_eq!(rows_of_splits(&t, &k, Some("id = 120")).await, 1);
    let newest = plan_splits(&t, AsOf::Latest, Some("id = 5"), 1)
        .await
        .unwrap();
    assert_eq!(newest.splits[0].paths.len(), 2);
    let batches: Vec<RecordBatch> = {
        use futures::TryStreamExt;
        scan_split(&t, newest.version, &newest.splits[0].paths, Some("id = 5"))
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap()
    };
    let one = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
    assert_eq!(one.num_rows(), 1);
    let ts = arrow::compute::cast(one.column(1), &DataType::Int64).unwrap();
    // The third insert's row: day 40.
    assert_eq!(
        ts.as_primitive::<arrow::datatypes::Int64Type>().value(0),
        JAN_2021 + 40 * DAY_US + 5 * 1_000_000
    );
}

#[test]
fn references_say_whether_a_statement_is_an_explain() {
    let e = QueryEngine::new();
    for (sql, explain) in [
        ("SELECT * FROM events", false),
        ("EXPLAIN SELECT * FROM events", true),
        ("explain analyze select count(*) from events", true),
        ("EXPLAIN VERBOSE SELECT 1", true),
        ("SELECT 'EXPLAIN' AS plan FROM events", false),
    ] {
        let r = e.references(sql).unwrap();
        assert_eq!(r.explain, explain, "{sql}");
    }
    assert_eq!(
        e.references("EXPLAIN SELECT * FROM events").unwrap().tables,
        vec![(None, "events".to_string())]
    );
}

/// Integer `+`, `-` and `*` fail on overflow (DataFusion wraps them), keep their names, and
/// leave every other type's arithmetic as it was.
#[tokio::test]
async fn integer_overflow_is_an_error_not_a_wrapped_value() {
    let t = table().await;
    let e = engine(&t).await;
    for sql in [
        "SELECT 9223372036854775807 + 1",
        "SELECT CAST(-9223372036854775808 AS BIGINT) - 1",
        "SELECT CAST(127 AS TINYINT) + CAST(1 AS TINYINT)",
        "SELECT CAST(0 AS INT UNSIGNED) - CAST(1 AS INT UNSIGNED)",
        "SELECT max(id) * 4611686018427387904 FROM t",
        "SELECT sum(x) FROM (SELECT id * 3074457345618258602 AS x FROM t WHERE id > 2)",
        "SELECT id FROM t WHERE id * 4611686018427387904 > 0",
        "SELECT (SELECT max(id) FROM t) * 9223372036854775807",
    ] {
        let err = e.collect(sql).await.unwrap_err();
        assert!(matches!(err, Error::InvalidQuery { .. }), "{sql}: {err:?}");
        assert!(err.to_string().contains("Overflow"), "{sql}: {err}");
    }
    // Values that fit are the same as before, and so are the columns' names.
    let b = e
        .collect("SELECT id + 1, id * 2 - 1, kind FROM t ORDER BY id LIMIT 3")
        .await
        .unwrap();
    assert_eq!(b[0].schema().field(0).name(), "t.id + Int64(1)");
    assert_eq!(b[0].schema().field(1).name(), "t.id * Int64(2) - Int64(1)");
    assert_eq!(int(&b, 0), vec![1, 2, 3]);
    assert_eq!(int(&b, 1), vec![-1, 1, 3]);
    let b = e
        .collect("SELECT sum(id * 2) AS s, count(*) FROM t")
        .await
        .unwrap();
    assert_eq!(b[0].schema().field(0).name(), "s");
    // Floats, dates and decimals keep DataFusion's own arithmetic.
    let b = e
        .collect("SELECT 1e308 * 10.0 AS f, DATE '2024-01-31' + INTERVAL '1 day' AS d, CAST(1.5 AS DECIMAL(10,2)) * 2 AS m")
        .await
        .unwrap();
    assert!(b[0]
        .column(0)
        .as_primitive::<arrow::datatypes::Float64Type>()
        .value(0)
        .is_infinite());
    assert_eq!(b[0].num_rows(), 1);
}
