//! Reading and writing log objects: commits, checkpoints and the checkpoint pointer.
//!
//! Opening the latest snapshot costs one GET of `_log/_last_checkpoint`, one LIST of the
//! entries after it (S3 `start-after`), one GET of the checkpoint and one GET per later commit
//! (fetched concurrently), however long the history.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};

use super::actions::{from_json_lines, to_json_lines, Action, CommitInfo};
use super::snapshot::Snapshot;
use crate::error::{Error, Result};
use crate::storage::TableLocation;

/// Concurrent GETs when replaying commits.
pub(crate) const READ_CONCURRENCY: usize = 32;

/// One commit as read from the log.
#[derive(Debug, Clone)]
pub struct LoggedCommit {
    pub version: u64,
    pub info: CommitInfo,
    /// All actions except the commit info.
    pub actions: Vec<Action>,
}

/// What a LIST of `_log/` found.
#[derive(Debug, Default, Clone)]
pub struct LogListing {
    pub commits: BTreeSet<u64>,
    pub checkpoints: BTreeSet<u64>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LastCheckpoint {
    pub version: u64,
    /// Length of the checkpoint's first three lines (header, protocol, metadata): what a
    /// metadata-only reader fetches with one ranged GET instead of the whole file list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_bytes: Option<u64>,
}

/// Outcome of a create-only PUT of a commit.
pub(crate) enum PutCommit {
    Created,
    AlreadyExists,
    /// The request failed in a way that leaves its outcome unknown.
    Unknown(object_store::Error),
}

/// Access to a table's `_log/`.
#[derive(Debug, Clone)]
pub struct LogStore {
    location: TableLocation,
}

impl LogStore {
    pub fn new(location: TableLocation) -> Self {
        Self { location }
    }

    pub fn location(&self) -> &TableLocation {
        &self.location
    }

    pub(crate) fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.location.store
    }

    fn log_dir(&self) -> Path {
        self.location.child("_log")
    }

    pub fn commit_path(&self, version: u64) -> Path {
        self.log_dir().join(format!("{version:020}.json"))
    }

    pub fn checkpoint_path(&self, version: u64) -> Path {
        self.log_dir()
            .join(format!("{version:020}.checkpoint.json"))
    }

    fn pointer_path(&self) -> Path {
        self.log_dir().join("_last_checkpoint")
    }

    pub(crate) async fn get_opt(&self, path: &Path) -> Result<Option<Bytes>> {
        match self.store().get(path).await {
            Ok(r) => Ok(Some(r.bytes().await?)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Read one commit; `None` if it does not exist.
    pub async fn read_commit(&self, version: u64) -> Result<Option<LoggedCommit>> {
        let path = self.commit_path(version);
        let Some(bytes) = self.get_opt(&path).await? else {
            return Ok(None);
        };
        Ok(Some(parse_commit(&path, version, &bytes)?))
    }

    /// Read commits `versions` concurrently, in order; any missing one is an error.
    pub async fn read_commits(
        &self,
        versions: impl IntoIterator<Item = u64>,
    ) -> Result<Vec<LoggedCommit>> {
        futures::stream::iter(versions.into_iter().map(|v| async move {
            self.read_commit(v)
                .await?
                .ok_or_else(|| Error::VersionNotFound {
                    version: v,
                    reason: "its log entry was removed".into(),
                })
        }))
        .buffered(READ_CONCURRENCY)
        .try_collect()
        .await
    }

    /// List log entries; with `after`, only those after checkpoint `after` (S3 start-after).
    pub async fn list(&self, after: Option<u64>) -> Result<LogListing> {
        let dir = self.log_dir();
        let stream = match after {
            Some(v) => self
                .store()
                .list_with_offset(Some(&dir), &self.checkpoint_path(v)),
            None => self.store().list(Some(&dir)),
        };
        let metas: Vec<_> = stream.try_collect().await?;
        let mut out = LogListing::default();
        for m in metas {
            let Some(name) = m.location.filename() else {
                continue;
            };
            if let Some(v) = name
                .strip_suffix(".checkpoint.json")
                .and_then(parse_version)
            {
                out.checkpoints.insert(v);
            } else if let Some(v) = name.strip_suffix(".json").and_then(parse_version) {
                out.commits.insert(v);
            }
        }
        // A listing is not a snapshot of the folder: a local directory read while writers
        // create entries can return version N+1 and miss N (the order of a directory is not
        // the order of creation). Entries are only ever removed oldest first, and N+1 is
        // created by a writer that read N, so every version between two listed ones exists.
        if let (Some(&lo), Some(&hi)) = (out.commits.first(), out.commits.last()) {
            out.commits.extend(lo..=hi);
        }
        Ok(out)
    }

    /// The version the pointer names, if any.
    pub async fn read_pointer(&self) -> Result<Option<u64>> {
        Ok(self.read_pointer_full().await?.map(|p| p.version))
    }

    pub(crate) async fn read_pointer_full(&self) -> Result<Option<LastCheckpoint>> {
        let path = self.pointer_path();
        let Some(bytes) = self.get_opt(&path).await? else {
            return Ok(None);
        };
        let p: LastCheckpoint =
            serde_json::from_slice(&bytes).map_err(|e| Error::corrupt(&path, e))?;
        Ok(Some(p))
    }

    pub async fn read_checkpoint(&self, version: u64) -> Result<Option<Snapshot>> {
        let path = self.checkpoint_path(version);
        let Some(bytes) = self.get_opt(&path).await? else {
            return Ok(None);
        };
        let actions = from_json_lines(path.as_ref(), &bytes)?;
        let s = Snapshot::from_checkpoint(path.as_ref(), actions)?;
        if s.version != version {
            return Err(Error::corrupt(
                &path,
                format!("checkpoint holds version {}", s.version),
            ));
        }
        Ok(Some(s))
    }

    /// Write a checkpoint of `snapshot` and move the pointer to it (unless a newer one is there).
    pub async fn write_checkpoint(
        &self,
        snapshot: &Snapshot,
        keep_tombstones_after_ms: i64,
    ) -> Result<()> {
        let actions = snapshot.checkpoint_actions(keep_tombstones_after_ms);
        let head_bytes = to_json_lines(&actions[..3]).len() as u64;
        let body = to_json_lines(&actions);
        self.store()
            .put(
                &self.checkpoint_path(snapshot.version),
                PutPayload::from(body),
            )
            .await?;
        if self
            .read_pointer()
            .await?
            .is_some_and(|p| p >= snapshot.version)
        {
            return Ok(());
        }
        let pointer = serde_json::to_vec(&LastCheckpoint {
            version: snapshot.version,
            head_bytes: Some(head_bytes),
        })
        .expect("serialize");
        self.store()
            .put(&self.pointer_path(), PutPayload::from(pointer))
            .await?;
        Ok(())
    }

    /// Create-only PUT of a commit.
    pub(crate) async fn put_commit(&self, version: u64, body: Bytes) -> PutCommit {
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        match self
            .store()
            .put_opts(&self.commit_path(version), PutPayload::from(body), opts)
            .await
        {
            Ok(_) => PutCommit::Created,
            Err(object_store::Error::AlreadyExists { .. }) => PutCommit::AlreadyExists,
            Err(e) => PutCommit::Unknown(e),
        }
    }

    /// The latest snapshot. A GC may delete log entries older than the newest checkpoint
    /// while they are being read; the read then starts again from that checkpoint.
    pub async fn load_latest(&self) -> Result<Snapshot> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.load_latest_once().await {
                Err(Error::VersionNotFound { version, .. }) if attempt < 4 => {
                    tracing::debug!(version, "log entry removed while reading; reading again");
                }
                other => return other,
            }
        }
    }

    async fn load_latest_once(&self) -> Result<Snapshot> {
        let pointer = self.read_pointer().await?;
        let mut listing = self.list(pointer).await?;
        let newest_ckpt = listing.checkpoints.iter().next_back().copied().max(pointer);
        let mut base = match newest_ckpt {
            Some(v) => self.read_checkpoint(v).await?,
            None => None,
        };
        if base.is_none() && pointer.is_some() {
            // The pointed checkpoint is gone (cleaned): fall back to a full listing.
            listing = self.list(None).await?;
            if let Some(&v) = listing.checkpoints.iter().next_back() {
                base = self.read_checkpoint(v).await?;
            }
        }
        let latest = listing.commits.iter().next_back().copied();
        self.replay(base, latest, &listing).await
    }

    /// The snapshot at `version`.
    pub async fn load_version(&self, version: u64) -> Result<Snapshot> {
        let listing = self.list(None).await?;
        let latest = listing.commits.iter().next_back().copied();
        match latest {
            None => return Err(self.not_found()),
            Some(l) if version > l => {
                return Err(Error::VersionNotFound {
                    version,
                    reason: format!("the latest version is {l}"),
                })
            }
            _ => {}
        }
        let base = match listing.checkpoints.range(..=version).next_back() {
            Some(&v) => self.read_checkpoint(v).await?,
            None => None,
        };
        self.replay(base, Some(version), &listing).await
    }

    /// The snapshot current at `timestamp_ms`: the last version committed at or before it.
    pub async fn load_at_timestamp(&self, timestamp_ms: i64) -> Result<Snapshot> {
        let listing = self.list(None).await?;
        let versions: Vec<u64> = listing.commits.iter().copied().collect();
        if versions.is_empty() {
            return Err(self.not_found());
        }
        let ts = crate::clock::format_millis(timestamp_ms);
        // Commit timestamps strictly increase along the log, so binary search.
        let (mut lo, mut hi) = (0usize, versions.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            // An entry gone (gc removing old entries now, or a gc cut off that left some of
            // them) is older than any retained one: below the time, as its successors' are not
            // known to be.
            let older = match self.read_commit(versions[mid]).await? {
                Some(c) => c.info.timestamp <= timestamp_ms,
                None => true,
            };
            if older {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo == 0 {
            return Err(Error::TimestampNotFound {
                timestamp: ts,
                reason: format!("the earliest retained version is {}", versions[0]),
            });
        }
        self.load_version(versions[lo - 1]).await
    }

    fn not_found(&self) -> Error {
        Error::TableNotFound {
            location: self.location.display.clone(),
        }
    }

    /// Replay commits after `base` up to `until` (inclusive).
    async fn replay(
        &self,
        base: Option<Snapshot>,
        until: Option<u64>,
        listing: &LogListing,
    ) -> Result<Snapshot> {
        let start = base.as_ref().map(|b| b.version + 1).unwrap_or(0);
        let Some(until) = until.or(base.as_ref().map(|b| b.version)) else {
            return Err(self.not_found());
        };
        if until + 1 < start {
            return base.ok_or_else(|| self.not_found());
        }
        let wanted: Vec<u64> = (start..=until).collect();
        if let Some(missing) = wanted.iter().find(|v| !listing.commits.contains(v)) {
            if listing.commits.is_empty() && listing.checkpoints.is_empty() {
                return Err(self.not_found());
            }
            // The version asked for is gone, not the entry it needed (replaying a version
            // with no checkpoint below it would name version 0).
            let oldest = listing
                .checkpoints
                .iter()
                .next()
                .or(listing.commits.iter().next());
            return Err(Error::VersionNotFound {
                version: until,
                reason: match oldest {
                    Some(o) => format!(
                        "cleaned by gc (log entry {missing} is gone; the oldest readable version is {o})"
                    ),
                    None => format!("cleaned by gc (log entry {missing} is gone)"),
                },
            });
        }
        let commits = self.read_commits(wanted).await?;
        let mut iter = commits.into_iter();
        let mut snap = match base {
            Some(b) => b,
            None => {
                let first = iter.next().ok_or_else(|| self.not_found())?;
                Snapshot::from_first_commit(
                    self.commit_path(0).as_ref(),
                    &first.info,
                    first.actions,
                )?
            }
        };
        for c in iter {
            let path = self.commit_path(c.version);
            snap.apply(path.as_ref(), c.version, &c.info, c.actions)?;
        }
        Ok(snap)
    }

    /// Catch up after a lost commit race: GET the next versions one by one until one is
    /// missing. Cheaper than a LIST when only a few commits are ahead, which is the case
    /// right after losing a race.
    pub async fn catch_up(&self, snapshot: &mut Snapshot) -> Result<Vec<LoggedCommit>> {
        let mut applied = Vec::new();
        while let Some(c) = self.read_commit(snapshot.version + 1).await? {
            self.apply(snapshot, &c)?;
            applied.push(c);
            if applied.len() >= 64 {
                // Far behind: a LIST and concurrent GETs are faster.
                applied.extend(self.update(snapshot).await?);
                break;
            }
        }
        Ok(applied)
    }

    /// Bring `snapshot` up to the latest version; returns the commits applied.
    pub async fn update(&self, snapshot: &mut Snapshot) -> Result<Vec<LoggedCommit>> {
        let commits = self.commits_after(snapshot.version).await?;
        self.apply_all(snapshot, &commits)?;
        Ok(commits)
    }

    /// The commits after `version`, in order (one listing of the log's tail, then reads):
    /// what [`LogStore::update`] applies, for a caller that copies its snapshot only when
    /// there is something to apply.
    pub async fn commits_after(&self, version: u64) -> Result<Vec<LoggedCommit>> {
        let listing = self.list(Some(version)).await?;
        // The listing starts at `version`'s own commit, which is removed only once newer
        // ones exist: an empty one means the table was deleted under this handle, and a
        // commit now would start a headless log.
        if listing.commits.is_empty() {
            return Err(self.not_found());
        }
        // gc removed the commits right after `version` (the handle is older than the
        // retention): the caller must open the table afresh.
        if let Some(&first) = listing.commits.first().filter(|&&v| v > version + 1) {
            return Err(Error::VersionNotFound {
                version: version + 1,
                reason: format!("cleaned from the log (the oldest kept is {first})"),
            });
        }
        let newer: Vec<u64> = listing.commits.range(version + 1..).copied().collect();
        self.read_commits(newer).await
    }

    /// Apply `commits` (from [`LogStore::commits_after`] the snapshot's version) in order.
    pub fn apply_all(&self, snapshot: &mut Snapshot, commits: &[LoggedCommit]) -> Result<()> {
        for c in commits {
            self.apply(snapshot, c)?;
        }
        Ok(())
    }

    /// Apply a commit read from this log to `snapshot` (a copy: the caller keeps `c`).
    fn apply(&self, snapshot: &mut Snapshot, c: &LoggedCommit) -> Result<()> {
        snapshot.apply(
            self.commit_path(c.version).as_ref(),
            c.version,
            &c.info,
            c.actions.clone(),
        )
    }
}

pub(crate) fn parse_version(s: &str) -> Option<u64> {
    (s.len() == 20 && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

pub(crate) fn parse_commit(path: &Path, version: u64, bytes: &[u8]) -> Result<LoggedCommit> {
    let mut actions = from_json_lines(path.as_ref(), bytes)?;
    let pos = actions
        .iter()
        .position(|a| matches!(a, Action::CommitInfo(_)))
        .ok_or_else(|| Error::corrupt(path, "commit without commitInfo"))?;
    let Action::CommitInfo(info) = actions.remove(pos) else {
        unreachable!()
    };
    Ok(LoggedCommit {
        version,
        info,
        actions,
    })
}
