//! A DataFusion table over one snapshot of a neve table: the file list comes from the log,
//! pruned by the log's statistics (and by expressions constant per file, such as the month of
//! a month-partitioned timestamp) before a single data file is opened.

use std::sync::Arc;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, Statistics};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::Result as DfResult;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_optimizer::pruning::PruningPredicateBuilder;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::ExecutionPlan;

use super::constant::{per_file, physical};
use super::stats::FileStats;
use crate::log::{Snapshot, SnapshotHead};
use crate::storage::TableLocation;

/// Parquet footers neve writes are a few KB; fetching this much of the tail at once saves a
/// round trip per file.
pub(crate) const FOOTER_HINT: usize = 16 << 10;

/// One snapshot of a table, queryable by DataFusion. It may start from the version's head
/// only (definition and per-partition totals): the file list is then read when a query first
/// needs it, at the same version.
#[derive(Debug)]
pub struct SnapshotTable {
    location: TableLocation,
    version: u64,
    /// The table's schema as the log's statistics hold it: the columns, then every field of
    /// a struct by its path (`user.plan`; see [`stats_schema`]).
    schema: SchemaRef,
    /// What queries see: [`scan_schema`].
    scan_schema: SchemaRef,
    store_url: ObjectStoreUrl,
    /// Finds the table's columns in each file by field id.
    ids: Arc<super::FieldIdAdapterFactory>,
    /// One stand-in file per partition, from the head.
    head: Option<Arc<FileStats>>,
    full: tokio::sync::OnceCell<Loaded>,
    /// The table's merge semantics, applied by every scan; `None` for a raw read.
    merge: Option<crate::merge::MergeSpec>,
}

#[derive(Debug)]
struct Loaded {
    snapshot: Arc<Snapshot>,
    stats: Arc<FileStats>,
}

impl Loaded {
    fn new(snapshot: Snapshot, schema: SchemaRef) -> Self {
        let files = snapshot.files.values().cloned().collect();
        Self {
            stats: Arc::new(FileStats::new(files, schema)),
            snapshot: Arc::new(snapshot),
        }
    }
}

impl SnapshotTable {
    /// `store_url` is where the session registered `location.store`.
    pub(crate) fn new(
        location: TableLocation,
        snapshot: Snapshot,
        store_url: ObjectStoreUrl,
    ) -> Self {
        let table = snapshot.metadata.schema.to_arrow();
        let schema = stats_schema(&table);
        Self {
            ids: Arc::new(super::FieldIdAdapterFactory::new(&snapshot.metadata.schema)),
            location,
            version: snapshot.version,
            head: None,
            merge: snapshot.metadata.merge.clone(),
            full: tokio::sync::OnceCell::new_with(Some(Loaded::new(snapshot, schema.clone()))),
            scan_schema: scan_schema(&table),
            schema,
            store_url,
        }
    }

    /// A table of which only the head is read so far.
    pub(crate) fn from_head(
        location: TableLocation,
        head: SnapshotHead,
        store_url: ObjectStoreUrl,
    ) -> Self {
        let table = head.metadata.schema.to_arrow();
        let schema = stats_schema(&table);
        Self {
            ids: Arc::new(super::FieldIdAdapterFactory::new(&head.metadata.schema)),
            location,
            version: head.version,
            head: Some(Arc::new(FileStats::from_head(&head, schema.clone()))),
            merge: head.metadata.merge.clone(),
            full: tokio::sync::OnceCell::new(),
            scan_schema: scan_schema(&table),
            schema,
            store_url,
        }
    }

    pub fn version(&self) -> u64 {
        self.version
    }

    /// Read the stored rows, without applying the table's merge semantics.
    pub fn raw(mut self, raw: bool) -> Self {
        if raw {
            self.merge = None;
        }
        self
    }

    /// Whether the files' row counts are the table's: no merge semantics, or every file
    /// read as it is (one row per key, no tombstone, no other file's keys; see `merged.rs`).
    pub(crate) fn counts_exactly(&self) -> bool {
        let Some(spec) = &self.merge else {
            return true;
        };
        let Some(loaded) = self.full.get() else {
            return false;
        };
        let stats = &loaded.stats;
        let files = stats
            .files
            .iter()
            .enumerate()
            .map(|(i, f)| (i, f.as_ref()))
            .collect();
        super::merged::split(spec, stats, files).counts_exactly()
    }

    /// The snapshot, once its file list is read.
    pub fn snapshot(&self) -> Option<&Snapshot> {
        self.full.get().map(|l| l.snapshot.as_ref())
    }

    /// Read the file list (once).
    pub(crate) async fn load(&self) -> crate::error::Result<()> {
        self.loaded().await.map(|_| ())
    }

    async fn loaded(&self) -> crate::error::Result<&Loaded> {
        self.full
            .get_or_try_init(|| async {
                let log = crate::log::LogStore::new(self.location.clone());
                let snapshot = log.load_version(self.version).await?;
                Ok(Loaded::new(snapshot, self.schema.clone()))
            })
            .await
    }

    /// Per-file statistics when the file list is read, else one stand-in per partition.
    pub(crate) fn stats(&self) -> Option<&Arc<FileStats>> {
        self.full.get().map(|l| &l.stats).or(self.head.as_ref())
    }

    /// Which files may hold rows matching all of `filters` (conjuncts).
    pub(crate) fn prune(&self, stats: &FileStats, filters: &[Expr]) -> Vec<bool> {
        let mut keep = vec![true; stats.len()];
        for f in filters {
            for (k, d) in keep.iter_mut().zip(self.decide(stats, f)) {
                if d == Some(false) {
                    *k = false;
                }
            }
        }
        keep
    }

    /// What the log says of `filter` in each file of `stats`: `Some(true)` when every row
    /// passes, `Some(false)` when none does, `None` when only reading the file can tell.
    pub(crate) fn decide(&self, stats: &FileStats, filter: &Expr) -> Vec<Option<bool>> {
        let n = stats.len();
        let f = stats_form(filter);
        let mut out = vec![None; n];
        if let Some(pf) = per_file(&f, stats) {
            if let Some(values) = pf.values.as_boolean_opt() {
                for (i, o) in out.iter_mut().enumerate() {
                    if pf.constant.value(i) {
                        // NULL filters a row out like false does.
                        *o = Some(values.is_valid(i) && values.value(i));
                    }
                }
            }
        }
        if out.iter().all(Option::is_some) {
            return out;
        }
        // Min/max ranges: no row can pass, or (with no nulls involved) no row can fail.
        if let Some(may_pass) = self.min_max_prune(stats, &f) {
            for (o, may) in out.iter_mut().zip(may_pass) {
                if o.is_none() && !may {
                    *o = Some(false);
                }
            }
        }
        if let Some(may_fail) = self.min_max_prune(stats, &negate(&f)) {
            let columns: Vec<_> = f
                .column_refs()
                .into_iter()
                .filter_map(|c| stats.column(&c.name))
                .collect();
            for (i, (o, may)) in out.iter_mut().zip(may_fail).enumerate() {
                let no_nulls = columns
                    .iter()
                    .all(|c| c.nulls.is_valid(i) && c.nulls.value(i) == 0);
                if o.is_none() && !may && no_nulls {
                    *o = Some(true);
                }
            }
        }
        out
    }

    /// DataFusion's min/max pruning of `expr` over the files; `None` when it cannot be used.
    fn min_max_prune(&self, stats: &FileStats, expr: &Expr) -> Option<Vec<bool>> {
        let physical = physical(expr, self.schema.clone())?;
        let p = PruningPredicateBuilder::new()
            .with_file_schema(self.schema.clone())
            .build(physical)?;
        p.prune(stats).ok()
    }
}

/// `NOT expr`, pushed down to comparisons (which min/max pruning understands). Exact for rows
/// without nulls, which is the only case it is used for.
fn negate(e: &Expr) -> Expr {
    use datafusion::logical_expr::{BinaryExpr, Operator};
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
            Operator::And => Expr::BinaryExpr(BinaryExpr::new(
                Box::new(negate(left)),
                Operator::Or,
                Box::new(negate(right)),
            )),
            Operator::Or => Expr::BinaryExpr(BinaryExpr::new(
                Box::new(negate(left)),
                Operator::And,
                Box::new(negate(right)),
            )),
            op => match op.negate() {
                Some(neg) => Expr::BinaryExpr(BinaryExpr::new(left.clone(), neg, right.clone())),
                None => Expr::Not(Box::new(e.clone())),
            },
        },
        Expr::Not(inner) => inner.as_ref().clone(),
        Expr::Between(b) => {
            let mut b = b.clone();
            b.negated = !b.negated;
            Expr::Between(b)
        }
        Expr::InList(l) => {
            let mut l = l.clone();
            l.negated = !l.negated;
            Expr::InList(l)
        }
        e => Expr::Not(Box::new(e.clone())),
    }
}

/// `e` in the form the log's statistics are evaluated in: columns without their table
/// qualifier (statistics know columns by name), and string and binary literals and casts in
/// the plain types the statistics hold, since queries see those columns as views
/// (see [`scan_schema`]).
pub(crate) fn stats_form(e: &Expr) -> Expr {
    use datafusion::common::ScalarValue;
    use datafusion::logical_expr::{Cast, TryCast};
    e.clone()
        .transform(|e| {
            Ok(match e {
                Expr::Column(c) if c.relation.is_some() => {
                    Transformed::yes(Expr::Column(Column::new_unqualified(c.name)))
                }
                // `user.plan` (get_field(user, 'plan')) is the statistics column `user.plan`.
                Expr::ScalarFunction(f) if f.func.name() == "get_field" => {
                    let path = match f.args.split_first() {
                        Some((Expr::Column(c), keys)) if !keys.is_empty() => keys
                            .iter()
                            .map(|k| match k {
                                Expr::Literal(
                                    ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)),
                                    _,
                                ) => Some(s.clone()),
                                _ => None,
                            })
                            .collect::<Option<Vec<_>>>()
                            .map(|keys| format!("{}.{}", c.name, keys.join("."))),
                        _ => None,
                    };
                    match path {
                        Some(p) => Transformed::yes(Expr::Column(Column::new_unqualified(p))),
                        None => Transformed::no(Expr::ScalarFunction(f)),
                    }
                }
                Expr::Literal(ScalarValue::Utf8View(v), m) => {
                    Transformed::yes(Expr::Literal(ScalarValue::Utf8(v), m))
                }
                Expr::Literal(ScalarValue::BinaryView(v), m) => {
                    Transformed::yes(Expr::Literal(ScalarValue::Binary(v), m))
                }
                Expr::Cast(Cast { expr, field }) if is_view(field.data_type()) => {
                    Transformed::yes(Expr::Cast(Cast::new(expr, plain(field.data_type()))))
                }
                Expr::TryCast(TryCast { expr, field }) if is_view(field.data_type()) => {
                    Transformed::yes(Expr::TryCast(TryCast::new(expr, plain(field.data_type()))))
                }
                e => Transformed::no(e),
            })
        })
        .map(|t| t.data)
        .unwrap_or_else(|_| e.clone())
}

pub(crate) fn is_view(t: &DataType) -> bool {
    matches!(t, DataType::Utf8View | DataType::BinaryView)
}

/// The plain type of a view type; other types as they are.
pub(crate) fn plain(t: &DataType) -> DataType {
    match t {
        DataType::Utf8View => DataType::Utf8,
        DataType::BinaryView => DataType::Binary,
        t => t.clone(),
    }
}

/// The schema the log's statistics are evaluated in: the table's columns, then each field of a
/// struct (at any depth) as a column named by its path, which is how the log keys their
/// statistics. Only filters are rewritten to it, to prune files; rows are never read in it.
pub(crate) fn stats_schema(table: &SchemaRef) -> SchemaRef {
    fn leaves(prefix: &str, t: &DataType, out: &mut Vec<Field>) {
        if let DataType::Struct(fields) = t {
            for f in fields {
                let path = format!("{prefix}.{}", f.name());
                out.push(Field::new(&path, f.data_type().clone(), true));
                leaves(&path, f.data_type(), out);
            }
        }
    }
    let mut extra = Vec::new();
    for f in table.fields() {
        leaves(f.name(), f.data_type(), &mut extra);
    }
    if extra.is_empty() {
        return table.clone();
    }
    let mut fields: Vec<Field> = table.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.extend(extra);
    Arc::new(Schema::new_with_metadata(fields, table.metadata().clone()))
}

/// The table's schema as queries see it: string and binary columns as views. The Parquet
/// reader then points into each page's buffer instead of copying every value, and
/// DataFusion's grouping and comparisons on views are cheaper (a scan that groups by a string
/// column ran 18% faster). Results are cast back to the table's types (`QueryEngine::sql`).
pub(crate) fn scan_schema(table: &SchemaRef) -> SchemaRef {
    let fields: Vec<Field> = table
        .fields()
        .iter()
        .map(|f| {
            let t = match f.data_type() {
                DataType::Utf8 => DataType::Utf8View,
                DataType::Binary => DataType::BinaryView,
                t => t.clone(),
            };
            f.as_ref().clone().with_data_type(t)
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, table.metadata().clone()))
}

#[async_trait]
impl TableProvider for SnapshotTable {
    fn schema(&self) -> SchemaRef {
        self.scan_schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        // Used to skip files, row groups and pages; DataFusion still applies them to rows.
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    fn statistics(&self) -> Option<Statistics> {
        let files = &self.stats()?.files;
        let mut s = Statistics::new_unknown(&self.scan_schema);
        let rows = files.iter().map(|f| f.rows as usize).sum();
        // With merge semantics the files may hold more rows than the table.
        s.num_rows = match self.counts_exactly() {
            true => Precision::Exact(rows),
            false => Precision::Inexact(rows),
        };
        s.total_byte_size = Precision::Exact(files.iter().map(|f| f.size as usize).sum());
        Some(s)
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let stats = &self
            .loaded()
            .await
            .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?
            .stats;
        if let Some(spec) = &self.merge {
            return self
                .merged_scan(state, spec, stats, projection, filters)
                .await;
        }
        let keep = self.prune(stats, filters);
        let mut files: Vec<&crate::log::AddFile> = stats
            .files
            .iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(f, _)| f.as_ref())
            .collect();
        tracing::debug!(
            table = %self.location.display,
            files = files.len(),
            pruned = stats.len() - files.len(),
            "scan"
        );
        // Without filters, a LIMIT needs only as many files as hold that many rows: the
        // smallest single file that does, else the smallest files first.
        if let (Some(limit), true) = (limit, filters.is_empty()) {
            let limit = limit as u64;
            match files
                .iter()
                .filter(|f| f.rows >= limit)
                .min_by_key(|f| f.size)
            {
                Some(one) => files = vec![*one],
                None => {
                    files.sort_by_key(|f| f.size);
                    let mut rows = 0u64;
                    let take = files
                        .iter()
                        .take_while(|f| {
                            let more = rows < limit;
                            rows += f.rows;
                            more
                        })
                        .count();
                    files.truncate(take);
                }
            }
        }
        self.plain_scan(state, files, projection, limit).await
    }
}

impl SnapshotTable {
    /// Which files a scan with `filters` reads: the pruning `scan` does, merge-aware.
    pub(crate) async fn select_files(
        &self,
        filters: &[Expr],
    ) -> crate::error::Result<Vec<Arc<crate::log::AddFile>>> {
        let stats = &self.loaded().await?.stats;
        let keep = match &self.merge {
            None => self.prune(stats, filters),
            Some(spec) => {
                let key_filters = super::merged::on_key(spec, filters);
                self.merged_keep(spec, stats, filters, &key_filters)
            }
        };
        Ok(stats
            .files
            .iter()
            .zip(keep)
            .filter(|(_, k)| *k)
            .map(|(f, _)| f.clone())
            .collect())
    }

    /// The files an exact read of a merge table needs: those that may hold a key passing
    /// the key filters, in partitions where some file may hold a row passing the others.
    fn merged_keep(
        &self,
        spec: &crate::merge::MergeSpec,
        stats: &FileStats,
        filters: &[Expr],
        key_filters: &[Expr],
    ) -> Vec<bool> {
        use crate::merge::MergeSpec;
        let mut keep = self.prune(stats, key_filters);
        // Merged rows of replace and dedupe are stored rows: a partition where no file can
        // hold a row passing the other filters has no merged row passing them.
        if !matches!(spec, MergeSpec::Aggregate { .. }) {
            let others: Vec<Expr> = filters
                .iter()
                .filter(|f| !key_filters.contains(f))
                .cloned()
                .collect();
            let may = self.prune(stats, &others);
            let mut any_may: std::collections::HashMap<super::merged::PartitionKey, bool> =
                Default::default();
            for (f, m) in stats.files.iter().zip(&may) {
                *any_may
                    .entry(f.partition_values.iter().collect())
                    .or_default() |= *m;
            }
            for (k, f) in keep.iter_mut().zip(&stats.files) {
                let p: Vec<_> = f.partition_values.iter().collect();
                *k &= any_may.get(&p).copied().unwrap_or(true);
            }
        }
        keep
    }

    /// Scan `files` as they are.
    async fn plain_scan(
        &self,
        state: &dyn Session,
        files: Vec<&crate::log::AddFile>,
        projection: Option<&Vec<usize>>,
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let projected = match projection {
            Some(p) => Arc::new(self.scan_schema.project(p)?),
            None => self.scan_schema.clone(),
        };
        if files.is_empty() {
            return Ok(Arc::new(EmptyExec::new(projected)));
        }
        let groups = balance(&files, state.config().target_partitions(), |f| {
            super::table_file(&self.location, &f.path, f.size)
        });
        let mut stats = Statistics::new_unknown(&self.scan_schema);
        stats.num_rows = Precision::Exact(files.iter().map(|f| f.rows as usize).sum());
        stats.total_byte_size = Precision::Exact(files.iter().map(|f| f.size as usize).sum());
        // Built here, not by `ParquetFormat::create_physical_plan`, which would put back
        // DataFusion's reader factory (see `indexed.rs`).
        let source = ParquetSource::new(self.scan_schema.clone())
            .with_table_parquet_options(state.table_options().parquet.clone())
            .with_metadata_size_hint(FOOTER_HINT)
            .with_parquet_file_reader_factory(super::indexed::reader_factory(
                state,
                &self.store_url,
            )?);
        let config = FileScanConfigBuilder::new(self.store_url.clone(), Arc::new(source))
            .with_file_groups(groups)
            .with_statistics(stats)
            .with_projection_indices(projection.cloned())?
            .with_expr_adapter(Some(self.ids.clone()))
            .with_limit(limit)
            .build();
        Ok(DataSourceExec::from_data_source(config))
    }

    /// Scan `files` (each one row per key, see [`super::merged::MergedFiles::live`]) without
    /// the rows of deleted keys.
    async fn live_scan(
        &self,
        state: &dyn Session,
        spec: &crate::merge::MergeSpec,
        files: Vec<&crate::log::AddFile>,
        projection: Option<&Vec<usize>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        use datafusion::logical_expr::Operator;
        use datafusion::physical_expr::expressions::{
            BinaryExpr, Column as PhysicalColumn, IsNullExpr, NotExpr,
        };
        use datafusion::physical_plan::filter::FilterExecBuilder;
        let deleted = spec
            .deleted()
            .expect("only a spec with a deleted flag keeps tombstones");
        let d = self.scan_schema.index_of(deleted)?;
        let wanted: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.scan_schema.fields().len()).collect(),
        };
        let mut read = wanted.clone();
        let at = match read.iter().position(|&i| i == d) {
            Some(at) => at,
            None => {
                read.push(d);
                read.len() - 1
            }
        };
        let scan = self.plain_scan(state, files, Some(&read), None).await?;
        // Not deleted: false or null. Written with bitwise kernels (`NOT d`, or `NOT d OR d
        // IS NULL` when the flag may be null): `d IS DISTINCT FROM true` compares row by row
        // and took a sixth of a scan of a merged table.
        let flag: Arc<dyn datafusion::physical_expr::PhysicalExpr> =
            Arc::new(PhysicalColumn::new(deleted, at));
        let not_deleted = Arc::new(NotExpr::new(flag.clone()));
        let keep: Arc<dyn datafusion::physical_expr::PhysicalExpr> =
            if self.scan_schema.field(d).is_nullable() {
                Arc::new(BinaryExpr::new(
                    not_deleted,
                    Operator::Or,
                    Arc::new(IsNullExpr::new(flag)),
                ))
            } else {
                not_deleted
            };
        // The flag leaves with the filter when the query did not ask for it.
        let projection = (read.len() > wanted.len()).then(|| (0..wanted.len()).collect());
        Ok(Arc::new(
            FilterExecBuilder::new(keep, scan)
                .apply_projection(projection)?
                .build()?,
        ))
    }

    /// An exact read of a table with merge semantics (see `merged.rs`).
    async fn merged_scan(
        &self,
        state: &dyn Session,
        spec: &crate::merge::MergeSpec,
        stats: &FileStats,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let key_filters = super::merged::on_key(spec, filters);
        let keep = self.merged_keep(spec, stats, filters, &key_filters);
        let files: Vec<(usize, &crate::log::AddFile)> = stats
            .files
            .iter()
            .enumerate()
            .filter(|(i, _)| keep[*i])
            .map(|(i, f)| (i, f.as_ref()))
            .collect();
        let split = super::merged::split(spec, stats, files);
        tracing::debug!(
            table = %self.location.display,
            plain = split.plain.len(),
            live = split.live.len(),
            runs = split.merged.len(),
            "merged scan"
        );
        let mut plain = self
            .plain_scan(state, split.plain, projection, None)
            .await?;
        if !split.live.is_empty() {
            let live = self.live_scan(state, spec, split.live, projection).await?;
            plain = match plain.downcast_ref::<EmptyExec>() {
                Some(_) => live,
                None => datafusion::physical_plan::union::UnionExec::try_new(vec![plain, live])?,
            };
        }
        if split.merged.is_empty() {
            return Ok(plain);
        }
        // Row groups and pages too, for key filters: the columns unqualified, as the files
        // name them.
        let predicate = datafusion::logical_expr::utils::conjunction(key_filters)
            .and_then(|e| {
                e.transform(|e| {
                    Ok(match e {
                        Expr::Column(c) if c.relation.is_some() => {
                            Transformed::yes(Expr::Column(Column::new_unqualified(c.name)))
                        }
                        e => Transformed::no(e),
                    })
                })
                .ok()
            })
            .and_then(|e| physical(&e.data, self.scan_schema.clone()));
        let merged = super::merged::MergeExec::try_new(
            super::merged::MergeScan {
                location: &self.location,
                store_url: self.store_url.clone(),
                schema: self.scan_schema.clone(),
                ids: self.ids.clone(),
                spec,
                projection,
                predicate,
                partitions: state.config().target_partitions(),
                reader: super::indexed::reader_factory(state, &self.store_url)?,
            },
            split.merged,
        )
        .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
        if plain.downcast_ref::<EmptyExec>().is_some() {
            return Ok(Arc::new(merged));
        }
        datafusion::physical_plan::union::UnionExec::try_new(vec![plain, Arc::new(merged)])
    }
}

/// Spread files over `n` groups of about equal bytes (largest first, each to the lightest
/// group), so the scan's partitions finish together.
fn balance<F>(
    files: &[&crate::log::AddFile],
    n: usize,
    make: impl Fn(&crate::log::AddFile) -> F,
) -> Vec<FileGroup>
where
    F: Into<PartitionedFile>,
{
    let n = n.max(1).min(files.len());
    let mut order: Vec<&&crate::log::AddFile> = files.iter().collect();
    order.sort_by_key(|f| std::cmp::Reverse(f.size));
    let mut groups: Vec<(u64, Vec<PartitionedFile>)> = (0..n).map(|_| (0, Vec::new())).collect();
    for f in order {
        let g = groups
            .iter_mut()
            .min_by_key(|(bytes, _)| *bytes)
            .expect("n >= 1");
        g.0 += f.size;
        g.1.push(make(f).into());
    }
    groups
        .into_iter()
        .map(|(_, files)| FileGroup::new(files))
        .collect()
}
