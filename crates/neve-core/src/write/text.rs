//! Text to typed values, exactly: what CSV cells and JSON scalars become in a column of a
//! given type. Nothing is rounded, truncated or reinterpreted: a value that the type cannot
//! hold as written is an error that says why.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder,
    FixedSizeBinaryBuilder, Float32Builder, Float64Builder, PrimitiveBuilder, StringArray,
    Time64MicrosecondBuilder, TimestampMicrosecondBuilder,
};
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Int16Type, Int32Type, Int64Type, Int8Type, TimeUnit, UInt16Type,
    UInt32Type, UInt64Type, UInt8Type,
};
use base64::Engine;
use chrono::{NaiveDate, NaiveDateTime, NaiveTime, TimeZone};

/// The unit of numbers given for timestamps (`--epoch-unit`); without one, a number into a
/// timestamp column is an error (1700000000 read as microseconds is 1970-01-01T00:28:20).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EpochUnit {
    Seconds,
    Millis,
    Micros,
    Nanos,
}

impl EpochUnit {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Seconds => "s",
            Self::Millis => "ms",
            Self::Micros => "us",
            Self::Nanos => "ns",
        }
    }
}

impl serde::Serialize for EpochUnit {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for EpochUnit {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl std::str::FromStr for EpochUnit {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "s" | "sec" | "seconds" => Self::Seconds,
            "ms" | "millis" | "milliseconds" => Self::Millis,
            "us" | "micros" | "microseconds" => Self::Micros,
            "ns" | "nanos" | "nanoseconds" => Self::Nanos,
            other => return Err(format!("'{other}' is not an epoch unit (s, ms, us, ns)")),
        })
    }
}

/// How text is read into typed columns.
#[derive(Debug, Clone, Copy, Default)]
pub struct TextOptions {
    pub epoch_unit: Option<EpochUnit>,
}

/// Why one value could not be stored: its index in the array, its text, and the reason.
#[derive(Debug, Clone)]
pub(crate) struct BadText {
    pub index: usize,
    pub reason: String,
}

/// Parse every non-null string of `a` as `target`.
pub(crate) fn parse_text(
    a: &StringArray,
    target: &DataType,
    opts: &TextOptions,
) -> Result<ArrayRef, BadText> {
    macro_rules! ints {
        ($t:ty) => {
            parse_ints::<$t>(a, target)
        };
    }
    let each = |f: &mut dyn FnMut(Option<&str>) -> Result<(), String>| -> Result<(), BadText> {
        for (index, v) in a.iter().enumerate() {
            f(v).map_err(|reason| BadText { index, reason })?;
        }
        Ok(())
    };
    Ok(match target {
        DataType::Utf8 => Arc::new(a.clone()),
        DataType::Int8 => ints!(Int8Type)?,
        DataType::Int16 => ints!(Int16Type)?,
        DataType::Int32 => ints!(Int32Type)?,
        DataType::Int64 => ints!(Int64Type)?,
        DataType::UInt8 => ints!(UInt8Type)?,
        DataType::UInt16 => ints!(UInt16Type)?,
        DataType::UInt32 => ints!(UInt32Type)?,
        DataType::UInt64 => ints!(UInt64Type)?,
        DataType::Boolean => {
            let mut b = BooleanBuilder::with_capacity(a.len());
            each(&mut |v| {
                b.append_option(v.map(parse_bool).transpose()?);
                Ok(())
            })?;
            Arc::new(b.finish())
        }
        DataType::Float32 => {
            let mut b = Float32Builder::with_capacity(a.len());
            each(&mut |v| {
                b.append_option(
                    v.map(|s| parse_float(s, 24).map(|f| f as f32))
                        .transpose()?,
                );
                Ok(())
            })?;
            Arc::new(b.finish())
        }
        DataType::Float64 => {
            let mut b = Float64Builder::with_capacity(a.len());
            each(&mut |v| {
                b.append_option(v.map(|s| parse_float(s, 53)).transpose()?);
                Ok(())
            })?;
            Arc::new(b.finish())
        }
        DataType::Decimal128(p, s) => {
            let mut b = Decimal128Builder::with_capacity(a.len());
            each(&mut |v| {
                b.append_option(v.map(|t| parse_decimal(t, *p, *s)).transpose()?);
                Ok(())
            })?;
            Arc::new(
                b.finish()
                    .with_precision_and_scale(*p, *s)
                    .expect("valid decimal type"),
            )
        }
        DataType::Date32 => {
            let mut b = Date32Builder::with_capacity(a.len());
            each(&mut |v| {
                b.append_option(v.map(parse_date).transpose()?);
                Ok(())
            })?;
            Arc::new(b.finish())
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            let mut b = Time64MicrosecondBuilder::with_capacity(a.len());
            each(&mut |v| {
                b.append_option(v.map(parse_time).transpose()?);
                Ok(())
            })?;
            Arc::new(b.finish())
        }
        DataType::Timestamp(TimeUnit::Microsecond, tz) => {
            let zone = match tz {
                Some(z) => Some(
                    z.parse::<arrow::array::timezone::Tz>()
                        .map_err(|e| BadText {
                            index: 0,
                            reason: format!("the column's time zone '{z}' is unknown: {e}"),
                        })?,
                ),
                None => None,
            };
            let mut b = TimestampMicrosecondBuilder::with_capacity(a.len());
            each(&mut |v| {
                b.append_option(
                    v.map(|s| parse_timestamp(s, zone.as_ref(), opts.epoch_unit))
                        .transpose()?,
                );
                Ok(())
            })?;
            Arc::new(b.finish().with_timezone_opt(tz.clone()))
        }
        DataType::Binary => {
            let mut b = BinaryBuilder::with_capacity(a.len(), a.value_data().len());
            each(&mut |v| {
                match v {
                    None => b.append_null(),
                    Some(s) => b.append_value(parse_base64(s)?),
                }
                Ok(())
            })?;
            Arc::new(b.finish())
        }
        DataType::FixedSizeBinary(n) => {
            let mut b = FixedSizeBinaryBuilder::with_capacity(a.len(), *n);
            each(&mut |v| {
                match v {
                    None => b.append_null(),
                    Some(s) => {
                        let bytes = parse_fixed(s, *n)?;
                        b.append_value(&bytes).map_err(|e| e.to_string())?;
                    }
                }
                Ok(())
            })?;
            Arc::new(b.finish())
        }
        DataType::Null => {
            each(&mut |v| {
                match v {
                None => Ok(()),
                Some(_) => Err("is a value, and the column's type is null (no value was in the rows its type was decided from: the first --infer-rows rows of a new column); raise --infer-rows, or give the column a type first (`neve alter TABLE widen COLUMN TYPE`)".into()),
            }
            })?;
            arrow::array::new_null_array(&DataType::Null, a.len())
        }
        other => {
            return Err(BadText {
                index: a
                    .nulls()
                    .map_or(0, |n| n.valid_indices().next().unwrap_or(0)),
                reason: format!("cannot be read as {other} from text"),
            })
        }
    })
}

fn parse_ints<T>(a: &StringArray, target: &DataType) -> Result<ArrayRef, BadText>
where
    T: ArrowPrimitiveType,
    T::Native: TryFrom<i128>,
{
    let mut b = PrimitiveBuilder::<T>::with_capacity(a.len());
    for (index, v) in a.iter().enumerate() {
        match v {
            None => b.append_null(),
            Some(s) => {
                let n = parse_int(s, target).map_err(|reason| BadText { index, reason })?;
                b.append_value(n);
            }
        }
    }
    Ok(Arc::new(b.finish()))
}

fn parse_int<N: TryFrom<i128>>(s: &str, target: &DataType) -> Result<N, String> {
    let t = s.trim();
    let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        let why = if digits.contains(['.', 'e', 'E']) && t.parse::<f64>().is_ok() {
            "is not an integer"
        } else {
            "is not a number"
        };
        return Err(format!("{why} (column type {})", type_name(target)));
    }
    let wide: i128 = t
        .parse()
        .map_err(|_| format!("is out of range for {}", type_name(target)))?;
    N::try_from(wide).map_err(|_| format!("is out of range for {}", type_name(target)))
}

fn type_name(t: &DataType) -> String {
    crate::schema::ColumnType::from_arrow("", t)
        .map(|c| c.to_string())
        .unwrap_or_else(|_| t.to_string())
}

fn parse_bool(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("is not a boolean (true or false)".into()),
    }
}

/// A float of `mantissa` bits; integers must be exactly representable, and a finite text must
/// not overflow to infinity.
fn parse_float(s: &str, mantissa: u32) -> Result<f64, String> {
    let t = s.trim();
    let ty = if mantissa == 24 { "float32" } else { "float64" };
    let bad = |_| format!("is not a number (column type {ty})");
    // Parsed at the column's own width: through f64 first, a float32 could be rounded twice.
    let narrow = if mantissa == 24 {
        t.parse::<f32>().map_err(bad)? as f64
    } else {
        t.parse::<f64>().map_err(bad)?
    };
    if narrow.is_infinite() && !t.to_ascii_lowercase().contains("inf") {
        return Err(format!("is out of range for {ty}"));
    }
    // Too small for the type: it would be stored as zero.
    if narrow == 0.0 && mantissa_has_nonzero_digit(t) {
        return Err(format!(
            "is too close to zero for {ty} (it would be stored as 0)"
        ));
    }
    let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        let exact: i128 = t.parse().map_err(|_| format!("is out of range for {ty}"))?;
        if (narrow as i128) != exact || narrow.abs() >= 2f64.powi(127) {
            return Err(format!(
                "is an integer that {ty} cannot hold exactly (beyond 2^{mantissa})"
            ));
        }
    }
    // More significant digits than the type always keeps: the text must be the float written
    // to as many digits (`0.10000000000000001` is 0.1 in a float64, as `%.17g` prints it;
    // `9007199254740993.0` in a float64, or `16777217.5` in a float32, is another number than
    // the one that would be stored).
    let kept = if mantissa == 24 { 6 } else { 15 };
    if significant_digits(t) > kept {
        let Some(text) = decimal_digits(t) else {
            return Ok(narrow);
        };
        let precision = text.0.len() - 1;
        let stored = if mantissa == 24 {
            format!("{:.precision$e}", narrow as f32)
        } else {
            format!("{narrow:.precision$e}")
        };
        if decimal_digits(&stored) != Some(text) {
            let shortest = if mantissa == 24 {
                format!("{}", narrow as f32)
            } else {
                format!("{narrow}")
            };
            return Err(format!(
                "has more digits than {ty} holds (it would be stored as {shortest})"
            ));
        }
    }
    Ok(narrow)
}

/// How many significant digits a number's text has (leading and trailing zeros aside),
/// without allocating: every float value of a text input is counted.
fn significant_digits(t: &str) -> usize {
    let mantissa = t.split(['e', 'E']).next().unwrap_or("");
    let (mut n, mut first, mut last) = (0usize, None, 0usize);
    for d in mantissa.bytes().filter(u8::is_ascii_digit) {
        if d != b'0' {
            first.get_or_insert(n);
            last = n;
        }
        n += 1;
    }
    first.map_or(0, |f| last - f + 1)
}

/// A decimal number's text as its significant digits and the power of ten of the last one
/// (`-12.50e3` is `("125", 2)`); zero has no digits. `None` for what is not such a number
/// (`NaN`, `inf`).
fn decimal_digits(t: &str) -> Option<(String, i64)> {
    let t = t.strip_prefix(['-', '+']).unwrap_or(t);
    let (mantissa, exp) = match t.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i64>().ok()?),
        None => (t, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let all: String = int.chars().chain(frac.chars()).collect();
    let digits = all.trim_start_matches('0');
    let trimmed = digits.trim_end_matches('0');
    let exp = exp - frac.len() as i64 + (digits.len() - trimmed.len()) as i64;
    Some(if trimmed.is_empty() {
        (String::new(), 0)
    } else {
        (trimmed.to_string(), exp)
    })
}

/// Whether a number's text has a digit other than zero before its exponent.
fn mantissa_has_nonzero_digit(t: &str) -> bool {
    t.split(['e', 'E'])
        .next()
        .unwrap_or("")
        .bytes()
        .any(|b| (b'1'..=b'9').contains(&b))
}

/// A decimal with at most `s` fraction digits (trailing zeros beyond are fine) and at most
/// `p - s` integer digits.
fn parse_decimal(text: &str, p: u8, s: i8) -> Result<i128, String> {
    let t = text.trim();
    let ty = format!("decimal({p},{s})");
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(format!("is not a decimal number (column type {ty})"));
    }
    let scale = s.max(0) as usize;
    let (kept, dropped) = frac.split_at(frac.len().min(scale));
    if dropped.bytes().any(|b| b != b'0') {
        return Err(format!("has more than {scale} decimal places ({ty})"));
    }
    let int = int.trim_start_matches('0');
    if int.len() > (p as usize).saturating_sub(scale) {
        return Err(format!("is out of range for {ty}"));
    }
    let mut digits = String::with_capacity(int.len() + scale);
    digits.push_str(int);
    digits.push_str(kept);
    for _ in kept.len()..scale {
        digits.push('0');
    }
    let v: i128 = if digits.is_empty() {
        0
    } else {
        digits
            .parse()
            .map_err(|_| format!("is out of range for {ty}"))?
    };
    Ok(if neg { -v } else { v })
}

const EPOCH: NaiveDate = NaiveDate::from_ymd_opt(1970, 1, 1).expect("valid");

fn parse_date(s: &str) -> Result<i32, String> {
    let d = NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d")
        .map_err(|e| format!("is not a date (YYYY-MM-DD): {e}"))?;
    Ok((d - EPOCH).num_days() as i32)
}

/// Sub-microsecond digits that are not zero would be lost. chrono reads a leap second
/// (`:60`) as a second's worth of extra nanoseconds, which would move it to the next second.
fn micros_of_nanos(nanos: u32) -> Result<i64, String> {
    if nanos >= 1_000_000_000 {
        return Err("is a leap second (:60), which neve's times cannot hold".into());
    }
    if !nanos.is_multiple_of(1000) {
        return Err("has nanoseconds; neve keeps microseconds".into());
    }
    Ok((nanos / 1000) as i64)
}

/// chrono reads at most nine fraction digits and skips the rest: refuse a fraction whose
/// digits past the sixth (microseconds) are not all zero, however many there are.
fn beyond_micros(t: &str) -> Result<(), String> {
    let b = t.as_bytes();
    if let Some(dot) = (1..b.len()).find(|&i| b[i] == b'.' && b[i - 1].is_ascii_digit()) {
        let fraction = b[dot + 1..].iter().take_while(|c| c.is_ascii_digit());
        if fraction.skip(6).any(|&c| c != b'0') {
            return Err("has nanoseconds; neve keeps microseconds".into());
        }
    }
    Ok(())
}

fn parse_time(s: &str) -> Result<i64, String> {
    beyond_micros(s.trim())?;
    let t = NaiveTime::parse_from_str(s.trim(), "%H:%M:%S%.f")
        .or_else(|_| NaiveTime::parse_from_str(s.trim(), "%H:%M"))
        .map_err(|e| format!("is not a time of day (HH:MM:SS[.ffffff]): {e}"))?;
    use chrono::Timelike;
    Ok(t.num_seconds_from_midnight() as i64 * 1_000_000 + micros_of_nanos(t.nanosecond())?)
}

fn parse_timestamp(
    s: &str,
    zone: Option<&arrow::array::timezone::Tz>,
    epoch: Option<EpochUnit>,
) -> Result<i64, String> {
    let t = s.trim();
    let numeric = !t.is_empty()
        && t.strip_prefix('-')
            .unwrap_or(t)
            .bytes()
            .all(|b| b.is_ascii_digit());
    if numeric {
        let Some(unit) = epoch else {
            return Err(
                "is a number, and a timestamp needs text (2024-05-01T12:00:00Z) or an epoch unit (--epoch-unit s|ms|us|ns)"
                    .into(),
            );
        };
        let n: i64 = t
            .parse()
            .map_err(|_| "is out of range for a timestamp".to_string())?;
        let us = match unit {
            EpochUnit::Seconds => n.checked_mul(1_000_000),
            EpochUnit::Millis => n.checked_mul(1_000),
            EpochUnit::Micros => Some(n),
            EpochUnit::Nanos => {
                if n % 1000 != 0 {
                    return Err("has nanoseconds; neve keeps microseconds".into());
                }
                Some(n / 1000)
            }
        };
        // Within the years a timestamp has text for (its partition label, its statistics).
        return us
            .filter(|&us| chrono::DateTime::from_timestamp_micros(us).is_some())
            .ok_or_else(|| "is out of range for a timestamp".into());
    }
    if let Some((naive, offset_s)) = iso_timestamp(t.as_bytes()) {
        return match offset_s {
            Some(off) if zone.is_none() && off != 0 => Err(format!(
                "has a UTC offset ({}) and the column is a timestamp without a time zone (declare it timestamp(UTC) to store instants)",
                chrono::FixedOffset::east_opt(off).map_or_else(|| off.to_string(), |o| o.to_string())
            )),
            Some(off) => naive
                .checked_sub(off as i64 * 1_000_000)
                .ok_or_else(|| "is out of range for a timestamp".to_string()),
            None => match zone {
                None => Ok(naive),
                Some(z) => {
                    let dt = chrono::DateTime::from_timestamp_micros(naive)
                        .ok_or("is out of range for a timestamp")?
                        .naive_utc();
                    local_to_utc(z, &dt)
                }
            },
        };
    }
    // Other spellings chrono knows. With an offset or Z: an instant.
    beyond_micros(t)?;
    if let Ok(dt) = with_offset(t) {
        if zone.is_none() && dt.offset().local_minus_utc() != 0 {
            return Err(format!(
                "has a UTC offset ({}) and the column is a timestamp without a time zone (declare it timestamp(UTC) to store instants)",
                dt.offset()
            ));
        }
        let utc = dt.naive_utc();
        return Ok(utc.and_utc().timestamp() * 1_000_000
            + micros_of_nanos(utc.and_utc().timestamp_subsec_nanos())?);
    }
    let naive = [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ]
    .iter()
    .find_map(|f| NaiveDateTime::parse_from_str(t, f).ok())
    .or_else(|| {
        NaiveDate::parse_from_str(t, "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
    })
    .ok_or_else(|| "is not a timestamp (2024-05-01T12:00:00[.ffffff][Z|+02:00])".to_string())?;
    // Without an offset: wall time, in the column's zone when it has one.
    match zone {
        None => {
            let utc = naive.and_utc();
            Ok(utc.timestamp() * 1_000_000 + micros_of_nanos(utc.timestamp_subsec_nanos())?)
        }
        Some(z) => local_to_utc(z, &naive),
    }
}

/// Wall time in `zone` to UTC microseconds; refused when the clock skips or repeats it.
fn local_to_utc(zone: &arrow::array::timezone::Tz, naive: &NaiveDateTime) -> Result<i64, String> {
    match zone.from_local_datetime(naive) {
        chrono::LocalResult::Single(dt) => {
            let utc = dt.naive_utc().and_utc();
            Ok(utc.timestamp() * 1_000_000 + micros_of_nanos(utc.timestamp_subsec_nanos())?)
        }
        _ => Err(
            "is not one instant in the column's time zone (skipped or repeated by a clock change); give an offset"
                .into(),
        ),
    }
}

/// Whether a timestamp's text names its offset (`Z`, `+02:00`): an instant, which an inferred
/// column keeps as `timestamp(UTC)` rather than as wall time.
pub(crate) fn has_offset(s: &str) -> bool {
    let t = s.trim();
    match iso_timestamp(t.as_bytes()) {
        Some((_, off)) => off.is_some(),
        None => with_offset(t).is_ok(),
    }
}

/// The spellings with an offset (or `Z`) chrono knows beyond the ISO form `iso_timestamp` reads.
fn with_offset(t: &str) -> chrono::ParseResult<chrono::DateTime<chrono::FixedOffset>> {
    chrono::DateTime::parse_from_rfc3339(t)
        .or_else(|_| chrono::DateTime::parse_from_str(t, "%Y-%m-%d %H:%M:%S%.f%:z"))
        .or_else(|_| chrono::DateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S%.f%z"))
        .or_else(|_| chrono::DateTime::parse_from_str(t, "%Y-%m-%d %H:%M:%S%.f%z"))
}

/// The common ISO 8601 spellings, parsed by hand (chrono's format parsers tried one after the
/// other cost microseconds a value): `YYYY-MM-DD`, then optionally `T` or a space,
/// `HH:MM[:SS[.fraction]]`, then optionally `Z` or `±HH[:]MM`. Returns the wall time as
/// microseconds since the epoch and the offset in seconds, if any; `None` for anything else
/// (another spelling, or an invalid date such as 2023-02-29, left to chrono to explain).
fn iso_timestamp(b: &[u8]) -> Option<(i64, Option<i32>)> {
    fn num(b: &[u8]) -> Option<u32> {
        if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(b.iter().fold(0u32, |n, d| n * 10 + (d - b'0') as u32))
    }
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let date = NaiveDate::from_ymd_opt(num(&b[..4])? as i32, num(&b[5..7])?, num(&b[8..10])?)?;
    let mut micros = 0i64;
    let mut rest = &b[10..];
    if !rest.is_empty() && (rest[0] == b'T' || rest[0] == b' ') {
        let t = &rest[1..];
        if t.len() < 5 || t[2] != b':' {
            return None;
        }
        let (h, m) = (num(&t[..2])?, num(&t[3..5])?);
        let mut sec = 0;
        rest = &t[5..];
        if rest.first() == Some(&b':') {
            sec = num(rest.get(1..3)?)?;
            rest = &rest[3..];
            if rest.first() == Some(&b'.') {
                let digits = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
                if digits == 0 || digits > 9 {
                    return None;
                }
                let frac = &rest[1..1 + digits];
                // Digits past microseconds must be zeros, or the value would change.
                if frac.iter().skip(6).any(|&d| d != b'0') {
                    return None;
                }
                let kept = &frac[..digits.min(6)];
                micros = num(kept)? as i64 * 10i64.pow(6 - kept.len() as u32);
                rest = &rest[1 + digits..];
            }
        }
        if h > 23 || m > 59 || sec > 59 {
            return None;
        }
        micros += (h as i64 * 3600 + m as i64 * 60 + sec as i64) * 1_000_000;
    }
    let offset = match rest {
        [] => None,
        [b'Z'] | [b'z'] => Some(0),
        // `±HH:MM`, `±HHMM` or `±HH` (Postgres); an offset of 24 hours or more, or of 60
        // minutes, is no offset (left to chrono, which refuses it).
        [sign @ (b'+' | b'-'), h1, h2] => {
            let oh = num(&[*h1, *h2])?;
            if oh > 23 {
                return None;
            }
            let secs = (oh * 3600) as i32;
            Some(if *sign == b'-' { -secs } else { secs })
        }
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] | [sign @ (b'+' | b'-'), h1, h2, m1, m2] => {
            let (oh, om) = (num(&[*h1, *h2])?, num(&[*m1, *m2])?);
            if oh > 23 || om > 59 {
                return None;
            }
            let secs = (oh * 3600 + om * 60) as i32;
            Some(if *sign == b'-' { -secs } else { secs })
        }
        _ => return None,
    };
    let days = (date - EPOCH).num_days();
    Some((days * 86_400_000_000 + micros, offset))
}

fn parse_base64(s: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .map_err(|e| format!("is not base64 (binary columns take base64 text): {e}"))
}

/// A UUID's text (for fixed(16)), else base64 of exactly `n` bytes.
fn parse_fixed(s: &str, n: i32) -> Result<Vec<u8>, String> {
    let t = s.trim();
    if n == 16 && t.len() == 36 && t.as_bytes()[8] == b'-' {
        let hex: String = t.chars().filter(|c| *c != '-').collect();
        if hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok((0..16)
                .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex digits"))
                .collect());
        }
    }
    let bytes = parse_base64(t)?;
    if bytes.len() != n as usize {
        return Err(format!(
            "is {} bytes, and the column is fixed({n})",
            bytes.len()
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
#[path = "text_tests.rs"]
mod tests;
