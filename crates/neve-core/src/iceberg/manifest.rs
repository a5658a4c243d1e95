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

use super::avro::{avro_field_name, parse_schema};
use super::avro::{container, manifest_list_schema, manifest_schema, opt};
use super::metrics::{MetricsConfig, Resolved};
use super::types::{file_bounds, partition_datum, stat_fields, Datum, Prim, SpecField};
use crate::error::Result;
use crate::log::AddFile;
use crate::storage::TableLocation;

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
                w.append_ser(entry(layout, f, status, &partition_of(layout, f)))?;
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

/// `f`'s manifest entry with `status` (`partition` is [`partition_of`] `f`).
fn entry<'a>(
    layout: &'a Layout,
    f: &AddFile,
    status: i32,
    partition: &[Option<Datum>],
) -> Entry<'a> {
    let v = version_of(f);
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
    let partition = partition_of(layout, f);
    let mut datum = Vec::with_capacity(2048);
    writer
        .write_ser(&mut datum, &entry(layout, f, ADDED, &partition))
        .map_err(avro_error)?;
    debug_assert_eq!(
        datum.first(),
        super::avro::zigzag_bytes(ADDED.into()).first()
    );
    Ok(EncodedEntry {
        version: version_of(f),
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

/// Delete files' manifest entries, encoded once (as `ADDED`; see [`EncodedEntry`]) and kept
/// by the writer: a table's delete files stay until a merge removes their groups' files, so
/// without them every commit encoded the entries of every delete file of the table again
/// (1,584 after twelve inserts touching 132 partitions), growing until a merge.
#[derive(Debug, Default)]
pub(crate) struct DeleteEntries {
    /// The layout they were encoded for.
    salt: [u8; 32],
    /// By delete file key: its size and entry (the entry holds its rows and sequence).
    by_key: HashMap<String, (u64, EncodedEntry), ahash::RandomState>,
    /// The chunks named last, by their first delete file's key: a chunk of the same delete
    /// files (compared, key, rows, size and sequence) is named without formatting and hashing
    /// them again: about a millisecond a sync at 4,000 delete files (BENCHMARKS.md).
    names: HashMap<String, (Vec<DeleteId>, ChunkName), ahash::RandomState>,
}

/// What a delete manifest's name is a function of, for each of its delete files.
type DeleteId = (String, u64, u64, i64);

fn delete_id(d: &super::deletes::DeleteFile) -> DeleteId {
    (d.key.clone(), d.rows, d.size, d.sequence)
}

fn same_delete(id: &DeleteId, d: &super::deletes::DeleteFile) -> bool {
    id.0 == d.key && id.1 == d.rows && id.2 == d.size && id.3 == d.sequence
}

/// The delete manifests of a snapshot's position delete files, cut into chunks as data files
/// are: in (sequence, key) order, cut where a key hashes to a boundary, the files after the
/// last cut one chunk per sequence. An insert adds delete files of its own version only, so it
/// writes the chunks they fall in, not a manifest listing every delete file of the table
/// (3,957 entries and about 1 MB a commit at the thirtieth insert touching 132 partitions).
/// Each chunk is named by its entries; one `known` names is not encoded again. Entries `kept`
/// holds are not encoded again either; it keeps those of `deletes` afterwards. Returns each
/// chunk's description, with its bytes when it was not known.
pub(crate) fn assemble_delete_manifests(
    layout: &Layout,
    deletes: &[super::deletes::DeleteFile],
    kept: &mut DeleteEntries,
    known: impl Fn(&str) -> Option<ManifestInfo>,
) -> Result<Vec<(ManifestInfo, Option<Vec<u8>>)>> {
    let mut sorted: Vec<&super::deletes::DeleteFile> = deletes.iter().collect();
    sorted.sort_by(|a, b| (a.sequence, &a.key).cmp(&(b.sequence, &b.key)));
    let (mut chunks, tail) = cut(sorted);
    chunks.extend(split_tail(tail));
    let mut before = std::mem::take(&mut kept.by_key);
    let mut names_before = std::mem::take(&mut kept.names);
    if kept.salt != layout.salt {
        before.clear();
        names_before.clear();
        kept.salt = layout.salt;
    }
    let writer = entry_writer(layout)?;
    let mut out = Vec::with_capacity(chunks.len());
    for chunk in chunks {
        let named = names_before.remove(&chunk[0].key).filter(|(ids, _)| {
            ids.len() == chunk.len() && ids.iter().zip(&chunk).all(|(id, d)| same_delete(id, d))
        });
        let (ids, (key, digest)) = match named {
            Some(named) => named,
            None => (
                chunk.iter().map(|d| delete_id(d)).collect(),
                delete_chunk_key(layout, &chunk),
            ),
        };
        kept.names
            .insert(chunk[0].key.clone(), (ids, (key.clone(), digest)));
        if let Some(info) = known(&key) {
            // Its entries are kept as they were, for a chunk that folds them later.
            for d in chunk {
                if let Some((k, v)) = before.remove_entry(&d.key) {
                    kept.by_key.insert(k, v);
                }
            }
            out.push((info, None));
            continue;
        }
        let mut entries = Vec::with_capacity(chunk.len());
        for d in chunk {
            // Taken with its key, so a kept entry costs no copy of the key.
            let (key, (size, entry)) = match before.remove_entry(&d.key) {
                Some((k, (size, e)))
                    if size == d.size && e.rows == d.rows && e.version == d.sequence =>
                {
                    (k, (size, e))
                }
                _ => (
                    d.key.clone(),
                    (d.size, encode_delete_entry(layout, &writer, d)?),
                ),
            };
            entries.push(entry.clone());
            kept.by_key.insert(key, (size, entry));
        }
        let refs: Vec<&EncodedEntry> = entries.iter().collect();
        let (info, bytes) = assemble(layout, DELETES, &refs, key, &digest);
        out.push((info, Some(bytes)));
    }
    Ok(out)
}

/// A delete manifest's key and digest: a function of its entries.
fn delete_chunk_key(layout: &Layout, chunk: &[&super::deletes::DeleteFile]) -> (String, [u8; 32]) {
    use std::fmt::Write;
    let mut h = Sha256::new();
    h.update(b"neve iceberg delete manifest 1\n");
    h.update(layout.salt);
    let mut line = String::new();
    for d in chunk {
        line.clear();
        let _ = write!(line, "\n{}\t{}\t{}\t{}", d.key, d.rows, d.size, d.sequence);
        h.update(line.as_bytes());
    }
    let digest: [u8; 32] = h.finalize().into();
    let hex = crate::partition::hex(&digest[..16]);
    (format!("metadata/neve-{hex}-d.avro"), digest)
}

/// A delete file's manifest entry, as `ADDED`.
fn encode_delete_entry(
    layout: &Layout,
    writer: &GenericDatumWriter<'_>,
    d: &super::deletes::DeleteFile,
) -> Result<EncodedEntry> {
    let partition = partition_of_values(layout, &d.partition_values);
    let entry = Entry {
        status: ADDED,
        snapshot_id: Some(d.sequence),
        sequence_number: Some(d.sequence),
        file_sequence_number: Some(d.sequence),
        data_file: DataFile {
            content: DELETES,
            file_path: layout.location.file_url(&d.key),
            file_format: "PARQUET",
            partition: PartitionRecord::new(layout, &partition),
            record_count: d.rows as i64,
            file_size_in_bytes: d.size as i64,
            column_sizes: None,
            value_counts: None,
            null_value_counts: None,
            nan_value_counts: None,
            lower_bounds: None,
            upper_bounds: None,
            key_metadata: None,
            split_offsets: None,
            equality_ids: None,
            sort_order_id: None,
        },
    };
    let mut datum = Vec::with_capacity(256);
    writer.write_ser(&mut datum, &entry).map_err(avro_error)?;
    Ok(EncodedEntry {
        version: d.sequence,
        rows: d.rows,
        datum: datum.into(),
        partition: partition.into(),
    })
}

/// The delete files a stored delete manifest (at `key`) lists: key (relative to the table
/// root), rows and size.
pub(crate) fn read_delete_manifest(key: &str, bytes: &[u8]) -> Result<Vec<(String, u64, u64)>> {
    let bad = |reason: String| metadata_error(key, reason);
    let mut out = Vec::new();
    for mut entry in avro_records(key, bytes)? {
        let Some(Value::Record(file)) = entry.remove("data_file") else {
            return Err(bad("no data_file".into()));
        };
        let f: BTreeMap<String, Value> = file.into_iter().collect();
        out.push((
            under_metadata(key, &f, "file_path")?,
            long_field(key, &f, "record_count")? as u64,
            long_field(key, &f, "file_size_in_bytes")? as u64,
        ));
    }
    Ok(out)
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

/// The manifest list of snapshot `version` (its parent `parent`), over `manifests`.
pub(crate) fn build_manifest_list(
    location: &TableLocation,
    version: u64,
    parent: Option<u64>,
    manifests: &[&ManifestInfo],
) -> Result<Vec<u8>> {
    let records = manifests
        .iter()
        .map(|m| {
            let partitions = m
                .partitions
                .iter()
                .map(|(null, lo, hi)| {
                    Value::Record(vec![
                        ("contains_null".into(), Value::Boolean(*null)),
                        ("contains_nan".into(), opt(None)),
                        ("lower_bound".into(), opt(lo.clone().map(Value::Bytes))),
                        ("upper_bound".into(), opt(hi.clone().map(Value::Bytes))),
                    ])
                })
                .collect();
            Value::Record(vec![
                (
                    "manifest_path".into(),
                    Value::String(location.file_url(&m.key)),
                ),
                ("manifest_length".into(), Value::Long(m.length as i64)),
                ("partition_spec_id".into(), Value::Int(0)),
                ("content".into(), Value::Int(m.content)),
                ("sequence_number".into(), Value::Long(m.added_snapshot)),
                ("min_sequence_number".into(), Value::Long(m.min_sequence)),
                ("added_snapshot_id".into(), Value::Long(m.added_snapshot)),
                ("added_files_count".into(), Value::Int(m.added_files)),
                ("existing_files_count".into(), Value::Int(m.existing_files)),
                ("deleted_files_count".into(), Value::Int(0)),
                ("added_rows_count".into(), Value::Long(m.added_rows)),
                ("existing_rows_count".into(), Value::Long(m.existing_rows)),
                ("deleted_rows_count".into(), Value::Long(0)),
                ("partitions".into(), opt(Some(Value::Array(partitions)))),
                ("key_metadata".into(), opt(None)),
            ])
        })
        .collect();
    let meta = [
        ("snapshot-id", version.to_string()),
        (
            "parent-snapshot-id",
            parent.map_or("null".to_string(), |p| p.to_string()),
        ),
        ("sequence-number", version.to_string()),
        ("format-version", "2".to_string()),
    ];
    let mut h = Sha256::new();
    h.update(b"neve iceberg manifest list 1\n");
    h.update(version.to_le_bytes());
    let marker: [u8; 16] = h.finalize()[..16].try_into().expect("16 bytes");
    container(&manifest_list_schema(), &meta, marker, records)
}

/// Where snapshot `version`'s manifest list is, relative to the table root.
pub(crate) fn manifest_list_key(version: u64) -> String {
    format!("metadata/snap-{version}-neve.avro")
}

/// The manifests a stored manifest list (at `key`) describes.
pub(crate) fn read_manifest_list(key: &str, bytes: &[u8]) -> Result<Vec<ManifestInfo>> {
    let mut out = Vec::new();
    for f in avro_records(key, bytes)? {
        let long = |name: &str| long_field(key, &f, name);
        // Stored relative to the table root under `metadata/`.
        let manifest = under_metadata(key, &f, "manifest_path")?;
        let mut partitions = Vec::new();
        if let Some(Value::Union(_, p)) = f.get("partitions") {
            if let Value::Array(items) = p.as_ref() {
                for item in items {
                    let Value::Record(s) = item else { continue };
                    let s: BTreeMap<&str, &Value> =
                        s.iter().map(|(k, v)| (k.as_str(), v)).collect();
                    let bound = |name: &str| match s.get(name) {
                        Some(Value::Union(_, b)) => match b.as_ref() {
                            Value::Bytes(b) => Some(b.clone()),
                            _ => None,
                        },
                        _ => None,
                    };
                    let null = matches!(s.get("contains_null"), Some(Value::Boolean(true)));
                    partitions.push((null, bound("lower_bound"), bound("upper_bound")));
                }
            }
        }
        out.push(ManifestInfo {
            key: manifest,
            content: long("content").unwrap_or(DATA as i64) as i32,
            length: long("manifest_length")? as u64,
            added_snapshot: long("added_snapshot_id")?,
            min_sequence: long("min_sequence_number")?,
            added_files: long("added_files_count")? as i32,
            existing_files: long("existing_files_count")? as i32,
            added_rows: long("added_rows_count")?,
            existing_rows: long("existing_rows_count")?,
            partitions,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
