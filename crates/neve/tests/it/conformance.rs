//! One conformance suite, run against every store: in-memory, local folder, MinIO.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use arrow::array::{AsArray, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use futures::stream::BoxStream;
use neve_core::log::TableSettings;
use neve_core::partition::parse_spec;
use neve_core::storage::StoreKind;
use neve_core::write::NoProgress;
use neve_core::{AsOf, CreateOptions, InsertOptions, Table, TableBuilder, TableLocation};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use tokio::sync::Notify;

use crate::common::{int_counts, read_files};

fn batch(ids: &[i64], regions: &[&str]) -> (SchemaRef, RecordBatch) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("region", DataType::Utf8, true),
    ]));
    let b = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())),
            Arc::new(StringArray::from(regions.to_vec())),
        ],
    )
    .unwrap();
    (schema, b)
}

async fn insert(
    t: &Table,
    schema: SchemaRef,
    b: RecordBatch,
) -> neve_core::Result<neve_core::InsertReport> {
    t.insert_batches(
        schema,
        vec![b],
        &InsertOptions::default(),
        Arc::new(NoProgress),
    )
    .await
}

fn build(loc: &TableLocation, seed: u64) -> Table {
    TableBuilder::new(loc.clone()).with_seed(seed).build()
}

/// Create, insert partitioned and sorted data, read it back exactly.
async fn roundtrip(loc: TableLocation) {
    let t = build(&loc, 1);
    let opts = CreateOptions {
        partition_by: parse_spec("identity(region)").unwrap(),
        sort_by: vec!["id".into()],
        ..Default::default()
    };
    assert_eq!(t.create(opts).await.unwrap().version, 0);
    let ids: Vec<i64> = (0..1000).map(|i| (i * 7919) % 1000).collect();
    let regions: Vec<&str> = ids
        .iter()
        .map(|i| if i % 3 == 0 { "eu" } else { "us/west" })
        .collect();
    let (s, b) = batch(&ids, &regions);
    let r = insert(&t, s, b).await.unwrap();
    assert_eq!(
        (r.version, r.rows, r.files, r.partitions),
        (Some(1), 1000, 2, 2)
    );
    let snap = t.snapshot().await.unwrap();
    assert_eq!((snap.version, snap.rows(), snap.files.len()), (1, 1000, 2));
    let batches = read_files(&loc, &snap).await;
    let counts = int_counts(&batches, "id");
    assert_eq!(counts.len(), 1000);
    assert!(counts.values().all(|&c| c == 1));
    for (f, b) in snap.files.values().zip(&batches) {
        let ids = b.column(0).as_primitive::<Int64Type>();
        assert!(
            ids.values().windows(2).all(|w| w[0] <= w[1]),
            "sorted by id in {}",
            f.path
        );
        let region = f.partition_values["region"].clone().unwrap();
        let folder = if region == "eu" {
            "region=eu/"
        } else {
            "region=us%2Fwest/"
        };
        assert!(f.path.starts_with(&format!("_data/{folder}")), "{}", f.path);
        let st = &f.stats["id"];
        assert_eq!(st.min.as_ref().unwrap().as_i64().unwrap(), ids.value(0));
        assert_eq!(
            st.max.as_ref().unwrap().as_i64().unwrap(),
            ids.value(ids.len() - 1)
        );
    }
}

/// The primitive the protocol rests on: a create-only PUT fails when the object exists.
async fn create_only_put(loc: TableLocation) {
    let p = loc.child("_log/probe.json");
    let opts = || PutOptions {
        mode: PutMode::Create,
        ..Default::default()
    };
    loc.store
        .put_opts(&p, PutPayload::from_static(b"a"), opts())
        .await
        .unwrap();
    let second = loc
        .store
        .put_opts(&p, PutPayload::from_static(b"b"), opts())
        .await;
    assert!(
        matches!(second, Err(object_store::Error::AlreadyExists { .. })),
        "{second:?}"
    );
    let got = object_store::ObjectStoreExt::get(&*loc.store, &p)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(&got[..], b"a");
}

/// Opening lists only the log tail after the checkpoint pointer.
async fn checkpoint_tail(loc: TableLocation) {
    let t = build(&loc, 2);
    let opts = CreateOptions {
        settings: TableSettings {
            checkpoint_interval: 4,
            ..Default::default()
        },
        ..Default::default()
    };
    t.create(opts).await.unwrap();
    for i in 0..10 {
        let (s, b) = batch(&[i], &["eu"]);
        insert(&t, s, b).await.unwrap();
    }
    assert_eq!(t.log().read_pointer().await.unwrap(), Some(8));
    let tail = t.log().list(Some(8)).await.unwrap();
    assert_eq!(tail.commits.into_iter().collect::<Vec<_>>(), vec![8, 9, 10]);
    assert!(tail.checkpoints.is_empty());
    let snap = build(&loc, 3).snapshot().await.unwrap();
    assert_eq!((snap.version, snap.rows()), (10, 10));
    let at5 = t.snapshot_as_of(AsOf::Version(5)).await.unwrap();
    assert_eq!((at5.version, at5.rows()), (5, 5));
}

/// Writers racing on one table: versions contiguous, every row once.
async fn racing_writers(loc: TableLocation) {
    build(&loc, 4)
        .create(CreateOptions::default())
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for w in 0..4i64 {
        let t = build(&loc, 100 + w as u64);
        tasks.push(tokio::spawn(async move {
            for i in 0..8 {
                let (s, b) = batch(&[w * 1000 + i], &["eu"]);
                insert(&t, s, b).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let t = build(&loc, 5);
    let h = t.history(None).await.unwrap();
    assert_eq!(
        h.iter().map(|c| c.version).collect::<Vec<_>>(),
        (0..=32).collect::<Vec<_>>()
    );
    let ids: std::collections::BTreeSet<_> = h.iter().map(|c| c.info.commit_id.clone()).collect();
    assert_eq!(ids.len(), 33, "every commit distinct");
    let snap = t.snapshot().await.unwrap();
    let counts = int_counts(&read_files(&loc, &snap).await, "id");
    assert_eq!(counts.len(), 32);
    assert!(counts.values().all(|&c| c == 1));
}

/// A commit PUT that landed but reported failure is recognised by its id, not written twice;
/// one that failed before landing is retried.
async fn unknown_outcome(loc: TableLocation) {
    let (flaky, floc) = Flaky::over(&loc);
    let t = build(&floc, 6);
    t.create(CreateOptions::default()).await.unwrap();
    flaky.fail_after.store(1, Ordering::SeqCst);
    let (s, b) = batch(&[1], &["eu"]);
    let r = insert(&t, s, b).await.unwrap();
    assert_eq!(r.version, Some(1));
    flaky.fail_before.store(2, Ordering::SeqCst);
    let (s, b) = batch(&[2], &["eu"]);
    let r = insert(&t, s, b).await.unwrap();
    assert_eq!(r.version, Some(2));
    flaky.exists_after.store(1, Ordering::SeqCst);
    let (s, b) = batch(&[3], &["eu"]);
    let r = insert(&t, s, b).await.unwrap();
    assert_eq!(
        r.version,
        Some(3),
        "its own landed commit is recognised by id"
    );
    assert_eq!(
        flaky.fail_after.load(Ordering::SeqCst)
            + flaky.fail_before.load(Ordering::SeqCst)
            + flaky.exists_after.load(Ordering::SeqCst),
        0,
        "faults were injected"
    );
    let h = build(&loc, 7).history(None).await.unwrap();
    assert_eq!(
        h.len(),
        4,
        "no commit landed twice: {:?}",
        h.iter().map(|c| c.version).collect::<Vec<_>>()
    );
    let snap = build(&loc, 8).snapshot().await.unwrap();
    assert_eq!(
        int_counts(&read_files(&loc, &snap).await, "id"),
        BTreeMap::from([(1, 1), (2, 1), (3, 1)])
    );
}

/// A commit PUT that lands but is not answered, on a store that then cannot be read back
/// either: the insert says the outcome is unknown, and keeps its files, so the landed
/// version reads its rows (deleting them, as after a failed commit, would leave a version
/// naming missing files).
async fn unknown_outcome_keeps_files(loc: TableLocation) {
    let (flaky, floc) = Flaky::over(&loc);
    let t = build(&floc, 10);
    // A create whose PUT the store retried after it had landed: the table is its own.
    flaky.exists_after.store(1, Ordering::SeqCst);
    t.create(CreateOptions::default()).await.unwrap();
    assert_eq!(
        flaky.exists_after.load(Ordering::SeqCst),
        0,
        "fault injected"
    );
    let e = build(&floc, 12)
        .create(CreateOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(e, neve_core::Error::TableExists { .. }), "{e}");
    flaky.blind_reads.store(1000, Ordering::SeqCst);
    flaky.fail_after.store(1, Ordering::SeqCst);
    let (s, b) = batch(&[1, 2], &["eu", "us"]);
    let e = insert(&t, s, b).await.unwrap_err();
    assert!(
        matches!(e, neve_core::Error::CommitOutcomeUnknown { version: 1, .. }),
        "{e}"
    );
    assert_eq!(
        e.http_status(),
        503,
        "a client may repeat it with its request key"
    );
    assert_eq!(flaky.fail_after.load(Ordering::SeqCst), 0, "fault injected");
    flaky.failing_reads.store(0, Ordering::SeqCst);
    let snap = build(&loc, 11).snapshot().await.unwrap();
    assert_eq!(snap.version, 1, "the PUT landed");
    assert_eq!(
        int_counts(&read_files(&loc, &snap).await, "id"),
        BTreeMap::from([(1, 1), (2, 1)])
    );
}

/// New columns are added, types widen, conflicts commit nothing.
async fn schema_evolution(loc: TableLocation) {
    let t = build(&loc, 9);
    t.create(CreateOptions::default()).await.unwrap();
    let (s, b) = batch(&[1], &["eu"]);
    insert(&t, s, b).await.unwrap();
    let s2 = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int32, false),
        Field::new("score", DataType::Float64, true),
    ]));
    let b2 = RecordBatch::try_new(
        s2.clone(),
        vec![
            Arc::new(Int32Array::from(vec![2])),
            Arc::new(Float64Array::from(vec![0.5])),
        ],
    )
    .unwrap();
    let r = insert(&t, s2, b2).await.unwrap();
    assert!(r.schema_changed);
    let snap = t.snapshot().await.unwrap();
    let cols: Vec<String> = snap
        .metadata
        .schema
        .columns
        .iter()
        .map(|c| format!("{}:{}", c.name, c.column_type))
        .collect();
    assert_eq!(cols, ["id:int64", "region:string", "score:float64"]);
    let s3 = Arc::new(Schema::new(vec![Field::new(
        "region",
        DataType::Int64,
        true,
    )]));
    let b3 = RecordBatch::try_new(s3.clone(), vec![Arc::new(Int64Array::from(vec![5]))]).unwrap();
    let err = insert(&t, s3, b3).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("'region'") && msg.contains("string") && msg.contains("int64"),
        "{msg}"
    );
    assert_eq!(t.snapshot().await.unwrap().version, 2);
    let strict = CreateOptions {
        settings: TableSettings {
            strict_schema: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let loc2 = TableLocation {
        root: loc.root.clone().join("strict"),
        ..loc.clone()
    };
    let t2 = build(&loc2, 10);
    t2.create(strict).await.unwrap();
    let (s, b) = batch(&[1], &["eu"]);
    insert(&t2, s, b).await.unwrap();
    let s4 = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("new_col", DataType::Utf8, true),
    ]));
    let b4 = RecordBatch::try_new(
        s4.clone(),
        vec![
            Arc::new(Int64Array::from(vec![1])),
            Arc::new(StringArray::from(vec!["x"])),
        ],
    )
    .unwrap();
    assert!(matches!(
        insert(&t2, s4, b4).await,
        Err(neve_core::Error::NewColumnRejected { .. })
    ));
    assert_eq!(t2.snapshot().await.unwrap().version, 1);
}

/// An insert whose files were written before a concurrent `drop column` commits after it:
/// the dropped column stays dropped (added back with its old field id, the values of every
/// file written before the drop would show again), and every row of the insert is there.
async fn insert_racing_a_drop(loc: TableLocation) {
    let t = build(&loc, 11);
    t.create(CreateOptions::default()).await.unwrap();
    let (s, b) = batch(&[1, 2], &["eu", "us"]);
    insert(&t, s, b).await.unwrap();
    let (flaky, floc) = Flaky::over(&loc);
    let racer = build(&floc, 12);
    let (arrived, go) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    *flaky.pause_next_commit.lock().unwrap() = Some((arrived.clone(), go.clone()));
    let ids = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)]));
    let b = RecordBatch::try_new(ids.clone(), vec![Arc::new(Int64Array::from(vec![3]))]).unwrap();
    let task = tokio::spawn(async move { insert(&racer, ids, b).await });
    arrived.notified().await;
    let op = neve_core::schema::AlterOp::DropColumn("region".into());
    t.alter(&op).await.unwrap();
    go.notify_one();
    task.await.unwrap().unwrap();
    let snap = t.snapshot().await.unwrap();
    let cols: Vec<&str> = snap
        .metadata
        .schema
        .columns
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(cols, ["id"], "the dropped column came back");
    let mut e = neve_core::QueryEngine::new();
    e.register_table("t", &t, None).await.unwrap();
    let out = e.collect("SELECT * FROM t ORDER BY id").await.unwrap();
    let ids: Vec<i64> = out
        .iter()
        .flat_map(|b| {
            assert_eq!(b.num_columns(), 1, "{:?}", b.schema());
            b.column(0).as_primitive::<Int64Type>().values().to_vec()
        })
        .collect();
    assert_eq!(ids, [1, 2, 3]);
}

/// An insert into a table whose partition source is renamed while it writes is checked
/// again against the new partitioning: an input without the renamed column is refused as
/// one sent after the rename would be (its partition column named), and adds nothing.
async fn insert_racing_a_partition_rename(loc: TableLocation) {
    let t = build(&loc, 13);
    t.create(CreateOptions {
        partition_by: parse_spec("region").unwrap(),
        ..Default::default()
    })
    .await
    .unwrap();
    let (s, b) = batch(&[1], &["eu"]);
    insert(&t, s, b).await.unwrap();
    let (flaky, floc) = Flaky::over(&loc);
    let racer = build(&floc, 14);
    let (arrived, go) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    *flaky.pause_next_commit.lock().unwrap() = Some((arrived.clone(), go.clone()));
    let (s, b) = batch(&[2], &["us"]);
    let task = tokio::spawn(async move { insert(&racer, s, b).await });
    arrived.notified().await;
    let op = neve_core::schema::AlterOp::RenameColumn {
        from: "region".into(),
        to: "area".into(),
    };
    let renamed = t.alter(&op).await.unwrap();
    go.notify_one();
    match task.await.unwrap() {
        Err(neve_core::Error::MissingPartitionColumn { column, .. }) => assert_eq!(column, "area"),
        r => panic!("{r:?}"),
    }
    assert_eq!(
        t.snapshot().await.unwrap().version,
        renamed,
        "nothing added"
    );
}

/// A delete whose commit meets a file a concurrent insert added that it may match rewrites
/// that file too and keeps what it rewrote already (one plan, not a new one per insert): the
/// matching rows of both are gone, every other row is there.
async fn delete_racing_an_insert(loc: TableLocation) {
    let t = build(&loc, 15);
    t.create(CreateOptions::default()).await.unwrap();
    let (s, b) = batch(&[1, 2, 3, 4], &["eu", "us", "eu", "us"]);
    insert(&t, s, b).await.unwrap();
    let (flaky, floc) = Flaky::over(&loc);
    let deleter = build(&floc, 16);
    let (arrived, go) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    *flaky.pause_next_commit.lock().unwrap() = Some((arrived.clone(), go.clone()));
    let task = tokio::spawn(async move {
        deleter
            .delete("region = 'eu'", 2, Arc::new(NoProgress))
            .await
    });
    arrived.notified().await;
    let (s, b) = batch(&[5, 6], &["eu", "us"]);
    insert(&t, s, b).await.unwrap();
    go.notify_one();
    let report = task.await.unwrap().unwrap();
    assert_eq!(report.attempts, 1, "{report:?}");
    assert_eq!(report.rows_deleted, 3, "{report:?}");
    let mut e = neve_core::QueryEngine::new();
    e.register_table("t", &t, None).await.unwrap();
    let out = e.collect("SELECT id FROM t ORDER BY id").await.unwrap();
    let ids: Vec<i64> = out
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    assert_eq!(ids, [2, 4, 6]);
}

/// Injects failures into create-only PUTs of log entries.
#[derive(Debug)]
struct Flaky {
    inner: Arc<dyn ObjectStore>,
    /// Next N commit PUTs land, then report an error (a timeout after sending).
    fail_after: AtomicU32,
    /// Next N commit PUTs fail without landing.
    fail_before: AtomicU32,
    /// Next N commit PUTs land, then report `AlreadyExists` (what a client's own retry of a
    /// landed conditional PUT sees).
    exists_after: AtomicU32,
    /// Log reads that fail once the next `fail_after` PUT has failed: a store that neither
    /// answers the PUT nor lets the writer read back what it did.
    blind_reads: AtomicU32,
    /// Log reads left to fail (armed by a `fail_after` PUT with `blind_reads`).
    failing_reads: AtomicU32,
    /// Listings leave out log entries whose name ends so (what a local directory read while
    /// writers create entries can do).
    hidden_from_listings: std::sync::Mutex<Option<String>>,
    /// The next commit PUT says it has arrived (the first) and waits to be let go (the
    /// second): another writer commits meanwhile.
    pause_next_commit: std::sync::Mutex<Option<(Arc<Notify>, Arc<Notify>)>>,
}

impl fmt::Display for Flaky {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Flaky({})", self.inner)
    }
}

impl Flaky {
    /// A store over `loc`'s that injects nothing until told, and `loc` on it.
    fn over(loc: &TableLocation) -> (Arc<Flaky>, TableLocation) {
        let flaky = Arc::new(Flaky {
            inner: loc.store.clone(),
            fail_after: AtomicU32::new(0),
            fail_before: AtomicU32::new(0),
            exists_after: AtomicU32::new(0),
            blind_reads: AtomicU32::new(0),
            failing_reads: AtomicU32::new(0),
            hidden_from_listings: Default::default(),
            pause_next_commit: Default::default(),
        });
        let floc = TableLocation {
            store: flaky.clone(),
            ..loc.clone()
        };
        (flaky, floc)
    }

    fn hide(
        &self,
        listed: BoxStream<'static, object_store::Result<ObjectMeta>>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        use futures::StreamExt;
        let hidden = self.hidden_from_listings.lock().unwrap().clone();
        listed
            .filter(move |m| {
                let keep = match (m, &hidden) {
                    (Ok(m), Some(h)) => !m.location.as_ref().ends_with(h.as_str()),
                    _ => true,
                };
                std::future::ready(keep)
            })
            .boxed()
    }
}

fn take(c: &AtomicU32) -> bool {
    c.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| v.checked_sub(1))
        .is_ok()
}

fn injected() -> object_store::Error {
    object_store::Error::Generic {
        store: "flaky",
        source: "injected timeout".into(),
    }
}

#[async_trait::async_trait]
impl ObjectStore for Flaky {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let is_commit = matches!(opts.mode, PutMode::Create) && location.as_ref().contains("_log/");
        let pause = if is_commit {
            self.pause_next_commit.lock().unwrap().take()
        } else {
            None
        };
        if let Some((arrived, go)) = pause {
            arrived.notify_one();
            go.notified().await;
        }
        if is_commit && take(&self.fail_before) {
            return Err(injected());
        }
        let r = self.inner.put_opts(location, payload, opts).await?;
        if is_commit && take(&self.fail_after) {
            self.failing_reads
                .store(self.blind_reads.load(Ordering::SeqCst), Ordering::SeqCst);
            return Err(injected());
        }
        if is_commit && take(&self.exists_after) {
            return Err(object_store::Error::AlreadyExists {
                path: location.to_string(),
                source: "injected: retried PUT found its own object".into(),
            });
        }
        Ok(r)
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        if location.as_ref().contains("_log/") && take(&self.failing_reads) {
            return Err(injected());
        }
        self.inner.get_opts(location, options).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.hide(self.inner.list(prefix))
    }
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.hide(self.inner.list_with_offset(prefix, offset))
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

fn memory_loc() -> TableLocation {
    TableLocation::with_store(
        Arc::new(object_store::memory::InMemory::new()),
        "t",
        StoreKind::Memory,
    )
}

fn local_loc(dir: &tempfile::TempDir) -> TableLocation {
    let path = dir.path().join("t");
    std::fs::create_dir_all(&path).unwrap();
    TableLocation::local("local", &path).unwrap()
}

fn minio_loc() -> TableLocation {
    TableLocation::parse(&crate::common::s3_table("conformance")).unwrap()
}

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
               async fn $name() { super::$name(super::memory_loc()).await } )*
        }
        mod local {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
               async fn $name() { let d = tempfile::tempdir().unwrap(); super::$name(super::local_loc(&d)).await } )*
        }
        mod minio {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
               async fn $name() { super::$name(super::minio_loc()).await } )*
        }
    };
}

/// A listing that shows version N+1 but not N (a directory read while writers create
/// entries): readers still replay every version.
async fn listing_gap(loc: TableLocation) {
    let (flaky, floc) = Flaky::over(&loc);
    let t = build(&floc, 9);
    t.create(CreateOptions::default()).await.unwrap();
    for id in 1..=3 {
        let (s, b) = batch(&[id], &["eu"]);
        insert(&t, s, b).await.unwrap();
    }
    *flaky.hidden_from_listings.lock().unwrap() = Some("00000000000000000002.json".into());
    let mut listed: Vec<u64> = t
        .log()
        .list(None)
        .await
        .unwrap()
        .commits
        .into_iter()
        .collect();
    listed.sort();
    assert_eq!(listed, vec![0, 1, 2, 3]);
    let fresh = build(&floc, 10);
    let snap = fresh.snapshot().await.unwrap();
    assert_eq!((snap.version, snap.rows()), (3, 3));
    assert_eq!(
        fresh
            .snapshot_as_of(neve_core::AsOf::Version(2))
            .await
            .unwrap()
            .rows(),
        2
    );
}

conformance!(
    listing_gap,
    roundtrip,
    create_only_put,
    checkpoint_tail,
    racing_writers,
    unknown_outcome,
    unknown_outcome_keeps_files,
    schema_evolution,
    insert_racing_a_drop,
    insert_racing_a_partition_rename,
    delete_racing_an_insert
);
