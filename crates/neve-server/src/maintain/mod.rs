//! Background maintenance: each table of the warehouse (every tenant's, and the tables of
//! line-protocol namespaces one folder down) has its small files merged and its garbage
//! collected with the same commands `neve merge` and `neve gc` run, every `interval`, or as
//! often as its own settings say (`maintenance_interval`; `merge_min_files`,
//! `merge_target_file_size` and `gc_grace` likewise win over the config's policy). Merges and
//! gc commit through the log like every writer, so any number of servers and `neve maintain`
//! workers may run this loop on one warehouse at once.

use std::sync::Arc;
use std::time::Duration;

mod claim;

use neve_core::gc::GcOptions;
use neve_core::merge::MergeOptions;
use neve_core::write::NoProgress;
use neve_core::{Table, TableLocation};
use serde::{Deserialize, Serialize};

use crate::metrics::{KindLabels, Metrics, TaskLabels};

/// The maintenance policy (`[maintenance]` in the config).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MaintenanceConfig {
    /// Run the loop in `neve serve` (`--no-maintenance` turns it off).
    pub enabled: bool,
    #[serde(with = "crate::config::duration_text")]
    pub interval: Duration,
    /// A partition is merged once it has this many files below `target_file_size`.
    pub min_files: usize,
    #[serde(with = "crate::config::size_text")]
    pub target_file_size: u64,
    /// Input bytes merged per table per round (the rest waits for the next round).
    #[serde(with = "crate::config::size_text")]
    pub max_input_bytes: u64,
    /// Files unreferenced for less than this are kept by gc (an insert may be committing them).
    /// This server's inserts and merges older than half of it are not committed; writers
    /// elsewhere learn it only from the table's own `gc_grace` setting.
    #[serde(with = "crate::config::duration_text")]
    pub gc_grace: Duration,
}

impl Default for MaintenanceConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            interval: Duration::from_secs(60),
            min_files: 8,
            target_file_size: 128 << 20,
            max_input_bytes: 4 << 30,
            gc_grace: Duration::from_secs(3600),
        }
    }
}

/// The tables found under the roots, and whether every folder could be listed (when not,
/// tables under the folders that failed are missing, not gone).
#[derive(Debug, Default)]
pub struct Discovery {
    pub tables: Vec<String>,
    pub complete: bool,
}

/// The tables under `roots` (each a folder of tables, or of namespaces of tables). A folder
/// that cannot be listed is logged and leaves the discovery incomplete.
pub async fn discover(roots: &[String]) -> Discovery {
    let mut out = Vec::new();
    let mut complete = true;
    for root in roots {
        let mut folders = vec![(root.trim_end_matches('/').to_string(), 0)];
        while let Some((folder, depth)) = folders.pop() {
            let loc = match TableLocation::parse(&folder) {
                Ok(l) => l,
                Err(e) => {
                    complete = false;
                    tracing::warn!(folder = %folder, error = %e, "maintenance: cannot open folder");
                    continue;
                }
            };
            let listing = match loc.store.list_with_delimiter(Some(&loc.child(""))).await {
                Ok(l) => l,
                // A warehouse with no table yet.
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(e) => {
                    complete = false;
                    tracing::warn!(folder = %folder, error = %e, "maintenance: cannot list folder");
                    continue;
                }
            };
            for p in listing.common_prefixes {
                let Some(name) = p.filename() else { continue };
                if name == "_log" {
                    out.push(folder.clone());
                } else if depth < 2 && !name.starts_with('_') && !name.contains('=') {
                    folders.push((format!("{folder}/{name}"), depth + 1));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    Discovery {
        tables: out,
        complete,
    }
}

/// What a round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Round {
    /// Tables with a step that failed.
    pub failed: usize,
    /// Of those, the ones whose failure will come back until someone acts (a corrupt log, a
    /// bad address, a merge longer than the grace, a panic): not the store's or a race's.
    pub lasting: usize,
    /// Tables another server or worker was maintaining at the time (see [`claim`]): left
    /// to it.
    pub elsewhere: usize,
}

/// One round over `tables`: merge, then gc, each table; failures are logged and the round
/// goes on.
pub async fn round(tables: &[String], policy: &MaintenanceConfig, metrics: &Arc<Metrics>) -> Round {
    let mut out = Round::default();
    for address in tables {
        let v = visit(address, policy, metrics).await;
        out.elsewhere += v.elsewhere as usize;
        match v.failed {
            Some(Failure::Passing) => out.failed += 1,
            Some(Failure::Lasting) => {
                out.failed += 1;
                out.lasting += 1;
            }
            None => {}
        }
    }
    out
}

/// Whether a failure may pass by itself (the store's, a race's) or lasts until someone acts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    Passing,
    Lasting,
}

impl Failure {
    fn of(e: &neve_core::Error) -> Self {
        match e {
            neve_core::Error::WriteOutlivedGrace { .. } => Failure::Lasting,
            e => match e.kind() {
                neve_core::ErrorKind::Unavailable | neve_core::ErrorKind::Conflict => {
                    Failure::Passing
                }
                _ => Failure::Lasting,
            },
        }
    }

    /// The worse of two.
    fn and(self, other: Option<Failure>) -> Self {
        match other {
            Some(Failure::Lasting) => Failure::Lasting,
            _ => self,
        }
    }
}

/// What a visit to a table did.
struct Visit {
    /// How long until the table is due again.
    again: Duration,
    failed: Option<Failure>,
    /// Another server or worker held the table.
    elsewhere: bool,
}

/// [`maintain`] in a task of its own: a panic (a bug met on one table's files) is counted and
/// logged, and the loop goes on to the other tables.
async fn visit(address: &str, policy: &MaintenanceConfig, metrics: &Arc<Metrics>) -> Visit {
    let (a, p, m) = (address.to_string(), policy.clone(), metrics.clone());
    match tokio::spawn(async move { maintain(&a, &p, &m).await }).await {
        Ok(v) => v,
        Err(e) => {
            failed(metrics, "panic");
            tracing::error!(table = %address, error = %e, "maintenance: panicked; the loop goes on");
            Visit {
                again: policy.interval,
                failed: Some(Failure::Lasting),
                elsewhere: false,
            }
        }
    }
}

fn failed(metrics: &Metrics, task: &'static str) {
    metrics
        .maintenance_failures
        .get_or_create(&TaskLabels { task })
        .inc();
}

/// Merge then gc one table under its own policy (its settings over `policy`): when it is due
/// again, and whether a step failed.
async fn maintain(address: &str, policy: &MaintenanceConfig, metrics: &Metrics) -> Visit {
    let refused = |e: &neve_core::Error| Visit {
        again: policy.interval,
        failed: Some(Failure::of(e)),
        elsewhere: false,
    };
    let table = match Table::at(address) {
        Ok(t) => t,
        Err(e) => {
            failed(metrics, "open");
            tracing::warn!(table = %address, error = %e, "maintenance: cannot open");
            return refused(&e);
        }
    };
    // Claimed before the log is read: a table left to another costs one PUT.
    let claim = match claim::take(table.location()).await {
        Ok(claim::Taken::Here(c)) => Some(c),
        Ok(claim::Taken::Elsewhere) => {
            metrics.maintenance_elsewhere.inc();
            tracing::debug!(table = %address, "maintenance: another server or worker is maintaining it");
            return Visit {
                again: policy.interval,
                failed: None,
                elsewhere: true,
            };
        }
        // The steps below meet the same store, and say what failed.
        Err(e) => {
            tracing::debug!(table = %address, error = %e, "maintenance: no claim; maintained unclaimed");
            None
        }
    };
    let visit = maintain_claimed(address, &table, policy, metrics).await;
    if let Some(c) = claim {
        c.release().await;
    }
    visit
}

/// [`maintain`] once the table is this visit's.
async fn maintain_claimed(
    address: &str,
    table: &Table,
    policy: &MaintenanceConfig,
    metrics: &Metrics,
) -> Visit {
    let settings = match table.metadata().await {
        Ok(m) => m.settings,
        Err(e) => {
            failed(metrics, "open");
            tracing::warn!(table = %address, error = %e, "maintenance: cannot read");
            return Visit {
                again: policy.interval,
                failed: Some(Failure::of(&e)),
                elsewhere: false,
            };
        }
    };
    let again = settings
        .maintenance_interval_seconds
        .map(Duration::from_secs)
        .unwrap_or(policy.interval);
    let mut any_failed: Option<Failure> = None;
    let grace = settings
        .gc_grace_seconds
        .map(Duration::from_secs)
        .unwrap_or(policy.gc_grace);
    let opts = MergeOptions {
        min_files: settings.merge_min_files.unwrap_or(policy.min_files).max(2),
        target_file_size: settings
            .merge_target_file_size
            .unwrap_or(policy.target_file_size),
        max_input_bytes: policy.max_input_bytes,
        gc_grace_ms: Some(policy.gc_grace.as_millis() as i64),
        ..Default::default()
    };
    match table.merge(&opts, Arc::new(NoProgress)).await {
        Ok(r) if r.version.is_some() => {
            metrics.merges.inc();
            tracing::info!(table = %address, files_in = r.files_in, files_out = r.files_out, version = r.version, "merged");
        }
        Ok(_) => {}
        // Not a race: it will take as long next round, and fail again the same way.
        Err(e @ neve_core::Error::WriteOutlivedGrace { .. }) => {
            any_failed = Some(Failure::of(&e).and(any_failed));
            failed(metrics, "merge");
            tracing::warn!(table = %address, error = %e, "maintenance: merge took over half the gc grace and was not committed; give the table a longer gc_grace, or the policy a smaller max_input_bytes")
        }
        // Another merger, a delete or a drop took the same files: theirs stands, nothing
        // failed (servers beside each other meet this in the normal course).
        Err(e) if e.kind() == neve_core::ErrorKind::Conflict => {
            tracing::info!(table = %address, error = %e, "maintenance: merge lost a race")
        }
        Err(e) => {
            any_failed = Some(Failure::of(&e).and(any_failed));
            failed(metrics, "merge");
            tracing::warn!(table = %address, error = %e, "maintenance: merge failed")
        }
    }
    let gc = GcOptions {
        grace_ms: grace.as_millis() as i64,
        ..Default::default()
    };
    match table.gc(&gc).await {
        Ok(r) => {
            metrics.gcs.inc();
            for (kind, n) in [
                ("removed", r.tombstones_deleted),
                ("orphan", r.orphans_deleted),
                ("interrupted_upload", r.interrupted_uploads_deleted),
                ("log_entry", r.log_entries_deleted),
                ("iceberg", r.iceberg_files_deleted),
                ("claim", r.claims_deleted),
            ] {
                if n > 0 {
                    metrics
                        .gc_deleted_files
                        .get_or_create(&KindLabels { kind })
                        .inc_by(n);
                }
            }
            metrics
                .gc_deleted_bytes
                .inc_by(r.tombstone_bytes + r.orphan_bytes + r.interrupted_upload_bytes);
            if r.tombstones_deleted + r.orphans_deleted + r.interrupted_uploads_deleted > 0 {
                tracing::info!(table = %address, tombstones = r.tombstones_deleted, orphans = r.orphans_deleted, interrupted_uploads = r.interrupted_uploads_deleted, "gc");
            }
        }
        Err(e) => {
            any_failed = Some(Failure::of(&e).and(any_failed));
            failed(metrics, "gc");
            tracing::warn!(table = %address, error = %e, "maintenance: gc failed")
        }
    }
    Visit {
        again,
        failed: any_failed,
        elsewhere: false,
    }
}

/// When the first discovery is: `unit` (in [0, 1), random) of the interval from the start, so
/// servers started together (a rollout) do not merge the same tables at the same moments, and
/// a process restarted more often than the interval still maintains its tables.
pub fn first_discovery(interval: Duration, unit: f64) -> Duration {
    interval.mul_f64(unit.clamp(0.0, 1.0))
}

/// Until `stop` says so: find the tables every `policy.interval` (the first time after
/// `first`), and visit each when it is due, by its own `maintenance_interval` or the policy's.
pub async fn run(
    roots: Vec<String>,
    policy: MaintenanceConfig,
    metrics: Arc<Metrics>,
    first: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::time::Instant;
    let mut due: std::collections::BTreeMap<String, Instant> = Default::default();
    let mut next_discovery = Instant::now() + first;
    loop {
        let wake = due
            .values()
            .copied()
            .min()
            .map_or(next_discovery, |d| d.min(next_discovery));
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        let now = Instant::now();
        if now >= next_discovery {
            let found = discover(&roots).await;
            if found.complete {
                due.retain(|t, _| found.tables.binary_search(t).is_ok());
            } else {
                // Tables under a folder that failed are kept, not forgotten.
                failed(&metrics, "list");
            }
            for t in found.tables {
                due.entry(t).or_insert(now);
            }
            next_discovery = Instant::now() + policy.interval;
        }
        let ready: Vec<String> = due
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(t, _)| t.clone())
            .collect();
        for t in ready {
            if *stop.borrow() {
                return;
            }
            let every = visit(&t, &policy, &metrics).await.again;
            due.insert(t, Instant::now() + every);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What passes by itself (the store, a race) asks for another run; what comes back until
    /// someone acts does not.
    #[test]
    fn failures_that_last_are_told_from_those_that_pass() {
        let store = neve_core::Error::Storage {
            source: object_store::Error::Generic {
                store: "S3",
                source: "503 Slow Down".into(),
            },
        };
        assert_eq!(Failure::of(&store), Failure::Passing);
        let corrupt = neve_core::Error::CorruptLog {
            path: "_log/1.json".into(),
            reason: "not json".into(),
        };
        assert_eq!(Failure::of(&corrupt), Failure::Lasting);
        let slow = neve_core::Error::WriteOutlivedGrace {
            what: "merge".into(),
            whose: "t".into(),
            age_s: 400.0,
            grace_s: 600.0,
        };
        assert_eq!(Failure::of(&slow), Failure::Lasting);
        assert_eq!(
            Failure::Passing.and(Some(Failure::Lasting)),
            Failure::Lasting
        );
        assert_eq!(
            Failure::Lasting.and(Some(Failure::Passing)),
            Failure::Lasting
        );
        assert_eq!(Failure::Passing.and(None), Failure::Passing);
    }
}
