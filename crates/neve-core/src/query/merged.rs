//! Exact reads of tables with merge semantics: per partition, the files' sorted runs merged
//! by key and the table's spec applied before the query sees a row.
//!
//! A file that already holds one row per key (a merge's output) and whose key range overlaps
//! no other file of its partition is read as it is. Filters on key columns select whole keys,
//! so they prune files before the merge; other filters only drop a partition none of whose
//! files can hold a matching row (`replace` and `dedupe`, whose merged rows are stored rows),
//! and are applied above the merge.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{make_comparator, Array};
use arrow::compute::SortOptions;
use arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::Result as DfResult;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::utils::reassign_expr_columns;
use datafusion::physical_expr::{
    EquivalenceProperties, LexOrdering, PhysicalExpr, PhysicalSortExpr,
};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::StreamExt;

use super::stats::FileStats;
use crate::log::AddFile;
use crate::merge::{seq_of, MergeSpec, Reducer};
use crate::storage::TableLocation;

/// A file's partition values, to group files by partition.
pub(crate) type PartitionKey<'a> = Vec<(&'a String, &'a Option<String>)>;

/// How the files of one query split: those read as they are, those read as they are but for
/// their tombstones, and per partition the runs that are merged.
pub(crate) struct MergedFiles<'a> {
    pub plain: Vec<&'a AddFile>,
    /// One row per key, no other file's keys, but deleted keys kept as tombstones (a merge
    /// keeps them while the table has a version column): read with the deleted rows dropped.
    pub live: Vec<&'a AddFile>,
    pub merged: Vec<Vec<&'a AddFile>>,
}

impl MergedFiles<'_> {
    /// Whether the files' row counts are the rows an exact read returns.
    pub fn counts_exactly(&self) -> bool {
        self.merged.is_empty() && self.live.is_empty()
    }
}

/// Split `files` (each with its index in `stats`) into files read as they are and runs to
/// merge, one per partition, each in commit order.
pub(crate) fn split<'a>(
    spec: &MergeSpec,
    stats: &FileStats,
    files: Vec<(usize, &'a AddFile)>,
) -> MergedFiles<'a> {
    let mut by_partition: BTreeMap<PartitionKey, Vec<(usize, &AddFile)>> = BTreeMap::new();
    for (i, f) in files {
        by_partition
            .entry(f.partition_values.iter().collect())
            .or_default()
            .push((i, f));
    }
    let first_key = &spec.key()[0];
    let key_stats = stats.column(first_key);
    // Whether the file has tombstones (or may have).
    let deleted_stats = spec.deleted().map(|d| stats.column(d));
    let mut out = MergedFiles {
        plain: Vec::new(),
        live: Vec::new(),
        merged: Vec::new(),
    };
    for (_, mut part) in by_partition {
        part.sort_by_key(|(_, f)| seq_of(f));
        let alone = standalone(&part, key_stats.as_deref());
        let mut run = Vec::new();
        for ((i, f), alone) in part.into_iter().zip(alone) {
            let no_tombstones = match &deleted_stats {
                None => true,
                Some(None) => false,
                Some(Some(d)) => {
                    // All null, or a max of false.
                    d.nulls.is_valid(i) && d.nulls.value(i) == f.rows
                        || (d.max.is_valid(i)
                            && d.max
                                .as_any()
                                .downcast_ref::<arrow::array::BooleanArray>()
                                .is_some_and(|m| !m.value(i)))
                }
            };
            if alone && no_tombstones {
                out.plain.push(f);
            } else if alone {
                out.live.push(f);
            } else {
                run.push(f);
            }
        }
        if !run.is_empty() {
            out.merged.push(run);
        }
    }
    out
}

/// Per file of one partition: it holds one row per key and its key range (by the first key
/// column) overlaps no other file's. A null key is a key too, outside every range: two files
/// that may both hold one overlap.
fn standalone(part: &[(usize, &AddFile)], key: Option<&super::stats::ColumnArrays>) -> Vec<bool> {
    let n = part.len();
    let Some(key) = key else {
        return vec![false; n];
    };
    let known = |i: usize| key.min.is_valid(i) && key.max.is_valid(i);
    let may_be_null = |i: usize| !key.nulls.is_valid(i) || key.nulls.value(i) > 0;
    let Ok(cmp) = make_comparator(&key.min, &key.max, SortOptions::default()) else {
        return vec![false; n];
    };
    part.iter()
        .map(|&(i, f)| {
            f.merged
                && known(i)
                && part.iter().all(|&(j, _)| {
                    // Disjoint: one ends before the other starts, and not both with nulls.
                    j == i
                        || (known(j)
                            && (cmp(j, i).is_gt() || cmp(i, j).is_gt())
                            && !(may_be_null(i) && may_be_null(j)))
                })
        })
        .collect()
}

/// Reads `runs` (each one partition's files, in commit order), merging each by key and
/// applying the spec; its partitions each take a share of the runs, one after the other.
#[derive(Debug)]
pub(crate) struct MergeExec {
    /// Per output partition, the sorted input of each run.
    parts: Vec<Vec<Arc<dyn ExecutionPlan>>>,
    reducer: Reducer,
    /// The columns of the read rows the query wants, in its order.
    projection: Vec<usize>,
    properties: Arc<PlanProperties>,
    runs: usize,
}

pub(crate) struct MergeScan<'a> {
    pub location: &'a TableLocation,
    pub store_url: ObjectStoreUrl,
    pub schema: SchemaRef,
    pub ids: Arc<super::FieldIdAdapterFactory>,
    pub spec: &'a MergeSpec,
    /// The query's columns (indices into `schema`); all when `None`.
    pub projection: Option<&'a Vec<usize>>,
    /// Key filters (on `schema`): they skip row groups and pages, and filter rows before the
    /// merge.
    pub predicate: Option<Arc<dyn PhysicalExpr>>,
    pub partitions: usize,
    /// Opens the files through the session's footer cache, as plain scans do, so a kept table
    /// handle does not read every file's footer and page index again.
    pub reader: Arc<dyn datafusion::datasource::physical_plan::ParquetFileReaderFactory>,
}

impl MergeExec {
    pub(crate) fn try_new(scan: MergeScan<'_>, runs: Vec<Vec<&AddFile>>) -> crate::Result<Self> {
        let schema = &scan.schema;
        let wanted: Vec<usize> = match scan.projection {
            Some(p) => p.clone(),
            None => (0..schema.fields().len()).collect(),
        };
        // Read what the query wants, and what the merge needs: the key, and a replace's
        // version and deleted flag.
        let mut read = wanted.clone();
        let needed: Vec<&String> = match scan.spec {
            MergeSpec::Replace {
                key,
                version,
                deleted,
            } => key.iter().chain(version).chain(deleted).collect(),
            s => s.key().iter().collect(),
        };
        for name in needed {
            let i = schema
                .index_of(name)
                .map_err(|_| crate::Error::InvalidMergeSpec {
                    spec: scan.spec.to_string(),
                    reason: format!("'{name}' is not a column of the table"),
                })?;
            if !read.contains(&i) {
                read.push(i);
            }
        }
        let read_schema = Arc::new(schema.project(&read).map_err(crate::Error::from)?);
        let projection: Vec<usize> = (0..wanted.len()).collect();
        let out_schema = Arc::new(
            read_schema
                .project(&projection)
                .map_err(crate::Error::from)?,
        );
        let reducer = Reducer::new(scan.spec, read_schema.clone(), true)?;
        let key_order = |s: &SchemaRef, table: bool| {
            LexOrdering::new(scan.spec.key().iter().map(|k| {
                let idx = if table {
                    schema.index_of(k).expect("checked")
                } else {
                    s.index_of(k).expect("checked")
                };
                PhysicalSortExpr::new(
                    Arc::new(Column::new(k, idx)),
                    SortOptions {
                        descending: false,
                        nulls_first: true,
                    },
                )
            }))
            .expect("a key has a column")
        };
        // A large run on fewer runs than the cores is split by ranges of its first key column,
        // each merged on its own: a key's rows all fall in one range. Not more ranges than
        // cores: each range decodes every file's dictionary pages again (with 8 ranges on 2
        // cores an exact `count(*)` of 100 files took twice the time of 2). Not at all under
        // key filters: they already bound the rows, and each range would open every file.
        let slots = scan.partitions.max(1);
        let splits = match scan.predicate {
            Some(_) => 1,
            None => (slots.min(super::cores()) / runs.len().max(1)).max(1),
        };
        let bytes = |r: &Vec<&AddFile>| r.iter().map(|f| f.size).sum::<u64>();
        let first_key = &scan.spec.key()[0];
        let mut plans: Vec<(u64, Arc<dyn ExecutionPlan>)> = Vec::new();
        for run in &runs {
            let rows: u64 = run.iter().map(|f| f.rows).sum();
            let ranges = match (splits > 1 && rows >= SPLIT_ROWS)
                .then(|| key_ranges(run, first_key, splits))
                .flatten()
            {
                Some(r) => r,
                None => vec![(None, None)],
            };
            let share = bytes(run) / ranges.len() as u64;
            for (lo, hi) in ranges {
                let range = |s: &SchemaRef| range_filter(s, first_key, lo, hi);
                let groups: Vec<FileGroup> = run
                    .iter()
                    .map(|f| {
                        FileGroup::new(vec![super::table_file(scan.location, &f.path, f.size)])
                    })
                    .collect();
                let mut source = ParquetSource::new(schema.clone())
                    .with_metadata_size_hint(super::provider::FOOTER_HINT)
                    .with_parquet_file_reader_factory(scan.reader.clone());
                let predicate = match (&scan.predicate, range(schema)?) {
                    (Some(p), Some(r)) => {
                        Some(datafusion::physical_expr::conjunction([p.clone(), r]))
                    }
                    (p, r) => p.clone().or(r),
                };
                if let Some(p) = &predicate {
                    // Key filters select whole keys, so they filter rows before the merge:
                    // in the decoder, which reads the other columns only for matching rows.
                    source = source.with_predicate(p.clone()).with_pushdown_filters(true);
                }
                let config = FileScanConfigBuilder::new(scan.store_url.clone(), Arc::new(source))
                    .with_file_groups(groups)
                    .with_projection_indices(Some(read.clone()))
                    .map_err(super::query_error)?
                    .with_expr_adapter(Some(scan.ids.clone()))
                    .with_output_ordering(vec![key_order(schema, true)])
                    .build();
                let mut plan: Arc<dyn ExecutionPlan> = DataSourceExec::from_data_source(config);
                if let Some(p) = predicate {
                    // The decoder applies what it can; this applies the rest (it is cheap on
                    // rows that already pass).
                    let p = reassign_expr_columns(p, &read_schema).map_err(super::query_error)?;
                    plan = Arc::new(FilterExec::try_new(p, plan).map_err(super::query_error)?);
                }
                if run.len() > 1 {
                    // Equal keys in file order, the files in commit order: the later row is the
                    // later commit's.
                    plan = Arc::new(
                        SortPreservingMergeExec::new(key_order(&read_schema, false), plan)
                            .with_round_robin_repartition(false),
                    );
                }
                plans.push((share, plan));
            }
        }
        let n = slots.min(plans.len().max(1));
        let mut parts: Vec<(u64, Vec<Arc<dyn ExecutionPlan>>)> =
            (0..n).map(|_| (0, Vec::new())).collect();
        plans.sort_by_key(|(b, _)| std::cmp::Reverse(*b));
        for (b, plan) in plans {
            let slot = parts.iter_mut().min_by_key(|(b, _)| *b).expect("n >= 1");
            slot.0 += b;
            slot.1.push(plan);
        }
        let properties = PlanProperties::new(
            EquivalenceProperties::new(out_schema),
            Partitioning::UnknownPartitioning(n),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Ok(Self {
            runs: runs.len(),
            parts: parts.into_iter().map(|(_, p)| p).collect(),
            reducer,
            projection,
            properties: Arc::new(properties),
        })
    }
}

impl DisplayAs for MergeExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let merges: usize = self.parts.iter().map(Vec::len).sum();
        write!(f, "NeveMergeExec: runs={}, merges={merges}", self.runs)
    }
}

impl ExecutionPlan for MergeExec {
    fn name(&self) -> &'static str {
        "NeveMergeExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        // The runs are planned here, whole: the optimizer must not repartition them.
        vec![]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let runs = self.parts.get(partition).cloned().unwrap_or_default();
        let reducer = self.reducer.clone();
        let projection = self.projection.clone();
        let schema = self.properties.eq_properties.schema().clone();
        let stream = futures::stream::iter(runs)
            .map(move |plan| {
                let projection = projection.clone();
                match plan.execute(0, context.clone()) {
                    Ok(rows) => reducer
                        .clone()
                        .stream(rows)
                        .map(move |b| b.and_then(|b| Ok(b.project(&projection)?)))
                        .boxed(),
                    Err(e) => futures::stream::once(async { Err(e) }).boxed(),
                }
            })
            .flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

/// Runs of fewer rows are merged whole (the unit tests split tiny runs, to check the ranges).
const SPLIT_ROWS: u64 = if cfg!(test) { 8 } else { 1 << 20 };

/// `n` ranges `[lo, hi)` of an integer first key column covering the run's files (from the
/// log's bounds), the first open below (and taking nulls), the last open above.
fn key_ranges(run: &[&AddFile], key: &str, n: usize) -> Option<Vec<(Option<i64>, Option<i64>)>> {
    let bound = |f: &AddFile, max: bool| {
        let s = f.stats.get(key)?;
        if max { s.max.as_ref() } else { s.min.as_ref() }?.as_i64()
    };
    let lo = run
        .iter()
        .map(|f| bound(f, false))
        .collect::<Option<Vec<_>>>()?
        .into_iter()
        .min()?;
    let hi = run
        .iter()
        .map(|f| bound(f, true))
        .collect::<Option<Vec<_>>>()?
        .into_iter()
        .max()?;
    let span = (hi as i128 - lo as i128 + 1) as u128;
    if span < n as u128 {
        return None;
    }
    let cut = |i: usize| (lo as i128 + (span * i as u128 / n as u128) as i128) as i64;
    Some(
        (0..n)
            .map(|i| ((i > 0).then(|| cut(i)), (i + 1 < n).then(|| cut(i + 1))))
            .collect(),
    )
}

/// `key >= lo AND key < hi` (nulls in the range open below), in `schema`; `None` for the
/// whole range.
fn range_filter(
    schema: &SchemaRef,
    key: &str,
    lo: Option<i64>,
    hi: Option<i64>,
) -> crate::Result<Option<Arc<dyn PhysicalExpr>>> {
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{is_null, BinaryExpr, Literal};
    use datafusion::scalar::ScalarValue;
    let idx = schema.index_of(key)?;
    let column: Arc<dyn PhysicalExpr> = Arc::new(Column::new(key, idx));
    let t = schema.field(idx).data_type();
    let lit = |v: i64| -> crate::Result<Arc<dyn PhysicalExpr>> {
        let v = ScalarValue::Int64(Some(v))
            .cast_to(t)
            .map_err(super::query_error)?;
        Ok(Arc::new(Literal::new(v)))
    };
    let cmp = |op, v| -> crate::Result<Arc<dyn PhysicalExpr>> {
        Ok(Arc::new(BinaryExpr::new(column.clone(), op, lit(v)?)))
    };
    Ok(match (lo, hi) {
        (None, None) => None,
        (Some(lo), None) => Some(cmp(Operator::GtEq, lo)?),
        (None, Some(hi)) => Some(Arc::new(BinaryExpr::new(
            cmp(Operator::Lt, hi)?,
            Operator::Or,
            is_null(column.clone()).map_err(super::query_error)?,
        ))),
        (Some(lo), Some(hi)) => Some(Arc::new(BinaryExpr::new(
            cmp(Operator::GtEq, lo)?,
            Operator::And,
            cmp(Operator::Lt, hi)?,
        ))),
    })
}

/// Keep only filters on key columns (which select whole keys).
pub(crate) fn on_key(spec: &MergeSpec, filters: &[Expr]) -> Vec<Expr> {
    filters
        .iter()
        .filter(|f| {
            let cols = f.column_refs();
            !cols.is_empty() && cols.iter().all(|c| spec.key().contains(&c.name))
        })
        .cloned()
        .collect()
}
