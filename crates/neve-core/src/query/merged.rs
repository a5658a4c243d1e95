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
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::Result as DfResult;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{
    EquivalenceProperties, LexOrdering, PhysicalExpr, PhysicalSortExpr,
};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
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

/// How the files of one query split: those read as they are, and per partition the runs
/// that are merged.
pub(crate) struct MergedFiles<'a> {
    pub plain: Vec<&'a AddFile>,
    pub merged: Vec<Vec<&'a AddFile>>,
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
/// column) overlaps no other file's.
fn standalone(part: &[(usize, &AddFile)], key: Option<&super::stats::ColumnArrays>) -> Vec<bool> {
    let n = part.len();
    let Some(key) = key else {
        return vec![false; n];
    };
    let known = |i: usize| key.min.is_valid(i) && key.max.is_valid(i);
    let Ok(cmp) = make_comparator(&key.min, &key.max, SortOptions::default()) else {
        return vec![false; n];
    };
    part.iter()
        .map(|&(i, f)| {
            f.merged
                && known(i)
                && part.iter().all(|&(j, _)| {
                    // Disjoint: one ends before the other starts.
                    j == i || (known(j) && (cmp(j, i).is_gt() || cmp(i, j).is_gt()))
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
    /// Key filters, used to skip row groups and pages.
    pub predicate: Option<Arc<dyn PhysicalExpr>>,
    pub partitions: usize,
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
        let n = scan.partitions.max(1).min(runs.len().max(1));
        let mut parts: Vec<(u64, Vec<Arc<dyn ExecutionPlan>>)> =
            (0..n).map(|_| (0, Vec::new())).collect();
        let mut ordered: Vec<&Vec<&AddFile>> = runs.iter().collect();
        let bytes = |r: &Vec<&AddFile>| r.iter().map(|f| f.size).sum::<u64>();
        ordered.sort_by_key(|r| std::cmp::Reverse(bytes(r)));
        for run in ordered {
            let groups: Vec<FileGroup> = run
                .iter()
                .map(|f| {
                    FileGroup::new(vec![PartitionedFile::new(
                        scan.location.child(&f.path).to_string(),
                        f.size,
                    )])
                })
                .collect();
            let mut source = ParquetSource::new(schema.clone())
                .with_metadata_size_hint(super::provider::FOOTER_HINT);
            if let Some(p) = &scan.predicate {
                source = source.with_predicate(p.clone());
            }
            let config = FileScanConfigBuilder::new(scan.store_url.clone(), Arc::new(source))
                .with_file_groups(groups)
                .with_projection_indices(Some(read.clone()))
                .map_err(super::query_error)?
                .with_expr_adapter(Some(scan.ids.clone()))
                .with_output_ordering(vec![key_order(schema, true)])
                .build();
            let mut plan: Arc<dyn ExecutionPlan> = DataSourceExec::from_data_source(config);
            if run.len() > 1 {
                // Equal keys in file order, the files in commit order: the later row is the
                // later commit's.
                plan = Arc::new(
                    SortPreservingMergeExec::new(key_order(&read_schema, false), plan)
                        .with_round_robin_repartition(false),
                );
            }
            let slot = parts.iter_mut().min_by_key(|(b, _)| *b).expect("n >= 1");
            slot.0 += bytes(run);
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
        write!(f, "NeveMergeExec: runs={}", self.runs)
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
