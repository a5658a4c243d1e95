//! Partition values of decimals, bytes, times and timestamps, and how the log spells them.

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{
    DataType, Decimal128Type, Time64MicrosecondType, TimeUnit, TimestampMicrosecondType, UInt64Type,
};

use super::{bucket_bytes, Interner, PartitionField, Transform};
use crate::error::Result;

/// Codes of rows keyed by `key(row)` (`None`: the null partition), and a label per code.
fn intern_by<K: std::hash::Hash + Eq>(
    n: usize,
    codes: &mut Vec<u32>,
    key: impl Fn(usize) -> Option<K>,
    label: impl Fn(&K) -> String,
) -> Vec<Option<String>> {
    let mut it: Interner<K> = Interner::new();
    for i in 0..n {
        codes.push(match key(i) {
            Some(k) => it.code(k, &label),
            None => it.null(),
        });
    }
    it.labels
}

/// The types a transform applies to besides strings, integers, dates and booleans (and the
/// time transforms of timestamps): decimals, bytes, times, timestamps' identity and bucket,
/// and uint64's identity. `None` for a column of another type.
pub(super) fn other_types(
    f: &PartitionField,
    col: &ArrayRef,
    codes: &mut Vec<u32>,
) -> Result<Option<Vec<Option<String>>>> {
    let n = col.len();
    let t = f.transform;
    let labels = match col.data_type() {
        DataType::Decimal128(_, scale) => {
            let arr = col.as_primitive::<Decimal128Type>();
            let scale = *scale;
            let value = |i: usize| arr.is_valid(i).then(|| arr.value(i));
            match t {
                Transform::Bucket(nb) => intern_by(
                    n,
                    codes,
                    |i| value(i).map(|v| bucket_bytes(&decimal_bytes(v), nb)),
                    |k| k.to_string(),
                ),
                // Iceberg truncates the unscaled value; the scale stays.
                Transform::Truncate(w) => intern_by(
                    n,
                    codes,
                    |i| value(i).map(|v| v.wrapping_sub(v.rem_euclid(w as i128))),
                    |k| decimal_label(*k, scale),
                ),
                _ => intern_by(n, codes, value, |k| decimal_label(*k, scale)),
            }
        }
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
            let cast = arrow::compute::cast(col, &DataType::Binary)?;
            let arr = cast.as_binary::<i32>();
            bytes_labels(t, n, codes, |i| arr.is_valid(i).then(|| arr.value(i)))
        }
        DataType::FixedSizeBinary(_) => {
            let arr = col.as_fixed_size_binary();
            bytes_labels(t, n, codes, |i| arr.is_valid(i).then(|| arr.value(i)))
        }
        DataType::Time64(_) | DataType::Time32(_) => {
            let cast = arrow::compute::cast(col, &DataType::Time64(TimeUnit::Microsecond))?;
            let arr = cast.as_primitive::<Time64MicrosecondType>();
            let value = |i: usize| arr.is_valid(i).then(|| arr.value(i));
            micros_labels(t, n, codes, value, time_of_day_label)
        }
        DataType::Timestamp(unit, tz)
            if matches!(t, Transform::Identity | Transform::Bucket(_)) =>
        {
            let zoned = tz.is_some();
            let cast = match unit {
                TimeUnit::Microsecond => col.clone(),
                _ => arrow::compute::cast(
                    col,
                    &DataType::Timestamp(TimeUnit::Microsecond, tz.clone()),
                )?,
            };
            let arr = cast.as_primitive::<TimestampMicrosecondType>();
            let value = |i: usize| arr.is_valid(i).then(|| arr.value(i));
            micros_labels(t, n, codes, value, |us| {
                crate::write::timestamp_string(us, zoned)
            })
        }
        DataType::UInt64 => {
            // Not through i64: values above i64::MAX are values too.
            let arr = col.as_primitive::<UInt64Type>();
            intern_by(
                n,
                codes,
                |i| arr.is_valid(i).then(|| arr.value(i)),
                |k| k.to_string(),
            )
        }
        _ => return Ok(None),
    };
    Ok(Some(labels))
}

/// Bucket or identity of times and timestamps, held as microseconds: Iceberg hashes them as
/// those microseconds, a long.
fn micros_labels(
    t: Transform,
    n: usize,
    codes: &mut Vec<u32>,
    value: impl Fn(usize) -> Option<i64>,
    label: impl Fn(i64) -> String,
) -> Vec<Option<String>> {
    match t {
        Transform::Bucket(nb) => intern_by(
            n,
            codes,
            |i| value(i).map(|us| bucket_bytes(&us.to_le_bytes(), nb)),
            |k| k.to_string(),
        ),
        _ => intern_by(n, codes, value, |us| label(*us)),
    }
}

/// Identity, bucket and truncate of bytes; labels of bytes are lowercase hex.
fn bytes_labels<'a>(
    t: Transform,
    n: usize,
    codes: &mut Vec<u32>,
    value: impl Fn(usize) -> Option<&'a [u8]>,
) -> Vec<Option<String>> {
    match t {
        Transform::Bucket(nb) => intern_by(
            n,
            codes,
            |i| value(i).map(|b| bucket_bytes(b, nb)),
            |k| k.to_string(),
        ),
        Transform::Truncate(w) => intern_by(
            n,
            codes,
            |i| value(i).map(|b| &b[..b.len().min(w as usize)]),
            |b| hex(b),
        ),
        _ => intern_by(n, codes, value, |b| hex(b)),
    }
}

/// A decimal's unscaled value as Iceberg hashes and stores it: two's complement, big-endian,
/// in the fewest bytes that keep its sign.
pub fn decimal_bytes(v: i128) -> Vec<u8> {
    let b = v.to_be_bytes();
    let mut start = 0;
    while start < 15 {
        let (cur, next) = (b[start], b[start + 1]);
        if (cur == 0x00 && next & 0x80 == 0) || (cur == 0xff && next & 0x80 != 0) {
            start += 1;
        } else {
            break;
        }
    }
    b[start..].to_vec()
}

/// A decimal partition value as the log spells a decimal statistic (`12.30`).
pub(crate) fn decimal_label(unscaled: i128, scale: i8) -> String {
    use arrow::datatypes::DecimalType;
    Decimal128Type::format_decimal(unscaled, 38, scale)
}

/// The unscaled value of a decimal spelled `-12.30` at `scale` (`None` past the scale).
pub(crate) fn parse_unscaled(s: &str, scale: i8) -> Option<i128> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if frac.len() > scale as usize {
        return None;
    }
    let padded = format!("{int}{frac:0<width$}", width = scale as usize);
    let v: i128 = padded.parse().ok()?;
    Some(if neg { -v } else { v })
}

/// A time of day as the log spells it (`13:45:00.000000`).
pub(crate) fn time_of_day_label(us: i64) -> String {
    format!(
        "{:02}:{:02}:{:02}.{:06}",
        us / 3_600_000_000,
        us / 60_000_000 % 60,
        us / 1_000_000 % 60,
        us % 1_000_000
    )
}

/// Lowercase hex, the label of a bytes partition value.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The bytes of a [`hex`] label.
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}
