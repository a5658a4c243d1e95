//! Keyed columns against the strings they stand for: the same values, the same order, the same
//! gathered parts and the same Parquet bytes.

use arrow::array::{BinaryArray, Int64Array, LargeStringArray, StringArray};
use arrow::datatypes::Schema;
use proptest::prelude::*;

use super::*;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("s", DataType::Utf8, true),
        Field::new("b", DataType::Binary, false),
        Field::new("l", DataType::LargeUtf8, true),
        Field::new("id", DataType::Utf8, false),
        Field::new("n", DataType::Int64, false),
    ]))
}

/// A batch of `rows`: `(s, b, l)` codes (`None` a null), picked from few values each, with a
/// distinct `id` and `n` a row.
fn batch(rows: &[Row], first_id: usize) -> RecordBatch {
    let s: StringArray = rows
        .iter()
        .map(|r| {
            r.0.map(|v| format!("é{}", "x".repeat(v as usize % 5)) + &v.to_string())
        })
        .collect();
    let b = BinaryArray::from_iter_values(rows.iter().map(|r| vec![r.1; (r.1 % 4) as usize]));
    let l: LargeStringArray = rows
        .iter()
        .map(|r| r.2.map(|v| format!("{v:03}")))
        .collect();
    let id = StringArray::from_iter_values((0..rows.len()).map(|i| {
        format!(
            "{:040x}",
            ((first_id + i) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        )
    }));
    let n = Int64Array::from_iter_values((0..rows.len()).map(|i| (first_id + i) as i64));
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(s),
            Arc::new(b),
            Arc::new(l),
            Arc::new(id),
            Arc::new(n),
        ],
    )
    .unwrap()
}

/// A row's `(s, b, l)` codes.
type Row = (Option<u8>, u8, Option<u8>);

fn chunk(batches: &[Vec<Row>]) -> Vec<(RecordBatch, Vec<u32>)> {
    let mut at = 0;
    batches
        .iter()
        .map(|rows| {
            let b = batch(rows, at);
            at += rows.len();
            (b, vec![0; rows.len()])
        })
        .collect()
}

/// The batch with every keyed column turned back into the table's type.
fn unkey(b: &RecordBatch) -> RecordBatch {
    let table = schema();
    let cols = b
        .columns()
        .iter()
        .zip(table.fields())
        .map(|(c, f)| unkeyed(c, f.data_type()).unwrap())
        .collect();
    RecordBatch::try_new(table, cols).unwrap()
}

fn rows() -> impl Strategy<Value = Vec<Row>> {
    let few = prop_oneof![Just(None), (0u8..6).prop_map(Some)];
    prop::collection::vec((few.clone(), 0u8..3, few), 1..300)
}

proptest! {
    /// Keyed batches hold the same values as before, in every row; each keyed column's
    /// dictionary is the chunk's one, sorted ascending; the distinct `id` is left as it is.
    #[test]
    fn keyed_columns_hold_the_same_values(batches in prop::collection::vec(rows(), 1..5)) {
        let before = chunk(&batches);
        let mut after = before.clone();
        // 6 values and nulls, 3 values: within a quarter of any batch (at least 64).
        let keyed = key_few_valued(&mut after).unwrap().expect("keyed");
        // `id` is all distinct: judged so on a batch of 64 rows or more.
        let judged = batches.iter().any(|b| b.len() >= 64);
        for ((b, _), (a, _)) in before.iter().zip(&after) {
            prop_assert_eq!(&unkey(a), b);
            if judged {
                prop_assert_eq!(a.column(3).data_type(), &DataType::Utf8);
            }
            prop_assert_eq!(a.column(4).data_type(), &DataType::Int64);
        }
        {
            for c in 0..3 {
                prop_assert!(matches!(keyed.field(c).data_type(), DataType::Dictionary(..)));
                let first = after[0].0.column(c).as_dictionary::<UInt32Type>().values().clone();
                for (a, _) in &after {
                    prop_assert!(sorted_keys(a.column(c).as_ref()).is_some());
                    let values = a.column(c).as_dictionary::<UInt32Type>().values();
                    prop_assert!(Arc::ptr_eq(values, &first));
                }
            }
        }
    }

    /// A part gathered and sorted from keyed slices is the part gathered from the strings, and
    /// encodes to the same Parquet bytes.
    #[test]
    fn keyed_parts_encode_to_the_same_bytes(
        batches in prop::collection::vec(rows(), 1..4),
        cuts in prop::collection::vec((0usize..300, 0usize..300), 1..4),
        sort_by in prop::sample::select(vec![vec![0usize], vec![2, 1], vec![1, 4], vec![]]),
    ) {
        let before = chunk(&batches);
        let mut after = before.clone();
        let keyed = key_few_valued(&mut after).unwrap().unwrap_or_else(schema);
        let slice = |bs: &[(RecordBatch, Vec<u32>)]| -> Vec<RecordBatch> {
            bs.iter()
                .zip(&cuts)
                .map(|((b, _), &(a, l))| {
                    let a = a % b.num_rows();
                    b.slice(a, l.min(b.num_rows() - a))
                })
                .collect()
        };
        let plain = crate::write::gather_sorted(&schema(), &slice(&before), &sort_by).unwrap();
        let from_keys = crate::write::gather_sorted(&keyed, &slice(&after), &sort_by).unwrap();
        prop_assert_eq!(&unkey(&from_keys), &plain);
        let props = crate::write::writer_properties(
            parquet::basic::Compression::SNAPPY,
            1 << 20,
            &schema(),
            &sort_by,
        );
        let format = crate::write::FileFormat::new(&schema(), props).unwrap();
        let (want, footer) = crate::write::encode_parquet(&plain, &format).unwrap();
        let (got, keyed_footer) = crate::write::encode_parquet(&from_keys, &format).unwrap();
        prop_assert!(want == got, "the files' bytes differ");
        prop_assert_eq!(
            crate::write::file_stats(&schema(), &from_keys, &keyed_footer).unwrap(),
            crate::write::file_stats(&schema(), &plain, &footer).unwrap()
        );
    }
}

/// A column with more distinct values than a quarter of a batch (at least 64) stays strings,
/// and so does one nearly all distinct in its sample; the others are keyed.
#[test]
fn columns_of_many_values_stay_strings() {
    let rows: Vec<Row> = (0..1000)
        .map(|i| (Some((i % 200) as u8), 1, Some(2)))
        .collect();
    let mut c = chunk(&[rows.clone(), rows]);
    let keyed = key_few_valued(&mut c).unwrap().unwrap();
    // `s`: 200 distinct of 1,000 rows is within a quarter; `id`: all distinct.
    assert!(matches!(
        keyed.field(0).data_type(),
        DataType::Dictionary(..)
    ));
    assert_eq!(keyed.field(3).data_type(), &DataType::Utf8);
    let rows: Vec<Row> = (0..400)
        .map(|i| (Some((i % 200) as u8), 1, Some(2)))
        .collect();
    let mut c = chunk(&[rows]);
    let keyed = key_few_valued(&mut c).unwrap().unwrap();
    // 200 distinct of 400 rows: more than a quarter.
    assert_eq!(keyed.field(0).data_type(), &DataType::Utf8);
    assert!(matches!(
        keyed.field(1).data_type(),
        DataType::Dictionary(..)
    ));
}

/// A chunk of many small batches (many small inserts) judges a column on their rows
/// together: ids stay strings, though each batch of 20 has only 20 of them, while a column of
/// few values is keyed.
#[test]
fn small_batches_are_judged_together() {
    let batches: Vec<(RecordBatch, Vec<u32>)> = (0..200)
        .map(|b| {
            let id = StringArray::from_iter_values((0..20).map(|i| format!("id-{b}-{i}")));
            let kind = StringArray::from_iter_values((0..20).map(|i| format!("kind-{}", i % 3)));
            let schema = Arc::new(Schema::new(vec![
                Field::new("id", DataType::Utf8, false),
                Field::new("kind", DataType::Utf8, false),
            ]));
            let columns: Vec<ArrayRef> = vec![Arc::new(id), Arc::new(kind)];
            (RecordBatch::try_new(schema, columns).unwrap(), vec![0; 20])
        })
        .collect();
    let mut c = batches.clone();
    let keyed = key_few_valued(&mut c).unwrap().expect("kind is keyed");
    assert_eq!(keyed.field(0).data_type(), &DataType::Utf8);
    assert!(matches!(
        keyed.field(1).data_type(),
        DataType::Dictionary(..)
    ));
}

/// A chunk whose distinct values would outgrow the dictionary's bound stays strings, even
/// when each batch has few.
#[test]
fn a_dictionary_too_large_for_the_chunk_is_not_built() {
    let batches: Vec<(RecordBatch, Vec<u32>)> = (0..(MAX_VALUES / 100 + 2))
        .map(|b| {
            // 100 values a batch of 1,000 rows, new values in every batch.
            let s = StringArray::from_iter_values((0..1000).map(|i| format!("{b}-{}", i % 100)));
            let schema = Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8, false)]));
            (
                RecordBatch::try_new(schema, vec![Arc::new(s)]).unwrap(),
                vec![0; 1000],
            )
        })
        .collect();
    let mut c = batches.clone();
    assert_eq!(key_few_valued(&mut c).unwrap(), None);
    assert_eq!(c, batches);
}

/// A dictionary whose values are not sorted (not one of ours) is never read as ranks.
#[test]
fn unsorted_dictionaries_are_not_ranks() {
    let values: ArrayRef = Arc::new(StringArray::from(vec!["b", "a"]));
    let d = DictionaryArray::<UInt32Type>::new(UInt32Array::from(vec![0, 1]), values);
    assert!(sorted_keys(&d).is_none());
    let values: ArrayRef = Arc::new(StringArray::from(vec!["a", "b"]));
    let d = DictionaryArray::<UInt32Type>::new(UInt32Array::from(vec![0, 1]), values);
    assert!(sorted_keys(&d).is_some());
}
