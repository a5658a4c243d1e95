//! Table schemas: a small, documented type vocabulary stored in the log, its mapping to Arrow,
//! and schema evolution (new nullable columns, lossless widening).
//!
//! Widening rules (everything else is a conflict):
//! - signed ints widen to wider signed ints; unsigned to wider unsigned, or to a signed int
//!   twice as wide (`uint8 -> int16`, ...);
//! - `float32 -> float64`;
//! - `int8/16/32` and `uint8/16/32 -> float64`: every such value is exactly representable in a
//!   float64 (53-bit mantissa). `int64`/`uint64 -> float64` is rejected: values above 2^53
//!   would silently change;
//! - `null` (a column that was all nulls so far) widens to any type.

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A column type as stored in the log. Serialized as a string, e.g. `"int64"`,
/// `"timestamp"`, `"timestamp(UTC)"`, `"decimal(10,2)"`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ColumnType {
    Null,
    Boolean,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Float32,
    Float64,
    String,
    Binary,
    Date,
    /// Microsecond timestamp, with an optional time zone.
    Timestamp(Option<String>),
    Decimal(u8, i8),
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ColumnType::*;
        match self {
            Null => f.write_str("null"),
            Boolean => f.write_str("boolean"),
            Int8 => f.write_str("int8"),
            Int16 => f.write_str("int16"),
            Int32 => f.write_str("int32"),
            Int64 => f.write_str("int64"),
            UInt8 => f.write_str("uint8"),
            UInt16 => f.write_str("uint16"),
            UInt32 => f.write_str("uint32"),
            UInt64 => f.write_str("uint64"),
            Float32 => f.write_str("float32"),
            Float64 => f.write_str("float64"),
            String => f.write_str("string"),
            Binary => f.write_str("binary"),
            Date => f.write_str("date"),
            Timestamp(None) => f.write_str("timestamp"),
            Timestamp(Some(tz)) => write!(f, "timestamp({tz})"),
            Decimal(p, s) => write!(f, "decimal({p},{s})"),
        }
    }
}

impl std::str::FromStr for ColumnType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        use ColumnType::*;
        Ok(match s {
            "null" => Null,
            "boolean" => Boolean,
            "int8" => Int8,
            "int16" => Int16,
            "int32" => Int32,
            "int64" => Int64,
            "uint8" => UInt8,
            "uint16" => UInt16,
            "uint32" => UInt32,
            "uint64" => UInt64,
            "float32" => Float32,
            "float64" => Float64,
            "string" => String,
            "binary" => Binary,
            "date" => Date,
            "timestamp" => Timestamp(None),
            other => {
                if let Some(tz) = other
                    .strip_prefix("timestamp(")
                    .and_then(|r| r.strip_suffix(')'))
                {
                    Timestamp(Some(tz.to_string()))
                } else if let Some(ps) = other
                    .strip_prefix("decimal(")
                    .and_then(|r| r.strip_suffix(')'))
                {
                    let (p, s) = ps.split_once(',').ok_or("decimal needs (p,s)")?;
                    Decimal(
                        p.trim().parse().map_err(|_| "bad decimal precision")?,
                        s.trim().parse().map_err(|_| "bad decimal scale")?,
                    )
                } else {
                    return Err(format!("unknown column type '{other}'"));
                }
            }
        })
    }
}

impl Serialize for ColumnType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ColumnType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = std::string::String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl ColumnType {
    /// Map an Arrow type to the table vocabulary (normalizing encodings: all strings to
    /// `string`, all timestamps to microseconds, dictionaries to their values).
    pub fn from_arrow(column: &str, dt: &DataType) -> Result<Self> {
        use ColumnType as C;
        Ok(match dt {
            DataType::Null => C::Null,
            DataType::Boolean => C::Boolean,
            DataType::Int8 => C::Int8,
            DataType::Int16 => C::Int16,
            DataType::Int32 => C::Int32,
            DataType::Int64 => C::Int64,
            DataType::UInt8 => C::UInt8,
            DataType::UInt16 => C::UInt16,
            DataType::UInt32 => C::UInt32,
            DataType::UInt64 => C::UInt64,
            DataType::Float16 | DataType::Float32 => C::Float32,
            DataType::Float64 => C::Float64,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => C::String,
            DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::FixedSizeBinary(_) => C::Binary,
            DataType::Date32 | DataType::Date64 => C::Date,
            DataType::Timestamp(_, tz) => C::Timestamp(tz.as_ref().map(|t| t.to_string())),
            DataType::Decimal128(p, s) => C::Decimal(*p, *s),
            DataType::Dictionary(_, v) => Self::from_arrow(column, v)?,
            other => {
                return Err(Error::UnsupportedType {
                    column: column.to_string(),
                    data_type: other.to_string(),
                })
            }
        })
    }

    /// The Arrow type neve writes for this column.
    pub fn to_arrow(&self) -> DataType {
        use ColumnType as C;
        match self {
            C::Null => DataType::Null,
            C::Boolean => DataType::Boolean,
            C::Int8 => DataType::Int8,
            C::Int16 => DataType::Int16,
            C::Int32 => DataType::Int32,
            C::Int64 => DataType::Int64,
            C::UInt8 => DataType::UInt8,
            C::UInt16 => DataType::UInt16,
            C::UInt32 => DataType::UInt32,
            C::UInt64 => DataType::UInt64,
            C::Float32 => DataType::Float32,
            C::Float64 => DataType::Float64,
            C::String => DataType::Utf8,
            C::Binary => DataType::Binary,
            C::Date => DataType::Date32,
            C::Timestamp(tz) => {
                DataType::Timestamp(TimeUnit::Microsecond, tz.as_deref().map(Arc::from))
            }
            C::Decimal(p, s) => DataType::Decimal128(*p, *s),
        }
    }

    fn int_rank(&self) -> Option<(bool, u8)> {
        use ColumnType::*;
        Some(match self {
            Int8 => (true, 8),
            Int16 => (true, 16),
            Int32 => (true, 32),
            Int64 => (true, 64),
            UInt8 => (false, 8),
            UInt16 => (false, 16),
            UInt32 => (false, 32),
            UInt64 => (false, 64),
            _ => return None,
        })
    }

    /// True when every value of `self` is exactly representable in `wider`.
    pub fn widens_to(&self, wider: &ColumnType) -> bool {
        use ColumnType::*;
        if self == wider || *self == Null {
            return true;
        }
        match (self.int_rank(), wider.int_rank()) {
            (Some((s1, b1)), Some((s2, b2))) => {
                return match (s1, s2) {
                    (true, true) | (false, false) => b1 <= b2,
                    (false, true) => b1 < b2,
                    (true, false) => false,
                }
            }
            (Some((_, bits)), None) => return *wider == Float64 && bits <= 32,
            _ => {}
        }
        matches!((self, wider), (Float32, Float64))
    }

    /// The narrowest type both widen to, if any.
    pub fn unify(&self, other: &ColumnType) -> Option<ColumnType> {
        if other.widens_to(self) {
            return Some(self.clone());
        }
        if self.widens_to(other) {
            return Some(other.clone());
        }
        // Mixed signedness: uintN with intM widens to the signed type twice the unsigned width.
        use ColumnType::*;
        [Int16, Int32, Int64, Float64]
            .into_iter()
            .find(|c| self.widens_to(c) && other.widens_to(c))
    }
}

/// One column of a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Column {
    pub name: String,
    #[serde(rename = "type")]
    pub column_type: ColumnType,
}

/// A table schema. Every column is nullable: a later insert may omit any column.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableSchema {
    pub columns: Vec<Column>,
}

impl TableSchema {
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }

    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// The vocabulary view of an Arrow schema.
    pub fn from_arrow(schema: &Schema) -> Result<Self> {
        let mut columns = Vec::with_capacity(schema.fields().len());
        for f in schema.fields() {
            if columns.iter().any(|c: &Column| c.name == *f.name()) {
                return Err(Error::InvalidInput {
                    input: "schema".into(),
                    line: None,
                    column: Some(f.name().clone()),
                    message: "duplicate column name".into(),
                });
            }
            columns.push(Column {
                name: f.name().clone(),
                column_type: ColumnType::from_arrow(f.name(), f.data_type())?,
            });
        }
        Ok(Self { columns })
    }

    /// The Arrow schema data files are written with.
    pub fn to_arrow(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.columns
                .iter()
                .map(|c| Field::new(&c.name, c.column_type.to_arrow(), true))
                .collect::<Vec<_>>(),
        ))
    }

    /// Evolve `self` (the table) to accept `input`: new columns are appended (unless `strict`),
    /// types widen losslessly. Returns the new schema; an error names the first conflict.
    pub fn evolve(&self, input: &TableSchema, strict: bool) -> Result<TableSchema> {
        let mut out = self.clone();
        let mut new_columns = Vec::new();
        for col in &input.columns {
            match out.columns.iter_mut().find(|c| c.name == col.name) {
                Some(existing) => {
                    if existing.column_type == col.column_type {
                        continue;
                    }
                    match existing.column_type.unify(&col.column_type) {
                        Some(t) => existing.column_type = t,
                        None => {
                            return Err(Error::SchemaConflict {
                                column: col.name.clone(),
                                table_type: existing.column_type.to_string(),
                                input_type: col.column_type.to_string(),
                                hint: conflict_hint(&existing.column_type, &col.column_type),
                            })
                        }
                    }
                }
                None => new_columns.push(col.clone()),
            }
        }
        if strict && !self.is_empty() && !new_columns.is_empty() {
            return Err(Error::NewColumnRejected {
                columns: new_columns
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        out.columns.extend(new_columns);
        Ok(out)
    }
}

fn conflict_hint(table: &ColumnType, input: &ColumnType) -> Option<String> {
    use ColumnType::*;
    match (table, input) {
        (Int64 | UInt64, Float32 | Float64) | (Float32 | Float64, Int64 | UInt64) => {
            Some("int64 to float64 is not lossless above 2^53; cast the column explicitly".into())
        }
        _ if table.int_rank().is_some() && input.int_rank().is_some() => {
            Some("the table's type cannot hold every value of the input's type".into())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
