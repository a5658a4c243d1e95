//! Declarative partition transforms and Hive-style partition folders.
//!
//! A spec is a comma-separated list of levels, each `transform(column[, N]) [as name]`:
//! `identity(c)` or just `c`, `year(ts)`, `month(ts)`, `day(ts)`, `hour(ts)`,
//! `bucket(N, c)`, `truncate(W, c)`. Values: year `2021`, month `2021-08`, day `2021-08-15`,
//! hour `2021-08-15-13` (UTC), bucket the Iceberg murmur3 bucket number, truncate the value
//! rounded down to a multiple of W (ints) or its first W characters (strings).
//! A null source value goes to the null partition (`__HIVE_DEFAULT_PARTITION__`).

use std::collections::HashMap;
use std::fmt;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, Date32Type, Int64Type, TimeUnit};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

mod values;

use values::other_types;
pub use values::{decimal_bytes, hex, unhex};
pub(crate) use values::{decimal_label, parse_unscaled, time_of_day_label};

/// Folder name used for null partition values (the Hive convention).
pub const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// A partition transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transform {
    Identity,
    Year,
    Month,
    Day,
    Hour,
    Bucket(u32),
    Truncate(u32),
}

impl fmt::Display for Transform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Transform::Identity => f.write_str("identity"),
            Transform::Year => f.write_str("year"),
            Transform::Month => f.write_str("month"),
            Transform::Day => f.write_str("day"),
            Transform::Hour => f.write_str("hour"),
            Transform::Bucket(n) => write!(f, "bucket[{n}]"),
            Transform::Truncate(w) => write!(f, "truncate[{w}]"),
        }
    }
}

impl std::str::FromStr for Transform {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let num = |inner: &str| -> Result<u32, String> {
            let n: u32 = inner
                .parse()
                .map_err(|_| format!("'{inner}' is not a number"))?;
            if n == 0 {
                return Err("must be at least 1".into());
            }
            Ok(n)
        };
        Ok(match s {
            "identity" => Transform::Identity,
            "year" => Transform::Year,
            "month" => Transform::Month,
            "day" => Transform::Day,
            "hour" => Transform::Hour,
            _ => {
                if let Some(n) = s.strip_prefix("bucket[").and_then(|r| r.strip_suffix(']')) {
                    Transform::Bucket(num(n)?)
                } else if let Some(n) = s
                    .strip_prefix("truncate[")
                    .and_then(|r| r.strip_suffix(']'))
                {
                    Transform::Truncate(num(n)?)
                } else {
                    return Err(format!("unknown transform '{s}'"));
                }
            }
        })
    }
}

impl Serialize for Transform {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Transform {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// One partition level: a transform of a source column, named as a folder key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionField {
    pub source: String,
    pub transform: Transform,
    /// The key in folder names (`name=value`).
    pub name: String,
}

/// Parse a user spec such as `month(trip_start_timestamp) as d, bucket(16, user_id)`.
pub fn parse_spec(spec: &str) -> Result<Vec<PartitionField>> {
    let err = |reason: String| Error::InvalidPartitionSpec {
        spec: spec.to_string(),
        reason,
    };
    let mut fields: Vec<PartitionField> = Vec::new();
    if spec.trim().is_empty() {
        return Ok(fields);
    }
    for level in split_top_level(spec) {
        let level = level.trim();
        let (expr, alias) = match split_alias(level) {
            Some((_, a)) if a.trim().is_empty() => {
                return Err(err(format!("'{level}': a name must follow 'as'")))
            }
            // Quoted as a column may be: `month(ts) as "d"` names the partition `d`.
            Some((e, a)) => (e.trim(), Some(unquote(a))),
            None => (level, None),
        };
        let (transform, source) = if let Some(open) = expr.find('(') {
            let name = expr[..open].trim().to_ascii_lowercase();
            let inner = expr[open + 1..]
                .strip_suffix(')')
                .ok_or_else(|| err(format!("missing ')' in '{expr}'")))?;
            let args: Vec<&str> = inner.split(',').map(str::trim).collect();
            let one = |args: &[&str]| -> Result<String> {
                match args {
                    [c] if !c.is_empty() => Ok(unquote(c)),
                    _ => Err(err(format!("{name}() takes one column"))),
                }
            };
            let two = |args: &[&str]| -> Result<(u32, String)> {
                match args {
                    [n, c] => {
                        // Iceberg's N is a 32-bit int: readers of the metadata hold it so.
                        let n: u32 = match n.parse::<u64>() {
                            Ok(n @ 1..=0x7fff_ffff) => n as u32,
                            Ok(0) => {
                                return Err(err(format!("{name}(N, column): N must be at least 1")))
                            }
                            _ => {
                                return Err(err(format!(
                                    "{name}(N, column): N must be a whole number from 1 to 2147483647, got '{n}'"
                                )))
                            }
                        };
                        Ok((n, unquote(c)))
                    }
                    _ => Err(err(format!("{name}() takes (N, column)"))),
                }
            };
            match name.as_str() {
                "identity" => (Transform::Identity, one(&args)?),
                "year" | "years" => (Transform::Year, one(&args)?),
                "month" | "months" => (Transform::Month, one(&args)?),
                "day" | "days" => (Transform::Day, one(&args)?),
                "hour" | "hours" => (Transform::Hour, one(&args)?),
                "bucket" => {
                    let (n, c) = two(&args)?;
                    (Transform::Bucket(n), c)
                }
                "truncate" => {
                    let (n, c) = two(&args)?;
                    (Transform::Truncate(n), c)
                }
                other => return Err(err(format!("unknown transform '{other}' (use identity, year, month, day, hour, bucket, truncate)"))),
            }
        } else {
            if expr.is_empty() {
                return Err(err("empty partition level".into()));
            }
            (Transform::Identity, unquote(expr))
        };
        let name = alias.unwrap_or_else(|| default_name(&source, transform));
        if name.is_empty() || name.contains(['/', '=']) {
            return Err(err(format!("'{name}' is not a valid partition name")));
        }
        if fields.iter().any(|f| f.name == name) {
            return Err(err(format!("partition name '{name}' used twice")));
        }
        fields.push(PartitionField {
            source,
            transform,
            name,
        });
    }
    Ok(fields)
}

fn unquote(s: &str) -> String {
    s.trim().trim_matches('"').to_string()
}

fn split_alias(level: &str) -> Option<(&str, &str)> {
    let lower = level.to_ascii_lowercase();
    if lower.ends_with(" as") {
        // `month(ts) as`: the name is missing (an empty alias, refused by the caller).
        return Some((&level[..level.len() - 3], ""));
    }
    lower.rfind(" as ").map(|i| (&level[..i], &level[i + 4..]))
}

fn split_top_level(spec: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, ch) in spec.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&spec[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&spec[start..]);
    out
}

fn default_name(source: &str, t: Transform) -> String {
    match t {
        Transform::Identity => source.to_string(),
        Transform::Year => format!("{source}_year"),
        Transform::Month => format!("{source}_month"),
        Transform::Day => format!("{source}_day"),
        Transform::Hour => format!("{source}_hour"),
        Transform::Bucket(_) => format!("{source}_bucket"),
        Transform::Truncate(_) => format!("{source}_trunc"),
    }
}

/// Render a spec back to the user syntax.
pub fn format_spec(fields: &[PartitionField]) -> String {
    fields
        .iter()
        .map(|f| {
            let expr = match f.transform {
                Transform::Identity => format!("identity({})", f.source),
                Transform::Bucket(n) => format!("bucket({n}, {})", f.source),
                Transform::Truncate(w) => format!("truncate({w}, {})", f.source),
                t => format!("{t}({})", f.source),
            };
            format!("{expr} as {}", f.name)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Check a transform applies to a column type (at create or first insert). The types and
/// what each transform does to them are Iceberg's (its spec, "Partition Transforms").
pub fn check_source_type(field: &PartitionField, dt: &DataType) -> Result<()> {
    use DataType::*;
    // Unsigned integers Iceberg holds as int or long (uint64 has no Iceberg type).
    let int = matches!(dt, Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32);
    let string = matches!(dt, Utf8 | LargeUtf8 | Utf8View);
    let binary = matches!(dt, Binary | LargeBinary | BinaryView);
    let ok = match field.transform {
        Transform::Identity => !matches!(dt, Float32 | Float64 | Float16) && !dt.is_nested(),
        Transform::Year | Transform::Month | Transform::Day => {
            matches!(dt, Timestamp(..) | Date32 | Date64)
        }
        Transform::Hour => matches!(dt, Timestamp(..)),
        Transform::Bucket(_) => {
            int || string
                || binary
                || matches!(
                    dt,
                    Date32 | Time64(_) | Timestamp(..) | Decimal128(..) | FixedSizeBinary(_)
                )
        }
        Transform::Truncate(_) => int || string || binary || matches!(dt, Decimal128(..)),
    };
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidPartitionSpec {
            spec: format_spec(std::slice::from_ref(field)),
            reason: format!(
                "{} cannot be applied to column '{}' of type {dt}",
                field.transform, field.source
            ),
        })
    }
}

/// Refuse a type change of a partition source that would put a value in another partition
/// than the rows before it: a decimal's scale. Bucket and truncate take the unscaled value,
/// and the label spells the scale, so `12.30` at scale 2 and `12.300` at scale 3 would part.
pub fn check_source_change(
    fields: &[PartitionField],
    before: &crate::schema::TableSchema,
    after: &crate::schema::TableSchema,
) -> Result<()> {
    use crate::schema::ColumnType::Decimal;
    for f in fields {
        let (Some(b), Some(a)) = (before.column(&f.source), after.column(&f.source)) else {
            continue;
        };
        if let (Decimal(_, s1), Decimal(_, s2)) = (&b.column_type, &a.column_type) {
            if s1 != s2 {
                return Err(Error::SchemaConflict {
                    column: f.source.clone(),
                    table_type: b.column_type.to_string(),
                    input_type: a.column_type.to_string(),
                    hint: Some(format!(
                        "the table is partitioned by {}: a decimal partition source keeps its scale, or its values would move to other partitions; widen its precision only",
                        format_spec(std::slice::from_ref(f))
                    )),
                });
            }
        }
    }
    Ok(())
}

/// Rows of a batch grouped into partitions: `codes[row]` indexes `labels`.
pub struct PartitionAssignment {
    pub codes: Vec<u32>,
    /// For each code, one value per partition level (None = null partition).
    pub labels: Vec<Vec<Option<String>>>,
}

/// Compute each row's partition. `columns[i]` is the source column of `fields[i]`
/// (already in the table's types: timestamps in microseconds, strings as Utf8).
pub fn assign(
    fields: &[PartitionField],
    columns: &[ArrayRef],
    num_rows: usize,
) -> Result<PartitionAssignment> {
    if fields.is_empty() {
        return Ok(PartitionAssignment {
            codes: vec![0; num_rows],
            labels: vec![vec![]],
        });
    }
    // Per level: a code per row and a label per code.
    let mut level_codes = Vec::with_capacity(fields.len());
    let mut level_labels = Vec::with_capacity(fields.len());
    for (f, col) in fields.iter().zip(columns) {
        let (codes, labels) = level_assign(f, col)?;
        level_codes.push(codes);
        level_labels.push(labels);
    }
    if fields.len() == 1 {
        let labels = level_labels
            .pop()
            .unwrap()
            .into_iter()
            .map(|l| vec![l])
            .collect();
        return Ok(PartitionAssignment {
            codes: level_codes.pop().unwrap(),
            labels,
        });
    }
    let mut combined: HashMap<Vec<u32>, u32> = HashMap::new();
    let mut labels = Vec::new();
    let mut codes = Vec::with_capacity(num_rows);
    let mut key = vec![0u32; fields.len()];
    for row in 0..num_rows {
        for (l, c) in level_codes.iter().enumerate() {
            key[l] = c[row];
        }
        let next = combined.len() as u32;
        let code = *combined.entry(key.clone()).or_insert_with(|| {
            labels.push(
                key.iter()
                    .enumerate()
                    .map(|(l, &c)| level_labels[l][c as usize].clone())
                    .collect(),
            );
            next
        });
        codes.push(code);
    }
    Ok(PartitionAssignment { codes, labels })
}

/// aHash keyed at random, for maps keyed by input values (partition keys, a part's sort-key
/// strings): fixed keys would let crafted values collide and make every lookup a scan.
pub(crate) fn keyed_hasher() -> ahash::RandomState {
    ahash::RandomState::with_seeds(
        rand::random(),
        rand::random(),
        rand::random(),
        rand::random(),
    )
}

/// Intern keys of one level. Every input row is looked up here, so the map hashes with
/// aHash (a few instructions for an integer key) rather than SipHash, keyed at random
/// ([`keyed_hasher`]).
struct Interner<K> {
    map: HashMap<K, u32, ahash::RandomState>,
    labels: Vec<Option<String>>,
    null_code: Option<u32>,
}

impl<K: std::hash::Hash + Eq> Interner<K> {
    fn new() -> Self {
        Self {
            map: HashMap::with_hasher(keyed_hasher()),
            labels: Vec::new(),
            null_code: None,
        }
    }
    fn code(&mut self, key: K, label: impl FnOnce(&K) -> String) -> u32 {
        if let Some(&c) = self.map.get(&key) {
            return c;
        }
        let c = self.labels.len() as u32;
        self.labels.push(Some(label(&key)));
        self.map.insert(key, c);
        c
    }
    fn null(&mut self) -> u32 {
        if let Some(c) = self.null_code {
            return c;
        }
        let c = self.labels.len() as u32;
        self.labels.push(None);
        self.null_code = Some(c);
        c
    }
}

fn level_assign(f: &PartitionField, col: &ArrayRef) -> Result<(Vec<u32>, Vec<Option<String>>)> {
    let n = col.len();
    let mut codes = Vec::with_capacity(n);
    if col.data_type() == &DataType::Null {
        // A column with no type yet holds only nulls: every row is in the null partition.
        return Ok((vec![0; n], vec![None]));
    }
    check_source_type(f, col.data_type())?;
    if let Some(labels) = other_types(f, col, &mut codes)? {
        return Ok((codes, labels));
    }
    macro_rules! ints {
        ($ty:ty, $conv:expr, $label:expr) => {{
            let arr = col.as_primitive::<$ty>();
            let mut it: Interner<i64> = Interner::new();
            for i in 0..n {
                codes.push(if arr.is_null(i) {
                    it.null()
                } else {
                    let k: i64 = $conv(arr.value(i) as i64);
                    it.code(k, $label)
                });
            }
            it.labels
        }};
    }
    let labels = match (f.transform, col.data_type()) {
        (
            Transform::Year | Transform::Month | Transform::Day | Transform::Hour,
            DataType::Timestamp(unit, _),
        ) => {
            let per_sec: i64 = match unit {
                TimeUnit::Second => 1,
                TimeUnit::Millisecond => 1_000,
                TimeUnit::Microsecond => 1_000_000,
                TimeUnit::Nanosecond => 1_000_000_000,
            };
            let t = f.transform;
            let as64 = arrow::compute::cast(col, &DataType::Int64)?;
            let arr = as64.as_primitive::<Int64Type>();
            let mut it: Interner<i64> = Interner::new();
            for i in 0..n {
                codes.push(if arr.is_null(i) {
                    it.null()
                } else {
                    let hours = arr.value(i).div_euclid(per_sec * 3600);
                    let k = time_key(t, hours);
                    it.code(k, |k| time_label(t, *k))
                });
            }
            it.labels
        }
        (Transform::Year | Transform::Month | Transform::Day, DataType::Date32) => {
            let t = f.transform;
            ints!(Date32Type, |d: i64| time_key(t, d * 24), |k: &i64| {
                time_label(t, *k)
            })
        }
        (Transform::Year | Transform::Month | Transform::Day, DataType::Date64) => {
            let t = f.transform;
            ints!(
                arrow::datatypes::Date64Type,
                |ms: i64| time_key(t, ms.div_euclid(3_600_000)),
                |k: &i64| time_label(t, *k)
            )
        }
        (
            Transform::Identity | Transform::Truncate(_) | Transform::Bucket(_),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View,
        ) => {
            let cast = arrow::compute::cast(col, &DataType::Utf8)?;
            let arr = cast.as_string::<i32>();
            let mut it: Interner<String> = Interner::new();
            let mut it_b: Interner<i64> = Interner::new();
            let bucket = matches!(f.transform, Transform::Bucket(_));
            for i in 0..n {
                codes.push(if arr.is_null(i) {
                    if bucket {
                        it_b.null()
                    } else {
                        it.null()
                    }
                } else {
                    let v = arr.value(i);
                    match f.transform {
                        Transform::Bucket(nb) => {
                            it_b.code(bucket_bytes(v.as_bytes(), nb) as i64, |k| k.to_string())
                        }
                        Transform::Truncate(w) => {
                            let end = v
                                .char_indices()
                                .nth(w as usize)
                                .map(|(i, _)| i)
                                .unwrap_or(v.len());
                            let s = &v[..end];
                            match it.map.get(s) {
                                Some(&c) => c,
                                None => it.code(s.to_string(), |k| k.clone()),
                            }
                        }
                        _ => match it.map.get(v) {
                            Some(&c) => c,
                            None => it.code(v.to_string(), |k| k.clone()),
                        },
                    }
                });
            }
            if bucket {
                it_b.labels
            } else {
                it.labels
            }
        }
        (tr, dt) if dt.is_integer() || matches!(dt, DataType::Date32) => {
            let as64 = arrow::compute::cast(col, &DataType::Int64)?;
            let arr = as64.as_primitive::<Int64Type>();
            let is_date = matches!(dt, DataType::Date32);
            let mut it: Interner<i64> = Interner::new();
            for i in 0..n {
                codes.push(if arr.is_null(i) {
                    it.null()
                } else {
                    let v = arr.value(i);
                    match tr {
                        Transform::Bucket(nb) => {
                            // Iceberg hashes int and date as 8-byte longs.
                            it.code(bucket_bytes(&v.to_le_bytes(), nb) as i64, |k| k.to_string())
                        }
                        Transform::Truncate(w) => {
                            // Keyed by the quotient, which always fits: the multiple of W
                            // below i64::MIN does not, and is labelled in i128.
                            let w = w as i64;
                            it.code(v.div_euclid(w), |q| (*q as i128 * w as i128).to_string())
                        }
                        _ if is_date => it.code(v, |k| date_label(*k)),
                        _ => it.code(v, |k| k.to_string()),
                    }
                });
            }
            it.labels
        }
        (_, DataType::Boolean) => {
            let arr = col.as_boolean();
            let mut it: Interner<bool> = Interner::new();
            for i in 0..n {
                codes.push(if arr.is_null(i) {
                    it.null()
                } else {
                    it.code(arr.value(i), |k| k.to_string())
                });
            }
            it.labels
        }
        (t, dt) => {
            return Err(Error::InvalidPartitionSpec {
                spec: format_spec(std::slice::from_ref(f)),
                reason: format!("{t} is not supported on column '{}' of type {dt}", f.source),
            })
        }
    };
    Ok((codes, labels))
}

/// Hours since epoch -> the transform's key (years, months, days or hours since epoch).
fn time_key(t: Transform, hours: i64) -> i64 {
    let days = hours.div_euclid(24);
    match t {
        Transform::Hour => hours,
        Transform::Day => days,
        Transform::Month => {
            let (y, m, _) = civil_from_days(days);
            y * 12 + (m as i64 - 1)
        }
        Transform::Year => civil_from_days(days).0,
        _ => unreachable!("time_key on non-time transform"),
    }
}

fn time_label(t: Transform, key: i64) -> String {
    match t {
        Transform::Hour => {
            let (y, m, d) = civil_from_days(key.div_euclid(24));
            format!("{y:04}-{m:02}-{d:02}-{:02}", key.rem_euclid(24))
        }
        Transform::Day => date_label(key),
        Transform::Month => format!("{:04}-{:02}", key.div_euclid(12), key.rem_euclid(12) + 1),
        Transform::Year => format!("{key:04}"),
        _ => unreachable!(),
    }
}

/// The instants a time partition's label covers, in microseconds since the epoch (UTC):
/// `[first, last]`, both inclusive. `None` for other transforms or an unreadable label.
pub fn time_bounds(t: Transform, label: &str) -> Option<(i64, i64)> {
    use chrono::{Months, NaiveDate, NaiveTime, TimeDelta};
    let day = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").ok();
    let (start, end) = match t {
        Transform::Year => {
            let y: i32 = label.parse().ok()?;
            let d = NaiveDate::from_ymd_opt(y, 1, 1)?;
            (d, d.checked_add_months(Months::new(12))?)
        }
        Transform::Month => {
            let d = day(&format!("{label}-01"))?;
            (d, d.checked_add_months(Months::new(1))?)
        }
        Transform::Day => {
            let d = day(label)?;
            (d, d.succ_opt()?)
        }
        Transform::Hour => {
            let (date, hour) = label.rsplit_once('-')?;
            let h: u32 = hour.parse().ok()?;
            let start = day(date)?.and_time(NaiveTime::from_hms_opt(h, 0, 0)?);
            let end = start.checked_add_signed(TimeDelta::hours(1))?;
            let us = |t: chrono::NaiveDateTime| t.and_utc().timestamp_micros();
            return Some((us(start), us(end) - 1));
        }
        _ => return None,
    };
    let us = |d: NaiveDate| d.and_time(NaiveTime::MIN).and_utc().timestamp_micros();
    Some((us(start), us(end) - 1))
}

fn date_label(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Iceberg's bucket function: murmur3_x86_32 (seed 0) of the value's bytes, masked
/// non-negative, modulo N.
pub fn bucket_bytes(bytes: &[u8], n: u32) -> u32 {
    let h = murmur3::murmur3_32(&mut std::io::Cursor::new(bytes), 0).unwrap_or(0) as i32;
    ((h & i32::MAX) as u32) % n
}

/// Escape a partition value for a folder name: keep `[A-Za-z0-9._-]`, percent-encode the rest.
pub fn escape_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() || out == "." || out == ".." {
        // Never produce an empty or relative path segment.
        return out.replace('.', "%2E") + if v.is_empty() { "%00" } else { "" };
    }
    out
}

/// The folder of a partition: `name=value/name2=value2`.
pub fn partition_path(fields: &[PartitionField], values: &[Option<String>]) -> String {
    fields
        .iter()
        .zip(values)
        .map(|(f, v)| match v {
            Some(v) => format!("{}={}", f.name, escape_value(v)),
            None => format!("{}={NULL_PARTITION}", f.name),
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests;
