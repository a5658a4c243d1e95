//! The chunk path: grouping batches by partition, then sorting and gathering each part.

use std::sync::Arc;

use arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use proptest::prelude::*;

use super::{gather_sorted, group_by_partition};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("k", DataType::Utf8, true),
        Field::new("t", DataType::Int64, true),
    ]))
}

/// One input row: (part code, key string, key number).
type Row = (u32, Option<u8>, Option<i64>);

/// Ids are assigned in input order.
fn batches(rows: &[Vec<Row>]) -> Vec<(RecordBatch, Vec<u32>)> {
    let mut id = 0i64;
    rows.iter()
        .map(|b| {
            let ids: Vec<i64> = b
                .iter()
                .map(|_| {
                    id += 1;
                    id
                })
                .collect();
            let k: StringArray = b.iter().map(|r| r.1.map(|v| format!("v{v}"))).collect();
            let t: Int64Array = b.iter().map(|r| r.2).collect();
            let batch = RecordBatch::try_new(
                schema(),
                vec![Arc::new(Int64Array::from(ids)), Arc::new(k), Arc::new(t)],
            )
            .unwrap();
            (batch, b.iter().map(|r| r.0).collect())
        })
        .collect()
}

type Key = (Option<String>, Option<i64>);

fn keys(b: &RecordBatch) -> Vec<(i64, Key)> {
    let id = b.column(0).as_primitive::<Int64Type>();
    let k = b.column(1).as_string::<i32>();
    let t = b.column(2).as_primitive::<Int64Type>();
    (0..b.num_rows())
        .map(|i| {
            let k = k.is_valid(i).then(|| k.value(i).to_string());
            let t = t.is_valid(i).then(|| t.value(i));
            (id.value(i), (k, t))
        })
        .collect()
}

fn row_strategy(parts: u32) -> impl Strategy<Value = Row> {
    (
        0..parts,
        proptest::option::of(0u8..5),
        proptest::option::of(-3i64..3),
    )
}

proptest! {
    /// Each part gets exactly its rows, in key order (ascending, nulls first), whatever the
    /// batch sizes and however the rows are spread.
    #[test]
    fn parts_hold_their_rows_sorted(
        parts in 1u32..6,
        rows in proptest::collection::vec(
            proptest::collection::vec(row_strategy(6), 0..40), 1..5),
        sort in any::<bool>(),
    ) {
        let rows: Vec<Vec<_>> = rows
            .into_iter()
            .map(|b| b.into_iter().map(|(c, k, t)| (c % parts, k, t)).collect())
            .collect();
        let input = batches(&rows);
        let mut expected: Vec<Vec<(i64, Key)>> = vec![Vec::new(); parts as usize];
        for (batch, codes) in &input {
            for (row, key) in keys(batch).into_iter().enumerate() {
                expected[codes[row] as usize].push(key);
            }
        }
        let mut slices: Vec<Vec<RecordBatch>> = vec![Vec::new(); parts as usize];
        for (batch, codes) in input {
            let (grouped, runs) = group_by_partition(batch, &codes, parts as usize).unwrap();
            let mut covered = 0;
            for (code, start, len) in runs {
                prop_assert_eq!(start, covered);
                covered += len;
                slices[code as usize].push(grouped.slice(start, len));
            }
            prop_assert_eq!(covered, grouped.num_rows());
        }
        let sort_cols = if sort { vec![1, 2] } else { vec![] };
        for (p, slices) in slices.iter().enumerate() {
            if slices.is_empty() {
                prop_assert!(expected[p].is_empty());
                continue;
            }
            let out = keys(&gather_sorted(&schema(), slices, &sort_cols).unwrap());
            if sort {
                prop_assert!(out.windows(2).all(|w| w[0].1 <= w[1].1), "not sorted: {:?}", out);
                let mut got = out.clone();
                got.sort();
                let mut want = expected[p].clone();
                want.sort();
                prop_assert_eq!(got, want);
            } else {
                // Without sort keys the input order is kept.
                prop_assert_eq!(&out, &expected[p]);
            }
        }
    }
}

#[test]
fn struct_fields_get_statistics_and_a_null_struct_counts_as_null_fields() {
    use arrow::array::{ArrayRef, StructArray};
    use arrow::buffer::NullBuffer;
    use arrow::datatypes::Fields;
    let plan: ArrayRef = Arc::new(StringArray::from(vec![Some("pro"), Some("zzz"), None]));
    let seats: ArrayRef = Arc::new(Int64Array::from(vec![Some(3), Some(99), Some(1)]));
    let fields = Fields::from(vec![
        Field::new("plan", DataType::Utf8, true),
        Field::new("seats", DataType::Int64, true),
    ]);
    // Row 1's struct is null: its fields' values ("zzz", 99) are not values of the column.
    let user = StructArray::new(
        fields.clone(),
        vec![plan, seats],
        Some(NullBuffer::from(vec![true, false, true])),
    );
    let schema = Arc::new(Schema::new(vec![Field::new(
        "user",
        DataType::Struct(fields),
        true,
    )]));
    let batch = RecordBatch::try_new(schema, vec![Arc::new(user)]).unwrap();
    let s = super::batch_stats(&batch);
    assert_eq!(s["user"].nulls, 1);
    assert_eq!(s["user.plan"].nulls, 2);
    assert_eq!(s["user.plan"].min, Some(serde_json::Value::from("pro")));
    assert_eq!(s["user.plan"].max, Some(serde_json::Value::from("pro")));
    assert_eq!(s["user.seats"].nulls, 1);
    assert_eq!(s["user.seats"].min, Some(serde_json::Value::from(1)));
    assert_eq!(s["user.seats"].max, Some(serde_json::Value::from(3)));
}

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

/// `batch` as the write path encodes a part of a table sorted by its first column.
fn encode_sorted_by_first(batch: &RecordBatch) -> bytes::Bytes {
    let props = super::encode::writer_properties(
        parquet::basic::Compression::UNCOMPRESSED,
        1 << 17,
        &batch.schema(),
        &[0],
    );
    bytes::Bytes::from(super::encode_parquet(batch, props).unwrap())
}

#[test]
fn dictionaries_are_kept_only_where_values_repeat() {
    use arrow::array::{ArrayRef, TimestampMicrosecondArray};
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let n = 5_000i64;
    // Nearly distinct numbers: rising with a few repeats and nulls (a sort key), rising
    // timestamps, falling. Numbers of a few values, and of a thousand values in random order.
    // Distinct and repeating strings.
    let cols: Vec<(&str, ArrayRef, bool)> = vec![
        (
            "key",
            Arc::new(Int64Array::from_iter(
                (0..n).map(|i| (i % 50 != 7).then_some(i - i % 20 / 19)),
            )),
            false,
        ),
        (
            "at",
            Arc::new(TimestampMicrosecondArray::from_iter_values(
                (0..n).map(|i| 1_700_000_000_000_000 + i * 1_000),
            )),
            false,
        ),
        (
            "small",
            Arc::new(Int64Array::from_iter_values((0..n).map(|i| i % 7))),
            true,
        ),
        (
            "falling",
            Arc::new(Int64Array::from_iter_values((0..n).map(|i| -i))),
            false,
        ),
        (
            "noise",
            Arc::new(Int64Array::from_iter_values((0..n).map(|i| {
                ((i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as i64 % 1009
            }))),
            true,
        ),
        // Distinct in its first 1,024 rows, 1,500 values in all: judged on the whole part.
        (
            "cycle",
            Arc::new(Int64Array::from_iter_values((0..n).map(|i| i % 1500))),
            true,
        ),
        (
            "id",
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("u{i}")),
            )),
            false,
        ),
        (
            "plan",
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| ["a", "b"][i as usize % 2]),
            )),
            true,
        ),
    ];
    let schema = Arc::new(Schema::new(
        cols.iter()
            .map(|(name, a, _)| Field::new(*name, a.data_type().clone(), true))
            .collect::<Vec<_>>(),
    ));
    let batch =
        RecordBatch::try_new(schema.clone(), cols.iter().map(|c| c.1.clone()).collect()).unwrap();
    let bytes = encode_sorted_by_first(&batch);
    let reader = SerializedFileReader::new(bytes.clone()).unwrap();
    let group = reader.metadata().row_group(0);
    for (i, (name, _, dictionary)) in cols.iter().enumerate() {
        let chunk = group.column(i);
        assert_eq!(
            chunk.dictionary_page_offset().is_some(),
            *dictionary,
            "{name}: {:?}",
            chunk.encodings().collect::<Vec<_>>()
        );
    }
    // Whatever the encoding, the values read back are the values written.
    let back: Vec<RecordBatch> =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap()
            .build()
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
    assert_eq!(
        arrow::compute::concat_batches(&schema, &back).unwrap(),
        batch
    );
}

#[test]
fn pages_hold_at_most_8192_rows() {
    use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
    let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(Int64Array::from_iter_values(0..20_000))],
    )
    .unwrap();
    let bytes = encode_sorted_by_first(&batch);
    let meta = ArrowReaderMetadata::load(
        &bytes,
        ArrowReaderOptions::new()
            .with_page_index_policy(parquet::file::metadata::PageIndexPolicy::Required),
    )
    .unwrap();
    let index = meta.metadata().offset_index().expect("offset index");
    let firsts: Vec<i64> = index[0][0]
        .page_locations()
        .iter()
        .map(|p| p.first_row_index)
        .collect();
    assert_eq!(firsts, vec![0, 8192, 16384]);
}
