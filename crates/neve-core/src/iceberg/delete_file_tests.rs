//! Delete files read back through the parquet crate's reader are the rows they were written
//! from, whatever the paths' count (the indices' width), the positions' spread (the deltas'
//! widths, up to 64 bits) and the rows' count (blocks and miniblocks, full and not).

use std::collections::BTreeSet;

use arrow::array::{AsArray, Int64Array};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::statistics::Statistics;
use proptest::prelude::*;

use super::DeleteFiles;

/// A row of a delete file: a data file's path and a position in it.
type Row = (String, i64);

/// What a file holds, row by row, and the bounds of `pos` in its footer (none when it holds
/// no rows).
fn read(bytes: Vec<u8>) -> (Vec<Row>, Option<(i64, i64)>) {
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes)).unwrap();
    let bounds = match reader.metadata().row_group(0).column(1).statistics() {
        Some(Statistics::Int64(s)) => s.min_opt().copied().zip(s.max_opt().copied()),
        other => panic!("pos has no statistics of longs: {other:?}"),
    };
    let mut rows = Vec::new();
    for batch in reader.build().unwrap() {
        let batch = batch.unwrap();
        let paths = batch.column(0).as_string::<i32>();
        let pos = batch
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        rows.extend((0..batch.num_rows()).map(|i| (paths.value(i).to_string(), pos.value(i))));
    }
    (rows, bounds)
}

/// Positions of one data file: sorted, distinct, from a range that is sometimes narrow (deltas
/// of a bit or two) and sometimes the whole of a long's positive half.
fn positions() -> impl Strategy<Value = BTreeSet<u64>> {
    prop_oneof![
        prop::collection::btree_set(0u64..2_000, 0..300),
        prop::collection::btree_set(0u64..1 << 40, 1..200),
        prop::collection::btree_set(0u64..=i64::MAX as u64, 1..20),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn delete_files_read_back_as_written(
        files in prop::collection::vec(positions(), 1..300),
        long_paths in any::<bool>(),
    ) {
        let pad = if long_paths { "x".repeat(200) } else { String::new() };
        let paths: Vec<String> = (0..files.len())
            .map(|i| format!("s3://lake/t/_data/d={}/part-{i}{pad}.parquet", i % 7))
            .collect();
        // Given in the order the writer found them, not sorted.
        let rows: Vec<(&str, Vec<u64>)> = paths
            .iter()
            .zip(&files)
            .rev()
            .map(|(p, s)| (p.as_str(), s.iter().copied().collect()))
            .collect();
        let mut want: Vec<(String, i64)> = rows
            .iter()
            .flat_map(|(p, s)| s.iter().map(|&x| (p.to_string(), x as i64)))
            .collect();
        want.sort();
        let (known, bytes) = DeleteFiles::new().bytes(rows).unwrap();
        prop_assert_eq!(known.size, bytes.len() as u64);
        prop_assert_eq!(known.rows, want.len() as u64);
        let (got, bounds) = read(bytes);
        let min = want.iter().map(|r| r.1).min();
        let max = want.iter().map(|r| r.1).max();
        prop_assert_eq!(got, want);
        prop_assert_eq!(bounds, min.zip(max));
    }
}
