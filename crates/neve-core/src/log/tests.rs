//! Unit tests of the log on the in-memory store, and golden files for the on-disk format.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use object_store::ObjectStoreExt;

use super::actions::{from_json_lines, to_json_lines};
use super::*;
use crate::clock::ManualClock;
use crate::partition::parse_spec;
use crate::storage::TableLocation;
use crate::table::{AsOf, CreateOptions, InsertOptions, Table, TableBuilder};
use crate::write::NoProgress;

const T0: i64 = 1_700_000_000_000;

fn table(clock: Arc<ManualClock>) -> Table {
    TableBuilder::new(TableLocation::memory("t"))
        .with_clock(clock)
        .with_seed(7)
        .with_writer("neve/test")
        .build()
}

fn batch(ids: &[i64], region: &str) -> (Arc<Schema>, RecordBatch) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("region", DataType::Utf8, true),
    ]));
    let b = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())),
            Arc::new(StringArray::from(vec![region; ids.len()])),
        ],
    )
    .unwrap();
    (schema, b)
}

/// A created table on a manual clock, checkpointed every `interval` versions.
async fn checkpointed(interval: u64) -> (Arc<ManualClock>, Table) {
    let clock = ManualClock::new(T0);
    let t = table(clock.clone());
    let opts = CreateOptions {
        settings: TableSettings {
            checkpoint_interval: interval,
            ..Default::default()
        },
        ..Default::default()
    };
    t.create(opts).await.unwrap();
    (clock, t)
}

async fn insert(t: &Table, ids: &[i64], region: &str) -> crate::InsertReport {
    let (s, b) = batch(ids, region);
    t.insert_batches(s, vec![b], &InsertOptions::default(), Arc::new(NoProgress))
        .await
        .unwrap()
}

fn golden(name: &str, actual: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var("UPDATE_GOLDEN").is_ok() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("missing golden file {}", path.display()));
    assert_eq!(
        actual, expected,
        "golden file {name} differs (UPDATE_GOLDEN=1 to accept a deliberate format change)"
    );
}

#[tokio::test]
async fn golden_create_commit() {
    let t = table(ManualClock::new(T0));
    let opts = CreateOptions {
        partition_by: parse_spec("identity(region)").unwrap(),
        sort_by: vec!["id".into()],
        ..Default::default()
    };
    t.create(opts).await.unwrap();
    let bytes = t
        .location()
        .store
        .get(&t.log().commit_path(0))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    golden(
        "00000000000000000000.json",
        std::str::from_utf8(&bytes).unwrap(),
    );
}

fn sample_add() -> AddFile {
    let mut stats = BTreeMap::new();
    stats.insert(
        "id".into(),
        ColumnStats {
            min: Some(1.into()),
            max: Some(3.into()),
            nulls: 0,
        },
    );
    stats.insert(
        "ts".into(),
        ColumnStats {
            min: Some("2021-08-01T00:00:00.000000".into()),
            max: Some("2021-08-31T23:45:00.000000".into()),
            nulls: 2,
        },
    );
    AddFile {
        path: "_data/d=2021-08/part-00000000-0000-4000-8000-000000000001.parquet".into(),
        partition_values: [("d".to_string(), Some("2021-08".to_string()))].into(),
        size: 2048,
        rows: 3,
        modification_time: T0,
        stats,
        seq: None,
        merged: false,
        added_version: None,
    }
}

#[test]
fn golden_insert_commit() {
    let add = sample_add();
    let remove = RemoveFile {
        path: "_data/d=2021-07/part-old.parquet".into(),
        deletion_timestamp: T0 + 1,
        size: Some(100),
        rows: Some(1),
    };
    let actions = vec![
        Action::CommitInfo(CommitInfo {
            timestamp: T0 + 1,
            operation: "INSERT".into(),
            commit_id: "00000000-0000-4000-8000-0000000000aa".into(),
            writer: "neve/test".into(),
            read_version: Some(0),
            requests: Vec::new(),
            summary: CommitSummary {
                partitions: Some(vec![
                    PartitionTotals {
                        values: [("d".to_string(), Some("2021-07".to_string()))].into(),
                        files: -1,
                        rows: -1,
                        bytes: -100,
                    },
                    PartitionTotals {
                        values: [("d".to_string(), Some("2021-08".to_string()))].into(),
                        files: 1,
                        rows: 3,
                        bytes: 2048,
                    },
                ]),
                ..CommitSummary::of(&[Action::Add(add.clone()), Action::Remove(remove.clone())])
            },
        }),
        Action::Add(add),
        Action::Remove(remove),
    ];
    let text = String::from_utf8(to_json_lines(&actions)).unwrap();
    golden("00000000000000000001.json", &text);
    // And the golden file parses back to the same actions (readers of old tables keep working).
    assert_eq!(from_json_lines("golden", text.as_bytes()).unwrap(), actions);
}

#[tokio::test]
async fn golden_checkpoint() {
    let (clock, t) = checkpointed(2).await;
    clock.advance(1000);
    insert(&t, &[1, 2], "eu").await;
    clock.advance(1000);
    insert(&t, &[3], "us").await;
    let bytes = t
        .location()
        .store
        .get(&t.log().checkpoint_path(2))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let text = std::str::from_utf8(&bytes).unwrap();
    // Data file sizes depend on the Parquet encoder; blank them so the format is what is pinned.
    let normalized: String = text
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if let Some(add) = v.get_mut("add") {
                add["size"] = 0.into();
            }
            v.to_string() + "\n"
        })
        .collect();
    golden("00000000000000000002.checkpoint.json", &normalized);
}

#[tokio::test]
async fn create_twice_is_an_error() {
    let t = table(ManualClock::new(T0));
    t.create(CreateOptions::default()).await.unwrap();
    assert!(matches!(
        t.create(CreateOptions::default()).await,
        Err(crate::Error::TableExists { .. })
    ));
}

#[tokio::test]
async fn checkpoints_bound_what_opening_reads() {
    let (clock, t) = checkpointed(3).await;
    for i in 0..8 {
        clock.advance(10);
        insert(&t, &[i], "eu").await;
    }
    let log = t.log();
    assert_eq!(log.read_pointer().await.unwrap(), Some(6));
    let listing = log.list(Some(6)).await.unwrap();
    assert_eq!(
        listing.commits.iter().copied().collect::<Vec<_>>(),
        vec![6, 7, 8],
        "only the tail is listed"
    );
    let latest = t.snapshot().await.unwrap();
    assert_eq!(latest.version, 8);
    assert_eq!(latest.rows(), 8);
    // Replaying from version 0 gives the same state as checkpoint + tail.
    for v in 0..=8 {
        let s = t.snapshot_as_of(AsOf::Version(v)).await.unwrap();
        assert_eq!(s.version, v);
        assert_eq!(s.rows(), v);
    }
    // Removing the old commits does not prevent opening the latest snapshot.
    for v in 0..6 {
        t.location()
            .store
            .delete(&log.commit_path(v))
            .await
            .unwrap();
    }
    assert_eq!(t.snapshot().await.unwrap().files, latest.files);
    assert!(matches!(
        t.snapshot_as_of(AsOf::Version(2)).await,
        Err(crate::Error::VersionNotFound { .. })
    ));
}

#[tokio::test]
async fn time_travel_by_timestamp() {
    let clock = ManualClock::new(T0);
    let t = table(clock.clone());
    t.create(CreateOptions::default()).await.unwrap();
    for i in 0..5 {
        clock.advance(1000);
        insert(&t, &[i], "eu").await;
    }
    // Version v was committed at T0 + 1000 * v.
    for v in 0..=5u64 {
        let s = t
            .snapshot_as_of(AsOf::Timestamp(T0 + 1000 * v as i64 + 500))
            .await
            .unwrap();
        assert_eq!(s.version, v);
    }
    assert!(matches!(
        t.snapshot_as_of(AsOf::Timestamp(T0 - 1)).await,
        Err(crate::Error::TimestampNotFound { .. })
    ));
    // A clock that goes backwards still yields increasing commit timestamps.
    clock.set(T0);
    insert(&t, &[9], "eu").await;
    let h = t.history(None).await.unwrap();
    assert!(h
        .windows(2)
        .all(|w| w[0].info.timestamp < w[1].info.timestamp));
}

#[tokio::test]
async fn stale_writer_retries_on_the_next_version() {
    let clock = ManualClock::new(T0);
    let t = table(clock.clone());
    t.create(CreateOptions::default()).await.unwrap();
    let mut stale = t.snapshot().await.unwrap();
    insert(&t, &[1], "eu").await;
    insert(&t, &[2], "eu").await;
    let committer = Committer::new(
        t.log().clone(),
        clock,
        Arc::new(std::sync::Mutex::new(
            <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(1),
        )),
        "neve/test".into(),
    );
    let mut prepared_at = Vec::new();
    let out = committer
        .commit(&mut stale, "INSERT", |s| {
            prepared_at.push(s.version);
            Ok(vec![])
        })
        .await
        .unwrap();
    assert_eq!(out.version, 3);
    assert_eq!(out.attempts, 2);
    assert_eq!(
        prepared_at,
        vec![0, 2],
        "prepare re-ran against the caught-up snapshot"
    );
    assert_eq!(stale.version, 3);
}

#[tokio::test]
async fn schema_conflict_commits_nothing() {
    let t = table(ManualClock::new(T0));
    t.create(CreateOptions::default()).await.unwrap();
    insert(&t, &[1], "eu").await;
    let schema = Arc::new(Schema::new(vec![Field::new(
        "region",
        DataType::Int64,
        true,
    )]));
    let b =
        RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(vec![5]))]).unwrap();
    let err = t
        .insert_batches(
            schema,
            vec![b],
            &InsertOptions::default(),
            Arc::new(NoProgress),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, crate::Error::SchemaConflict { ref column, .. } if column == "region"),
        "{err}"
    );
    assert_eq!(t.snapshot().await.unwrap().version, 1);
}

#[test]
fn statistics_follow_renames_and_drops_of_their_column() {
    use std::collections::{BTreeMap, HashMap};
    let stat = |n: u64| ColumnStats {
        min: None,
        max: None,
        nulls: n,
    };
    let f = AddFile {
        path: "_data/p.parquet".into(),
        partition_values: BTreeMap::new(),
        size: 1,
        rows: 1,
        modification_time: 0,
        stats: BTreeMap::from([
            ("user".to_string(), stat(1)),
            ("user.plan".to_string(), stat(2)),
            ("a.b".to_string(), stat(3)),
            ("gone".to_string(), stat(4)),
            ("kept".to_string(), stat(5)),
        ]),
        seq: None,
        added_version: None,
        merged: false,
    };
    let changes = HashMap::from([
        // Every path under a renamed struct moves (`TableSchema::renames_and_drops`).
        ("user".to_string(), Some("customer".to_string())),
        ("user.plan".to_string(), Some("customer.plan".to_string())),
        ("a.b".to_string(), Some("ab".to_string())),
        ("gone".to_string(), None),
    ]);
    let out = crate::log::rekey_stats(&f, &changes);
    let keys: Vec<(&str, u64)> = out
        .stats
        .iter()
        .map(|(k, s)| (k.as_str(), s.nulls))
        .collect();
    assert_eq!(
        keys,
        vec![
            ("ab", 3),
            ("customer", 1),
            ("customer.plan", 2),
            ("kept", 5)
        ]
    );
}

#[tokio::test]
async fn request_keys_are_committed_once_and_forgotten_after_they_expire() {
    let clock = ManualClock::new(T0);
    let t = table(clock.clone());
    t.create(CreateOptions {
        settings: TableSettings {
            checkpoint_interval: 2,
            ..Default::default()
        },
        ..Default::default()
    })
    .await
    .unwrap();
    let keyed = |key: &str| InsertOptions {
        requests: vec![RequestKey {
            key: key.into(),
            rows: 2,
            expires: T0 + 60_000,
            digest: Some(format!("digest of {key}")),
        }],
        ..Default::default()
    };
    let (s, b) = batch(&[1, 2], "eu");
    let first = t
        .insert_batches(
            s.clone(),
            vec![b.clone()],
            &keyed("k1"),
            Arc::new(NoProgress),
        )
        .await
        .unwrap();
    // Other commits, and a checkpoint (every 2 versions), come between.
    insert(&t, &[3], "us").await;
    insert(&t, &[4], "us").await;
    // A fresh handle (reading the checkpoint) refuses the same key, committing nothing.
    let fresh = TableBuilder::new(t.location().clone())
        .with_clock(clock.clone())
        .build();
    let before = fresh.snapshot().await.unwrap();
    assert_eq!(
        before.request("k1").unwrap().version,
        first.version.unwrap()
    );
    // The fingerprint survives the checkpoint, to tell a retry from a reused key.
    assert_eq!(
        before.request("k1").unwrap().digest.as_deref(),
        Some("digest of k1")
    );
    let e = fresh
        .insert_batches(
            s.clone(),
            vec![b.clone()],
            &keyed("k1"),
            Arc::new(NoProgress),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e, crate::Error::RequestCommitted { version, rows: 2, ref digest, .. } if Some(version) == first.version && digest.as_deref() == Some("digest of k1")),
        "{e:?}"
    );
    let after = fresh.snapshot().await.unwrap();
    assert_eq!(
        (after.version, after.rows()),
        (before.version, before.rows())
    );
    // Once expired, the key is forgotten: the same request is new again.
    clock.advance(61_000);
    insert(&t, &[5], "us").await;
    assert!(t.snapshot().await.unwrap().request("k1").is_none());
    let again = t
        .insert_batches(s, vec![b], &keyed("k1"), Arc::new(NoProgress))
        .await
        .unwrap();
    assert!(again.version > first.version);
}

#[test]
fn maintenance_settings_parse_unset_and_stay_out_of_the_log_until_set() {
    let mut s = TableSettings::default();
    // Unset, they are not written: logs of tables that never set them are unchanged.
    let json = serde_json::to_string(&s).unwrap();
    assert!(!json.contains("merge"), "{json}");
    s.set("merge_min_files", "4").unwrap();
    s.set("merge_target_file_size", "64MiB").unwrap();
    s.set("maintenance_interval", "10s").unwrap();
    s.set("gc_grace", "0s").unwrap();
    assert_eq!(s.merge_min_files, Some(4));
    assert_eq!(s.merge_target_file_size, Some(64 << 20));
    assert_eq!(s.maintenance_interval_seconds, Some(10));
    assert_eq!(s.gc_grace_seconds, Some(0));
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["mergeMinFiles"], 4);
    assert_eq!(json["maintenanceIntervalSeconds"], 10);
    let back: TableSettings = serde_json::from_value(json).unwrap();
    assert_eq!(back, s);
    s.set("merge_min_files", "default").unwrap();
    assert_eq!(s.merge_min_files, None);
    for (k, v) in [
        ("merge_min_files", "1"),
        ("merge_min_files", "many"),
        ("merge_target_file_size", "0"),
        ("merge_target_file_size", "big"),
        ("maintenance_interval", "10ms"),
        ("gc_grace", "soon"),
    ] {
        let e = s.clone().set(k, v).unwrap_err();
        assert!(
            e.to_string().contains(k) && e.to_string().contains(v),
            "{e}"
        );
    }
}

/// A clock that moves `step_ms` forward each time it is read: an insert that takes long.
#[derive(Debug)]
struct SlowClock {
    now: std::sync::atomic::AtomicI64,
    step_ms: i64,
}

impl crate::clock::Clock for SlowClock {
    fn now_millis(&self) -> i64 {
        self.now
            .fetch_add(self.step_ms, std::sync::atomic::Ordering::SeqCst)
    }
}

/// A table whose clock reads 10 s later at every read, so any write spans at least 10 s.
fn slow_clock_table() -> Table {
    let clock = Arc::new(SlowClock {
        now: std::sync::atomic::AtomicI64::new(T0),
        step_ms: 10_000,
    });
    TableBuilder::new(TableLocation::memory("t"))
        .with_clock(clock)
        .with_seed(7)
        .build()
}

#[tokio::test]
async fn an_insert_older_than_half_the_gc_grace_is_not_committed() {
    let t = slow_clock_table();
    let mut settings = TableSettings::default();
    settings.set("gc_grace", "1h").unwrap();
    t.create(CreateOptions {
        settings,
        ..Default::default()
    })
    .await
    .unwrap();
    // Within half the grace: committed.
    assert_eq!(insert(&t, &[1, 2], "eu").await.version, Some(1));
    // A grace shorter than the insert took: refused, nothing committed.
    t.alter(&crate::schema::AlterOp::parse(&["set".into(), "gc_grace=15s".into()]).unwrap())
        .await
        .unwrap();
    let before = t.snapshot().await.unwrap();
    let (s, b) = batch(&[3], "eu");
    let e = t
        .insert_batches(s, vec![b], &InsertOptions::default(), Arc::new(NoProgress))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("gc_grace"), "{e}");
    assert_eq!(e.kind(), crate::ErrorKind::Conflict);
    let after = t.snapshot().await.unwrap();
    assert_eq!(after.version, before.version);
    assert_eq!(after.rows(), 2);
}

/// A gc asked for a shorter grace than the table's `gc_grace` waits the table's: the files of
/// an insert still in flight are not taken for orphans.
#[tokio::test]
async fn gc_never_waits_less_than_the_tables_gc_grace() {
    for (grace, kept) in [(Some("1h"), true), (None, false)] {
        let t = TableBuilder::new(TableLocation::memory("t")).build();
        let mut settings = TableSettings::default();
        if let Some(g) = grace {
            settings.set("gc_grace", g).unwrap();
        }
        t.create(CreateOptions {
            settings,
            ..Default::default()
        })
        .await
        .unwrap();
        let in_flight = t.location().child("_data/region=eu/part-in-flight.parquet");
        t.location()
            .store
            .put(&in_flight, bytes::Bytes::from_static(b"PAR1").into())
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let report = t
            .gc(&crate::gc::GcOptions {
                grace_ms: 0,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(report.grace_ms, if kept { 3_600_000 } else { 0 });
        assert_eq!(
            t.location().store.head(&in_flight).await.is_ok(),
            kept,
            "{grace:?}"
        );
    }
}

#[tokio::test]
async fn inserts_and_merges_older_than_half_a_cleaners_known_grace_are_not_committed() {
    let t = slow_clock_table();
    t.create(CreateOptions::default()).await.unwrap();
    for i in 0..3 {
        insert(&t, &[i], "eu").await;
    }
    let before = t.snapshot().await.unwrap();
    // The table has no gc_grace: the grace the writer was told of (a server's gc) bounds it.
    let (s, b) = batch(&[9], "eu");
    let told = InsertOptions {
        gc_grace_ms: Some(15_000),
        ..Default::default()
    };
    let e = t
        .insert_batches(s, vec![b], &told, Arc::new(NoProgress))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("gc grace of this server"), "{e}");
    let merge = crate::merge::MergeOptions {
        min_files: 2,
        gc_grace_ms: Some(15_000),
        ..Default::default()
    };
    let e = t.merge(&merge, Arc::new(NoProgress)).await.unwrap_err();
    assert!(
        e.to_string().contains("this merge's files were written"),
        "{e}"
    );
    assert_eq!(e.kind(), crate::ErrorKind::Conflict);
    let after = t.snapshot().await.unwrap();
    assert_eq!(after.version, before.version, "nothing committed");
    assert_eq!(after.files.len(), before.files.len());
    // The refused writes cleaned up after themselves: only the committed files are stored.
    let stored: Vec<_> = futures::TryStreamExt::try_collect::<Vec<_>>(
        t.location().store.list(Some(&t.location().child("_data"))),
    )
    .await
    .unwrap();
    assert_eq!(stored.len(), 3);
    // A grace long enough: the same merge commits.
    let merge = crate::merge::MergeOptions {
        gc_grace_ms: Some(3_600_000),
        ..merge
    };
    let r = t.merge(&merge, Arc::new(NoProgress)).await.unwrap();
    assert!(r.version.is_some());
    assert_eq!(t.snapshot().await.unwrap().rows(), 3);
}

/// Time travel after gc: a cleaned version is named as asked, with the oldest readable one;
/// a time is found even when a gc cut off midway left some old entries and not others.
#[tokio::test]
async fn time_travel_names_the_cleaned_version_and_steps_over_gaps() {
    let clock = ManualClock::new(T0);
    let t = table(clock.clone());
    let opts = CreateOptions {
        settings: TableSettings {
            checkpoint_interval: 3,
            ..Default::default()
        },
        ..Default::default()
    };
    t.create(opts).await.unwrap();
    for i in 1..=8 {
        clock.advance(1000);
        insert(&t, &[i], "eu").await;
    }
    let at7 = t.snapshot_as_of(AsOf::Version(7)).await.unwrap().timestamp;
    let store = t.location().store.clone();
    // Entries before the checkpoint of 6 half gone: a gc that deleted out of order and was cut
    // off, leaving 1 and 3.
    for v in [0, 2, 4, 5] {
        store.delete(&t.log().commit_path(v)).await.unwrap();
    }
    let e = t.snapshot_as_of(AsOf::Version(1)).await.unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("version 1 is not available") && m.contains("oldest readable version is 3"),
        "{m}"
    );
    // The search meets the gap of 5 first, and goes on past it.
    let s = t.snapshot_as_of(AsOf::Timestamp(at7)).await.unwrap();
    assert_eq!(s.version, 7);
    let s = t.snapshot_as_of(AsOf::Timestamp(at7 + 500)).await.unwrap();
    assert_eq!(s.version, 7);
}
