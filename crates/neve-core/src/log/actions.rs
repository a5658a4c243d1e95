//! The actions a commit is made of. One JSON object per line, keyed by the action type.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::partition::PartitionField;
use crate::schema::TableSchema;

/// The newest table format version this neve reads and writes. Version 2 tables may use
/// nested types, `time`, `fixed(n)`, `not null` columns, and renamed or dropped columns
/// (readers must match file columns by field id); a table is written as version 1 until its
/// schema needs any of that, so older readers keep reading it.
/// Version 3 tables declare merge semantics (`merge` in the metadata): a reader that does not
/// apply them would count several rows per key.
pub const FORMAT_VERSION: u32 = 3;

/// The format version a table with `schema` needs.
pub fn format_version_for(schema: &TableSchema) -> u32 {
    if schema.needs_v2() {
        2
    } else {
        1
    }
}

/// The format version a table with `metadata` needs.
pub fn format_version_of(metadata: &Metadata) -> u32 {
    if metadata.merge.is_some() {
        3
    } else {
        format_version_for(&metadata.schema)
    }
}

/// One line of a commit or checkpoint.
// A commit holds one metadata action at most, and a snapshot keeps files, not actions: boxing
// the large variant would save nothing worth an indirection at every use.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Action {
    CommitInfo(CommitInfo),
    Protocol(Protocol),
    Metadata(Metadata),
    Add(AddFile),
    Remove(RemoveFile),
    /// First line of a checkpoint: the version it summarizes.
    Checkpoint(CheckpointHeader),
}

/// Who made a commit, when, why, and its unique id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitInfo {
    /// Milliseconds since the epoch; strictly increasing along the log.
    pub timestamp: i64,
    /// CREATE, INSERT, ...
    pub operation: String,
    /// A unique id, used to recognise one's own commit after an unknown outcome.
    pub commit_id: String,
    /// `neve/<version> <host> pid <pid>`.
    pub writer: String,
    /// The version the writer last read before committing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_version: Option<u64>,
    #[serde(default)]
    pub summary: CommitSummary,
    /// Idempotency keys of the requests whose rows this commit holds (`neve serve`): a retry
    /// with one of them finds it here and adds nothing. Unknown to older readers, who ignore it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<RequestKey>,
}

/// An insert request's idempotency key, as its commit records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestKey {
    pub key: String,
    /// Rows the request inserted (what a retry is answered with).
    pub rows: u64,
    /// Until when (ms since the epoch) a retry is recognised; readers forget it afterwards.
    pub expires: i64,
    /// A fingerprint of the request's content, so a retry is told from another request that
    /// reuses the key (absent in logs written before it, and then not compared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// A request key with the version of the commit that holds its rows (snapshots, checkpoints).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoggedRequest {
    pub key: String,
    pub rows: u64,
    pub expires: i64,
    pub version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// Totals of a commit, so `history` needs no arithmetic over actions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitSummary {
    pub files_added: u64,
    pub files_removed: u64,
    pub rows_added: u64,
    pub rows_removed: u64,
    pub bytes_added: u64,
    pub bytes_removed: u64,
    /// Net change per partition, so a reader can total rows per partition from commit
    /// headers alone. Absent in commits from writers that predate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Vec<PartitionTotals>>,
}

/// Files, rows and bytes of one partition: a commit's net change, or a checkpoint's totals.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PartitionTotals {
    /// Partition values by partition name (empty for an unpartitioned table).
    #[serde(default)]
    pub values: BTreeMap<String, Option<String>>,
    pub files: i64,
    pub rows: i64,
    pub bytes: i64,
}

impl PartitionTotals {
    fn add(&mut self, files: i64, rows: i64, bytes: i64) {
        self.files += files;
        self.rows += rows;
        self.bytes += bytes;
    }

    pub(crate) fn add_all(&mut self, change: &PartitionTotals) {
        self.add(change.files, change.rows, change.bytes);
    }
}

/// Sum `(values, files, rows, bytes)` entries per partition, in partition order, dropping
/// partitions whose totals are all zero.
pub(crate) fn partition_totals<'a>(
    entries: impl IntoIterator<Item = (&'a BTreeMap<String, Option<String>>, i64, i64, i64)>,
) -> Vec<PartitionTotals> {
    let mut by: BTreeMap<&BTreeMap<String, Option<String>>, PartitionTotals> = BTreeMap::new();
    for (values, files, rows, bytes) in entries {
        by.entry(values)
            .or_insert_with(|| PartitionTotals {
                values: values.clone(),
                ..Default::default()
            })
            .add(files, rows, bytes);
    }
    by.into_values()
        .filter(|t| t.files != 0 || t.rows != 0 || t.bytes != 0)
        .collect()
}

impl CommitSummary {
    /// Totals of `actions` committed on top of `base`, which knows the partition of each
    /// removed file.
    pub fn of_commit(actions: &[Action], base: &super::Snapshot) -> Self {
        let mut s = Self::of(actions);
        let mut entries = Vec::new();
        for a in actions {
            match a {
                Action::Add(f) => {
                    entries.push((&f.partition_values, 1, f.rows as i64, f.size as i64))
                }
                Action::Remove(r) => match base.files.get(&r.path) {
                    Some(f) => {
                        entries.push((&f.partition_values, -1, -(f.rows as i64), -(f.size as i64)))
                    }
                    // Not alive in the base: its partition is unknown, so no per-partition
                    // totals for this commit (readers then use the file list).
                    None => return s,
                },
                _ => {}
            }
        }
        s.partitions = Some(partition_totals(entries));
        s
    }

    /// Totals of a list of actions.
    pub fn of(actions: &[Action]) -> Self {
        let mut s = Self::default();
        for a in actions {
            match a {
                Action::Add(f) => {
                    s.files_added += 1;
                    s.rows_added += f.rows;
                    s.bytes_added += f.size;
                }
                Action::Remove(f) => {
                    s.files_removed += 1;
                    s.rows_removed += f.rows.unwrap_or(0);
                    s.bytes_removed += f.size.unwrap_or(0);
                }
                _ => {}
            }
        }
        s
    }
}

/// The format version; present in version 0 and in checkpoints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Protocol {
    pub format_version: u32,
}

impl Protocol {
    pub fn check(&self) -> Result<()> {
        if self.format_version > FORMAT_VERSION {
            return Err(Error::UnsupportedFormatVersion {
                found: self.format_version,
                supported: FORMAT_VERSION,
            });
        }
        Ok(())
    }
}

/// Table definition: schema, layout and settings. A commit carries it when any part changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    pub table_id: String,
    pub created_time: i64,
    pub schema: TableSchema,
    #[serde(default)]
    pub partition_by: Vec<PartitionField>,
    #[serde(default)]
    pub sort_by: Vec<String>,
    #[serde(default)]
    pub settings: TableSettings,
    /// Merge semantics: what several rows of one key mean (format version 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<crate::merge::MergeSpec>,
}

/// Per-table settings, stored in the log so every writer uses the same ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TableSettings {
    /// Write a checkpoint every N versions.
    pub checkpoint_interval: u64,
    /// Reject inserts that bring new columns.
    pub strict_schema: bool,
    /// Parquet compression: `zstd(LEVEL)`, `snappy`, `lz4`, `none`.
    pub compression: String,
    /// Maximum rows per Parquet row group.
    pub row_group_rows: usize,
    /// How long removed files and old log entries are kept (time travel window), in hours.
    pub log_retention_hours: u64,
    /// Maintenance policy of this table; unset, the maintaining process's own policy applies.
    /// A partition is merged once it has this many small files...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge_min_files: Option<usize>,
    /// ...files below this size (bytes) are small, and merged into files of about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge_target_file_size: Option<u64>,
    /// How often background maintenance visits the table, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maintenance_interval_seconds: Option<u64>,
    /// How long gc keeps files no snapshot references (a writer may be committing them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gc_grace_seconds: Option<u64>,
    /// Write Iceberg metadata under `metadata/` after every commit, so engines that read
    /// Iceberg read the table (docs/FORMAT.md, "Iceberg metadata").
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub iceberg: bool,
    /// Most Iceberg snapshots the metadata lists (the newest versions); unset,
    /// [`crate::iceberg::DEFAULT_MAX_SNAPSHOTS`]. Every commit rewrites the metadata file,
    /// whose size grows with its snapshots.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iceberg_max_snapshots: Option<u64>,
    /// Which counts and bounds the Iceberg manifests carry per column: a mode for every
    /// column, then `column=mode` for some (Iceberg's modes: none, counts, truncate(N),
    /// full); unset, full. See [`crate::iceberg::MetricsConfig`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iceberg_metrics: Option<String>,
}

impl Default for TableSettings {
    fn default() -> Self {
        Self {
            checkpoint_interval: 50,
            strict_schema: false,
            compression: "zstd(1)".into(),
            // Several row groups in a file of a million rows, so one file is scanned on every
            // core (DuckDB's default is 122,880); a million-row group is read by one.
            row_group_rows: 1 << 17,
            log_retention_hours: 7 * 24,
            merge_min_files: None,
            merge_target_file_size: None,
            maintenance_interval_seconds: None,
            gc_grace_seconds: None,
            iceberg: false,
            iceberg_max_snapshots: None,
            iceberg_metrics: None,
        }
    }
}

impl TableSettings {
    /// Apply a `key=value` override from the command line.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let bad = |reason: &str| Error::InvalidSetting {
            name: key.to_string(),
            reason: format!("'{value}': {reason}"),
        };
        match key {
            "checkpoint_interval" | "checkpointInterval" => {
                self.checkpoint_interval = value.parse().map_err(|_| bad("expected a number"))?;
                if self.checkpoint_interval == 0 {
                    return Err(bad("must be at least 1"));
                }
            }
            "strict_schema" | "strictSchema" => {
                self.strict_schema = value.parse().map_err(|_| bad("expected true or false"))?
            }
            "compression" => {
                crate::write::parse_compression(value).map_err(|r| bad(&r))?;
                self.compression = value.to_string();
            }
            "row_group_rows" | "rowGroupRows" => {
                self.row_group_rows = value.parse().map_err(|_| bad("expected a number"))?;
                if self.row_group_rows == 0 {
                    return Err(bad("must be at least 1"));
                }
            }
            "log_retention_hours" | "logRetentionHours" => {
                self.log_retention_hours = value.parse().map_err(|_| bad("expected a number"))?
            }
            // `default` (or an empty value) hands the policy back to the maintaining process.
            "merge_min_files" | "mergeMinFiles" => {
                self.merge_min_files = unset_or(value, |v| match v.parse::<usize>() {
                    Ok(n) if n >= 2 => Ok(n),
                    _ => Err(bad("expected a number of files, at least 2")),
                })?
            }
            "merge_target_file_size" | "mergeTargetFileSize" => {
                self.merge_target_file_size = unset_or(value, |v| match v.parse::<bytesize::ByteSize>() {
                    Ok(n) if n.as_u64() > 0 => Ok(n.as_u64()),
                    _ => Err(bad("expected a size, e.g. 134217728, 128MiB or 1GiB")),
                })?
            }
            "maintenance_interval" | "maintenanceInterval" => {
                self.maintenance_interval_seconds = unset_or(value, |v| match humantime::parse_duration(v) {
                    Ok(d) if d.as_secs() >= 1 => Ok(d.as_secs()),
                    _ => Err(bad("expected a duration of at least 1s, e.g. 30s or 10m")),
                })?
            }
            "gc_grace" | "gcGrace" => {
                self.gc_grace_seconds = unset_or(value, |v| {
                    humantime::parse_duration(v)
                        .map(|d| d.as_secs())
                        .map_err(|_| bad("expected a duration, e.g. 0s, 30m or 1h"))
                })?
            }
            "iceberg" => {
                self.iceberg = value.parse().map_err(|_| bad("expected true or false"))?
            }
            "iceberg_max_snapshots" | "icebergMaxSnapshots" => {
                self.iceberg_max_snapshots = unset_or(value, |v| match v.parse::<u64>() {
                    Ok(n) if n >= 1 => Ok(n),
                    _ => Err(bad("expected a number of snapshots, at least 1")),
                })?
            }
            "iceberg_metrics" | "icebergMetrics" => {
                self.iceberg_metrics = unset_or(value, |v| {
                    v.parse::<crate::iceberg::MetricsConfig>()
                        .map(|c| c.to_string())
                        .map_err(|r| bad(&r))
                })?
            }
            _ => {
                return Err(Error::InvalidSetting {
                    name: key.to_string(),
                    reason: "unknown setting (checkpoint_interval, strict_schema, compression, row_group_rows, log_retention_hours, merge_min_files, merge_target_file_size, maintenance_interval, gc_grace, iceberg, iceberg_max_snapshots, iceberg_metrics)".into(),
                })
            }
        }
        Ok(())
    }
}

/// `default` or nothing: unset; else `parse(value)`.
fn unset_or<T>(value: &str, parse: impl FnOnce(&str) -> Result<T>) -> Result<Option<T>> {
    match value.trim() {
        "" | "default" => Ok(None),
        v => parse(v).map(Some),
    }
}

/// A data file that became part of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddFile {
    /// Relative to the table root, `/`-separated, e.g. `_data/d=2021-08/part-….parquet`.
    pub path: String,
    /// Partition values by partition name; null for the null partition.
    #[serde(default)]
    pub partition_values: BTreeMap<String, Option<String>>,
    /// Bytes.
    pub size: u64,
    pub rows: u64,
    /// When the file was written (ms since the epoch).
    pub modification_time: i64,
    /// Per-column statistics.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stats: BTreeMap<String, ColumnStats>,
    /// Tables with merge semantics: the versions whose inserts the file's rows come from,
    /// first and last (an insert's file: its commit's version twice). Files of a partition
    /// never overlap in it, so it orders their rows for ties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<[u64; 2]>,
    /// Tables with merge semantics: at most one row per key, the merge applied (a merge's
    /// output). Deleted keys may still be there as tombstones.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub merged: bool,
    /// The version whose commit added the file. Commits leave it out (it is their own
    /// version); readers fill it in while replaying, and checkpoints record it. Iceberg
    /// metadata gives it as the file's snapshot and sequence number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added_version: Option<u64>,
}

/// Statistics of one column in one file. `min`/`max` are JSON numbers for numeric columns,
/// strings for strings, dates (`YYYY-MM-DD`) and timestamps (RFC 3339, microseconds);
/// absent when unknown (all null, binary, NaN-only floats, very long strings).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ColumnStats {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<serde_json::Value>,
    pub nulls: u64,
}

/// A data file that stopped being part of the table (a tombstone until GC deletes it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoveFile {
    pub path: String,
    /// When it was removed (ms since the epoch).
    pub deletion_timestamp: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
}

/// First line of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointHeader {
    pub version: u64,
    /// Timestamp of the commit at `version`.
    pub timestamp: i64,
    pub files: u64,
    /// Totals per partition of the alive files. Absent in checkpoints from writers that
    /// predate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Vec<PartitionTotals>>,
    /// Request keys not yet expired at `timestamp`, with their versions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<LoggedRequest>,
}

/// Serialize actions as JSON lines.
pub fn to_json_lines(actions: &[Action]) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 * actions.len());
    for a in actions {
        serde_json::to_writer(&mut out, a).expect("actions serialize");
        out.push(b'\n');
    }
    out
}

/// Parse JSON lines into actions; `path` is for error messages.
pub fn from_json_lines(path: &str, bytes: &[u8]) -> Result<Vec<Action>> {
    let mut out = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let a: Action = serde_json::from_slice(line)
            .map_err(|e| Error::corrupt(path, format!("line {}: {e}", i + 1)))?;
        out.push(a);
    }
    Ok(out)
}
