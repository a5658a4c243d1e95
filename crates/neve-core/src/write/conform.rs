//! Conform input arrays to a target type, at any depth, without changing a value: text is
//! parsed exactly ([`super::text`]), widening casts are lossless by construction, unit changes
//! (nanoseconds to microseconds, Date64 to days) are checked value by value, and `not null`
//! fields are checked. Nested arrays are rebuilt with the target's fields (names, field ids).

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, GenericListArray, ListArray, MapArray, OffsetSizeTrait,
    PrimitiveArray, RecordBatch, RecordBatchOptions, StructArray,
};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::compute::CastOptions;
use arrow::datatypes::{
    DataType, Date64Type, Field, FieldRef, Fields, SchemaRef, Time32MillisecondType,
    Time32SecondType, Time64MicrosecondType, Time64NanosecondType, TimeUnit,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType,
};

use super::text::{parse_text, TextOptions};
use crate::error::{Error, Result};

/// A value that cannot be conformed: where it is (index in the top-level array, field path),
/// its text, and why.
#[derive(Debug)]
pub(crate) struct BadValue {
    pub index: usize,
    pub path: String,
    pub value: String,
    pub reason: String,
}

pub(crate) enum ConformError {
    Value(BadValue),
    Arrow(arrow::error::ArrowError),
}

impl From<arrow::error::ArrowError> for ConformError {
    fn from(e: arrow::error::ArrowError) -> Self {
        ConformError::Arrow(e)
    }
}

type CResult<T> = std::result::Result<T, ConformError>;

/// Which top-level row an element of a (possibly nested) array belongs to, for errors. Only
/// walked when an error is reported: lists keep their offsets, nothing per element.
#[derive(Clone, Copy)]
enum Rows<'a> {
    Top,
    /// Elements of a list or map whose `offsets` (starting at 0) index into `parent`'s rows.
    Elements {
        offsets: &'a [i32],
        parent: &'a Rows<'a>,
    },
}

impl Rows<'_> {
    fn row(&self, i: usize) -> usize {
        match self {
            Rows::Top => i,
            Rows::Elements { offsets, parent } => parent.row(
                offsets
                    .partition_point(|&o| o as usize <= i)
                    .saturating_sub(1),
            ),
        }
    }
}

/// Where a row of the batch being conformed is in its input, for errors (`line 7`, `row 7`).
pub(crate) type Position<'a> = &'a dyn Fn(usize) -> String;

/// Conform `batch` to `target`: every target column (missing ones as nulls), target types and
/// order. Errors name the input, the row's position, the column and the value.
pub(crate) fn conform_batch(
    batch: &RecordBatch,
    target: &SchemaRef,
    text: &TextOptions,
    input: &str,
    position: Position<'_>,
) -> Result<RecordBatch> {
    let schema = batch.schema();
    let rows = batch.num_rows();
    let mut cols = Vec::with_capacity(target.fields().len());
    // By name in one pass (a wide input would make a search per column quadratic).
    let by_name: std::collections::HashMap<&str, usize> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| (f.name().as_str(), i))
        .collect();
    for f in target.fields() {
        let res = match by_name.get(f.name().as_str()) {
            Some(&i) => conform_in(batch.column(i), f, f.name(), text, &Rows::Top, None),
            None => missing(f, f.name(), rows, None, &Rows::Top),
        };
        match res {
            Ok(a) => cols.push(a),
            Err(ConformError::Arrow(e)) => return Err(e.into()),
            Err(ConformError::Value(b)) => {
                // Map the index back through nesting: `b.index` is always a top-level row.
                return Err(Error::InvalidValue {
                    input: input.to_string(),
                    position: position(b.index),
                    column: b.path,
                    value: b.value,
                    reason: b.reason,
                });
            }
        }
    }
    Ok(RecordBatch::try_new_with_options(
        target.clone(),
        cols,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )?)
}

/// A column the input lacks: nulls, unless the field is `not null`.
fn missing(
    f: &FieldRef,
    path: &str,
    len: usize,
    parent: Option<&NullBuffer>,
    rows: &Rows<'_>,
) -> CResult<ArrayRef> {
    let nulls = arrow::array::new_null_array(f.data_type(), len);
    check_not_null(&nulls, f, path, parent, rows)?;
    Ok(nulls)
}

/// `index` maps a position in a nested array back to a top-level row.
fn check_not_null(
    a: &ArrayRef,
    f: &Field,
    path: &str,
    parent: Option<&NullBuffer>,
    rows: &Rows<'_>,
) -> CResult<()> {
    if f.is_nullable() || a.null_count() == 0 {
        return Ok(());
    }
    let first = (0..a.len()).find(|&i| a.is_null(i) && parent.is_none_or(|p| p.is_valid(i)));
    match first {
        None => Ok(()),
        Some(i) => Err(ConformError::Value(BadValue {
            index: rows.row(i),
            path: path.to_string(),
            value: "null".into(),
            reason: "in a not null column".into(),
        })),
    }
}

fn conform_in(
    a: &ArrayRef,
    target: &FieldRef,
    path: &str,
    text: &TextOptions,
    rows: &Rows<'_>,
    parent: Option<&NullBuffer>,
) -> CResult<ArrayRef> {
    let out = match (a.data_type(), target.data_type()) {
        (DataType::Dictionary(_, v), _) => {
            let plain = arrow::compute::cast(a, v)?;
            return conform_in(&plain, target, path, text, rows, parent);
        }
        (DataType::Null, t) if t != &DataType::Null => {
            return missing(target, path, a.len(), parent, rows);
        }
        (DataType::Struct(_), DataType::Struct(fields)) => {
            conform_struct(a.as_struct(), fields, path, text, rows)?
        }
        (DataType::List(_), DataType::List(ef)) => {
            conform_list(a.as_list::<i32>(), ef, path, text, rows)?
        }
        (DataType::LargeList(_), DataType::List(ef)) => {
            conform_list(a.as_list::<i64>(), ef, path, text, rows)?
        }
        (
            DataType::FixedSizeList(..) | DataType::ListView(_) | DataType::LargeListView(_),
            DataType::List(_),
        ) => {
            let as_list = arrow::compute::cast(
                a,
                &DataType::LargeList(match a.data_type() {
                    DataType::FixedSizeList(f, _)
                    | DataType::ListView(f)
                    | DataType::LargeListView(f) => f.clone(),
                    _ => unreachable!(),
                }),
            )?;
            return conform_in(&as_list, target, path, text, rows, parent);
        }
        (DataType::Map(_, _), DataType::Map(ef, sorted)) => {
            conform_map(a.as_map(), ef, *sorted, path, text, rows)?
        }
        (from, to) if is_text(from) && !is_text(to) => {
            let s = arrow::compute::cast(a, &DataType::Utf8)?;
            // The insert's epoch unit, else the column's own.
            let own = TextOptions {
                epoch_unit: text.epoch_unit.or_else(|| {
                    target
                        .metadata()
                        .get(super::input::EPOCH_UNIT)
                        .and_then(|u| u.parse().ok())
                }),
            };
            parse_text(s.as_string::<i32>(), to, &own).map_err(|b| {
                ConformError::Value(BadValue {
                    index: rows.row(b.index),
                    path: path.to_string(),
                    value: quote(s.as_string::<i32>().value(b.index)),
                    reason: b.reason,
                })
            })?
        }
        (from, to) => conform_leaf(a, from, to, path, rows)?,
    };
    check_not_null(&out, target, path, parent, rows)?;
    Ok(out)
}

fn is_text(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

fn quote(s: &str) -> String {
    let short: String = s.chars().take(80).collect();
    let more = if short.len() < s.len() { "…" } else { "" };
    format!("{}{more}", serde_json::Value::from(short))
}

fn conform_struct(
    a: &StructArray,
    fields: &Fields,
    path: &str,
    text: &TextOptions,
    rows: &Rows<'_>,
) -> CResult<ArrayRef> {
    let DataType::Struct(from) = a.data_type() else {
        unreachable!("checked by the caller")
    };
    let mut children = Vec::with_capacity(fields.len());
    for f in fields {
        let p = format!("{path}.{}", f.name());
        let child = match from.iter().position(|x| x.name() == f.name()) {
            Some(i) => conform_in(a.column(i), f, &p, text, rows, a.nulls())?,
            None => missing(f, &p, a.len(), a.nulls(), rows)?,
        };
        children.push(child);
    }
    Ok(Arc::new(StructArray::try_new_with_length(
        fields.clone(),
        children,
        a.nulls().cloned(),
        a.len(),
    )?))
}

fn conform_list<O: OffsetSizeTrait>(
    a: &GenericListArray<O>,
    element: &FieldRef,
    path: &str,
    text: &TextOptions,
    rows: &Rows<'_>,
) -> CResult<ArrayRef> {
    // Elements of a list are a slice of the values array: conform only that slice.
    let offsets = a.offsets();
    let start = offsets[0].as_usize();
    let end = offsets[offsets.len() - 1].as_usize();
    let values = a.values().slice(start, end - start);
    let shifted: Vec<i32> = offsets
        .iter()
        .map(|o| {
            i32::try_from(o.as_usize() - start).map_err(|_| {
                ConformError::Value(BadValue {
                    index: rows.row(0),
                    path: path.to_string(),
                    value: "a list".into(),
                    reason: "has more than 2^31 elements in one batch".into(),
                })
            })
        })
        .collect::<CResult<_>>()?;
    let shifted = OffsetBuffer::new(shifted.into());
    let erows = Rows::Elements {
        offsets: &shifted,
        parent: rows,
    };
    let values = conform_in(&values, element, &format!("{path}[]"), text, &erows, None)?;
    Ok(Arc::new(ListArray::try_new(
        element.clone(),
        shifted,
        values,
        a.nulls().cloned(),
    )?))
}

fn conform_map(
    a: &MapArray,
    entries: &FieldRef,
    sorted: bool,
    path: &str,
    text: &TextOptions,
    rows: &Rows<'_>,
) -> CResult<ArrayRef> {
    let DataType::Struct(kv) = entries.data_type() else {
        unreachable!("a map's entries are a struct")
    };
    let offsets = a.offsets();
    let start = offsets[0] as usize;
    let end = offsets[offsets.len() - 1] as usize;
    let shifted = OffsetBuffer::new(
        offsets
            .iter()
            .map(|o| o - offsets[0])
            .collect::<Vec<_>>()
            .into(),
    );
    let erows = Rows::Elements {
        offsets: &shifted,
        parent: rows,
    };
    let keys = conform_in(
        &a.keys().slice(start, end - start),
        &kv[0],
        &format!("{path}.key"),
        text,
        &erows,
        None,
    )?;
    let values = conform_in(
        &a.values().slice(start, end - start),
        &kv[1],
        &format!("{path}.value"),
        text,
        &erows,
        None,
    )?;
    let entries_array = StructArray::try_new(kv.clone(), vec![keys, values], None)?;
    Ok(Arc::new(MapArray::try_new(
        entries.clone(),
        shifted,
        entries_array,
        a.nulls().cloned(),
        sorted,
    )?))
}

/// Primitive to primitive. Only lossless changes reach here (the schema was evolved first);
/// the ones that change units are checked value by value.
fn conform_leaf(
    a: &ArrayRef,
    from: &DataType,
    to: &DataType,
    path: &str,
    rows: &Rows<'_>,
) -> CResult<ArrayRef> {
    let bad = |i: usize, reason: &str| {
        ConformError::Value(BadValue {
            index: rows.row(i),
            path: path.to_string(),
            value: arrow::util::display::array_value_to_string(a, i).unwrap_or_default(),
            reason: reason.to_string(),
        })
    };
    // Arrow's IPC and Parquet readers take a decimal's declared precision on trust, and the
    // Parquet writer keeps only the bytes the precision needs: a value with more digits
    // would be stored cut.
    if from.is_decimal() {
        if let Some((i, value, ty)) = super::validate::decimal_over_precision(a.as_ref()) {
            return Err(ConformError::Value(BadValue {
                index: rows.row(i),
                path: path.to_string(),
                value,
                reason: format!("has more digits than its type, {ty}, holds"),
            }));
        }
    }
    // Beyond chrono's years, a timestamp has no text: its partition label and statistics
    // could not be written (they were the epoch's), so such values are refused.
    let beyond = |i: usize, us: i64| {
        ConformError::Value(BadValue {
            index: rows.row(i),
            path: path.to_string(),
            value: format!("{us} µs since the epoch"),
            reason: format!(
                "is beyond the timestamps neve keeps (years {} to {})",
                chrono::DateTime::<chrono::Utc>::MIN_UTC.format("%Y"),
                chrono::DateTime::<chrono::Utc>::MAX_UTC.format("%Y")
            ),
        })
    };
    if from == to {
        if let DataType::Timestamp(TimeUnit::Microsecond, _) = to {
            if let Some((i, us)) = timestamp_beyond_range(a.as_primitive()) {
                return Err(beyond(i, us));
            }
        }
        return Ok(a.clone());
    }
    const NS: &str = "has nanoseconds; neve keeps microseconds";
    const RANGE: &str = "is out of range for a microsecond timestamp";
    match (from, to) {
        (DataType::Timestamp(unit, _), DataType::Timestamp(TimeUnit::Microsecond, tz)) => {
            let us: PrimitiveArray<TimestampMicrosecondType> = match unit {
                TimeUnit::Second => {
                    scale_checked(a.as_primitive::<TimestampSecondType>(), 1_000_000, |i| {
                        bad(i, RANGE)
                    })?
                }
                TimeUnit::Millisecond => {
                    scale_checked(a.as_primitive::<TimestampMillisecondType>(), 1_000, |i| {
                        bad(i, RANGE)
                    })?
                }
                TimeUnit::Microsecond => a.as_primitive::<TimestampMicrosecondType>().clone(),
                TimeUnit::Nanosecond => {
                    divide_exact(a.as_primitive::<TimestampNanosecondType>(), 1_000, |i| {
                        bad(i, NS)
                    })?
                }
            };
            if let Some((i, us)) = timestamp_beyond_range(&us) {
                return Err(beyond(i, us));
            }
            return Ok(Arc::new(us.with_timezone_opt(tz.clone())));
        }
        (DataType::Time32(unit), DataType::Time64(TimeUnit::Microsecond)) => {
            let us: PrimitiveArray<Time64MicrosecondType> = match unit {
                TimeUnit::Second => {
                    scale_checked(a.as_primitive::<Time32SecondType>(), 1_000_000, |i| {
                        bad(i, RANGE)
                    })?
                }
                _ => scale_checked(a.as_primitive::<Time32MillisecondType>(), 1_000, |i| {
                    bad(i, RANGE)
                })?,
            };
            return Ok(Arc::new(us));
        }
        (DataType::Time64(TimeUnit::Nanosecond), DataType::Time64(TimeUnit::Microsecond)) => {
            let us: PrimitiveArray<Time64MicrosecondType> =
                divide_exact(a.as_primitive::<Time64NanosecondType>(), 1_000, |i| {
                    bad(i, NS)
                })?;
            return Ok(Arc::new(us));
        }
        (DataType::Date64, DataType::Date32) => {
            let ms = a.as_primitive::<Date64Type>();
            if let Some(i) =
                (0..ms.len()).find(|&i| ms.is_valid(i) && ms.value(i) % 86_400_000 != 0)
            {
                return Err(bad(i, "has a time of day, and the column is a date"));
            }
        }
        _ => {}
    }
    let types = (
        crate::schema::ColumnType::from_arrow(path, from),
        crate::schema::ColumnType::from_arrow(path, to),
    );
    if let (Ok(f), Ok(t)) = &types {
        if !f.widens_to(t) {
            let reason = format!(
                "does not fit {t}, the column's type, exactly (the table's schema is strict: its types do not widen)"
            );
            return narrow(a, to, |i| bad(i, &reason));
        }
    }
    // Lossless by the widening rules; `safe: false` makes any surprise an error, not a null.
    Ok(arrow::compute::cast_with_options(
        a,
        to,
        &CastOptions {
            safe: false,
            ..Default::default()
        },
    )?)
}

/// Cast `a` to the narrower `to` (a strict table keeps its types), refusing the first value
/// that does not come back unchanged: out of range (the cast gives null), rounded (a decimal's
/// or a float's digits) or cut (a binary's length).
fn narrow(a: &ArrayRef, to: &DataType, bad: impl Fn(usize) -> ConformError) -> CResult<ArrayRef> {
    // arrow casts views to few types (not `BinaryView` to `FixedSizeBinary`, which polars'
    // binary columns would need): their plain form first, which holds the same values.
    let plain = match a.data_type() {
        DataType::BinaryView => Some(DataType::Binary),
        DataType::Utf8View => Some(DataType::Utf8),
        _ => None,
    };
    let a = &match plain {
        Some(t) => arrow::compute::cast(a, &t)?,
        None => a.clone(),
    };
    let out = arrow::compute::cast_with_options(
        a,
        to,
        &CastOptions {
            safe: true,
            ..Default::default()
        },
    )?;
    let back = arrow::compute::cast(&out, a.data_type())?;
    let same = arrow::compute::kernels::cmp::not_distinct(&back, a)?;
    if let Some(i) = (0..a.len()).find(|&i| a.is_valid(i) && (out.is_null(i) || !same.value(i))) {
        return Err(bad(i));
    }
    Ok(out)
}

/// Multiply 32- or 64-bit time values by `factor` into i64-based `O`, refusing overflow.
/// The first valid value outside the instants chrono can write as text, and its index.
pub(crate) fn timestamp_beyond_range(
    a: &PrimitiveArray<TimestampMicrosecondType>,
) -> Option<(usize, i64)> {
    let lo = chrono::DateTime::<chrono::Utc>::MIN_UTC.timestamp_micros();
    let hi = chrono::DateTime::<chrono::Utc>::MAX_UTC.timestamp_micros();
    let values = a.values();
    let mut from = 0;
    while let Some(k) = values[from..].iter().position(|&v| v < lo || v > hi) {
        let i = from + k;
        if a.is_valid(i) {
            return Some((i, values[i]));
        }
        from = i + 1;
    }
    None
}

fn scale_checked<I, O>(
    a: &PrimitiveArray<I>,
    factor: i64,
    bad: impl Fn(usize) -> ConformError,
) -> CResult<PrimitiveArray<O>>
where
    I: arrow::datatypes::ArrowPrimitiveType,
    I::Native: Into<i64>,
    O: arrow::datatypes::ArrowPrimitiveType<Native = i64>,
{
    let mut out = Vec::with_capacity(a.len());
    for i in 0..a.len() {
        let v: i64 = a.values()[i].into();
        match v.checked_mul(factor) {
            Some(x) => out.push(x),
            None if a.is_null(i) => out.push(0),
            None => return Err(bad(i)),
        }
    }
    Ok(PrimitiveArray::<O>::new(out.into(), a.nulls().cloned()))
}

/// Divide i64 time values by `divisor`, refusing any that are not multiples of it.
fn divide_exact<I, O>(
    a: &PrimitiveArray<I>,
    divisor: i64,
    bad: impl Fn(usize) -> ConformError,
) -> CResult<PrimitiveArray<O>>
where
    I: arrow::datatypes::ArrowPrimitiveType<Native = i64>,
    O: arrow::datatypes::ArrowPrimitiveType<Native = i64>,
{
    let mut out = Vec::with_capacity(a.len());
    for (i, &v) in a.values().iter().enumerate() {
        if v % divisor != 0 && a.is_valid(i) {
            return Err(bad(i));
        }
        out.push(v / divisor);
    }
    Ok(PrimitiveArray::<O>::new(out.into(), a.nulls().cloned()))
}
