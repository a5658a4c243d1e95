//! Position deletes decided from what a sync kept: a group that grew reads only the files that
//! joined it, and decides what a sync reading every file decides.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{BooleanArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use object_store::ObjectStoreExt;

use super::deletes::{groups, resolve, KeyIds, Shared, States};
use crate::log::{Snapshot, TableSettings};
use crate::partition::parse_spec;
use crate::storage::TableLocation;
use crate::table::{CreateOptions, InsertOptions, Table, TableBuilder};
use crate::write::NoProgress;

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("g", DataType::Int64, true),
        Field::new("k", DataType::Int64, true),
        Field::new("v", DataType::Int64, true),
        Field::new("del", DataType::Boolean, true),
    ]))
}

/// A row: `(g, k, v, del)`.
type Row = (i64, i64, i64, Option<bool>);

async fn insert(t: &Table, rows: &[Row]) {
    let col = |f: fn(&Row) -> i64| Arc::new(Int64Array::from_iter_values(rows.iter().map(f)));
    let b = RecordBatch::try_new(
        schema(),
        vec![
            col(|r| r.0),
            col(|r| r.1),
            col(|r| r.2),
            Arc::new(BooleanArray::from_iter(rows.iter().map(|r| r.3))),
        ],
    )
    .unwrap();
    t.insert_batches(
        schema(),
        vec![b],
        &InsertOptions::default(),
        Arc::new(NoProgress),
    )
    .await
    .unwrap();
}

/// Creates `t`: partitioned by `g`, `replace` by `k` with version `v` and tombstones `del`,
/// with Iceberg metadata.
async fn create(t: &Table) {
    t.create(CreateOptions {
        partition_by: parse_spec("g").unwrap(),
        sort_by: vec!["k".into(), "v".into()],
        schema: crate::schema::TableSchema::from_arrow(&schema()).unwrap(),
        merge: Some(
            "replace(key = [k], version = v, deleted = del)"
                .parse()
                .unwrap(),
        ),
        settings: TableSettings {
            iceberg: true,
            ..Default::default()
        },
    })
    .await
    .unwrap();
}

/// A table location in memory whose requests are counted.
fn counted(root: &str) -> (TableLocation, Arc<crate::query::ReadCounter>) {
    use crate::query::{CountingStore, ReadCounter};
    let counter = Arc::new(ReadCounter::default());
    let store = CountingStore::new(
        Arc::new(object_store::memory::InMemory::new()),
        counter.clone(),
    );
    let location =
        TableLocation::with_store(Arc::new(store), root, crate::storage::StoreKind::Memory);
    (location, counter)
}

/// `t`'s metadata describes its latest version, whose delete files hold what a sync reading
/// every file decides.
async fn assert_synced_as_decided_afresh(t: &Table) {
    let snap = t.snapshot().await.unwrap();
    let report = t.iceberg_sync(&Default::default()).await.unwrap();
    assert!(
        report.up_to_date && report.version == snap.version,
        "{report:?}"
    );
    super::deletes::assert_deletes_decided_afresh(t.location(), &snap).await;
}

/// Every group's losers (by file path), decided from `known`; and the states decided.
async fn decide(
    location: &TableLocation,
    snap: &Snapshot,
    known: &States,
    ids: &Arc<KeyIds>,
) -> (BTreeMap<String, Vec<u64>>, States) {
    let spec = snap.metadata.merge.as_ref().unwrap();
    let busy = Default::default();
    let shared = Shared::new(spec, snap, ids, None, &busy).unwrap();
    let (mut losers, mut states) = (BTreeMap::<String, Vec<u64>>::new(), States::new());
    for g in groups(snap, spec) {
        let kept = known.get(&g[0].path).cloned();
        // A state of other ids is decided again, from every file.
        let skip = kept
            .as_ref()
            .filter(|s| s.names_keys_by(ids))
            .map_or(0, |s| s.files().len());
        let (steps, s) = resolve(location, spec, &g, kept, &shared, |_, _, l| Ok(Some(l)))
            .await
            .unwrap();
        assert_eq!(steps.len(), g.len() - skip, "one step per file read");
        for step in steps {
            for (f, p) in step {
                losers
                    .entry(g[f as usize].path.clone())
                    .or_default()
                    .extend(p);
            }
        }
        states.insert(g[0].path.clone(), Arc::new(s));
    }
    for p in losers.values_mut() {
        p.sort_unstable();
    }
    (losers, states)
}

#[tokio::test]
async fn a_group_that_grew_is_decided_from_its_kept_state_and_the_new_files_only() {
    let location = TableLocation::memory("d");
    let ids: Arc<KeyIds> = Arc::default();
    let t = TableBuilder::new(location.clone())
        .with_seed(5)
        .with_iceberg_after_commit(false)
        .build();
    create(&t).await;
    // Two partitions; in g=1 later versions, tombstones and ties.
    let first: Vec<_> = (0..50)
        .flat_map(|k| [(1, k, 1, None), (2, k, 1, None)])
        .collect();
    insert(&t, &first).await;
    let second: Vec<_> = (25..75)
        .map(|k| (1, k, 2, (30..35).contains(&k).then_some(true)))
        .collect();
    insert(&t, &second).await;
    let before = t.snapshot().await.unwrap();
    let (earlier, kept) = decide(&location, &before, &States::new(), &ids).await;

    // Lower versions that lose, higher ones that win (over tombstones too), equal ones that
    // win as the later row, keys new to the group; g=2 gets a file, g=3 is new.
    let third: Vec<_> = (0..100)
        .map(|k| (1, k, [0, 3, 2][k as usize % 3], None))
        .chain((40..60).map(|k| (2, k, 1, None)))
        .chain((0..5).map(|k| (3, k, 1, Some(k % 2 == 0))))
        .collect();
    insert(&t, &third).await;
    let after = t.snapshot().await.unwrap();
    let (afresh, _) = decide(&location, &after, &States::new(), &ids).await;
    assert!(
        afresh.values().map(Vec::len).sum::<usize>() > 50,
        "rows lose: {afresh:?}"
    );
    // States whose keys are named by other ids are decided again, from every file.
    let (other_ids, _) = decide(&location, &after, &kept, &Arc::default()).await;
    assert_eq!(other_ids, afresh);

    // The files decided before are gone: a sync that read one would fail.
    for path in before.files.keys() {
        location.store.delete(&location.child(path)).await.unwrap();
    }
    let (mut from_kept, states) = decide(&location, &after, &kept, &ids).await;
    // What the files decided before made lose, and what the new files add.
    for (path, p) in earlier {
        from_kept.entry(path).or_default().extend(p);
    }
    for p in from_kept.values_mut() {
        p.sort_unstable();
    }
    from_kept.retain(|_, p| !p.is_empty());
    let mut afresh = afresh;
    afresh.retain(|_, p| !p.is_empty());
    assert_eq!(from_kept, afresh);
    // And what it keeps decides the same again.
    let (again, _) = decide(&location, &after, &states, &ids).await;
    assert!(again.is_empty(), "nothing left to decide: {again:?}");
}

/// A fresh process (each CLI insert) that syncs after an insert decides only the groups the
/// insert changed: the version before had every group decided, and its metadata says so.
#[tokio::test]
async fn a_fresh_sync_after_an_insert_reads_only_the_partitions_it_touched() {
    let location = TableLocation::memory("f");
    let t = TableBuilder::new(location.clone())
        .with_seed(7)
        .with_iceberg_after_commit(false)
        .build();
    create(&t).await;
    // Three partitions, each a group whose rows lose; each sync by a writer of its own.
    for v in 1..=2 {
        let rows: Vec<Row> = (1..=3)
            .flat_map(|g| (0..40).map(move |k| (g, k, v, (k == 7 * v).then_some(true))))
            .collect();
        insert(&t, &rows).await;
        t.iceberg_sync(&Default::default()).await.unwrap();
    }
    let before = t.snapshot().await.unwrap();
    insert(&t, &(20..60).map(|k| (1, k, 3, None)).collect::<Vec<_>>()).await;
    let after = t.snapshot().await.unwrap();

    // The other partitions' files are gone while it syncs: a sync that read one would fail.
    let mut saved = Vec::new();
    for path in before.files.keys().filter(|p| !p.contains("/g=1/")) {
        let at = location.child(path);
        let bytes = location
            .store
            .get(&at)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        location.store.delete(&at).await.unwrap();
        saved.push((at, bytes));
    }
    assert_eq!(saved.len(), 4, "g=2 and g=3 hold two files each");
    let report = t.iceberg_sync(&Default::default()).await.unwrap();
    assert_eq!(report.version, after.version);
    assert_eq!(report.snapshots_added, 1);
    // The control: a rebuild, which decides every group, reads them.
    let full = crate::iceberg::SyncOptions {
        full: true,
        ..Default::default()
    };
    assert!(t.iceberg_sync(&full).await.is_err());
    for (at, bytes) in saved {
        location.store.put(&at, bytes.into()).await.unwrap();
    }
    // What it wrote is what a sync reading every file decides, and readers see one row a key.
    super::deletes::assert_deletes_decided_afresh(&location, &after).await;
    let read: usize = super::deletes::rows_read_through_iceberg(&location)
        .await
        .iter()
        .map(|b| b.num_rows())
        .sum();
    // Keys 0..40 in each partition and 40..60 in g=1, but k = 14, deleted at v = 2 in each
    // (k = 7, deleted at v = 1, came back at v = 2).
    assert_eq!(read, 3 * 40 + 20 - 3);
}

/// The sync after an insert weighs the insert's new files by the columns the insert kept as it
/// wrote them: with each group's best rows kept from the sync before, it reads no data file.
#[tokio::test]
async fn the_sync_after_an_insert_takes_the_columns_the_insert_kept() {
    let (location, counter) = counted("c");
    let t = TableBuilder::new(location.clone()).with_seed(9).build();
    create(&t).await;
    for v in 1..=2 {
        let rows: Vec<Row> = (1..=2)
            .flat_map(|g| (0..30).map(move |k| (g, k, v, (k == 5 * v).then_some(true))))
            .collect();
        insert(&t, &rows).await;
    }
    let reads = counter.requests();
    // Later versions, older ones, ties, tombstones and new keys, in both partitions.
    let rows: Vec<Row> = (1..=2)
        .flat_map(|g| {
            (0..40).map(move |k| (g, k, [1, 2, 3][k as usize % 3], (k == 20).then_some(true)))
        })
        .collect();
    insert(&t, &rows).await;
    assert_eq!(
        counter.requests() - reads,
        0,
        "the insert and its sync read nothing"
    );
    assert_synced_as_decided_afresh(&t).await;
}

/// A string key of few values, which the writer keys into a dictionary as it writes, is kept
/// as that dictionary and numbered by its values: the sync after each insert reads no data file
/// and writes the delete files a sync reading every file decides (nulls and empty strings
/// among the keys, and values the dictionary holds that a partition's file has no row of).
#[tokio::test]
async fn a_key_kept_as_a_dictionary_decides_as_its_strings() {
    use arrow::array::StringArray;

    let schema = Arc::new(Schema::new(vec![
        Field::new("g", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("v", DataType::Int64, true),
    ]));
    let (location, counter) = counted("d");
    let t = TableBuilder::new(location.clone()).with_seed(3).build();
    t.create(CreateOptions {
        partition_by: parse_spec("g").unwrap(),
        sort_by: vec!["name".into(), "v".into()],
        schema: crate::schema::TableSchema::from_arrow(&schema).unwrap(),
        merge: Some("replace(key = [name], version = v)".parse().unwrap()),
        settings: TableSettings {
            iceberg: true,
            ..Default::default()
        },
    })
    .await
    .unwrap();
    for round in 0..3i64 {
        let n = 600;
        let name = |i: i64| match (i * 7 + round) % 23 {
            0 => None,
            1 => Some(String::new()),
            k => Some(format!("device-{k}")),
        };
        let b = RecordBatch::try_new(
            schema.clone(),
            vec![
                // Partition 2 holds only some of the names.
                Arc::new(Int64Array::from_iter_values((0..n).map(|i| {
                    if (i * 7 + round) % 23 < 8 {
                        2
                    } else {
                        1
                    }
                }))),
                Arc::new(StringArray::from_iter((0..n).map(name))),
                Arc::new(Int64Array::from_iter_values(
                    (0..n).map(|i| (i * 13 + round) % 5),
                )),
            ],
        )
        .unwrap();
        let reads = counter.requests();
        t.insert_batches(
            schema.clone(),
            vec![b],
            &InsertOptions::default(),
            Arc::new(NoProgress),
        )
        .await
        .unwrap();
        if round > 0 {
            assert_eq!(
                counter.requests() - reads,
                0,
                "the insert and its sync read nothing"
            );
        }
    }
    assert_synced_as_decided_afresh(&t).await;
}

/// The groups a writer keeps from sync to sync, and grows by the files an insert added, are the
/// groups the reader finds from every file, with the keys the scheme gives: through inserts
/// that extend runs, a merge that leaves files alone (some with tombstones), inserts that
/// overlap a file alone (it joins a run again) or not, and a new partition.
#[tokio::test]
async fn groups_kept_from_sync_to_sync_are_the_groups_of_every_file() {
    use super::deletes::prefix_keys;
    use super::groups::Grouping;
    use crate::merge::MergeOptions;

    let location = TableLocation::memory("g");
    let t = TableBuilder::new(location.clone())
        .with_seed(11)
        .with_iceberg_after_commit(false)
        .build();
    create(&t).await;
    let mut kept: Option<Grouping> = None;
    let mut check = |snap: Snapshot| {
        let spec = snap.metadata.merge.clone().unwrap();
        let grown = Grouping::of(kept.take(), &location, &snap, &spec);
        let afresh = Grouping::of(None, &location, &snap, &spec);
        let listed = |g: &Grouping| -> Vec<(Vec<String>, Vec<String>)> {
            g.groups()
                .into_iter()
                .map(|g| {
                    let files = g.files.iter().map(|f| f.path.clone()).collect();
                    (files, g.keys.iter().map(|k| k.to_string()).collect())
                })
                .collect()
        };
        let got = listed(&grown);
        assert_eq!(got, listed(&afresh), "version {}", snap.version);
        // As the reader groups every file (in another order), with the scheme's keys.
        let mut want: Vec<(Vec<String>, Vec<String>)> = groups(&snap, &spec)
            .into_iter()
            .map(|g| {
                let keys = prefix_keys(&location, &spec, &g);
                (g.iter().map(|f| f.path.clone()).collect(), keys)
            })
            .collect();
        let mut sorted = got.clone();
        sorted.sort();
        want.sort();
        assert_eq!(sorted, want, "version {}", snap.version);
        kept = Some(grown);
        got
    };
    // Two partitions, keys 0..40 in each, three inserts: each grows both runs.
    for v in 1..=3 {
        let rows: Vec<Row> = (1..=2)
            .flat_map(|g| (0..40).map(move |k| (g, k, v, (k == 3 * v).then_some(true))))
            .collect();
        insert(&t, &rows).await;
        let got = check(t.snapshot().await.unwrap());
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0.len(), v as usize, "one file more a run");
    }
    // Merged: each partition one file alone, with tombstones.
    let opts = MergeOptions {
        min_files: 2,
        ..Default::default()
    };
    t.merge(&opts, Arc::new(crate::write::NoProgress))
        .await
        .unwrap();
    check(t.snapshot().await.unwrap());
    // Keys past the merged files' range in g=1 (they stay alone), inside it in g=2 (the
    // merged file joins a run again), and a new partition.
    let rows: Vec<Row> = (100..120)
        .map(|k| (1, k, 5, None))
        .chain((10..20).map(|k| (2, k, 5, None)))
        .chain((0..10).map(|k| (3, k, 5, None)))
        .collect();
    insert(&t, &rows).await;
    check(t.snapshot().await.unwrap());
    // Runs of new files grow again, in all three partitions.
    let rows: Vec<Row> = (1..=3)
        .flat_map(|g| (100..130).map(move |k| (g, k, 6, (k == 101).then_some(true))))
        .collect();
    insert(&t, &rows).await;
    let got = check(t.snapshot().await.unwrap());
    assert!(got.iter().any(|(f, _)| f.len() >= 2), "{got:?}");
}

/// A delete file is what Iceberg specifies, whatever it was written from: `file_path` a string
/// column (no arrow schema in the footer turns it into the dictionary it was written from) and
/// `pos` a long, with the reserved field ids, rows sorted by path then position, empty files'
/// entries left out; the first and last path it names are its bounds.
#[test]
fn delete_files_are_icebergs() {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    let rows = vec![
        ("s3://b/t/_data/z.parquet", vec![2, 7]),
        ("s3://b/t/_data/a.parquet", vec![0, 1, 5]),
        ("s3://b/t/_data/m.parquet", vec![]),
    ];
    let (known, bytes) = super::deletes::DeleteFiles::new().bytes(rows).unwrap();
    assert_eq!(known.rows, 5);
    assert_eq!(known.size, bytes.len() as u64);
    // The bounds of the paths it names, as readers compare data files' paths with them: the
    // empty file's left out.
    assert_eq!(
        known.paths.as_deref(),
        Some(&(
            "s3://b/t/_data/a.parquet".to_string(),
            "s3://b/t/_data/z.parquet".to_string()
        ))
    );
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes)).unwrap();
    let meta = reader.metadata().file_metadata();
    assert!(meta
        .key_value_metadata()
        .into_iter()
        .flatten()
        .all(|kv| kv.key != "ARROW:schema"));
    let ids: Vec<(String, i32)> = meta
        .schema_descr()
        .columns()
        .iter()
        .map(|c| (c.name().to_string(), c.self_type().get_basic_info().id()))
        .collect();
    assert_eq!(
        ids,
        [
            ("file_path".to_string(), 2147483546),
            ("pos".to_string(), 2147483545)
        ]
    );
    assert_eq!(reader.schema().field(0).data_type(), &DataType::Utf8);
    assert_eq!(reader.schema().field(1).data_type(), &DataType::Int64);
    let batches: Vec<RecordBatch> = reader.build().unwrap().map(|b| b.unwrap()).collect();
    let got: Vec<(String, i64)> = batches
        .iter()
        .flat_map(|b| {
            let paths = arrow::array::AsArray::as_string::<i32>(b.column(0)).clone();
            let pos = b
                .column(1)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .clone();
            (0..b.num_rows()).map(move |i| (paths.value(i).to_string(), pos.value(i)))
        })
        .collect();
    let want: Vec<(String, i64)> = [("a", 0), ("a", 1), ("a", 5), ("z", 2), ("z", 7)]
        .into_iter()
        .map(|(f, p)| (format!("s3://b/t/_data/{f}.parquet"), p))
        .collect();
    assert_eq!(got, want);
}

/// A panic while a group is decided (on the rayon pool) is the sync's error, naming it, and the
/// process goes on: the next decision of the same group succeeds.
#[tokio::test]
async fn a_panic_while_deciding_is_an_error_not_an_abort() {
    let location = TableLocation::memory("p");
    let t = TableBuilder::new(location.clone())
        .with_iceberg_after_commit(false)
        .build();
    create(&t).await;
    insert(&t, &[(1, 1, 1, None), (1, 1, 2, None)]).await;
    let snap = t.snapshot().await.unwrap();
    let spec = snap.metadata.merge.as_ref().unwrap();
    let ids: Arc<KeyIds> = Arc::default();
    let busy = Default::default();
    let shared = Shared::new(spec, &snap, &ids, None, &busy).unwrap();
    let g = groups(&snap, spec).remove(0);
    let e = resolve(
        &location,
        spec,
        &g,
        None,
        &shared,
        |_, _, _| -> crate::Result<Option<()>> { panic!("weighing went wrong") },
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&e, crate::Error::TaskFailed(m)
            if m == "deciding a group of position deletes panicked: weighing went wrong"),
        "{e:?}"
    );
    let (steps, _) = resolve(&location, spec, &g, None, &shared, |_, _, l| Ok(Some(l)))
        .await
        .unwrap();
    assert_eq!(steps.len(), g.len());
}
