//! New CSV columns as arrow types them from the sample, retyped where its guess would change
//! the values on the way in.

use std::io::Cursor;
use std::sync::Arc;

use arrow::array::AsArray;
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};

use crate::error::Result;
use crate::schema::TableSchema;

/// What a new column's sampled values make of arrow's guess.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retype {
    /// Timestamps without a zone whose values all name their offset (`2024-01-01T00:00:00Z`,
    /// `…+02:00`): instants, so `timestamp(UTC)`. As wall time the `Z` would be dropped, and an
    /// offset other than 0 refused by a type neve chose itself.
    Zoned,
    /// Numbers written with a leading zero (`02139`, `007`): codes, not quantities, so text.
    /// As a number `02139` would be stored as 2139.
    Text,
}

/// `inferred` with the new columns (those `table` lacks) retyped as their sampled values ask.
pub(super) fn refine(
    inferred: Schema,
    head: &[u8],
    header: bool,
    delimiter: u8,
    table: &TableSchema,
) -> Result<Schema> {
    let candidates: Vec<(usize, Retype)> = inferred
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| table.column(f.name()).is_none())
        .filter_map(|(i, f)| match f.data_type() {
            DataType::Timestamp(_, None) => Some((i, Retype::Zoned)),
            DataType::Int64 | DataType::Float64 => Some((i, Retype::Text)),
            _ => None,
        })
        .collect();
    if candidates.is_empty() {
        return Ok(inferred);
    }
    let text = Schema::new(
        inferred
            .fields()
            .iter()
            .map(|f| Field::new(f.name(), DataType::Utf8, true))
            .collect::<Vec<_>>(),
    );
    let rdr = arrow::csv::ReaderBuilder::new(Arc::new(text))
        .with_header(header)
        .with_delimiter(delimiter)
        .build(Cursor::new(head))?;
    // Zoned: while every value names its offset; Text: once one value has a leading zero.
    let mut found: Vec<bool> = candidates
        .iter()
        .map(|(_, r)| *r == Retype::Zoned)
        .collect();
    for batch in rdr {
        // A line the sample could not split is reported when the input is read for real.
        let Ok(batch) = batch else { break };
        for (f, &(i, retype)) in found.iter_mut().zip(&candidates) {
            let mut values = batch
                .column(i)
                .as_string::<i32>()
                .iter()
                .flatten()
                .map(str::trim)
                .filter(|v| !v.is_empty());
            match retype {
                Retype::Zoned => *f &= values.all(super::super::text::has_offset),
                Retype::Text => *f |= values.any(leading_zero),
            }
        }
    }
    let mut fields: Vec<Field> = inferred
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    for (f, &(i, retype)) in found.iter().zip(&candidates) {
        if *f {
            let to = match retype {
                Retype::Zoned => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                Retype::Text => DataType::Utf8,
            };
            fields[i] = Field::new(fields[i].name(), to, true);
        }
    }
    Ok(Schema::new(fields))
}

/// `0` followed by another digit, after an optional sign: `02139`, `-007`, `00.5`; not `0`,
/// `0.5` or `-0.25`.
fn leading_zero(v: &str) -> bool {
    let digits = v.strip_prefix(['-', '+']).unwrap_or(v).as_bytes();
    digits.len() > 1 && digits[0] == b'0' && digits[1].is_ascii_digit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_zeros_are_told_apart() {
        for v in ["02139", "-007", "+01", "00.5"] {
            assert!(leading_zero(v), "{v}");
        }
        for v in ["0", "0.5", "-0.25", "10", "1e5", "-0"] {
            assert!(!leading_zero(v), "{v}");
        }
    }
}
