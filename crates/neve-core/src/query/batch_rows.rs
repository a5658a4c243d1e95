//! Rows per batch by bytes: a narrow result streams in large batches (few messages), a wide
//! one in small batches (little memory per scan partition).

use arrow::datatypes::{DataType, Schema};
use datafusion::common::config::ConfigNonZeroUsize;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::DataFrame;

/// DataFusion's default: batches never get smaller than this.
const MIN_ROWS: usize = 8192;

/// `df` with its batches sized to about `bytes`, between 8,192 rows and `max_rows`.
pub(crate) fn sized(df: DataFrame, max_rows: usize, bytes: usize) -> DataFrame {
    let width = widest_row(df.logical_plan(), df.schema().as_arrow());
    let rows = (bytes / width.max(1)).clamp(MIN_ROWS.min(max_rows), max_rows);
    let (mut state, plan) = df.into_parts();
    // Zero rows (a `batch_rows` of 0) is no size: the session's stays.
    if let Ok(rows) = ConfigNonZeroUsize::try_new(rows) {
        state.config_mut().options_mut().execution.batch_size = rows;
    }
    DataFrame::new(state, plan)
}

/// Bytes per row of the widest of the result and the plan's scans (as they read, projected).
fn widest_row(plan: &LogicalPlan, result: &Schema) -> usize {
    let mut widest = row_bytes(result);
    let _ = plan.apply(|p| {
        if let LogicalPlan::TableScan(s) = p {
            widest = widest.max(row_bytes(s.projected_schema.as_arrow()));
        }
        Ok(TreeNodeRecursion::Continue)
    });
    widest
}

/// An estimate of a row's bytes in memory: fixed widths as they are; strings, binaries and
/// nested values by a typical size (their lengths are not known before reading).
fn row_bytes(schema: &Schema) -> usize {
    schema
        .fields()
        .iter()
        .map(|f| value_bytes(f.data_type()))
        .sum()
}

fn value_bytes(t: &DataType) -> usize {
    match t {
        DataType::Null => 0,
        DataType::Boolean => 1,
        DataType::Struct(fields) => fields.iter().map(|f| value_bytes(f.data_type())).sum(),
        DataType::Dictionary(k, _) => value_bytes(k),
        t => t.primitive_width().unwrap_or(32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{Field, TimeUnit};

    #[test]
    fn rows_follow_the_width() {
        let narrow = Schema::new(vec![Field::new("v", DataType::UInt64, false)]);
        assert_eq!(row_bytes(&narrow), 8);
        let mut wide = vec![
            Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
            Field::new("s", DataType::Utf8View, true),
            Field::new(
                "x",
                DataType::Struct(vec![Field::new("a", DataType::Int32, true)].into()),
                true,
            ),
        ];
        assert_eq!(row_bytes(&Schema::new(wide.clone())), 8 + 32 + 4);
        wide.push(Field::new("b", DataType::Boolean, true));
        assert_eq!(row_bytes(&Schema::new(wide)), 8 + 32 + 4 + 1);
    }
}

#[cfg(test)]
mod engine_tests {
    use futures::StreamExt;

    use crate::query::{QueryEngine, QueryLimits};

    async fn first_batch_rows(e: &QueryEngine, sql: &str) -> usize {
        let mut s = e.stream(sql).await.unwrap();
        s.next().await.unwrap().unwrap().num_rows()
    }

    #[tokio::test]
    async fn batches_hold_about_the_bytes_asked_for() {
        let e = QueryEngine::with_limits(QueryLimits {
            batch_rows: Some(131_072),
            batch_bytes: Some(1 << 20),
            ..Default::default()
        });
        // 8 bytes a row: the most rows allowed.
        let narrow = "SELECT value FROM range(1000000)";
        assert_eq!(first_batch_rows(&e, narrow).await, 131_072);
        // 8 + 32 (a string's estimate) bytes a row.
        let wide = "SELECT value, CAST(value AS VARCHAR) AS s FROM range(1000000)";
        assert_eq!(first_batch_rows(&e, wide).await, (1 << 20) / 40);
        // Never fewer than DataFusion's 8,192.
        let widest = "SELECT value, CAST(value AS VARCHAR) AS a, CAST(value AS VARCHAR) AS b, \
                      CAST(value AS VARCHAR) AS c, CAST(value AS VARCHAR) AS d FROM range(100000)";
        assert_eq!(first_batch_rows(&e, widest).await, 8192);
        // Without a byte target, batch_rows as it is.
        let plain = QueryEngine::with_limits(QueryLimits {
            batch_rows: Some(131_072),
            ..Default::default()
        });
        assert_eq!(first_batch_rows(&plain, wide).await, 131_072);
    }
}
