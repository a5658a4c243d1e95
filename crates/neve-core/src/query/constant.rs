//! Expressions that are constant within a file, evaluated for every file at once from the
//! log's statistics.
//!
//! A month-partitioned file holds one month, so `date_trunc('month', ts)` and
//! `extract(month FROM ts)` have one value per file, and so has any expression built only from
//! such parts and literals (`date_trunc('month', ts) >= '2021-01-01'`). That value decides
//! whether a file can be skipped and lets `count(*) ... GROUP BY` be answered from the log.
//!
//! Leaves are recognised as:
//! - a column whose min equals its max in the file, without nulls;
//! - `date_trunc(unit, col)`: constant where the truncations of min and max agree
//!   (`date_trunc` is monotonic, so every value between truncates the same);
//! - `date_part(unit, col)` (SQL `extract`): constant where min and max agree after truncating
//!   to that unit (a month's values all have the same year, month, quarter...).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch};
use arrow::compute::kernels::boolean::and;
use arrow::datatypes::{Field, Schema};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, ScalarValue};
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::create_physical_expr;

use super::stats::{single_valued, FileStats};

/// An expression's value in each file, and whether it is really constant there.
pub(crate) struct PerFile {
    pub values: ArrayRef,
    /// True where `values` is the expression's value for every row of the file.
    pub constant: BooleanArray,
}

/// Evaluate `expr` per file; `None` when it is not made of recognised leaves and literals
/// (or the evaluation fails: then it is simply not used).
pub(crate) fn per_file(expr: &Expr, stats: &FileStats) -> Option<PerFile> {
    let n = stats.len();
    let mut leaves: Vec<(Expr, ArrayRef, BooleanArray)> = Vec::new();
    let mut ok = true;
    let rewritten = expr
        .clone()
        .transform_down(|e| {
            if !ok {
                return Ok(Transformed::new(e, false, TreeNodeRecursion::Stop));
            }
            match leaf(&e, stats) {
                Leaf::Yes(values, constant) => {
                    let name = format!("__neve_leaf_{}", leaves.len());
                    leaves.push((e, values, constant));
                    Ok(Transformed::new(
                        Expr::Column(Column::new_unqualified(name)),
                        true,
                        TreeNodeRecursion::Jump,
                    ))
                }
                Leaf::Unusable => {
                    ok = false;
                    Ok(Transformed::new(e, false, TreeNodeRecursion::Stop))
                }
                Leaf::Inner => Ok(Transformed::no(e)),
            }
        })
        .ok()?
        .data;
    if !ok || contains_volatile(&rewritten) {
        return None;
    }
    let fields: Vec<Field> = leaves
        .iter()
        .enumerate()
        .map(|(i, (_, v, _))| Field::new(format!("__neve_leaf_{i}"), v.data_type().clone(), true))
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new_with_options(
        schema.clone(),
        leaves.iter().map(|(_, v, _)| v.clone()).collect(),
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(n)),
    )
    .ok()?;
    let values = evaluate(&rewritten, &batch)?;
    let mut constant = BooleanArray::from(vec![true; n]);
    for (_, _, c) in &leaves {
        constant = and(&constant, c).ok()?;
    }
    Some(PerFile { values, constant })
}

enum Leaf {
    /// Per-file values and constancy.
    Yes(ArrayRef, BooleanArray),
    /// Refers to columns in a way this module cannot evaluate per file.
    Unusable,
    /// Look at the children.
    Inner,
}

fn leaf(e: &Expr, stats: &FileStats) -> Leaf {
    match e {
        Expr::Column(c) => match stats.column(&c.name) {
            Some(col) => Leaf::Yes(col.min.clone(), single_valued(&col)),
            None => Leaf::Unusable,
        },
        Expr::ScalarFunction(ScalarFunction { func, args }) if args.len() == 2 => {
            // Other argument shapes: the children may still be leaves (a single-valued column).
            let (Expr::Literal(unit, _), Expr::Column(c)) = (&args[0], &args[1]) else {
                return Leaf::Inner;
            };
            let Some(unit) = unit_of(unit) else {
                return Leaf::Inner;
            };
            let trunc_unit = match func.name() {
                "date_trunc" => Some(unit.clone()),
                "date_part" | "datepart" => part_truncation(&unit),
                _ => return Leaf::Inner,
            };
            let Some(trunc_unit) = trunc_unit else {
                return Leaf::Unusable;
            };
            let Some(col) = stats.column(&c.name) else {
                return Leaf::Unusable;
            };
            match leaf_values(e, &c.name, &trunc_unit, &col) {
                Some((v, k)) => Leaf::Yes(v, k),
                None => Leaf::Unusable,
            }
        }
        _ => Leaf::Inner,
    }
}

fn contains_volatile(e: &Expr) -> bool {
    e.is_volatile()
}

fn unit_of(v: &ScalarValue) -> Option<String> {
    match v {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => Some(s.to_ascii_lowercase()),
        _ => None,
    }
}

/// The `date_trunc` unit under which a `date_part` unit is constant.
fn part_truncation(unit: &str) -> Option<String> {
    Some(
        match unit {
            "year" | "years" | "y" => "year",
            "quarter" => "quarter",
            "month" | "months" | "mon" => "month",
            "week" | "weeks" | "w" => "week",
            "day" | "days" | "d" | "doy" | "dow" | "isodow" => "day",
            "hour" | "hours" | "h" => "hour",
            "minute" | "minutes" | "m" => "minute",
            _ => return None,
        }
        .to_string(),
    )
}

/// The leaf evaluated at each file's min, and where truncating min and max to `trunc_unit`
/// agrees (with no nulls in the file).
fn leaf_values(
    leaf: &Expr,
    column: &str,
    trunc_unit: &str,
    col: &super::stats::ColumnArrays,
) -> Option<(ArrayRef, BooleanArray)> {
    let unqualified = Expr::Column(Column::new_unqualified(column));
    let leaf = leaf
        .clone()
        .transform(|e| match e {
            Expr::Column(_) => Ok(Transformed::yes(unqualified.clone())),
            e => Ok(Transformed::no(e)),
        })
        .ok()?
        .data;
    let trunc = Expr::ScalarFunction(ScalarFunction {
        func: datafusion::functions::datetime::date_trunc(),
        args: vec![
            Expr::Literal(ScalarValue::Utf8(Some(trunc_unit.to_string())), None),
            unqualified,
        ],
    });
    let at = |a: &ArrayRef| -> Option<RecordBatch> {
        let schema = Arc::new(Schema::new(vec![Field::new(
            column,
            a.data_type().clone(),
            true,
        )]));
        RecordBatch::try_new(schema, vec![a.clone()]).ok()
    };
    let (lo, hi) = (at(&col.min)?, at(&col.max)?);
    let values = evaluate(&leaf, &lo)?;
    let t_lo = evaluate(&trunc, &lo)?;
    let t_hi = evaluate(&trunc, &hi)?;
    let eq = arrow::compute::kernels::cmp::eq(&t_lo, &t_hi).ok()?;
    let constant = (0..eq.len())
        .map(|i| {
            Some(eq.is_valid(i) && eq.value(i) && col.nulls.is_valid(i) && col.nulls.value(i) == 0)
        })
        .collect();
    Some((values, constant))
}

/// Plan `expr` against `schema` (unqualified column names); `None` when it does not plan.
pub(crate) fn physical(
    expr: &Expr,
    schema: arrow::datatypes::SchemaRef,
) -> Option<Arc<dyn datafusion::physical_expr::PhysicalExpr>> {
    let df_schema = DFSchema::try_from(schema).ok()?;
    create_physical_expr(
        expr,
        &df_schema,
        &ExecutionProps::new(),
        &PhysicalPlanningContext::default(),
    )
    .ok()
}

/// Evaluate an expression over a batch whose columns it names.
fn evaluate(expr: &Expr, batch: &RecordBatch) -> Option<ArrayRef> {
    physical(expr, batch.schema())?
        .evaluate(batch)
        .ok()?
        .into_array(batch.num_rows())
        .ok()
}

/// A user's predicate with SQL's type coercion applied (`fare > '10'` compares numbers), and
/// checked to plan: type errors surface here, before any file is touched.
pub(crate) fn coerce_predicate(expr: Expr, schema: &DFSchema) -> crate::error::Result<Expr> {
    use datafusion::logical_expr::simplify::SimplifyContext;
    use datafusion::optimizer::simplify_expressions::ExprSimplifier;
    let schema = Arc::new(schema.clone());
    let simplifier = ExprSimplifier::new(
        SimplifyContext::builder()
            .with_schema(schema.clone())
            .build(),
    );
    let expr = simplifier
        .coerce(expr, &schema)
        .map_err(super::query_error)?;
    create_physical_expr(
        &expr,
        &schema,
        &ExecutionProps::new(),
        &PhysicalPlanningContext::default(),
    )
    .map_err(super::query_error)?;
    Ok(expr)
}
