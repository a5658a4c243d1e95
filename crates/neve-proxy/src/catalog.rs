//! The tables' snapshots, kept in memory and brought up to date by reading only the log's tail.
//! A listing of the latest snapshot reads the tail once (concurrent listings share one read);
//! pinned versions are loaded once and kept while they are being paged through.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use neve_core::log::{LogStore, Snapshot};
use neve_core::TableLocation;

use crate::buckets::Pin;
use crate::error::Result;

/// Pinned snapshots kept per table (the versions being paged through, the latest few).
const KEPT_VERSIONS: usize = 8;

/// Every table of a warehouse that has been asked for.
pub struct Catalog {
    warehouse: TableLocation,
    refresh_interval: Duration,
    tables: Mutex<HashMap<String, Arc<TableState>>>,
}

struct TableState {
    log: LogStore,
    /// The latest snapshot and when the read that made it started.
    latest: tokio::sync::Mutex<Option<(Arc<Snapshot>, Instant)>>,
    versions: Mutex<BTreeMap<u64, Arc<Snapshot>>>,
}

impl TableState {
    fn keep(&self, snap: &Arc<Snapshot>) {
        let mut v = self.versions.lock().expect("versions lock");
        v.insert(snap.version, snap.clone());
        while v.len() > KEPT_VERSIONS {
            v.pop_first();
        }
    }
}

impl Catalog {
    pub fn new(warehouse: TableLocation, refresh_interval: Duration) -> Self {
        Self {
            warehouse,
            refresh_interval,
            tables: Mutex::new(HashMap::new()),
        }
    }

    pub fn warehouse(&self) -> &TableLocation {
        &self.warehouse
    }

    /// A table's location; `table` is relative to the warehouse.
    pub fn location(&self, table: &str) -> TableLocation {
        self.warehouse.sub(table)
    }

    fn state(&self, table: &str) -> Arc<TableState> {
        let mut tables = self.tables.lock().expect("tables lock");
        tables
            .entry(table.to_string())
            .or_insert_with(|| {
                Arc::new(TableState {
                    log: LogStore::new(self.warehouse.sub(table)),
                    latest: tokio::sync::Mutex::new(None),
                    versions: Mutex::new(BTreeMap::new()),
                })
            })
            .clone()
    }

    /// The snapshot a pin names. `Pin::Latest` is at least as new as every commit that
    /// finished before this call (or `refresh_interval` old at most).
    pub async fn snapshot(&self, table: &str, pin: Pin) -> Result<Arc<Snapshot>> {
        match pin {
            Pin::Latest => self.latest(table, true).await,
            Pin::Version(v) => self.version(table, v).await,
            Pin::Time(ms) => {
                let state = self.state(table);
                let snap = Arc::new(state.log.load_at_timestamp(ms).await?);
                state.keep(&snap);
                Ok(snap)
            }
        }
    }

    /// The latest snapshot; with `fresh` false, whatever is in memory if anything is.
    pub async fn latest(&self, table: &str, fresh: bool) -> Result<Arc<Snapshot>> {
        let asked = Instant::now();
        let state = self.state(table);
        let mut latest = state.latest.lock().await;
        if let Some((snap, started)) = &*latest {
            // A read that started after this call (or recently enough) saw every commit
            // that finished before it.
            if !fresh || *started + self.refresh_interval >= asked {
                return Ok(snap.clone());
            }
        }
        let started = Instant::now();
        let snap = match &*latest {
            Some((snap, _)) => {
                // Copied only when the tail has news: a copy of 10,000 files is most of the
                // cost of an unchanged refresh.
                let commits = state.log.commits_after(snap.version).await?;
                if commits.is_empty() {
                    snap.clone()
                } else {
                    let mut next = Snapshot::clone(snap);
                    state.log.apply_all(&mut next, &commits)?;
                    Arc::new(next)
                }
            }
            None => Arc::new(state.log.load_latest().await?),
        };
        state.keep(&snap);
        *latest = Some((snap.clone(), started));
        Ok(snap)
    }

    /// The snapshot at `version`, from memory if it was seen recently.
    pub async fn version(&self, table: &str, version: u64) -> Result<Arc<Snapshot>> {
        let state = self.state(table);
        if let Some(s) = state.versions.lock().expect("versions lock").get(&version) {
            return Ok(s.clone());
        }
        let snap = Arc::new(state.log.load_version(version).await?);
        state.keep(&snap);
        Ok(snap)
    }

    /// Each table's latest snapshot in memory (tables being refreshed right now are skipped;
    /// the next call sees them).
    pub fn latest_in_memory(&self) -> Vec<(String, Arc<Snapshot>)> {
        let tables: Vec<(String, Arc<TableState>)> = self
            .tables
            .lock()
            .expect("tables lock")
            .iter()
            .map(|(t, s)| (t.clone(), s.clone()))
            .collect();
        tables
            .into_iter()
            .filter_map(|(t, s)| {
                let latest = s.latest.try_lock().ok()?;
                latest.as_ref().map(|(snap, _)| (t, snap.clone()))
            })
            .collect()
    }

    /// Whether `table` is kept (looked up and not forgotten since).
    pub fn knows(&self, table: &str) -> bool {
        self.tables.lock().expect("tables lock").contains_key(table)
    }

    /// Forget a table (it was not found).
    pub fn forget(&self, table: &str) {
        self.tables.lock().expect("tables lock").remove(table);
    }
}
