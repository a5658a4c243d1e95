//! `neve._neve`: the Rust half of the `neve` Python package. A thin layer over neve-core's
//! public API: Arrow crosses through the C data and C stream interfaces (no copy), reports
//! cross as the JSON the CLI prints, and the GIL is released while neve works.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, LazyLock};

use arrow::array::{RecordBatch, RecordBatchReader};
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::ffi_stream::ArrowArrayStreamReader;
use arrow::pyarrow::{PyArrowType, Table as PaTable};
use futures::StreamExt;
use neve_core::gc::GcOptions;
use neve_core::log::TableSettings;
use neve_core::merge::MergeOptions;
use neve_core::query::SendableRecordBatchStream;
use neve_core::storage::StorageOptions;
use neve_core::write::NoProgress;
use neve_core::{AsOf, CreateOptions, Error, ErrorKind, InsertOptions, QueryEngine, Table};
use pyo3::prelude::*;

mod errors {
    use pyo3::exceptions::PyException;
    pyo3::create_exception!(neve, NeveError, PyException, "Base of every neve error.");
    pyo3::create_exception!(
        neve,
        InvalidInputError,
        NeveError,
        "The input or request is wrong (the CLI exits 65, the server answers 400)."
    );
    pyo3::create_exception!(
        neve,
        SchemaError,
        InvalidInputError,
        "Rows or a schema change do not fit the table's schema."
    );
    pyo3::create_exception!(neve, SqlError, InvalidInputError, "A query is not valid.");
    pyo3::create_exception!(
        neve,
        NotFoundError,
        NeveError,
        "A table, version, partition or file does not exist."
    );
    pyo3::create_exception!(
        neve,
        ConflictError,
        NeveError,
        "The table changed in a way that conflicts with the request."
    );
    pyo3::create_exception!(
        neve,
        StorageError,
        NeveError,
        "The store failed (network, permissions, disk)."
    );
    pyo3::create_exception!(neve, InternalError, NeveError, "A bug or a corrupt table.");
}
use errors::*;

/// neve's error as the Python exception named for its kind, with the CLI's message.
fn py_err(e: Error) -> PyErr {
    let msg = e.to_string();
    match &e {
        Error::SchemaConflict { .. }
        | Error::NewColumnRejected { .. }
        | Error::UnsupportedType { .. }
        | Error::InvalidSchema { .. }
        | Error::InvalidValue { .. }
        | Error::UnsafeAlter { .. }
        | Error::MissingPartitionColumn { .. }
        | Error::IcebergUnsupported { .. } => SchemaError::new_err(msg),
        Error::SqlSyntax { .. } | Error::InvalidQuery { .. } => SqlError::new_err(msg),
        _ => match e.kind() {
            ErrorKind::BadInput => InvalidInputError::new_err(msg),
            ErrorKind::NotFound => NotFoundError::new_err(msg),
            ErrorKind::Conflict => ConflictError::new_err(msg),
            ErrorKind::Unavailable => StorageError::new_err(msg),
            _ => InternalError::new_err(msg),
        },
    }
}

fn arrow_err(e: ArrowError) -> PyErr {
    py_err(Error::from(e))
}

/// The extension's Rust allocations (Python's own are untouched). A query opens hundreds of
/// files, each with its metadata, schema and plan nodes: with glibc's malloc a quarter of
/// `GROUP BY` over 924 small files went to malloc and free (BENCHMARKS.md, issue 15).
/// Built without transparent huge pages (`no_thp`): with them, a process's first insert of 1M
/// rows took 1.6 s instead of 0.9, its kernel faulting in and clearing huge pages.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (the enum's value in mimalloc 3's `mimalloc.h`, which
/// the crate's bindings do not name).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Memory the module frees goes back to the OS after 10 s unused (jemalloc's default decay),
/// not mimalloc's 1 s. An insert of 1M rows frees about 400 MB it allocated (the rows grouped
/// by partition); with a 1 s delay the next insert of a stream faults all of it in again:
/// 100,000 page faults and 0.17 s of kernel time an insert, 7% of its wall time
/// (`bench/python_repeat_insert.py --gap 3`).
fn tune_allocator() {
    // SAFETY: sets a global option, read by the allocator under its own synchronisation.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 10_000) };
}

/// One runtime for the process: neve's I/O and query threads.
static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    STARTED_IN.store(std::process::id(), std::sync::atomic::Ordering::SeqCst);
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("neve")
        // Deep (but allowed) expressions are planned by recursion.
        .thread_stack_size(16 << 20)
        .build()
        .expect("a tokio runtime")
});

/// Parsed Parquet footers, kept from one query of the process to the next (64 MiB, about
/// 6,000 files of a taxi-like table): a notebook querying a table again reads only data.
static FOOTERS: LazyLock<neve_core::query::FooterCache> =
    LazyLock::new(|| neve_core::query::FooterCache::new(64 << 20));

/// Ranges of data files on remote stores, kept from one query of the process to the next: a
/// notebook or a service querying an S3 table again reads from memory. 128 MiB unless
/// `NEVE_CHUNK_CACHE_MB` says otherwise (0 turns it off); tables in local folders have the
/// page cache and skip it. A value that is not a whole number fails every query, naming the
/// variable, rather than quietly using the default.
static CHUNKS: LazyLock<Result<Option<neve_core::query::ChunkCache>, String>> =
    LazyLock::new(|| {
        let mb = match std::env::var("NEVE_CHUNK_CACHE_MB") {
            Ok(v) => v
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|&mb| mb <= 1 << 30)
                .ok_or_else(|| {
                    format!("'{v}' is not a whole number of MiB up to 2^30 (0 turns it off)")
                })?,
            Err(_) => 128,
        };
        Ok((mb > 0).then(|| neve_core::query::ChunkCache::new(mb << 20)))
    });

/// Run `fut` to the end with the GIL released, so other Python threads go on meanwhile.
/// The process that started neve's threads (0 until then).
static STARTED_IN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The runtime, unless this process is a child forked after the parent started neve's
/// threads: they do not exist in the child, and any call would wait for them forever.
fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    let started = STARTED_IN.load(std::sync::atomic::Ordering::SeqCst);
    if started != 0 && started != std::process::id() {
        return Err(NeveError::new_err(format!(
            "this process was forked from process {started} after it had used neve, and neve's threads do not survive fork(): use multiprocessing's 'spawn' or 'forkserver' start method, or use neve in the parent only after the children are forked"
        )));
    }
    Ok(&RUNTIME)
}

fn run<T: Send>(
    py: Python<'_>,
    fut: impl Future<Output = neve_core::Result<T>> + Send,
) -> PyResult<T> {
    let rt = runtime()?;
    py.detach(|| rt.block_on(fut)).map_err(py_err)
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("reports serialize")
}

fn as_of(text: Option<&str>) -> PyResult<Option<AsOf>> {
    text.map(|t| t.parse::<AsOf>().map_err(py_err)).transpose()
}

/// Every batch of an input stream, or an error that says how reading it failed.
fn read_all(reader: &mut ArrowArrayStreamReader, schema: &SchemaRef) -> PyResult<Vec<RecordBatch>> {
    let mut batches: Vec<RecordBatch> = Vec::new();
    loop {
        // Importing a batch whose arrays do not have the stream's columns panics in
        // arrow-rs: that is the input's fault, not a crash.
        let next = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| reader.next()));
        match next {
            Ok(None) => break,
            Ok(Some(Ok(b))) => batches.push(b),
            Ok(Some(Err(e))) => {
                return Err(InvalidInputError::new_err(format!(
                    "reading the input failed after {} batches: {e}",
                    batches.len()
                )))
            }
            Err(_) => {
                return Err(InvalidInputError::new_err(format!(
                    "batch {} of the input does not have the columns its stream declares ({})",
                    batches.len() + 1,
                    schema
                        .fields()
                        .iter()
                        .map(|f| format!("{} {}", f.name(), f.data_type()))
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            }
        }
    }
    Ok(batches)
}

/// A neve table. Open one with `neve.Table(address)` or make one with `neve.create_table`.
#[pyclass(name = "Table", module = "neve._neve", frozen)]
struct PyTable {
    table: Arc<Table>,
    address: String,
}

#[pymethods]
impl PyTable {
    /// Open the table at `address` (a folder, `file://`, or `s3://bucket/prefix`).
    #[new]
    #[pyo3(signature = (address, storage_options = None))]
    fn new(
        py: Python<'_>,
        address: &str,
        storage_options: Option<StorageOptions>,
    ) -> PyResult<Self> {
        let table = Arc::new(
            Table::at_with(address, &storage_options.unwrap_or_default()).map_err(py_err)?,
        );
        let t = table.clone();
        run(py, async move { t.snapshot().await })?;
        Ok(Self {
            table,
            address: address.to_string(),
        })
    }

    #[getter]
    fn address(&self) -> &str {
        &self.address
    }

    /// The latest version.
    #[getter]
    fn version(&self, py: Python<'_>) -> PyResult<u64> {
        let t = self.table.clone();
        run(py, async move { t.snapshot().await.map(|s| s.version) })
    }

    /// The table's schema as Arrow (latest version).
    #[getter]
    fn schema(&self, py: Python<'_>) -> PyResult<PyArrowType<arrow::datatypes::Schema>> {
        let t = self.table.clone();
        let meta = run(py, async move { t.metadata().await })?;
        Ok(PyArrowType(meta.schema.to_arrow().as_ref().clone()))
    }

    /// Insert an Arrow stream in one commit; the JSON of the insert report.
    fn _insert(
        &self,
        py: Python<'_>,
        data: PyArrowType<ArrowArrayStreamReader>,
    ) -> PyResult<String> {
        let mut reader = data.0;
        let schema = reader.schema();
        // Read without the GIL: a producer in C or C++ (a DuckDB relation runs its query as it
        // is read) does not hold up the process's other threads, and one made by Python code
        // (pyarrow's readers over a generator) takes the GIL itself, as producers of the C
        // stream interface must.
        let batches = py.detach(|| read_all(&mut reader, &schema))?;
        let t = self.table.clone();
        let report = run(py, async move {
            neve_core::write::validate_foreign("the Arrow stream", &batches)?;
            t.insert_batches(
                schema,
                batches,
                &InsertOptions::default(),
                Arc::new(NoProgress),
            )
            .await
        })?;
        Ok(json(&report))
    }

    #[pyo3(signature = (min_files = None, target_file_size = None, partitions = None, max_input_bytes = None))]
    fn _merge(
        &self,
        py: Python<'_>,
        min_files: Option<usize>,
        target_file_size: Option<u64>,
        partitions: Option<Vec<String>>,
        max_input_bytes: Option<u64>,
    ) -> PyResult<String> {
        let mut opts = MergeOptions::default();
        if let Some(n) = min_files {
            opts.min_files = n;
        }
        if let Some(n) = target_file_size {
            opts.target_file_size = n;
        }
        if let Some(n) = max_input_bytes {
            opts.max_input_bytes = n;
        }
        opts.partitions = partitions.unwrap_or_default();
        let t = self.table.clone();
        let r = run(
            py,
            async move { t.merge(&opts, Arc::new(NoProgress)).await },
        )?;
        Ok(json(&r))
    }

    #[pyo3(signature = (grace_ms, retention_ms = None, dry_run = false))]
    fn _gc(
        &self,
        py: Python<'_>,
        grace_ms: i64,
        retention_ms: Option<i64>,
        dry_run: bool,
    ) -> PyResult<String> {
        let opts = GcOptions {
            grace_ms,
            retention_ms,
            dry_run,
        };
        let t = self.table.clone();
        Ok(json(&run(py, async move { t.gc(&opts).await })?))
    }

    fn _iceberg_sync(&self, py: Python<'_>, full: bool) -> PyResult<String> {
        let opts = neve_core::iceberg::SyncOptions {
            full,
            ..Default::default()
        };
        let t = self.table.clone();
        Ok(json(&run(py, async move { t.iceberg_sync(&opts).await })?))
    }

    fn _delete(&self, py: Python<'_>, predicate: String) -> PyResult<String> {
        let t = self.table.clone();
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let r = run(py, async move {
            t.delete(&predicate, cores, Arc::new(NoProgress)).await
        })?;
        Ok(json(&r))
    }

    fn _drop_partitions(&self, py: Python<'_>, partitions: Vec<String>) -> PyResult<String> {
        let t = self.table.clone();
        Ok(json(&run(py, async move {
            t.drop_partitions(&partitions).await
        })?))
    }

    fn _alter(&self, py: Python<'_>, change: Vec<String>) -> PyResult<u64> {
        let op = neve_core::schema::AlterOp::parse(&change).map_err(py_err)?;
        let t = self.table.clone();
        run(py, async move { t.alter(&op).await })
    }

    #[pyo3(signature = (as_of = None))]
    fn _info(&self, py: Python<'_>, as_of: Option<&str>) -> PyResult<String> {
        let at = self::as_of(as_of)?.unwrap_or(AsOf::Latest);
        let t = self.table.clone();
        let s = run(py, async move { t.snapshot_as_of(at).await })?;
        Ok(neve_core::describe::info(&self.address, &s).to_string())
    }

    #[pyo3(signature = (as_of = None))]
    fn _files(&self, py: Python<'_>, as_of: Option<&str>) -> PyResult<String> {
        let at = self::as_of(as_of)?.unwrap_or(AsOf::Latest);
        let t = self.table.clone();
        let s = run(py, async move { t.snapshot_as_of(at).await })?;
        Ok(neve_core::describe::files(self.table.location(), &s).to_string())
    }

    #[pyo3(signature = (limit = None))]
    fn _history(&self, py: Python<'_>, limit: Option<usize>) -> PyResult<String> {
        let t = self.table.clone();
        let commits = run(py, async move { t.history(limit).await })?;
        let lines: Vec<_> = commits.iter().map(neve_core::describe::commit).collect();
        Ok(serde_json::Value::from(lines).to_string())
    }

    /// The splits of a version's files a read filtered by `predicate` needs, as JSON
    /// (for engines reading in parallel: Spark's data source).
    #[pyo3(signature = (as_of = None, predicate = None, target_bytes = 134217728))]
    fn _splits(
        &self,
        py: Python<'_>,
        as_of: Option<&str>,
        predicate: Option<String>,
        target_bytes: u64,
    ) -> PyResult<String> {
        let at = self::as_of(as_of)?.unwrap_or(AsOf::Latest);
        let t = self.table.clone();
        let splits = run(py, async move {
            neve_core::query::plan_splits(&t, at, predicate.as_deref(), target_bytes).await
        })?;
        Ok(json(&splits))
    }

    /// One split's rows, exact, filtered by `predicate`: its batches, as they are read.
    #[pyo3(signature = (version, paths, predicate = None))]
    fn _scan(
        &self,
        py: Python<'_>,
        version: u64,
        paths: Vec<String>,
        predicate: Option<String>,
    ) -> PyResult<PyBatches> {
        let t = self.table.clone();
        let stream = run(py, async move {
            neve_core::query::scan_split(&t, version, &paths, predicate.as_deref()).await
        })?;
        Ok(PyBatches::new(stream))
    }

    /// What a pyarrow dataset needs: the table schema, one row of statistics per file, the
    /// format version and where the files are.
    #[pyo3(signature = (as_of = None))]
    fn _dataset(
        &self,
        py: Python<'_>,
        as_of: Option<&str>,
    ) -> PyResult<(
        PyArrowType<arrow::datatypes::Schema>,
        PyArrowType<RecordBatch>,
        u32,
        String,
    )> {
        let at = self::as_of(as_of)?.unwrap_or(AsOf::Latest);
        let t = self.table.clone();
        let s = run(py, async move { t.snapshot_as_of(at).await })?;
        let loc = self.table.location();
        let stats = neve_core::describe::file_stats(loc, &s).map_err(py_err)?;
        let store = match &loc.kind {
            neve_core::storage::StoreKind::Local { dir } => {
                serde_json::json!({"kind": "local", "dir": dir})
            }
            neve_core::storage::StoreKind::S3 {
                bucket,
                prefix,
                endpoint,
                region,
            } => {
                serde_json::json!({"kind": "s3", "bucket": bucket, "prefix": prefix, "endpoint": endpoint, "region": region})
            }
            neve_core::storage::StoreKind::Memory => serde_json::json!({"kind": "memory"}),
        };
        Ok((
            PyArrowType(s.metadata.schema.to_arrow().as_ref().clone()),
            PyArrowType(stats),
            s.protocol.format_version,
            store.to_string(),
        ))
    }
}

/// Create a table and open it.
#[pyfunction]
#[pyo3(signature = (address, partition_by = None, sort_by = None, schema = None, settings = None, storage_options = None, merge = None))]
#[allow(clippy::too_many_arguments)]
fn _create(
    py: Python<'_>,
    address: &str,
    partition_by: Option<&str>,
    sort_by: Option<Vec<String>>,
    schema: Option<&str>,
    settings: Option<BTreeMap<String, String>>,
    storage_options: Option<StorageOptions>,
    merge: Option<&str>,
) -> PyResult<PyTable> {
    let table =
        Arc::new(Table::at_with(address, &storage_options.unwrap_or_default()).map_err(py_err)?);
    let mut table_settings = TableSettings::default();
    for (k, v) in settings.unwrap_or_default() {
        table_settings.set(&k, &v).map_err(py_err)?;
    }
    let opts = CreateOptions {
        partition_by: neve_core::partition::parse_spec(partition_by.unwrap_or(""))
            .map_err(py_err)?,
        sort_by: sort_by.unwrap_or_default(),
        settings: table_settings,
        schema: match schema {
            Some(s) => neve_core::schema::parse_schema(s).map_err(py_err)?,
            None => Default::default(),
        },
        merge: merge.map(str::parse).transpose().map_err(py_err)?,
    };
    let t = table.clone();
    run(py, async move { t.create(opts).await })?;
    Ok(PyTable {
        table,
        address: address.to_string(),
    })
}

/// Register `tables` (name to table) in a fresh engine at `as_of`, and plan `query`.
async fn plan(
    query: String,
    tables: Vec<(String, Arc<Table>)>,
    as_of: Option<AsOf>,
    raw: bool,
) -> neve_core::Result<SendableRecordBatchStream> {
    let chunks = CHUNKS
        .clone()
        .map_err(|reason| neve_core::Error::InvalidSetting {
            name: "NEVE_CHUNK_CACHE_MB".into(),
            reason,
        })?;
    let mut engine = QueryEngine::with_limits(neve_core::query::QueryLimits {
        footers: Some(FOOTERS.clone()),
        chunks,
        read_only: true,
        ..Default::default()
    });
    engine.set_raw(raw);
    for (name, table) in &tables {
        engine.register_table(name, table, as_of).await?;
    }
    engine.stream(&query).await
}

fn tables_of(tables: Vec<(String, Py<PyTable>)>) -> Vec<(String, Arc<Table>)> {
    tables
        .into_iter()
        .map(|(name, t)| (name, t.get().table.clone()))
        .collect()
}

/// Run `query` over `tables` to the end: a pyarrow.Table.
#[pyfunction]
#[pyo3(signature = (query, tables, as_of = None, raw = false))]
fn _sql(
    py: Python<'_>,
    query: String,
    tables: Vec<(String, Py<PyTable>)>,
    as_of: Option<&str>,
    raw: bool,
) -> PyResult<PyArrowType<PaTable>> {
    let at = self::as_of(as_of)?;
    let tables = tables_of(tables);
    let (schema, batches) = run(py, async move {
        let mut s = plan(query, tables, at, raw).await?;
        let schema = s.schema();
        let mut batches = Vec::new();
        while let Some(b) = s.next().await {
            batches.push(b.map_err(neve_core::query::query_error)?);
        }
        Ok((schema, batches))
    })?;
    Ok(PyArrowType(
        PaTable::try_new(batches, schema).map_err(arrow_err)?,
    ))
}

/// Batches of a running query, computed as Python reads them. Python wraps it in
/// `pyarrow.RecordBatchReader.from_batches`, so an error met mid-stream reaches a Python reader
/// as the neve exception of its kind (pyarrow keeps a Python iterator's exception), not as a
/// bare `ArrowInvalid`.
#[pyclass(name = "_Batches")]
struct PyBatches {
    schema: SchemaRef,
    /// Taken out while a batch is computed (the GIL released), put back after.
    stream: std::sync::Mutex<Feed>,
}

/// Where a stream of batches is: a reader told "no more rows" must have had them all.
enum Feed {
    Ready(SendableRecordBatchStream),
    /// Another thread is computing its next batch.
    Reading,
    Ended,
    /// It raised an error: what follows would be a short result.
    Failed,
}

impl PyBatches {
    fn new(stream: SendableRecordBatchStream) -> Self {
        Self {
            schema: stream.schema(),
            stream: std::sync::Mutex::new(Feed::Ready(stream)),
        }
    }
}

#[pymethods]
impl PyBatches {
    #[getter]
    fn schema(&self) -> PyArrowType<arrow::datatypes::Schema> {
        PyArrowType(self.schema.as_ref().clone())
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyArrowType<RecordBatch>>> {
        let mut stream = {
            let mut feed = self.stream.lock().expect("stream lock");
            match std::mem::replace(&mut *feed, Feed::Reading) {
                Feed::Ready(s) => s,
                Feed::Reading => {
                    return Err(InvalidInputError::new_err(
                        "another thread is reading this result: read a result from one thread",
                    ))
                }
                Feed::Ended => {
                    *feed = Feed::Ended;
                    return Ok(None);
                }
                Feed::Failed => {
                    *feed = Feed::Failed;
                    return Err(InternalError::new_err(
                        "this result failed before (see that error): its rows are incomplete",
                    ));
                }
            }
        };
        let next = run(py, async {
            let next = stream.next().await;
            Ok(next)
        });
        let mut feed = self.stream.lock().expect("stream lock");
        match next {
            Ok(Some(Ok(batch))) => {
                *feed = Feed::Ready(stream);
                Ok(Some(PyArrowType(batch)))
            }
            Ok(Some(Err(e))) => {
                *feed = Feed::Failed;
                Err(py_err(neve_core::query::query_error(e)))
            }
            Ok(None) => {
                *feed = Feed::Ended;
                Ok(None)
            }
            Err(e) => {
                *feed = Feed::Failed;
                Err(e)
            }
        }
    }
}

/// Start `query` over `tables`: its batches, computed as they are read (bounded memory).
#[pyfunction]
#[pyo3(signature = (query, tables, as_of = None, raw = false))]
fn _sql_stream(
    py: Python<'_>,
    query: String,
    tables: Vec<(String, Py<PyTable>)>,
    as_of: Option<&str>,
    raw: bool,
) -> PyResult<PyBatches> {
    let at = self::as_of(as_of)?;
    let tables = tables_of(tables);
    let stream = run(py, async move { plan(query, tables, at, raw).await })?;
    Ok(PyBatches::new(stream))
}

#[pymodule]
fn _neve(m: &Bound<'_, PyModule>) -> PyResult<()> {
    tune_allocator();
    // Every call runs on the one process-wide runtime.
    neve_core::storage::share_s3_clients();
    let py = m.py();
    m.add_class::<PyTable>()?;
    m.add_class::<PyBatches>()?;
    m.add_function(wrap_pyfunction!(_create, m)?)?;
    m.add_function(wrap_pyfunction!(_sql, m)?)?;
    m.add_function(wrap_pyfunction!(_sql_stream, m)?)?;
    m.add("NeveError", py.get_type::<NeveError>())?;
    m.add("InvalidInputError", py.get_type::<InvalidInputError>())?;
    m.add("SchemaError", py.get_type::<SchemaError>())?;
    m.add("SqlError", py.get_type::<SqlError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("ConflictError", py.get_type::<ConflictError>())?;
    m.add("StorageError", py.get_type::<StorageError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
