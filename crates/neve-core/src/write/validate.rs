//! Arrays from outside the process (the Arrow C interfaces) checked before anything is written.

use rayon::prelude::*;

use crate::error::{Error, Result};

/// Check arrays handed over through the Arrow C interfaces, which trust their producer: offsets
/// in bounds, strings valid UTF-8, dictionary keys in range, decimals within their precision.
/// A producer that breaks the interface (pyarrow's `Array.from_buffers` does not validate)
/// would otherwise have its bytes read out of bounds, commit strings no reader can decode, or
/// have a decimal cut to its precision's width by the Parquet writer. Batches are checked in
/// parallel.
pub fn validate_foreign(input: &str, batches: &[arrow::array::RecordBatch]) -> Result<()> {
    let before: Vec<usize> = batches
        .iter()
        .scan(0, |rows, b| {
            let first = *rows;
            *rows += b.num_rows();
            Some(first)
        })
        .collect();
    batches.par_iter().enumerate().try_for_each(|(b, batch)| {
        for (f, c) in batch.schema().fields().iter().zip(batch.columns()) {
            c.to_data()
                .validate_full()
                .map_err(|e| Error::InvalidInput {
                    input: input.to_string(),
                    line: None,
                    column: Some(f.name().clone()),
                    message: format!("batch {} holds an invalid array: {e}", b + 1),
                })?;
            if let Some((row, value, ty)) = decimal_over_precision(c.as_ref()) {
                return Err(Error::InvalidValue {
                    input: input.to_string(),
                    position: format!("row {}", before[b] + row + 1),
                    column: f.name().clone(),
                    value,
                    reason: format!("has more digits than its type, {ty}, holds"),
                });
            }
        }
        Ok(())
    })
}

/// The first value in `a`, or in an array nested in it, with more digits than its decimal
/// type's precision: `(row of a, the value, its type)`.
pub(super) fn decimal_over_precision(
    a: &dyn arrow::array::Array,
) -> Option<(usize, String, String)> {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{DataType, Decimal128Type, Decimal32Type, Decimal64Type, DecimalType};

    fn first<T: DecimalType>(a: &dyn Array, p: u8, s: i8) -> Option<(usize, String, String)> {
        let a = a.as_primitive::<T>();
        (0..a.len())
            .find(|&i| a.is_valid(i) && !T::is_valid_decimal_precision(a.value(i), p))
            .map(|i| {
                let v = T::format_decimal(a.value(i), T::MAX_PRECISION, s);
                (i, v, format!("decimal({p},{s})"))
            })
    }
    /// Whether a decimal is anywhere in `t`: the others are not walked, nor dictionaries
    /// unpacked, on every insert.
    fn holds_decimal(t: &DataType) -> bool {
        match t {
            DataType::Decimal32(..) | DataType::Decimal64(..) | DataType::Decimal128(..) => true,
            DataType::Struct(fields) => fields.iter().any(|f| holds_decimal(f.data_type())),
            DataType::List(f)
            | DataType::LargeList(f)
            | DataType::FixedSizeList(f, _)
            | DataType::Map(f, _) => holds_decimal(f.data_type()),
            DataType::Dictionary(_, value) => holds_decimal(value),
            _ => false,
        }
    }
    if !holds_decimal(a.data_type()) {
        return None;
    }
    /// The row holding element `j` of a list's values.
    fn owner(offsets: impl Iterator<Item = usize>, j: usize) -> usize {
        offsets.take_while(|&o| o <= j).count().saturating_sub(1)
    }
    match a.data_type() {
        DataType::Decimal32(p, s) => first::<Decimal32Type>(a, *p, *s),
        DataType::Decimal64(p, s) => first::<Decimal64Type>(a, *p, *s),
        DataType::Decimal128(p, s) => first::<Decimal128Type>(a, *p, *s),
        DataType::Struct(_) => a
            .as_struct()
            .columns()
            .iter()
            .filter_map(|c| decimal_over_precision(c.as_ref()))
            .min_by_key(|(row, ..)| *row),
        DataType::List(_) => {
            let l = a.as_list::<i32>();
            decimal_over_precision(l.values().as_ref()).map(|(j, v, t)| {
                (
                    owner(l.value_offsets().iter().map(|&o| o as usize), j),
                    v,
                    t,
                )
            })
        }
        DataType::LargeList(_) => {
            let l = a.as_list::<i64>();
            decimal_over_precision(l.values().as_ref()).map(|(j, v, t)| {
                (
                    owner(l.value_offsets().iter().map(|&o| o as usize), j),
                    v,
                    t,
                )
            })
        }
        DataType::FixedSizeList(_, n) => {
            let l = a.as_fixed_size_list();
            decimal_over_precision(l.values().as_ref())
                .map(|(j, v, t)| (j / (*n).max(1) as usize, v, t))
        }
        DataType::Map(..) => {
            let m = a.as_map();
            decimal_over_precision(m.entries()).map(|(j, v, t)| {
                (
                    owner(m.value_offsets().iter().map(|&o| o as usize), j),
                    v,
                    t,
                )
            })
        }
        DataType::Dictionary(_, value) => {
            let plain = arrow::compute::cast(a, value).ok()?;
            decimal_over_precision(plain.as_ref())
        }
        _ => None,
    }
}
