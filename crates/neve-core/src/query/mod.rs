//! SQL over neve tables with an embedded DataFusion engine.
//!
//! Each registered table is one snapshot, fixed when it is registered: a query sees that
//! version from start to end, whatever commits land meanwhile. Files are pruned with the log's
//! statistics before any is opened; Parquet row groups and pages are pruned by DataFusion;
//! `count(*)` that the log can answer exactly is answered from it.

mod batch_rows;
mod catalog;
mod chunks;
mod constant;
mod counting;
pub(crate) mod dialect;
mod errors;
mod ids;
mod indexed;
pub(crate) mod merged;
mod metadata;
pub mod output;
mod overflow;
mod provider;
mod runs;
mod scan;
mod series;
pub mod splits;
pub(crate) mod stats;

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::{ScalarValue, TableReference};
use datafusion::execution::object_store::ObjectStoreUrl;
/// A running query's batches (what [`QueryEngine::stream`] returns).
pub use datafusion::execution::SendableRecordBatchStream;
/// Makes a [`SendableRecordBatchStream`] of any stream of batches.
pub use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::prelude::{DataFrame, SessionConfig, SessionContext};
use futures::TryStreamExt;

pub use chunks::ChunkCache;
pub(crate) use constant::coerce_predicate;
pub use counting::{CountingStore, ReadCounter};
use errors::at_end;
pub use errors::query_error;
pub(crate) use ids::FieldIdAdapterFactory;
pub use output::{ResultFormat, ResultWriter};
pub use provider::SnapshotTable;
pub(crate) use scan::ordered_rows;
pub use splits::{plan_splits, scan_split, Split, Splits};

use crate::error::{Error, Result};
use crate::storage::TableLocation;
use crate::table::{AsOf, Table};

/// A SQL session over a set of named neve tables.
pub struct QueryEngine {
    ctx: SessionContext,
    counter: Arc<ReadCounter>,
    chunks: Option<ChunkCache>,
    tables: Vec<(String, u64)>,
    /// Tables of a registered warehouse that could not be opened, and why: a query naming
    /// one says so; the others go on being queried.
    unopened: Vec<(String, String)>,
    read_only: bool,
    raw: bool,
    /// `QueryLimits::batch_rows` and `batch_bytes`, when both are set.
    batch_sizing: Option<(usize, usize)>,
}

impl Default for QueryEngine {
    fn default() -> Self {
        Self::new()
    }
}

/// What one engine (one query of a server) may use and do.
#[derive(Debug, Clone, Default)]
pub struct QueryLimits {
    /// Memory the query's sorts, joins and aggregates may hold; beyond it they spill to a
    /// temporary folder where DataFusion can, and the query fails where it cannot.
    /// `None`: no limit.
    pub memory_bytes: Option<u64>,
    /// Queries only: DDL (`CREATE EXTERNAL TABLE` ...), DML and statements (`SET` ...) are
    /// refused, so a caller reaches nothing but the tables registered for it.
    pub read_only: bool,
    /// Reads also count here (a server's total).
    pub reads: Option<Arc<ReadCounter>>,
    /// Rows per batch (DataFusion's 8,192 when `None`): a server streaming results sends
    /// fewer, larger messages with more.
    pub batch_rows: Option<usize>,
    /// With `batch_rows`: about this many bytes per batch. Each query's batches get as many
    /// rows as fit, from DataFusion's 8,192 up to `batch_rows`, judged on the widest of its
    /// result and its scans: every scan partition decodes a batch of all the columns it reads,
    /// so `SELECT *` of a wide table with narrow-column batch sizes held hundreds of MB.
    pub batch_bytes: Option<usize>,
    /// Footers and page indexes kept from one query to the next (a server's, a Python
    /// session's); `None`: each engine reads and parses every footer it needs.
    pub footers: Option<FooterCache>,
    /// Ranges of data files kept from one query to the next, for tables on a remote store
    /// (a local folder has the page cache); `None`: every query reads its data.
    pub chunks: Option<ChunkCache>,
}

/// Parquet footers and page indexes, parsed, shared by the engines of one process.
///
/// A query of one column of many small files reads each footer as often as its data: on the
/// taxi table the footers are most of the bytes of `GROUP BY payment_type`. neve never writes
/// a data file twice under one name (each name carries a random id), so an entry cannot go
/// stale; DataFusion also checks the file's size. Least recently used entries go first.
#[derive(Clone)]
pub struct FooterCache {
    cache: Arc<datafusion::execution::cache::cache_manager::FileMetadataCache>,
}

impl FooterCache {
    /// A cache of at most `bytes` of parsed metadata.
    pub fn new(bytes: usize) -> Self {
        let cache = datafusion::execution::cache::default_cache::DefaultCache::new(bytes)
            .with_name("neve footers");
        Self {
            cache: Arc::new(cache),
        }
    }

    /// Files whose metadata is held.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }

    /// The limit, in bytes.
    pub fn limit(&self) -> usize {
        self.cache.cache_limit()
    }

    /// Files whose held metadata includes the page index.
    #[cfg(test)]
    pub(crate) fn with_page_index(&self) -> usize {
        self.cache
            .list_entries()
            .values()
            .filter(|e| {
                e.value
                    .file_metadata
                    .extra_info()
                    .get("page_index")
                    .map(String::as_str)
                    == Some("true")
            })
            .count()
    }
}

impl std::fmt::Debug for FooterCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FooterCache")
            .field("files", &self.cache.len())
            .field("limit", &self.limit())
            .finish()
    }
}

/// The tables a statement names, before any is registered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Referenced {
    /// `(schema, table)`; the schema when the name was qualified (`ns.cpu`).
    pub tables: Vec<(Option<String>, String)>,
    /// It reads `information_schema` (`SHOW TABLES`, `SHOW COLUMNS`...): every table is needed.
    pub information_schema: bool,
    /// It is an `EXPLAIN`: its answer is a plan, which names the files read.
    pub explain: bool,
}

impl QueryEngine {
    pub fn new() -> Self {
        Self::with_limits(QueryLimits::default())
    }

    pub fn with_limits(limits: QueryLimits) -> Self {
        let config = SessionConfig::new()
            .with_information_schema(true)
            .set_bool("datafusion.sql_parser.collect_spans", true);
        // Scan partitions are also the I/O concurrency: with one per core, a scan of many
        // files on S3 waits on one request per core at a time. More partitions keep requests
        // in flight while the cores decode.
        let mut config = config.with_target_partitions(scan_partitions(cores()));
        if let Some(rows) = limits.batch_rows {
            config = config.with_batch_size(rows);
        }
        config.options_mut().execution.parquet.enable_page_index = true;
        // DataFusion's default footer prefetch is 512 KiB: for files of a few MB that is most
        // of the file for a one-column query. neve's footers and page indexes are a few KB.
        config.options_mut().execution.parquet.metadata_size_hint = Some(provider::FOOTER_HINT);
        let mut runtime = datafusion::execution::runtime_env::RuntimeEnvBuilder::new();
        if let Some(bytes) = limits.memory_bytes {
            runtime = runtime.with_memory_pool(Arc::new(
                datafusion::execution::memory_pool::FairSpillPool::new(bytes as usize),
            ));
        }
        if let Some(footers) = &limits.footers {
            runtime = runtime.with_cache_manager(
                datafusion::execution::cache::cache_manager::CacheManagerConfig::default()
                    .with_file_metadata_cache(Some(footers.cache.clone()))
                    .with_metadata_cache_limit(footers.limit()),
            );
        }
        let runtime = runtime
            .build_arc()
            .expect("a runtime with the default disk manager");
        let state = datafusion::execution::SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(runtime)
            .with_default_features()
            .with_physical_optimizer_rule(Arc::new(runs::CountRuns))
            .build();
        let ctx = SessionContext::new_with_state(state);
        ctx.add_optimizer_rule(Arc::new(metadata::CountFromLog));
        ctx.add_analyzer_rule(Arc::new(overflow::CheckedIntegerArithmetic));
        series::register(&ctx);
        let counter = match &limits.reads {
            Some(parent) => ReadCounter::child_of(parent.clone()),
            None => ReadCounter::default(),
        };
        Self {
            ctx,
            counter: Arc::new(counter),
            chunks: limits.chunks.clone(),
            tables: Vec::new(),
            unopened: Vec::new(),
            read_only: limits.read_only,
            raw: false,
            batch_sizing: limits.batch_rows.zip(limits.batch_bytes),
        }
    }

    /// The tables `sql` names (its syntax checked), so a caller can register just those.
    pub fn references(&self, sql: &str) -> Result<Referenced> {
        let state = self.ctx.state();
        let statement = self.parse(sql)?;
        let mut out = Referenced {
            explain: match &statement {
                datafusion::sql::parser::Statement::Explain(_) => true,
                datafusion::sql::parser::Statement::Statement(s) => {
                    matches!(
                        **s,
                        datafusion::sql::sqlparser::ast::Statement::Explain { .. }
                    )
                }
                _ => false,
            },
            ..Default::default()
        };
        for r in state
            .resolve_table_references(&statement)
            .map_err(query_error)?
        {
            if r.schema() == Some("information_schema") {
                out.information_schema = true;
                continue;
            }
            let t = (r.schema().map(str::to_string), r.table().to_string());
            if !out.tables.contains(&t) {
                out.tables.push(t);
            }
        }
        Ok(out)
    }

    fn parse(&self, sql: &str) -> Result<datafusion::sql::parser::Statement> {
        dialect::check_depth(sql)?;
        let state = self.ctx.state();
        let dialect = state.config_options().sql_parser.dialect;
        let mut statement = state
            .sql_to_statement(sql, &dialect)
            .map_err(|e| at_end(query_error(e), sql))?;
        if let datafusion::sql::parser::Statement::Statement(s) = &mut statement {
            dialect::rewrite(s);
        }
        Ok(statement)
    }

    /// Tables registered from now on read their stored rows, without applying their merge
    /// semantics (`neve sql --raw`).
    pub fn set_raw(&mut self, raw: bool) {
        self.raw = raw;
    }

    /// The DataFusion context, for callers that want its full API.
    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// Bytes (and GET requests) read from storage by queries so far.
    pub fn reads(&self) -> &ReadCounter {
        &self.counter
    }

    /// Tables registered so far, with the version each one is fixed at.
    pub fn tables(&self) -> &[(String, u64)] {
        &self.tables
    }

    /// Register `name` as the table at `address`, at its latest version or `as_of`.
    pub async fn register(
        &mut self,
        name: &str,
        address: &str,
        as_of: Option<AsOf>,
    ) -> Result<u64> {
        self.register_table(name, &Table::at(address)?, as_of).await
    }

    /// Register `name` as `table`, at its latest version or `as_of`.
    pub async fn register_table(
        &mut self,
        name: &str,
        table: &Table,
        as_of: Option<AsOf>,
    ) -> Result<u64> {
        let snapshot = match as_of {
            // The latest version's head is enough for counts by partition; its file list is
            // read when a query needs it.
            None => match table.log().load_head().await? {
                Some(head) => {
                    let version = head.version;
                    let store_url = self.add_store(table.location())?;
                    let provider =
                        SnapshotTable::from_head(table.location().clone(), head, store_url);
                    self.add_table(name, provider, version)?;
                    return Ok(version);
                }
                // Not `table.snapshot()`: this handle is dropped, its cache would be a copy.
                None => table.log().load_latest().await?,
            },
            Some(a) => table.snapshot_as_of(a).await?,
        };
        let version = snapshot.version;
        self.register_snapshot(name, table.location().clone(), snapshot)?;
        Ok(version)
    }

    /// Register `location`'s store under a URL of its own, for the scans of one table.
    fn add_store(&self, location: &TableLocation) -> Result<ObjectStoreUrl> {
        let url = format!("neve://t{}", self.tables.len());
        let store_url = ObjectStoreUrl::parse(&url).map_err(|e| Error::InvalidQuery {
            message: e.to_string(),
        })?;
        let parsed = url::Url::parse(&url).expect("valid url");
        // Reads the cache answers are not counted: the counts are what the store served.
        let mut store = CountingStore::new(location.store.clone(), self.counter.clone());
        if let Some(chunks) = &self.chunks {
            if !matches!(location.kind, crate::storage::StoreKind::Local { .. }) {
                store = store.with_chunks(chunks.clone());
            }
        }
        self.ctx.register_object_store(&parsed, Arc::new(store));
        Ok(store_url)
    }

    fn add_table(&mut self, name: &str, provider: SnapshotTable, version: u64) -> Result<()> {
        self.add_table_as(TableReference::from(name), provider, version)
    }

    fn add_table_as(
        &mut self,
        name: TableReference,
        provider: SnapshotTable,
        version: u64,
    ) -> Result<()> {
        let bad = |message: String| Error::InvalidInput {
            input: "the tables of the query".into(),
            line: None,
            column: None,
            message,
        };
        if name.table().is_empty() || name.schema() == Some("information_schema") {
            return Err(bad(format!(
                "'{name}' cannot name a table (information_schema is the engine's own)"
            )));
        }
        // SQL names ignore case unless quoted: two that differ only in case are one name.
        let text = name.to_string();
        if let Some((other, _)) = self
            .tables
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(&text))
        {
            return Err(bad(format!(
                "'{name}' and '{other}' name two tables, and SQL names ignore case: give them names that differ otherwise"
            )));
        }
        if let Some(schema) = name.schema() {
            let catalog = self
                .ctx
                .catalog(&self.ctx.state().config_options().catalog.default_catalog)
                .expect("the default catalog");
            if catalog.schema(schema).is_none() {
                catalog
                    .register_schema(
                        schema,
                        Arc::new(datafusion::catalog::MemorySchemaProvider::new()),
                    )
                    .map_err(query_error)?;
            }
        }
        self.tables.push((name.to_string(), version));
        self.ctx
            .register_table(name, Arc::new(provider.raw(self.raw)))
            .map_err(query_error)?;
        Ok(())
    }

    /// The columns of a registered table, with the table's own types (not the view types
    /// scans read strings as).
    pub async fn table_schema(&self, schema: Option<&str>, table: &str) -> Result<SchemaRef> {
        let name = match schema {
            Some(s) => TableReference::partial(s, table),
            None => TableReference::bare(table),
        };
        let provider = self.ctx.table_provider(name).await.map_err(query_error)?;
        let schema = catalog::plain_schema(&provider.schema());
        // Without the table's metadata, as before: callers list columns.
        Ok(Arc::new(Schema::new(schema.fields().clone())))
    }

    /// Register a loaded snapshot as `table`, in `schema` when given (created if new), so
    /// `schema.table` names it; names are taken as they are, not parsed.
    pub fn register_snapshot_in(
        &mut self,
        schema: Option<&str>,
        table: &str,
        location: TableLocation,
        snapshot: crate::log::Snapshot,
    ) -> Result<()> {
        let store_url = self.add_store(&location)?;
        let version = snapshot.version;
        let name = match schema {
            Some(s) => TableReference::partial(s, table),
            None => TableReference::bare(table),
        };
        self.add_table_as(
            name,
            SnapshotTable::new(location, snapshot, store_url),
            version,
        )
    }

    /// Register an already loaded snapshot.
    pub fn register_snapshot(
        &mut self,
        name: &str,
        location: TableLocation,
        snapshot: crate::log::Snapshot,
    ) -> Result<()> {
        let store_url = self.add_store(&location)?;
        let version = snapshot.version;
        self.add_table(
            name,
            SnapshotTable::new(location, snapshot, store_url),
            version,
        )
    }

    /// Register every table directly under `address` (folders holding a `_log/`), each by its
    /// folder name. Returns the names.
    pub async fn register_warehouse(
        &mut self,
        address: &str,
        as_of: Option<AsOf>,
    ) -> Result<Vec<String>> {
        let root = TableLocation::parse(address)?;
        let listing = root
            .store
            .list_with_delimiter(Some(&root.child("")))
            .await?;
        let mut names = Vec::new();
        let base = address.trim_end_matches('/');
        for prefix in listing.common_prefixes {
            let Some(name) = prefix.filename().map(str::to_string) else {
                continue;
            };
            let sub = format!("{base}/{name}");
            // SQL names are case-insensitive unless quoted: two folders equal but for case
            // would be one name. The first (in the store's order) keeps it.
            if let Some(other) = names
                .iter()
                .find(|n: &&String| n.eq_ignore_ascii_case(&name))
            {
                let why = format!(
                    "its name differs from the table '{other}' only in case, and SQL names ignore case; query it on its own (neve sql --table t={sub})"
                );
                tracing::warn!(table = %sub, "table left out of the warehouse: {why}");
                self.unopened.push((name, why));
                continue;
            }
            match self.register(&name, &sub, as_of).await {
                Ok(_) => names.push(name),
                Err(Error::TableNotFound { .. }) => continue,
                // Younger than `as_of` (or its history then is gone): left out, and a query
                // naming it is told why.
                Err(e @ (Error::TimestampNotFound { .. } | Error::VersionNotFound { .. })) => {
                    tracing::debug!(table = %sub, error = %e, "table left out of the warehouse at as_of");
                    self.unopened.push((name, e.to_string()));
                }
                // One broken table does not take the warehouse's others with it.
                Err(e @ (Error::CorruptLog { .. } | Error::UnsupportedFormatVersion { .. })) => {
                    tracing::warn!(table = %sub, error = %e, "table left out of the warehouse");
                    self.unopened.push((name, e.to_string()));
                }
                Err(e) => return Err(e),
            }
        }
        names.sort();
        Ok(names)
    }

    /// Tables of a registered warehouse that were left out (younger than `as_of`, broken,
    /// or named like another but for case): a query naming one is told why.
    pub fn has_unopened(&self) -> bool {
        !self.unopened.is_empty()
    }

    /// An unknown table that is one of the warehouse's unopened ones: why it was left out.
    fn unopened_named(&self, e: Error) -> Error {
        if let Error::UnknownTable { message } = &e {
            if let Some((name, why)) = self.unopened.iter().find(|(n, _)| {
                message.contains(&format!("'{n}'")) || message.contains(&format!(".{n}'"))
            }) {
                return Error::UnknownTable {
                    message: format!(
                        "{message}: the warehouse's table '{name}' could not be opened: {why}"
                    ),
                };
            }
        }
        e
    }

    /// Plan a query. Tables registered by their head get their file lists read first,
    /// unless the log's totals answer all the query asks of them.
    pub async fn sql(&self, sql: &str) -> Result<DataFrame> {
        let state = self.ctx.state();
        let statement = self.parse(sql)?;
        let plan = state
            .statement_to_plan(statement)
            .await
            .map_err(|e| self.unopened_named(query_error(e)))?;
        let plan = catalog::own_types(&state, plan)
            .await
            .map_err(query_error)?;
        if self.read_only {
            datafusion::execution::context::SQLOptions::new()
                .with_allow_ddl(false)
                .with_allow_dml(false)
                .with_allow_statements(false)
                .verify_plan(&plan)
                .map_err(|e| Error::InvalidQuery {
                    message: format!(
                        "{e}: only queries are answered; tables change through insert, delete, drop-partition and alter"
                    ),
                })?;
        }
        // Judged on the analyzed plan (types coerced), as the optimizer will see it.
        let analyzed = state
            .analyzer()
            .execute_and_check(plan.clone(), state.config_options(), |_, _| {})
            .map_err(query_error)?;
        for table in metadata::tables_to_load(&analyzed) {
            table
                .downcast_ref::<SnapshotTable>()
                .expect("tables_to_load returns neve tables")
                .load()
                .await?;
        }
        let df = self
            .ctx
            .execute_logical_plan(plan)
            .await
            .map_err(query_error)?;
        let df = plain_strings(df).map_err(query_error)?;
        Ok(match self.batch_sizing {
            Some((max_rows, bytes)) => batch_rows::sized(df, max_rows, bytes),
            None => df,
        })
    }

    /// The schema of `sql`'s result (planned, not run), and of its `$1`, `$2`... parameters
    /// (types DataFusion could infer; `Null` where it could not), for prepared statements.
    pub async fn describe(&self, sql: &str) -> Result<(SchemaRef, SchemaRef)> {
        let df = self.sql(sql).await?;
        let result: SchemaRef = Arc::new(df.schema().as_arrow().clone());
        let mut params: Vec<(usize, String, DataType)> = df
            .logical_plan()
            .get_parameter_types()
            .map_err(query_error)?
            .into_iter()
            .map(|(name, t)| {
                let n = name.trim_start_matches('$').parse().unwrap_or(usize::MAX);
                (n, name, t.unwrap_or(DataType::Null))
            })
            .collect();
        params.sort();
        let params = Schema::new(
            params
                .into_iter()
                .map(|(_, name, t)| Field::new(name, t, true))
                .collect::<Vec<_>>(),
        );
        Ok((result, Arc::new(params)))
    }

    /// Plan and start a query whose `$1`, `$2`... take the values of the first row of
    /// `params`' columns, in order.
    pub async fn stream_with_params(
        &self,
        sql: &str,
        params: &RecordBatch,
    ) -> Result<SendableRecordBatchStream> {
        if params.num_rows() == 0 {
            return Err(Error::InvalidQuery {
                message: "the parameters have no row".into(),
            });
        }
        let values = params
            .columns()
            .iter()
            .map(|c| ScalarValue::try_from_array(c, 0))
            .collect::<datafusion::error::Result<Vec<_>>>()
            .map_err(query_error)?;
        self.sql(sql)
            .await?
            .with_param_values(values)
            .map_err(query_error)?
            .execute_stream()
            .await
            .map_err(query_error)
    }

    /// Plan and start a query; batches arrive as they are computed.
    pub async fn stream(&self, sql: &str) -> Result<SendableRecordBatchStream> {
        self.sql(sql)
            .await?
            .execute_stream()
            .await
            .map_err(query_error)
    }

    /// Run a query to the end.
    pub async fn collect(&self, sql: &str) -> Result<Vec<arrow::array::RecordBatch>> {
        self.stream(sql)
            .await?
            .try_collect()
            .await
            .map_err(query_error)
    }
}

/// `df` with string and binary view columns cast to the plain types: the table's own types,
/// which every Arrow and Parquet reader understands. Views are how scans read strings
/// (`provider::scan_schema`), not what results are made of.
fn plain_strings(df: DataFrame) -> datafusion::error::Result<DataFrame> {
    use datafusion::logical_expr::{cast, Expr};
    if !df
        .schema()
        .fields()
        .iter()
        .any(|f| provider::is_view(f.data_type()))
    {
        return Ok(df);
    }
    let exprs: Vec<Expr> = df
        .schema()
        .iter()
        .map(|(q, f)| {
            let c = Expr::Column(datafusion::common::Column::from((q, f)));
            if provider::is_view(f.data_type()) {
                cast(c, provider::plain(f.data_type())).alias_qualified(q.cloned(), f.name())
            } else {
                c
            }
        })
        .collect();
    df.select(exprs)
}

/// Partitions of a query plan: `NEVE_SCAN_PARTITIONS`, or four per core (at least 8).
/// The cores this process may use, read once: `available_parallelism` reads the cgroup's
/// files on every call, and plans ask for it per query.
/// A data file of the table for DataFusion, by the very object path the writer used. (Going
/// through a string, as `PartitionedFile::new` does, would percent-encode an escaped partition
/// value's `%` once more and name a file that does not exist.)
pub(crate) fn table_file(
    location: &TableLocation,
    relative: &str,
    size: u64,
) -> datafusion::datasource::listing::PartitionedFile {
    datafusion::datasource::listing::PartitionedFile::new_from_meta(object_store::ObjectMeta {
        location: location.child(relative),
        last_modified: chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
        size,
        e_tag: None,
        version: None,
    })
}

pub(crate) fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
    })
}

fn scan_partitions(cores: usize) -> usize {
    std::env::var("NEVE_SCAN_PARTITIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or((cores * 4).max(8))
}

#[cfg(test)]
mod tests;
