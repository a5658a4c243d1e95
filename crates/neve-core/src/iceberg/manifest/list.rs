//! Manifest lists: one per snapshot, naming its data and delete manifests.

use std::collections::BTreeMap;

use apache_avro::types::Value;
use sha2::{Digest, Sha256};

use super::{avro_records, long_field, under_metadata, ManifestInfo, DATA};
use crate::error::Result;
use crate::iceberg::avro::{container, manifest_list_schema, opt};
use crate::storage::TableLocation;

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
