//! Answers `count(*)` from the log, without opening a data file, when it can be exact.
//!
//! The log holds every file's row count and per-column null counts. A plan of the shape
//! `Aggregate(count…) ← [Projection | Filter | SubqueryAlias]* ← TableScan(neve table)` is
//! replaced by its result when every filter and every grouping expression has one known value
//! per file (see `constant.rs`): the count of a table, of a month, by month when the table is
//! partitioned by month. Anything else runs normally.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::Array;
use datafusion::catalog::TableProvider;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, ScalarValue};
use datafusion::datasource::source_as_provider;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{Aggregate, EmptyRelation, Expr, LogicalPlan, Values};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};

use super::constant::per_file;
use super::provider::{stats_form, SnapshotTable};

/// The optimizer rule; registered by [`super::QueryEngine`].
#[derive(Debug, Default)]
pub(crate) struct CountFromLog;

impl OptimizerRule for CountFromLog {
    fn name(&self) -> &str {
        "neve_count_from_log"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::TopDown)
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> DfResult<Transformed<LogicalPlan>> {
        let LogicalPlan::Aggregate(agg) = &plan else {
            return Ok(Transformed::no(plan));
        };
        match answer(agg) {
            Some(answered) => {
                tracing::debug!("count answered from the table log");
                Ok(Transformed::yes(answered))
            }
            None => Ok(Transformed::no(plan)),
        }
    }
}

/// The neve tables `plan` reads whose file lists are not read yet and whose heads do not
/// answer what the plan asks of them.
pub(crate) fn tables_to_load(plan: &LogicalPlan) -> Vec<Arc<dyn TableProvider>> {
    let mut out: Vec<Arc<dyn TableProvider>> = Vec::new();
    let _ = plan.apply_with_subqueries(|node| {
        match node {
            LogicalPlan::Aggregate(agg) if answer(agg).is_some() => {
                return Ok(TreeNodeRecursion::Jump)
            }
            LogicalPlan::TableScan(scan) => {
                if let Ok(provider) = source_as_provider(&scan.source) {
                    let pending = provider
                        .downcast_ref::<SnapshotTable>()
                        .is_some_and(|t| t.snapshot().is_none());
                    if pending && !out.iter().any(|p| Arc::ptr_eq(p, &provider)) {
                        out.push(provider);
                    }
                }
            }
            _ => {}
        }
        Ok(TreeNodeRecursion::Continue)
    });
    out
}

/// What one aggregate expression counts.
enum Count {
    Rows,
    NonNull(String),
}

fn count_kind(e: &Expr) -> Option<Count> {
    let e = match e {
        Expr::Alias(a) => a.expr.as_ref(),
        e => e,
    };
    let Expr::AggregateFunction(AggregateFunction { func, params }) = e else {
        return None;
    };
    if func.name() != "count"
        || params.distinct
        || params.filter.is_some()
        || !params.order_by.is_empty()
        || params.args.len() != 1
    {
        return None;
    }
    match &params.args[0] {
        Expr::Literal(v, _) if !v.is_null() => Some(Count::Rows),
        Expr::Column(c) => Some(Count::NonNull(c.name.clone())),
        _ => None,
    }
}

/// Replace columns that name a projection's outputs by the expressions behind them.
fn substitute(e: &Expr, outputs: &HashMap<String, Expr>) -> Expr {
    e.clone()
        .transform(|e| match &e {
            Expr::Column(c) => match outputs.get(&c.name) {
                Some(inner) => Ok(Transformed::yes(inner.clone())),
                None => Ok(Transformed::no(e)),
            },
            _ => Ok(Transformed::no(e)),
        })
        .map(|t| t.data)
        .unwrap_or_else(|_| e.clone())
}

fn answer(agg: &Aggregate) -> Option<LogicalPlan> {
    if agg.aggr_expr.is_empty() {
        return None;
    }
    let mut counts: Vec<Count> = agg
        .aggr_expr
        .iter()
        .map(count_kind)
        .collect::<Option<_>>()?;
    if agg
        .group_expr
        .iter()
        .any(|g| matches!(g, Expr::GroupingSet(_)))
    {
        return None;
    }
    let mut group = agg.group_expr.clone();
    let mut filters: Vec<Expr> = Vec::new();
    let mut input = agg.input.as_ref();
    let scan = loop {
        match input {
            LogicalPlan::Projection(p) => {
                let outputs: HashMap<String, Expr> = p
                    .schema
                    .fields()
                    .iter()
                    .zip(&p.expr)
                    .map(|(f, e)| (f.name().clone(), e.clone().unalias()))
                    .collect();
                group = group.iter().map(|g| substitute(g, &outputs)).collect();
                filters = filters.iter().map(|f| substitute(f, &outputs)).collect();
                for c in &mut counts {
                    if let Count::NonNull(name) = c {
                        match outputs.get(name.as_str()) {
                            Some(Expr::Column(Column { name: inner, .. })) => *name = inner.clone(),
                            Some(_) => return None,
                            None => {}
                        }
                    }
                }
                input = p.input.as_ref();
            }
            LogicalPlan::Filter(f) => {
                filters.extend(split_conjunction(&f.predicate).into_iter().cloned());
                input = f.input.as_ref();
            }
            LogicalPlan::SubqueryAlias(s) => input = s.input.as_ref(),
            LogicalPlan::TableScan(scan) if scan.fetch.is_none() => break scan,
            _ => return None,
        }
    };
    filters.extend(scan.filters.iter().cloned());
    let provider = source_as_provider(&scan.source).ok()?;
    let table = provider.downcast_ref::<SnapshotTable>()?;
    if !table.counts_exactly() {
        // The files hold several rows of some keys: only the merged read counts.
        return None;
    }
    let stats = table.stats()?.as_ref();
    let n = stats.len();

    let mut keep = vec![true; n];
    for f in &filters {
        for (k, d) in keep.iter_mut().zip(table.decide(stats, f)) {
            if *k {
                *k = d?;
            }
        }
    }
    let groups = group
        .iter()
        .map(|g| per_file(&stats_form(g), stats))
        .collect::<Option<Vec<_>>>()?;
    if groups
        .iter()
        .any(|g| (0..n).any(|i| keep[i] && !g.constant.value(i)))
    {
        return None;
    }
    let null_counts = counts
        .iter()
        .map(|c| match c {
            Count::Rows => Some(None),
            Count::NonNull(name) => stats.column(name).map(|s| Some(s.nulls.clone())),
        })
        .collect::<Option<Vec<_>>>()?;

    let mut order: Vec<Vec<ScalarValue>> = Vec::new();
    let mut totals: HashMap<Vec<ScalarValue>, Vec<i64>> = HashMap::new();
    if group.is_empty() {
        order.push(Vec::new());
        totals.insert(Vec::new(), vec![0; counts.len()]);
    }
    for i in (0..n).filter(|&i| keep[i]) {
        let key = groups
            .iter()
            .map(|g| ScalarValue::try_from_array(&g.values, i))
            .collect::<Result<Vec<_>, _>>()
            .ok()?;
        let rows = stats.files[i].rows as i64;
        let slot = totals.entry(key.clone()).or_insert_with(|| {
            order.push(key);
            vec![0; counts.len()]
        });
        for (j, nulls) in null_counts.iter().enumerate() {
            slot[j] += match nulls {
                None => rows,
                Some(nc) if nc.is_valid(i) => rows - nc.value(i) as i64,
                Some(_) => return None,
            };
        }
    }

    let schema = agg.schema.clone();
    if order.is_empty() {
        return Some(LogicalPlan::EmptyRelation(EmptyRelation {
            produce_one_row: false,
            schema,
        }));
    }
    let fields = schema.fields();
    let mut rows = Vec::with_capacity(order.len());
    for key in order {
        let counts = &totals[&key];
        let mut row = Vec::with_capacity(fields.len());
        for (k, v) in key.into_iter().enumerate() {
            let want = fields[k].data_type();
            let v = if v.data_type() == *want {
                v
            } else {
                v.cast_to(want).ok()?
            };
            row.push(Expr::Literal(v, None));
        }
        for c in counts {
            row.push(Expr::Literal(ScalarValue::Int64(Some(*c)), None));
        }
        rows.push(row);
    }
    Some(LogicalPlan::Values(Values {
        schema: Arc::clone(&schema),
        values: rows,
    }))
}
