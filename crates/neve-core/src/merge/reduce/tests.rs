//! The streaming reducer against reducing everything at once: keys that span batches give
//! the same rows as keys within one.

use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::TryStreamExt;
use proptest::prelude::*;

use super::*;

fn batch(keys: &[i64], values: &[i64]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("x", DataType::Int64, true),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(keys.to_vec())),
            Arc::new(Int64Array::from(values.to_vec())),
        ],
    )
    .unwrap()
}

async fn streamed(reducer: Reducer, whole: &RecordBatch, cuts: &[usize]) -> RecordBatch {
    let mut parts = Vec::new();
    let mut at = 0;
    for &c in cuts.iter().chain([&whole.num_rows()]) {
        let c = c.clamp(at, whole.num_rows());
        parts.push(Ok(whole.slice(at, c - at)));
        at = c;
    }
    let input = Box::pin(RecordBatchStreamAdapter::new(
        whole.schema(),
        futures::stream::iter(parts),
    ));
    let out: Vec<RecordBatch> = reducer.stream(input).try_collect().await.unwrap();
    arrow::compute::concat_batches(&whole.schema(), &out).unwrap()
}

proptest! {
    #[test]
    fn keys_across_batches_reduce_as_one(
        mut keys in prop::collection::vec(0i64..6, 1..60),
        cuts in prop::collection::vec(0usize..60, 0..6),
        kind in 0usize..3,
    ) {
        keys.sort();
        let values: Vec<i64> = (0..keys.len() as i64).collect();
        let whole = batch(&keys, &values);
        let spec: MergeSpec = ["aggregate(key = [k], sum = [x])", "dedupe(key = [k])", "replace(key = [k])"][kind]
            .parse()
            .unwrap();
        let reducer = Reducer::new(&spec, whole.schema(), true).unwrap();
        let mut cuts = cuts;
        cuts.sort();
        let once = reducer.reduce(&whole).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let got = rt.block_on(streamed(reducer, &whole, &cuts));
        prop_assert_eq!(got, once);
    }
}

#[test]
fn a_sum_that_overflows_names_the_column() {
    let b = batch(&[1, 1], &[i64::MAX, 1]);
    let spec: MergeSpec = "aggregate(key = [k], sum = [x])".parse().unwrap();
    let e = Reducer::new(&spec, b.schema(), true)
        .unwrap()
        .reduce(&b)
        .unwrap_err()
        .to_string();
    assert!(e.contains("column 'x' overflows Int64"), "{e}");
}

#[test]
fn replace_keeps_the_highest_version_and_the_later_row_on_a_tie() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("v", DataType::Int64, true),
        Field::new("x", DataType::Int64, true),
    ]));
    let b = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(vec![1, 1, 1, 2, 2])),
            Arc::new(Int64Array::from(vec![
                Some(5),
                Some(7),
                Some(7),
                None,
                Some(0),
            ])),
            Arc::new(Int64Array::from(vec![10, 20, 30, 40, 50])),
        ],
    )
    .unwrap();
    let spec: MergeSpec = "replace(key = [k], version = v)".parse().unwrap();
    let out = Reducer::new(&spec, b.schema(), true)
        .unwrap()
        .reduce(&b)
        .unwrap();
    let x = out.column(2).as_any().downcast_ref::<Int64Array>().unwrap();
    assert_eq!(x.values().to_vec(), vec![30, 50]);
}
