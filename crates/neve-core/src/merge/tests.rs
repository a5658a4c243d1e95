//! Unit tests of merge, GC, drop-partition and delete on the in-memory store.

use std::sync::Arc;

use arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, TimeUnit};
use arrow::row::{RowConverter, SortField};
use object_store::ObjectStoreExt;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use proptest::prelude::*;

use super::*;
use crate::clock::ManualClock;
use crate::gc::GcOptions;
use crate::partition::parse_spec;
use crate::query::QueryEngine;
use crate::storage::TableLocation;
use crate::table::{AsOf, CreateOptions, InsertOptions, TableBuilder};
use crate::write::NoProgress;

const DAY_US: i64 = 86_400_000_000;
const JAN_2021: i64 = 1_609_459_200_000_000;

fn schema(with_fare: bool) -> Arc<Schema> {
    let mut f = vec![
        Field::new("id", DataType::Int64, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        Field::new("kind", DataType::Utf8, true),
    ];
    if with_fare {
        f.push(Field::new("fare", DataType::Int64, true));
    }
    Arc::new(Schema::new(f))
}

/// `n` rows with ids from `first`, spread over the 59 days of 2021-01 and 2021-02, kinds
/// cycling over a, b, null; with a `fare` column (= id) when asked.
fn rows(first: i64, n: i64, with_fare: bool) -> RecordBatch {
    let ids: Vec<i64> = (first..first + n).collect();
    let ts: Vec<i64> = ids
        .iter()
        .map(|i| JAN_2021 + (i * 7919 % 59) * DAY_US + i % 1000)
        .collect();
    let kinds: Vec<Option<&str>> = ids
        .iter()
        .map(|i| [Some("a"), Some("b"), None][(i % 3) as usize])
        .collect();
    let mut cols: Vec<Arc<dyn Array>> = vec![
        Arc::new(Int64Array::from(ids.clone())),
        Arc::new(arrow::array::TimestampMicrosecondArray::from(ts)),
        Arc::new(StringArray::from(kinds)),
    ];
    if with_fare {
        cols.push(Arc::new(Int64Array::from(ids)));
    }
    RecordBatch::try_new(schema(with_fare), cols).unwrap()
}

async fn new_table(name: &str, clock: Option<Arc<ManualClock>>) -> Table {
    new_table_at(TableLocation::memory(name), clock).await
}

async fn new_table_at(location: TableLocation, clock: Option<Arc<ManualClock>>) -> Table {
    let mut b = TableBuilder::new(location).with_seed(7);
    if let Some(c) = clock {
        b = b.with_clock(c);
    }
    let t = b.build();
    let settings = crate::log::TableSettings {
        checkpoint_interval: 4,
        ..Default::default()
    };
    t.create(CreateOptions {
        partition_by: parse_spec("month(ts) as m").unwrap(),
        sort_by: vec!["kind".into(), "ts".into()],
        settings,
        ..Default::default()
    })
    .await
    .unwrap();
    t
}

async fn insert(t: &Table, b: RecordBatch) {
    t.insert_batches(
        b.schema(),
        vec![b],
        &InsertOptions::default(),
        Arc::new(NoProgress),
    )
    .await
    .unwrap();
}

/// A row: (id, fare, ts, kind).
type Row = (i64, Option<i64>, i64, Option<String>);

/// Every row, every column, by id, at `as_of`.
async fn contents(t: &Table, as_of: AsOf) -> Vec<Row> {
    let mut e = QueryEngine::new();
    let snap = t.snapshot_as_of(as_of).await.unwrap();
    e.register_snapshot("t", t.location().clone(), snap)
        .unwrap();
    let mut out = Vec::new();
    for b in e.collect("SELECT * FROM t ORDER BY id").await.unwrap() {
        let ids = b.column_by_name("id").unwrap().as_primitive::<Int64Type>();
        let fares = b
            .column_by_name("fare")
            .map(|f| f.as_primitive::<Int64Type>().clone());
        let ts = b
            .column_by_name("ts")
            .unwrap()
            .as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
        let kinds =
            arrow::compute::cast(b.column_by_name("kind").unwrap(), &DataType::Utf8).unwrap();
        let kinds = kinds.as_string::<i32>();
        for i in 0..b.num_rows() {
            let fare = fares.as_ref().filter(|f| f.is_valid(i)).map(|f| f.value(i));
            let kind = kinds.is_valid(i).then(|| kinds.value(i).to_string());
            out.push((ids.value(i), fare, ts.value(i), kind));
        }
    }
    out
}

/// Every alive file is sorted by (kind, ts), nulls first.
async fn assert_files_sorted(t: &Table) {
    let snap = t.snapshot().await.unwrap();
    for f in snap.files.values() {
        let bytes = t
            .location()
            .store
            .get(&t.location().child(&f.path))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap()
            .build()
            .unwrap();
        let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
        let batch = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
        assert_eq!(batch.num_rows() as u64, f.rows, "{}", f.path);
        let keys = ["kind", "ts"].map(|k| batch.column_by_name(k).unwrap().clone());
        let conv = RowConverter::new(
            keys.iter()
                .map(|k| SortField::new(k.data_type().clone()))
                .collect(),
        )
        .unwrap();
        let r = conv.convert_columns(&keys).unwrap();
        for i in 1..r.num_rows() {
            assert!(r.row(i - 1) <= r.row(i), "{} not sorted at row {i}", f.path);
        }
    }
}

fn opts(min_files: usize) -> MergeOptions {
    MergeOptions {
        min_files,
        ..Default::default()
    }
}

#[tokio::test]
async fn merge_keeps_rows_order_and_history() {
    let t = new_table("merge", None).await;
    // Ten inserts; the first four lack the `fare` column (added later: nulls in old files).
    for i in 0..10 {
        insert(&t, rows(i * 100, 100, i >= 4)).await;
    }
    let before_version = t.snapshot().await.unwrap().version;
    let before = contents(&t, AsOf::Latest).await;
    assert_eq!(before.len(), 1000);
    let files_before = t.snapshot().await.unwrap().files.len();
    assert_eq!(files_before, 20, "10 inserts × 2 months");

    let plan = t.plan_merge(&opts(4)).await.unwrap();
    assert_eq!(plan.groups.len(), 2);
    assert_eq!(plan.files(), 20);
    let report = t.merge(&opts(4), Arc::new(NoProgress)).await.unwrap();
    assert_eq!(report.files_in, 20);
    assert_eq!(report.files_out, 2);
    assert_eq!(report.rows, 1000);
    assert_eq!(report.partitions, 2);
    let snap = t.snapshot().await.unwrap();
    assert_eq!(snap.files.len(), 2);
    assert_eq!(snap.rows(), 1000);
    assert_eq!(snap.tombstones.len(), 20);
    assert_eq!(contents(&t, AsOf::Latest).await, before);
    assert_files_sorted(&t).await;
    // Statistics of the merged files are exact: ids 0..999 across both months.
    let ids: Vec<_> = snap.files.values().map(|f| f.stats["id"].clone()).collect();
    let mins: Vec<i64> = ids
        .iter()
        .map(|s| s.min.as_ref().unwrap().as_i64().unwrap())
        .collect();
    let maxs: Vec<i64> = ids
        .iter()
        .map(|s| s.max.as_ref().unwrap().as_i64().unwrap())
        .collect();
    assert_eq!(mins.iter().min(), Some(&0));
    assert_eq!(maxs.iter().max(), Some(&999));
    assert_eq!(
        snap.files
            .values()
            .map(|f| f.stats["fare"].nulls)
            .sum::<u64>(),
        400
    );
    // Time travel to before the merge still reads the small files.
    assert_eq!(contents(&t, AsOf::Version(before_version)).await, before);
    let history = t.history(None).await.unwrap();
    let last = history.last().unwrap();
    assert_eq!(last.info.operation, "MERGE");
    assert_eq!(last.info.summary.rows_added, last.info.summary.rows_removed);
    // Nothing left to merge.
    let again = t.merge(&opts(4), Arc::new(NoProgress)).await.unwrap();
    assert_eq!(again.version, None);
}

#[tokio::test]
async fn planner_is_size_tiered_and_capped() {
    let t = new_table("plan", None).await;
    for i in 0..6 {
        insert(&t, rows(i * 100, 100, true)).await;
    }
    let snap = t.snapshot().await.unwrap();
    let sizes: Vec<u64> = snap.files.values().map(|f| f.size).collect();
    let largest = *sizes.iter().max().unwrap();
    // Target below every file: nothing to merge.
    let p = plan(
        &snap,
        &MergeOptions {
            target_file_size: 1,
            min_files: 2,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(p.groups.is_empty());
    // Target of about three files: groups of at most that size.
    let target = largest * 3 + 1;
    let p = plan(
        &snap,
        &MergeOptions {
            target_file_size: target,
            min_files: 2,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(p.groups.len() >= 4, "{:?}", p.groups);
    assert!(p.groups.iter().all(|g| g.bytes <= target && g.files >= 2));
    // min_files above what a partition holds: nothing.
    let p = plan(&snap, &opts(7)).unwrap();
    assert!(p.groups.is_empty());
    // Order and cap: newest partition first, the other deferred.
    let p = plan(
        &snap,
        &MergeOptions {
            max_input_bytes: 1,
            min_files: 2,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(p.groups.len(), 1);
    assert_eq!(p.groups[0].partition, "m=2021-02");
    assert_eq!(p.deferred_partitions, 1);
    let p = plan(
        &snap,
        &MergeOptions {
            max_input_bytes: 1,
            min_files: 2,
            order: MergeOrder::Oldest,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(p.groups[0].partition, "m=2021-01");
    // One partition only; an unknown one is an error naming the known ones.
    let p = plan(
        &snap,
        &MergeOptions {
            partitions: vec!["m=2021-01".into()],
            min_files: 2,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(p.groups.iter().all(|g| g.partition == "m=2021-01"));
    let e = plan(
        &snap,
        &MergeOptions {
            partitions: vec!["m=2030-01".into()],
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(matches!(e, Error::PartitionNotFound { .. }), "{e}");
    assert!(e.to_string().contains("m=2021-01"), "{e}");
}

#[tokio::test]
async fn racing_mergers_never_duplicate_rows() {
    let a = new_table("race", None).await;
    for i in 0..8 {
        insert(&a, rows(i * 50, 50, true)).await;
    }
    let b = TableBuilder::new(a.location().clone())
        .with_seed(99)
        .build();
    let before = contents(&a, AsOf::Latest).await;
    let o = opts(2);
    let (ra, rb) = tokio::join!(
        a.merge(&o, Arc::new(NoProgress)),
        b.merge(&o, Arc::new(NoProgress))
    );
    let committed = [&ra, &rb]
        .iter()
        .filter(|r| {
            matches!(
                r,
                Ok(MergeReport {
                    version: Some(_),
                    ..
                })
            )
        })
        .count();
    assert!(committed >= 1, "{ra:?} {rb:?}");
    for r in [&ra, &rb] {
        match r {
            Ok(_) => {}
            Err(Error::CommitConflict { .. }) => {}
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!(contents(&a, AsOf::Latest).await, before);
    // Outputs of a merge that lost are deleted, not left as orphans... and alive files exist.
    let snap = a.snapshot().await.unwrap();
    assert_eq!(snap.rows(), 400);
}

#[tokio::test]
async fn gc_deletes_tombstones_orphans_and_old_log_after_grace_and_retention() {
    let now = chrono::Utc::now().timestamp_millis();
    let clock = ManualClock::new(now);
    let t = new_table("gc", Some(clock.clone())).await;
    // A handle that read the table once and then idles past the retention (a server's or
    // proxy's cache).
    let idle = TableBuilder::new(t.location().clone()).build();
    assert_eq!(idle.snapshot().await.unwrap().version, 0);
    for i in 0..6 {
        insert(&t, rows(i * 100, 100, true)).await;
        clock.advance(1000);
    }
    t.merge(&opts(2), Arc::new(NoProgress)).await.unwrap();
    let merged_version = t.snapshot().await.unwrap().version;
    // An orphan: a file no commit names (a killed insert).
    let orphan = t.location().child("_data/m=2021-01/part-orphan.parquet");
    t.location()
        .store
        .put(&orphan, vec![1u8; 10].into())
        .await
        .unwrap();
    let stored = || async {
        use futures::TryStreamExt;
        let l: Vec<_> = t
            .location()
            .store
            .list(Some(&t.location().child("_data")))
            .try_collect()
            .await
            .unwrap();
        l.len()
    };
    assert_eq!(stored().await, 12 + 2 + 1);

    // Within the grace period: nothing goes.
    let r = t.gc(&GcOptions::default()).await.unwrap();
    assert_eq!(
        (
            r.tombstones_deleted,
            r.orphans_deleted,
            r.log_entries_deleted
        ),
        (0, 0, 0)
    );
    assert_eq!((r.tombstones_kept, r.orphans_kept), (12, 1));

    // Two hours later: the orphan goes; tombstones stay for time travel (retention 7 days).
    clock.advance(2 * 3_600_000);
    let r = t
        .gc(&GcOptions {
            dry_run: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(r.orphans_deleted, 1);
    assert_eq!(stored().await, 15, "a dry run deletes nothing");
    let r = t.gc(&GcOptions::default()).await.unwrap();
    assert_eq!((r.tombstones_deleted, r.orphans_deleted), (0, 1));
    assert_eq!(stored().await, 14);
    assert_eq!(
        contents(&t, AsOf::Version(merged_version - 1)).await.len(),
        600
    );

    // Past the retention: tombstones and log entries before the newest old checkpoint go;
    // twice in a row (and concurrently) is fine.
    clock.advance(8 * 24 * 3_600_000);
    let g = GcOptions::default();
    let (r1, r2) = tokio::join!(t.gc(&g), t.gc(&g));
    let (r1, r2) = (r1.unwrap(), r2.unwrap());
    // Whichever listed first deletes them; the other may see them too (deleting twice is fine).
    assert_eq!(r1.tombstones_deleted.max(r2.tombstones_deleted), 12);
    assert_eq!(stored().await, 2);
    assert!(r1.log_entries_deleted.max(r2.log_entries_deleted) > 0);
    assert_eq!(r1.oldest_version, 4);
    assert_eq!(contents(&t, AsOf::Latest).await.len(), 600);
    let e = t.snapshot_as_of(AsOf::Version(1)).await.unwrap_err();
    assert!(matches!(e, Error::VersionNotFound { .. }), "{e}");
    // Versions from the kept checkpoint on still open (their data is past the retention).
    assert_eq!(
        t.snapshot_as_of(AsOf::Version(5)).await.unwrap().rows(),
        500
    );
    // A fresh handle opens the table from the checkpoints left.
    let fresh = TableBuilder::new(t.location().clone()).build();
    assert_eq!(fresh.snapshot().await.unwrap().rows(), 600);
    // The idle handle's next commits were cleaned: it opens the table afresh, not "corrupt".
    assert_eq!(idle.snapshot().await.unwrap().rows(), 600);
}

/// A table that keeps no history (retention 0): checkpoints keep a removed file's tombstone
/// for the grace all the same, so a merge's inputs outlive the grace (readers in flight may
/// hold them) instead of being deleted as orphans at the next checkpoint; a run asked to keep
/// files longer than the table records them is refused.
#[tokio::test]
async fn removed_files_outlive_the_grace_in_a_table_without_history() {
    let clock = ManualClock::new(chrono::Utc::now().timestamp_millis());
    let t = TableBuilder::new(TableLocation::memory("nohistory"))
        .with_seed(7)
        .with_clock(clock.clone())
        .build();
    t.create(CreateOptions {
        partition_by: parse_spec("month(ts) as m").unwrap(),
        sort_by: vec!["kind".into(), "ts".into()],
        settings: crate::log::TableSettings {
            checkpoint_interval: 1,
            log_retention_hours: 0,
            ..Default::default()
        },
        ..Default::default()
    })
    .await
    .unwrap();
    for i in 0..3 {
        insert(&t, rows(i * 100, 100, true)).await;
    }
    // The inputs are older than the grace when the merge removes them.
    clock.advance(2 * 3_600_000);
    t.merge(&opts(2), Arc::new(NoProgress)).await.unwrap();
    // Half an hour later another commit checkpoints the table.
    clock.advance(1_800_000);
    insert(&t, rows(1000, 10, true)).await;
    let r = t.gc(&GcOptions::default()).await.unwrap();
    assert_eq!((r.tombstones_deleted, r.orphans_deleted), (0, 0));
    assert_eq!(r.tombstones_kept, 6);
    assert_eq!(contents(&t, AsOf::Latest).await.len(), 310);

    let e = t
        .gc(&GcOptions {
            retention_ms: Some(2 * 3_600_000),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::InvalidSetting { ref name, .. } if name == "retention"),
        "{e}"
    );

    // Past the grace they go.
    clock.advance(3_600_000);
    let r = t.gc(&GcOptions::default()).await.unwrap();
    assert_eq!(r.tombstones_deleted + r.orphans_deleted, 6);
    assert_eq!(contents(&t, AsOf::Latest).await.len(), 310);
}

/// A PUT cut off by a crash leaves its staging file on a local folder, which no listing shows:
/// gc removes it once past the grace, and never an object whose name has a `#`.
#[tokio::test]
async fn gc_removes_interrupted_uploads_on_a_local_folder() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(chrono::Utc::now().timestamp_millis());
    let location = TableLocation::local("t", dir.path()).unwrap();
    let t = new_table_at(location, Some(clock.clone())).await;
    insert(&t, rows(0, 100, true)).await;
    let root = dir.path();
    let staged = [
        root.join("_data/m=2021-01/part-cut.parquet#4294967296"),
        root.join("_log/00000000000000000009.json#17"),
        root.join("metadata/snap-1.avro#3"),
    ];
    for (i, p) in staged.iter().enumerate() {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, vec![7u8; 100 * (i + 1)]).unwrap();
    }
    // An object whose name has a `#` (not only digits after it) is not a staging file.
    let object = t.location().child("_data/m=2021-01/notes#v2");
    t.location()
        .store
        .put(&object, vec![1u8; 5].into())
        .await
        .unwrap();
    let before = contents(&t, AsOf::Latest).await;

    let r = t.gc(&GcOptions::default()).await.unwrap();
    assert_eq!(r.interrupted_uploads_deleted, 0, "within the grace");
    assert!(staged.iter().all(|p| p.exists()));

    clock.advance(2 * 3_600_000);
    let dry = GcOptions {
        dry_run: true,
        ..Default::default()
    };
    let r = t.gc(&dry).await.unwrap();
    assert_eq!(
        (r.interrupted_uploads_deleted, r.interrupted_upload_bytes),
        (3, 600)
    );
    assert!(
        staged.iter().all(|p| p.exists()),
        "a dry run deletes nothing"
    );
    let r = t.gc(&GcOptions::default()).await.unwrap();
    assert_eq!(
        (r.interrupted_uploads_deleted, r.interrupted_upload_bytes),
        (3, 600)
    );
    assert!(staged.iter().all(|p| !p.exists()));
    // The `#v2` object is an orphan like any other unreferenced file, found by its listing.
    assert_eq!(r.orphans_deleted, 1);
    assert_eq!(contents(&t, AsOf::Latest).await, before);
    let r = t.gc(&GcOptions::default()).await.unwrap();
    assert_eq!(r.interrupted_uploads_deleted, 0);
}

#[tokio::test]
async fn drop_partition_is_atomic_and_time_travel_keeps_it() {
    let t = new_table("drop", None).await;
    for i in 0..3 {
        insert(&t, rows(i * 100, 100, true)).await;
    }
    let before = t.snapshot().await.unwrap();
    let jan = before.partitions()["m=2021-01"];
    let r = t.drop_partitions(&["2021-01".into()]).await.unwrap();
    assert_eq!(r.files, jan.0);
    assert_eq!(r.rows, jan.1);
    let after = t.snapshot().await.unwrap();
    assert_eq!(after.version, before.version + 1);
    assert!(!after.partitions().contains_key("m=2021-01"));
    assert_eq!(after.rows(), 300 - jan.1);
    assert_eq!(contents(&t, AsOf::Version(before.version)).await.len(), 300);
    // Unknown partition: an error naming what exists, nothing committed.
    let e = t.drop_partitions(&["m=2021-01".into()]).await.unwrap_err();
    assert!(matches!(e, Error::PartitionNotFound { .. }), "{e}");
    assert!(e.to_string().contains("m=2021-02"), "{e}");
    assert_eq!(t.snapshot().await.unwrap().version, after.version);
}

#[tokio::test]
async fn delete_rewrites_only_affected_files() {
    let t = new_table("delete", None).await;
    for i in 0..4 {
        insert(&t, rows(i * 100, 100, true)).await;
    }
    let before = t.snapshot().await.unwrap();
    // ids 0..99 are exactly the first insert's two files: removed whole, nothing rewritten.
    let r = t.delete("id < 100", 2, Arc::new(NoProgress)).await.unwrap();
    assert_eq!(
        (r.rows_deleted, r.files_removed, r.files_rewritten),
        (100, 2, 0)
    );
    // Odd ids of the second insert: its files are rewritten; the others are untouched.
    let r = t
        .delete(
            "id BETWEEN 100 AND 199 AND id % 2 = 1",
            2,
            Arc::new(NoProgress),
        )
        .await
        .unwrap();
    assert_eq!(
        (r.rows_deleted, r.files_removed, r.files_rewritten),
        (50, 0, 2)
    );
    let left = contents(&t, AsOf::Latest).await;
    assert_eq!(left.len(), 250);
    assert!(left
        .iter()
        .all(|(id, ..)| *id >= 100 && (*id >= 200 || id % 2 == 0)));
    assert_files_sorted(&t).await;
    // Nothing matches: nothing committed.
    let v = t.snapshot().await.unwrap().version;
    let r = t
        .delete("id > 100000", 2, Arc::new(NoProgress))
        .await
        .unwrap();
    assert_eq!((r.version, r.rows_deleted), (None, 0));
    // Rows where the predicate is NULL stay (kind is null for a third of the rows).
    let r = t
        .delete("kind <> 'a'", 2, Arc::new(NoProgress))
        .await
        .unwrap();
    assert!(r.rows_deleted > 0);
    let kinds = {
        let mut e = QueryEngine::new();
        e.register_snapshot("t", t.location().clone(), t.snapshot().await.unwrap())
            .unwrap();
        e.collect("SELECT count(*) FILTER (WHERE kind = 'a'), count(*) FILTER (WHERE kind IS NULL), count(*) FROM t")
            .await
            .unwrap()
    };
    let c = |i: usize| kinds[0].column(i).as_primitive::<Int64Type>().value(0);
    assert_eq!(c(0) + c(1), c(2));
    assert!(c(1) > 0);
    // Time travel to before the deletes.
    assert_eq!(contents(&t, AsOf::Version(before.version)).await.len(), 400);
    // Bad predicates: clear errors, nothing committed.
    let v2 = t.snapshot().await.unwrap().version;
    assert!(v2 > v);
    for (bad, what) in [
        ("nosuch = 1", "nosuch"),
        ("id +", "SQL"),
        ("id + 1", "boolean"),
        ("kind + 1 > 0", ""),
    ] {
        let e = t.delete(bad, 2, Arc::new(NoProgress)).await.unwrap_err();
        assert_eq!(e.exit_code(), 65, "{bad}: {e}");
        assert!(e.to_string().contains(what), "{bad}: {e}");
    }
    assert_eq!(t.snapshot().await.unwrap().version, v2);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Any set of files (sizes, nulls, some without a column) merges into sorted files with
    /// exactly the same rows.
    #[test]
    fn merge_preserves_rows_and_order(sizes in proptest::collection::vec((1i64..60, any::<bool>()), 2..7)) {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let t = new_table("prop", None).await;
            let mut first = 0;
            for (n, fare) in &sizes {
                insert(&t, rows(first, *n, *fare)).await;
                first += n + 1000;
            }
            let before = contents(&t, AsOf::Latest).await;
            t.merge(&opts(2), Arc::new(NoProgress)).await.unwrap();
            assert_eq!(contents(&t, AsOf::Latest).await, before);
            assert_files_sorted(&t).await;
            let snap = t.snapshot().await.unwrap();
            for m in ["m=2021-01", "m=2021-02"] {
                let files = snap.partitions().get(m).map(|p| p.0).unwrap_or(0);
                assert!(files <= 1, "{m}: {files} files after merging");
            }
        });
    }
}

#[tokio::test]
async fn delete_racing_a_merge_loses_no_deletion_and_no_row() {
    for seed in 0..4u64 {
        let a = new_table("race-del", None).await;
        for i in 0..6 {
            insert(&a, rows(i * 100, 100, true)).await;
        }
        let b = TableBuilder::new(a.location().clone())
            .with_seed(seed + 100)
            .build();
        let o = opts(2);
        let (m, d) = tokio::join!(
            a.merge(&o, Arc::new(NoProgress)),
            b.delete("id % 5 = 0", 2, Arc::new(NoProgress))
        );
        match m {
            Ok(_) | Err(Error::CommitConflict { .. }) => {}
            Err(e) => panic!("merge: {e}"),
        }
        assert_eq!(d.unwrap().rows_deleted, 120);
        let left = contents(&a, AsOf::Latest).await;
        let expect: Vec<i64> = (0..600).filter(|i| i % 5 != 0).collect();
        assert_eq!(left.iter().map(|(id, ..)| *id).collect::<Vec<_>>(), expect);
    }
}

/// Maintenance claims (written by `neve serve` and `neve maintain`) that their holders left
/// behind go once their minute is well past; a live one, and anything else, stays.
#[tokio::test]
async fn gc_deletes_claims_of_minutes_long_past() {
    use futures::TryStreamExt;
    let now = chrono::Utc::now().timestamp_millis();
    let clock = ManualClock::new(now);
    let t = new_table("claims", Some(clock.clone())).await;
    let minute = now / 60_000;
    let names = [
        format!("claim-{}", minute - 3),
        format!("claim-{}", minute - 1),
        format!("claim-{minute}"),
        "notes".to_string(),
    ];
    for n in &names {
        let p = t.location().child(&format!("_maintenance/{n}"));
        t.location()
            .store
            .put(&p, vec![b'{', b'}'].into())
            .await
            .unwrap();
    }
    let left = || async {
        let mut l: Vec<String> = t
            .location()
            .store
            .list(Some(&t.location().child("_maintenance")))
            .map_ok(|o| o.location.filename().unwrap().to_string())
            .try_collect()
            .await
            .unwrap();
        l.sort();
        l
    };
    let r = t
        .gc(&GcOptions {
            dry_run: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(r.claims_deleted, 1);
    assert_eq!(left().await.len(), 4, "a dry run deletes nothing");
    let r = t.gc(&GcOptions::default()).await.unwrap();
    assert_eq!(r.claims_deleted, 1);
    assert_eq!(left().await, names[1..].to_vec());
}
