//! Text values read as the column's type: exact, or refused with the reason.

use super::*;

fn one(s: &str, t: DataType) -> Result<ArrayRef, String> {
    one_with(s, t, None)
}

fn one_with(s: &str, t: DataType, unit: Option<EpochUnit>) -> Result<ArrayRef, String> {
    parse_text(
        &StringArray::from(vec![Some(s)]),
        &t,
        &TextOptions { epoch_unit: unit },
    )
    .map_err(|b| b.reason)
}

#[test]
fn integers_are_exact() {
    assert!(one("42", DataType::Int64).is_ok());
    assert!(one("-128", DataType::Int8).is_ok());
    let e = one("1.5", DataType::Int64).unwrap_err();
    assert!(e.contains("not an integer"), "{e}");
    let e = one("1e3", DataType::Int64).unwrap_err();
    assert!(e.contains("not an integer"), "{e}");
    let e = one("300", DataType::Int8).unwrap_err();
    assert!(e.contains("out of range for int8"), "{e}");
    let e = one("NaN", DataType::Int32).unwrap_err();
    assert!(e.contains("not a number"), "{e}");
    let e = one("-1", DataType::UInt8).unwrap_err();
    assert!(e.contains("out of range for uint8"), "{e}");
    let e = one("99999999999999999999", DataType::Int64).unwrap_err();
    assert!(e.contains("out of range for int64"), "{e}");
}

#[test]
fn floats_keep_integers_exact() {
    assert!(one("9007199254740992", DataType::Float64).is_ok());
    let e = one("9007199254740993", DataType::Float64).unwrap_err();
    assert!(e.contains("cannot hold exactly"), "{e}");
    let e = one("1e400", DataType::Float64).unwrap_err();
    assert!(e.contains("out of range"), "{e}");
    let e = one("1e39", DataType::Float32).unwrap_err();
    assert!(e.contains("out of range for float32"), "{e}");
    assert!(one("NaN", DataType::Float64).is_ok());
}

/// A float's text with more digits than the type keeps is taken only when it is the stored
/// float written to that many digits (`%.17g`); otherwise the value would change.
#[test]
fn floats_keep_every_digit_they_are_given() {
    for ok in ["0.1", "0.10000000000000001", "0.30000000000000004", "1e22"] {
        assert!(one(ok, DataType::Float64).is_ok(), "{ok}");
    }
    // Any float written to 17 digits, as `%.17g` and `repr` of old did.
    for x in [1.0 / 3.0, 2f64.sqrt(), -1e-300 / 7.0, 123456789.0 / 1e-7] {
        let text = format!("{x:.16e}");
        let v = one(&text, DataType::Float64).unwrap();
        use arrow::array::AsArray;
        assert_eq!(
            v.as_primitive::<arrow::datatypes::Float64Type>().value(0),
            x
        );
    }
    for changed in [
        "9007199254740993.0",
        "9007199254740993e0",
        "3.141592653589793238",
        "0.1000000000000000000001",
    ] {
        let e = one(changed, DataType::Float64).unwrap_err();
        assert!(e.contains("more digits than float64"), "{changed}: {e}");
    }
    assert!(one("3.141593", DataType::Float32).is_ok());
    assert!(one("16777216.0", DataType::Float32).is_ok());
    for changed in ["16777217.0", "3.14159265358979"] {
        let e = one(changed, DataType::Float32).unwrap_err();
        assert!(e.contains("more digits than float32"), "{changed}: {e}");
    }
}

#[test]
fn decimals_never_round() {
    let d = one("12.50", DataType::Decimal128(5, 2)).unwrap();
    assert_eq!(
        arrow::util::display::array_value_to_string(&d, 0).unwrap(),
        "12.50"
    );
    assert!(one("12.500", DataType::Decimal128(5, 2)).is_ok());
    let e = one("12.505", DataType::Decimal128(5, 2)).unwrap_err();
    assert!(e.contains("more than 2 decimal places"), "{e}");
    let e = one("1234.5", DataType::Decimal128(5, 2)).unwrap_err();
    assert!(e.contains("out of range"), "{e}");
    let d = one("-0.05", DataType::Decimal128(5, 2)).unwrap();
    assert_eq!(
        arrow::util::display::array_value_to_string(&d, 0).unwrap(),
        "-0.05"
    );
}

#[test]
fn dates_and_times() {
    assert!(one("2024-02-29", DataType::Date32).is_ok());
    assert!(one("2023-02-29", DataType::Date32).is_err());
    let d = one("1969-12-31", DataType::Date32).unwrap();
    assert_eq!(
        d.as_any()
            .downcast_ref::<arrow::array::Date32Array>()
            .unwrap()
            .value(0),
        -1
    );
    assert!(one("12:34:56.789", DataType::Time64(TimeUnit::Microsecond)).is_ok());
    let e = one(
        "12:34:56.123456789",
        DataType::Time64(TimeUnit::Microsecond),
    )
    .unwrap_err();
    assert!(e.contains("nanoseconds"), "{e}");
    // chrono reads nine digits and skips the rest, and a leap second as the next one.
    let time = DataType::Time64(TimeUnit::Microsecond);
    let e = one("12:34:56.1234560001", time.clone()).unwrap_err();
    assert!(e.contains("nanoseconds"), "{e}");
    assert!(one("12:34:56.1234560000", time.clone()).is_ok());
    for t in ["12:00:60", "23:59:60"] {
        let e = one(t, time.clone()).unwrap_err();
        assert!(e.contains("leap second"), "{t}: {e}");
    }
}

#[test]
fn timestamps_keep_every_digit_and_no_leap_second() {
    let tz = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
    let ts = DataType::Timestamp(TimeUnit::Microsecond, None);
    for (v, t) in [
        ("2024-01-01T00:00:00.0000000001Z", &tz),
        ("2024-01-01 00:00:00.1234567891", &ts),
    ] {
        let e = one(v, t.clone()).unwrap_err();
        assert!(e.contains("nanoseconds"), "{v}: {e}");
    }
    for (v, t) in [("2024-01-01T12:00:60Z", &tz), ("2024-01-01 12:00:60", &ts)] {
        let e = one(v, t.clone()).unwrap_err();
        assert!(e.contains("leap second"), "{v}: {e}");
    }
    assert!(one("2024-01-01T00:00:00.1234560000000Z", tz.clone()).is_ok());
}

#[test]
fn offsets_out_of_range_are_refused() {
    let tz = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
    for v in [
        "2024-01-01T12:00:00+05:99",
        "2024-01-01T12:00:00+0599",
        "2024-01-01T12:00:00+24:00",
        "2024-01-01T12:00:00-99:00",
        "2024-01-01T12:00:00+0:530",
        "2024-01-01 12:00:00+05:3",
    ] {
        assert!(one(v, tz.clone()).is_err(), "{v} was taken");
        assert!(!has_offset(v), "{v}");
    }
    let v = one("2024-01-01T12:00:00-2359", tz.clone()).unwrap();
    assert_eq!(
        arrow::util::display::array_value_to_string(&v, 0).unwrap(),
        "2024-01-02T11:59:00Z"
    );
    // Postgres writes whole-hour offsets as `+00`, `-05`.
    let v = one("2024-01-01 12:00:00-05", tz.clone()).unwrap();
    assert_eq!(
        arrow::util::display::array_value_to_string(&v, 0).unwrap(),
        "2024-01-01T17:00:00Z"
    );
    assert!(has_offset("2024-01-01 10:00:00+00"));
    let v = one("2024-01-01 12:00:00+05:30", tz).unwrap();
    assert_eq!(
        arrow::util::display::array_value_to_string(&v, 0).unwrap(),
        "2024-01-01T06:30:00Z"
    );
}

#[test]
fn floats_too_close_to_zero_are_refused() {
    for (v, t) in [
        ("1e-400", DataType::Float64),
        ("-1e-400", DataType::Float64),
        ("1e-46", DataType::Float32),
    ] {
        let e = one(v, t).unwrap_err();
        assert!(e.contains("too close to zero"), "{v}: {e}");
    }
    for v in ["0", "0.0", "-0.0", "0e10", "1e-300"] {
        assert!(one(v, DataType::Float64).is_ok(), "{v}");
    }
}

#[test]
fn timestamps_need_text_or_a_unit() {
    let ts = DataType::Timestamp(TimeUnit::Microsecond, None);
    let tz = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
    let e = one("1700000000", tz.clone()).unwrap_err();
    assert!(e.contains("epoch unit"), "{e}");
    let v = one_with("1700000000", tz.clone(), Some(EpochUnit::Seconds)).unwrap();
    assert_eq!(
        arrow::util::display::array_value_to_string(&v, 0).unwrap(),
        "2023-11-14T22:13:20Z"
    );
    // Microseconds beyond the years chrono writes (Postgres' `infinity` as i64::MAX).
    let e = one_with("9223372036854775807", tz.clone(), Some(EpochUnit::Micros)).unwrap_err();
    assert!(e.contains("out of range"), "{e}");
    let e = one_with("1700000000123", tz.clone(), Some(EpochUnit::Nanos)).unwrap_err();
    assert!(e.contains("nanoseconds"), "{e}");
    // An offset into a zoned column is the same instant.
    let v = one("2024-01-01T02:00:00+02:00", tz.clone()).unwrap();
    assert_eq!(
        arrow::util::display::array_value_to_string(&v, 0).unwrap(),
        "2024-01-01T00:00:00Z"
    );
    // Into a column without a zone it would have to be dropped or applied: refused.
    let e = one("2024-01-01T02:00:00+02:00", ts.clone()).unwrap_err();
    assert!(e.contains("UTC offset"), "{e}");
    assert!(one("2024-01-01T02:00:00Z", ts.clone()).is_ok());
    assert!(one("1900-01-01 00:00:00", ts.clone()).is_ok());
    assert!(one("2024-02-30T00:00:00", ts).is_err());
}

#[test]
fn fixed_and_binary() {
    let v = one(
        "550e8400-e29b-41d4-a716-446655440000",
        DataType::FixedSizeBinary(16),
    )
    .unwrap();
    assert_eq!(v.len(), 1);
    let e = one("AAEC", DataType::FixedSizeBinary(16)).unwrap_err();
    assert!(e.contains("3 bytes"), "{e}");
    assert!(one("aGVsbG8=", DataType::Binary).is_ok());
    assert!(one("not base64!", DataType::Binary).is_err());
}

proptest::proptest! {
    /// The hand parser agrees with chrono on every ISO timestamp it takes.
    #[test]
    fn iso_parser_agrees_with_chrono(
        secs in -2_208_988_800i64..4_102_444_800, micros in 0u32..1_000_000,
        offset_min in -14 * 60i32..14 * 60, style in 0u8..4,
    ) {
        let utc = chrono::DateTime::from_timestamp(secs, micros * 1000).unwrap();
        let off = chrono::FixedOffset::east_opt(offset_min * 60).unwrap();
        let text = match style {
            0 => utc.with_timezone(&off).to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            1 => utc.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
            2 => utc.with_timezone(&off).format("%Y-%m-%d %H:%M:%S%.f%:z").to_string(),
            _ => utc.format("%Y-%m-%d %H:%M:%S").to_string(),
        };
        let want = if style == 3 { secs * 1_000_000 } else { utc.timestamp_micros() };
        let tz: arrow::array::timezone::Tz = "UTC".parse().unwrap();
        proptest::prop_assert_eq!(parse_timestamp(&text, Some(&tz), None), Ok(want), "{}", text);
        proptest::prop_assert!(iso_timestamp(text.as_bytes()).is_some(), "{}", text);
    }
}
