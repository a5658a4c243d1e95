//! The packed order against the row format's, the reference: the same positions, ties in input
//! order.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Decimal128Array, Decimal64Array, Float64Array, Int32Array, Int64Array,
    RecordBatch, StringArray, StringViewArray, TimestampMicrosecondArray, UInt64Array,
};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use proptest::prelude::*;

use super::{packed_order, row_format_order, sort_order};

/// One column of each kind a sort key can have, with values from small ranges so ties are
/// common, and the edges (extremes, NaN, -0.0, empty strings) in them.
#[derive(Debug, Clone)]
struct Row {
    i: Option<i64>,
    u: Option<u64>,
    f: Option<f64>,
    s: Option<String>,
    b: Option<bool>,
    t: Option<i64>,
    d: Option<i32>,
    m: Option<i128>,
}

fn row() -> impl Strategy<Value = Row> {
    let i = prop_oneof![-3i64..3, Just(i64::MIN), Just(i64::MAX)];
    let u = prop_oneof![0u64..4, Just(u64::MAX)];
    let f = prop_oneof![
        (-2i32..2).prop_map(f64::from),
        Just(-0.0),
        Just(f64::NAN),
        Just(-f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(0.5),
    ];
    let s = prop_oneof![
        Just(String::new()),
        "[ab]{0,3}",
        Just("\u{e9}".to_string()),
        Just("a\0".to_string()),
    ];
    let t = prop_oneof![0i64..5, Just(1_700_000_000_000_000)];
    // Amounts, and the extremes whose span does not fit 64 bits.
    let m = prop_oneof![
        -3i128..3,
        Just(1i128 << 70),
        Just(i128::MIN),
        Just(i128::MAX)
    ];
    (
        proptest::option::of(i),
        proptest::option::of(u),
        proptest::option::of(f),
        proptest::option::of(s),
        proptest::option::of(any::<bool>()),
        proptest::option::of(t),
        proptest::option::of(-2i32..2),
        proptest::option::of(m),
    )
        .prop_map(|(i, u, f, s, b, t, d, m)| Row {
            i,
            u,
            f,
            s,
            b,
            t,
            d,
            m,
        })
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("i", DataType::Int64, true),
        Field::new("u", DataType::UInt64, true),
        Field::new("f", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("b", DataType::Boolean, true),
        Field::new("t", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        Field::new("d", DataType::Int32, true),
        Field::new("v", DataType::Utf8View, true),
        Field::new("h", DataType::Float16, true),
        Field::new("m", DataType::Decimal128(38, 2), true),
        Field::new("n", DataType::Decimal64(18, 2), true),
    ]))
}

fn batch(rows: &[Row]) -> RecordBatch {
    let cols: Vec<ArrayRef> = vec![
        Arc::new(rows.iter().map(|r| r.i).collect::<Int64Array>()),
        Arc::new(rows.iter().map(|r| r.u).collect::<UInt64Array>()),
        Arc::new(rows.iter().map(|r| r.f).collect::<Float64Array>()),
        Arc::new(rows.iter().map(|r| r.s.clone()).collect::<StringArray>()),
        Arc::new(rows.iter().map(|r| r.b).collect::<BooleanArray>()),
        Arc::new(
            rows.iter()
                .map(|r| r.t)
                .collect::<TimestampMicrosecondArray>(),
        ),
        Arc::new(rows.iter().map(|r| r.d).collect::<Int32Array>()),
        Arc::new(
            rows.iter()
                .map(|r| r.s.clone())
                .collect::<StringViewArray>(),
        ),
        // Half-precision floats: the doubles above, rounded (NaNs, zeros, infinities kept).
        arrow::compute::cast(&cols_f64(rows), &DataType::Float16).unwrap(),
        Arc::new(
            rows.iter()
                .map(|r| r.m)
                .collect::<Decimal128Array>()
                .with_precision_and_scale(38, 2)
                .unwrap(),
        ),
        Arc::new(
            rows.iter()
                .map(|r| r.i)
                .collect::<Decimal64Array>()
                .with_precision_and_scale(18, 2)
                .unwrap(),
        ),
    ];
    RecordBatch::try_new(schema(), cols).unwrap()
}

fn cols_f64(rows: &[Row]) -> ArrayRef {
    Arc::new(rows.iter().map(|r| r.f).collect::<Float64Array>())
}

proptest! {
    /// Whatever the keys, their number and the slices, the order is the row format's.
    #[test]
    fn the_order_is_the_row_formats(
        slices in proptest::collection::vec(proptest::collection::vec(row(), 0..30), 1..4),
        // Slices of the batches, as a part is made of: (offset, trimmed length).
        cuts in proptest::collection::vec((0usize..3, 0usize..3), 4),
        keys in proptest::collection::vec(0usize..11, 1..4),
    ) {
        let slices: Vec<RecordBatch> = slices
            .iter()
            .zip(&cuts)
            .map(|(rows, &(off, trim))| {
                let b = batch(rows);
                let off = off.min(b.num_rows());
                let len = b.num_rows() - off;
                b.slice(off, len - trim.min(len))
            })
            .collect();
        let want = row_format_order(&slices, &keys).unwrap();
        prop_assert_eq!(sort_order(&slices, &keys).unwrap(), want);
    }
}

fn ints(v: Vec<Option<i64>>) -> RecordBatch {
    let s = Arc::new(Schema::new(vec![Field::new("i", DataType::Int64, true)]));
    RecordBatch::try_new(s, vec![Arc::new(Int64Array::from(v))]).unwrap()
}

#[test]
fn usual_keys_pack_and_wide_ones_fall_back() {
    let taxi = batch(
        &(0..1000)
            .map(|n| Row {
                i: Some(n % 7),
                u: None,
                f: Some(f64::from(n as i32) / 3.0),
                s: Some(["Cash", "Credit Card", "Mobile"][n as usize % 3].to_string()),
                b: None,
                t: Some(1_700_000_000_000_000 + n * 900_000_000),
                d: None,
                m: Some(i128::from(n) * 137 - 20_000),
            })
            .collect::<Vec<_>>(),
    );
    // A category and a time: 2 + 10 bits.
    assert!(packed_order(std::slice::from_ref(&taxi), &[3, 5], 1000).is_some());
    // A decimal amount and a time: 18 + 10 bits.
    assert!(packed_order(std::slice::from_ref(&taxi), &[9, 5], 1000).is_some());
    // Decimals spanning 64 bits or more go to the row format.
    let decimals = |hi: i128| {
        let s = Arc::new(Schema::new(vec![Field::new(
            "m",
            DataType::Decimal128(38, 0),
            true,
        )]));
        let v: Decimal128Array = (0..100)
            .map(|n| Some(if n % 2 == 0 { -5 } else { hi }))
            .collect();
        RecordBatch::try_new(
            s,
            vec![Arc::new(v.with_precision_and_scale(38, 0).unwrap())],
        )
        .unwrap()
    };
    assert!(packed_order(std::slice::from_ref(&decimals(1 << 62)), &[0], 100).is_some());
    assert!(packed_order(std::slice::from_ref(&decimals(1 << 70)), &[0], 100).is_none());
    assert!(packed_order(std::slice::from_ref(&decimals(i128::MAX)), &[0], 100).is_none());
    // All nulls is one code.
    assert!(packed_order(std::slice::from_ref(&taxi), &[1, 5], 1000).is_some());
    // A key spanning all but one value of i64 takes 64 bits (with null's code); two do not
    // fit, nor one spanning all of it.
    let span = |lo: i64| {
        ints(
            (0..100)
                .map(|n| Some(if n % 2 == 0 { lo } else { i64::MAX }))
                .collect(),
        )
    };
    let wide = span(i64::MIN + 1);
    assert!(packed_order(std::slice::from_ref(&wide), &[0], 100).is_some());
    assert!(packed_order(std::slice::from_ref(&wide), &[0, 0], 100).is_none());
    assert!(packed_order(std::slice::from_ref(&span(i64::MIN)), &[0], 100).is_none());
    // An all-null key before one of 32 bits: nothing is shifted by the packed type's width.
    let nulls_first = {
        let s = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, true),
            Field::new("w", DataType::Int64, false),
        ]));
        let n = Int64Array::from(vec![None::<i64>; 100]);
        let w: Int64Array = (0..100)
            .map(|i| Some(if i % 2 == 0 { (1 << 32) - 2 } else { 0 }))
            .collect();
        RecordBatch::try_new(s, vec![Arc::new(n), Arc::new(w)]).unwrap()
    };
    let order = packed_order(std::slice::from_ref(&nulls_first), &[0, 1], 100).unwrap();
    assert_eq!(
        order,
        row_format_order(std::slice::from_ref(&nulls_first), &[0, 1]).unwrap()
    );
    // Strings nearly all distinct (ids) go to the row format.
    let ids = {
        let s = Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8, false)]));
        let v: StringArray = (0..1000).map(|n| Some(format!("id-{n:04}"))).collect();
        RecordBatch::try_new(s, vec![Arc::new(v)]).unwrap()
    };
    assert!(packed_order(std::slice::from_ref(&ids), &[0], 1000).is_none());
    assert_eq!(
        sort_order(std::slice::from_ref(&ids), &[0]).unwrap(),
        (0..1000).collect::<Vec<u32>>()
    );
}
