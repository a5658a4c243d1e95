//! The server's table handles: one per table, shared by requests, dropped when idle.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use neve_core::Table;

use crate::error::Result;
use crate::http::AppState;

/// Table handles by address, with when each was last asked for, and when idle ones were last
/// looked for.
#[derive(Default)]
pub(crate) struct OpenTables {
    pub(crate) by_address: HashMap<String, (Arc<Table>, Instant)>,
    swept: Option<Instant>,
}

impl OpenTables {
    /// Drop the handles nobody has asked for in `idle`, nobody holds (a flusher, a query, a
    /// request in flight) and with no Iceberg metadata left to write; at most once per quarter
    /// of `idle`.
    pub(crate) fn sweep(&mut self, now: Instant, idle: Duration) {
        if self
            .swept
            .is_some_and(|s| now.saturating_duration_since(s) < idle / 4)
        {
            return;
        }
        self.swept = Some(now);
        self.by_address.retain(|_, (table, used)| {
            // A handle whose Iceberg metadata is still being written stays, so that shutdown
            // waits for it.
            Arc::strong_count(table) > 1
                || table.iceberg_busy()
                || now.saturating_duration_since(*used) < idle
        });
    }
}

impl AppState {
    /// Wait until every open table's Iceberg metadata describes its commits (with `[iceberg]
    /// sync = "after_answer"`; at once otherwise): before the server exits.
    pub(crate) async fn iceberg_settled(&self) {
        let open: Vec<Arc<Table>> = {
            let tables = self.tables.lock().await;
            tables.by_address.values().map(|(t, _)| t.clone()).collect()
        };
        for t in open {
            t.iceberg_settled().await;
        }
    }

    /// Drop the handle of a table that turned out not to exist.
    pub(crate) async fn forget_table(&self, address: &str) {
        let mut tables = self.tables.lock().await;
        tables.by_address.remove(address);
        self.metrics.tables_open.set(tables.by_address.len() as i64);
    }

    /// One handle per table, shared by requests (it caches the table's state). Handles of
    /// tables idle for `keep_idle_tables` are dropped as requests come.
    pub(crate) async fn table(&self, address: &str) -> Result<Arc<Table>> {
        let now = Instant::now();
        let mut tables = self.tables.lock().await;
        tables.sweep(now, self.config.keep_idle_tables);
        let t = match tables.by_address.get_mut(address) {
            Some((t, used)) => {
                *used = now;
                t.clone()
            }
            None => {
                let background =
                    self.config.iceberg.sync == crate::config::IcebergSync::AfterAnswer;
                let t = Arc::new(
                    neve_core::TableBuilder::new(neve_core::storage::TableLocation::parse(
                        address,
                    )?)
                    .with_iceberg_in_background(background)
                    .build(),
                );
                tables
                    .by_address
                    .insert(address.to_string(), (t.clone(), now));
                t
            }
        };
        self.metrics.tables_open.set(tables.by_address.len() as i64);
        Ok(t)
    }
}
