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

/// The rows with their part codes brought below `parts`.
fn within(rows: Vec<Vec<Row>>, parts: u32) -> Vec<Vec<Row>> {
    rows.into_iter()
        .map(|b| b.into_iter().map(|(c, k, t)| (c % parts, k, t)).collect())
        .collect()
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
        let input = batches(&within(rows, parts));
        let mut expected: Vec<Vec<(i64, Key)>> = vec![Vec::new(); parts as usize];
        for (batch, codes) in &input {
            for (row, key) in keys(batch).into_iter().enumerate() {
                expected[codes[row] as usize].push(key);
            }
        }
        let mut slices: Vec<Vec<RecordBatch>> = vec![Vec::new(); parts as usize];
        for (batch, codes) in input {
            let (grouped, runs) = group_by_partition(batch, &codes, parts as usize, None).unwrap();
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
                // Sorted by the keys, and rows with equal keys in input order (a stable sort:
                // ids grow with the input).
                let mut want = expected[p].clone();
                want.sort_by(|a, b| a.1.cmp(&b.1));
                prop_assert_eq!(&out, &want);
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
    let s = super::stats::batch_stats(&batch);
    assert_eq!(s["user"].nulls, 1);
    assert_eq!(s["user.plan"].nulls, 2);
    assert_eq!(s["user.plan"].min, Some(serde_json::Value::from("pro")));
    assert_eq!(s["user.plan"].max, Some(serde_json::Value::from("pro")));
    assert_eq!(s["user.seats"].nulls, 1);
    assert_eq!(s["user.seats"].min, Some(serde_json::Value::from(1)));
    assert_eq!(s["user.seats"].max, Some(serde_json::Value::from(3)));
}

/// `batch` as the write path encodes a part of a table sorted by its first column.
fn encode_sorted_by_first(batch: &RecordBatch) -> bytes::Bytes {
    let props = super::encode::writer_properties(
        parquet::basic::Compression::UNCOMPRESSED,
        1 << 17,
        &batch.schema(),
        &[0],
    );
    encode_sorted_by_first_with(batch, props)
}

fn encode_sorted_by_first_with(
    batch: &RecordBatch,
    props: parquet::file::properties::WriterProperties,
) -> bytes::Bytes {
    let format = super::encode::FileFormat::new(&batch.schema(), props).unwrap();
    bytes::Bytes::from(super::encode_parquet(batch, &format).unwrap().0)
}

/// A file written with the schema worked out once per insert ([`super::FileFormat`]) has the
/// bytes an `ArrowWriter` left to convert the schema itself writes, arrow schema in the footer
/// included (readers take time zones and nested types from it).
#[test]
fn the_schema_worked_out_once_writes_the_same_bytes() {
    use arrow::array::{ArrayRef, StructArray, TimestampMicrosecondArray};
    let ts = TimestampMicrosecondArray::from(vec![Some(1), None, Some(3)]).with_timezone("UTC");
    let inner = Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef;
    let nested = StructArray::from(vec![(
        Arc::new(Field::new("x", DataType::Int64, false)),
        inner,
    )]);
    let batch = RecordBatch::try_from_iter([
        (
            "s",
            Arc::new(StringArray::from(vec!["b", "a", "c"])) as ArrayRef,
        ),
        ("t", Arc::new(ts) as ArrayRef),
        ("n", Arc::new(nested) as ArrayRef),
    ])
    .unwrap();
    let props = super::encode::writer_properties(
        parquet::basic::Compression::SNAPPY,
        2,
        &batch.schema(),
        &[0],
    );
    let mut plain = Vec::new();
    let tuned = super::encode::tune_dictionary(&batch, props.clone());
    let mut w =
        parquet::arrow::ArrowWriter::try_new(&mut plain, batch.schema(), Some(tuned)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    assert_eq!(
        bytes::Bytes::from(plain),
        encode_sorted_by_first_with(&batch, props)
    );
}

#[test]
fn dictionaries_are_kept_only_where_values_repeat() {
    use arrow::array::{ArrayRef, BinaryArray, TimestampMicrosecondArray};
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
        // 2,500 values, each about twice, in random order: distinct in its first rows, but
        // a sample over the part repeats.
        (
            "taxi",
            Arc::new(StringArray::from_iter_values((0..n).map(|i| {
                let mut v = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                v = (v ^ (v >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                format!("{:064x}", (v ^ (v >> 29)) % 2500)
            }))),
            true,
        ),
        (
            "plan",
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| ["a", "b"][i as usize % 2]),
            )),
            true,
        ),
        // Hashes as bytes are judged as strings are.
        (
            "digest",
            Arc::new(BinaryArray::from_iter_values((0..n).map(|i| {
                (i as u64).wrapping_mul(0xbf58_476d_1ce4_e5b9).to_le_bytes()
            }))),
            false,
        ),
        (
            "kind",
            Arc::new(BinaryArray::from_iter_values(
                (0..n).map(|i| [b"in".as_slice(), b"out"][i as usize % 2]),
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

/// One row of the statistics model: every kind of column the log keeps bounds for, a struct
/// that may be null around two fields, and a list.
type StatRow = (
    Option<i32>,
    Option<u64>,
    Option<f64>,
    Option<String>,
    Option<i64>,
    Option<bool>,
    Option<i128>,
    Option<(Option<i16>, Option<String>)>,
    Option<Vec<Option<i64>>>,
);

fn stat_rows() -> impl Strategy<Value = Vec<StatRow>> {
    let float = prop_oneof![
        Just(f64::NAN),
        Just(0.0),
        Just(-0.0),
        Just(f64::INFINITY),
        -1e6..1e6f64,
    ];
    // Short strings, long ones (a max over 256 characters is dropped, a min truncated) and
    // multi-byte ones.
    let string = prop_oneof![
        "[a-c]{0,3}",
        "[a-z]{250,300}",
        "[éü€😀]{60,70}",
        "[😀]{250,260}",
    ];
    let row = (
        proptest::option::of(any::<i32>()),
        proptest::option::of(any::<u64>()),
        proptest::option::of(float),
        proptest::option::of(string.clone()),
        proptest::option::of(-1_000_000_000_000i64..5_000_000_000_000_000),
        proptest::option::of(any::<bool>()),
        proptest::option::of(-10i128.pow(20)..10i128.pow(20)),
        proptest::option::of((
            proptest::option::of(any::<i16>()),
            proptest::option::of(string),
        )),
        proptest::option::of(proptest::collection::vec(
            proptest::option::of(any::<i64>()),
            0..3,
        )),
    );
    proptest::collection::vec(row, 1..60)
}

fn stat_batch(rows: &[StatRow]) -> RecordBatch {
    use arrow::array::{
        BooleanArray, Decimal128Array, Float64Array, Int16Array, Int32Array, ListArray,
        StructArray, TimestampMicrosecondArray, UInt64Array,
    };
    use arrow::buffer::NullBuffer;
    let user_fields = arrow::datatypes::Fields::from(vec![
        Field::new("seats", DataType::Int16, true),
        Field::new("plan", DataType::Utf8, true),
    ]);
    let user = StructArray::new(
        user_fields.clone(),
        vec![
            Arc::new(Int16Array::from_iter(
                rows.iter().map(|r| r.7.as_ref().and_then(|u| u.0)),
            )),
            Arc::new(StringArray::from_iter(
                rows.iter().map(|r| r.7.as_ref().and_then(|u| u.1.clone())),
            )),
        ],
        Some(NullBuffer::from_iter(rows.iter().map(|r| r.7.is_some()))),
    );
    let tags = ListArray::from_iter_primitive::<Int64Type, _, _>(rows.iter().map(|r| r.8.clone()));
    let columns: Vec<(&str, arrow::array::ArrayRef)> = vec![
        (
            "i",
            Arc::new(Int32Array::from_iter(rows.iter().map(|r| r.0))),
        ),
        (
            "u",
            Arc::new(UInt64Array::from_iter(rows.iter().map(|r| r.1))),
        ),
        // Stored as INT64 and INT32 (stored.rs): the footer's bounds are the same numbers.
        (
            "u32",
            Arc::new(arrow::array::UInt32Array::from_iter(
                rows.iter().map(|r| r.1.map(|v| v as u32)),
            )),
        ),
        (
            "u8",
            Arc::new(arrow::array::UInt8Array::from_iter(
                rows.iter().map(|r| r.1.map(|v| v as u8)),
            )),
        ),
        (
            "f",
            Arc::new(Float64Array::from_iter(rows.iter().map(|r| r.2))),
        ),
        (
            "s",
            Arc::new(StringArray::from_iter(rows.iter().map(|r| r.3.clone()))),
        ),
        (
            "at",
            Arc::new(
                TimestampMicrosecondArray::from_iter(rows.iter().map(|r| r.4)).with_timezone("UTC"),
            ),
        ),
        (
            "b",
            Arc::new(BooleanArray::from_iter(rows.iter().map(|r| r.5))),
        ),
        (
            "amount",
            Arc::new(
                Decimal128Array::from_iter(rows.iter().map(|r| r.6))
                    .with_precision_and_scale(30, 4)
                    .unwrap(),
            ),
        ),
        ("user", Arc::new(user)),
        ("tags", Arc::new(tags)),
    ];
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|(name, a)| Field::new(*name, a.data_type().clone(), true))
            .collect::<Vec<_>>(),
    ));
    RecordBatch::try_new(schema, columns.into_iter().map(|(_, a)| a).collect()).unwrap()
}

/// A float bound of zero: Parquet writes a min of zero as -0.0 and a max as +0.0.
fn zero_unsigned(s: &crate::log::ColumnStats) -> crate::log::ColumnStats {
    let fix = |v: &Option<serde_json::Value>| {
        v.as_ref().map(|v| match v.as_f64() {
            Some(f) if f == 0.0 && v.is_f64() => serde_json::Value::from(0.0),
            _ => v.clone(),
        })
    };
    crate::log::ColumnStats {
        min: fix(&s.min),
        max: fix(&s.max),
        nulls: s.nulls,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The statistics read from the encoder's footer are those computed from the arrays (the
    /// reference), over files of one or several row groups.
    #[test]
    fn footer_statistics_equal_the_arrays(rows in stat_rows(), group_rows in 1usize..70) {
        let batch = stat_batch(&rows);
        let props = super::encode::writer_properties(
            parquet::basic::Compression::UNCOMPRESSED,
            group_rows,
            &batch.schema(),
            &[],
        );
        let format = super::encode::FileFormat::new(&batch.schema(), props).unwrap();
        let (_, footer) = super::encode_parquet(&batch, &format).unwrap();
        let from_footer = super::file_stats(&batch.schema(), &batch, &footer).unwrap();
        let from_arrays = super::stats::batch_stats(&batch);
        prop_assert_eq!(
            from_footer.keys().collect::<Vec<_>>(),
            from_arrays.keys().collect::<Vec<_>>()
        );
        for (path, expected) in &from_arrays {
            let got = &from_footer[path];
            prop_assert_eq!(zero_unsigned(got), zero_unsigned(expected), "{}", path);
        }
    }
}

proptest! {
    /// The dictionary sampler judges as a hash set of the same sample does: the non-null
    /// values at even steps over the array, at most 1,024 of them (a quarter of a smaller
    /// array, at least 128 or all of it), at least the share distinct, and never from fewer
    /// than 64 (its early stop changes no answer).
    #[test]
    fn the_sampler_counts_distinct_values(
        values in proptest::collection::vec(proptest::option::of(0u64..3000), 0..5000),
        wide in any::<bool>(),
        share in prop_oneof![Just((9, 10)), Just((98, 100)), Just((1, 2)), (1usize..100).prop_map(|n| (n, 100))],
    ) {
        // Wide keys collide in the table's slots as often as narrow ones do.
        let key = |i: usize| values[i].unwrap().wrapping_mul(if wide { 1 << 40 } else { 1 });
        let got = super::encode::sample_distinct(values.len(), |i| values[i].is_some(), key, share);
        let n = values.len();
        let (step, size) = super::encode::sample_steps(n);
        prop_assert_eq!(size, if n < 512 { 128 } else { (n / 4).min(1024) });
        // Steps that reach over most of the array with as many positions as values taken.
        prop_assert!(n < size || (size * step <= n && size * (step + 1) > n));
        let sample: Vec<u64> = (0..n)
            .step_by(step)
            .filter(|&i| values[i].is_some())
            .take(size)
            .map(key)
            .collect();
        let distinct = sample.iter().collect::<std::collections::HashSet<_>>().len();
        let expected = sample.len() >= 64 && distinct * share.1 >= sample.len() * share.0;
        prop_assert_eq!(got, expected);
    }
}

proptest! {
    /// A resident input larger than the chunk is grouped in passes: every row lands in exactly
    /// one pass's part of its partition; a partition within the budget is grouped by one pass
    /// (so it gets one file); and a pass copies more than the budget only when it is one
    /// batch's rows of one partition.
    #[test]
    fn passes_group_every_row_once(
        parts in 1u32..6,
        rows in proptest::collection::vec(
            proptest::collection::vec(row_strategy(6), 0..40), 1..6),
        budget in 1usize..6000,
    ) {
        let input = batches(&within(rows, parts));
        let n = parts as usize;
        let row_bytes = super::mean_row_bytes;
        let mut expected: Vec<Vec<i64>> = vec![Vec::new(); n];
        let mut size = vec![0usize; n];
        for (batch, codes) in &input {
            for (row, (id, _)) in keys(batch).into_iter().enumerate() {
                expected[codes[row] as usize].push(id);
                size[codes[row] as usize] += row_bytes(batch);
            }
        }
        let mut seen: Vec<Vec<i64>> = vec![Vec::new(); n];
        let mut passes_of = vec![0usize; n];
        for pass in super::passes(&input, n, Some(budget)) {
            let mask = pass.codes.clone().expect("a budget gives masks");
            let (mut copied, mut touched, mut from) = (0usize, vec![false; n], 0usize);
            for (batch, codes) in &input[pass.batches.clone()] {
                let (grouped, runs) =
                    group_by_partition(batch.clone(), codes, n, Some(&mask)).unwrap();
                let mut covered = 0;
                for (code, start, len) in runs {
                    prop_assert!(mask[code as usize]);
                    prop_assert_eq!(start, covered);
                    covered += len;
                    touched[code as usize] = true;
                    seen[code as usize]
                        .extend(keys(&grouped.slice(start, len)).into_iter().map(|(id, _)| id));
                }
                prop_assert_eq!(covered, grouped.num_rows());
                copied += grouped.num_rows() * row_bytes(batch);
                from += usize::from(grouped.num_rows() > 0);
            }
            for (p, t) in touched.iter().enumerate() {
                passes_of[p] += usize::from(*t);
            }
            let one_run = mask.iter().filter(|m| **m).count() == 1 && from == 1;
            prop_assert!(copied <= budget || one_run, "pass copies {} > {}", copied, budget);
        }
        for p in 0..n {
            // Within a partition the passes come in input order, and so do rows within a pass.
            prop_assert_eq!(&seen[p], &expected[p]);
            if size[p] <= budget {
                prop_assert!(passes_of[p] <= 1, "partition {} in {} passes", p, passes_of[p]);
            }
        }
    }
}

/// `insert_batches` of more rows than a chunk holds: a file per partition, every row once,
/// each file sorted.
#[tokio::test]
async fn a_resident_input_beyond_the_chunk_gets_a_file_per_partition() {
    use crate::partition::parse_spec;
    use crate::storage::TableLocation;
    use crate::table::{CreateOptions, InsertOptions, TableBuilder};
    use object_store::ObjectStoreExt;

    let t = TableBuilder::new(TableLocation::memory("t")).build();
    t.create(CreateOptions {
        partition_by: parse_spec("region").unwrap(),
        sort_by: vec!["t".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("region", DataType::Utf8, false),
        Field::new("t", DataType::Int64, false),
        Field::new("note", DataType::Utf8, false),
    ]));
    let regions = ["eu", "us", "ap", "sa"];
    let input: Vec<RecordBatch> = (0..20i64)
        .map(|b| {
            let ids: Vec<i64> = (0..500).map(|i| b * 500 + i).collect();
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int64Array::from(ids.clone())),
                    Arc::new(StringArray::from_iter_values(
                        ids.iter().map(|i| regions[(i * 7 % 4) as usize]),
                    )),
                    Arc::new(Int64Array::from_iter_values(
                        ids.iter().map(|i| (i * 7919) % 1000),
                    )),
                    Arc::new(StringArray::from_iter_values(
                        ids.iter().map(|i| format!("{i:0>100}")),
                    )),
                ],
            )
            .unwrap()
        })
        .collect();
    // 10,000 rows of about 130 bytes (1.3 MB); a chunk of 400 kB holds a region's 2,500.
    let opts = InsertOptions {
        write: super::WriteOptions {
            chunk_bytes: 400_000,
            ..Default::default()
        },
        ..Default::default()
    };
    let report = t
        .insert_batches(schema, input, &opts, Arc::new(super::NoProgress))
        .await
        .unwrap();
    assert_eq!(report.rows, 10_000);
    let snap = t.snapshot().await.unwrap();
    // Each region (2,500 rows, about 330 kB) fits the budget: one file each, where chunks of
    // 400 kB would have given each region a file in each of four chunks.
    assert_eq!(snap.files.len(), 4, "{:?}", snap.files.keys());
    let mut ids = Vec::new();
    for (path, add) in &snap.files {
        let bytes = t
            .location()
            .store
            .get(&t.location().child(path))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let reader =
            parquet::arrow::arrow_reader::ParquetRecordBatchReader::try_new(bytes, 8192).unwrap();
        let mut last = i64::MIN;
        for b in reader {
            let b = b.unwrap();
            let region = add.partition_values["region"].clone().unwrap();
            for i in 0..b.num_rows() {
                let id = b["id"].as_primitive::<Int64Type>().value(i);
                let tv = b["t"].as_primitive::<Int64Type>().value(i);
                assert_eq!(regions[(id * 7 % 4) as usize], region);
                assert!(tv >= last, "file {path} not sorted by t");
                last = tv;
                ids.push(id);
            }
        }
    }
    ids.sort();
    assert_eq!(ids, (0..10_000).collect::<Vec<_>>());
}

/// A resident input is split a window of batches at a time on the rayon pool: the writer
/// still gets every batch in input order, each error names its row counted over the whole
/// input, and the first bad batch in input order is the one reported, nothing after it sent.
#[test]
fn a_resident_input_is_split_in_order_and_stops_at_its_first_bad_batch() {
    let target = schema();
    let splitter = super::Splitter {
        target: target.clone(),
        fields: vec![],
    };
    let nullable = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("k", DataType::Utf8, true),
        Field::new("t", DataType::Int64, true),
    ]));
    // 40 batches of 10 rows; ids 0..400; a null id (not allowed) at rows 237 and 318.
    let input: Vec<RecordBatch> = (0..40)
        .map(|b| {
            let ids: Int64Array = (b * 10..b * 10 + 10)
                .map(|i| (i != 236 && i != 317).then_some(i))
                .collect();
            RecordBatch::try_new(
                nullable.clone(),
                vec![
                    Arc::new(ids),
                    Arc::new(StringArray::from(vec![Some("a"); 10])),
                    Arc::new(Int64Array::from(vec![Some(1); 10])),
                ],
            )
            .unwrap()
        })
        .collect();
    for resident in [true, false] {
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        super::split_input(
            &splitter,
            input.clone().into_iter().map(Ok),
            "in.arrow",
            resident,
            &tx,
        );
        drop(tx);
        let mut ids = Vec::new();
        let mut err = None;
        while let Some(s) = rx.blocking_recv() {
            match s {
                Ok(s) => {
                    assert_eq!(s.batch.schema(), target);
                    let col = s.batch.column(0).as_primitive::<Int64Type>();
                    ids.extend(col.values().iter().copied());
                }
                Err(e) => {
                    assert!(err.is_none(), "nothing after the first error");
                    err = Some(e.to_string());
                }
            }
        }
        assert_eq!(ids, (0..230).collect::<Vec<i64>>(), "resident {resident}");
        let err = err.expect("the null id is an error");
        assert!(err.contains("row 237"), "{err}");
    }
}
