//! `range` and `generate_series` of integers, made a whole batch at a time.
//!
//! DataFusion's generator checks the end, steps with an overflow check and pushes, value by
//! value: 1.5 ns a number, 58% of `neve serve`'s CPU while it streams `range(500000000)` (seed
//! 002's workload, `neve bench stream`), and more than the whole HTTP side. Here a batch is
//! `start + i * step` for the batch's `i`, which the compiler vectorises. Only calls whose
//! arguments are all integer literals with a non-zero step come here; every other form (nulls,
//! timestamps, dates, a zero step, errors) is answered by DataFusion's own function, so the
//! two agree on everything but speed (a property test compares them).

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch};
use arrow::compute::SortOptions;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{Result, ScalarValue};
use datafusion::datasource::TableType;
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalSortExpr;
use datafusion::physical_plan::memory::{LazyBatchGenerator, LazyMemoryExec};
use datafusion::physical_plan::ExecutionPlan;
use parking_lot::RwLock;

/// Replaces DataFusion's `range` (`include_end` false) or `generate_series` (true).
#[derive(Debug)]
pub(crate) struct IntSeriesFunc {
    include_end: bool,
    /// DataFusion's own, for the other forms and for the schema.
    fallback: Arc<dyn TableFunctionImpl>,
}

impl IntSeriesFunc {
    pub fn new(include_end: bool, fallback: Arc<dyn TableFunctionImpl>) -> Self {
        Self {
            include_end,
            fallback,
        }
    }
}

impl TableFunctionImpl for IntSeriesFunc {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        // DataFusion's checks and errors first, whatever the form.
        let theirs = self
            .fallback
            .call_with_args(TableFunctionArgs::new(args.exprs(), args.session()))?;
        let ints: Option<Vec<i64>> = args
            .exprs()
            .iter()
            .map(|e| match e {
                Expr::Literal(ScalarValue::Int64(Some(n)), _) => Some(*n),
                _ => None,
            })
            .collect();
        let (start, end, step) = match ints.as_deref() {
            Some(&[end]) => (0, end, 1),
            Some(&[start, end]) => (start, end, 1),
            Some(&[start, end, step]) if step != 0 => (start, end, step),
            _ => return Ok(theirs),
        };
        Ok(Arc::new(IntSeriesTable {
            schema: theirs.schema(),
            series: Series::new(start, end, step, self.include_end),
        }))
    }
}

/// The values `start`, `start + step`, … up to `end` (excluded, or included with
/// `include_end`), as a count and a formula: every value lies between `start` and `end`, so
/// none overflows. (The count can be 2^64: `generate_series` of the whole 64-bit range.)
#[derive(Debug, Clone, Copy, PartialEq)]
struct Series {
    start: i64,
    step: i64,
    count: u128,
}

impl Series {
    fn new(start: i64, end: i64, step: i64, include_end: bool) -> Self {
        let (start_w, end_w, step_w) = (i128::from(start), i128::from(end), i128::from(step));
        // The distance still to go, in the step's direction; a partial step still yields
        // its first value.
        let span = if step > 0 {
            end_w - start_w
        } else {
            start_w - end_w
        };
        let stride = step_w.abs();
        let count = if span < 0 || (span == 0 && !include_end) {
            0
        } else if include_end {
            span / stride + 1
        } else {
            (span + stride - 1) / stride
        };
        Self {
            start,
            step,
            count: count as u128,
        }
    }

    /// The `i`th value; `i < count`.
    fn value(&self, i: u128) -> i64 {
        (i128::from(self.start) + i128::from(self.step) * i as i128) as i64
    }
}

#[derive(Debug)]
struct IntSeriesTable {
    schema: SchemaRef,
    series: Series,
}

#[async_trait]
impl TableProvider for IntSeriesTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let batch_size = state.config_options().execution.batch_size.get();
        let generator = Generator {
            schema: self.schema.clone(),
            series: self.series,
            next: 0,
            batch_size,
        };
        let mut exec =
            LazyMemoryExec::try_new(self.schema.clone(), vec![Arc::new(RwLock::new(generator))])?
                .with_projection(projection.cloned());
        if !exec.schema().fields().is_empty() {
            // As DataFusion's: the values come in the step's order.
            exec.add_ordering([PhysicalSortExpr::new(
                Arc::new(Column::new(exec.schema().field(0).name(), 0)),
                SortOptions {
                    descending: self.series.step < 0,
                    nulls_first: false,
                },
            )]);
        }
        Ok(Arc::new(exec))
    }
}

#[derive(Debug, Clone)]
struct Generator {
    schema: SchemaRef,
    series: Series,
    /// Index of the next value.
    next: u128,
    batch_size: usize,
}

impl fmt::Display for Generator {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "integer series: start={}, step={}, count={}, batch_size={}",
            self.series.start, self.series.step, self.series.count, self.batch_size
        )
    }
}

impl LazyBatchGenerator for Generator {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn generate_next_batch(&mut self) -> Result<Option<RecordBatch>> {
        let left = self.series.count - self.next;
        if left == 0 {
            return Ok(None);
        }
        let n = left.min(self.batch_size as u128);
        // Within one batch the values are first + k * step for k < n, all in range.
        let (first, step) = (self.series.value(self.next), self.series.step);
        let values: Vec<i64> = (0..n as i64)
            .map(|k| first.wrapping_add(k.wrapping_mul(step)))
            .collect();
        self.next += n;
        Ok(Some(RecordBatch::try_new(
            self.schema.clone(),
            vec![Arc::new(Int64Array::from(values))],
        )?))
    }

    fn reset_state(&self) -> Arc<RwLock<dyn LazyBatchGenerator>> {
        Arc::new(RwLock::new(Self {
            next: 0,
            ..self.clone()
        }))
    }
}

/// Put ours in place of DataFusion's `range` and `generate_series` in `ctx`.
pub(crate) fn register(ctx: &datafusion::prelude::SessionContext) {
    let state = ctx.state();
    for (name, include_end) in [("range", false), ("generate_series", true)] {
        if let Some(theirs) = state.table_functions().get(name) {
            ctx.register_udtf(
                name,
                Arc::new(IntSeriesFunc::new(include_end, theirs.function().clone())),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;
    use arrow::datatypes::Int64Type;
    use datafusion::prelude::SessionContext;
    use proptest::prelude::*;

    fn with_ours() -> SessionContext {
        let ctx = SessionContext::new();
        register(&ctx);
        ctx
    }

    async fn values(ctx: &SessionContext, sql: &str) -> std::result::Result<Vec<i64>, String> {
        let batches = ctx
            .sql(sql)
            .await
            .map_err(|e| e.to_string())?
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        Ok(batches
            .iter()
            .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
            .collect())
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    }

    proptest! {
        /// Ours gives what DataFusion's gives (values, or the same error), near the ends of
        /// the 64-bit range too, in batches of any size.
        #[test]
        fn same_as_datafusion(
            start in prop_oneof![-40i64..40, Just(i64::MIN), Just(i64::MAX), Just(i64::MAX - 3),
                                 Just(i64::MIN + 2)],
            end in prop_oneof![-40i64..40, Just(i64::MIN), Just(i64::MAX), Just(i64::MIN + 5),
                               Just(i64::MAX - 1)],
            step in prop_oneof![-7i64..8, Just(i64::MAX), Just(i64::MIN), Just(i64::MAX / 2)],
            args in 1usize..4,
            batch in 1usize..9,
        ) {
            // Series that span the whole 64-bit range are too long to compare.
            let long = |s: &Series| s.count > 10_000;
            for f in ["range", "generate_series"] {
                let call = match args {
                    1 => format!("{f}({end})"),
                    2 => format!("{f}({start}, {end})"),
                    _ => format!("{f}({start}, {end}, {step})"),
                };
                let (s, e, st) = match args { 1 => (0, end, 1), 2 => (start, end, 1), _ => (start, end, step) };
                if st != 0 && long(&Series::new(s, e, st, f == "generate_series")) {
                    continue;
                }
                let sql = format!("SELECT value FROM {call}");
                let rt = runtime();
                let config = datafusion::prelude::SessionConfig::new().with_batch_size(batch);
                let theirs = rt.block_on(values(&SessionContext::new_with_config(config.clone()), &sql));
                let ctx = SessionContext::new_with_config(config);
                register(&ctx);
                let ours = rt.block_on(values(&ctx, &sql));
                prop_assert_eq!(ours, theirs, "{}", sql);
            }
        }
    }

    #[test]
    fn nulls_timestamps_and_limits_are_answered() {
        let rt = runtime();
        let ctx = with_ours();
        assert_eq!(
            rt.block_on(values(&ctx, "SELECT value FROM range(NULL)")),
            Ok(vec![])
        );
        assert_eq!(
            rt.block_on(values(&ctx, "SELECT value FROM range(10) LIMIT 3")),
            Ok(vec![0, 1, 2])
        );
        // 2^64 values: counted in 128 bits.
        assert_eq!(
            rt.block_on(values(
                &ctx,
                "SELECT value FROM generate_series(-9223372036854775808, 9223372036854775807) LIMIT 2"
            )),
            Ok(vec![i64::MIN, i64::MIN + 1])
        );
        assert_eq!(
            rt.block_on(values(
                &ctx,
                "SELECT value FROM range(5, 0, -2) ORDER BY value"
            )),
            Ok(vec![1, 3, 5])
        );
        assert!(rt
            .block_on(values(&ctx, "SELECT value FROM range(1, 5, 0)"))
            .unwrap_err()
            .contains("Step cannot be zero"));
        let n = rt.block_on(async {
            ctx.sql("SELECT count(*) FROM generate_series(TIMESTAMP '2021-01-01', TIMESTAMP '2021-01-02', INTERVAL '1 hour')")
                .await
                .unwrap()
                .collect()
                .await
                .unwrap()
        });
        assert_eq!(n[0].column(0).as_primitive::<Int64Type>().value(0), 25);
    }
}
