//! Manifests and manifest lists for one version of the table.
//!
//! The alive files, ordered by the version that added them and path, are cut into chunks where
//! a file's path hashes to a boundary (about [`CHUNK_FILES`] files a chunk, cut the same way
//! whatever came before). A chunk is one manifest, named by a hash of what it holds. An insert
//! changes only the last chunk (its files come last, whatever partitions they are in), a
//! merge the chunks of the files it replaced: every other manifest of the previous version is
//! reused as it is, so a sync writes a few small files per commit however large the table.

use std::collections::BTreeMap;
use std::sync::Arc;

use apache_avro::types::Value;
use serde_json::Value as Json;
use sha2::{Digest, Sha256};

use super::avro::{container, int_map_value, manifest_list_schema, manifest_schema, opt};
use super::types::{file_bounds, partition_datum, stat_fields, Datum, Prim, SpecField};
use crate::error::Result;
use crate::log::AddFile;
use crate::storage::TableLocation;

/// Files per manifest, on average.
pub(crate) const CHUNK_FILES: u32 = 64;

/// Entry status: added by the manifest's own snapshot, or carried over from an earlier one.
const ADDED: i32 = 1;
const EXISTING: i32 = 0;

/// What a version's manifests are written against.
pub(crate) struct Layout<'a> {
    pub location: &'a TableLocation,
    /// The table schema JSON (with `schema-id`), as manifests carry it.
    pub schema_json: String,
    pub schema_id: i32,
    pub spec: Vec<SpecField>,
    pub stat_fields: Vec<(String, i32, Prim, bool)>,
    manifest_schema: Json,
    /// Hash of everything above that goes into a manifest.
    salt: [u8; 32],
}

impl<'a> Layout<'a> {
    pub fn new(
        location: &'a TableLocation,
        schema: &crate::schema::TableSchema,
        schema_json: String,
        schema_id: i32,
        spec: Vec<SpecField>,
    ) -> Self {
        let manifest_schema = manifest_schema(&spec);
        let mut h = Sha256::new();
        h.update(b"neve iceberg manifest 1\n");
        h.update(location.file_url("").as_bytes());
        h.update(b"\n");
        h.update(schema_json.as_bytes());
        h.update(b"\n");
        h.update(super::types::spec_json(&spec).to_string().as_bytes());
        Self {
            location,
            schema_json,
            schema_id,
            stat_fields: stat_fields(schema),
            spec,
            manifest_schema,
            salt: h.finalize().into(),
        }
    }
}

/// A partition field's summary: contains null, lower and upper bound (Iceberg's binary form).
pub(crate) type FieldSummary = (bool, Option<Vec<u8>>, Option<Vec<u8>>);

/// A manifest as its manifest list describes it.
#[derive(Debug, Clone)]
pub(crate) struct ManifestInfo {
    /// Relative to the table root (`metadata/neve-….avro`).
    pub key: String,
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

/// A version's alive files cut into chunks (see the module doc).
pub(crate) fn chunks(files: &BTreeMap<String, Arc<AddFile>>) -> Vec<Vec<&AddFile>> {
    let mut all: Vec<&AddFile> = files.values().map(|f| f.as_ref()).collect();
    all.sort_by(|a, b| (version_of(a), &a.path).cmp(&(version_of(b), &b.path)));
    let mut out = Vec::new();
    let mut cur = Vec::new();
    for f in all {
        cur.push(f);
        let h =
            murmur3::murmur3_32(&mut std::io::Cursor::new(f.path.as_bytes()), 0x1ceb).unwrap_or(0);
        if h % CHUNK_FILES == 0 {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
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
    let hex: String = d[..16].iter().map(|b| format!("{b:02x}")).collect();
    (format!("metadata/neve-{hex}-m0.avro"), d)
}

/// The manifest of one chunk: its bytes and how the manifest list describes it.
pub(crate) fn build_manifest(
    layout: &Layout,
    chunk: &[&AddFile],
) -> Result<(ManifestInfo, Vec<u8>)> {
    let (key, digest) = chunk_key(layout, chunk);
    let added_snapshot = chunk.iter().map(|f| version_of(f)).max().unwrap_or(0);
    let min_sequence = chunk.iter().map(|f| version_of(f)).min().unwrap_or(0);
    let mut info = ManifestInfo {
        key,
        length: 0,
        added_snapshot,
        min_sequence,
        added_files: 0,
        existing_files: 0,
        added_rows: 0,
        existing_rows: 0,
        partitions: vec![],
    };
    let mut summaries: Vec<(bool, Option<Datum>, Option<Datum>)> =
        vec![(false, None, None); layout.spec.len()];
    let mut records = Vec::with_capacity(chunk.len());
    for f in chunk {
        let v = version_of(f);
        let status = if v == added_snapshot { ADDED } else { EXISTING };
        if status == ADDED {
            info.added_files += 1;
            info.added_rows += f.rows as i64;
        } else {
            info.existing_files += 1;
            info.existing_rows += f.rows as i64;
        }
        let mut partition = Vec::with_capacity(layout.spec.len());
        for (i, sf) in layout.spec.iter().enumerate() {
            let d = f
                .partition_values
                .get(&sf.name)
                .cloned()
                .flatten()
                .and_then(|label| partition_datum(sf, &label));
            let summary = &mut summaries[i];
            match &d {
                None => summary.0 = true,
                Some(d) => {
                    if summary.1.as_ref().is_none_or(|lo| d < lo) {
                        summary.1 = Some(d.clone());
                    }
                    if summary.2.as_ref().is_none_or(|hi| d > hi) {
                        summary.2 = Some(d.clone());
                    }
                }
            }
            partition.push((
                super::avro::avro_field_name(&sf.name),
                opt(d.map(|d| datum_value(sf.result, d))),
            ));
        }
        let b = file_bounds(&layout.stat_fields, &f.stats, f.rows);
        let longs = |v: Vec<(i32, i64)>| {
            opt(Some(int_map_value(
                v.into_iter().map(|(k, n)| (k, Value::Long(n))).collect(),
            )))
        };
        let bytes = |v: Vec<(i32, Vec<u8>)>| {
            opt(Some(int_map_value(
                v.into_iter().map(|(k, b)| (k, Value::Bytes(b))).collect(),
            )))
        };
        let data_file = Value::Record(vec![
            ("content".into(), Value::Int(0)),
            (
                "file_path".into(),
                Value::String(layout.location.file_url(&f.path)),
            ),
            ("file_format".into(), Value::String("PARQUET".into())),
            ("partition".into(), Value::Record(partition)),
            ("record_count".into(), Value::Long(f.rows as i64)),
            ("file_size_in_bytes".into(), Value::Long(f.size as i64)),
            ("column_sizes".into(), opt(None)),
            ("value_counts".into(), longs(b.value_counts)),
            ("null_value_counts".into(), longs(b.null_counts)),
            ("nan_value_counts".into(), opt(None)),
            ("lower_bounds".into(), bytes(b.lower)),
            ("upper_bounds".into(), bytes(b.upper)),
            ("key_metadata".into(), opt(None)),
            ("split_offsets".into(), opt(None)),
            ("equality_ids".into(), opt(None)),
            ("sort_order_id".into(), opt(None)),
        ]);
        records.push(Value::Record(vec![
            ("status".into(), Value::Int(status)),
            ("snapshot_id".into(), opt(Some(Value::Long(v)))),
            ("sequence_number".into(), opt(Some(Value::Long(v)))),
            ("file_sequence_number".into(), opt(Some(Value::Long(v)))),
            ("data_file".into(), data_file),
        ]));
    }
    info.partitions = summaries
        .into_iter()
        .map(|(null, lo, hi)| (null, lo.map(|d| d.to_bytes()), hi.map(|d| d.to_bytes())))
        .collect();
    let spec_fields = super::types::spec_json(&layout.spec)["fields"].to_string();
    let meta = [
        ("schema", layout.schema_json.clone()),
        ("schema-id", layout.schema_id.to_string()),
        ("partition-spec", spec_fields),
        ("partition-spec-id", "0".to_string()),
        ("format-version", "2".to_string()),
        ("content", "data".to_string()),
    ];
    let marker: [u8; 16] = digest[16..].try_into().expect("16 bytes");
    let bytes = container(&layout.manifest_schema, &meta, marker, records)?;
    info.length = bytes.len() as u64;
    Ok((info, bytes))
}

fn datum_value(p: Prim, d: Datum) -> Value {
    match (p, d) {
        (Prim::Date, Datum::Int(v)) => Value::Date(v),
        (_, Datum::Boolean(b)) => Value::Boolean(b),
        (_, Datum::Int(v)) => Value::Int(v),
        (_, Datum::Long(v)) => Value::Long(v),
        (_, Datum::Float(v)) => Value::Float(v),
        (_, Datum::Double(v)) => Value::Double(v),
        (_, Datum::String(s)) => Value::String(s),
        (_, Datum::Decimal(v)) => Value::Bytes(Datum::Decimal(v).to_bytes()),
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
                ("content".into(), Value::Int(0)),
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
    let bad = |reason: String| crate::error::Error::IcebergMetadata {
        path: key.to_string(),
        reason,
    };
    let reader = apache_avro::Reader::new(bytes).map_err(|e| bad(e.to_string()))?;
    let mut out = Vec::new();
    for r in reader {
        let Value::Record(fields) = r.map_err(|e| bad(e.to_string()))? else {
            return Err(bad("not a record".into()));
        };
        let f: BTreeMap<String, Value> = fields.into_iter().collect();
        let long = |name: &str| match f.get(name) {
            Some(Value::Long(v)) => Ok(*v),
            Some(Value::Int(v)) => Ok(*v as i64),
            _ => Err(bad(format!("no {name}"))),
        };
        let path = match f.get("manifest_path") {
            Some(Value::String(s)) => s.clone(),
            _ => return Err(bad("no manifest_path".into())),
        };
        // Stored relative to the table root under `metadata/`.
        let Some(at) = path.rfind("/metadata/") else {
            return Err(bad(format!("manifest '{path}' is not under metadata/")));
        };
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
            key: path[at + 1..].to_string(),
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
