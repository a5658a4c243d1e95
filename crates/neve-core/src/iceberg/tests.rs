//! Iceberg metadata against the log: every snapshot lists exactly the files alive at its
//! version; a rebuild writes the same bytes; concurrent syncs; expiry; refused types.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use apache_avro::types::Value;
use arrow::array::{Int64Array, RecordBatch, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema};
use futures::TryStreamExt;
use object_store::ObjectStoreExt;

use super::*;
use crate::clock::ManualClock;
use crate::merge::MergeOptions;
use crate::partition::parse_spec;
use crate::table::{CreateOptions, InsertOptions, Table, TableBuilder};
use crate::write::NoProgress;

pub(super) const T0: i64 = 1_700_000_000_000;

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("g", DataType::Int64, true),
        Field::new("k", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
    ]))
}

fn batch(from: i64, n: i64) -> RecordBatch {
    let ks: Vec<i64> = (from..from + n).collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(ks.iter().map(|k| k % 3))),
            Arc::new(Int64Array::from_iter_values(ks.iter().copied())),
            Arc::new(StringArray::from_iter_values(
                ks.iter().map(|k| format!("s{k}")),
            )),
        ],
    )
    .unwrap()
}

pub(super) async fn table(location: &TableLocation, clock: Arc<ManualClock>, hook: bool) -> Table {
    let t = TableBuilder::new(location.clone())
        .with_clock(clock)
        .with_seed(7)
        .with_iceberg_after_commit(hook)
        .build();
    let settings = TableSettings {
        iceberg: true,
        ..Default::default()
    };
    t.create(CreateOptions {
        partition_by: parse_spec("g, bucket(4, k) as kb").unwrap(),
        sort_by: vec!["k".into()],
        settings,
        ..Default::default()
    })
    .await
    .unwrap();
    t
}

use crate::log::TableSettings;

pub(super) async fn insert(t: &Table, clock: &ManualClock, from: i64, n: i64) {
    clock.advance(1000);
    t.insert_batches(
        schema(),
        vec![batch(from, n)],
        &InsertOptions::default(),
        Arc::new(NoProgress),
    )
    .await
    .unwrap();
}

pub(super) async fn read(location: &TableLocation, key: &str) -> Vec<u8> {
    location
        .store
        .get(&location.child(key))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec()
}

pub(super) fn records(bytes: &[u8]) -> Vec<BTreeMap<String, Value>> {
    apache_avro::Reader::new(bytes)
        .unwrap()
        .map(|r| match r.unwrap() {
            Value::Record(f) => f.into_iter().collect(),
            v => panic!("{v:?}"),
        })
        .collect()
}

pub(super) fn string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        v => panic!("{v:?}"),
    }
}

pub(super) fn long(v: &Value) -> i64 {
    match v {
        Value::Long(n) => *n,
        Value::Int(n) => *n as i64,
        Value::Union(_, b) => long(b),
        v => panic!("{v:?}"),
    }
}

pub(super) async fn newest(location: &TableLocation) -> TableMetadata {
    let n = hint(location).await;
    serde_json::from_slice(&read(location, &metadata_key(n)).await).unwrap()
}

/// The metadata number `version-hint.text` names.
async fn hint(location: &TableLocation) -> u64 {
    let hint = String::from_utf8(read(location, HINT).await).unwrap();
    hint.trim().parse().unwrap()
}

/// The table-relative key of `url`, an address as Iceberg readers are given it.
pub(super) fn key_of(location: &TableLocation, url: &str) -> String {
    let base = location.file_url("");
    url.strip_prefix(&base)
        .unwrap_or_else(|| panic!("{url} is not under {base}"))
        .trim_start_matches('/')
        .to_string()
}

/// The files (as readers address them) and rows snapshot `version` lists, through its
/// manifest list and manifests, as a reader walks them.
async fn listed(
    location: &TableLocation,
    meta: &TableMetadata,
    version: i64,
) -> (BTreeSet<String>, i64) {
    let snap = meta
        .snapshots
        .iter()
        .find(|s| s.snapshot_id == version)
        .unwrap_or_else(|| panic!("no snapshot {version}"));
    let rel = |url: &str| key_of(location, url);
    let mut files = BTreeSet::new();
    let mut rows = 0;
    for m in records(&read(location, &rel(&snap.manifest_list)).await) {
        let path = string(&m["manifest_path"]);
        let bytes = read(location, &rel(&path)).await;
        assert_eq!(long(&m["manifest_length"]), bytes.len() as i64);
        for e in records(&bytes) {
            assert_ne!(long(&e["status"]), 2, "no deleted entries");
            let Value::Record(df) = &e["data_file"] else {
                panic!()
            };
            let df: BTreeMap<_, _> = df.iter().cloned().collect();
            assert!(long(&e["snapshot_id"]) <= version);
            assert!(files.insert(string(&df["file_path"])), "listed twice");
            rows += long(&df["record_count"]);
        }
    }
    (files, rows)
}

async fn alive(t: &Table, version: u64) -> (BTreeSet<String>, i64) {
    let s = t.log().load_version(version).await.unwrap();
    let files = s.files.keys().map(|p| t.location().file_url(p)).collect();
    (files, s.files.values().map(|f| f.rows as i64).sum())
}

#[tokio::test]
async fn every_snapshot_lists_the_files_alive_at_its_version() {
    let location = TableLocation::memory("t");
    let clock = ManualClock::new(T0);
    let t = table(&location, clock.clone(), true).await;
    let empty = newest(&location).await;
    assert_eq!(empty.current_snapshot_id, -1);
    for i in 0..6 {
        insert(&t, &clock, i * 10, 10).await;
    }
    clock.advance(1000);
    let opts = MergeOptions {
        min_files: 2,
        ..Default::default()
    };
    t.merge(&opts, Arc::new(NoProgress)).await.unwrap();
    clock.advance(1000);
    t.delete("k < 5", 1, Arc::new(NoProgress)).await.unwrap();
    insert(&t, &clock, 100, 7).await;
    let latest = t.snapshot().await.unwrap();
    let meta = newest(&location).await;
    assert_eq!(meta.neve_version(), Some(latest.version));
    // Spark sizes splits as its Parquet reader does, not for 200 shuffle partitions.
    assert_eq!(meta.properties["read.split.adaptive-size.enabled"], "false");
    assert_eq!(meta.current_snapshot_id, latest.version as i64);
    let ids: Vec<i64> = meta.snapshots.iter().map(|s| s.snapshot_id).collect();
    assert_eq!(ids, (1..=latest.version as i64).collect::<Vec<_>>());
    for v in 1..=latest.version {
        assert_eq!(
            listed(&location, &meta, v as i64).await,
            alive(&t, v).await,
            "version {v}"
        );
    }
    // The partition spec and the partition values of a manifest entry.
    assert_eq!(
        meta.partition_specs[0]["fields"][1]["transform"],
        "bucket[4]"
    );
    let ops: Vec<&str> = meta
        .snapshots
        .iter()
        .map(|s| s.summary["operation"].as_str())
        .collect();
    assert!(
        ops.contains(&"replace") && ops.contains(&"append"),
        "{ops:?}"
    );

    // A rebuild from the log writes the same manifest lists, byte for byte.
    let keys: Vec<object_store::path::Path> = location
        .store
        .list(Some(&location.child(METADATA_DIR)))
        .map_ok(|o| o.location)
        .try_collect()
        .await
        .unwrap();
    let mut before = BTreeMap::new();
    for k in &keys {
        if k.as_ref().contains("/snap-") || k.as_ref().contains("/neve-") {
            before.insert(
                k.clone(),
                read(&location, k.as_ref().strip_prefix("t/").unwrap()).await,
            );
        }
        location.store.delete(k).await.unwrap();
    }
    let r = t
        .iceberg_sync(&SyncOptions {
            full: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(r.version, latest.version);
    assert_eq!(r.snapshots_added as u64, latest.version);
    let rebuilt = newest(&location).await;
    for v in 1..=latest.version {
        assert_eq!(
            listed(&location, &rebuilt, v as i64).await,
            alive(&t, v).await
        );
    }
    let mut compared = 0;
    for (k, bytes) in &before {
        let now = read(&location, k.as_ref().strip_prefix("t/").unwrap()).await;
        assert_eq!(&now, bytes, "{k} differs after a rebuild");
        compared += 1;
    }
    assert!(compared > latest.version as usize);
}

#[tokio::test]
async fn concurrent_syncs_leave_one_chain_that_describes_the_latest_version() {
    let location = TableLocation::memory("t");
    let clock = ManualClock::new(T0);
    let t = table(&location, clock.clone(), false).await;
    for i in 0..8 {
        insert(&t, &clock, i * 5, 5).await;
    }
    let syncs = (0..4).map(|_| {
        let location = location.clone();
        let clock = clock.clone();
        async move {
            let t = TableBuilder::new(location).with_clock(clock).build();
            t.iceberg_sync(&SyncOptions::default()).await
        }
    });
    let reports = futures::future::join_all(syncs).await;
    for r in &reports {
        assert_eq!(r.as_ref().unwrap().version, 8);
    }
    let meta = newest(&location).await;
    assert_eq!(meta.neve_version(), Some(8));
    for v in 1..=8 {
        assert_eq!(listed(&location, &meta, v).await, alive(&t, v as u64).await);
    }
    // Every number of the chain holds complete, readable metadata.
    let n = hint(&location).await;
    for i in 1..=n {
        let m: TableMetadata =
            serde_json::from_slice(&read(&location, &metadata_key(i)).await).unwrap();
        for s in &m.snapshots {
            let (files, _) = listed(&location, &m, s.snapshot_id).await;
            assert_eq!(files, alive(&t, s.snapshot_id as u64).await.0);
        }
    }
}

#[tokio::test]
async fn snapshots_older_than_the_retention_expire_but_the_one_current_then() {
    let location = TableLocation::memory("t");
    let clock = ManualClock::new(T0);
    let t = table(&location, clock.clone(), true).await;
    t.alter(&crate::schema::AlterOp::SetSetting {
        key: "log_retention_hours".into(),
        value: "1".into(),
    })
    .await
    .unwrap();
    for i in 0..3 {
        insert(&t, &clock, i * 5, 5).await; // versions 2, 3, 4
    }
    // Version 5 an hour and 2.5 s after version 3: the cutoff falls between 3 and 4.
    clock.advance(3_598_500);
    insert(&t, &clock, 50, 5).await;
    let meta = newest(&location).await;
    let ids: Vec<i64> = meta.snapshots.iter().map(|s| s.snapshot_id).collect();
    // Version 3 was current at the cutoff: time travel to it still works.
    assert_eq!(ids, vec![3, 4, 5]);
    assert_eq!(listed(&location, &meta, 3).await, alive(&t, 3).await);
}

#[tokio::test]
async fn the_metadata_lists_at_most_the_newest_max_snapshots_and_a_rebuild_starts_there() {
    let location = TableLocation::memory("t");
    let clock = ManualClock::new(T0);
    let t = table(&location, clock.clone(), true).await;
    t.alter(&crate::schema::AlterOp::SetSetting {
        key: "iceberg_max_snapshots".into(),
        value: "3".into(),
    })
    .await
    .unwrap();
    for i in 0..5 {
        insert(&t, &clock, i * 5, 5).await; // versions 2..=6
    }
    let ids = |m: &TableMetadata| {
        m.snapshots
            .iter()
            .map(|s| s.snapshot_id)
            .collect::<Vec<_>>()
    };
    let meta = newest(&location).await;
    assert_eq!(ids(&meta), vec![4, 5, 6]);
    for v in 4..=6 {
        assert_eq!(listed(&location, &meta, v).await, alive(&t, v as u64).await);
    }
    // A rebuild from nothing writes only what the cap keeps: no list for versions 1 to 3.
    let fresh = TableLocation::memory("rebuilt");
    let rebuilt = table(&fresh, clock.clone(), false).await;
    rebuilt
        .alter(&crate::schema::AlterOp::SetSetting {
            key: "iceberg_max_snapshots".into(),
            value: "3".into(),
        })
        .await
        .unwrap();
    for i in 0..5 {
        insert(&rebuilt, &clock, i * 5, 5).await;
    }
    let report = rebuilt
        .iceberg_sync(&SyncOptions {
            full: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!((report.snapshots, report.snapshots_added), (3, 3));
    let meta = newest(&fresh).await;
    assert_eq!(ids(&meta), vec![4, 5, 6]);
    let lists: Vec<String> = fresh
        .store
        .list(Some(&fresh.child("metadata")))
        .map_ok(|m| m.location.filename().unwrap().to_string())
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with("snap-"))
        .collect();
    assert_eq!(lists.len(), 3, "{lists:?}");
    // Lowering the cap expires on the next sync, though nothing was committed.
    rebuilt
        .alter(&crate::schema::AlterOp::SetSetting {
            key: "iceberg_max_snapshots".into(),
            value: "1".into(),
        })
        .await
        .unwrap();
    rebuilt.iceberg_sync(&SyncOptions::default()).await.unwrap();
    assert_eq!(ids(&newest(&fresh).await), vec![7]);
}

#[tokio::test]
async fn what_iceberg_cannot_describe_is_refused_and_nothing_changes() {
    let location = TableLocation::memory("t");
    let clock = ManualClock::new(T0);
    let t = table(&location, clock.clone(), true).await;
    insert(&t, &clock, 0, 5).await;
    let before = t.snapshot().await.unwrap().version;
    let s = Arc::new(Schema::new(vec![
        Field::new("g", DataType::Int64, true),
        Field::new("k", DataType::Int64, true),
        Field::new("big", DataType::UInt64, true),
    ]));
    let b = RecordBatch::try_new(
        s.clone(),
        vec![
            Arc::new(Int64Array::from(vec![1])),
            Arc::new(Int64Array::from(vec![1])),
            Arc::new(UInt64Array::from(vec![u64::MAX])),
        ],
    )
    .unwrap();
    let e = t
        .insert_batches(s, vec![b], &InsertOptions::default(), Arc::new(NoProgress))
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::IcebergUnsupported { ref column, .. } if column == "big"),
        "{e}"
    );
    assert_eq!(t.snapshot().await.unwrap().version, before);
    assert_eq!(newest(&location).await.neve_version(), Some(before));

    // A partition name that is also a column.
    let other = TableBuilder::new(TableLocation::memory("u")).build();
    let settings = TableSettings {
        iceberg: true,
        ..Default::default()
    };
    let e = other
        .create(CreateOptions {
            partition_by: parse_spec("bucket(2, k) as g").unwrap(),
            schema: crate::schema::parse_schema("g int64, k int64").unwrap(),
            settings,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(e.to_string().contains("'g'"), "{e}");
}

/// Files keep the types they were written with, and Iceberg's readers take a change of type
/// only through its promotions: a column of int32 values may become int64 (Iceberg's int to
/// long), not float64, which neve alone could read.
#[tokio::test]
async fn a_type_change_iceberg_cannot_promote_is_refused_and_nothing_changes() {
    use arrow::array::{Float64Array, Int32Array};
    let location = TableLocation::memory("t");
    let clock = ManualClock::new(T0);
    let t = table(&location, clock.clone(), true).await;
    let with_n = |n: arrow::array::ArrayRef| {
        let s = Arc::new(Schema::new(vec![
            Field::new("g", DataType::Int64, true),
            Field::new("k", DataType::Int64, true),
            Field::new("n", n.data_type().clone(), true),
        ]));
        let b = RecordBatch::try_new(
            s.clone(),
            vec![
                Arc::new(Int64Array::from(vec![1])),
                Arc::new(Int64Array::from(vec![1])),
                n,
            ],
        )
        .unwrap();
        (s, vec![b])
    };
    let opts = InsertOptions::default();
    let (s, b) = with_n(Arc::new(Int32Array::from(vec![7])));
    t.insert_batches(s, b, &opts, Arc::new(NoProgress))
        .await
        .unwrap();
    let before = t.snapshot().await.unwrap().version;
    let (s, b) = with_n(Arc::new(Float64Array::from(vec![7.5])));
    let e = t
        .insert_batches(s, b, &opts, Arc::new(NoProgress))
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::IcebergUnsupported { ref column, ref reason }
            if column == "n" && reason.contains("int to double")),
        "{e}"
    );
    assert_eq!(t.snapshot().await.unwrap().version, before);
    assert_eq!(newest(&location).await.neve_version(), Some(before));
    // int to long is Iceberg's own promotion.
    let (s, b) = with_n(Arc::new(Int64Array::from(vec![1 << 40])));
    t.insert_batches(s, b, &opts, Arc::new(NoProgress))
        .await
        .unwrap();
    assert_eq!(t.snapshot().await.unwrap().version, before + 1);
    assert_eq!(newest(&location).await.neve_version(), Some(before + 1));
}

/// Iceberg readers cannot fold rows: a table with `aggregate` semantics never writes Iceberg
/// metadata, whichever way `iceberg=true` would come (create, alter, a log that has both).
#[tokio::test]
async fn an_aggregating_table_is_never_described_in_iceberg() {
    let is_refusal = |e: &Error| matches!(e, Error::IcebergMergeSemantics { spec } if spec.contains("aggregate"));
    let merge: Option<crate::merge::MergeSpec> =
        Some("aggregate(key = [k], count = c)".parse().unwrap());
    let columns = crate::schema::parse_schema("g int64, k int64, s string, c int64").unwrap();
    let location = TableLocation::memory("m");
    let t = TableBuilder::new(location.clone()).build();
    let e = t
        .create(CreateOptions {
            sort_by: vec!["k".into()],
            schema: columns.clone(),
            merge: merge.clone(),
            settings: TableSettings {
                iceberg: true,
                ..Default::default()
            },
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(is_refusal(&e), "{e}");
    assert!(t.snapshot().await.is_err(), "no table was created");

    // Created without it, then turned on: refused, the table unchanged, nothing in metadata/.
    t.create(CreateOptions {
        sort_by: vec!["k".into()],
        schema: columns,
        merge,
        ..Default::default()
    })
    .await
    .unwrap();
    let e = t
        .alter(&crate::schema::AlterOp::SetSetting {
            key: "iceberg".into(),
            value: "true".into(),
        })
        .await
        .unwrap_err();
    assert!(is_refusal(&e), "{e}");
    let snap = t.snapshot().await.unwrap();
    assert_eq!(snap.version, 0);
    assert!(!snap.metadata.settings.iceberg);

    // A log that has both (written before this check): the sync refuses and writes nothing.
    let mut both = snap.clone();
    both.metadata.settings.iceberg = true;
    let w = IcebergWriter::new(location.clone(), t.log().clone(), ManualClock::new(T0));
    let e = w.sync_to(&both, &SyncOptions::default()).await.unwrap_err();
    assert!(is_refusal(&e), "{e}");
    let written: Vec<_> = location
        .store
        .list(Some(&location.child("metadata")))
        .try_collect()
        .await
        .unwrap();
    assert!(written.is_empty(), "{written:?}");
}

#[tokio::test]
async fn gc_expires_snapshots_and_deletes_only_metadata_no_kept_snapshot_needs() {
    let location = TableLocation::memory("t");
    let t = TableBuilder::new(location.clone()).build();
    let settings = TableSettings {
        iceberg: true,
        ..Default::default()
    };
    t.create(CreateOptions {
        partition_by: parse_spec("g").unwrap(),
        sort_by: vec!["k".into()],
        settings,
        ..Default::default()
    })
    .await
    .unwrap();
    for i in 0..4 {
        t.insert_batches(
            schema(),
            vec![batch(i * 10, 10)],
            &InsertOptions::default(),
            Arc::new(NoProgress),
        )
        .await
        .unwrap();
    }
    let opts = MergeOptions {
        min_files: 2,
        ..Default::default()
    };
    t.merge(&opts, Arc::new(NoProgress)).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let r = t
        .gc(&crate::gc::GcOptions {
            grace_ms: 0,
            retention_ms: Some(0),
            dry_run: false,
        })
        .await
        .unwrap();
    assert!(
        r.tombstones_deleted > 0 && r.iceberg_files_deleted > 0,
        "{r:?}"
    );
    let latest = t.snapshot().await.unwrap();
    let meta = newest(&location).await;
    let ids: Vec<i64> = meta.snapshots.iter().map(|s| s.snapshot_id).collect();
    assert_eq!(ids, vec![latest.version as i64]);
    // What is left is readable and lists the alive files; nothing else of ours is left.
    assert_eq!(
        listed(&location, &meta, latest.version as i64).await,
        alive(&t, latest.version).await
    );
    let left: Vec<String> = location
        .store
        .list(Some(&location.child(METADATA_DIR)))
        .map_ok(|o| o.location.to_string())
        .try_collect()
        .await
        .unwrap();
    let lists = left.iter().filter(|k| k.contains("/snap-")).count();
    let metadata = left
        .iter()
        .filter(|k| k.ends_with(".metadata.json"))
        .count();
    assert_eq!((lists, metadata), (1, 1), "{left:?}");
}

#[tokio::test]
async fn a_writer_builds_on_its_own_metadata_and_never_over_a_sync_it_did_not_see() {
    let counter = Arc::new(crate::query::ReadCounter::default());
    let store = Arc::new(crate::query::CountingStore::new(
        Arc::new(object_store::memory::InMemory::new()),
        counter.clone(),
    ));
    let location = TableLocation::with_store(store, "t", crate::storage::StoreKind::Memory);
    let clock = ManualClock::new(T0);
    let t = table(&location, clock.clone(), true).await;
    insert(&t, &clock, 0, 5).await;
    insert(&t, &clock, 5, 5).await;
    // The sync after a commit builds on the metadata this writer wrote a second ago...
    let before = counter.requests();
    insert(&t, &clock, 10, 5).await;
    let cached = counter.requests() - before;
    // ...and reads it back (the hint, the metadata, the previous manifest list) once that
    // is older than a minute.
    clock.advance(60_000);
    let before = counter.requests();
    insert(&t, &clock, 15, 5).await;
    let read_back = counter.requests() - before;
    assert!(read_back >= cached + 3, "{read_back} GETs against {cached}");
    assert_eq!(newest(&location).await.neve_version(), Some(4));

    // Another process rebuilds the metadata behind the writer's back (same version, next
    // number): the writer's create-only PUT of that number fails, and it builds on the
    // rebuild instead of over it.
    let other = TableBuilder::new(location.clone())
        .with_clock(clock.clone())
        .build();
    let rebuilt = other
        .iceberg_sync(&SyncOptions {
            full: true,
            ..Default::default()
        })
        .await
        .unwrap();
    insert(&t, &clock, 20, 5).await;
    let meta = newest(&location).await;
    assert_eq!(meta.neve_version(), Some(5));
    let n = hint(&location).await;
    assert_eq!(n, rebuilt.metadata_version + 1);
    for v in 1..=5 {
        assert_eq!(listed(&location, &meta, v).await, alive(&t, v as u64).await);
    }
}

/// Manifest entries encoded ahead of a commit for the version it was expected to make are
/// encoded again when it made another (it lost a race): every entry names the version that
/// added its file.
#[tokio::test]
async fn entries_encoded_ahead_for_another_version_are_encoded_again() {
    let location = TableLocation::memory("t");
    let clock = ManualClock::new(T0);
    let t = table(&location, clock.clone(), false).await;
    insert(&t, &clock, 0, 10).await;
    let w = IcebergWriter::new(location.clone(), t.log().clone(), clock.clone());
    w.sync(&SyncOptions::default()).await.unwrap();
    insert(&t, &clock, 10, 10).await;
    let latest = t.snapshot().await.unwrap();
    let added: Vec<crate::log::AddFile> = latest
        .files
        .values()
        .filter(|f| f.added_version == Some(latest.version))
        .map(|f| f.as_ref().clone())
        .collect();
    assert!(!added.is_empty());
    w.give_adds(latest.version + 1, Arc::new(added));
    w.sync(&SyncOptions::default()).await.unwrap();
    let meta = newest(&location).await;
    assert_eq!(meta.neve_version(), Some(latest.version));
    let snap = meta
        .snapshots
        .iter()
        .find(|s| s.snapshot_id == latest.version as i64)
        .unwrap();
    let mut seen = 0;
    for m in records(&read(&location, &key_of(&location, &snap.manifest_list)).await) {
        let bytes = read(&location, &key_of(&location, &string(&m["manifest_path"]))).await;
        for e in records(&bytes) {
            let Value::Record(df) = &e["data_file"] else {
                panic!()
            };
            let df: BTreeMap<_, _> = df.iter().cloned().collect();
            let path = key_of(&location, &string(&df["file_path"]));
            let version = latest.files[&path].added_version.unwrap() as i64;
            assert_eq!(long(&e["snapshot_id"]), version, "{path}");
            assert_eq!(long(&e["sequence_number"]), version, "{path}");
            seen += 1;
        }
    }
    assert_eq!(seen, latest.files.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_written_in_the_background_describes_every_version_once_settled() {
    let location = TableLocation::memory("t");
    let clock = ManualClock::new(T0);
    let t = TableBuilder::new(location.clone())
        .with_clock(clock.clone())
        .with_seed(7)
        .with_iceberg_in_background(true)
        .build();
    t.create(CreateOptions {
        partition_by: parse_spec("g, bucket(4, k) as kb").unwrap(),
        sort_by: vec!["k".into()],
        settings: TableSettings {
            iceberg: true,
            ..Default::default()
        },
        ..Default::default()
    })
    .await
    .unwrap();
    // Inserts in a row, each returning before its metadata is written: a task catching up
    // with several commits at once must still give each version its snapshot.
    for i in 0..8 {
        insert(&t, &clock, i * 10, 10).await;
    }
    t.iceberg_settled().await;
    assert!(!t.iceberg_busy());
    let meta = newest(&location).await;
    assert_eq!(meta.neve_version(), Some(8));
    for v in 1..=8 {
        assert_eq!(listed(&location, &meta, v).await, alive(&t, v as u64).await);
    }
    // Nothing is left to catch up: a sync from the log finds the metadata current.
    let report = t.iceberg_sync(&SyncOptions::default()).await.unwrap();
    assert!(report.up_to_date, "{report:?}");
    // Settled with nothing handed over returns at once.
    t.iceberg_settled().await;
}
