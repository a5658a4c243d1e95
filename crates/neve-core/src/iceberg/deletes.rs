//! Position deletes: how Iceberg readers see one row per key of a table with merge semantics.
//!
//! Between merges such a table stores several rows of a key. Iceberg has no notion of a key's
//! winning row, but it has position delete files: "row N of file F is not in the table". So for
//! every group of a partition's files whose rows are not all rows of the table (the runs an
//! exact read merges, and merged files that keep tombstones), a sync writes the positions of
//! the rows that lose, computed from the key, version and deleted columns as the reader picks
//! winners. A row that loses keeps losing as files join a group (they join after its files, in
//! merge order), so there is one delete file per prefix of a group: the rows its last file
//! makes lose (in it, or in earlier files), named by the prefix's files and the spec. An insert
//! that adds a file to a group adds one delete file of the rows it made lose, found by weighing
//! that file's rows against each key's best row kept from the sync before.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::{cast, concat};
use arrow::datatypes::DataType;
use arrow::row::{RowConverter, SortField};
use futures::TryStreamExt;
use parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use parquet::arrow::ProjectionMask;

use crate::error::{Error, Result};
use crate::log::{AddFile, Snapshot};
use crate::merge::MergeSpec;
use crate::storage::TableLocation;
use crate::write::KeptColumns;

pub(crate) use super::delete_file::DeleteFiles;
pub(crate) use super::keys::{KeyIds, PreNumbered};
pub(crate) use super::weigh::NewLosers;
use super::weigh::Weighed;

/// Iceberg's reserved field ids of a position delete file's columns (`file_path`'s also keys
/// its bounds in a manifest entry).
pub(crate) const FILE_PATH_FIELD: i32 = 2_147_483_546;
pub(crate) const POS_FIELD: i32 = 2_147_483_545;

/// The first and last data file URL (in byte order) a position delete file names: its entry's
/// `file_path` bounds, by which pyiceberg and Iceberg's Java reader apply it only to the data
/// files it can name (with equal bounds, to that one file).
pub(crate) type PathBounds = Option<Arc<(String, String)>>;

/// A delete file a sync knows of: rows, size and bounds (none without rows, or when read back
/// from a manifest written before bounds were).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Known {
    pub rows: u64,
    pub size: u64,
    pub paths: PathBounds,
}

/// One group's position delete file, as a delete manifest lists it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DeleteFile {
    /// Relative to the table root (`metadata/neve-<hash>-deletes.parquet`).
    pub key: String,
    /// The group's partition values (every file of a group shares them; shared by its
    /// delete files).
    pub partition_values: Arc<BTreeMap<String, Option<String>>>,
    /// Its rows, size and the data files it names.
    pub file: Known,
    /// The highest version that added one of the group's files: the delete applies to every
    /// data file of the group (Iceberg applies a position delete to data files whose sequence
    /// number is at most its own).
    pub sequence: i64,
}

/// The groups of `snap`'s files whose rows are not all rows of the table, each in the order
/// the reader merges them (commit order, then path): the runs of overlapping files, and merged
/// files alone that keep tombstones. From every file, as the reader finds them: what a sync's
/// [`super::groups::Grouping`] must agree with.
#[cfg(test)]
pub(crate) fn groups<'a>(snap: &'a Snapshot, spec: &MergeSpec) -> Vec<Vec<&'a AddFile>> {
    let schema = snap.metadata.schema.to_arrow();
    let files: Vec<Arc<AddFile>> = snap.files.values().cloned().collect();
    let stats = crate::query::stats::FileStats::new(files, schema);
    let split = crate::query::merged::split(
        spec,
        &stats,
        snap.files
            .values()
            .map(|f| f.as_ref())
            .enumerate()
            .collect(),
    );
    split
        .live
        .into_iter()
        .map(|f| vec![f])
        .chain(split.merged)
        .collect()
}

use super::groups::KEY_SCHEME;

/// How a sync under `spec` decides position deletes: the key scheme and the spec (what the
/// metadata records, so a later sync knows which delete files the version it describes has).
pub(crate) fn deletes_property(spec: &MergeSpec) -> String {
    format!("{KEY_SCHEME}; {spec}")
}

/// The delete files' keys of a group's prefixes (each holds the rows its prefix adds to the
/// losers): each a function of the table, the spec and the prefix's files. Written out here as
/// the scheme says, to check the keys a sync's [`super::groups::KeyChain`] gives.
#[cfg(test)]
pub(crate) fn prefix_keys(
    location: &TableLocation,
    spec: &MergeSpec,
    group: &[&AddFile],
) -> Vec<String> {
    use crate::merge::seq_of;
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(KEY_SCHEME.as_bytes());
    h.update(b"\n");
    h.update(location.file_url("").as_bytes());
    h.update(b"\n");
    h.update(spec.to_string().as_bytes());
    group
        .iter()
        .map(|f| {
            let (lo, hi) = seq_of(f);
            h.update(format!("\n{}\t{lo}\t{hi}\t{}", f.path, f.size).as_bytes());
            let d = h.clone().finalize();
            let hex = crate::partition::hex(&d[..16]);
            format!("metadata/neve-{hex}-deletes.parquet")
        })
        .collect()
}

/// The columns the winner of a key depends on: the key's, then the version's and the
/// deleted flag's (a `replace` with them).
pub(crate) fn decisive_names(spec: &MergeSpec) -> Result<Vec<String>> {
    match spec {
        MergeSpec::Replace {
            key,
            version,
            deleted,
        } => Ok(key.iter().chain(version).chain(deleted).cloned().collect()),
        MergeSpec::Dedupe { key } => Ok(key.clone()),
        MergeSpec::Aggregate { .. } => Err(Error::IcebergMergeSemantics {
            spec: spec.to_string(),
        }),
    }
}

/// The columns the winner of a key depends on, as the table types them.
fn decisive_columns(spec: &MergeSpec, snap: &Snapshot) -> Result<Vec<(String, DataType)>> {
    let names = decisive_names(spec)?;
    let schema = snap.metadata.schema.to_arrow();
    names
        .into_iter()
        .map(|n| {
            let field = schema
                .field_with_name(&n)
                .map_err(|_| Error::InvalidMergeSpec {
                    spec: spec.to_string(),
                    reason: format!("'{n}' is not a column of the table"),
                })?;
            let ty = field.data_type().clone();
            Ok((n, ty))
        })
        .collect()
}

/// `columns` of one data file, cast to the table's types (a column the file lacks is null).
async fn read_columns(
    location: &TableLocation,
    f: &AddFile,
    columns: &[(String, DataType)],
) -> Result<Vec<ArrayRef>> {
    use datafusion::datasource::physical_plan::parquet::{
        DefaultParquetFileReaderFactory, ParquetFileReaderFactory,
    };
    let file = datafusion::datasource::listing::PartitionedFile::new(
        location.child(&f.path).to_string(),
        f.size,
    );
    let reader = DefaultParquetFileReaderFactory::new(location.store.clone())
        .create_reader(
            0,
            file,
            None,
            &datafusion::physical_plan::metrics::ExecutionPlanMetricsSet::new(),
        )
        .map_err(crate::query::query_error)?;
    let reader: Box<dyn parquet::arrow::async_reader::AsyncFileReader> = reader;
    let builder = ParquetRecordBatchStreamBuilder::new(reader).await?;
    let file_schema = builder.schema().clone();
    let present: Vec<usize> = columns
        .iter()
        .filter_map(|(n, _)| file_schema.index_of(n).ok())
        .collect();
    let mask = ProjectionMask::roots(builder.parquet_schema(), present.iter().copied());
    let batches: Vec<RecordBatch> = builder.with_projection(mask).build()?.try_collect().await?;
    columns
        .iter()
        .map(|(name, ty)| {
            let parts: Vec<ArrayRef> = batches
                .iter()
                .filter_map(|b| b.column_by_name(name).cloned())
                .collect();
            let whole = match parts.len() {
                0 => None,
                1 => parts.into_iter().next(),
                _ => {
                    let refs: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
                    Some(concat(&refs)?)
                }
            };
            typed(whole, ty, f.rows as usize)
        })
        .collect()
}

/// How many of the decisive columns an insert may keep as the dictionaries the writer keyed
/// them into (see [`crate::write::DataWriter::keeping`]): a single key column, whose ids are
/// found by its values (`KeyIds::ids`). A key of several columns is turned into rows, and a
/// version is compared, as the table types them.
pub(crate) fn dictionary_keys(spec: &MergeSpec) -> usize {
    usize::from(spec.key().len() == 1)
}

/// Whether `c` is a dictionary whose values are of type `ty`.
fn dictionary_of(c: &ArrayRef, ty: &DataType) -> bool {
    matches!(c.data_type(), DataType::Dictionary(_, v) if **v == *ty)
}

/// A file's column as the table types it: cast to a wider type, or all null when the file
/// lacks it.
fn typed(column: Option<ArrayRef>, ty: &DataType, rows: usize) -> Result<ArrayRef> {
    Ok(match column {
        None => new_null_array(ty, rows),
        Some(c) if c.data_type() == ty => c,
        Some(c) => cast(&c, ty)?,
    })
}

/// Columns of files this process just wrote, by path, given by the insert that wrote them
/// (see [`crate::write::DataWriter::keeping`]): the sync after its commit takes them instead
/// of reading the files back.
/// With them, their keys' ids when they were numbered before the commit.
pub(crate) type GivenColumns =
    std::sync::Mutex<HashMap<String, (KeptColumns, Option<Arc<PreNumbered>>)>>;

/// A file's decisive columns, and its keys' ids if they were numbered already.
type FileColumns = (Vec<ArrayRef>, Option<Arc<PreNumbered>>);

/// `columns` of file `f`: given by its writer (the first `dictionaries` as it kept them, see
/// [`dictionary_keys`]), or read from it.
async fn file_columns(
    location: &TableLocation,
    f: &AddFile,
    columns: &[(String, DataType)],
    dictionaries: usize,
    given: Option<&GivenColumns>,
) -> Result<FileColumns> {
    let given = given.and_then(|g| g.lock().expect("given columns").remove(&f.path));
    match given {
        Some((kept, ids)) if kept.iter().all(|(_, c)| c.len() as u64 == f.rows) => {
            let cols = columns
                .iter()
                .enumerate()
                .map(|(i, (name, ty))| {
                    let c = kept.iter().find(|(n, _)| n == name).map(|(_, c)| c.clone());
                    // A key column the writer keyed stays a dictionary of the table's type.
                    match c {
                        Some(c) if i < dictionaries && dictionary_of(&c, ty) => Ok(c),
                        c => typed(c, ty, f.rows as usize),
                    }
                })
                .collect::<Result<_>>()?;
            Ok((cols, ids))
        }
        _ => Ok((read_columns(location, f, columns).await?, None)),
    }
}

/// What a sync keeps of a group, so that when files join it (an insert adds a file to a
/// partition's run) only those files are read: each key's best row over the group's first
/// files. A row that loses keeps losing as files join (the winner is the highest (version,
/// merge position), or the first row for `dedupe`, and files join after the ones there, in
/// merge order), so the best rows are all a sync must weigh a new file's rows against. They
/// are found by key id (see [`KeyIds`]), so a file joining costs a lookup per row of its own,
/// whatever the group holds (sorting them all again each time was most of an insert's sync).
#[derive(Debug, Clone)]
pub(crate) struct GroupState {
    /// The spec the state was decided under.
    spec: String,
    /// The decisive columns' types it was decided with: when a table's types widen, the
    /// group is decided again.
    types: Vec<DataType>,
    /// The files decided (paths), in merge order: a prefix of the group.
    files: Vec<String>,
    /// Their URLs as readers resolve them (what delete files name), made once a file.
    urls: Vec<String>,
    /// Turns keys of several columns, or of a type other than strings and bytes, into rows.
    keys: Arc<RowConverter>,
    /// The ids its best rows name their keys by.
    ids: Arc<KeyIds>,
    /// Each key's best row (the winner, or the tombstone that hides the key).
    best: Weighed,
}

impl GroupState {
    fn empty(
        spec: &MergeSpec,
        spec_text: String,
        types: Vec<DataType>,
        ids: Arc<KeyIds>,
    ) -> Result<Self> {
        let k = spec.key().len();
        let keys = RowConverter::new(
            types[..k]
                .iter()
                .map(|t| SortField::new(t.clone()))
                .collect(),
        )?;
        let version = match spec {
            MergeSpec::Replace {
                version: Some(_), ..
            } => Some(&types[k]),
            _ => None,
        };
        Ok(Self {
            best: Weighed::new(version)?,
            spec: spec_text,
            types,
            files: Vec::new(),
            urls: Vec::new(),
            keys: Arc::new(keys),
            ids,
        })
    }

    /// The files decided: a prefix of the group.
    pub(crate) fn files(&self) -> &[String] {
        &self.files
    }

    /// The URL of file number `file` of the group, as readers resolve it.
    pub(crate) fn url(&self, file: u32) -> &str {
        &self.urls[file as usize]
    }

    /// Whether its best rows name their keys by `ids`.
    pub(crate) fn names_keys_by(&self, ids: &Arc<KeyIds>) -> bool {
        Arc::ptr_eq(&self.ids, ids)
    }

    /// Best rows held: one per key.
    pub(crate) fn rows(&self) -> usize {
        self.best.rows()
    }

    /// Room held for best rows (see [`Weighed::slots`]).
    pub(crate) fn slots(&self) -> usize {
        self.best.slots()
    }

    /// Adds the file at `path` (its decisive columns `cols`, in the order `decisive_columns`
    /// gives): the rows that now lose, and the new best rows.
    fn step(
        &mut self,
        spec: &MergeSpec,
        (path, url): (String, String),
        (cols, numbered): FileColumns,
    ) -> Result<NewLosers> {
        let file = self.files.len() as u32;
        let k = spec.key().len();
        let numbered = numbered.filter(|n| n.fits(&self.ids, &cols[..k]));
        let ids = match numbered.as_ref().and_then(|n| n.ids()) {
            Some(ids) => std::borrow::Cow::Borrowed(ids),
            None => std::borrow::Cow::Owned(self.ids.ids(&cols[..k], &self.keys)?),
        };
        let (version, deleted) = match spec {
            MergeSpec::Replace {
                version, deleted, ..
            } => (
                version.as_ref().map(|_| &cols[k]),
                // A deleted column still of type null (no flag yet) deletes nothing.
                deleted
                    .as_ref()
                    .and_then(|_| cols[k + usize::from(version.is_some())].as_boolean_opt()),
            ),
            _ => (None, None),
        };
        let dedupe = matches!(spec, MergeSpec::Dedupe { .. });
        let lost = self.best.step(file, &ids, version, deleted, dedupe)?;
        self.files.push(path);
        self.urls.push(url);
        Ok(lost)
    }
}

/// A table's position delete files, what a sync knows of each by key: every one of them is looked up at
/// each sync, so by a fast hash, not SipHash (BENCHMARKS.md, "Forty-seventh session").
pub(crate) type KnownDeletes = HashMap<String, Known, ahash::RandomState>;

/// Kept states by the path of their group's first file.
pub(crate) type States = HashMap<String, Arc<GroupState>>;

/// What the groups a sync decides share.
pub(crate) struct Shared<'a> {
    /// The decisive columns, as the table types them (the schema turned into arrow once a
    /// sync, not once a group: a fifth of a sync's own thread with 132 groups).
    columns: Vec<(String, DataType)>,
    /// The spec as kept states record it.
    spec_text: String,
    /// The ids kept states name their keys by; a state of other ids is decided again.
    ids: &'a Arc<KeyIds>,
    /// The columns an insert gave of the files it wrote.
    given: Option<&'a GivenColumns>,
    /// Nanoseconds spent weighing rows (and what `resolve`'s caller does with each prefix) off
    /// the runtime, added to (see `weigh_ms` in the log).
    busy: &'a std::sync::atomic::AtomicU64,
    /// How delete files are written (shared by the threads that write them).
    pub(crate) files: Arc<DeleteFiles>,
}

impl<'a> Shared<'a> {
    pub(crate) fn new(
        spec: &MergeSpec,
        snap: &Snapshot,
        ids: &'a Arc<KeyIds>,
        given: Option<&'a GivenColumns>,
        busy: &'a std::sync::atomic::AtomicU64,
    ) -> Result<Self> {
        Ok(Self {
            columns: decisive_columns(spec, snap)?,
            spec_text: spec.to_string(),
            ids,
            given,
            busy,
            files: Arc::new(DeleteFiles::new()),
        })
    }
}

/// For each prefix of `group` (merge order) past the one `known` decided, the rows it adds
/// to the losers: rows that lose to another row of their key or whose key is deleted. Their
/// union is the group's losers. Each prefix's (its last file's index in the group, and the
/// group's state so far to name its files) is given to `each` on the thread that weighed it,
/// which returns what to keep of it. Also the state of the whole group.
pub(crate) async fn resolve<T: Send + 'static>(
    location: &TableLocation,
    spec: &MergeSpec,
    group: &[&AddFile],
    known: Option<Arc<GroupState>>,
    shared: &Shared<'_>,
    mut each: impl FnMut(&GroupState, usize, NewLosers) -> Result<Option<T>> + Send + 'static,
) -> Result<(Vec<T>, GroupState)> {
    let Shared {
        ref columns,
        ref spec_text,
        ids,
        given,
        busy,
        ..
    } = *shared;
    let types: Vec<DataType> = columns.iter().map(|(_, t)| t.clone()).collect();
    let known = known.filter(|s| {
        s.spec == *spec_text
            && s.names_keys_by(ids)
            && s.types == types
            && s.files.len() <= group.len()
            && s.files.iter().zip(group).all(|(p, f)| *p == f.path)
    });
    let mut state = match known {
        Some(s) => Arc::try_unwrap(s).unwrap_or_else(|s| s.as_ref().clone()),
        None => GroupState::empty(spec, spec_text.clone(), types, ids.clone())?,
    };
    let mut out = Vec::new();
    // The files not decided, a few read at a time, then decided in turn off the runtime's
    // threads (so several groups decide on several cores at once), each prefix handed to
    // `each` there (one task a group, where a second to write its delete files cost a
    // tenth of deciding in switches between threads; BENCHMARKS.md, "Forty-sixth session").
    let todo = &group[state.files.len()..];
    for some in todo.chunks(crate::log::READ_CONCURRENCY) {
        let reads = some
            .iter()
            .map(|f| file_columns(location, f, columns, dictionary_keys(spec), given));
        let read = futures::future::try_join_all(reads).await?;
        let paths: Vec<(String, String)> = some
            .iter()
            .map(|f| (f.path.clone(), location.file_url(&f.path)))
            .collect();
        let spec = spec.clone();
        let (s, e, kept, took) = on_pool(move || {
            let t = std::time::Instant::now();
            let mut kept = Vec::new();
            for (path, cols) in paths.into_iter().zip(read) {
                let lost = state.step(&spec, path, cols)?;
                kept.extend(each(&state, state.files.len() - 1, lost)?);
            }
            Ok::<_, Error>((state, each, kept, t.elapsed()))
        })
        .await??;
        busy.fetch_add(took.as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
        (state, each) = (s, e);
        out.extend(kept);
    }
    Ok((out, state))
}

/// Runs `work` on the rayon pool (a thread per core) and waits for it without blocking the
/// runtime. A sync's groups queue there: on tokio's blocking pool each took a thread woken for
/// it, and the waits between one group and the next left the cores idle (BENCHMARKS.md,
/// "Forty-seventh session"). A panic is an error, not an abort of the process.
async fn on_pool<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    let (tx, rx) = futures::channel::oneshot::channel();
    rayon::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)));
    });
    match rx.await {
        Ok(Ok(out)) => Ok(out),
        Ok(Err(panic)) => {
            let why = panic
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("no message");
            Err(Error::TaskFailed(format!(
                "deciding a group of position deletes panicked: {why}"
            )))
        }
        Err(_) => Err(Error::TaskFailed(
            "deciding a group of position deletes stopped".into(),
        )),
    }
}

/// Positions deleted, by data file (its URL as readers resolve it): each file once, its
/// positions ascending (as the weighing's bitmaps read them out).
pub(crate) type DeletedRows<'a> = Vec<(&'a str, Vec<u64>)>;

/// What an Iceberg reader reads at the current snapshot: every data file's rows but those its
/// position deletes name (a reader walking the metadata, for tests against the log's reads).
#[cfg(test)]
pub(crate) async fn rows_read_through_iceberg(location: &TableLocation) -> Vec<RecordBatch> {
    use std::collections::{HashMap, HashSet};

    use apache_avro::types::Value;
    use object_store::ObjectStoreExt;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    let get = |key: String| async move {
        location
            .store
            .get(&location.child(&key))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
    };
    let rel = |url: &str| super::tests::key_of(location, url);
    let field = |fields: &[(String, Value)], name: &str| -> Value {
        let v = fields.iter().find(|(n, _)| n == name).unwrap().1.clone();
        match v {
            Value::Union(_, b) => *b,
            v => v,
        }
    };
    let records = |bytes: &[u8]| -> Vec<Vec<(String, Value)>> {
        apache_avro::Reader::new(bytes)
            .unwrap()
            .map(|r| match r.unwrap() {
                Value::Record(f) => f,
                v => panic!("{v:?}"),
            })
            .collect()
    };
    let hint = String::from_utf8(get(super::HINT.to_string()).await.to_vec()).unwrap();
    let meta: super::TableMetadata =
        serde_json::from_slice(&get(super::metadata_key(hint.trim().parse().unwrap())).await)
            .unwrap();
    let Some(current) = meta
        .snapshots
        .iter()
        .find(|s| s.snapshot_id == meta.current_snapshot_id)
    else {
        // Only created: no snapshot, no rows.
        assert_eq!(meta.current_snapshot_id, -1);
        return vec![];
    };
    let (mut data, mut deleted) = (Vec::new(), HashMap::<String, HashSet<i64>>::new());
    for m in records(&get(rel(&current.manifest_list)).await) {
        let Value::String(path) = field(&m, "manifest_path") else {
            panic!()
        };
        for e in records(&get(rel(&path)).await) {
            let Value::Record(df) = field(&e, "data_file") else {
                panic!()
            };
            let Value::String(file) = field(&df, "file_path") else {
                panic!()
            };
            let Value::Int(content) = field(&df, "content") else {
                panic!()
            };
            if content == 0 {
                data.push(file);
                continue;
            }
            for (path, pos) in delete_file_rows(get(rel(&file)).await) {
                // Delete files never overlap: the summary's counts add up.
                assert!(
                    deleted.entry(path.clone()).or_default().insert(pos),
                    "{file} deletes {path}:{pos} again"
                );
            }
        }
    }
    let mut out = Vec::new();
    for file in data {
        let gone = deleted.remove(&file).unwrap_or_default();
        let bytes = get(rel(&file)).await;
        let mut at = 0i64;
        for b in ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap()
            .build()
            .unwrap()
        {
            let b = b.unwrap();
            let keep: arrow::array::BooleanArray = (0..b.num_rows() as i64)
                .map(|i| Some(!gone.contains(&(at + i))))
                .collect();
            at += b.num_rows() as i64;
            out.push(arrow::compute::filter_record_batch(&b, &keep).unwrap());
        }
    }
    assert!(
        deleted.is_empty(),
        "deletes of files no snapshot lists: {deleted:?}"
    );
    out
}

/// The `(file_path, pos)` rows of a position delete file.
#[cfg(test)]
fn delete_file_rows(bytes: bytes::Bytes) -> Vec<(String, i64)> {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    let mut out = Vec::new();
    for b in ParquetRecordBatchReaderBuilder::try_new(bytes)
        .unwrap()
        .build()
        .unwrap()
    {
        let b = b.unwrap();
        let paths = b.column(0).as_string::<i32>();
        let pos = b.column(1).as_primitive::<arrow::datatypes::Int64Type>();
        out.extend((0..b.num_rows()).map(|i| (paths.value(i).to_string(), pos.value(i))));
    }
    out
}

/// Every prefix of every group of the table's current snapshot has the delete file a sync with
/// nothing kept decides (a writer that went on from kept states wrote the same positions under
/// the same keys).
#[cfg(test)]
pub(crate) async fn assert_deletes_decided_afresh(location: &TableLocation, snap: &Snapshot) {
    use object_store::ObjectStoreExt;

    let spec = snap.metadata.merge.as_ref().expect("merge semantics");
    for group in groups(snap, spec) {
        let (ids, busy) = (Arc::default(), Default::default());
        let shared = Shared::new(spec, snap, &ids, None, &busy).unwrap();
        let (steps, _) = resolve(location, spec, &group, None, &shared, |_, _, l| Ok(Some(l)))
            .await
            .unwrap();
        assert_eq!(steps.len(), group.len());
        for (step, key) in steps.into_iter().zip(prefix_keys(location, spec, &group)) {
            let mut want: Vec<(String, i64)> = step
                .into_iter()
                .flat_map(|(f, p)| {
                    let url = location.file_url(&group[f as usize].path);
                    p.into_iter().map(move |p| (url.clone(), p as i64))
                })
                .collect();
            want.sort();
            let stored = match location.store.get(&location.child(&key)).await {
                Ok(r) => r.bytes().await.unwrap(),
                Err(object_store::Error::NotFound { .. }) => {
                    assert!(want.is_empty(), "{key} missing, afresh {want:?}");
                    continue;
                }
                Err(e) => panic!("{e}"),
            };
            assert_eq!(delete_file_rows(stored), want, "{key}");
        }
    }
}
