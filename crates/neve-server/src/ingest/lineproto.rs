//! InfluxDB line protocol (what Telegraf, Vector, the influx clients and TSBS send), parsed as
//! the InfluxDB documentation specifies:
//! `measurement[,tag=value...] field=value[,field=value...] [timestamp]`.
//! Tags are strings; fields are floats (`1`, `1.5`, `-1e3`), integers (`1i`), unsigned
//! integers (`1u`), strings (`"..."`) or booleans (`t`, `true`, `F`, ...); the timestamp is an
//! integer in the request's precision, the receive time when missing. Each measurement
//! becomes one batch: its tags, its fields and `time`.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanBuilder, Float64Builder, Int64Builder, RecordBatch, StringBuilder,
    TimestampMicrosecondBuilder, TimestampMillisecondBuilder, TimestampNanosecondBuilder,
    TimestampSecondBuilder, UInt64Builder,
};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};

/// A line that does not parse, or a field whose type changes between lines.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct LineError {
    pub line: u64,
    pub message: String,
}

/// Timestamp precision (`precision=` of `/api/v2/write`; `/write` also takes `n`, `u`, `m`, `h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    Ns,
    Us,
    Ms,
    S,
}

impl Precision {
    /// `(precision, multiplier)`: minutes and hours are seconds times 60 and 3600.
    pub fn parse(p: &str) -> Option<(Precision, i64)> {
        Some(match p {
            "ns" | "n" | "" => (Precision::Ns, 1),
            "us" | "u" | "µ" => (Precision::Us, 1),
            "ms" => (Precision::Ms, 1),
            "s" => (Precision::S, 1),
            "m" => (Precision::S, 60),
            "h" => (Precision::S, 3600),
            _ => return None,
        })
    }

    pub fn unit(self) -> TimeUnit {
        match self {
            Precision::Ns => TimeUnit::Nanosecond,
            Precision::Us => TimeUnit::Microsecond,
            Precision::Ms => TimeUnit::Millisecond,
            Precision::S => TimeUnit::Second,
        }
    }

    /// `now_ns` in this precision.
    fn of_ns(self, now_ns: i64) -> i64 {
        match self {
            Precision::Ns => now_ns,
            Precision::Us => now_ns / 1_000,
            Precision::Ms => now_ns / 1_000_000,
            Precision::S => now_ns / 1_000_000_000,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Value<'a> {
    Float(f64),
    Int(i64),
    UInt(u64),
    Str(Cow<'a, str>),
    Bool(bool),
}

impl Value<'_> {
    fn type_name(&self) -> &'static str {
        match self {
            Value::Float(_) => "float",
            Value::Int(_) => "integer",
            Value::UInt(_) => "unsigned",
            Value::Str(_) => "string",
            Value::Bool(_) => "boolean",
        }
    }
}

/// One parsed line; names and strings borrow from the request unless they had escapes.
#[derive(Debug, Clone, PartialEq)]
struct Point<'a> {
    measurement: Cow<'a, str>,
    tags: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    fields: Vec<(Cow<'a, str>, Value<'a>)>,
    time: Option<i64>,
}

/// Split at the first unescaped, unquoted `sep` (quotes only count in field sets).
fn split_unescaped(s: &str, sep: u8, quotes: bool) -> (&str, Option<&str>) {
    let b = s.as_bytes();
    let mut i = 0;
    let mut quoted = false;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'"' if quotes => quoted = !quoted,
            c if c == sep && !quoted => return (&s[..i], Some(&s[i + 1..])),
            _ => {}
        }
        i += 1;
    }
    (s, None)
}

fn split_all(s: &str, sep: u8, quotes: bool) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    loop {
        let (head, tail) = split_unescaped(rest, sep, quotes);
        out.push(head);
        match tail {
            Some(t) => rest = t,
            None => return out,
        }
    }
}

/// Remove the backslashes before the characters `escaped` lists (others stay, as InfluxDB
/// keeps them). Without a backslash (nearly always) the text is borrowed, not copied.
fn unescape<'a>(s: &'a str, escaped: &[char]) -> Cow<'a, str> {
    if !s.contains('\\') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(&n) = chars.peek() {
                if escaped.contains(&n) {
                    out.push(n);
                    chars.next();
                    continue;
                }
            }
        }
        out.push(c);
    }
    Cow::Owned(out)
}

fn parse_value(v: &str) -> Result<Value<'_>, String> {
    if let Some(q) = v.strip_prefix('"') {
        let inner = q
            .strip_suffix('"')
            .ok_or_else(|| format!("unterminated string {v}"))?;
        return Ok(Value::Str(unescape(inner, &['"', '\\'])));
    }
    match v {
        "t" | "T" | "true" | "True" | "TRUE" => return Ok(Value::Bool(true)),
        "f" | "F" | "false" | "False" | "FALSE" => return Ok(Value::Bool(false)),
        _ => {}
    }
    if let Some(i) = v.strip_suffix('i') {
        return i
            .parse::<i64>()
            .map(Value::Int)
            .map_err(|_| format!("'{v}' is not a 64-bit integer"));
    }
    if let Some(u) = v.strip_suffix('u') {
        return u
            .parse::<u64>()
            .map(Value::UInt)
            .map_err(|_| format!("'{v}' is not an unsigned 64-bit integer"));
    }
    let looks_numeric = v
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E'));
    match v.parse::<f64>() {
        Ok(f) if looks_numeric && f.is_finite() => {
            // A float holds the value written, or the value is refused: no rounding of an
            // integer past 2^53, no number too small for a float stored as zero.
            let digits = v.strip_prefix(['-', '+']).unwrap_or(v);
            if digits.bytes().all(|b| b.is_ascii_digit())
                && v.parse::<i128>().is_ok_and(|exact| f as i128 != exact)
            {
                return Err(format!(
                    "'{v}' is an integer a float cannot hold exactly (beyond 2^53): write it as {v}i"
                ));
            }
            let mantissa = v.split(['e', 'E']).next().unwrap_or("");
            if f == 0.0 && mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b)) {
                return Err(format!(
                    "'{v}' is too close to zero for a float (it would be stored as 0)"
                ));
            }
            Ok(Value::Float(f))
        }
        _ => Err(format!(
            "'{v}' is not a field value (a float, 1i, 1u, \"string\" or a boolean)"
        )),
    }
}

fn parse_line(line: &str) -> Result<Point<'_>, String> {
    let (series, rest) = split_unescaped(line, b' ', false);
    let rest = rest.ok_or("expected a field set after the measurement")?;
    let rest = rest.trim_start_matches(' ');
    let (fieldset, time) = split_unescaped(rest, b' ', true);
    let mut parts = split_all(series, b',', false).into_iter();
    let measurement = unescape(parts.next().unwrap_or(""), &[',', ' ']);
    if measurement.is_empty() {
        return Err("missing measurement".into());
    }
    let mut tags = Vec::new();
    for t in parts {
        let (k, v) = split_unescaped(t, b'=', false);
        let v = v.ok_or_else(|| format!("tag '{t}' has no '='"))?;
        let (k, v) = (unescape(k, &[',', '=', ' ']), unescape(v, &[',', '=', ' ']));
        if k.is_empty() || v.is_empty() {
            return Err(format!("empty tag key or value in '{t}'"));
        }
        tags.push((k, v));
    }
    let mut fields = Vec::new();
    for f in split_all(fieldset, b',', true) {
        let (k, v) = split_unescaped(f, b'=', false);
        let v = v.ok_or_else(|| format!("field '{f}' has no '='"))?;
        let k = unescape(k, &[',', '=', ' ']);
        if k.is_empty() {
            return Err(format!("empty field key in '{f}'"));
        }
        let value = parse_value(v).map_err(|m| format!("field '{k}': {m}"))?;
        fields.push((k, value));
    }
    if fields.is_empty() {
        return Err("a line needs at least one field".into());
    }
    let time = match time.map(|t| t.trim()) {
        None | Some("") => None,
        Some(t) => Some(t.parse::<i64>().map_err(|e| match e.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                format!("timestamp '{t}' is out of range (a 64-bit integer)")
            }
            _ => format!("timestamp '{t}' is not an integer"),
        })?),
    };
    Ok(Point {
        measurement,
        tags,
        fields,
        time,
    })
}

/// One measurement's rows of a request.
#[derive(Debug)]
pub struct Measurement {
    pub name: String,
    /// Its tag columns, sorted by name (the table's sort keys, before `time`).
    pub tags: Vec<String>,
    pub batch: RecordBatch,
    /// The request's line each row came from.
    pub lines: Vec<u64>,
}

/// `e`, about row N of a measurement's batch, told about the request's line instead.
pub fn at_line(e: neve_core::Error, lines: &[u64]) -> neve_core::Error {
    let line_of = |row: u64| lines.get((row as usize).wrapping_sub(1)).copied();
    match e {
        neve_core::Error::InvalidValue {
            input,
            position,
            column,
            value,
            reason,
        } => {
            let line = position
                .strip_prefix("row ")
                .and_then(|n| n.parse().ok())
                .and_then(line_of);
            neve_core::Error::InvalidValue {
                input,
                position: line.map_or(position, |l| format!("line {l}")),
                column,
                value,
                reason,
            }
        }
        neve_core::Error::InvalidInput {
            input,
            line: Some(row),
            column,
            message,
        } => neve_core::Error::InvalidInput {
            input,
            line: line_of(row).or(Some(row)),
            column,
            message,
        },
        e => e,
    }
}

/// The measurements of a request, in order of first appearance.
pub fn parse(
    text: &str,
    precision: Precision,
    multiplier: i64,
    now_ns: i64,
) -> Result<Vec<Measurement>, LineError> {
    struct Columns<'a> {
        tags: BTreeMap<String, Vec<Option<Cow<'a, str>>>>,
        fields: BTreeMap<String, (usize, Vec<Option<Value<'a>>>)>,
        times: Vec<i64>,
        lines: Vec<u64>,
    }
    let now = precision.of_ns(now_ns);
    let mut order: Vec<String> = Vec::new();
    let mut by: BTreeMap<String, Columns> = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i as u64 + 1;
        let line = raw.trim_end_matches('\r').trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |message: String| LineError {
            line: line_no,
            message,
        };
        let p = parse_line(line).map_err(err)?;
        let time = match p.time {
            Some(t) => t
                .checked_mul(multiplier)
                .ok_or_else(|| err(format!("timestamp {t} out of range")))?,
            None => now,
        };
        // Names are looked up borrowed and copied only the first time they are seen.
        if !by.contains_key(&*p.measurement) {
            order.push(p.measurement.to_string());
            by.insert(
                p.measurement.to_string(),
                Columns {
                    tags: BTreeMap::new(),
                    fields: BTreeMap::new(),
                    times: Vec::new(),
                    lines: Vec::new(),
                },
            );
        }
        let c = by.get_mut(&*p.measurement).expect("inserted above");
        let row = c.times.len();
        // A known name is found with one lookup; the clash checks run when a name is new (a
        // name enters one map only after they pass, so it is never in both).
        for (k, v) in p.tags {
            let col = match c.tags.get_mut(&*k) {
                Some(col) => col,
                None => {
                    if c.fields.contains_key(&*k) || k == "time" {
                        return Err(err(format!(
                            "'{k}' is a tag here but a field (or the time) elsewhere"
                        )));
                    }
                    c.tags
                        .entry(k.to_string())
                        .or_insert_with(|| vec![None; row])
                }
            };
            if col.len() > row {
                return Err(err(format!("tag '{k}' appears twice")));
            }
            col.push(Some(v));
        }
        for (k, v) in p.fields {
            let (_, col) = match c.fields.get_mut(&*k) {
                Some(entry) => entry,
                None => {
                    if c.tags.contains_key(&*k) || k == "time" {
                        return Err(err(format!(
                            "'{k}' is a field here but a tag (or the time) elsewhere"
                        )));
                    }
                    c.fields
                        .entry(k.to_string())
                        .or_insert_with(|| (line_no as usize, vec![None; row]))
                }
            };
            if let Some(Some(prev)) = col.iter().rev().find(|x| x.is_some()) {
                if std::mem::discriminant(prev) != std::mem::discriminant(&v) {
                    return Err(err(format!(
                        "field '{k}' is {} here but {} in an earlier line",
                        v.type_name(),
                        prev.type_name()
                    )));
                }
            }
            if col.len() > row {
                return Err(err(format!("field '{k}' appears twice")));
            }
            col.push(Some(v));
        }
        c.times.push(time);
        c.lines.push(line_no);
        for col in c.tags.values_mut() {
            col.resize(row + 1, None);
        }
        for (_, col) in c.fields.values_mut() {
            col.resize(row + 1, None);
        }
    }
    let mut out = Vec::with_capacity(order.len());
    for m in order {
        let c = by.remove(&m).expect("recorded");
        let tags: Vec<String> = c.tags.keys().cloned().collect();
        let mut fields = Vec::new();
        let mut arrays: Vec<ArrayRef> = Vec::new();
        for (k, col) in c.tags {
            fields.push(Field::new(k, DataType::Utf8, true));
            let mut b = StringBuilder::new();
            for v in col {
                b.append_option(v);
            }
            arrays.push(Arc::new(b.finish()));
        }
        for (k, (_, col)) in c.fields {
            let first = col.iter().flatten().next().expect("a field has a value");
            let (dt, a): (DataType, ArrayRef) = match first {
                Value::Float(_) => {
                    let mut b = Float64Builder::new();
                    col.iter().for_each(|v| {
                        b.append_option(match v {
                            Some(Value::Float(f)) => Some(*f),
                            _ => None,
                        })
                    });
                    (DataType::Float64, Arc::new(b.finish()))
                }
                Value::Int(_) => {
                    let mut b = Int64Builder::new();
                    col.iter().for_each(|v| {
                        b.append_option(match v {
                            Some(Value::Int(f)) => Some(*f),
                            _ => None,
                        })
                    });
                    (DataType::Int64, Arc::new(b.finish()))
                }
                Value::UInt(_) => {
                    let mut b = UInt64Builder::new();
                    col.iter().for_each(|v| {
                        b.append_option(match v {
                            Some(Value::UInt(f)) => Some(*f),
                            _ => None,
                        })
                    });
                    (DataType::UInt64, Arc::new(b.finish()))
                }
                Value::Str(_) => {
                    let mut b = StringBuilder::new();
                    col.iter().for_each(|v| {
                        b.append_option(match v {
                            Some(Value::Str(f)) => Some(f.as_ref()),
                            _ => None,
                        })
                    });
                    (DataType::Utf8, Arc::new(b.finish()))
                }
                Value::Bool(_) => {
                    let mut b = BooleanBuilder::new();
                    col.iter().for_each(|v| {
                        b.append_option(match v {
                            Some(Value::Bool(f)) => Some(*f),
                            _ => None,
                        })
                    });
                    (DataType::Boolean, Arc::new(b.finish()))
                }
            };
            fields.push(Field::new(k, dt, true));
            arrays.push(a);
        }
        let tz: Arc<str> = "UTC".into();
        let time: ArrayRef = match precision {
            Precision::Ns => Arc::new(
                TimestampNanosecondBuilder::new()
                    .with_timezone(tz.clone())
                    .tap(&c.times),
            ),
            Precision::Us => Arc::new(
                TimestampMicrosecondBuilder::new()
                    .with_timezone(tz.clone())
                    .tap(&c.times),
            ),
            Precision::Ms => Arc::new(
                TimestampMillisecondBuilder::new()
                    .with_timezone(tz.clone())
                    .tap(&c.times),
            ),
            Precision::S => Arc::new(
                TimestampSecondBuilder::new()
                    .with_timezone(tz.clone())
                    .tap(&c.times),
            ),
        };
        fields.push(Field::new(
            "time",
            DataType::Timestamp(precision.unit(), Some(tz)),
            false,
        ));
        arrays.push(time);
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
            .expect("columns built to the schema");
        out.push(Measurement {
            name: m,
            tags,
            batch,
            lines: c.lines,
        });
    }
    Ok(out)
}

/// Fill a timestamp builder from values.
trait Tap<A> {
    fn tap(self, values: &[i64]) -> A;
}

macro_rules! tap {
    ($b:ty, $a:ty) => {
        impl Tap<$a> for $b {
            fn tap(mut self, values: &[i64]) -> $a {
                for v in values {
                    self.append_value(*v);
                }
                self.finish()
            }
        }
    };
}
tap!(
    TimestampNanosecondBuilder,
    arrow::array::TimestampNanosecondArray
);
tap!(
    TimestampMicrosecondBuilder,
    arrow::array::TimestampMicrosecondArray
);
tap!(
    TimestampMillisecondBuilder,
    arrow::array::TimestampMillisecondArray
);
tap!(TimestampSecondBuilder, arrow::array::TimestampSecondArray);

#[cfg(test)]
mod tests;
