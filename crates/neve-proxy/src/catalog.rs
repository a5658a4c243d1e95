//! The tables' snapshots, kept in memory and brought up to date by reading only the log's tail.
//! A listing of the latest snapshot reads the tail once (concurrent listings share one read);
//! pinned versions are loaded once and kept while they are being paged through. A table nobody
//! has asked for in a while is forgotten ([`Catalog::forget_idle`]), so a proxy in front of
//! thousands of tables holds only those in use; the next request reads its log again.

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
    /// When a request last asked for this table.
    used: Mutex<Instant>,
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
        let now = Instant::now();
        let mut tables = self.tables.lock().expect("tables lock");
        let state = tables
            .entry(table.to_string())
            .or_insert_with(|| {
                Arc::new(TableState {
                    log: LogStore::new(self.warehouse.sub(table)),
                    used: Mutex::new(now),
                    latest: tokio::sync::Mutex::new(None),
                    versions: Mutex::new(BTreeMap::new()),
                })
            })
            .clone();
        *state.used.lock().expect("used lock") = now;
        state
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

    /// Forget the tables no request has asked for since `now - idle` and none is using now;
    /// how many are forgotten.
    pub fn forget_idle(&self, now: Instant, idle: Duration) -> usize {
        let mut tables = self.tables.lock().expect("tables lock");
        let before = tables.len();
        tables.retain(|_, state| {
            // Another holder is a request in flight (the map holds the only other reference).
            Arc::strong_count(state) > 1
                || now.saturating_duration_since(*state.used.lock().expect("used lock")) < idle
        });
        before - tables.len()
    }

    /// How many tables are in memory.
    pub fn len(&self) -> usize {
        self.tables.lock().expect("tables lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use neve_core::{CreateOptions, TableBuilder};

    /// An idle table is forgotten, one asked for lately or in use is kept, and a forgotten
    /// table is read from its log again, at its latest version, when asked for.
    #[tokio::test]
    async fn idle_tables_are_forgotten_and_read_again() {
        let warehouse = TableLocation::memory("wh");
        for t in ["a", "b", "c"] {
            TableBuilder::new(warehouse.sub(t))
                .build()
                .create(CreateOptions::default())
                .await
                .unwrap();
        }
        let catalog = Catalog::new(warehouse.clone(), Duration::ZERO);
        let idle = Duration::from_secs(600);
        for t in ["a", "b", "c"] {
            catalog.latest(t, true).await.unwrap();
        }
        let start = Instant::now();
        assert_eq!(catalog.forget_idle(start, idle), 0, "nothing idle yet");
        let later = start + idle + Duration::from_secs(1);
        // "b" is in use by a request (holding its state); "c" was asked for since.
        let b = catalog.state("b");
        *catalog.state("c").used.lock().unwrap() = later - Duration::from_secs(5);
        assert_eq!(catalog.forget_idle(later, idle), 1);
        assert!(!catalog.knows("a"));
        assert!(catalog.knows("b") && catalog.knows("c"));
        drop(b);
        assert_eq!(
            catalog.forget_idle(later, idle),
            1,
            "b once its request ended"
        );
        assert_eq!(catalog.len(), 1);

        // A commit while "a" was forgotten is seen when it is asked for again.
        let table = TableBuilder::new(warehouse.sub("a")).build();
        table
            .alter(&neve_core::schema::AlterOp::SetSetting {
                key: "merge_min_files".into(),
                value: "4".into(),
            })
            .await
            .unwrap();
        assert_eq!(catalog.latest("a", false).await.unwrap().version, 1);
        assert!(catalog.knows("a"));
    }
}
