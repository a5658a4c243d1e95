//! The flush against a table whose schema another writer changes while the flush writes.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{Field, Schema, SchemaRef};
use futures::stream::BoxStream;
use neve_core::write::input::{InputFormat, OpenedInput};
use neve_core::write::NoProgress;
use neve_core::{CreateOptions, InsertOptions, TableBuilder, TableLocation};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

use super::*;

/// A store that, at the first data file written after it is armed, lets another writer commit
/// first: `x` becomes a string column.
struct Racing {
    inner: Arc<dyn ObjectStore>,
    armed: AtomicBool,
    other: Arc<Table>,
}

impl fmt::Debug for Racing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Racing")
    }
}

impl fmt::Display for Racing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Racing({})", self.inner)
    }
}

fn batch(columns: Vec<(&str, ArrayRef)>) -> (SchemaRef, RecordBatch) {
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
            .collect::<Vec<_>>(),
    ));
    let b = RecordBatch::try_new(
        schema.clone(),
        columns.into_iter().map(|(_, a)| a).collect(),
    )
    .unwrap();
    (schema, b)
}

impl Racing {
    async fn race(&self, location: &Path) {
        if location.as_ref().contains("/_data/") && self.armed.swap(false, Ordering::SeqCst) {
            let (s, b) = batch(vec![
                ("id", Arc::new(Int64Array::from(vec![100]))),
                ("x", Arc::new(StringArray::from(vec!["text"]))),
            ]);
            self.other
                .insert_batches(s, vec![b], &InsertOptions::default(), Arc::new(NoProgress))
                .await
                .expect("the other writer commits");
        }
    }
}

#[async_trait::async_trait]
impl ObjectStore for Racing {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.race(location).await;
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.race(location).await;
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
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

/// Two requests in one flush, one adding `x` as an integer; another writer makes `x` a string
/// while the flush writes its files. The request that no longer fits gets its 400 alone; the
/// other is committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_changed_under_a_flush_fails_only_the_requests_it_refuses() {
    let memory: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let location =
        TableLocation::with_store(memory.clone(), "t", neve_core::storage::StoreKind::Memory);
    let other = Arc::new(TableBuilder::new(location.clone()).with_seed(1).build());
    other.create(CreateOptions::default()).await.unwrap();
    let (s, b) = batch(vec![("id", Arc::new(Int64Array::from(vec![0])))]);
    other
        .insert_batches(s, vec![b], &InsertOptions::default(), Arc::new(NoProgress))
        .await
        .unwrap();
    let racing = Arc::new(Racing {
        inner: memory,
        armed: AtomicBool::new(false),
        other,
    });
    let served = Arc::new(
        TableBuilder::new(TableLocation::with_store(
            racing.clone(),
            "t",
            neve_core::storage::StoreKind::Memory,
        ))
        .with_seed(2)
        .build(),
    );
    let meta = served.metadata().await.unwrap();
    let prepare = |name: &str, (schema, b): (SchemaRef, RecordBatch)| {
        served
            .prepare(
                &meta,
                OpenedInput {
                    name: name.into(),
                    format: InputFormat::Arrow,
                    schema,
                    batches: Box::new(vec![Ok(b)].into_iter()),
                },
            )
            .unwrap()
    };
    let adds_x = prepare(
        "adds x",
        batch(vec![
            ("id", Arc::new(Int64Array::from(vec![1]))),
            ("x", Arc::new(Int64Array::from(vec![7]))),
        ]),
    );
    let plain = prepare(
        "plain",
        batch(vec![("id", Arc::new(Int64Array::from(vec![2])))]),
    );
    let config = IngestConfig {
        flush_interval: Duration::from_millis(300),
        ..Default::default()
    };
    let ingest = Ingest::new(
        config,
        None,
        Duration::from_secs(10),
        Arc::new(Metrics::new()),
    );
    racing.armed.store(true, Ordering::SeqCst);
    let (a, b) = tokio::join!(
        ingest.submit("t", &served, adds_x, None, ingest.reserve(1).unwrap()),
        ingest.submit("t", &served, plain, None, ingest.reserve(1).unwrap()),
    );
    assert!(
        !racing.armed.load(Ordering::SeqCst),
        "the other writer raced"
    );
    let e = a.unwrap_err();
    assert_eq!(e.status(), axum::http::StatusCode::BAD_REQUEST, "{e}");
    assert!(e.to_string().contains('x'), "{e}");
    let ack = b.expect("the request that fits is committed");
    assert_eq!(ack.rows, 1);
    let snap = served.snapshot().await.unwrap();
    assert_eq!(
        snap.rows(),
        3,
        "the first row, the other writer's and the plain request's"
    );
}
