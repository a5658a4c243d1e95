//! Dropping the cached blocks of files gc may delete: once a file has been removed from a
//! table for longer than `removed_files_readable`, the proxy no longer serves it in the
//! latest view and gc (whose grace that setting must not exceed) may delete it, so its
//! blocks only take room from live data.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::cache::BlockCache;
use crate::catalog::Catalog;
use crate::listing::DATA;
use crate::metrics::Metrics;
use crate::s3::etag_of;

/// Remembers what it dropped, so each removed file is dropped once.
pub struct Sweeper {
    catalog: Arc<Catalog>,
    cache: Arc<BlockCache>,
    metrics: Arc<Metrics>,
    readable_for: Duration,
    /// Per table, the removed files already dropped (forgotten when the log forgets them).
    dropped: HashMap<String, HashSet<String>>,
}

impl Sweeper {
    pub fn new(
        catalog: Arc<Catalog>,
        cache: Arc<BlockCache>,
        metrics: Arc<Metrics>,
        readable_for: Duration,
    ) -> Self {
        Self {
            catalog,
            cache,
            metrics,
            readable_for,
            dropped: HashMap::new(),
        }
    }

    /// How often [`Sweeper::sweep`] should run.
    pub fn period(&self) -> Duration {
        (self.readable_for / 4).clamp(Duration::from_secs(1), Duration::from_secs(60))
    }

    /// One pass over the tables in memory, at `now_ms`; how many files were dropped.
    pub fn sweep(&mut self, now_ms: i64) -> u64 {
        let cutoff = now_ms - self.readable_for.as_millis() as i64;
        let mut files = 0;
        for (table, snap) in self.catalog.latest_in_memory() {
            let location = self.catalog.location(&table);
            let done = self.dropped.entry(table).or_default();
            done.retain(|p| snap.tombstones.contains_key(p));
            for (path, removed) in &snap.tombstones {
                let Some(size) = removed.size else { continue };
                if removed.deletion_timestamp >= cutoff
                    || !path.starts_with(DATA)
                    || done.contains(path)
                {
                    continue;
                }
                let blocks =
                    self.cache
                        .drop_file(&location.child(path), &etag_of(path, size), size);
                if blocks > 0 {
                    files += 1;
                    self.metrics.cache_dropped_blocks.inc_by(blocks);
                }
                done.insert(path.clone());
            }
        }
        // A table the catalog forgot is read from its log again if asked for.
        self.dropped.retain(|t, _| self.catalog.knows(t));
        files
    }

    /// Sweep every [`Sweeper::period`] until dropped.
    pub async fn run(mut self) {
        let mut every = tokio::time::interval(self.period());
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            let files = self.sweep(chrono::Utc::now().timestamp_millis());
            if files > 0 {
                tracing::info!(files, "dropped cached blocks of removed files");
            }
        }
    }
}
