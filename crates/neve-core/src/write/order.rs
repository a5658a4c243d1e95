//! The order of a part's rows by the table's sort keys: ascending, nulls first, the order
//! Parquet's `sorting_columns` and the Arrow row format give.
//!
//! Most sort keys are a few short columns: a category and a time, a tenant and an id. Each is
//! turned into an order-preserving integer code that only spans the part's own range (a time
//! within one month needs 42 bits, six payment types 3), the codes and the row's position are
//! packed into one `u64` or `u128`, and the part is sorted as plain integers. Sorting the Arrow
//! row format instead (each row's keys copied into bytes, compared with `memcmp`) took about 5%
//! of an insert's CPU on the taxi data. Keys that do not pack (too wide, nested, `Decimal256`,
//! strings with many distinct values) fall back to the row format.

use std::collections::HashMap;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{self as dt, DataType};
use arrow::row::{RowConverter, SortField};

use crate::error::Result;

/// Positions of a part's rows, numbered across `slices` in order, sorted by the columns
/// `sort_cols`. Rows with equal keys keep their input order.
pub(crate) fn sort_order(slices: &[RecordBatch], sort_cols: &[usize]) -> Result<Vec<u32>> {
    let rows: usize = slices.iter().map(|s| s.num_rows()).sum();
    if let Some(order) = packed_order(slices, sort_cols, rows) {
        return Ok(order);
    }
    row_format_order(slices, sort_cols)
}

/// The general path: the Arrow row format, compared as bytes.
pub(super) fn row_format_order(slices: &[RecordBatch], sort_cols: &[usize]) -> Result<Vec<u32>> {
    let rows: usize = slices.iter().map(|s| s.num_rows()).sum();
    let keys: Vec<ArrayRef> = sort_cols
        .iter()
        .map(|&c| {
            let parts: Vec<&dyn Array> = slices.iter().map(|s| s.column(c).as_ref()).collect();
            Ok(arrow::compute::concat(&parts)?)
        })
        .collect::<Result<_>>()?;
    let converter = RowConverter::new(
        keys.iter()
            .map(|k| SortField::new(k.data_type().clone()))
            .collect(),
    )?;
    let keyed = converter.convert_columns(&keys)?;
    let mut order: Vec<u32> = (0..rows as u32).collect();
    order.sort_by(|&a, &b| keyed.row(a as usize).cmp(&keyed.row(b as usize)));
    Ok(order)
}

/// Bits of the packed key the sort keys may use; the row's position takes the low 32.
const KEY_BITS: u32 = 96;

/// The packed path, or `None` when a key does not pack.
fn packed_order(slices: &[RecordBatch], sort_cols: &[usize], rows: usize) -> Option<Vec<u32>> {
    if rows > u32::MAX as usize {
        return None;
    }
    let mut keys = Vec::with_capacity(sort_cols.len());
    let mut bits = 0;
    for &c in sort_cols {
        let columns: Vec<&dyn Array> = slices.iter().map(|s| s.column(c).as_ref()).collect();
        let key = key_codes(&columns, rows)?;
        bits += key.bits;
        if bits > KEY_BITS {
            return None;
        }
        keys.push(key);
    }
    Some(if bits <= 32 {
        pack_and_sort::<u64>(&keys, bits, rows)
    } else {
        pack_and_sort::<u128>(&keys, bits, rows)
    })
}

/// An integer holding a row's key codes above its position (the low 32 bits).
trait Packed:
    Copy + Ord + From<u64> + std::ops::Shl<u32, Output = Self> + std::ops::BitOrAssign
{
    fn position(self) -> u32;
}

impl Packed for u64 {
    fn position(self) -> u32 {
        self as u32
    }
}

impl Packed for u128 {
    fn position(self) -> u32 {
        self as u32
    }
}

/// Pack `keys` (`bits` in all, the first key highest) above each row's position and sort.
fn pack_and_sort<T: Packed>(keys: &[Key], bits: u32, rows: usize) -> Vec<u32> {
    let mut packed: Vec<T> = (0..rows as u64).map(T::from).collect();
    let mut shift = 32 + bits;
    for key in keys {
        if key.bits == 0 {
            // All null: one code, nothing to pack (and `shift` may be the type's width).
            continue;
        }
        shift -= key.bits;
        for (p, &code) in packed.iter_mut().zip(&key.codes) {
            *p |= T::from(code) << shift;
        }
    }
    packed.sort_unstable();
    packed.into_iter().map(T::position).collect()
}

/// One sort key as codes: 0 for null, else 1 + the value's distance from the part's least
/// value, in `bits` bits.
struct Key {
    codes: Vec<u64>,
    bits: u32,
}

/// A column's codes across the part's slices, or `None` when it does not pack.
fn key_codes(columns: &[&dyn Array], rows: usize) -> Option<Key> {
    let mut raw = Vec::with_capacity(rows);
    let mut valid = Vec::with_capacity(rows);
    let data_type = columns.first()?.data_type();
    if matches!(
        data_type,
        DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
    ) {
        bytes_ranks(columns, rows, &mut raw, &mut valid)?;
    } else if let DataType::Decimal128(..) = data_type {
        decimal128s(columns, &mut raw, &mut valid)?;
    } else if let DataType::Dictionary(..) = data_type {
        keyed(columns, &mut raw, &mut valid)?;
    } else {
        for a in columns {
            numbers(*a, &mut raw)?;
            valid.extend((0..a.len()).map(|i| a.is_valid(i)));
        }
    }
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    for (&v, &ok) in raw.iter().zip(&valid) {
        if ok {
            lo = lo.min(v);
            hi = hi.max(v);
        }
    }
    if lo > hi {
        // Only nulls: one code.
        return Some(Key {
            codes: vec![0; rows],
            bits: 0,
        });
    }
    let top = (hi - lo).checked_add(1)?;
    let bits = u64::BITS - top.leading_zeros();
    for (v, &ok) in raw.iter_mut().zip(&valid) {
        *v = if ok { *v - lo + 1 } else { 0 };
    }
    Some(Key { codes: raw, bits })
}

/// Order-preserving `u64`s of a column of numbers, times or booleans (nulls get an arbitrary
/// value); `None` for other types.
fn numbers(a: &dyn Array, out: &mut Vec<u64>) -> Option<()> {
    use DataType as D;
    fn signed<T: dt::ArrowPrimitiveType>(a: &dyn Array, out: &mut Vec<u64>)
    where
        T::Native: Into<i64>,
    {
        let flip = 1u64 << 63;
        out.extend(
            a.as_primitive::<T>()
                .values()
                .iter()
                .map(|&v| (v.into() as u64) ^ flip),
        );
    }
    fn unsigned<T: dt::ArrowPrimitiveType>(a: &dyn Array, out: &mut Vec<u64>)
    where
        T::Native: Into<u64>,
    {
        out.extend(a.as_primitive::<T>().values().iter().map(|&v| v.into()));
    }
    match a.data_type() {
        D::Int8 => signed::<dt::Int8Type>(a, out),
        D::Int16 => signed::<dt::Int16Type>(a, out),
        D::Int32 => signed::<dt::Int32Type>(a, out),
        D::Int64 => signed::<dt::Int64Type>(a, out),
        D::Date32 => signed::<dt::Date32Type>(a, out),
        D::Date64 => signed::<dt::Date64Type>(a, out),
        D::Time32(dt::TimeUnit::Second) => signed::<dt::Time32SecondType>(a, out),
        D::Time32(dt::TimeUnit::Millisecond) => signed::<dt::Time32MillisecondType>(a, out),
        D::Time64(dt::TimeUnit::Microsecond) => signed::<dt::Time64MicrosecondType>(a, out),
        D::Time64(dt::TimeUnit::Nanosecond) => signed::<dt::Time64NanosecondType>(a, out),
        D::Timestamp(dt::TimeUnit::Second, _) => signed::<dt::TimestampSecondType>(a, out),
        D::Timestamp(dt::TimeUnit::Millisecond, _) => {
            signed::<dt::TimestampMillisecondType>(a, out)
        }
        D::Timestamp(dt::TimeUnit::Microsecond, _) => {
            signed::<dt::TimestampMicrosecondType>(a, out)
        }
        D::Timestamp(dt::TimeUnit::Nanosecond, _) => signed::<dt::TimestampNanosecondType>(a, out),
        D::Duration(dt::TimeUnit::Second) => signed::<dt::DurationSecondType>(a, out),
        D::Duration(dt::TimeUnit::Millisecond) => signed::<dt::DurationMillisecondType>(a, out),
        D::Duration(dt::TimeUnit::Microsecond) => signed::<dt::DurationMicrosecondType>(a, out),
        D::Duration(dt::TimeUnit::Nanosecond) => signed::<dt::DurationNanosecondType>(a, out),
        D::Decimal32(..) => signed::<dt::Decimal32Type>(a, out),
        D::Decimal64(..) => signed::<dt::Decimal64Type>(a, out),
        D::UInt8 => unsigned::<dt::UInt8Type>(a, out),
        D::UInt16 => unsigned::<dt::UInt16Type>(a, out),
        D::UInt32 => unsigned::<dt::UInt32Type>(a, out),
        D::UInt64 => unsigned::<dt::UInt64Type>(a, out),
        D::Float16 => out.extend(
            a.as_primitive::<dt::Float16Type>()
                .values()
                .iter()
                .map(|v| float_order(v.to_bits().into(), 16)),
        ),
        D::Float32 => out.extend(
            a.as_primitive::<dt::Float32Type>()
                .values()
                .iter()
                .map(|v| float_order(v.to_bits().into(), 32)),
        ),
        D::Float64 => out.extend(
            a.as_primitive::<dt::Float64Type>()
                .values()
                .iter()
                .map(|v| float_order(v.to_bits(), 64)),
        ),
        D::Boolean => {
            let b = a.as_boolean();
            out.extend((0..b.len()).map(|i| u64::from(b.value(i))));
        }
        _ => return None,
    }
    Some(())
}

/// A float's `width` bits as an unsigned number in IEEE 754 total order, as the row format
/// compares floats: -NaN < -inf < -0 < +0 < +inf < NaN.
fn float_order(bits: u64, width: u32) -> u64 {
    let sign = 1u64 << (width - 1);
    if bits & sign != 0 {
        !bits & (sign | (sign - 1))
    } else {
        bits | sign
    }
}

/// A `Decimal128` column's values as their distance from the part's least (nulls get an
/// arbitrary value), or `None` when the part's values span 64 bits or more. Amounts and prices
/// of one part nearly always fit.
fn decimal128s(columns: &[&dyn Array], raw: &mut Vec<u64>, valid: &mut Vec<bool>) -> Option<()> {
    let arrays: Vec<_> = columns
        .iter()
        .map(|a| a.as_primitive::<dt::Decimal128Type>())
        .collect();
    let mut range: Option<(i128, i128)> = None;
    for a in &arrays {
        for (i, &v) in a.values().iter().enumerate() {
            if a.is_valid(i) {
                range = Some(range.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))));
            }
        }
    }
    // The difference of two i128 as u128 is exact when hi >= lo.
    let lo = match range {
        Some((lo, hi)) if (hi as u128).wrapping_sub(lo as u128) >= u128::from(u64::MAX) => {
            return None;
        }
        Some((lo, _)) => lo as u128,
        None => 0,
    };
    for a in arrays {
        raw.extend(
            a.values()
                .iter()
                .map(|&v| (v as u128).wrapping_sub(lo) as u64),
        );
        valid.extend((0..a.len()).map(|i| a.is_valid(i)));
    }
    Some(())
}

/// A keyed string column's keys (`keys.rs`): its slices share one dictionary sorted
/// ascending, so a key is its value's rank. `None` for any other dictionary array.
fn keyed(columns: &[&dyn Array], raw: &mut Vec<u64>, valid: &mut Vec<bool>) -> Option<()> {
    super::keys::shared_values(columns)?;
    super::keys::sorted_keys(columns[0])?;
    for a in columns {
        let keys = a.as_dictionary::<dt::UInt32Type>().keys();
        raw.extend(keys.values().iter().map(|&k| u64::from(k)));
        valid.extend((0..keys.len()).map(|i| keys.is_valid(i)));
    }
    Some(())
}

/// A string or binary column's values as their rank among the part's distinct values (byte
/// order), or `None` when more than half the values are distinct: then ranking costs more
/// than the row format's compare.
fn bytes_ranks(
    columns: &[&dyn Array],
    rows: usize,
    raw: &mut Vec<u64>,
    valid: &mut Vec<bool>,
) -> Option<()> {
    let limit = (rows / 2).max(64);
    let mut ids: HashMap<&[u8], u32, _> = HashMap::with_hasher(crate::partition::keyed_hasher());
    let mut distinct: Vec<&[u8]> = Vec::new();
    for a in columns {
        let value = bytes_of(*a);
        for i in 0..a.len() {
            let ok = a.is_valid(i);
            valid.push(ok);
            if !ok {
                raw.push(0);
                continue;
            }
            let v = value(i);
            let id = *ids.entry(v).or_insert_with(|| {
                distinct.push(v);
                distinct.len() as u32 - 1
            });
            if distinct.len() > limit {
                return None;
            }
            raw.push(u64::from(id));
        }
    }
    let mut by_value: Vec<u32> = (0..distinct.len() as u32).collect();
    by_value.sort_unstable_by_key(|&id| distinct[id as usize]);
    let mut rank = vec![0u64; distinct.len()];
    for (r, id) in by_value.into_iter().enumerate() {
        rank[id as usize] = r as u64;
    }
    for (v, &ok) in raw.iter_mut().zip(valid.iter()) {
        if ok {
            *v = rank[*v as usize];
        }
    }
    Some(())
}

/// A string or binary array's values as bytes.
fn bytes_of<'a>(a: &'a dyn Array) -> Box<dyn Fn(usize) -> &'a [u8] + 'a> {
    match a.data_type() {
        DataType::Utf8 => {
            let a = a.as_string::<i32>();
            Box::new(move |i| a.value(i).as_bytes())
        }
        DataType::LargeUtf8 => {
            let a = a.as_string::<i64>();
            Box::new(move |i| a.value(i).as_bytes())
        }
        DataType::Utf8View => {
            let a = a.as_string_view();
            Box::new(move |i| a.value(i).as_bytes())
        }
        DataType::Binary => {
            let a = a.as_binary::<i32>();
            Box::new(move |i| a.value(i))
        }
        DataType::LargeBinary => {
            let a = a.as_binary::<i64>();
            Box::new(move |i| a.value(i))
        }
        DataType::BinaryView => {
            let a = a.as_binary_view();
            Box::new(move |i| a.value(i))
        }
        other => unreachable!("not a string or binary type: {other}"),
    }
}

#[cfg(test)]
mod tests;
