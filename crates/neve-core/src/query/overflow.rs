//! Integer `+`, `-` and `*` that fail on overflow, as in PostgreSQL, DuckDB and Trino.
//!
//! DataFusion computes them wrapping: `SELECT 9223372036854775807 + 1` answers
//! -9223372036854775808, and a sum of products can be silently wrong. After type coercion, an
//! analyzer rule puts a checked function in place of each such operator whose two sides are of
//! one integer type; the function runs arrow's checked kernels, and keeps the operator's name
//! (`a + b`), so result columns are named as before.

use std::sync::Arc;

use arrow::array::Array;
use arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

/// The analyzer rule (added after DataFusion's own, so types are coerced already).
#[derive(Debug, Default)]
pub(crate) struct CheckedIntegerArithmetic;

impl AnalyzerRule for CheckedIntegerArithmetic {
    fn name(&self) -> &str {
        "neve_checked_integer_arithmetic"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| {
            // Most nodes hold no arithmetic: their input schemas are not merged for nothing.
            let mut arithmetic = false;
            node.apply_expressions(|e| {
                arithmetic = e.exists(|e| Ok(candidate(e).is_some()))?;
                Ok(if arithmetic {
                    TreeNodeRecursion::Stop
                } else {
                    TreeNodeRecursion::Continue
                })
            })?;
            if !arithmetic {
                return Ok(Transformed::no(node));
            }
            let schema = merge_schema(&node.inputs());
            let names = NamePreserver::new(&node);
            node.map_expressions(|e| {
                let saved = names.save(&e);
                let out = e.transform_up(|e| checked(e, &schema))?;
                Ok(if out.transformed {
                    out.update_data(|e| saved.restore(e))
                } else {
                    out
                })
            })
        })
        .map(|t| t.data)
    }
}

/// The checked operation an expression would become, if it is `+`, `-` or `*`.
fn candidate(e: &Expr) -> Option<Op> {
    match e {
        Expr::BinaryExpr(BinaryExpr { op, .. }) => match op {
            Operator::Plus => Some(Op::Add),
            Operator::Minus => Some(Op::Sub),
            Operator::Multiply => Some(Op::Mul),
            _ => None,
        },
        _ => None,
    }
}

fn checked(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let Some(op) = candidate(&e) else {
        return Ok(Transformed::no(e));
    };
    let Expr::BinaryExpr(BinaryExpr { left, right, .. }) = &e else {
        unreachable!("a candidate is a binary expression")
    };
    // Types it cannot tell (an outer reference it does not see) stay as DataFusion has them.
    let (Ok(l), Ok(r)) = (left.get_type(schema), right.get_type(schema)) else {
        return Ok(Transformed::no(e));
    };
    if l != r || !l.is_integer() {
        return Ok(Transformed::no(e));
    }
    let Expr::BinaryExpr(BinaryExpr { left, right, .. }) = e else {
        unreachable!("matched above")
    };
    Ok(Transformed::yes(Expr::ScalarFunction(
        ScalarFunction::new_udf(
            Arc::new(ScalarUDF::new_from_impl(Checked::new(op))),
            vec![*left, *right],
        ),
    )))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    Add,
    Sub,
    Mul,
}

impl Op {
    fn symbol(self) -> &'static str {
        match self {
            Op::Add => "+",
            Op::Sub => "-",
            Op::Mul => "*",
        }
    }
}

/// `a + b`, `a - b` or `a * b` of two integers of one type, failing on overflow.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Checked {
    op: Op,
    signature: Signature,
}

impl Checked {
    fn new(op: Op) -> Self {
        Self {
            op,
            signature: Signature::any(2, Volatility::Immutable),
        }
    }

    fn name_of(&self, args: &[Expr]) -> String {
        match args {
            [l, r] => format!(
                "{} {} {}",
                l.schema_name(),
                self.op.symbol(),
                r.schema_name()
            ),
            _ => self.name().to_string(),
        }
    }
}

impl ScalarUDFImpl for Checked {
    fn name(&self) -> &str {
        match self.op {
            Op::Add => "neve_checked_add",
            Op::Sub => "neve_checked_sub",
            Op::Mul => "neve_checked_mul",
        }
    }

    fn display_name(&self, args: &[Expr]) -> Result<String> {
        Ok(self.name_of(args))
    }

    fn schema_name(&self, args: &[Expr]) -> Result<String> {
        Ok(self.name_of(args))
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        use arrow::compute::kernels::numeric::{add, mul, sub};
        let [l, r] = args.args.as_slice() else {
            unreachable!("two arguments by the signature")
        };
        let datum = |v: &ColumnarValue| -> Result<Box<dyn arrow::array::Datum>> {
            Ok(match v {
                ColumnarValue::Array(a) => Box::new(a.clone()),
                ColumnarValue::Scalar(s) => Box::new(s.to_scalar()?),
            })
        };
        let (a, b) = (datum(l)?, datum(r)?);
        let out = match self.op {
            Op::Add => add(a.as_ref(), b.as_ref())?,
            Op::Sub => sub(a.as_ref(), b.as_ref())?,
            Op::Mul => mul(a.as_ref(), b.as_ref())?,
        };
        Ok(match (l, r) {
            (ColumnarValue::Scalar(_), ColumnarValue::Scalar(_)) if out.len() == 1 => {
                ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
            }
            _ => ColumnarValue::Array(out),
        })
    }
}
