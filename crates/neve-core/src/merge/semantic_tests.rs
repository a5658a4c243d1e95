//! Merge semantics against a reference model: random inserts (updates and deletes of earlier
//! keys among them) and merges, partial and full; after every step a fixed set of queries
//! equals the model's answers, and a raw read sees every stored row.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{BooleanArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::util::display::array_value_to_string;
use proptest::prelude::*;

use super::*;
use crate::partition::parse_spec;
use crate::query::QueryEngine;
use crate::storage::TableLocation;
use crate::table::{CreateOptions, InsertOptions, TableBuilder};
use crate::write::NoProgress;

/// One stored row: partition, key, version, deleted, value.
#[derive(Debug, Clone, Copy)]
struct Row {
    g: i64,
    k: i64,
    v: i64,
    /// A null flag does not delete.
    del: Option<bool>,
    x: i64,
}

#[derive(Debug, Clone)]
enum Step {
    Insert(Vec<Row>),
    /// Merge with at most this many files per group: 2 leaves partitions partly merged.
    Merge(usize),
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("g", DataType::Int64, true),
        Field::new("k", DataType::Int64, true),
        Field::new("v", DataType::Int64, true),
        Field::new("del", DataType::Boolean, true),
        Field::new("x", DataType::Int64, true),
    ]))
}

fn batch(rows: &[Row]) -> RecordBatch {
    let col = |f: fn(&Row) -> i64| Arc::new(Int64Array::from_iter_values(rows.iter().map(f)));
    RecordBatch::try_new(
        schema(),
        vec![
            col(|r| r.g),
            col(|r| r.k),
            col(|r| r.v),
            Arc::new(BooleanArray::from_iter(rows.iter().map(|r| r.del))),
            col(|r| r.x),
        ],
    )
    .unwrap()
}

/// An insert: rows over 2 partitions and 12 keys, a key at most once per partition (which
/// of an insert's own rows of one key wins is not specified), versions that often tie.
fn insert() -> impl Strategy<Value = Step> {
    prop::collection::btree_map(
        (0i64..2, 0i64..12),
        (
            0i64..4,
            prop::option::weighted(0.8, prop::bool::weighted(0.15)),
            -50i64..100,
        ),
        1..10,
    )
    .prop_map(|m| {
        Step::Insert(
            m.into_iter()
                .map(|((g, k), (v, del, x))| Row { g, k, v, del, x })
                .collect(),
        )
    })
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        prop_oneof![4 => insert(), 1 => prop_oneof![Just(Step::Merge(2)), Just(Step::Merge(100))]],
        1..14,
    )
}

/// What a table of `spec` holds after `inserts`, one row per partition and key, as the
/// queries print it: `g, k, v, x` (aggregate: v the max, x the sum, c the row count).
fn model(spec: &MergeSpec, inserts: &[Vec<Row>]) -> BTreeMap<(i64, i64), Vec<String>> {
    let mut out: BTreeMap<(i64, i64), (Row, i64)> = BTreeMap::new();
    for rows in inserts {
        for r in rows {
            let key = (r.g, r.k);
            match (spec, out.get_mut(&key)) {
                (_, None) => {
                    out.insert(key, (*r, 1));
                }
                // Ties go to the later commit.
                (MergeSpec::Replace { version, .. }, Some((w, _)))
                    if version.is_none() || r.v >= w.v =>
                {
                    *w = *r
                }
                (MergeSpec::Aggregate { .. }, Some((w, c))) => {
                    w.v = w.v.max(r.v);
                    w.x += r.x;
                    w.del = r.del; // last
                    *c += 1;
                }
                _ => {}
            }
        }
    }
    out.into_iter()
        .filter(|(_, (r, _))| !(matches!(spec, MergeSpec::Replace { .. }) && r.del == Some(true)))
        .map(|(key, (r, c))| {
            let mut row = vec![
                r.g.to_string(),
                r.k.to_string(),
                r.v.to_string(),
                r.x.to_string(),
            ];
            if matches!(spec, MergeSpec::Aggregate { .. }) {
                row.push(c.to_string());
            }
            (key, row)
        })
        .collect()
}

/// An insert of an odd number of rows is written in chunks of two rows, as a large input is,
/// so a partition gets several files of one commit (a merge may group them apart).
async fn insert_rows(t: &Table, rows: &[Row]) {
    if rows.len().is_multiple_of(2) {
        let opts = InsertOptions::default();
        t.insert_batches(schema(), vec![batch(rows)], &opts, Arc::new(NoProgress))
            .await
            .unwrap();
        return;
    }
    let mut opts = InsertOptions::default();
    opts.write.resident = false;
    opts.write.chunk_rows = 2;
    let input = crate::write::input::OpenedInput {
        name: "<chunks>".into(),
        format: crate::write::input::InputFormat::Arrow,
        schema: schema(),
        batches: Box::new(
            rows.chunks(2)
                .map(|c| Ok(batch(c)))
                .collect::<Vec<_>>()
                .into_iter(),
        ),
    };
    let snapshot = t.snapshot().await.unwrap();
    t.insert_inputs(snapshot, vec![input], &opts, Arc::new(NoProgress))
        .await
        .unwrap();
}

async fn rows_of(e: &QueryEngine, sql: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for b in e
        .collect(sql)
        .await
        .unwrap_or_else(|err| panic!("{sql}: {err}"))
    {
        for i in 0..b.num_rows() {
            out.push(
                b.columns()
                    .iter()
                    .map(|c| array_value_to_string(c, i).unwrap())
                    .collect(),
            );
        }
    }
    out
}

async fn check(t: &Table, spec: &MergeSpec, inserts: &[Vec<Row>], step: usize) {
    let expected = model(spec, inserts);
    let mut e = QueryEngine::new();
    e.register_table("t", t, None).await.unwrap();
    let aggregate = matches!(spec, MergeSpec::Aggregate { .. });
    let cols = if aggregate {
        "g, k, v, x, c"
    } else {
        "g, k, v, x"
    };
    let all = rows_of(&e, &format!("SELECT {cols} FROM t ORDER BY g, k")).await;
    let want: Vec<Vec<String>> = expected.values().cloned().collect();
    assert_eq!(all, want, "step {step}: every row");

    let n = expected.len();
    let sum: i64 = expected
        .values()
        .map(|r| r[3].parse::<i64>().unwrap())
        .sum();
    let got = rows_of(&e, "SELECT count(*), coalesce(sum(x), 0) FROM t").await;
    assert_eq!(
        got,
        vec![vec![n.to_string(), sum.to_string()]],
        "step {step}: count and sum"
    );

    // A key range (pushed below the merge) and a value filter (above it).
    let low: Vec<_> = expected.iter().filter(|((_, k), _)| *k < 5).collect();
    let got = rows_of(&e, "SELECT count(*) FROM t WHERE k < 5").await;
    assert_eq!(got, vec![vec![low.len().to_string()]], "step {step}: k < 5");
    let big = expected
        .values()
        .filter(|r| r[3].parse::<i64>().unwrap() > 20)
        .count();
    let got = rows_of(&e, "SELECT count(*) FROM t WHERE x > 20").await;
    assert_eq!(got, vec![vec![big.to_string()]], "step {step}: x > 20");

    // A lookup, and a group-by.
    let want: Vec<Vec<String>> = expected
        .iter()
        .filter(|((_, k), _)| *k == 3)
        .map(|(_, r)| r[..4].to_vec())
        .collect();
    assert_eq!(
        rows_of(&e, "SELECT g, k, v, x FROM t WHERE k = 3 ORDER BY g").await,
        want,
        "step {step}: k = 3"
    );
    let mut by_g: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    for ((g, _), r) in &expected {
        let e = by_g.entry(*g).or_default();
        e.0 += 1;
        e.1 += r[3].parse::<i64>().unwrap();
    }
    let want: Vec<Vec<String>> = by_g
        .iter()
        .map(|(g, (c, s))| vec![g.to_string(), c.to_string(), s.to_string()])
        .collect();
    assert_eq!(
        rows_of(
            &e,
            "SELECT g, count(*), sum(x) FROM t GROUP BY g ORDER BY g"
        )
        .await,
        want,
        "step {step}: by partition"
    );

    // Iceberg readers see the same rows: the stored rows but those the position deletes name.
    if !aggregate {
        let mut got: Vec<Vec<String>> = Vec::new();
        for b in crate::iceberg::deletes::rows_read_through_iceberg(t.location()).await {
            let b = b.project(&[0, 1, 2, 4]).unwrap();
            for i in 0..b.num_rows() {
                got.push(
                    b.columns()
                        .iter()
                        .map(|c| array_value_to_string(c, i).unwrap())
                        .collect(),
                );
            }
        }
        got.sort_by_key(|r| (r[0].parse::<i64>().unwrap(), r[1].parse::<i64>().unwrap()));
        let want: Vec<Vec<String>> = expected.values().cloned().collect();
        assert_eq!(got, want, "step {step}: through Iceberg");
        // The table's writer decided its groups from what it kept of the last sync: the same
        // delete files as a writer that reads every file.
        let snap = t.snapshot().await.unwrap();
        crate::iceberg::deletes::assert_deletes_decided_afresh(t.location(), &snap).await;
    }

    // The raw read sees the stored rows.
    let mut raw = QueryEngine::new();
    raw.set_raw(true);
    raw.register_table("t", t, None).await.unwrap();
    let stored: u64 = t
        .snapshot()
        .await
        .unwrap()
        .files
        .values()
        .map(|f| f.rows)
        .sum();
    assert_eq!(
        rows_of(&raw, "SELECT count(*) FROM t").await,
        vec![vec![stored.to_string()]],
        "step {step}: raw count"
    );
}

async fn run(spec: MergeSpec, steps: Vec<Step>) {
    let t = TableBuilder::new(TableLocation::memory("m"))
        .with_seed(3)
        .build();
    let mut fields: Vec<Field> = schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    if matches!(spec, MergeSpec::Aggregate { .. }) {
        fields.push(Field::new("c", DataType::Int64, true));
    }
    t.create(CreateOptions {
        partition_by: parse_spec("g").unwrap(),
        sort_by: vec!["k".into(), "v".into()],
        schema: crate::schema::TableSchema::from_arrow(&Schema::new(fields)).unwrap(),
        merge: Some(spec.clone()),
        // Iceberg readers see the table through position deletes (aggregate cannot be).
        settings: crate::log::TableSettings {
            iceberg: !matches!(spec, MergeSpec::Aggregate { .. }),
            ..Default::default()
        },
    })
    .await
    .unwrap();
    let mut inserts = Vec::new();
    for (i, step) in steps.into_iter().enumerate() {
        // Every other step through a fresh handle, as each CLI command is a fresh process: its
        // Iceberg sync knows only what the store holds, not what the last sync kept.
        let fresh;
        let h = if i % 2 == 1 {
            fresh = TableBuilder::new(t.location().clone())
                .with_seed(1000 + i as u64)
                .build();
            &fresh
        } else {
            &t
        };
        match step {
            Step::Insert(rows) => {
                insert_rows(h, &rows).await;
                inserts.push(rows);
            }
            Step::Merge(per_group) => {
                let opts = MergeOptions {
                    min_files: 2,
                    max_files_per_group: per_group,
                    ..Default::default()
                };
                h.merge(&opts, Arc::new(NoProgress)).await.unwrap();
            }
        }
        check(&t, &spec, &inserts, i).await;
    }
    // A full merge leaves one file per partition, one row per live key.
    let opts = MergeOptions {
        min_files: 2,
        ..Default::default()
    };
    t.merge(&opts, Arc::new(NoProgress)).await.unwrap();
    check(&t, &spec, &inserts, usize::MAX).await;
    // A key's rows are one row (a deleted key's too: a later, lower version must lose to it).
    let keys: std::collections::BTreeSet<(i64, i64)> =
        inserts.iter().flatten().map(|r| (r.g, r.k)).collect();
    for f in t
        .snapshot()
        .await
        .unwrap()
        .files
        .values()
        .filter(|f| f.merged)
    {
        let g: i64 = f.partition_values["g"].as_deref().unwrap().parse().unwrap();
        let n = keys.iter().filter(|(pg, _)| *pg == g).count();
        if matches!(&spec, MergeSpec::Replace { version: None, .. }) {
            // Without versions a merge holding the partition's oldest rows drops deleted
            // keys; one that did not keeps them.
            let live = model(&spec, &inserts)
                .keys()
                .filter(|(pg, _)| *pg == g)
                .count();
            assert!(
                (live..=n).contains(&(f.rows as usize)),
                "after a full merge, partition g={g}: {} rows, {live} live keys of {n}",
                f.rows
            );
        } else {
            assert_eq!(f.rows as usize, n, "after a full merge, partition g={g}");
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn replace_matches_the_model(steps in steps()) {
        let spec = "replace(key = [k], version = v, deleted = del)".parse().unwrap();
        runtime().block_on(run(spec, steps));
    }

    /// Without a version column, a merge that holds a partition's oldest rows drops its
    /// deleted keys.
    #[test]
    fn replace_without_versions_matches_the_model(steps in steps()) {
        let spec = "replace(key = [k], deleted = del)".parse().unwrap();
        runtime().block_on(run(spec, steps));
    }

    #[test]
    fn aggregate_matches_the_model(steps in steps()) {
        let spec = "aggregate(key = [k], max = [v], sum = [x], count = c)".parse().unwrap();
        runtime().block_on(run(spec, steps));
    }

    #[test]
    fn dedupe_matches_the_model(steps in steps()) {
        let spec = "dedupe(key = [k])".parse().unwrap();
        runtime().block_on(run(spec, steps));
    }
}

/// One insert writes three files into a partition (of one commit), the next deletes four of
/// its five keys; a merge of two files a group puts the third file with the deletes. That group
/// does not hold the partition's oldest rows (the other two files are as old): it keeps its
/// tombstones, or the deleted keys of the other two files would be alive again.
#[tokio::test]
async fn a_merge_of_some_files_of_the_oldest_commit_keeps_its_tombstones() {
    let row = |k, del| Row {
        g: 0,
        k,
        v: 0,
        del,
        x: k,
    };
    let steps = vec![
        Step::Insert((0..5).map(|k| row(k, None)).collect()),
        Step::Insert((0..4).map(|k| row(k, Some(true))).collect()),
        Step::Merge(2),
    ];
    run("replace(key = [k], deleted = del)".parse().unwrap(), steps).await;
}

#[tokio::test]
async fn a_spec_change_that_would_change_answers_is_refused() {
    use crate::schema::AlterOp;
    let t = TableBuilder::new(TableLocation::memory("alter")).build();
    t.create(CreateOptions {
        sort_by: vec!["k".into(), "v".into()],
        schema: crate::schema::TableSchema::from_arrow(&schema()).unwrap(),
        ..Default::default()
    })
    .await
    .unwrap();
    let set = |v: &str| AlterOp::parse(&["set".to_string(), format!("merge={v}")]).unwrap();
    // An empty table takes any spec that fits it, and the format version it needs.
    t.alter(&set("dedupe(key = [k])")).await.unwrap();
    let s = t.snapshot().await.unwrap();
    assert_eq!(s.protocol.format_version, 3);
    assert_eq!(s.metadata.merge.as_ref().unwrap().kind(), "dedupe");
    let e = t
        .alter(&set("dedupe(key = [x])"))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("prefix of the sort key"), "{e}");
    let rows = vec![Row {
        g: 0,
        k: 1,
        v: 1,
        del: Some(false),
        x: 1,
    }];
    insert_rows(&t, &rows).await;
    let before = t.snapshot().await.unwrap().version;
    for other in ["replace(key = [k], version = v)", "none"] {
        let e = t.alter(&set(other)).await.unwrap_err().to_string();
        assert!(
            e.contains("would change what reads of them answer"),
            "{other}: {e}"
        );
    }
    assert_eq!(t.snapshot().await.unwrap().version, before);
    // The same spec again changes nothing that reads see.
    t.alter(&set("dedupe(key = [k])")).await.unwrap();
    // Columns the spec names cannot be renamed or dropped.
    let e = t
        .alter(&AlterOp::DropColumn("k".into()))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("merge spec names it"), "{e}");
}

/// An unpartitioned table of `spec` sorted by `k, v`, with three inserts of versions 0, 1 and 2
/// of keys `0..keys` (`x = k * 10 + version`); the last deletes the keys `deleted` picks.
async fn three_versions(name: &str, spec: &str, keys: i64, deleted: fn(i64) -> bool) -> Table {
    let t = TableBuilder::new(TableLocation::memory(name)).build();
    t.create(CreateOptions {
        sort_by: vec!["k".into(), "v".into()],
        schema: crate::schema::TableSchema::from_arrow(&schema()).unwrap(),
        merge: Some(spec.parse().unwrap()),
        ..Default::default()
    })
    .await
    .unwrap();
    for i in 0..3 {
        let rows: Vec<Row> = (0..keys)
            .map(|k| Row {
                g: 0,
                k,
                v: i,
                del: Some(i == 2 && deleted(k)),
                x: k * 10 + i,
            })
            .collect();
        insert_rows(&t, &rows).await;
    }
    t
}

#[tokio::test]
async fn a_large_run_is_merged_in_key_ranges_on_every_core() {
    let t = three_versions("ranges", "replace(key = [k], version = v)", 50, |_| false).await;
    let mut e = QueryEngine::new();
    e.register_table("t", &t, None).await.unwrap();
    let plan = rows_of(&e, "EXPLAIN SELECT count(*), sum(x) FROM t")
        .await
        .concat()
        .join(" ");
    let merges: usize = plan
        .split("merges=")
        .nth(1)
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{plan}"));
    assert!(
        merges > 1,
        "one run of 150 rows, merged in {merges} ranges: {plan}"
    );
    // Every key once, its last version.
    assert_eq!(
        rows_of(&e, "SELECT count(*), sum(x) FROM t").await,
        vec![vec![
            "50".to_string(),
            (0..50).map(|k| k * 10 + 2).sum::<i64>().to_string()
        ]]
    );
}

#[tokio::test]
async fn a_merged_file_with_tombstones_is_read_without_a_merge() {
    // The last of three versions deletes every fourth key.
    let spec = "replace(key = [k], version = v, deleted = del)";
    let t = three_versions("live", spec, 40, |k| k % 4 == 0).await;
    let live: Vec<i64> = (0..40).filter(|k| k % 4 != 0).collect();
    let sum: i64 = live.iter().map(|k| k * 10 + 2).sum();
    async fn explain(e: &QueryEngine, sql: &str) -> String {
        rows_of(e, &format!("EXPLAIN {sql}"))
            .await
            .concat()
            .join(" ")
    }
    let mut e = QueryEngine::new();
    e.register_table("t", &t, None).await.unwrap();
    // Unmerged: lookups go through the merge (their key filter runs on each file's rows
    // first), and find a live key's last version and nothing of a deleted key.
    let plan = explain(&e, "SELECT x FROM t WHERE k = 5").await;
    assert!(plan.contains("NeveMergeExec"), "{plan}");
    assert_eq!(
        rows_of(&e, "SELECT x FROM t WHERE k = 5").await,
        vec![vec!["52".to_string()]]
    );
    assert_eq!(
        rows_of(&e, "SELECT x FROM t WHERE k = 4").await,
        Vec::<Vec<String>>::new()
    );

    t.merge(
        &MergeOptions {
            min_files: 2,
            ..Default::default()
        },
        Arc::new(NoProgress),
    )
    .await
    .unwrap();
    let files = t.snapshot().await.unwrap().files;
    assert_eq!(files.len(), 1);
    assert_eq!(
        files.values().next().unwrap().rows,
        40,
        "tombstones are kept"
    );
    let mut e = QueryEngine::new();
    e.register_table("t", &t, None).await.unwrap();
    for sql in [
        "SELECT count(*), sum(x) FROM t",
        "SELECT count(*) FROM t",
        "SELECT x FROM t WHERE k = 5",
    ] {
        let plan = explain(&e, sql).await;
        assert!(!plan.contains("NeveMergeExec"), "{sql}: {plan}");
    }
    assert_eq!(
        rows_of(&e, "SELECT count(*), sum(x) FROM t").await,
        vec![vec![live.len().to_string(), sum.to_string()]]
    );
    assert_eq!(
        rows_of(&e, "SELECT count(*) FROM t").await,
        vec![vec![live.len().to_string()]]
    );
    assert_eq!(
        rows_of(&e, "SELECT k, x FROM t WHERE k < 6 ORDER BY k").await,
        vec![
            vec!["1".to_string(), "12".to_string()],
            vec!["2".to_string(), "22".to_string()],
            vec!["3".to_string(), "32".to_string()],
            vec!["5".to_string(), "52".to_string()],
        ]
    );
    assert_eq!(
        rows_of(&e, "SELECT * FROM t WHERE k = 8").await,
        Vec::<Vec<String>>::new()
    );
}
