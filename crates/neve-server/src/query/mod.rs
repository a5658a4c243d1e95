//! SQL over the caller's tables: one engine per query, with only the tables the query names
//! registered (all of the tenant's for `information_schema` and `SHOW`), each at one snapshot
//! for the whole query. Latest snapshots come from the server's table handles, which read only
//! the log's tail when the table has moved; `as_of` reads the version asked for.

pub mod flight;
pub mod http;
mod ipc;
mod running;

pub use running::Running;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::RecordBatch;
use futures::StreamExt;
use neve_core::query::query_error;

use neve_core::query::{ChunkCache, FooterCache, QueryLimits, ReadCounter};
use neve_core::{AsOf, QueryEngine, TableLocation};
use serde::{Deserialize, Serialize};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::auth::Caller;
use crate::config::QueryConfig;
use crate::error::{Error, Result};
use crate::http::AppState;

/// Rows per result batch at most: 128 Ki rows of 8 bytes is 1 MiB per message.
const RESULT_BATCH_ROWS: usize = 131_072;
/// Bytes per batch: wide results get fewer rows per batch (8,192 at least), so each scan
/// partition holds about this much, not 128 Ki rows of every column.
const RESULT_BATCH_BYTES: usize = 1 << 20;

/// The server's query side: limits, and what every query shares.
pub struct Queries {
    pub config: QueryConfig,
    permits: Arc<Semaphore>,
    /// Bytes and requests read by every query so far (the `query_read_bytes` metric).
    pub reads: Arc<ReadCounter>,
    exported: AtomicU64,
    footers: Option<FooterCache>,
    chunks: Option<ChunkCache>,
}

impl Queries {
    pub fn new(config: QueryConfig) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(config.max_concurrent)),
            reads: Arc::new(ReadCounter::default()),
            exported: AtomicU64::new(0),
            footers: (config.footer_cache > 0)
                .then(|| FooterCache::new(config.footer_cache as usize)),
            chunks: (config.chunk_cache > 0).then(|| ChunkCache::new(config.chunk_cache as usize)),
            config,
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
            batch_rows: Some(RESULT_BATCH_ROWS),
            batch_bytes: Some(RESULT_BATCH_BYTES),
            footers: self.footers.clone(),
            chunks: self.chunks.clone(),
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

/// Which version of each table a query reads.
#[derive(Debug, Clone, Default)]
pub enum At {
    /// The latest (each table's, when the query starts).
    #[default]
    Latest,
    /// Every table as of a version or a time (`?as_of=`).
    AsOf(AsOf),
    /// The versions a plan was made at (a Flight ticket), so the data matches the schema
    /// the client was given: latest for a table not listed.
    Pinned(Vec<Pinned>),
}

/// A table's version a query was planned at: `schema.table=version`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pinned {
    #[serde(rename = "s", skip_serializing_if = "Option::is_none", default)]
    pub schema: Option<String>,
    #[serde(rename = "t")]
    pub table: String,
    #[serde(rename = "v")]
    pub version: u64,
}

/// An engine with a query's tables registered ([`AppState::query_engine`]).
pub struct Registered {
    pub engine: QueryEngine,
    /// The version of each table registered.
    pub versions: Vec<Pinned>,
    /// The statement is an `EXPLAIN`: its plan names files, and is redacted.
    pub explain: bool,
}

/// A query started: its first batch computed (so errors until then have their own status).
pub struct Started {
    pub running: Running,
    /// The version of each table read, as `name=version`.
    pub versions: Vec<Pinned>,
}

impl AppState {
    /// An engine with the tables `sql` needs registered for `caller`, at `at`. Names that
    /// are not tables of the caller are left unregistered: planning then says which one is
    /// unknown (404).
    pub async fn query_engine(&self, caller: &Caller, sql: &str, at: &At) -> Result<Registered> {
        let mut engine = self.queries.engine();
        let refs = engine.references(sql)?;
        let explain = refs.explain;
        let root = self.tenant_root(caller);
        let mut wanted: Vec<(Option<String>, String)> = refs
            .tables
            .into_iter()
            .map(|(s, t)| (s.filter(|s| s != "public"), t))
            .collect();
        // Tables the query names; the others are listed for the catalog only.
        let named = wanted.len();
        if refs.information_schema {
            for address in crate::maintain::discover(std::slice::from_ref(&root))
                .await
                .tables
            {
                let rel = address[root.len()..].trim_start_matches('/');
                let t = match rel.split_once('/') {
                    // A namespace SQL cannot name (written before such names were refused)
                    // would register a second `public.t`, or a table in the catalog's schema.
                    Some((ns, _)) if crate::check_namespace(ns).is_err() => continue,
                    Some((ns, t)) => (Some(ns.to_string()), t.to_string()),
                    None => (None, rel.to_string()),
                };
                if !wanted.contains(&t) {
                    wanted.push(t);
                }
            }
        }
        let mut versions = Vec::new();
        for (i, (schema, table)) in wanted.into_iter().enumerate() {
            let Some(rel) = relative_path(schema.as_deref(), &table) else {
                continue;
            };
            let address = format!("{root}/{rel}");
            let handle = self.table(&address).await?;
            let pin = match at {
                At::Pinned(pins) => pins
                    .iter()
                    .find(|p| p.schema == schema && p.table == table)
                    .map(|p| p.version),
                _ => None,
            };
            let snapshot = match (at, pin) {
                (At::AsOf(a), _) => handle.snapshot_as_of(*a).await,
                // The latest is read from the log's tail; an older pin from the log.
                (_, Some(v)) => match handle.snapshot().await {
                    Ok(s) if s.version == v => Ok(s),
                    Ok(_) => handle.snapshot_as_of(AsOf::Version(v)).await,
                    Err(e) => Err(e),
                },
                _ => handle.snapshot().await,
            };
            let snapshot = match snapshot {
                Ok(s) => s,
                Err(neve_core::Error::TableNotFound { .. }) => {
                    self.forget_table(&address).await;
                    continue;
                }
                // A table the catalog lists but the query does not name, which did not exist
                // yet at `as_of`: not in that time's catalog.
                Err(
                    neve_core::Error::TimestampNotFound { .. }
                    | neve_core::Error::VersionNotFound { .. },
                ) if i >= named => continue,
                Err(e) => return Err(e.into()),
            };
            versions.push(Pinned {
                schema: schema.clone(),
                table: table.clone(),
                version: snapshot.version,
            });
            let location: TableLocation = handle.location().clone();
            engine.register_snapshot_in(schema.as_deref(), &table, location, snapshot)?;
        }
        Ok(Registered {
            engine,
            versions,
            explain,
        })
    }

    /// Admit, plan and start `sql` for `caller` (with `params` for `$1`... if given), and
    /// compute its first batch, all within `timeout` (at most the server's).
    pub async fn start_query(
        &self,
        caller: &Caller,
        sql: &str,
        at: At,
        params: Option<RecordBatch>,
        timeout: Option<Duration>,
    ) -> Result<Started> {
        let timeout = timeout
            .unwrap_or(self.queries.config.timeout)
            .min(self.queries.config.timeout);
        let permit = self.queries.admit().inspect_err(|_| {
            self.metrics.queries_refused.inc();
        })?;
        let deadline = tokio::time::Instant::now() + timeout;
        let out = tokio::time::timeout_at(deadline, async {
            let Registered {
                engine,
                versions,
                explain,
            } = self.query_engine(caller, sql, &at).await?;
            let mut batches = match &params {
                Some(p) => engine.stream_with_params(sql, p).await?,
                None => engine.stream(sql).await?,
            };
            if explain {
                batches = self.redact.plan(batches);
            }
            let first = match batches.next().await {
                Some(b) => Some(b.map_err(query_error)?),
                None => None,
            };
            Ok::<_, Error>((batches, first, versions))
        })
        .await;
        let (batches, first, versions) = match out {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => {
                self.metrics.query_outcome(&e);
                return Err(e);
            }
            Err(_) => {
                let e = Error::QueryTimeout { after: timeout };
                self.metrics.query_outcome(&e);
                return Err(e);
            }
        };
        tracing::debug!(tables = ?versions, "query started");
        Ok(Started {
            running: Running::new(
                batches,
                first,
                deadline,
                timeout,
                self.metrics.clone(),
                permit,
            ),
            versions,
        })
    }
}

impl std::fmt::Display for Pinned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.schema {
            Some(s) => write!(f, "{s}.{}={}", self.table, self.version),
            None => write!(f, "{}={}", self.table, self.version),
        }
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
