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
    assert_eq!(parse_spec("month(ts) as \"d\"").unwrap()[0].name, "d");
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

/// The one label of a one-row column under `t`.
fn label_of(t: Transform, col: ArrayRef) -> Option<String> {
    let f = PartitionField {
        source: "c".into(),
        transform: t,
        name: "p".into(),
    };
    check_source_type(&f, col.data_type()).unwrap();
    let a = assign(&[f], std::slice::from_ref(&col), col.len()).unwrap();
    a.labels[a.codes[0] as usize][0].clone()
}

/// The bucket a hash from the Iceberg spec gives at N = 2^31 - 1 (the hash itself, masked).
fn spec_bucket(hash: i32) -> String {
    (((hash & i32::MAX) as u32) % i32::MAX as u32).to_string()
}

#[test]
fn bucket_of_every_type_is_icebergs() {
    use arrow::array::{
        BinaryArray, Date32Array, Decimal128Array, FixedSizeBinaryArray, Int32Array,
        Time64MicrosecondArray,
    };
    let n = Transform::Bucket(i32::MAX as u32);
    // The Iceberg spec's appendix B: "32-bit hash requirements".
    let ts = 1_510_871_468_000_000i64; // 2017-11-16T22:31:08
    let cases: Vec<(ArrayRef, i32)> = vec![
        (Arc::new(Int32Array::from(vec![34])), 2017239379),
        (Arc::new(Int64Array::from(vec![34])), 2017239379),
        (
            Arc::new(
                Decimal128Array::from(vec![1420])
                    .with_precision_and_scale(9, 2)
                    .unwrap(),
            ),
            -500754589,
        ),
        (Arc::new(Date32Array::from(vec![17486])), -653330422),
        (
            Arc::new(Time64MicrosecondArray::from(vec![81_068_000_000])),
            -662762989,
        ),
        (
            Arc::new(TimestampMicrosecondArray::from(vec![ts])),
            -2047944441,
        ),
        (
            Arc::new(TimestampMicrosecondArray::from(vec![ts]).with_timezone("-08:00")),
            -2047944441,
        ),
        (Arc::new(StringArray::from(vec!["iceberg"])), 1210000089),
        (
            Arc::new(
                FixedSizeBinaryArray::try_from_iter(
                    [[
                        0xf7u8, 0x9c, 0x3e, 0x09, 0x67, 0x7c, 0x4b, 0xbd, 0xa4, 0x79, 0x3f, 0x34,
                        0x9c, 0xb7, 0x85, 0xe7,
                    ]]
                    .into_iter(),
                )
                .unwrap(),
            ),
            1488055340,
        ),
        (
            Arc::new(FixedSizeBinaryArray::try_from_iter([[0u8, 1, 2, 3]].into_iter()).unwrap()),
            -188683207,
        ),
        (
            Arc::new(BinaryArray::from(vec![&[0u8, 1, 2, 3][..]])),
            -188683207,
        ),
    ];
    for (col, hash) in cases {
        let dt = col.data_type().clone();
        assert_eq!(label_of(n, col), Some(spec_bucket(hash)), "{dt}");
    }
}

#[test]
fn truncate_of_decimals_and_bytes_is_icebergs() {
    use arrow::array::{BinaryArray, Decimal128Array, Int32Array};
    let dec = |v: i128| -> ArrayRef {
        Arc::new(
            Decimal128Array::from(vec![v])
                .with_precision_and_scale(9, 2)
                .unwrap(),
        )
    };
    let int = |v: i32| -> ArrayRef { Arc::new(Int32Array::from(vec![v])) };
    // The spec's examples: truncate[10] of 10.65 is 10.60; of ints, 1 -> 0 and -1 -> -10.
    for (t, col, want) in [
        (Transform::Truncate(10), dec(1065), "10.60"),
        (Transform::Truncate(10), dec(-1065), "-10.70"),
        (Transform::Truncate(50), dec(-5), "-0.50"),
        (Transform::Identity, dec(-5), "-0.05"),
        (Transform::Truncate(10), int(1), "0"),
        (Transform::Truncate(10), int(-1), "-10"),
    ] {
        assert_eq!(label_of(t, col).as_deref(), Some(want), "{t}");
    }
    // The multiple below i64::MIN is a number, not a wrapped one.
    let min: ArrayRef = Arc::new(Int64Array::from(vec![i64::MIN]));
    assert_eq!(
        label_of(Transform::Truncate(3), min).as_deref(),
        Some("-9223372036854775809")
    );
    let bytes: ArrayRef = Arc::new(BinaryArray::from(vec![&[1u8, 2, 3, 4][..], &[0xab][..]]));
    assert_eq!(
        label_of(Transform::Truncate(3), bytes.clone()).as_deref(),
        Some("010203")
    );
    assert_eq!(
        label_of(Transform::Identity, bytes).as_deref(),
        Some("01020304")
    );
    assert_eq!(unhex("01020304"), Some(vec![1, 2, 3, 4]));
    assert_eq!(unhex("0"), None);
    assert_eq!(unhex("zz"), None);
}

#[test]
fn identity_of_times_and_wide_integers() {
    use arrow::array::{Time64MicrosecondArray, UInt64Array};
    let ts: ArrayRef =
        Arc::new(TimestampMicrosecondArray::from(vec![1_629_035_100_000_001]).with_timezone("UTC"));
    assert_eq!(
        label_of(Transform::Identity, ts).as_deref(),
        Some("2021-08-15T13:45:00.000001Z")
    );
    let t: ArrayRef = Arc::new(Time64MicrosecondArray::from(vec![49_500_000_007]));
    assert_eq!(
        label_of(Transform::Identity, t).as_deref(),
        Some("13:45:00.000007")
    );
    // Above i64::MAX: its own partition, never the null one.
    let u: ArrayRef = Arc::new(UInt64Array::from(vec![Some(u64::MAX), None]));
    let f = PartitionField {
        source: "u".into(),
        transform: Transform::Identity,
        name: "u".into(),
    };
    let a = assign(&[f], &[u], 2).unwrap();
    assert_eq!(
        a.labels[a.codes[0] as usize][0].as_deref(),
        Some("18446744073709551615")
    );
    assert_eq!(a.labels[a.codes[1] as usize][0], None);
    // A column with no type yet: every row in the null partition, whatever the transform.
    let nulls: ArrayRef = Arc::new(arrow::array::NullArray::new(3));
    let f = PartitionField {
        source: "x".into(),
        transform: Transform::Bucket(4),
        name: "x".into(),
    };
    let a = assign(&[f], &[nulls], 3).unwrap();
    assert_eq!(a.codes, vec![0, 0, 0]);
    assert_eq!(a.labels, vec![vec![None]]);
}

#[test]
fn transforms_refused_where_iceberg_has_none() {
    let f = |t| PartitionField {
        source: "c".into(),
        transform: t,
        name: "p".into(),
    };
    for (t, dt) in [
        (Transform::Truncate(4), DataType::FixedSizeBinary(16)),
        (Transform::Truncate(4), DataType::Date32),
        (Transform::Truncate(4), DataType::UInt64),
        (Transform::Bucket(4), DataType::UInt64),
        (Transform::Bucket(4), DataType::Float64),
        (Transform::Bucket(4), DataType::Boolean),
        (Transform::Hour, DataType::Date32),
    ] {
        let e = check_source_type(&f(t), &dt).unwrap_err().to_string();
        assert!(e.contains(&format!("of type {dt}")), "{e}");
    }
}

proptest! {
    /// A decimal's truncation is the largest multiple of W (unscaled) not above it, spelled at
    /// the column's scale; equal truncations share a partition.
    #[test]
    fn decimal_truncate_is_floor(vals in proptest::collection::vec(-10i128.pow(12)..10i128.pow(12), 1..50), w in 1u32..5000, scale in 0i8..6) {
        use arrow::array::Decimal128Array;
        let col: ArrayRef = Arc::new(Decimal128Array::from(vals.clone()).with_precision_and_scale(18, scale).unwrap());
        let f = PartitionField { source: "c".into(), transform: Transform::Truncate(w), name: "p".into() };
        let a = assign(&[f], &[col], vals.len()).unwrap();
        for (i, v) in vals.iter().enumerate() {
            let label = a.labels[a.codes[i] as usize][0].clone().unwrap();
            let t = parse_unscaled(&label, scale).unwrap();
            prop_assert!(t <= *v && *v - t < w as i128 && t.rem_euclid(w as i128) == 0, "{v} -> {label}");
            for (j, u) in vals.iter().enumerate() {
                prop_assert_eq!(a.codes[i] == a.codes[j], t == u - u.rem_euclid(w as i128));
            }
        }
    }

    /// Bytes' labels spell the bytes; bucket and identity agree on which rows are equal.
    #[test]
    fn bytes_labels_round_trip(vals in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..12), 1..30)) {
        use arrow::array::BinaryArray;
        let col: ArrayRef = Arc::new(BinaryArray::from(vals.iter().map(|v| v.as_slice()).collect::<Vec<_>>()));
        let f = PartitionField { source: "c".into(), transform: Transform::Identity, name: "p".into() };
        let a = assign(&[f], std::slice::from_ref(&col), vals.len()).unwrap();
        let g = PartitionField { source: "c".into(), transform: Transform::Bucket(7), name: "p".into() };
        let b = assign(&[g], &[col], vals.len()).unwrap();
        for (i, v) in vals.iter().enumerate() {
            let label = a.labels[a.codes[i] as usize][0].clone().unwrap();
            prop_assert_eq!(unhex(&label).unwrap(), v.clone());
            let bucket = b.labels[b.codes[i] as usize][0].clone().unwrap();
            prop_assert_eq!(bucket, bucket_bytes(v, 7).to_string());
        }
    }
}
