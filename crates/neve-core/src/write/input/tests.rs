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

/// A CSV column with no value in the rows its type is inferred from is typed null; a value
/// further down is refused with its line, not dropped.
#[test]
fn a_value_below_an_empty_sample_is_refused_by_its_line() {
    let opts = ReadOptions {
        format: Some(InputFormat::Csv),
        infer_rows: 1,
        ..Default::default()
    };
    let body = "id,note\n1,\n2,hello\n";
    let input = open_bytes(
        "t.csv",
        body.to_string().into(),
        &opts,
        &TableSchema::default(),
    )
    .unwrap();
    assert_eq!(
        input.schema.field_with_name("note").unwrap().data_type(),
        &DataType::Null
    );
    let e = input
        .batches
        .map(|b| b.map(|_| ()))
        .collect::<Result<Vec<_>>>()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 3") && e.contains("note") && e.contains("--infer-rows"),
        "{e}"
    );
}

/// Text whose first 4 KiB end inside a character is still text (a CSV of non-ASCII values
/// from stdin, with no name to go by).
#[test]
fn a_character_cut_at_the_sniffed_head_is_still_text() {
    let mut body = String::from("id,name\n");
    let mut i = 0;
    while body.len() < 5000 {
        body.push_str(&format!("{i},Zoë Ångström\n"));
        i += 1;
    }
    // Shifted until byte 4,096 falls inside a character.
    let mut shifted = body.clone();
    while shifted.is_char_boundary(4096) {
        shifted.insert(8, 'x');
    }
    let opts = ReadOptions::default();
    let input = open_bytes("-", shifted.into(), &opts, &TableSchema::default()).unwrap();
    assert_eq!(input.format, InputFormat::Csv);
}

/// JSON whole numbers beyond i64 make a uint64 column, every digit kept (arrow alone would
/// type them float64, which cannot hold them).
#[test]
fn json_integers_beyond_i64_are_uint64() {
    let opts = ReadOptions {
        format: Some(InputFormat::Ndjson),
        ..Default::default()
    };
    let body = "{\"h\": 18446744073709551615}\n{\"h\": 1}\n";
    let input = open_bytes("t", body.to_string().into(), &opts, &TableSchema::default()).unwrap();
    assert_eq!(
        input.schema.field_with_name("h").unwrap().data_type(),
        &DataType::UInt64
    );
    let values: Vec<u64> = input
        .batches
        .flat_map(|b| {
            let b = b.unwrap();
            let h = b
                .column_by_name("h")
                .unwrap()
                .as_primitive::<arrow::datatypes::UInt64Type>()
                .clone();
            h.values().to_vec()
        })
        .collect();
    assert_eq!(values, [u64::MAX, 1]);
}

fn csv_error_of(body: &str, infer_rows: usize) -> String {
    let opts = ReadOptions {
        format: Some(InputFormat::Csv),
        infer_rows,
        batch_rows: 2,
        ..Default::default()
    };
    let input = match open_bytes(
        "t.csv",
        body.to_string().into(),
        &opts,
        &TableSchema::default(),
    ) {
        Ok(input) => input,
        Err(e) => return e.to_string(),
    };
    input
        .batches
        .map(|b| b.map(|_| ()))
        .collect::<Result<Vec<_>>>()
        .unwrap_err()
        .to_string()
}

/// An error names the file's line, counting the blank lines the reader skips and the line
/// breaks inside quoted fields, whichever batch it falls in.
#[test]
fn csv_errors_name_file_lines_past_blank_lines_and_quoted_breaks() {
    let body = "id,note\n1,a\n\n2,\"two\nlines\"\n\r\n3,b\nx,c\n";
    let e = csv_error_of(body, 1);
    assert!(e.contains("line 8") && e.contains("id"), "{e}");
    // A record with too few fields, below blank lines: found while inferring the types, and
    // while reading the rows below the sample.
    for infer_rows in [100, 2] {
        let e = csv_error_of("a,b\n1,2\n\n\n3,4\n\n5\n6,7\n", infer_rows);
        assert!(
            e.contains("line 7") && !e.contains("line 6"),
            "{infer_rows}: {e}"
        );
    }
}

/// A new CSV column of numbers written with leading zeros (zip codes, account numbers) is
/// text: as a number `02139` would be stored as 2139. Plain numbers stay numbers.
#[test]
fn csv_numbers_with_leading_zeros_stay_text() {
    let opts = ReadOptions {
        format: Some(InputFormat::Csv),
        ..Default::default()
    };
    let body = "zip,n,x\n10001,1,0.5\n02139,2,1.25\n";
    let input = open_bytes(
        "t.csv",
        body.to_string().into(),
        &opts,
        &TableSchema::default(),
    )
    .unwrap();
    let types: Vec<DataType> = input
        .schema
        .fields()
        .iter()
        .map(|f| f.data_type().clone())
        .collect();
    assert_eq!(types, [DataType::Utf8, DataType::Int64, DataType::Float64]);
    let zips: Vec<String> = input
        .batches
        .flat_map(|b| {
            let b = b.unwrap();
            let z = b.column_by_name("zip").unwrap().as_string::<i32>().clone();
            z.iter().map(|v| v.unwrap().to_string()).collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(zips, ["10001", "02139"]);
}
