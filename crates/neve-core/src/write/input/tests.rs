//! Inputs opened from bytes: the types inferred for new columns.

use arrow::array::AsArray;
use arrow::datatypes::{DataType, TimeUnit};

use super::*;

/// The schema of `body` read as `format` for an empty table, and its `ts` column's values.
fn timestamps(format: InputFormat, body: &str) -> (DataType, Vec<i64>) {
    let opts = ReadOptions {
        format: Some(format),
        ..Default::default()
    };
    let input = open_bytes("t", body.to_string().into(), &opts, &TableSchema::default()).unwrap();
    let dt = input
        .schema
        .field_with_name("ts")
        .unwrap()
        .data_type()
        .clone();
    let mut values = Vec::new();
    for b in input.batches {
        let b = b.unwrap();
        let ts = b.column_by_name("ts").unwrap();
        let ts = ts.as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
        values.extend((0..ts.len()).map(|i| ts.value(i)));
    }
    (dt, values)
}

/// Timestamps that name their offset are instants: an inferred column keeps them as
/// `timestamp(UTC)`, the same instant whatever the offset; wall times stay without a zone.
#[test]
fn zoned_text_timestamps_infer_utc() {
    let utc = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
    let naive = DataType::Timestamp(TimeUnit::Microsecond, None);
    let midnight = 1_704_067_200_000_000; // 2024-01-01T00:00:00Z
    let csv = "id,ts\n1,2024-01-01T00:00:00Z\n2,2024-01-01T02:00:00+02:00\n";
    assert_eq!(
        timestamps(InputFormat::Csv, csv),
        (utc.clone(), vec![midnight, midnight])
    );
    let ndjson = "{\"ts\": \"2024-01-01T00:00:00Z\"}\n{\"ts\": \"2024-01-01T02:00:00+02:00\"}\n";
    assert_eq!(
        timestamps(InputFormat::Ndjson, ndjson),
        (utc, vec![midnight, midnight])
    );
    let csv = "id,ts\n1,2024-01-01T00:00:00\n2,2024-01-01 00:00:00\n";
    assert_eq!(
        timestamps(InputFormat::Csv, csv),
        (naive.clone(), vec![midnight, midnight])
    );
    // One value without an offset: wall times, as before (a `Z` is taken as wall time in UTC).
    let csv = "id,ts\n1,2024-01-01T00:00:00Z\n2,2024-01-01T00:00:00\n";
    assert_eq!(
        timestamps(InputFormat::Csv, csv),
        (naive, vec![midnight, midnight])
    );
}
