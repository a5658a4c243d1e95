//! Manifests and manifest lists for one version of the table.
//!
//! The alive files, ordered by the version that added them and path, are cut into chunks where
//! a file's path hashes to a boundary (about [`CHUNK_FILES`] files a chunk, cut the same way
//! whatever came before); after the last cut, at each version. A chunk is one manifest, named
//! by a hash of what it holds. An insert writes a manifest of its own files (and, when one of
//! them is a cut, the one chunk the cut closes: the tail's earlier versions and its files up
//! to the cut); a merge rewrites the chunks of the files it replaced. Every other manifest of
//! the previous version is reused as it is, so a sync writes a few small files per commit
//! however large the table.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use apache_avro::types::Value;
use apache_avro::writer::datum::GenericDatumWriter;
use sha2::{Digest, Sha256};

use serde::Serialize;

use super::avro::manifest_schema;
use super::avro::{avro_field_name, parse_schema};
use super::metrics::{MetricsConfig, Resolved};
use super::types::{file_bounds, partition_datum, stat_fields, Datum, Prim, SpecField};
use crate::error::Result;
use crate::log::AddFile;
use crate::storage::TableLocation;

mod deletes;
mod list;
pub(crate) use deletes::{assemble_delete_manifests, read_delete_manifest, DeleteEntries};
pub(crate) use list::{build_manifest_list, manifest_list_key, read_manifest_list};

/// Files per manifest, on average.
pub(crate) const CHUNK_FILES: u32 = 64;

/// A manifest's (and a file entry's) content: data files, or position delete files.
pub(crate) const DATA: i32 = 0;
pub(crate) const DELETES: i32 = 1;

/// Entry status: added by the manifest's own snapshot, or carried over from an earlier one.
const ADDED: i32 = 1;
const EXISTING: i32 = 0;

/// What a version's manifests are written against.
#[derive(Debug)]
pub(crate) struct Layout {
    pub location: TableLocation,
    /// The table schema JSON (with `schema-id`), as manifests carry it.
    pub schema_json: String,
    pub schema_id: i32,
    pub spec: Vec<SpecField>,
    pub stat_fields: Vec<(String, i32, Prim, bool)>,
    /// Which counts and bounds each field's entries carry.
    pub metrics: Resolved,
    /// The manifest schema's JSON and the schema parsed once for every manifest.
    manifest_text: String,
    manifest_parsed: apache_avro::Schema,
    /// The spec's field names as Avro names, and its fields' JSON.
    avro_names: Vec<String>,
    spec_fields: String,
    /// Hash of everything above that goes into a manifest.
    salt: [u8; 32],
}

impl Layout {
    pub fn new(
        location: &TableLocation,
        schema: &crate::schema::TableSchema,
        schema_json: String,
        schema_id: i32,
        spec: Vec<SpecField>,
        metrics: &MetricsConfig,
    ) -> Result<Self> {
        let manifest_text = manifest_schema(&spec).to_string();
        let manifest_parsed = parse_schema(&manifest_text)?;
        let spec_json = super::types::spec_json(&spec);
        let mut h = Sha256::new();
        h.update(b"neve iceberg manifest 1\n");
        h.update(location.file_url("").as_bytes());
        h.update(b"\n");
        h.update(schema_json.as_bytes());
        h.update(b"\n");
        h.update(spec_json.to_string().as_bytes());
        // Tables that never set it keep their manifests' names.
        if *metrics != MetricsConfig::default() {
            h.update(b"\nmetrics ");
            h.update(metrics.to_string().as_bytes());
        }
        let stat_fields = stat_fields(schema);
        let (metrics, unknown) = metrics.resolve(&stat_fields);
        if !unknown.is_empty() {
            tracing::warn!(columns = ?unknown, "iceberg_metrics names columns the table does not have; they keep the default");
        }
        Ok(Self {
            location: location.clone(),
            schema_json,
            schema_id,
            metrics,
            stat_fields,
            avro_names: spec.iter().map(|f| avro_field_name(&f.name)).collect(),
            spec_fields: spec_json["fields"].to_string(),
            spec,
            manifest_text,
            manifest_parsed,
            salt: h.finalize().into(),
        })
    }
}

/// A partition field's summary: contains null, lower and upper bound (Iceberg's binary form).
pub(crate) type FieldSummary = (bool, Option<Vec<u8>>, Option<Vec<u8>>);

/// A manifest as its manifest list describes it.
#[derive(Debug, Clone)]
pub(crate) struct ManifestInfo {
    /// Relative to the table root (`metadata/neve-….avro`).
    pub key: String,
    /// What its entries are: [`DATA`] files, or [`DELETES`] (position delete files).
    pub content: i32,
    pub length: u64,
    pub added_snapshot: i64,
    pub min_sequence: i64,
    pub added_files: i32,
    pub existing_files: i32,
    pub added_rows: i64,
    pub existing_rows: i64,
    /// Per partition field.
    pub partitions: Vec<FieldSummary>,
}

impl ManifestInfo {
    /// A manifest of entries at `versions` (sequence numbers), counted by [`Self::count`].
    fn start(key: String, content: i32, versions: impl Iterator<Item = i64> + Clone) -> Self {
        Self {
            key,
            content,
            length: 0,
            added_snapshot: versions.clone().max().unwrap_or(0),
            min_sequence: versions.min().unwrap_or(0),
            added_files: 0,
            existing_files: 0,
            added_rows: 0,
            existing_rows: 0,
            partitions: vec![],
        }
    }

    /// Count an entry of `rows` at `version`; whether it is `ADDED` (the manifest's own
    /// snapshot) rather than `EXISTING`.
    fn count(&mut self, version: i64, rows: u64) -> bool {
        let added = version == self.added_snapshot;
        if added {
            self.added_files += 1;
            self.added_rows += rows as i64;
        } else {
            self.existing_files += 1;
            self.existing_rows += rows as i64;
        }
        added
    }
}

/// A manifest's partition summary, built entry by entry: per field, whether a value is null,
/// and the lowest and highest.
struct Summaries<'a>(Vec<(bool, Option<&'a Datum>, Option<&'a Datum>)>);

impl<'a> Summaries<'a> {
    fn new(fields: usize) -> Self {
        Self(vec![(false, None, None); fields])
    }

    fn add(&mut self, partition: &'a [Option<Datum>]) {
        for (summary, d) in self.0.iter_mut().zip(partition) {
            match d {
                None => summary.0 = true,
                Some(d) => {
                    if summary.1.is_none_or(|lo| d < lo) {
                        summary.1 = Some(d);
                    }
                    if summary.2.is_none_or(|hi| d > hi) {
                        summary.2 = Some(d);
                    }
                }
            }
        }
    }

    fn finish(self) -> Vec<FieldSummary> {
        self.0
            .into_iter()
            .map(|(null, lo, hi)| {
                (
                    null,
                    lo.map(|d| d.clone().to_bytes()),
                    hi.map(|d| d.clone().to_bytes()),
                )
            })
            .collect()
    }
}

/// A version's alive files cut into chunks (see the module doc); what [`chunks_named`]
/// computes, from every file.
#[cfg(test)]
pub(crate) fn chunks(files: &BTreeMap<String, Arc<AddFile>>) -> Vec<Vec<&AddFile>> {
    let mut all: Vec<&AddFile> = files.values().map(|f| f.as_ref()).collect();
    all.sort_by(|a, b| (version_of(a), &a.path).cmp(&(version_of(b), &b.path)));
    let (mut out, tail) = cut(all);
    out.extend(split_tail(tail));
    out
}

/// What manifests are cut by, for data files and position delete files alike: a name hashed
/// for the cuts, and the version the open tail is split by.
trait Chunked {
    fn name(&self) -> &str;
    fn version(&self) -> i64;
}

impl Chunked for &AddFile {
    fn name(&self) -> &str {
        &self.path
    }
    fn version(&self) -> i64 {
        version_of(self)
    }
}

impl Chunked for &super::deletes::DeleteFile {
    fn name(&self) -> &str {
        &self.key
    }
    fn version(&self) -> i64 {
        self.sequence
    }
}

/// Items in chunk order cut where a name hashes to a boundary: the closed chunks, and the
/// items after the last cut.
fn cut<T: Chunked>(items: Vec<T>) -> (Vec<Vec<T>>, Vec<T>) {
    let mut out = Vec::new();
    let mut cur: Vec<T> = Vec::new();
    for f in items {
        let h = murmur3::murmur3_32(&mut std::io::Cursor::new(f.name().as_bytes()), 0x1ceb)
            .unwrap_or(0);
        cur.push(f);
        if h % CHUNK_FILES == 0 {
            out.push(std::mem::take(&mut cur));
        }
    }
    (out, cur)
}

/// The open tail, after the last cut: one chunk per version, so an insert writes a manifest of
/// its own files alone until a cut folds the tail into one chunk.
fn split_tail<T: Chunked>(tail: Vec<T>) -> Vec<Vec<T>> {
    let mut out: Vec<Vec<T>> = Vec::new();
    for f in tail {
        match out.last_mut() {
            Some(last) if last[0].version() == f.version() => last.push(f),
            _ => out.push(vec![f]),
        }
    }
    out
}

/// A chunk's manifest key and digest ([`chunk_key`]).
pub(crate) type ChunkName = (String, [u8; 32]);

/// One chunk of a version: its manifest's name, and its files (or only their paths, for a
/// closed chunk carried over from the version before, whose manifest is usually known).
pub(crate) struct Chunk<'a> {
    pub named: ChunkName,
    pub files: ChunkFiles<'a>,
}

pub(crate) enum ChunkFiles<'a> {
    Files(Vec<&'a AddFile>),
    Paths(Arc<Vec<String>>),
}

impl<'a> ChunkFiles<'a> {
    /// The files, looked up in the version's files when only their paths are kept.
    pub fn resolve(&self, files: &'a BTreeMap<String, Arc<AddFile>>) -> Vec<&'a AddFile> {
        match self {
            ChunkFiles::Files(f) => f.clone(),
            ChunkFiles::Paths(p) => p
                .iter()
                .filter_map(|k| files.get(k).map(|f| f.as_ref()))
                .collect(),
        }
    }
}

/// How the version a sync last described was cut, so that the next version's chunks follow
/// from the files it added, not from sorting and hashing every file of the table again (on a
/// table of 7,500 files, 2.2 ms of each commit's sync, growing with the table).
#[derive(Debug, Clone)]
pub(crate) struct ChunkMemo {
    version: u64,
    salt: [u8; 32],
    files: usize,
    /// The closed chunks, in order: name and paths.
    closed: Vec<(ChunkName, Arc<Vec<String>>)>,
    /// The files after the last cut, in chunk order.
    tail: Vec<String>,
    /// The encoded entries of the files after the last cut, which the next insert folds into
    /// a chunk; by path. Valid for layouts of this salt.
    entries: HashMap<String, EncodedEntry>,
}

impl ChunkMemo {
    /// The encoded entries kept for `layout` (none if it changed since).
    pub fn take_entries(&mut self, layout: &Layout) -> HashMap<String, EncodedEntry> {
        let entries = std::mem::take(&mut self.entries);
        if self.salt == layout.salt {
            entries
        } else {
            HashMap::new()
        }
    }

    /// Keep, of `encoded`, the entries of the files after the last cut.
    pub fn keep_entries(&mut self, encoded: &mut HashMap<String, EncodedEntry>) {
        self.entries = self
            .tail
            .iter()
            .filter_map(|p| encoded.remove_entry(p))
            .collect();
    }
}

/// A version's chunks with their names, from `memo` when it describes the version before and
/// this version only added files (an insert); else from every file. Returns the memo of
/// this version too.
pub(crate) fn chunks_named<'a>(
    layout: &Layout,
    version: u64,
    files: &'a BTreeMap<String, Arc<AddFile>>,
    memo: Option<&ChunkMemo>,
) -> (Vec<Chunk<'a>>, ChunkMemo) {
    let v = version as i64;
    let incremental = memo.filter(|m| m.version + 1 == version && m.salt == layout.salt);
    let (carried, closed, tail) = match incremental.and_then(|m| {
        let mut added: Vec<&AddFile> = files
            .values()
            .map(|f| f.as_ref())
            .filter(|f| version_of(f) == v)
            .collect();
        // Nothing removed: the files of earlier versions are the memo's, and every new file
        // sorts after them.
        if m.files + added.len() != files.len() {
            return None;
        }
        added.sort_by(|a, b| a.path.cmp(&b.path));
        let mut run: Vec<&AddFile> = Vec::with_capacity(m.tail.len() + added.len());
        for p in &m.tail {
            run.push(files.get(p)?.as_ref());
        }
        if run.iter().any(|f| version_of(f) >= v) {
            return None;
        }
        run.extend(added);
        let (closed, tail) = cut(run);
        Some((m.closed.clone(), closed, tail))
    }) {
        Some(x) => x,
        None => {
            let mut all: Vec<&AddFile> = files.values().map(|f| f.as_ref()).collect();
            all.sort_by(|a, b| (version_of(a), &a.path).cmp(&(version_of(b), &b.path)));
            let (closed, tail) = cut(all);
            (Vec::new(), closed, tail)
        }
    };
    let mut memo = ChunkMemo {
        version,
        salt: layout.salt,
        files: files.len(),
        closed: carried,
        tail: tail.iter().map(|f| f.path.clone()).collect(),
        entries: HashMap::new(),
    };
    let mut out: Vec<Chunk<'a>> = memo
        .closed
        .iter()
        .map(|(named, paths)| Chunk {
            named: named.clone(),
            files: ChunkFiles::Paths(paths.clone()),
        })
        .collect();
    for chunk in closed {
        let named = chunk_key(layout, &chunk);
        let paths = Arc::new(chunk.iter().map(|f| f.path.clone()).collect::<Vec<_>>());
        memo.closed.push((named.clone(), paths));
        out.push(Chunk {
            named,
            files: ChunkFiles::Files(chunk),
        });
    }
    for chunk in split_tail(tail) {
        out.push(Chunk {
            named: chunk_key(layout, &chunk),
            files: ChunkFiles::Files(chunk),
        });
    }
    (out, memo)
}

fn version_of(f: &AddFile) -> i64 {
    f.added_version.unwrap_or(0) as i64
}

/// The name a chunk's manifest has: a hash of the layout and the files.
pub(crate) fn chunk_key(layout: &Layout, chunk: &[&AddFile]) -> (String, [u8; 32]) {
    let mut h = Sha256::new();
    h.update(layout.salt);
    for f in chunk {
        h.update(f.path.as_bytes());
        h.update(b"\0");
        h.update(version_of(f).to_le_bytes());
    }
    let d: [u8; 32] = h.finalize().into();
    let hex = crate::partition::hex(&d[..16]);
    (format!("metadata/neve-{hex}-m0.avro"), d)
}

/// The manifest of one chunk written entry by entry through the crate's writer: the bytes
/// [`encode_entry`] and [`assemble_manifest`] must write.
#[cfg(test)]
pub(crate) fn reference_manifest(
    layout: &Layout,
    chunk: &[&AddFile],
    (_, digest): (String, [u8; 32]),
) -> Result<Vec<u8>> {
    let added_snapshot = chunk.iter().map(|f| version_of(f)).max().unwrap_or(0);
    let marker: [u8; 16] = digest[16..].try_into().expect("16 bytes");
    super::avro::container_with(
        &layout.manifest_parsed,
        &layout.manifest_text,
        &manifest_metadata(layout, DATA),
        marker,
        |w| {
            for f in chunk {
                let status = if version_of(f) == added_snapshot {
                    ADDED
                } else {
                    EXISTING
                };
                w.append_ser(entry_at(
                    layout,
                    f,
                    version_of(f),
                    status,
                    &partition_of(layout, f),
                ))?;
            }
            Ok(())
        },
    )
}

/// One file's manifest entry, encoded once: its Avro datum as an `ADDED` entry (as `EXISTING`
/// it differs only in its first byte, the status) and its partition values. The open tail an
/// insert folds into a chunk was encoded by the sync before; its entries are reused, not
/// encoded again (one taxi insert's sync encoded 135–266 entries for its 125 new files).
#[derive(Debug, Clone)]
pub(crate) struct EncodedEntry {
    version: i64,
    rows: u64,
    datum: Arc<[u8]>,
    partition: Arc<[Option<Datum>]>,
}

impl EncodedEntry {
    /// Whether this is the entry of `f` (files are immutable: a path at a version is one file).
    pub fn is_of(&self, f: &AddFile) -> bool {
        self.version == version_of(f)
    }
}

/// The datum writer of a layout's manifest schema, shared by the threads encoding entries.
pub(crate) fn entry_writer(layout: &Layout) -> Result<GenericDatumWriter<'_>> {
    GenericDatumWriter::builder(&layout.manifest_parsed)
        .build()
        .map_err(avro_error)
}

fn avro_error(e: apache_avro::Error) -> crate::error::Error {
    crate::error::Error::IcebergMetadata {
        path: "(avro)".into(),
        reason: format!("record: {e}"),
    }
}

/// `f`'s partition values in the layout's spec.
fn partition_of(layout: &Layout, f: &AddFile) -> Vec<Option<Datum>> {
    partition_of_values(layout, &f.partition_values)
}

/// Partition values (as the log keeps them) in the layout's spec.
fn partition_of_values(
    layout: &Layout,
    values: &BTreeMap<String, Option<String>>,
) -> Vec<Option<Datum>> {
    layout
        .spec
        .iter()
        .map(|sf| {
            values
                .get(&sf.name)
                .cloned()
                .flatten()
                .and_then(|label| partition_datum(sf, &label))
        })
        .collect()
}

/// `f`'s manifest entry with `status`, as added at version `v` (`partition` is [`partition_of`] `f`).
fn entry_at<'a>(
    layout: &'a Layout,
    f: &AddFile,
    v: i64,
    status: i32,
    partition: &[Option<Datum>],
) -> Entry<'a> {
    let b = file_bounds(&layout.stat_fields, &layout.metrics, &f.stats, f.rows);
    let longs = |v: Vec<(i32, i64)>| v.into_iter().map(|(key, value)| IntKey { key, value });
    let bytes = |v: Vec<(i32, Vec<u8>)>| {
        v.into_iter()
            .map(|(key, value)| IntKeyBytes { key, value })
            .collect()
    };
    Entry {
        status,
        snapshot_id: Some(v),
        sequence_number: Some(v),
        file_sequence_number: Some(v),
        data_file: DataFile {
            content: 0,
            file_path: layout.location.file_url(&f.path),
            file_format: "PARQUET",
            partition: PartitionRecord::new(layout, partition),
            record_count: f.rows as i64,
            file_size_in_bytes: f.size as i64,
            column_sizes: None,
            value_counts: Some(longs(b.value_counts).collect()),
            null_value_counts: Some(longs(b.null_counts).collect()),
            nan_value_counts: None,
            lower_bounds: Some(bytes(b.lower)),
            upper_bounds: Some(bytes(b.upper)),
            key_metadata: None,
            split_offsets: None,
            equality_ids: None,
            sort_order_id: None,
        },
    }
}

/// Encode `f`'s manifest entry (see [`EncodedEntry`]).
pub(crate) fn encode_entry(
    layout: &Layout,
    writer: &GenericDatumWriter<'_>,
    f: &AddFile,
) -> Result<EncodedEntry> {
    encode_entry_at(layout, writer, f, version_of(f))
}

/// [`encode_entry`] of `f` as added at version `v` (a file about to be committed).
pub(crate) fn encode_entry_at(
    layout: &Layout,
    writer: &GenericDatumWriter<'_>,
    f: &AddFile,
    v: i64,
) -> Result<EncodedEntry> {
    let partition = partition_of(layout, f);
    let mut datum = Vec::with_capacity(2048);
    writer
        .write_ser(&mut datum, &entry_at(layout, f, v, ADDED, &partition))
        .map_err(avro_error)?;
    debug_assert_eq!(
        datum.first(),
        super::avro::zigzag_bytes(ADDED.into()).first()
    );
    Ok(EncodedEntry {
        version: v,
        rows: f.rows,
        datum: datum.into(),
        partition: partition.into(),
    })
}

/// The manifest of one chunk, from its files' encoded entries, in chunk order: its bytes and
/// how the manifest list describes it. `(key, digest)` is the chunk's [`chunk_key`].
pub(crate) fn assemble_manifest(
    layout: &Layout,
    chunk: &[&EncodedEntry],
    (key, digest): (String, [u8; 32]),
) -> (ManifestInfo, Vec<u8>) {
    assemble(layout, DATA, chunk, key, &digest)
}

/// A manifest of `content` (data or delete files) from encoded entries, in order: each entry
/// `ADDED` if it is of the manifest's newest version, else `EXISTING`.
fn assemble(
    layout: &Layout,
    content: i32,
    chunk: &[&EncodedEntry],
    key: String,
    digest: &[u8; 32],
) -> (ManifestInfo, Vec<u8>) {
    let mut info = ManifestInfo::start(key, content, chunk.iter().map(|e| e.version));
    let mut summaries = Summaries::new(layout.spec.len());
    let (added, existing) = (
        super::avro::zigzag_bytes(ADDED.into()),
        super::avro::zigzag_bytes(EXISTING.into()),
    );
    let mut records = Vec::with_capacity(chunk.len());
    for e in chunk {
        let status = if info.count(e.version, e.rows) {
            &added
        } else {
            &existing
        };
        summaries.add(&e.partition);
        // The status is the record's first field, one byte either way.
        records.push([status.as_slice(), &e.datum[added.len()..]]);
    }
    info.partitions = summaries.finish();
    let marker: [u8; 16] = digest[16..].try_into().expect("16 bytes");
    let bytes = super::avro::container_of_datums(
        &layout.manifest_text,
        &manifest_metadata(layout, content),
        marker,
        records,
    );
    info.length = bytes.len() as u64;
    (info, bytes)
}

/// A manifest's header metadata.
fn manifest_metadata(layout: &Layout, content: i32) -> [(&'static str, String); 6] {
    let content = if content == DELETES {
        "deletes"
    } else {
        "data"
    };
    [
        ("schema", layout.schema_json.clone()),
        ("schema-id", layout.schema_id.to_string()),
        ("partition-spec", layout.spec_fields.clone()),
        ("partition-spec-id", "0".to_string()),
        ("format-version", "2".to_string()),
        ("content", content.to_string()),
    ]
}

fn metadata_error(key: &str, reason: String) -> crate::error::Error {
    crate::error::Error::IcebergMetadata {
        path: key.to_string(),
        reason,
    }
}

/// The records of a stored Avro container (at `key`), each as its fields by name.
fn avro_records(key: &str, bytes: &[u8]) -> Result<Vec<BTreeMap<String, Value>>> {
    let reader = apache_avro::Reader::new(bytes).map_err(|e| metadata_error(key, e.to_string()))?;
    reader
        .map(
            |r| match r.map_err(|e| metadata_error(key, e.to_string()))? {
                Value::Record(fields) => Ok(fields.into_iter().collect()),
                _ => Err(metadata_error(key, "not a record".into())),
            },
        )
        .collect()
}

fn long_field(key: &str, f: &BTreeMap<String, Value>, name: &str) -> Result<i64> {
    match f.get(name) {
        Some(Value::Long(v)) => Ok(*v),
        Some(Value::Int(v)) => Ok(*v as i64),
        _ => Err(metadata_error(key, format!("no {name}"))),
    }
}

/// A path field that names a file under the table's `metadata/`, relative to the table root.
fn under_metadata(key: &str, f: &BTreeMap<String, Value>, name: &str) -> Result<String> {
    let Some(Value::String(path)) = f.get(name) else {
        return Err(metadata_error(key, format!("no {name}")));
    };
    match path.rfind("/metadata/") {
        Some(at) => Ok(path[at + 1..].to_string()),
        None => Err(metadata_error(
            key,
            format!("'{path}' is not under metadata/"),
        )),
    }
}

// A manifest entry as the `manifest_entry` schema declares it, serialised straight into the
// container: a `Value` tree per entry cost most of a small insert's sync.
#[derive(Serialize)]
struct Entry<'a> {
    status: i32,
    snapshot_id: Option<i64>,
    sequence_number: Option<i64>,
    file_sequence_number: Option<i64>,
    data_file: DataFile<'a>,
}

/// Always-null optional fields are typed `Option<()>`.
#[derive(Serialize)]
struct DataFile<'a> {
    content: i32,
    file_path: String,
    file_format: &'static str,
    partition: PartitionRecord<'a>,
    record_count: i64,
    file_size_in_bytes: i64,
    column_sizes: Option<()>,
    value_counts: Option<Vec<IntKey>>,
    null_value_counts: Option<Vec<IntKey>>,
    nan_value_counts: Option<()>,
    lower_bounds: Option<Vec<IntKeyBytes>>,
    upper_bounds: Option<Vec<IntKeyBytes>>,
    key_metadata: Option<()>,
    split_offsets: Option<()>,
    equality_ids: Option<()>,
    sort_order_id: Option<()>,
}

/// An entry of an int-keyed map, which Iceberg writes as an array of key/value records.
#[derive(Serialize)]
struct IntKey {
    key: i32,
    value: i64,
}

#[derive(Serialize)]
struct IntKeyBytes {
    key: i32,
    #[serde(with = "apache_avro::serde::bytes")]
    value: Vec<u8>,
}

/// The partition record: its fields are the spec's, so it is written as a map by name.
struct PartitionRecord<'a>(Vec<(&'a str, Option<PartitionValue>)>);

impl<'a> PartitionRecord<'a> {
    fn new(layout: &'a Layout, partition: &[Option<Datum>]) -> Self {
        Self(
            layout
                .avro_names
                .iter()
                .zip(&layout.spec)
                .zip(partition)
                .map(|((n, sf), d)| {
                    let v = d.clone().map(|d| PartitionValue(d, sf.fixed_size()));
                    (n.as_str(), v)
                })
                .collect(),
        )
    }
}

impl Serialize for PartitionRecord<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            m.serialize_entry(name, value)?;
        }
        m.end()
    }
}

/// A partition value in the Avro type [`super::avro::manifest_schema`] gives its field, and
/// the length of that type when it is a `fixed`.
struct PartitionValue(Datum, Option<usize>);

impl Serialize for PartitionValue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match (&self.0, self.1) {
            (Datum::Boolean(b), _) => s.serialize_bool(*b),
            (Datum::Int(v), _) => s.serialize_i32(*v),
            (Datum::Long(v), _) => s.serialize_i64(*v),
            (Datum::Float(v), _) => s.serialize_f32(*v),
            (Datum::Double(v), _) => s.serialize_f64(*v),
            (Datum::String(v), _) => s.serialize_str(v),
            // A decimal in a fixed: the unscaled value sign-extended to its length.
            (Datum::Decimal(v), Some(n)) => s.serialize_bytes(&v.to_be_bytes()[16 - n.min(16)..]),
            (Datum::Decimal(v), None) => s.serialize_bytes(&crate::partition::decimal_bytes(*v)),
            (Datum::Binary(b), _) => s.serialize_bytes(b),
        }
    }
}

#[cfg(test)]
mod tests;
