use std::sync::Arc;

use arrow::array::{DictionaryArray, Float64Array, Int32Array, RecordBatch, StringViewArray};
use arrow::datatypes::{DataType, Field, Int32Type, Schema, SchemaRef};
use datafusion::datasource::MemTable;
use datafusion::execution::SessionStateBuilder;
use datafusion::physical_plan::displayable;
use datafusion::prelude::{SessionConfig, SessionContext};
use proptest::prelude::*;

use super::*;

const WORDS: [&str; 5] = [
    "a",
    "bb",
    "ccc",
    "a value longer than a view's twelve bytes",
    "",
];

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k1", DataType::Utf8View, true),
        Field::new("k2", DataType::Int32, true),
        Field::new(
            "k3",
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            true,
        ),
        Field::new("k4", DataType::Float64, true),
    ]))
}

/// A batch of `runs` (value codes and lengths), shuffled by `seed` unless it is 0. Code 5 is
/// null in every column.
fn batch(runs: &[(u8, u8, usize)], seed: u64) -> RecordBatch {
    let mut rows: Vec<(u8, u8)> = runs
        .iter()
        .flat_map(|&(a, b, n)| std::iter::repeat_n((a, b), n))
        .collect();
    if seed != 0 {
        let mut x = seed | 1;
        for i in (1..rows.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            rows.swap(i, (x % (i as u64 + 1)) as usize);
        }
    }
    let word = |c: u8| (c < 5).then(|| WORDS[c as usize]);
    let k1: StringViewArray = rows.iter().map(|r| word(r.0)).collect();
    let k2: Int32Array = rows
        .iter()
        .map(|r| (r.1 < 5).then_some(r.1 as i32 - 2))
        .collect();
    let k3: DictionaryArray<Int32Type> = rows.iter().map(|r| word(r.1)).collect();
    // Zeros of both signs and NaN, which grouping tells apart by their bits.
    let floats = [0.0, -0.0, f64::NAN, 1.5, f64::INFINITY];
    let k4: Float64Array = rows
        .iter()
        .map(|r| (r.0 < 5).then(|| floats[r.0 as usize]))
        .collect();
    RecordBatch::try_new(
        schema(),
        vec![Arc::new(k1), Arc::new(k2), Arc::new(k3), Arc::new(k4)],
    )
    .unwrap()
}

fn context(counting_runs: bool) -> SessionContext {
    let config = SessionConfig::new().with_target_partitions(3);
    let mut state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features();
    if counting_runs {
        state = state.with_physical_optimizer_rule(Arc::new(CountRuns));
    }
    SessionContext::new_with_state(state.build())
}

/// The rows of `sql` over `partitions`, sorted, and the physical plan.
async fn run(
    counting_runs: bool,
    partitions: &[Vec<RecordBatch>],
    sql: &str,
) -> (Vec<String>, String) {
    let ctx = context(counting_runs);
    let table = MemTable::try_new(schema(), partitions.to_vec()).unwrap();
    ctx.register_table("t", Arc::new(table)).unwrap();
    let df = ctx.sql(sql).await.unwrap();
    let plan = df.clone().create_physical_plan().await.unwrap();
    let shown = displayable(plan.as_ref()).indent(false).to_string();
    let batches = datafusion::physical_plan::collect(plan, ctx.task_ctx())
        .await
        .unwrap();
    let text = arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string();
    let mut rows: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with('|'))
        .skip(1)
        .map(str::to_string)
        .collect();
    rows.sort();
    (rows, shown)
}

const QUERIES: [&str; 7] = [
    "SELECT k1, count(*) AS c, count(k1) AS ck FROM t GROUP BY k1",
    "SELECT k1, k2, count(*) FROM t GROUP BY k1, k2",
    "SELECT k3, count(1) AS c, count(k3) FROM t GROUP BY k3",
    "SELECT count(*) AS c, k2 + 1 AS e FROM t GROUP BY k2 + 1",
    "SELECT k4, k2, count(*), count(k4) FROM t GROUP BY k4, k2",
    "SELECT k1, count(k2) FROM t GROUP BY k1",
    "SELECT count(*) AS c, k1 FROM t WHERE k2 > -1 GROUP BY k1 ORDER BY c DESC, k1",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Any mix of sorted and shuffled batches, in any partitions: the same groups and counts
    /// as DataFusion's own aggregation.
    #[test]
    fn counts_as_datafusion_does(
        partitions in prop::collection::vec(
            prop::collection::vec(
                (prop::collection::vec((0u8..6, 0u8..6, 1usize..90), 1..6), any::<bool>(), any::<u64>()),
                0..4,
            ),
            1..4,
        ),
    ) {
        let partitions: Vec<Vec<RecordBatch>> = partitions
            .iter()
            .map(|p| p.iter().map(|(runs, shuffle, seed)| batch(runs, if *shuffle { *seed | 1 } else { 0 })).collect())
            .collect();
        let rt = tokio::runtime::Runtime::new().unwrap();
        for sql in QUERIES {
            let (theirs, _) = rt.block_on(run(false, &partitions, sql));
            let (ours, _) = rt.block_on(run(true, &partitions, sql));
            prop_assert_eq!(ours, theirs, "{}", sql);
        }
    }
}

/// The rule takes counts by keys and expressions, and leaves other aggregates alone.
#[test]
fn replaces_only_counts() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let parts = vec![vec![batch(&[(0, 0, 10), (1, 1, 10)], 0)]];
    for sql in &QUERIES[..5] {
        let (_, plan) = rt.block_on(run(true, &parts, sql));
        assert!(plan.contains("NeveCountRunsExec"), "{sql}:\n{plan}");
    }
    for sql in [
        "SELECT k1, count(k2) FROM t GROUP BY k1",
        "SELECT k1, sum(k2) FROM t GROUP BY k1",
        "SELECT k1, count(DISTINCT k2) FROM t GROUP BY k1",
        "SELECT k1, count(*) FILTER (WHERE k2 > 0) FROM t GROUP BY k1",
        "SELECT count(*) FROM t",
    ] {
        let (_, plan) = rt.block_on(run(true, &parts, sql));
        assert!(!plan.contains("NeveCountRunsExec"), "{sql}:\n{plan}");
    }
}

/// Long runs are counted; a stream whose runs are short is handed over, counting nothing of
/// the batch that showed it.
#[test]
fn hands_over_short_runs() {
    let groups: Vec<Arc<dyn PhysicalExpr>> = vec![Arc::new(
        datafusion::physical_expr::expressions::Column::new("k1", 0),
    )];
    let out = Arc::new(Schema::new(vec![
        Field::new("k1", DataType::Utf8View, true),
        Field::new("c", DataType::Int64, false),
        Field::new("ck", DataType::Int64, false),
    ]));
    let mut runs = Runs::new(groups, vec![Counted::Rows, Counted::Key(0)], out);
    assert!(runs
        .add(&batch(&[(0, 0, 300), (5, 0, 200), (0, 0, 100)], 0))
        .unwrap());
    let shuffled: Vec<(u8, u8, usize)> = (0..400).map(|i| ((i % 6) as u8, 0, 1)).collect();
    assert!(!runs.add(&batch(&shuffled, 7)).unwrap());
    let b = runs.take().unwrap();
    let text = arrow::util::pretty::pretty_format_batches(&[b])
        .unwrap()
        .to_string();
    assert!(text.contains("| a  | 400 | 400 |"), "{text}");
    assert!(text.contains("|    | 200 | 0   |"), "{text}");
    assert!(runs.is_empty());
}

/// EXPLAIN ANALYZE shows the runs counted, and whether a partition was handed over.
#[test]
fn reports_runs_and_hand_overs() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let analyzed = |parts: Vec<Vec<RecordBatch>>| {
        rt.block_on(async {
            let ctx = context(true);
            let table = MemTable::try_new(schema(), parts).unwrap();
            ctx.register_table("t", Arc::new(table)).unwrap();
            let df = ctx
                .sql("EXPLAIN ANALYZE SELECT k1, count(*) FROM t GROUP BY k1")
                .await
                .unwrap();
            let text = arrow::util::pretty::pretty_format_batches(&df.collect().await.unwrap())
                .unwrap()
                .to_string();
            text.lines()
                .find(|l| l.contains("NeveCountRunsExec"))
                .unwrap_or_default()
                .to_string()
        })
    };
    let sorted = analyzed(vec![vec![batch(
        &[(0, 0, 100), (1, 0, 100), (0, 0, 50)],
        0,
    )]]);
    assert!(sorted.contains("runs=3"), "{sorted}");
    assert!(sorted.contains("handed_over=0"), "{sorted}");
    assert!(sorted.contains("output_rows=2"), "{sorted}");
    let shuffled: Vec<(u8, u8, usize)> = (0..400).map(|i| ((i % 6) as u8, 0, 1)).collect();
    let handed = analyzed(vec![vec![batch(&shuffled, 7)]]);
    assert!(handed.contains("handed_over=1"), "{handed}");
    assert!(handed.contains("output_rows=6"), "{handed}");
}
