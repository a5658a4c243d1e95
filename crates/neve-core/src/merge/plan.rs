//! The merge planner: size-tiered, per partition, from the log alone (no data file is read).
//!
//! In each partition, files below the target size are grouped, smallest first, into groups of
//! at most the target size; files at or above it are left alone. A partition is worth merging
//! when it has at least `min_files` small files. Partitions are taken newest or oldest first
//! (by partition value) until the run's cap on input bytes.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::log::{AddFile, Snapshot};
use crate::partition::partition_path;

/// Which partitions a capped run merges first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MergeOrder {
    /// Highest partition values first (the latest months of a time-partitioned table).
    #[default]
    Newest,
    Oldest,
}

impl std::str::FromStr for MergeOrder {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "newest" => Ok(Self::Newest),
            "oldest" => Ok(Self::Oldest),
            _ => Err(Error::InvalidSetting {
                name: "order".into(),
                reason: format!("'{s}': expected newest or oldest"),
            }),
        }
    }
}

/// What to merge.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MergeOptions {
    /// Files are merged up to this size; files at or above it are left alone.
    pub target_file_size: u64,
    /// A partition is merged only when it has at least this many files below the target.
    pub min_files: usize,
    pub order: MergeOrder,
    /// Only these partition folders (`d=2021-08`); all when empty.
    pub partitions: Vec<String>,
    /// Cap on input bytes per run; partitions beyond it wait for the next run.
    pub max_input_bytes: u64,
    /// Cap on files merged into one output group (memory holds about one batch per input).
    pub max_files_per_group: usize,
    /// Groups merged at once.
    pub parallelism: usize,
    /// A cleaner's grace this merger knows of besides the table's `gc_grace` (see
    /// [`crate::InsertOptions::gc_grace_ms`]).
    pub gc_grace_ms: Option<i64>,
}

impl Default for MergeOptions {
    fn default() -> Self {
        Self {
            target_file_size: 512 << 20,
            min_files: 4,
            order: MergeOrder::Newest,
            partitions: Vec::new(),
            max_input_bytes: 64 << 30,
            max_files_per_group: 256,
            parallelism: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            gc_grace_ms: None,
        }
    }
}

/// Files of one partition merged into one sorted run (split at the target size).
#[derive(Debug, Clone, Serialize)]
pub struct MergeGroup {
    /// Partition folder, e.g. `d=2021-08` (empty when unpartitioned).
    pub partition: String,
    #[serde(skip)]
    pub inputs: Vec<AddFile>,
    pub files: usize,
    pub bytes: u64,
    pub rows: u64,
    /// It holds the partition's oldest rows: with merge semantics, deleted keys can go.
    #[serde(skip)]
    pub oldest: bool,
}

/// Where a file's rows stand in commit order (see [`AddFile::seq`]); files from before a
/// table had merge semantics have none and come first.
pub(crate) fn seq_of(f: &AddFile) -> (u64, u64) {
    f.seq.map(|[lo, hi]| (lo, hi)).unwrap_or((0, 0))
}

/// What a merge will do, planned against one snapshot.
#[derive(Debug, Clone, Serialize)]
pub struct MergePlan {
    /// The version planned against.
    pub version: u64,
    pub groups: Vec<MergeGroup>,
    /// Partitions left for a later run by the cap.
    pub deferred_partitions: usize,
}

impl MergePlan {
    pub fn files(&self) -> usize {
        self.groups.iter().map(|g| g.files).sum()
    }
    pub fn bytes(&self) -> u64 {
        self.groups.iter().map(|g| g.bytes).sum()
    }
    pub fn rows(&self) -> u64 {
        self.groups.iter().map(|g| g.rows).sum()
    }
    pub fn partitions(&self) -> usize {
        let mut p: Vec<&str> = self.groups.iter().map(|g| g.partition.as_str()).collect();
        p.dedup();
        p.len()
    }
}

/// Plan a merge of `snapshot`.
pub fn plan(snapshot: &Snapshot, opts: &MergeOptions) -> Result<MergePlan> {
    if opts.target_file_size == 0 {
        return Err(Error::InvalidSetting {
            name: "target-file-size".into(),
            reason: "must be above 0".into(),
        });
    }
    let fields = &snapshot.metadata.partition_by;
    // By folder and by values: two values can share a folder (a NULL and the string
    // `__HIVE_DEFAULT_PARTITION__`, an empty string and "\0"), and a merged file holds the
    // rows of one partition's values, which it is labelled with.
    type Partition = (String, Vec<Option<String>>);
    let mut by_partition: BTreeMap<Partition, Vec<&AddFile>> = BTreeMap::new();
    for f in snapshot.files.values() {
        let values: Vec<Option<String>> = fields
            .iter()
            .map(|p| f.partition_values.get(&p.name).cloned().flatten())
            .collect();
        by_partition
            .entry((partition_path(fields, &values), values))
            .or_default()
            .push(f);
    }
    let folders: BTreeSet<String> = by_partition.keys().map(|(p, _)| p.clone()).collect();
    for p in &opts.partitions {
        if !folders.contains(p.trim_matches('/')) {
            return Err(Error::PartitionNotFound {
                partition: p.clone(),
                known: known_partitions(folders.iter()),
            });
        }
    }
    let mut partitions: Vec<(String, Vec<&AddFile>)> = by_partition
        .into_iter()
        .map(|((p, _), files)| (p, files))
        .filter(|(p, _)| {
            opts.partitions.is_empty() || opts.partitions.iter().any(|x| x.trim_matches('/') == p)
        })
        .collect();
    if opts.order == MergeOrder::Newest {
        partitions.reverse();
    }
    let min_files = opts.min_files.max(2);
    let max_group = opts.max_files_per_group.max(2);
    let mut groups = Vec::new();
    let mut budget = opts.max_input_bytes;
    let mut deferred = 0;
    let semantic = snapshot.metadata.merge.is_some();
    for (partition, mut files) in partitions {
        let is_small = |f: &AddFile| f.size < opts.target_file_size;
        let small = files.iter().filter(|f| is_small(f)).count();
        if small < min_files {
            continue;
        }
        let bytes: u64 = files.iter().filter(|f| is_small(f)).map(|f| f.size).sum();
        if bytes > budget && !groups.is_empty() {
            deferred += 1;
            continue;
        }
        budget = budget.saturating_sub(bytes);
        // Every file of the partition, to tell whether a group holds its oldest rows.
        let everyone: Vec<&AddFile> = files.clone();
        // Runs of small files packed up to the target. Plain tables: smallest first (oldest
        // first among equals), all one run. Tables with merge semantics: in commit order, a
        // large file ending a run, so a group never skips a file whose rows sit between its
        // own (ties go to the later commit).
        let runs: Vec<Vec<&AddFile>> = if semantic {
            files.sort_by_key(|f| seq_of(f));
            files
                .split(|f| !is_small(f))
                .map(|r| r.to_vec())
                .filter(|r| r.len() >= 2)
                .collect()
        } else {
            let mut small: Vec<&AddFile> = files.into_iter().filter(|f| is_small(f)).collect();
            small.sort_by_key(|f| (f.size, f.modification_time));
            vec![small]
        };
        for run in runs {
            let mut current: Vec<&AddFile> = Vec::new();
            let mut size = 0u64;
            let mut flush = |current: &mut Vec<&AddFile>| {
                if current.len() >= 2 {
                    groups.push(MergeGroup {
                        partition: partition.clone(),
                        files: current.len(),
                        bytes: current.iter().map(|f| f.size).sum(),
                        rows: current.iter().map(|f| f.rows).sum(),
                        oldest: holds_oldest(current, &everyone),
                        inputs: current.iter().map(|f| (*f).clone()).collect(),
                    });
                }
                current.clear();
            };
            for f in run {
                if !current.is_empty()
                    && (size + f.size > opts.target_file_size || current.len() >= max_group)
                {
                    flush(&mut current);
                    size = 0;
                }
                size += f.size;
                current.push(f);
            }
            flush(&mut current);
        }
    }
    Ok(MergePlan {
        version: snapshot.version,
        groups,
        deferred_partitions: deferred,
    })
}

/// Whether `group` holds its partition's oldest rows: every other file of the partition
/// (`everyone`) was committed after all of the group's. Not so when another file shares a
/// commit with the group's newest (one insert writes several files into a partition): its
/// rows of a key may be older than a tombstone the group would drop.
fn holds_oldest(group: &[&AddFile], everyone: &[&AddFile]) -> bool {
    let newest = group.iter().map(|f| seq_of(f).1).max().unwrap_or(0);
    everyone
        .iter()
        .all(|f| group.iter().any(|g| std::ptr::eq(*g, *f)) || seq_of(f).0 > newest)
}

/// A few partition names, for error messages.
pub(crate) fn known_partitions<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let names: Vec<&String> = names.collect();
    let mut s = names
        .iter()
        .take(5)
        .map(|n| n.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > 5 {
        s.push_str(&format!(", … ({} in all)", names.len()));
    }
    if s.is_empty() {
        s = "none: the table has no files".into();
    }
    s
}
