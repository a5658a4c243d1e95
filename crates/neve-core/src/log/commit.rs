//! The commit protocol: a create-only PUT of the next log entry, retried on lost races.
//!
//! - A lost race (`AlreadyExists`) re-reads the new commits, lets the operation re-check them
//!   for real conflicts (`prepare` runs again on the newer snapshot), and tries the next version.
//! - A PUT whose outcome is unknown (timeout, connection reset after sending) is resolved by
//!   reading the entry back and comparing its commit id; it is retried at the same version
//!   only while the entry does not exist, so a commit can never land twice.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::Rng;

use super::actions::{to_json_lines, Action, CommitInfo, CommitSummary, RequestKey};
use super::snapshot::Snapshot;
use super::store::{LogStore, PutCommit};
use crate::clock::Clock;
use crate::error::{Error, Result};

/// A commit removing at least this many files is followed by a checkpoint.
const CHECKPOINT_AFTER_REMOVING: u64 = 1000;

/// What a successful commit produced.
#[derive(Debug, Clone)]
pub struct CommitOutcome {
    pub version: u64,
    pub commit_id: String,
    /// PUT attempts, 1 when there was no contention.
    pub attempts: u32,
}

/// Commits actions to a table's log.
#[derive(Debug, Clone)]
pub struct Committer {
    log: LogStore,
    clock: Arc<dyn Clock>,
    rng: Arc<Mutex<StdRng>>,
    writer: String,
    max_attempts: u32,
    /// Writes Iceberg metadata after each commit to a table with `iceberg=true`.
    iceberg: Option<crate::iceberg::IcebergWriter>,
    /// When set, that writing happens after the commit returns (see [`Self::with_iceberg`]).
    background: Option<Arc<crate::iceberg::background::Background>>,
}

impl Committer {
    pub fn new(
        log: LogStore,
        clock: Arc<dyn Clock>,
        rng: Arc<Mutex<StdRng>>,
        writer: String,
    ) -> Self {
        Self {
            log,
            clock,
            rng,
            writer,
            max_attempts: 1000,
            iceberg: None,
            background: None,
        }
    }

    /// Write Iceberg metadata after each commit to a table with `iceberg=true`: before the
    /// commit returns, or (`background`) by a task of the table's after it returns.
    pub fn with_iceberg(
        mut self,
        writer: Option<crate::iceberg::IcebergWriter>,
        background: bool,
    ) -> Self {
        self.background = writer
            .clone()
            .filter(|_| background)
            .map(crate::iceberg::background::Background::new);
        self.iceberg = writer;
        self
    }

    /// Whether Iceberg metadata of a commit made so far is still to be written in the
    /// background.
    pub fn iceberg_busy(&self) -> bool {
        self.background.as_ref().is_some_and(|b| b.busy())
    }

    /// Wait until the Iceberg metadata of every commit made so far has been written (or
    /// failed to be); at once unless it is written in the background.
    pub async fn iceberg_settled(&self) {
        if let Some(b) = &self.background {
            b.settled().await;
        }
    }

    /// After a commit: the table's Iceberg metadata, when it has some. A failure is logged
    /// and left to the next sync: the commit stands either way.
    /// `info` is the commit's, when `snapshot` is at its version.
    async fn after_commit(&self, snapshot: &Snapshot, info: Option<&CommitInfo>) {
        if !snapshot.metadata.settings.iceberg {
            return;
        }
        if let Some(b) = &self.background {
            b.submit(snapshot, info);
            return;
        }
        let Some(w) = &self.iceberg else { return };
        if let Err(e) = w.sync_committed(snapshot, info).await {
            tracing::warn!(
                version = snapshot.version,
                error = %e,
                "Iceberg metadata not written; the next sync catches up"
            );
        }
    }

    /// The writer of Iceberg metadata after each commit, if there is one.
    pub(crate) fn iceberg(&self) -> Option<&crate::iceberg::IcebergWriter> {
        self.iceberg.as_ref()
    }

    pub fn with_max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    pub fn log(&self) -> &LogStore {
        &self.log
    }

    /// The `writer` recorded in commits.
    pub fn writer(&self) -> &str {
        &self.writer
    }

    /// A fresh unique id from the injected randomness.
    /// A random delay below `max_ms`, from the injected randomness.
    pub fn jitter_ms(&self, max_ms: u64) -> u64 {
        self.rng.lock().expect("rng").random_range(0..max_ms.max(1))
    }

    pub fn new_id(&self) -> uuid::Uuid {
        let bytes: [u8; 16] = self.rng.lock().expect("rng").random();
        uuid::Builder::from_random_bytes(bytes).into_uuid()
    }

    /// Wait before retrying a lost race. The next version is free as soon as we have read the
    /// commits ahead of us, so the first retries go at once (a short random delay spreads
    /// writers out); only persistent contention backs off, and never beyond 100 ms, so a
    /// loser does not fall ever further behind.
    fn backoff(&self, attempt: u32) -> Duration {
        let cap_ms = if attempt <= 3 {
            4.0
        } else {
            (1u64 << attempt.min(7)) as f64
        }
        .min(100.0);
        let jitter: f64 = self.rng.lock().expect("rng").random_range(0.0..1.0);
        Duration::from_micros((cap_ms * jitter * 1000.0) as u64)
    }

    /// Commit the actions `prepare` builds against `snapshot` (re-run after each lost race).
    /// On success `snapshot` is at the new version.
    pub async fn commit<F>(
        &self,
        snapshot: &mut Snapshot,
        operation: &str,
        prepare: F,
    ) -> Result<CommitOutcome>
    where
        F: FnMut(&Snapshot) -> Result<Vec<Action>>,
    {
        self.commit_requests(snapshot, operation, &[], prepare)
            .await
    }

    /// [`Committer::commit`], recording the idempotency keys of the requests whose rows the
    /// commit holds. Fails with [`Error::RequestCommitted`] (committing nothing) when the log
    /// already has one of them: checked against every version the commit is tried on, so two
    /// writers racing with the same request commit it once.
    pub async fn commit_requests<F>(
        &self,
        snapshot: &mut Snapshot,
        operation: &str,
        requests: &[RequestKey],
        mut prepare: F,
    ) -> Result<CommitOutcome>
    where
        F: FnMut(&Snapshot) -> Result<Vec<Action>>,
    {
        let commit_id = self.new_id().to_string();
        let read_version = snapshot.version;
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            for r in requests {
                if let Some(logged) = snapshot.request(&r.key) {
                    return Err(Error::RequestCommitted {
                        key: r.key.clone(),
                        version: logged.version,
                        rows: logged.rows,
                        digest: logged.digest.clone(),
                    });
                }
            }
            let actions = prepare(snapshot)?;
            for a in &actions {
                if let Action::Metadata(m) = a {
                    if m.settings.iceberg {
                        crate::iceberg::check_table(&m.schema, &m.partition_by, m.merge.as_ref())?;
                        if snapshot.metadata.settings.iceberg {
                            crate::iceberg::check_change(&snapshot.metadata.schema, &m.schema)?;
                        }
                    }
                }
            }
            let version = snapshot.version + 1;
            let info = CommitInfo {
                timestamp: self.clock.now_millis().max(snapshot.timestamp + 1),
                operation: operation.to_string(),
                commit_id: commit_id.clone(),
                writer: self.writer.clone(),
                read_version: Some(read_version),
                summary: CommitSummary::of_commit(&actions, snapshot),
                requests: requests.to_vec(),
            };
            let mut all = Vec::with_capacity(actions.len() + 1);
            all.push(Action::CommitInfo(info.clone()));
            all.extend(actions.iter().cloned());
            let body = Bytes::from(to_json_lines(&all));
            crate::failpoint::hit("commit:before-put");
            if self
                .put_resolving_unknown(version, body, &commit_id)
                .await?
            {
                let path = self.log.commit_path(version);
                snapshot.apply(path.as_ref(), version, &info, actions)?;
                crate::failpoint::hit("commit:after-put");
                tracing::debug!(version, attempts, operation, "committed");
                self.maybe_checkpoint(snapshot, info.summary.files_removed)
                    .await;
                self.after_commit(snapshot, Some(&info)).await;
                return Ok(CommitOutcome {
                    version,
                    commit_id,
                    attempts,
                });
            }
            // Lost the race: catch up; our own commit may be among the new ones (a retried
            // PUT that had in fact landed).
            let newer = self.log.catch_up(snapshot).await?;
            if let Some(mine) = newer.iter().find(|c| c.info.commit_id == commit_id) {
                self.maybe_checkpoint(snapshot, mine.info.summary.files_removed)
                    .await;
                let info = (mine.version == snapshot.version).then_some(&mine.info);
                self.after_commit(snapshot, info).await;
                return Ok(CommitOutcome {
                    version: mine.version,
                    commit_id,
                    attempts,
                });
            }
            if attempts >= self.max_attempts {
                return Err(Error::CommitRetriesExhausted { attempts });
            }
            tracing::debug!(version, attempts, "lost commit race, retrying");
            tokio::time::sleep(self.backoff(attempts)).await;
        }
    }

    /// PUT `body` as `version`; true if it is ours, false if another commit holds the version.
    async fn put_resolving_unknown(
        &self,
        version: u64,
        body: Bytes,
        commit_id: &str,
    ) -> Result<bool> {
        // Once a PUT may have landed, an error must not say the commit failed: the caller
        // would delete the files a landed commit names.
        let unknown_outcome = |reason: String| Error::CommitOutcomeUnknown { version, reason };
        let mut unknown = 0u32;
        loop {
            match self.log.put_commit(version, body.clone()).await {
                PutCommit::Created => return Ok(true),
                PutCommit::AlreadyExists => {
                    // Possibly our own earlier attempt (the store retried a PUT that had landed).
                    return match self.owner_is(version, commit_id).await {
                        Ok(mine) => Ok(mine.unwrap_or(false)),
                        Err(e) => Err(unknown_outcome(e.to_string())),
                    };
                }
                PutCommit::Unknown(e) => {
                    unknown += 1;
                    tracing::warn!(version, error = %e, "commit outcome unknown, reading it back");
                    match self.owner_is(version, commit_id).await {
                        Ok(Some(mine)) => return Ok(mine),
                        // Not there: the PUT did not land (yet); retrying at the same version
                        // is safe because the entry is create-only.
                        Ok(None) | Err(_) if unknown < 10 => {
                            // The store is struggling: give it time (50 ms doubling to 1.6 s).
                            tokio::time::sleep(Duration::from_millis(50 << unknown.min(5))).await;
                        }
                        // The last PUT may still land.
                        Ok(None) => return Err(unknown_outcome(e.to_string())),
                        Err(read_err) => return Err(unknown_outcome(read_err.to_string())),
                    }
                }
            }
        }
    }

    /// Whose commit holds `version`: `Some(true)` ours, `Some(false)` another's, `None` absent.
    async fn owner_is(&self, version: u64, commit_id: &str) -> Result<Option<bool>> {
        Ok(self
            .log
            .read_commit(version)
            .await?
            .map(|c| c.info.commit_id == commit_id))
    }

    /// Checkpoint every `checkpointInterval` versions, and after a commit that removed many
    /// files (a merge, delete or drop): its tail would otherwise make every open replay the
    /// whole pre-merge file list from the older checkpoint.
    async fn maybe_checkpoint(&self, snapshot: &Snapshot, files_removed: u64) {
        let interval = snapshot.metadata.settings.checkpoint_interval.max(1);
        let due =
            snapshot.version.is_multiple_of(interval) || files_removed >= CHECKPOINT_AFTER_REMOVING;
        if snapshot.version == 0 || !due {
            return;
        }
        let keep_after =
            self.clock.now_millis() - crate::gc::tombstones_kept_ms(&snapshot.metadata.settings);
        if let Err(e) = self.log.write_checkpoint(snapshot, keep_after).await {
            // A missing checkpoint only makes opening slower; the commit stands.
            tracing::warn!(version = snapshot.version, error = %e, "checkpoint failed");
        }
    }
}
