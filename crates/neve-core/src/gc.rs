//! Garbage collection: deletes what no snapshot within reach can need.
//!
//! - Tombstoned data files (removed by a merge, delete or drop) once removed for longer than
//!   the retention (the time-travel window) and the grace period.
//! - Orphans: files under `_data/` that the log does not reference (failed or killed inserts
//!   and merges), once older than the grace period. The grace period must exceed the longest
//!   write, from reading the snapshot to committing: a file being written is an orphan until
//!   its commit lands.
//! - On a local folder, PUTs a crash or a kill cut off: their staging files
//!   (`<name>#<digits>`, which no listing shows), once older than the grace period.
//! - Log entries before the newest checkpoint that is itself older than the retention (and the
//!   grace period): every version from that checkpoint on stays readable.
//! - Maintenance claims (`_maintenance/claim-<minute>`, docs/FORMAT.md) of minutes long past.
//!
//! `_data/` is listed before the log is read, so a file committed meanwhile is seen as alive.
//! Deleting is idempotent (a missing file is fine), so any number of GCs may run at once.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStoreExt};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::storage::StoreKind;
use crate::table::Table;

/// The staging files of a local table's PUTs last written before `cutoff_ms`, in the folders
/// neve writes, with their sizes; deleted unless `dry_run`. On the blocking pool: a walk and
/// deletes of the file system.
async fn interrupted_uploads(
    dir: &std::path::Path,
    cutoff_ms: i64,
    dry_run: bool,
) -> Result<Vec<(PathBuf, u64)>> {
    let dirs: Vec<PathBuf> = ["_data", "_log", "metadata", "_maintenance"]
        .iter()
        .map(|d| dir.join(d))
        .collect();
    tokio::task::spawn_blocking(move || {
        let found = crate::storage::stale_staging(&dirs, cutoff_ms)
            .map_err(|(path, source)| Error::Io { path, source })?;
        if !dry_run {
            for (path, _) in &found {
                match std::fs::remove_file(path) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(Error::Io {
                            path: path.clone(),
                            source: e,
                        })
                    }
                    _ => {}
                }
            }
        }
        Ok(found)
    })
    .await
    .map_err(|e| Error::TaskFailed(e.to_string()))?
}

/// The grace a run waits when not told (1 hour).
pub const DEFAULT_GRACE_MS: i64 = 3_600_000;

/// How long checkpoints keep a removed file's tombstone: the retention, or the grace a cleaner
/// of the table waits (its `gc_grace`, else the default) when longer. A file whose tombstone is
/// gone reads as an orphan, aged by when it was written, not when it was removed.
pub(crate) fn tombstones_kept_ms(settings: &crate::log::TableSettings) -> i64 {
    let retention = settings.log_retention_hours as i64 * 3_600_000;
    let grace = settings
        .gc_grace_seconds
        .map_or(DEFAULT_GRACE_MS, |g| g as i64 * 1000);
    retention.max(grace)
}

/// How aggressive a GC run is.
#[derive(Debug, Clone)]
pub struct GcOptions {
    /// Minimum age of an orphan, and of a tombstone, before deletion (ms).
    pub grace_ms: i64,
    /// Time-travel window (ms); the table's `logRetentionHours` when `None`.
    pub retention_ms: Option<i64>,
    /// Report only.
    pub dry_run: bool,
}

impl Default for GcOptions {
    fn default() -> Self {
        Self {
            grace_ms: DEFAULT_GRACE_MS,
            retention_ms: None,
            dry_run: false,
        }
    }
}

/// What a GC run did (or would do, in a dry run).
#[derive(Debug, Clone, Default, Serialize)]
pub struct GcReport {
    pub version: u64,
    pub dry_run: bool,
    pub tombstones_deleted: u64,
    pub tombstone_bytes: u64,
    /// Removed files kept for time travel or the grace period.
    pub tombstones_kept: u64,
    pub orphans_deleted: u64,
    pub orphan_bytes: u64,
    /// Unreferenced files younger than the grace period (maybe an insert in flight).
    pub orphans_kept: u64,
    /// Staging files of PUTs cut off by a crash or a kill (local folders).
    pub interrupted_uploads_deleted: u64,
    pub interrupted_upload_bytes: u64,
    pub log_entries_deleted: u64,
    /// Iceberg metadata files no retained snapshot needs (tables with `iceberg=true`).
    pub iceberg_files_deleted: u64,
    /// Maintenance claims (`_maintenance/claim-<minute>`) of minutes long past, left by
    /// holders that died.
    pub claims_deleted: u64,
    /// The oldest version still readable after this run.
    pub oldest_version: u64,
    pub retention_ms: i64,
    pub grace_ms: i64,
}

impl Table {
    /// Delete tombstoned and orphaned data files and old log entries (see the module doc).
    pub async fn gc(&self, opts: &GcOptions) -> Result<GcReport> {
        if opts.grace_ms < 0 || opts.retention_ms.is_some_and(|r| r < 0) {
            return Err(Error::InvalidSetting {
                name: "grace".into(),
                reason: "durations cannot be negative".into(),
            });
        }
        let store = self.location.store.clone();
        // 1. What is stored, then (after) what the log references.
        let data: Vec<ObjectMeta> = store
            .list(Some(&self.location.child("_data")))
            .try_collect()
            .await?;
        let snapshot = self.log().load_latest().await?;
        let now = self.clock.now_millis();
        let retention_ms = opts
            .retention_ms
            .unwrap_or(snapshot.metadata.settings.log_retention_hours as i64 * 3_600_000);
        // A table's gc_grace is what its writers were promised (an insert older than half of
        // it does not commit): no run waits less, whatever it was asked.
        let grace_ms = opts.grace_ms.max(
            snapshot
                .metadata
                .settings
                .gc_grace_seconds
                .map_or(0, |g| g as i64 * 1000),
        );
        // Beyond what checkpoints keep, a removed file has no tombstone to be kept by: asked
        // to keep files longer, a run would delete them as orphans instead.
        let kept = tombstones_kept_ms(&snapshot.metadata.settings);
        if retention_ms > kept || grace_ms > kept {
            let (name, asked) = if retention_ms > kept {
                ("retention", retention_ms)
            } else {
                ("grace", grace_ms)
            };
            return Err(Error::InvalidSetting {
                name: name.into(),
                reason: format!(
                    "{name} of {}s is longer than the table keeps removed files' records ({}s: \
                     the longer of log_retention_hours and gc_grace, or 1 hour); raise \
                     log_retention_hours or gc_grace (`neve alter <table> set ...`) first",
                    asked / 1000,
                    kept / 1000
                ),
            });
        }
        let tombstone_cutoff = now - retention_ms.max(grace_ms);
        let orphan_cutoff = now - grace_ms;
        let mut report = GcReport {
            version: snapshot.version,
            dry_run: opts.dry_run,
            retention_ms,
            grace_ms,
            ..Default::default()
        };

        // Compared as store paths: the log's relative paths, resolved the way readers do.
        let alive: HashSet<Path> = snapshot
            .files
            .keys()
            .map(|p| self.location.child(p))
            .collect();
        let removed: HashMap<Path, &crate::log::RemoveFile> = snapshot
            .tombstones
            .iter()
            .map(|(p, t)| (self.location.child(p), t))
            .collect();
        let mut doomed: Vec<Path> = Vec::new();
        for obj in data {
            if alive.contains(&obj.location) {
                continue;
            }
            let written = obj.last_modified.timestamp_millis();
            match removed.get(&obj.location) {
                Some(t) if t.deletion_timestamp < tombstone_cutoff && written < orphan_cutoff => {
                    report.tombstones_deleted += 1;
                    report.tombstone_bytes += obj.size;
                    doomed.push(obj.location);
                }
                Some(_) => report.tombstones_kept += 1,
                None if written < orphan_cutoff => {
                    report.orphans_deleted += 1;
                    report.orphan_bytes += obj.size;
                    doomed.push(obj.location);
                }
                None => report.orphans_kept += 1,
            }
        }
        if let StoreKind::Local { dir } = &self.location.kind {
            for (_, size) in interrupted_uploads(dir, orphan_cutoff, opts.dry_run).await? {
                report.interrupted_uploads_deleted += 1;
                report.interrupted_upload_bytes += size;
            }
        }

        // 2. Log entries before the newest checkpoint older than the retention.
        let listing = self.log().list(None).await?;
        // Never younger than the grace either: a writer still working from an older snapshot
        // must find the commits after it (or its create-only PUT could land on a cleaned
        // version number).
        let keep_from = self
            .oldest_needed_checkpoint(&listing, tombstone_cutoff)
            .await?;
        report.oldest_version =
            keep_from.unwrap_or_else(|| listing.commits.iter().next().copied().unwrap_or_default());
        if let Some(c) = keep_from {
            for &v in listing.commits.range(..c) {
                doomed.push(self.log().commit_path(v));
                report.log_entries_deleted += 1;
            }
            for &v in listing.checkpoints.range(..c) {
                doomed.push(self.log().checkpoint_path(v));
                report.log_entries_deleted += 1;
            }
        }

        // Claims of minutes that ended over a minute ago (clocks may disagree): their holders
        // died or were stopped.
        let claims: Vec<ObjectMeta> = store
            .list(Some(&self.location.child("_maintenance")))
            .try_collect()
            .await?;
        for c in claims {
            let minute = c
                .location
                .filename()
                .and_then(|n| n.strip_prefix("claim-"))
                .and_then(|m| m.parse::<i64>().ok());
            if minute.is_some_and(|m| (m + 2) * 60_000 < now) {
                report.claims_deleted += 1;
                doomed.push(c.location);
            }
        }

        if snapshot.metadata.settings.iceberg && !opts.dry_run {
            // No Iceberg snapshot may list a file deleted below: expire those first, with
            // the same cutoff. If that fails, nothing is deleted.
            let w = crate::iceberg::IcebergWriter::new(
                self.location.clone(),
                self.log().clone(),
                self.clock.clone(),
            );
            let sync = crate::iceberg::SyncOptions {
                expire_before_ms: Some(tombstone_cutoff),
                ..Default::default()
            };
            w.sync_to(&snapshot, &sync).await?;
            for o in w.unreferenced(orphan_cutoff).await? {
                report.iceberg_files_deleted += 1;
                doomed.push(o.location);
            }
        }

        if !opts.dry_run {
            futures::stream::iter(doomed.into_iter().map(|p| {
                let store = store.clone();
                async move {
                    match store.delete(&p).await {
                        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                        Err(e) => Err(Error::from(e)),
                    }
                }
            }))
            .buffer_unordered(32)
            .try_collect::<Vec<()>>()
            .await?;
        }
        tracing::info!(?report, "gc");
        Ok(report)
    }

    /// The newest checkpoint whose version was committed at or before `cutoff_ms`: versions
    /// from it on stay readable; everything before it can go.
    async fn oldest_needed_checkpoint(
        &self,
        listing: &crate::log::LogListing,
        cutoff_ms: i64,
    ) -> Result<Option<u64>> {
        let ckpts: Vec<u64> = listing
            .checkpoints
            .iter()
            .copied()
            .filter(|v| listing.commits.contains(v))
            .collect();
        // Commit timestamps increase with the version: binary search.
        let (mut lo, mut hi) = (0usize, ckpts.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            let ts = match self.log().read_commit(ckpts[mid]).await? {
                Some(c) => c.info.timestamp,
                None => i64::MAX, // removed meanwhile by another GC: treat as too new
            };
            if ts <= cutoff_ms {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo.checked_sub(1).map(|i| ckpts[i]))
    }
}
