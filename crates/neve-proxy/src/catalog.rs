//! The tables' snapshots, kept in memory and brought up to date by reading only the log's tail.
//! A listing of the latest snapshot reads the tail once (concurrent listings share one read);
//! pinned versions are loaded once and kept while they are being paged through. A table nobody
//! has asked for in a while is forgotten ([`Catalog::forget_idle`]), so a proxy in front of
//! thousands of tables holds only those in use; the next request reads its log again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use neve_core::log::{LogStore, Snapshot};
use neve_core::TableLocation;

use crate::buckets::Pin;
use crate::error::{Error, Result};

/// Pinned snapshots kept per table (the versions being paged through, the latest few).
const KEPT_VERSIONS: usize = 8;
/// Times of `--t` buckets resolved to versions, kept per table.
const KEPT_TIMES: usize = 64;
/// A time this close to now may still gain a commit (one in flight, a writer's clock behind
/// ours): it is resolved again each time, not kept.
const SETTLED_MS: i64 = 60_000;

/// How far ahead of this clock a `--t` pin may be: the clock skew S3 allows a request.
const MAX_AHEAD_MS: i64 = 15 * 60_000;

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
    versions: Mutex<Kept>,
    /// `--t` times (ms) and the version each names.
    times: Mutex<HashMap<i64, u64>>,
    /// When each file removed since the table was read was written (ms): a removed file still
    /// served keeps the `Last-Modified` it was listed with.
    removed_written: Mutex<HashMap<String, i64>>,
}

/// Snapshots by version, the least recently used dropped first: a version being scanned stays
/// however many commits come meanwhile.
#[derive(Default)]
struct Kept {
    by_version: HashMap<u64, (Arc<Snapshot>, u64)>,
    tick: u64,
}

impl Kept {
    fn get(&mut self, version: u64) -> Option<Arc<Snapshot>> {
        self.tick += 1;
        let tick = self.tick;
        self.by_version.get_mut(&version).map(|(s, used)| {
            *used = tick;
            s.clone()
        })
    }

    fn insert(&mut self, snap: &Arc<Snapshot>) {
        self.tick += 1;
        self.by_version
            .insert(snap.version, (snap.clone(), self.tick));
        while self.by_version.len() > KEPT_VERSIONS {
            let Some(oldest) = self
                .by_version
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(v, _)| *v)
            else {
                break;
            };
            self.by_version.remove(&oldest);
        }
    }
}

impl TableState {
    fn keep(&self, snap: &Arc<Snapshot>) {
        self.versions.lock().expect("versions lock").insert(snap);
    }
}

/// Note when each file `commits` removed was written: from `before` (the snapshot they were
/// applied to) or an add among them. Files no longer among `after`'s tombstones are let go.
fn remember_removed(
    written: &Mutex<HashMap<String, i64>>,
    before: &Snapshot,
    after: &Snapshot,
    commits: &[neve_core::log::LoggedCommit],
) {
    use neve_core::log::Action;
    let mut added: HashMap<&str, i64> = HashMap::new();
    let mut written = written.lock().expect("removed lock");
    for c in commits {
        for a in &c.actions {
            match a {
                Action::Add(f) => {
                    added.insert(&f.path, f.modification_time);
                }
                Action::Remove(r) => {
                    let at = before.files.get(&r.path).map(|f| f.modification_time);
                    if let Some(at) = at.or_else(|| added.get(r.path.as_str()).copied()) {
                        written.insert(r.path.clone(), at);
                    }
                }
                _ => {}
            }
        }
    }
    written.retain(|p, _| after.tombstones.contains_key(p));
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
                    versions: Mutex::new(Kept::default()),
                    times: Mutex::new(HashMap::new()),
                    removed_written: Mutex::new(HashMap::new()),
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
            Pin::Latest => self.latest(table, self.refresh_interval).await,
            Pin::Version(v) => self.version(table, v).await,
            Pin::Time(ms) => {
                // A time beyond the clocks' allowed skew is a mistake (milliseconds typed as
                // seconds), and would be a moving latest without the latest's grace for files
                // a merge removes: refused.
                if ms > chrono::Utc::now().timestamp_millis() + MAX_AHEAD_MS {
                    return Err(Error::InvalidArgument {
                        reason: format!(
                            "the bucket's time (--t{}) is in the future: it is Unix seconds",
                            ms / 1000
                        ),
                    });
                }
                // A scan of a `--t` bucket asks once per file and range: the log is replayed
                // once per time, not per request.
                let state = self.state(table);
                let known = state.times.lock().expect("times lock").get(&ms).copied();
                if let Some(v) = known {
                    return self.version(table, v).await;
                }
                let snap = Arc::new(state.log.load_at_timestamp(ms).await?);
                state.keep(&snap);
                if ms < chrono::Utc::now().timestamp_millis() - SETTLED_MS {
                    let mut times = state.times.lock().expect("times lock");
                    if times.len() >= KEPT_TIMES {
                        times.clear();
                    }
                    times.insert(ms, snap.version);
                }
                Ok(snap)
            }
        }
    }

    /// The latest snapshot, read from the log's tail unless the one in memory was read at
    /// most `max_age` ago.
    pub async fn latest(&self, table: &str, max_age: Duration) -> Result<Arc<Snapshot>> {
        let asked = Instant::now();
        let state = self.state(table);
        let mut latest = state.latest.lock().await;
        if let Some((snap, started)) = &*latest {
            // A read that started after this call (or recently enough) saw every commit
            // that finished before it.
            if *started + max_age >= asked {
                return Ok(snap.clone());
            }
        }
        let started = Instant::now();
        let snap = match &*latest {
            Some((snap, _)) => {
                // Copied only when the tail has news: a copy of 10,000 files is most of the
                // cost of an unchanged refresh.
                match state.log.commits_after(snap.version).await {
                    Ok(commits) if commits.is_empty() => snap.clone(),
                    Ok(commits) => {
                        let mut next = Snapshot::clone(snap);
                        state.log.apply_all(&mut next, &commits)?;
                        remember_removed(&state.removed_written, snap, &next, &commits);
                        Arc::new(next)
                    }
                    // The commits after the one kept were cleaned (a table idle here for
                    // longer than its retention): read it afresh.
                    Err(neve_core::Error::VersionNotFound { .. }) => {
                        Arc::new(state.log.load_latest().await?)
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            None => Arc::new(state.log.load_latest().await?),
        };
        state.keep(&snap);
        *latest = Some((snap.clone(), started));
        Ok(snap)
    }

    /// When a file removed from `table` was written (ms), if the proxy saw it alive.
    pub fn removed_written(&self, table: &str, path: &str) -> Option<i64> {
        let tables = self.tables.lock().expect("tables lock");
        let state = tables.get(table)?;
        let written = state.removed_written.lock().expect("removed lock");
        written.get(path).copied()
    }

    /// The snapshot at `version`, from memory if it was seen recently.
    pub async fn version(&self, table: &str, version: u64) -> Result<Arc<Snapshot>> {
        let state = self.state(table);
        if let Some(s) = state.versions.lock().expect("versions lock").get(version) {
            return Ok(s);
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
            catalog.latest(t, Duration::ZERO).await.unwrap();
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
        assert_eq!(catalog.latest("a", Duration::MAX).await.unwrap().version, 1);
        assert!(catalog.knows("a"));
    }

    /// A warehouse in memory holding the empty table `a`.
    async fn warehouse_with_a() -> TableLocation {
        let warehouse = TableLocation::memory("wh");
        TableBuilder::new(warehouse.sub("a"))
            .build()
            .create(CreateOptions::default())
            .await
            .unwrap();
        warehouse
    }

    async fn commit(warehouse: &TableLocation, t: &str, n: usize) {
        let table = TableBuilder::new(warehouse.sub(t)).build();
        for i in 0..n {
            table
                .alter(&neve_core::schema::AlterOp::SetSetting {
                    key: "merge_min_files".into(),
                    value: (4 + i).to_string(),
                })
                .await
                .unwrap();
        }
    }

    /// The latest snapshot in memory is answered while younger than the age asked for, and
    /// read again past it.
    #[tokio::test]
    async fn the_snapshot_in_memory_is_used_up_to_an_age() {
        let warehouse = warehouse_with_a().await;
        let catalog = Catalog::new(warehouse.clone(), Duration::ZERO);
        assert_eq!(catalog.latest("a", Duration::MAX).await.unwrap().version, 0);
        commit(&warehouse, "a", 1).await;
        let hour = Duration::from_secs(3600);
        assert_eq!(catalog.latest("a", hour).await.unwrap().version, 0);
        assert_eq!(
            catalog.latest("a", Duration::ZERO).await.unwrap().version,
            1
        );
    }

    /// A version being read stays kept however many newer ones are read meanwhile, and a
    /// settled time resolves to its version once.
    #[tokio::test]
    async fn pinned_versions_and_times_are_kept_while_used() {
        let warehouse = warehouse_with_a().await;
        commit(&warehouse, "a", 2).await;
        let catalog = Catalog::new(warehouse.clone(), Duration::ZERO);
        let pinned = catalog.version("a", 1).await.unwrap();
        for _ in 0..(2 * KEPT_VERSIONS) {
            commit(&warehouse, "a", 1).await;
            catalog.latest("a", Duration::ZERO).await.unwrap();
            // Used again: kept, the same snapshot, not read again.
            let again = catalog.version("a", 1).await.unwrap();
            assert!(Arc::ptr_eq(&pinned, &again));
        }
        // A time long past: replayed once, then the version it named.
        let past = chrono::Utc::now().timestamp_millis() - 10 * SETTLED_MS;
        let first = catalog.snapshot("a", Pin::Time(past)).await;
        let state = catalog.state("a");
        let resolved = state.times.lock().unwrap().get(&past).copied();
        match first {
            Ok(s) => assert_eq!(resolved, Some(s.version)),
            // The table did not exist then: nothing to keep.
            Err(_) => assert_eq!(resolved, None),
        }
        // A time of now may still gain commits: not kept. (A minute ahead: commit times
        // strictly increase, so commits made within a millisecond run ahead of the clock.)
        let now = chrono::Utc::now().timestamp_millis() + 60_000;
        let latest = catalog.snapshot("a", Pin::Time(now)).await.unwrap();
        assert_eq!(latest.version, 2 + 2 * KEPT_VERSIONS as u64);
        assert!(!state.times.lock().unwrap().contains_key(&now));
        // Beyond the allowed skew (milliseconds written as seconds): refused.
        let far = chrono::Utc::now().timestamp_millis() * 1000;
        let e = catalog.snapshot("a", Pin::Time(far)).await.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
    }
}
