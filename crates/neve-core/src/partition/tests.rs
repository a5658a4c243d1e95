use std::sync::Arc;

use arrow::array::{Int64Array, StringArray, TimestampMicrosecondArray};
use proptest::prelude::*;

use super::*;

#[test]
fn parses_specs() {
    let f = parse_spec("month(trip_start_timestamp) as d, bucket(16, user_id), region").unwrap();
    assert_eq!(f.len(), 3);
    assert_eq!(f[0].transform, Transform::Month);
    assert_eq!(f[0].name, "d");
    assert_eq!(f[1].transform, Transform::Bucket(16));
    assert_eq!(f[1].name, "user_id_bucket");
    assert_eq!(f[2].transform, Transform::Identity);
    assert_eq!(parse_spec(&format_spec(&f)).unwrap(), f);
    // Iceberg holds N in a 32-bit int.
    assert_eq!(
        parse_spec("bucket(2147483647, a)").unwrap()[0].transform,
        Transform::Bucket(2147483647)
    );
    let e = parse_spec("month(ts) as").unwrap_err().to_string();
    assert!(e.contains("a name must follow 'as'"), "{e}");
    let e = parse_spec("bucket(4294967295, a)").unwrap_err().to_string();
    assert!(e.contains("from 1 to 2147483647, got '4294967295'"), "{e}");
    for bad in [
        "month(a",
        "bucket(a)",
        "bucket(0, a)",
        "frob(a)",
        "a, a",
        "month(a) as x/y",
        "bucket(2147483648, a)",
        "bucket(99999999999999999999, a)",
        "truncate(-1, a)",
    ] {
        assert!(
            matches!(parse_spec(bad), Err(Error::InvalidPartitionSpec { .. })),
            "{bad}"
        );
    }
}

#[test]
fn transform_serde_round_trip() {
    for t in [
        Transform::Identity,
        Transform::Year,
        Transform::Month,
        Transform::Day,
        Transform::Hour,
        Transform::Bucket(7),
        Transform::Truncate(3),
    ] {
        let s = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<Transform>(&s).unwrap(), t);
    }
}

#[test]
fn time_labels() {
    // 2021-08-15T13:45:00Z
    let us = 1_629_035_100_000_000i64;
    let col: ArrayRef = Arc::new(TimestampMicrosecondArray::from(vec![
        Some(us),
        None,
        Some(-1),
    ]));
    for (t, want) in [
        (Transform::Year, ["2021", "1969"]),
        (Transform::Month, ["2021-08", "1969-12"]),
        (Transform::Day, ["2021-08-15", "1969-12-31"]),
        (Transform::Hour, ["2021-08-15-13", "1969-12-31-23"]),
    ] {
        let f = PartitionField {
            source: "ts".into(),
            transform: t,
            name: "p".into(),
        };
        let a = assign(&[f], std::slice::from_ref(&col), 3).unwrap();
        let labels: Vec<_> = a
            .codes
            .iter()
            .map(|&c| a.labels[c as usize][0].clone())
            .collect();
        assert_eq!(
            labels,
            vec![Some(want[0].to_string()), None, Some(want[1].to_string())]
        );
    }
}

#[test]
fn iceberg_bucket_values() {
    // Reference values from the Iceberg spec (appendix B).
    assert_eq!(
        murmur3::murmur3_32(&mut std::io::Cursor::new(34i64.to_le_bytes()), 0).unwrap() as i32,
        2017239379
    );
    assert_eq!(
        murmur3::murmur3_32(&mut std::io::Cursor::new(b"iceberg"), 0).unwrap() as i32,
        1210000089
    );
    assert_eq!(
        bucket_bytes(&34i64.to_le_bytes(), 16),
        (2017239379u32 & i32::MAX as u32) % 16
    );
}

#[test]
fn truncate_and_identity() {
    let s: ArrayRef = Arc::new(StringArray::from(vec![Some("héllo"), Some("he"), None]));
    let f = PartitionField {
        source: "s".into(),
        transform: Transform::Truncate(2),
        name: "p".into(),
    };
    let a = assign(&[f], &[s], 3).unwrap();
    assert_eq!(a.labels[a.codes[0] as usize][0].as_deref(), Some("hé"));
    assert_eq!(a.labels[a.codes[1] as usize][0].as_deref(), Some("he"));
    assert_eq!(a.labels[a.codes[2] as usize][0], None);
    let i: ArrayRef = Arc::new(Int64Array::from(vec![-3, 7, 10]));
    let f = PartitionField {
        source: "i".into(),
        transform: Transform::Truncate(5),
        name: "p".into(),
    };
    let a = assign(&[f], &[i], 3).unwrap();
    let got: Vec<_> = a
        .codes
        .iter()
        .map(|&c| a.labels[c as usize][0].clone().unwrap())
        .collect();
    assert_eq!(got, ["-5", "5", "10"]);
}

#[test]
fn escaping_is_path_safe() {
    assert_eq!(escape_value("2021-08"), "2021-08");
    assert_eq!(escape_value("a/b=c d"), "a%2Fb%3Dc%20d");
    assert_eq!(escape_value(".."), "%2E%2E");
    assert!(!escape_value("").is_empty());
}

#[test]
fn float_identity_rejected() {
    let f = PartitionField {
        source: "x".into(),
        transform: Transform::Identity,
        name: "x".into(),
    };
    assert!(check_source_type(&f, &DataType::Float64).is_err());
    let f = PartitionField {
        source: "x".into(),
        transform: Transform::Month,
        name: "x".into(),
    };
    assert!(check_source_type(&f, &DataType::Utf8).is_err());
}

proptest! {
    /// The month label of a timestamp agrees with chrono's calendar.
    #[test]
    fn month_matches_chrono(us in -4_000_000_000_000_000i64..7_000_000_000_000_000i64) {
        let col: ArrayRef = Arc::new(TimestampMicrosecondArray::from(vec![us]));
        for (t, fmt) in [(Transform::Month, "%Y-%m"), (Transform::Day, "%Y-%m-%d"), (Transform::Hour, "%Y-%m-%d-%H"), (Transform::Year, "%Y")] {
            let f = PartitionField { source: "ts".into(), transform: t, name: "p".into() };
            let a = assign(&[f], std::slice::from_ref(&col), 1).unwrap();
            let want = chrono::DateTime::from_timestamp_micros(us).unwrap().format(fmt).to_string();
            prop_assert_eq!(a.labels[a.codes[0] as usize][0].clone().unwrap(), want);
        }
    }

    /// Rows with equal keys share a partition code, different keys never do, across levels.
    #[test]
    fn codes_partition_rows_exactly(vals in proptest::collection::vec((0i64..6, proptest::option::of(0i64..3)), 1..200)) {
        let a: ArrayRef = Arc::new(Int64Array::from(vals.iter().map(|v| v.0).collect::<Vec<_>>()));
        let b: ArrayRef = Arc::new(Int64Array::from(vals.iter().map(|v| v.1).collect::<Vec<_>>()));
        let fields = vec![
            PartitionField { source: "a".into(), transform: Transform::Identity, name: "a".into() },
            PartitionField { source: "b".into(), transform: Transform::Truncate(2), name: "b".into() },
        ];
        let p = assign(&fields, &[a, b], vals.len()).unwrap();
        for i in 0..vals.len() {
            for j in 0..vals.len() {
                let key = |k: usize| (vals[k].0, vals[k].1.map(|v| v - v % 2));
                prop_assert_eq!(p.codes[i] == p.codes[j], key(i) == key(j));
            }
            let label = &p.labels[p.codes[i] as usize];
            prop_assert_eq!(label[0].clone(), Some(vals[i].0.to_string()));
            prop_assert_eq!(label[1].clone(), vals[i].1.map(|v| (v - v % 2).to_string()));
        }
    }

    /// Escaped values never contain path separators or '=' and are never empty.
    #[test]
    fn escape_is_safe(s in ".*") {
        let e = escape_value(&s);
        prop_assert!(!e.is_empty() && !e.contains('/') && !e.contains('=') && e != "." && e != "..");
    }
}
