//! A snapshot: the table's state at one version, built by replaying the log.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::actions::{
    Action, AddFile, CheckpointHeader, CommitInfo, LoggedRequest, Metadata, Protocol, RemoveFile,
};
use crate::error::{Error, Result};

/// The state of a table at one version.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub version: u64,
    /// Timestamp of the commit at `version` (ms since the epoch).
    pub timestamp: i64,
    pub protocol: Protocol,
    pub metadata: Metadata,
    /// Alive files by path.
    pub files: BTreeMap<String, Arc<AddFile>>,
    /// Removed files not yet forgotten (kept for GC and time travel).
    pub tombstones: BTreeMap<String, RemoveFile>,
    /// Idempotency keys of requests committed recently, by key (see [`Snapshot::request`]).
    pub requests: HashMap<String, LoggedRequest>,
}

impl Snapshot {
    /// Build from a checkpoint's actions.
    pub(crate) fn from_checkpoint(path: &str, actions: Vec<Action>) -> Result<Self> {
        let mut header: Option<CheckpointHeader> = None;
        let mut protocol = None;
        let mut metadata = None;
        let mut files = BTreeMap::new();
        let mut tombstones = BTreeMap::new();
        for a in actions {
            match a {
                Action::Checkpoint(h) => header = Some(h),
                Action::Protocol(p) => protocol = Some(p),
                Action::Metadata(m) => metadata = Some(m),
                Action::Add(f) => {
                    files.insert(f.path.clone(), Arc::new(f));
                }
                Action::Remove(r) => {
                    tombstones.insert(r.path.clone(), r);
                }
                Action::CommitInfo(_) => {}
            }
        }
        let header = header.ok_or_else(|| Error::corrupt(path, "checkpoint without header"))?;
        let protocol =
            protocol.ok_or_else(|| Error::corrupt(path, "checkpoint without protocol"))?;
        protocol.check()?;
        let metadata =
            metadata.ok_or_else(|| Error::corrupt(path, "checkpoint without metadata"))?;
        if header.files != files.len() as u64 {
            return Err(Error::corrupt(
                path,
                format!("header says {} files, found {}", header.files, files.len()),
            ));
        }
        let requests = header
            .requests
            .into_iter()
            .map(|r| (r.key.clone(), r))
            .collect();
        Ok(Self {
            version: header.version,
            timestamp: header.timestamp,
            protocol,
            metadata,
            files,
            tombstones,
            requests,
        })
    }

    /// Build from the first commit (version 0).
    pub(crate) fn from_first_commit(
        path: &str,
        info: &CommitInfo,
        actions: Vec<Action>,
    ) -> Result<Self> {
        let protocol = actions.iter().find_map(|a| match a {
            Action::Protocol(p) => Some(p.clone()),
            _ => None,
        });
        let metadata = actions.iter().find_map(|a| match a {
            Action::Metadata(m) => Some(m.clone()),
            _ => None,
        });
        let (Some(protocol), Some(metadata)) = (protocol, metadata) else {
            return Err(Error::corrupt(
                path,
                "version 0 must carry protocol and metadata",
            ));
        };
        let mut s = Self {
            version: 0,
            timestamp: info.timestamp,
            protocol,
            metadata,
            files: BTreeMap::new(),
            tombstones: BTreeMap::new(),
            requests: HashMap::new(),
        };
        s.apply_actions(actions, 0, info.timestamp)?;
        s.record_requests(0, info);
        Ok(s)
    }

    /// Apply the commit at `version` (must be `self.version + 1`). The actions are moved in,
    /// so the files' statistics are not copied.
    pub(crate) fn apply(
        &mut self,
        path: &str,
        version: u64,
        info: &CommitInfo,
        actions: Vec<Action>,
    ) -> Result<()> {
        if version != self.version + 1 {
            return Err(Error::corrupt(
                path,
                format!("expected version {}, got {version}", self.version + 1),
            ));
        }
        self.apply_actions(actions, version, info.timestamp)?;
        self.version = version;
        self.timestamp = info.timestamp;
        self.record_requests(version, info);
        Ok(())
    }

    fn record_requests(&mut self, version: u64, info: &CommitInfo) {
        for r in &info.requests {
            self.requests.insert(
                r.key.clone(),
                LoggedRequest {
                    key: r.key.clone(),
                    rows: r.rows,
                    expires: r.expires,
                    version,
                    digest: r.digest.clone(),
                },
            );
        }
        // Expired keys are never answered (see `request`); dropping them now and then keeps
        // the map to about one window of keys.
        if version.is_multiple_of(64) {
            let now = info.timestamp;
            self.requests.retain(|_, r| r.expires >= now);
        }
    }

    /// The commit that holds the rows of the request with idempotency key `key`, if it is
    /// recorded and not expired at this snapshot's time.
    pub fn request(&self, key: &str) -> Option<&LoggedRequest> {
        self.requests
            .get(key)
            .filter(|r| r.expires >= self.timestamp)
    }

    /// Apply the actions of the commit at `version`, made at `timestamp`.
    fn apply_actions(&mut self, actions: Vec<Action>, version: u64, timestamp: i64) -> Result<()> {
        for a in actions {
            match a {
                Action::Protocol(p) => {
                    p.check()?;
                    self.protocol = p;
                }
                Action::Metadata(m) => {
                    let changes = self.metadata.schema.renames_and_drops(&m.schema);
                    if !changes.is_empty() {
                        for f in self.files.values_mut() {
                            let top = |k: &String| k.split('.').next().unwrap_or(k).to_string();
                            if f.stats
                                .keys()
                                .any(|k| changes.contains_key(k) || changes.contains_key(&top(k)))
                            {
                                *f = Arc::new(rekey_stats(f, &changes));
                            }
                        }
                    }
                    self.metadata = m;
                }
                Action::Add(mut f) => {
                    self.tombstones.remove(&f.path);
                    f.added_version.get_or_insert(version);
                    self.files.insert(f.path.clone(), Arc::new(f));
                }
                Action::Remove(mut r) => {
                    self.files.remove(&r.path);
                    // A writer stamps a removal when it builds the commit, which may land
                    // much later (a long merge): the file stays readable until the commit's
                    // time, so that is when its retention starts. Then no version committed
                    // after a deleted file's removal time can still list it (gc, Iceberg
                    // snapshot expiry).
                    r.deletion_timestamp = r.deletion_timestamp.max(timestamp);
                    self.tombstones.insert(r.path.clone(), r);
                }
                Action::CommitInfo(_) | Action::Checkpoint(_) => {}
            }
        }
        Ok(())
    }

    /// The actions of a checkpoint of this snapshot. Tombstones older than `keep_after_ms`
    /// are dropped.
    pub(crate) fn checkpoint_actions(&self, keep_after_ms: i64) -> Vec<Action> {
        let mut out = Vec::with_capacity(self.files.len() + 3);
        out.push(Action::Checkpoint(CheckpointHeader {
            version: self.version,
            timestamp: self.timestamp,
            files: self.files.len() as u64,
            partitions: Some(self.partition_totals()),
            requests: {
                let mut live: Vec<LoggedRequest> = self
                    .requests
                    .values()
                    .filter(|r| r.expires >= self.timestamp)
                    .cloned()
                    .collect();
                live.sort_by(|a, b| a.version.cmp(&b.version).then(a.key.cmp(&b.key)));
                live
            },
        }));
        out.push(Action::Protocol(self.protocol.clone()));
        out.push(Action::Metadata(self.metadata.clone()));
        out.extend(self.files.values().map(|f| Action::Add(f.as_ref().clone())));
        out.extend(
            self.tombstones
                .values()
                .filter(|r| r.deletion_timestamp >= keep_after_ms)
                .cloned()
                .map(Action::Remove),
        );
        out
    }

    /// Files, rows and bytes of the alive files per partition.
    pub fn partition_totals(&self) -> Vec<super::actions::PartitionTotals> {
        super::actions::partition_totals(
            self.files
                .values()
                .map(|f| (&f.partition_values, 1, f.rows as i64, f.size as i64)),
        )
    }

    /// Total rows of alive files.
    pub fn rows(&self) -> u64 {
        self.files.values().map(|f| f.rows).sum()
    }

    /// Total bytes of alive files.
    pub fn bytes(&self) -> u64 {
        self.files.values().map(|f| f.size).sum()
    }

    /// Alive files and rows per partition folder (e.g. `d=2021-08`).
    pub fn partitions(&self) -> BTreeMap<String, (u64, u64)> {
        let fields = &self.metadata.partition_by;
        let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for f in self.files.values() {
            // From the logged partition values, with the same function that named the folder.
            let values: Vec<Option<String>> = fields
                .iter()
                .map(|p| f.partition_values.get(&p.name).cloned().flatten())
                .collect();
            let e = out
                .entry(crate::partition::partition_path(fields, &values))
                .or_default();
            e.0 += 1;
            e.1 += f.rows;
        }
        out
    }
}

/// `f` with its statistics under the names a later schema gives its columns (see
/// [`crate::schema::TableSchema::renames_and_drops`]); statistics of dropped columns go.
pub(crate) fn rekey_stats(
    f: &AddFile,
    changes: &std::collections::HashMap<String, Option<String>>,
) -> AddFile {
    let stats = f
        .stats
        .iter()
        .filter_map(|(k, v)| match changes.get(k) {
            Some(Some(new)) => Some((new.clone(), v.clone())),
            Some(None) => None,
            None => Some((k.clone(), v.clone())),
        })
        .collect();
    AddFile { stats, ..f.clone() }
}
