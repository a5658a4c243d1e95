//! Background maintenance: each table of the warehouse (every tenant's, and the tables of
//! line-protocol namespaces one folder down) has its small files merged and its garbage
//! collected with the same commands `neve merge` and `neve gc` run, every `interval`, or as
//! often as its own settings say (`maintenance_interval`; `merge_min_files`,
//! `merge_target_file_size` and `gc_grace` likewise win over the config's policy). Merges and
//! gc commit through the log like every writer, so any number of servers and `neve maintain`
//! workers may run this loop on one warehouse at once.

use std::sync::Arc;
use std::time::Duration;

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

/// The tables under `roots` (each a folder of tables, or of namespaces of tables).
pub async fn discover(roots: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for root in roots {
        let mut folders = vec![(root.trim_end_matches('/').to_string(), 0)];
        while let Some((folder, depth)) = folders.pop() {
            let Ok(loc) = TableLocation::parse(&folder) else {
                continue;
            };
            let Ok(listing) = loc.store.list_with_delimiter(Some(&loc.child(""))).await else {
                continue;
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
    out
}

/// One round over `tables`: merge, then gc, each table; failures are logged and the round
/// goes on.
pub async fn round(tables: &[String], policy: &MaintenanceConfig, metrics: &Metrics) {
    for address in tables {
        maintain(address, policy, metrics).await;
    }
}

fn failed(metrics: &Metrics, task: &'static str) {
    metrics
        .maintenance_failures
        .get_or_create(&TaskLabels { task })
        .inc();
}

/// Merge then gc one table under its own policy (its settings over `policy`); returns how
/// long until it is due again.
async fn maintain(address: &str, policy: &MaintenanceConfig, metrics: &Metrics) -> Duration {
    let table = match Table::at(address) {
        Ok(t) => t,
        Err(e) => {
            failed(metrics, "open");
            tracing::warn!(table = %address, error = %e, "maintenance: cannot open");
            return policy.interval;
        }
    };
    let settings = match table.metadata().await {
        Ok(m) => m.settings,
        Err(e) => {
            failed(metrics, "open");
            tracing::warn!(table = %address, error = %e, "maintenance: cannot read");
            return policy.interval;
        }
    };
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
        // Another merger, a delete or a drop took the same files: theirs stands, nothing
        // failed (servers beside each other meet this in the normal course).
        Err(e) if e.kind() == neve_core::ErrorKind::Conflict => {
            tracing::info!(table = %address, error = %e, "maintenance: merge lost a race")
        }
        Err(e) => {
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
            failed(metrics, "gc");
            tracing::warn!(table = %address, error = %e, "maintenance: gc failed")
        }
    }
    settings
        .maintenance_interval_seconds
        .map(Duration::from_secs)
        .unwrap_or(policy.interval)
}

/// Until `stop` says so: find the tables every `policy.interval` (the first time after one
/// interval), and visit each when it is due, by its own `maintenance_interval` or the policy's.
pub async fn run(
    roots: Vec<String>,
    policy: MaintenanceConfig,
    metrics: Arc<Metrics>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::time::Instant;
    let mut due: std::collections::BTreeMap<String, Instant> = Default::default();
    let mut next_discovery = Instant::now() + policy.interval;
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
            let tables = discover(&roots).await;
            due.retain(|t, _| tables.binary_search(t).is_ok());
            for t in tables {
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
            let every = maintain(&t, &policy, &metrics).await;
            due.insert(t, Instant::now() + every);
        }
    }
}
