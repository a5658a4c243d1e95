//! `count(*) … GROUP BY` counted a run of equal keys at a time.
//!
//! neve sorts every file by the table's sort key, so a scan yields the key's leading column
//! in long runs of one value (a month's 75,000 taxi rows hold seven payment types, in seven
//! runs). DataFusion's partial aggregation hashes and counts every row: about 60% of
//! `count_by_payment_type`'s time (BENCHMARKS.md, issue 15). Here a batch's runs are found by
//! comparing each row's keys with the next row's (arrow's `partition`), and each run is
//! counted once.
//!
//! A stream whose runs turn out short (keys not sorted) goes on through DataFusion's own
//! partial aggregation from that batch on. A partial aggregate may emit a group more than
//! once: the final aggregation above adds up its counts, so handing over mid-stream, and
//! flushing the table of runs when it grows, lose and repeat nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arrow::array::{ArrayRef, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::ScalarValue;
use datafusion::error::Result as DfResult;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::expressions::Literal;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::execution_plan::{ChildrenPropertiesMode, ReplaceChildrenOptions};
use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet, Time,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use datafusion::physical_plan::{
    displayable, DisplayAs, DisplayFormatType, ExecutionPlan, InputOrderMode, PlanProperties,
};
use futures::{StreamExt, TryStreamExt};

/// The physical optimizer rule; registered last by [`super::QueryEngine`], so the plan it
/// sees is final.
#[derive(Debug, Default)]
pub(crate) struct CountRuns;

impl PhysicalOptimizerRule for CountRuns {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| match CountRunsExec::try_new(&node) {
            Some(exec) => Ok(Transformed::yes(Arc::new(exec) as Arc<dyn ExecutionPlan>)),
            None => Ok(Transformed::no(node)),
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "neve_count_runs"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// What one aggregate of the replaced plan counts.
#[derive(Debug, Clone, Copy)]
enum Counted {
    /// `count(*)` (DataFusion's `count(1)`): every row.
    Rows,
    /// `count(k)` of the `k`th grouping expression: its group's rows, none in the null group.
    Key(usize),
}

/// A partial `AggregateExec` of only counts, run a run at a time; see the module docs.
#[derive(Debug)]
pub(crate) struct CountRunsExec {
    /// The partial aggregate this stands in for: its input, output and fallback.
    agg: Arc<dyn ExecutionPlan>,
    groups: Vec<Arc<dyn PhysicalExpr>>,
    counts: Vec<Counted>,
    metrics: ExecutionPlanMetricsSet,
}

impl CountRunsExec {
    /// `plan` as a run counter, if it is a partial aggregate of counts that one can answer
    /// exactly as it would.
    fn try_new(plan: &Arc<dyn ExecutionPlan>) -> Option<Self> {
        let agg = plan.as_ref().downcast_ref::<AggregateExec>()?;
        let by = agg.group_expr();
        if *agg.mode() != AggregateMode::Partial
            || !by.is_single()
            || by.expr().is_empty()
            || agg.limit_options().is_some()
            || agg.filter_expr().iter().any(Option::is_some)
            // An ordered aggregate emits as it goes, and the plan above may rely on it.
            || *agg.input_order_mode() != InputOrderMode::Linear
        {
            return None;
        }
        let groups: Vec<Arc<dyn PhysicalExpr>> = by.expr().iter().map(|(e, _)| e.clone()).collect();
        let counts = agg
            .aggr_expr()
            .iter()
            .map(|a| {
                let args = a.expressions();
                if a.fun().name() != "count"
                    || a.is_distinct()
                    || !a.order_bys().is_empty()
                    || args.len() != 1
                {
                    return None;
                }
                let arg = &args[0];
                if let Some(lit) = arg.as_ref().downcast_ref::<Literal>() {
                    return (!lit.value().is_null()).then_some(Counted::Rows);
                }
                groups.iter().position(|g| g == arg).map(Counted::Key)
            })
            .collect::<Option<Vec<_>>>()?;
        if counts.is_empty() {
            return None;
        }
        // The output is the grouping values, then each count's one state (an Int64).
        let schema = agg.schema();
        let fields = schema.fields();
        if fields.len() != groups.len() + counts.len()
            || fields[groups.len()..]
                .iter()
                .any(|f| f.data_type() != &DataType::Int64)
        {
            return None;
        }
        Some(Self {
            agg: plan.clone(),
            groups,
            counts,
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }
}

impl DisplayAs for CountRunsExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "NeveCountRunsExec: by runs of equal keys, else {}",
            displayable(self.agg.as_ref())
                .one_line()
                .to_string()
                .trim_end()
        )
    }
}

impl ExecutionPlan for CountRunsExec {
    fn name(&self) -> &'static str {
        "NeveCountRunsExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.agg.properties()
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        self.agg.children()
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        self.agg.apply_expressions(f)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let agg = self.agg.clone().replace_children(children, RECOMPUTE)?;
        Ok(match Self::try_new(&agg) {
            Some(exec) => Arc::new(exec),
            None => agg,
        })
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let input = self.agg.children()[0].execute(partition, context.clone())?;
        let schema = self.agg.schema();
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let metric = |name| MetricBuilder::new(&self.metrics).counter(name, partition);
        let mut table = Runs::new(self.groups.clone(), self.counts.clone(), schema.clone());
        table.elapsed = baseline.elapsed_compute().clone();
        table.runs_metric = metric("runs");
        table.handed_metric = metric("handed_over");
        let state = State::Runs {
            input,
            table: Box::new(table),
            agg: self.agg.clone(),
            context,
        };
        let stream = futures::stream::try_unfold(state, State::next)
            .inspect_ok(move |b| baseline.record_output(b.num_rows()));
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

/// New children whose properties differ from the old ones'.
const RECOMPUTE: ReplaceChildrenOptions =
    ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute);

/// Where a partition's stream is: counting runs, or handed to DataFusion's aggregation.
enum State {
    Runs {
        input: SendableRecordBatchStream,
        table: Box<Runs>,
        agg: Arc<dyn ExecutionPlan>,
        context: Arc<TaskContext>,
    },
    Handed(SendableRecordBatchStream),
    Done,
}

impl State {
    async fn next(self) -> DfResult<Option<(RecordBatch, State)>> {
        match self {
            State::Runs {
                mut input,
                mut table,
                agg,
                context,
            } => loop {
                let Some(batch) = input.next().await else {
                    return Ok((!table.is_empty())
                        .then(|| table.take())
                        .transpose()?
                        .map(|b| (b, State::Done)));
                };
                let batch = batch?;
                if !table.add(&batch)? {
                    table.handed_metric.add(1);
                    // Short runs: this batch and the rest go through DataFusion's aggregation.
                    let rest: SendableRecordBatchStream = Box::pin(RecordBatchStreamAdapter::new(
                        input.schema(),
                        futures::stream::once(async { Ok(batch) }).chain(input),
                    ));
                    let handed = hand_over(&agg, rest, context)?;
                    if table.is_empty() {
                        return Box::pin(State::Handed(handed).next()).await;
                    }
                    return Ok(Some((table.take()?, State::Handed(handed))));
                }
                if table.len() >= FLUSH_GROUPS {
                    let out = table.take()?;
                    let state = State::Runs {
                        input,
                        table,
                        agg,
                        context,
                    };
                    return Ok(Some((out, state)));
                }
            },
            State::Handed(mut s) => match s.next().await {
                Some(b) => Ok(Some((b?, State::Handed(s)))),
                None => Ok(None),
            },
            State::Done => Ok(None),
        }
    }
}

/// Groups held before they are emitted (a partial aggregate may emit a group again later).
const FLUSH_GROUPS: usize = if cfg!(test) { 5 } else { 4096 };

/// The mean run length under which counting runs stops paying: a run costs a lookup of its
/// keys as scalars, about what DataFusion spends on a few dozen rows.
const MIN_MEAN_RUN: usize = 32;

/// Rows a stream may be short of `MIN_MEAN_RUN` a run before it is handed over, so that a few
/// short batches (a file's last rows) do not decide it.
const SLACK_ROWS: usize = if cfg!(test) { 64 } else { 8192 };

/// The counts of the runs seen so far, by key (in any order: the final aggregate groups them).
struct Runs {
    groups: Vec<Arc<dyn PhysicalExpr>>,
    counts: Vec<Counted>,
    schema: SchemaRef,
    totals: HashMap<Vec<ScalarValue>, Vec<i64>, ahash::RandomState>,
    rows_seen: usize,
    runs_seen: usize,
    /// EXPLAIN ANALYZE's: time spent here, runs counted, partitions handed over.
    elapsed: Time,
    runs_metric: Count,
    handed_metric: Count,
}

impl Runs {
    fn new(groups: Vec<Arc<dyn PhysicalExpr>>, counts: Vec<Counted>, schema: SchemaRef) -> Self {
        Self {
            groups,
            counts,
            schema,
            totals: HashMap::default(),
            rows_seen: 0,
            runs_seen: 0,
            elapsed: Time::new(),
            runs_metric: Count::new(),
            handed_metric: Count::new(),
        }
    }

    fn len(&self) -> usize {
        self.totals.len()
    }

    fn is_empty(&self) -> bool {
        self.totals.is_empty()
    }

    /// Counts `batch`'s runs; `false`, counting nothing, when the stream's runs are too short
    /// to be worth it.
    fn add(&mut self, batch: &RecordBatch) -> DfResult<bool> {
        let n = batch.num_rows();
        if n == 0 {
            return Ok(true);
        }
        let _timer = self.elapsed.timer();
        let keys: Vec<ArrayRef> = self
            .groups
            .iter()
            .map(|g| g.evaluate(batch).and_then(|v| v.into_array(n)))
            .collect::<DfResult<_>>()?;
        let runs = arrow::compute::partition(&keys)?.ranges();
        if (self.runs_seen + runs.len()) * MIN_MEAN_RUN > self.rows_seen + n + SLACK_ROWS {
            return Ok(false);
        }
        // Nulls as the key's scalar sees them: a dictionary's null values too, not just its keys.
        let nulls: Vec<_> = keys.iter().map(|k| k.logical_nulls()).collect();
        self.rows_seen += n;
        self.runs_seen += runs.len();
        self.runs_metric.add(runs.len());
        for run in runs {
            let key = keys
                .iter()
                .map(|k| ScalarValue::try_from_array(k, run.start))
                .collect::<DfResult<Vec<_>>>()?;
            let len = run.len() as i64;
            let totals = self
                .totals
                .entry(key)
                .or_insert_with(|| vec![0; self.counts.len()]);
            for (total, c) in totals.iter_mut().zip(&self.counts) {
                *total += match c {
                    Counted::Key(k) if nulls[*k].as_ref().is_some_and(|n| n.is_null(run.start)) => {
                        0
                    }
                    Counted::Rows | Counted::Key(_) => len,
                };
            }
        }
        Ok(true)
    }

    /// The groups so far as the partial aggregate's output, and the table emptied.
    fn take(&mut self) -> DfResult<RecordBatch> {
        let _timer = self.elapsed.timer();
        let (keys, totals): (Vec<Vec<ScalarValue>>, Vec<Vec<i64>>) = self.totals.drain().unzip();
        let fields = self.schema.fields();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(fields.len());
        for (g, field) in fields.iter().take(self.groups.len()).enumerate() {
            let values = ScalarValue::iter_to_array(keys.iter().map(|k| k[g].clone()))?;
            columns.push(if values.data_type() == field.data_type() {
                values
            } else {
                arrow::compute::cast(&values, field.data_type())?
            });
        }
        for c in 0..self.counts.len() {
            columns.push(Arc::new(Int64Array::from_iter_values(
                totals.iter().map(|t| t[c]),
            )));
        }
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }
}

/// `rest` of a partition through the aggregate `agg` as DataFusion runs it.
fn hand_over(
    agg: &Arc<dyn ExecutionPlan>,
    rest: SendableRecordBatchStream,
    context: Arc<TaskContext>,
) -> DfResult<SendableRecordBatchStream> {
    let schema = rest.schema();
    let source = StreamingTableExec::try_new(
        schema.clone(),
        vec![Arc::new(Handed {
            schema,
            stream: Mutex::new(Some(rest)),
        })],
        None,
        Vec::new(),
        false,
        None,
    )?;
    agg.clone()
        .replace_children(vec![Arc::new(source)], RECOMPUTE)?
        .execute(0, context)
}

/// A stream already open, handed to a plan as its one partition.
struct Handed {
    schema: SchemaRef,
    stream: Mutex<Option<SendableRecordBatchStream>>,
}

impl std::fmt::Debug for Handed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Handed")
    }
}

impl PartitionStream for Handed {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let taken = self.stream.lock().ok().and_then(|mut s| s.take());
        match taken {
            Some(s) => s,
            // `hand_over` executes it once; a second run must not pass for an empty input.
            None => Box::pin(RecordBatchStreamAdapter::new(
                self.schema.clone(),
                futures::stream::once(async {
                    Err(datafusion::error::DataFusionError::Internal(
                        "a handed-over stream was executed twice".into(),
                    ))
                }),
            )),
        }
    }
}

#[cfg(test)]
mod tests;
