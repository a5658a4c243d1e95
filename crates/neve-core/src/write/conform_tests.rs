//! Values on the way in: converted to the table's types (inside lists too), a strict column
//! narrowed only where each value fits, and foreign arrays checked against their own declared
//! types, each refusal naming its row.

use std::sync::Arc;

use arrow::array::{Array, AsArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use proptest::prelude::*;

use super::validate_foreign;
use crate::error::Error;

#[test]
fn an_error_inside_a_list_names_the_row_that_holds_it() {
    use arrow::array::{ListBuilder, StringBuilder};
    let mut b = ListBuilder::new(StringBuilder::new());
    b.values().append_value("1");
    b.append(true); // row 1: ["1"]
    b.append(true); // row 2: []
    b.append(false); // row 3: null
    b.values().append_value("2");
    b.values().append_value("300");
    b.append(true); // row 4: ["2", "300"]
    let list = b.finish();
    let input = Arc::new(Schema::new(vec![Field::new(
        "c",
        list.data_type().clone(),
        true,
    )]));
    let batch = RecordBatch::try_new(input, vec![Arc::new(list)]).unwrap();
    let target = Arc::new(Schema::new(vec![Field::new(
        "c",
        DataType::List(Arc::new(Field::new("element", DataType::Int8, true))),
        true,
    )]));
    let err = super::conform::conform_batch(&batch, &target, &Default::default(), "in", &|i| {
        format!("row {}", i + 1)
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("row 4") && err.contains("'c[]'") && err.contains("300"),
        "{err}"
    );
    assert!(err.contains("out of range for int8"), "{err}");
}

/// One strict column narrowed on the way in: `input` values of `from`, into the table's `to`.
fn narrowed(input: arrow::array::ArrayRef, to: DataType) -> crate::Result<arrow::array::ArrayRef> {
    let schema = Arc::new(Schema::new(vec![Field::new(
        "c",
        input.data_type().clone(),
        true,
    )]));
    let batch = RecordBatch::try_new(schema, vec![input]).unwrap();
    let target = Arc::new(Schema::new(vec![Field::new("c", to, true)]));
    super::conform::conform_batch(&batch, &target, &Default::default(), "in", &|i| {
        format!("row {}", i + 1)
    })
    .map(|b| b.column(0).clone())
}

/// polars hands binary columns over as views: into a strict `fixed(n)` column, each value of
/// n bytes is taken as it is, and one of another length is refused by its row.
#[test]
fn binary_views_narrow_into_fixed_columns() {
    use arrow::array::BinaryViewArray;
    let sixteen = [7u8; 16];
    let views = BinaryViewArray::from(vec![Some(&sixteen[..]), None, Some(&[1u8; 16][..])]);
    let got = narrowed(Arc::new(views), DataType::FixedSizeBinary(16)).unwrap();
    let got = got.as_fixed_size_binary();
    assert_eq!(
        (got.value(0), got.is_null(1), got.value(2)),
        (&sixteen[..], true, &[1u8; 16][..])
    );
    let short = BinaryViewArray::from(vec![Some(&sixteen[..]), Some(&sixteen[..15])]);
    let err = narrowed(Arc::new(short), DataType::FixedSizeBinary(16)).unwrap_err();
    assert!(matches!(err, Error::InvalidValue { .. }), "{err:?}");
    assert!(err.to_string().contains("row 2"), "{err}");
}

proptest! {
    /// A strict table keeps its types: wider input values are taken exactly when each fits
    /// the table's type, and otherwise the first that does not is refused by its row (the
    /// reference: the value's own range and digits).
    #[test]
    fn a_strict_column_takes_wider_values_only_when_they_fit(
        ints in proptest::collection::vec(proptest::option::of(prop_oneof![
            -1000i64..1000,
            (i32::MIN as i64 - 3)..(i32::MIN as i64 + 3),
            (i32::MAX as i64 - 3)..(i32::MAX as i64 + 3),
        ]), 0..40),
        // decimal(14,4) into decimal(10,2): in range below 10^12 units, exact when a multiple of 100.
        decimals in proptest::collection::vec(proptest::option::of(prop_oneof![
            (-20_000i128..20_000).prop_map(|v| v * 100),
            -20_000i128..20_000,
            (9_999_999_990_i128..10_000_000_010).prop_map(|v| v * 100),
        ]), 0..40),
        floats in proptest::collection::vec(proptest::option::of(prop_oneof![
            (-1000i32..1000).prop_map(|v| v as f64 / 4.0),
            any::<f64>(),
            Just(f64::NAN),
        ]), 0..40),
    ) {
        use arrow::array::{Decimal128Array, Float64Array, Int32Array};
        let first_bad = |fits: &dyn Fn(usize) -> bool, n: usize| (0..n).find(|&i| !fits(i));
        let check = |got: crate::Result<arrow::array::ArrayRef>, bad: Option<usize>| -> Result<Option<arrow::array::ArrayRef>, TestCaseError> {
            match (got, bad) {
                (Ok(a), None) => Ok(Some(a)),
                (Err(e), Some(i)) => {
                    let msg = e.to_string();
                    prop_assert!(msg.contains(&format!("row {}", i + 1)) && msg.contains("strict"), "{}", msg);
                    Ok(None)
                }
                (Ok(_), Some(i)) => Err(TestCaseError::fail(format!("row {} taken", i + 1))),
                (Err(e), None) => Err(TestCaseError::fail(format!("refused: {e}"))),
            }
        };

        let got = narrowed(Arc::new(Int64Array::from(ints.clone())), DataType::Int32);
        let bad = first_bad(&|i| ints[i].is_none_or(|v| i32::try_from(v).is_ok()), ints.len());
        if let Some(a) = check(got, bad)? {
            let expected: Int32Array = ints.iter().map(|v| v.map(|v| v as i32)).collect();
            prop_assert_eq!(a.as_primitive::<arrow::datatypes::Int32Type>(), &expected);
        }

        let input = Decimal128Array::from(decimals.clone()).with_precision_and_scale(14, 4).unwrap();
        let got = narrowed(Arc::new(input), DataType::Decimal128(10, 2));
        let fits = |v: i128| v % 100 == 0 && (v / 100).abs() < 10_000_000_000;
        let bad = first_bad(&|i| decimals[i].is_none_or(fits), decimals.len());
        if let Some(a) = check(got, bad)? {
            let expected = Decimal128Array::from(decimals.iter().map(|v| v.map(|v| v / 100)).collect::<Vec<_>>())
                .with_precision_and_scale(10, 2)
                .unwrap();
            prop_assert_eq!(a.as_primitive::<arrow::datatypes::Decimal128Type>(), &expected);
        }

        let got = narrowed(Arc::new(Float64Array::from(floats.clone())), DataType::Float32);
        let fits = |v: f64| v.is_nan() || (v as f32) as f64 == v;
        let bad = first_bad(&|i| floats[i].is_none_or(fits), floats.len());
        if let Some(a) = check(got, bad)? {
            let a = a.as_primitive::<arrow::datatypes::Float32Type>();
            for (i, v) in floats.iter().enumerate() {
                match v {
                    None => prop_assert!(a.is_null(i)),
                    Some(v) if v.is_nan() => prop_assert!(a.value(i).is_nan()),
                    Some(v) => prop_assert_eq!(a.value(i) as f64, *v),
                }
            }
        }
    }
}

#[test]
fn foreign_decimals_beyond_their_precision_are_refused_with_their_row() {
    use arrow::array::{Decimal128Array, ListArray};
    use arrow::buffer::OffsetBuffer;
    // `with_precision_and_scale` does not look at the values, as a foreign producer need not.
    let ok = Decimal128Array::from(vec![5, 999, -999])
        .with_precision_and_scale(3, 0)
        .unwrap();
    let bad = Decimal128Array::from(vec![5, 10_000_000_000, 7])
        .with_precision_and_scale(3, 1)
        .unwrap();
    let batch = |a: arrow::array::ArrayRef| RecordBatch::try_from_iter([("d", a)]).unwrap();
    validate_foreign("in", &[batch(Arc::new(ok.clone()))]).unwrap();
    let e = validate_foreign(
        "in",
        &[batch(Arc::new(ok.clone())), batch(Arc::new(bad.clone()))],
    )
    .unwrap_err();
    assert!(matches!(e, Error::InvalidValue { .. }), "{e:?}");
    let m = e.to_string();
    assert!(
        m.contains("row 5")
            && m.contains("'d'")
            && m.contains("1000000000.0")
            && m.contains("decimal(3,1)"),
        "{m}"
    );
    // Nested: the row of the list that holds it.
    let field = Arc::new(Field::new_list_field(bad.data_type().clone(), true));
    let list = ListArray::new(
        field,
        OffsetBuffer::from_lengths([1, 2]),
        Arc::new(bad),
        None,
    );
    let m = validate_foreign("in", &[batch(Arc::new(list))])
        .unwrap_err()
        .to_string();
    assert!(m.contains("row 2"), "{m}");
}

/// Decimals from any Arrow input (IPC, Parquet, Flight), not only the C interfaces: one with
/// more digits than its declared precision is refused with its row and column, the table left
/// as it was; the Parquet writer would have stored it cut to the precision's bytes.
#[tokio::test]
async fn decimals_beyond_their_precision_from_any_arrow_input_are_refused() {
    use arrow::array::Decimal128Array;
    let t = crate::TableBuilder::new(crate::TableLocation::memory("d")).build();
    t.create(Default::default()).await.unwrap();
    let d = |v: Vec<i128>| {
        Arc::new(
            Decimal128Array::from(v)
                .with_precision_and_scale(5, 2)
                .unwrap(),
        ) as arrow::array::ArrayRef
    };
    let insert = |a| {
        let b = RecordBatch::try_from_iter([("amount", a)]).unwrap();
        let t = &t;
        async move {
            t.insert_batches(
                b.schema(),
                vec![b],
                &Default::default(),
                Arc::new(crate::write::NoProgress),
            )
            .await
        }
    };
    insert(d(vec![12345, -99999])).await.unwrap();
    let e = insert(d(vec![1, 4_294_967_396])).await.unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, Error::InvalidValue { .. }), "{m}");
    assert!(
        m.contains("row 2") && m.contains("'amount'") && m.contains("decimal(5,2)"),
        "{m}"
    );
    assert_eq!(t.snapshot().await.unwrap().rows(), 2, "nothing committed");
}

/// Timestamps beyond the years chrono writes as text (Postgres' `infinity` exported as
/// i64::MAX) would get the epoch's partition label and statistics: refused with their row,
/// as microseconds and from coarser units; the range's own ends are kept.
#[test]
fn timestamps_beyond_the_years_with_text_are_refused() {
    use arrow::array::{TimestampMicrosecondArray, TimestampMillisecondArray};
    use arrow::datatypes::TimeUnit;
    let to = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
    let max = chrono::DateTime::<chrono::Utc>::MAX_UTC.timestamp_micros();
    let min = chrono::DateTime::<chrono::Utc>::MIN_UTC.timestamp_micros();
    let us = TimestampMicrosecondArray::from(vec![Some(0), None, Some(max), Some(min)])
        .with_timezone("UTC");
    narrowed(Arc::new(us), to.clone()).unwrap();
    let us =
        TimestampMicrosecondArray::from(vec![Some(0), None, Some(i64::MAX)]).with_timezone("UTC");
    let e = narrowed(Arc::new(us), to.clone()).unwrap_err().to_string();
    assert!(
        e.contains("row 3") && e.contains("beyond the timestamps"),
        "{e}"
    );
    let ms =
        TimestampMillisecondArray::from(vec![Some(1), Some(min / 1000 - 1)]).with_timezone("UTC");
    let e = narrowed(Arc::new(ms), to).unwrap_err().to_string();
    assert!(
        e.contains("row 2") && e.contains("beyond the timestamps"),
        "{e}"
    );
}
