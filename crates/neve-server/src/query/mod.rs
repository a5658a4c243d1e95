//! SQL over the caller's tables: one engine per query, with only the tables the query names
//! registered (all of the tenant's for `information_schema` and `SHOW`), each at one snapshot
//! for the whole query. Latest snapshots come from the server's table handles, which read only
//! the log's tail when the table has moved; `as_of` reads the version asked for.

pub mod http;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use neve_core::query::{QueryLimits, ReadCounter};
use neve_core::{AsOf, QueryEngine, TableLocation};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::auth::Caller;
use crate::config::QueryConfig;
use crate::error::{Error, Result};
use crate::http::AppState;

/// The server's query side: limits, and what every query shares.
pub struct Queries {
    pub config: QueryConfig,
    permits: Arc<Semaphore>,
    /// Bytes and requests read by every query so far (the `query_read_bytes` metric).
    pub reads: Arc<ReadCounter>,
    exported: AtomicU64,
}

impl Queries {
    pub fn new(config: QueryConfig) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(config.max_concurrent)),
            config,
            reads: Arc::new(ReadCounter::default()),
            exported: AtomicU64::new(0),
        }
    }

    /// A slot for one query, or 429 when all are taken (never wait: the client retries).
    pub fn admit(&self) -> Result<OwnedSemaphorePermit> {
        self.permits
            .clone()
            .try_acquire_owned()
            .map_err(|_| Error::TooManyQueries {
                limit: self.config.max_concurrent,
            })
    }

    /// Bytes read since the last call (feeds a Prometheus counter when metrics are read).
    pub fn read_bytes_since_last(&self) -> u64 {
        let now = self.reads.bytes();
        now - self.exported.swap(now, Ordering::Relaxed).min(now)
    }

    /// A fresh engine under this server's limits.
    pub fn engine(&self) -> QueryEngine {
        QueryEngine::with_limits(QueryLimits {
            memory_bytes: Some(self.config.memory_per_query),
            read_only: true,
            reads: Some(self.reads.clone()),
        })
    }
}

/// A table as SQL names it: `name` at the tenant's root, or `namespace.name` one folder down
/// (line-protocol databases).
fn relative_path(schema: Option<&str>, table: &str) -> Option<String> {
    if !crate::valid_name(table) {
        return None;
    }
    match schema {
        None | Some("public") => Some(table.to_string()),
        Some(s) if crate::valid_name(s) => Some(format!("{s}/{table}")),
        Some(_) => None,
    }
}

impl AppState {
    /// An engine with the tables `sql` needs registered for `caller`, at `as_of` or latest.
    /// Names that are not tables of the caller are left unregistered: planning then says
    /// which one is unknown (404).
    pub async fn query_engine(
        &self,
        caller: &Caller,
        sql: &str,
        as_of: Option<AsOf>,
    ) -> Result<QueryEngine> {
        let mut engine = self.queries.engine();
        let refs = engine.references(sql)?;
        let root = self.tenant_root(caller);
        let mut wanted: Vec<(Option<String>, String)> = refs
            .tables
            .into_iter()
            .map(|(s, t)| (s.filter(|s| s != "public"), t))
            .collect();
        if refs.information_schema {
            for address in crate::maintain::discover(std::slice::from_ref(&root)).await {
                let rel = address[root.len()..].trim_start_matches('/');
                let t = match rel.split_once('/') {
                    Some((ns, t)) => (Some(ns.to_string()), t.to_string()),
                    None => (None, rel.to_string()),
                };
                if !wanted.contains(&t) {
                    wanted.push(t);
                }
            }
        }
        for (schema, table) in wanted {
            let Some(rel) = relative_path(schema.as_deref(), &table) else {
                continue;
            };
            let address = format!("{root}/{rel}");
            let handle = self.table(&address).await?;
            let snapshot = match as_of {
                None => handle.snapshot().await,
                Some(a) => handle.snapshot_as_of(a).await,
            };
            let snapshot = match snapshot {
                Ok(s) => s,
                Err(neve_core::Error::TableNotFound { .. }) => {
                    self.forget_table(&address).await;
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            let location: TableLocation = handle.location().clone();
            engine.register_snapshot_in(schema.as_deref(), &table, location, snapshot)?;
        }
        Ok(engine)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_names_map_to_tenant_folders() {
        assert_eq!(relative_path(None, "events").as_deref(), Some("events"));
        assert_eq!(
            relative_path(Some("public"), "events").as_deref(),
            Some("events")
        );
        assert_eq!(relative_path(Some("db"), "cpu").as_deref(), Some("db/cpu"));
        // Nothing outside the tenant's folder can be named.
        assert_eq!(relative_path(Some(".."), "cpu"), None);
        assert_eq!(relative_path(None, "../other/t"), None);
        assert_eq!(relative_path(Some("a/b"), "t"), None);
    }
}
