//! Table schemas: a small, documented type vocabulary stored in the log (primitives, and
//! structs, lists and maps at any depth), its mapping to Arrow, and schema evolution.
//!
//! Every column and nested field has a stable id. Ids are written as the Parquet field id of
//! each data file's columns, so that a rename or a drop never makes a reader take an old
//! file's column for another one (readers match file columns by id, see `query::ids`).
//!
//! Widening rules (everything else is a conflict), applied at any depth:
//! - signed ints widen to wider signed ints; unsigned to wider unsigned, or to a signed int
//!   twice as wide (`uint8 -> int16`, ...);
//! - `float32 -> float64`;
//! - `int8/16/32` and `uint8/16/32 -> float64`: every such value is exactly representable in a
//!   float64 (53-bit mantissa). `int64`/`uint64 -> float64` is rejected: values above 2^53
//!   would silently change;
//! - `decimal(p,s) -> decimal(p2,s2)` when `s2 >= s` and `p2 - s2 >= p - s`;
//! - `fixed(n) -> binary`;
//! - `null` (a column that was all nulls so far) widens to any type.

mod ddl;
mod evolve;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, FieldRef, Fields, Schema, SchemaRef, TimeUnit};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

pub use ddl::{format_column, format_name, parse_column, parse_schema, parse_type};
pub use evolve::{AlterOp, MAX_FIELDS, MAX_NESTING};

/// The rest of a name in `quote`s, its opening quote already read; a doubled quote inside is
/// the quote itself. None when the text ends before the closing quote.
pub(crate) fn read_quoted(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    quote: char,
) -> Option<String> {
    let mut name = String::new();
    loop {
        match chars.next()? {
            c if c == quote && chars.peek() == Some(&quote) => {
                chars.next();
                name.push(quote);
            }
            c if c == quote => return Some(name),
            c => name.push(c),
        }
    }
}

/// The Arrow field metadata key Parquet field ids travel in (arrow-rs reads and writes it).
pub const FIELD_ID_KEY: &str = "PARQUET:field_id";

/// A column type as stored in the log. Primitives are serialized as a string, e.g. `"int64"`,
/// `"timestamp(UTC)"`, `"decimal(10,2)"`; nested types as an object (`{"type": "struct",
/// "fields": [...]}`, `{"type": "list", ...}`, `{"type": "map", ...}`).
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
    /// Bytes of a fixed length (a UUID is `fixed(16)`).
    Fixed(i32),
    Date,
    /// Time of day, microseconds.
    Time,
    /// Microsecond timestamp, with an optional time zone.
    Timestamp(Option<String>),
    Decimal(u8, i8),
    Struct(Vec<Column>),
    /// A list; the element is a field named `element`.
    List(Box<Column>),
    /// A map; key (named `key`, never null) and value (named `value`).
    Map(Box<Column>, Box<Column>),
}

impl fmt::Display for ColumnType {
    /// Primitives by their log name; nested types in the DDL form
    /// (`struct<id int64, plan string>`, `list<string>`, `map<string, int64>`).
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
            Fixed(n) => write!(f, "fixed({n})"),
            Date => f.write_str("date"),
            Time => f.write_str("time"),
            Timestamp(None) => f.write_str("timestamp"),
            Timestamp(Some(tz)) => write!(f, "timestamp({tz})"),
            Decimal(p, s) => write!(f, "decimal({p},{s})"),
            Struct(fields) => {
                f.write_str("struct<")?;
                for (i, c) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    f.write_str(&format_column(c))?;
                }
                f.write_str(">")
            }
            List(e) => write!(f, "list<{}>", ddl::format_element(e)),
            Map(k, v) => write!(f, "map<{}, {}>", k.column_type, ddl::format_element(v)),
        }
    }
}

impl std::str::FromStr for ColumnType {
    type Err = String;
    /// A primitive's log name, or any type in the DDL form.
    fn from_str(s: &str) -> Result<Self, String> {
        parse_type(s)
    }
}

/// Nested types as the log spells them.
#[derive(Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
enum NestedRepr {
    Struct {
        fields: Vec<Column>,
    },
    List {
        #[serde(default)]
        element_id: u32,
        element: ColumnType,
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        element_nullable: bool,
    },
    Map {
        #[serde(default)]
        key_id: u32,
        key: ColumnType,
        #[serde(default)]
        value_id: u32,
        value: ColumnType,
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        value_nullable: bool,
    },
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum TypeRepr {
    Name(std::string::String),
    Nested(Box<NestedRepr>),
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Serialize for ColumnType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let nested = match self {
            ColumnType::Struct(fields) => NestedRepr::Struct {
                fields: fields.clone(),
            },
            ColumnType::List(e) => NestedRepr::List {
                element_id: e.id,
                element: e.column_type.clone(),
                element_nullable: e.nullable,
            },
            ColumnType::Map(k, v) => NestedRepr::Map {
                key_id: k.id,
                key: k.column_type.clone(),
                value_id: v.id,
                value: v.column_type.clone(),
                value_nullable: v.nullable,
            },
            primitive => return s.collect_str(primitive),
        };
        nested.serialize(s)
    }
}

impl<'de> Deserialize<'de> for ColumnType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match TypeRepr::deserialize(d)? {
            TypeRepr::Name(s) => {
                let t: ColumnType = s.parse().map_err(serde::de::Error::custom)?;
                if t.is_nested() {
                    return Err(serde::de::Error::custom(format!(
                        "nested type '{s}' must be written as an object"
                    )));
                }
                t
            }
            TypeRepr::Nested(n) => match *n {
                NestedRepr::Struct { fields } => ColumnType::Struct(fields),
                NestedRepr::List {
                    element_id,
                    element,
                    element_nullable,
                } => ColumnType::List(Box::new(
                    Column::new("element", element, element_nullable).with_id(element_id),
                )),
                NestedRepr::Map {
                    key_id,
                    key,
                    value_id,
                    value,
                    value_nullable,
                } => ColumnType::Map(
                    Box::new(Column::new("key", key, false).with_id(key_id)),
                    Box::new(Column::new("value", value, value_nullable).with_id(value_id)),
                ),
            },
        })
    }
}

impl ColumnType {
    pub fn is_nested(&self) -> bool {
        matches!(
            self,
            ColumnType::Struct(_) | ColumnType::List(_) | ColumnType::Map(..)
        )
    }

    /// Map an Arrow type to the table vocabulary, normalizing encodings: all strings to
    /// `string`, all timestamps and times to microseconds, all lists to `list`, dictionaries
    /// to their values. Nested fields get no ids here (see [`TableSchema::evolve`]).
    pub fn from_arrow(column: &str, dt: &DataType) -> Result<Self> {
        use ColumnType as C;
        let unsupported = || Error::UnsupportedType {
            column: column.to_string(),
            data_type: dt.to_string(),
        };
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
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView => C::Binary,
            // Parquet has no zero-byte fixed type (its writer panics on one).
            DataType::FixedSizeBinary(n) if *n > 0 => C::Fixed(*n),
            DataType::Date32 | DataType::Date64 => C::Date,
            DataType::Time32(_) | DataType::Time64(_) => C::Time,
            DataType::Timestamp(_, tz) => {
                // A zone Arrow cannot read (`utc`, `+25:00`) would be kept in the log, and no
                // reader could open the table.
                if let Some(z) = tz {
                    if z.parse::<arrow::array::timezone::Tz>().is_err() {
                        return Err(Error::UnsupportedType {
                            column: column.to_string(),
                            data_type: format!("timestamp with the time zone '{z}', which is not a known zone (write an IANA name such as 'Europe/Paris' or 'UTC', or an offset such as '-05:00')"),
                        });
                    }
                }
                C::Timestamp(tz.as_ref().map(|t| t.to_string()))
            }
            DataType::Decimal32(p, s) | DataType::Decimal64(p, s) | DataType::Decimal128(p, s) => {
                // As the DDL takes them: Parquet has no negative scale (its writer refuses one
                // only when the file is written).
                if *s < 0 || *s as u8 > *p {
                    return Err(Error::UnsupportedType {
                        column: column.to_string(),
                        data_type: format!("{dt} (a decimal's scale must be 0 to its precision; cast a negative scale to scale 0)"),
                    });
                }
                C::Decimal(*p, *s)
            }
            DataType::Dictionary(_, v) => Self::from_arrow(column, v)?,
            DataType::Struct(fields) => {
                let mut out: Vec<Column> = Vec::with_capacity(fields.len());
                for f in fields {
                    let path = format!("{column}.{}", f.name());
                    if out.iter().any(|c| c.name == *f.name()) {
                        return Err(Error::InvalidInput {
                            input: "schema".into(),
                            line: None,
                            column: Some(path),
                            message: "duplicate field name".into(),
                        });
                    }
                    out.push(Column::new(
                        f.name(),
                        Self::from_arrow(&path, f.data_type())?,
                        true,
                    ));
                }
                if out.is_empty() {
                    return Err(unsupported());
                }
                C::Struct(out)
            }
            DataType::List(e)
            | DataType::LargeList(e)
            | DataType::ListView(e)
            | DataType::LargeListView(e)
            | DataType::FixedSizeList(e, _) => C::List(Box::new(Column::new(
                "element",
                Self::from_arrow(&format!("{column}[]"), e.data_type())?,
                true,
            ))),
            DataType::Map(entries, _) => {
                let DataType::Struct(kv) = entries.data_type() else {
                    return Err(unsupported());
                };
                if kv.len() != 2 {
                    return Err(unsupported());
                }
                let key = Self::from_arrow(&format!("{column}.key"), kv[0].data_type())?;
                if key.is_nested() {
                    return Err(Error::UnsupportedType {
                        column: format!("{column}.key"),
                        data_type: format!("{} (map keys must be primitive)", kv[0].data_type()),
                    });
                }
                C::Map(
                    Box::new(Column::new("key", key, false)),
                    Box::new(Column::new(
                        "value",
                        Self::from_arrow(&format!("{column}.value"), kv[1].data_type())?,
                        true,
                    )),
                )
            }
            _ => return Err(unsupported()),
        })
    }

    /// The Arrow type neve writes for this column (nested fields carry their ids).
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
            C::Fixed(n) => DataType::FixedSizeBinary(*n),
            C::Date => DataType::Date32,
            C::Time => DataType::Time64(TimeUnit::Microsecond),
            C::Timestamp(tz) => {
                DataType::Timestamp(TimeUnit::Microsecond, tz.as_deref().map(Arc::from))
            }
            C::Decimal(p, s) => DataType::Decimal128(*p, *s),
            C::Struct(fields) => {
                DataType::Struct(fields.iter().map(Column::to_arrow).collect::<Fields>())
            }
            C::List(e) => DataType::List(Arc::new(e.to_arrow())),
            C::Map(k, v) => DataType::Map(
                Arc::new(Field::new(
                    "key_value",
                    DataType::Struct(Fields::from(vec![k.to_arrow(), v.to_arrow()])),
                    false,
                )),
                false,
            ),
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

    pub(crate) fn is_integer(&self) -> bool {
        self.int_rank().is_some()
    }

    /// True when every value of the primitive `self` is exactly representable in `wider`.
    /// Nested types are compared field by field by [`TableSchema::evolve`].
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
        match (self, wider) {
            (Float32, Float64) | (Fixed(_), Binary) => true,
            // Zoned timestamps are UTC instants whatever their zone, which only says how to
            // show them: one zone's values are another's unchanged. A naive timestamp has no
            // instant, so it neither becomes nor comes from a zoned one.
            (Timestamp(Some(_)), Timestamp(Some(_))) => true,
            (Decimal(p1, s1), Decimal(p2, s2)) => {
                s2 >= s1 && (*p2 as i32 - *s2 as i32) >= (*p1 as i32 - *s1 as i32)
            }
            _ => false,
        }
    }

    /// Levels of nesting: 0 for a primitive, 1 for a struct of primitives, and so on.
    pub fn depth(&self) -> usize {
        match self {
            ColumnType::Struct(fields) => {
                1 + fields
                    .iter()
                    .map(|c| c.column_type.depth())
                    .max()
                    .unwrap_or(0)
            }
            ColumnType::List(e) => 1 + e.column_type.depth(),
            ColumnType::Map(k, v) => 1 + k.column_type.depth().max(v.column_type.depth()),
            _ => 0,
        }
    }

    /// The narrowest primitive type both widen to, if any.
    pub fn unify(&self, other: &ColumnType) -> Option<ColumnType> {
        if other.widens_to(self) {
            return Some(self.clone());
        }
        if self.widens_to(other) {
            return Some(other.clone());
        }
        use ColumnType::*;
        if let (Decimal(p1, s1), Decimal(p2, s2)) = (self, other) {
            let s = (*s1).max(*s2);
            let int = (*p1 as i32 - *s1 as i32).max(*p2 as i32 - *s2 as i32);
            let p = int + s as i32;
            return (p <= 38).then_some(Decimal(p as u8, s));
        }
        // Mixed signedness: uintN with intM widens to the signed type twice the unsigned width.
        [Int16, Int32, Int64, Float64]
            .into_iter()
            .find(|c| self.widens_to(c) && other.widens_to(c))
    }

    /// Every field below this type (depth first), with its path from `prefix`.
    fn visit<'a>(&'a self, prefix: &str, out: &mut Vec<(String, &'a Column)>) {
        match self {
            ColumnType::Struct(fields) => {
                for c in fields {
                    c.visit(&format!("{prefix}.{}", c.name), out)
                }
            }
            ColumnType::List(e) => e.visit(&format!("{prefix}[]"), out),
            ColumnType::Map(k, v) => {
                k.visit(&format!("{prefix}.key"), out);
                v.visit(&format!("{prefix}.value"), out);
            }
            _ => {}
        }
    }
}

/// One column of a table, or one field of a nested type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Column {
    /// Stable id, the Parquet field id of this column in data files. 0 until assigned.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub id: u32,
    pub name: String,
    #[serde(rename = "type")]
    pub column_type: ColumnType,
    /// False when the column is declared `not null`: inserts must bring a value in every row.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub nullable: bool,
    /// Names the column had before renames, so files written without field ids (by neve
    /// before ids existed) still find it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    /// For a timestamp column: the unit of numbers given for it in text inputs (JSON, CSV),
    /// `epoch s` in the DDL. Without one (and without `--epoch-unit`) numbers are refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch_unit: Option<crate::write::text::EpochUnit>,
}

impl Column {
    pub fn new(name: impl Into<String>, column_type: ColumnType, nullable: bool) -> Self {
        Self {
            id: 0,
            name: name.into(),
            column_type,
            nullable,
            aliases: Vec::new(),
            epoch_unit: None,
        }
    }

    pub fn with_id(mut self, id: u32) -> Self {
        self.id = id;
        self
    }

    /// The Arrow field, with its id in the field metadata.
    pub fn to_arrow(&self) -> Field {
        let f = Field::new(&self.name, self.column_type.to_arrow(), self.nullable);
        if self.id == 0 {
            return f;
        }
        f.with_metadata(HashMap::from([(
            FIELD_ID_KEY.to_string(),
            self.id.to_string(),
        )]))
    }

    fn visit<'a>(&'a self, path: &str, out: &mut Vec<(String, &'a Column)>) {
        out.push((path.to_string(), self));
        self.column_type.visit(path, out);
    }

    /// Give every field below (and this one) without an id the next one.
    fn assign_ids(&mut self, last: &mut u32) {
        if self.id == 0 {
            *last += 1;
            self.id = *last;
        }
        match &mut self.column_type {
            ColumnType::Struct(fields) => fields.iter_mut().for_each(|c| c.assign_ids(last)),
            ColumnType::List(e) => e.assign_ids(last),
            ColumnType::Map(k, v) => {
                k.assign_ids(last);
                v.assign_ids(last);
            }
            _ => {}
        }
    }

    fn max_id(&self) -> u32 {
        let mut all = Vec::new();
        self.visit("", &mut all);
        all.iter().map(|(_, c)| c.id).max().unwrap_or(0)
    }
}

/// A table schema.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "RawSchema", rename_all = "camelCase")]
pub struct TableSchema {
    pub columns: Vec<Column>,
    /// The highest id ever given to a column or field (ids of dropped columns are not reused).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub last_column_id: u32,
    /// Columns with ids up to this one may be in files written before ids existed (found by
    /// name there). 0 for tables created with ids.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub name_mapped_ids: u32,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawSchema {
    columns: Vec<Column>,
    #[serde(default)]
    last_column_id: u32,
    #[serde(default)]
    name_mapped_ids: u32,
}

/// Arrow extension types whose storage values are the values themselves (a JSON text, a
/// UUID's 16 bytes, a geometry's WKB or WKT): stored as their storage type, nothing changes.
const EXTENSIONS_KEPT: [&str; 4] = ["arrow.json", "arrow.uuid", "geoarrow.wkb", "geoarrow.wkt"];

/// Refuse a field (or a field inside it) of an Arrow extension type whose meaning its storage
/// would lose: a pandas `Period` is an `int64` of ordinals, an `Interval` a struct without its
/// closed side, `arrow.bool8` an `int8`. Stored as the storage type, their values would change.
fn refuse_extension(path: &str, f: &Field) -> Result<()> {
    if let Some(name) = f.metadata().get("ARROW:extension:name") {
        if !EXTENSIONS_KEPT.contains(&name.as_str()) {
            return Err(Error::UnsupportedType {
                column: path.to_string(),
                data_type: format!(
                    "{name} (an Arrow extension type stored as {}: neve would keep the storage \
                     values and lose what they mean; convert the column to a plain type first)",
                    f.data_type()
                ),
            });
        }
    }
    match f.data_type() {
        DataType::Struct(fields) => fields
            .iter()
            .try_for_each(|c| refuse_extension(&format!("{path}.{}", c.name()), c)),
        DataType::List(e)
        | DataType::LargeList(e)
        | DataType::ListView(e)
        | DataType::LargeListView(e)
        | DataType::FixedSizeList(e, _) => refuse_extension(&format!("{path}[]"), e),
        DataType::Map(entries, _) => refuse_extension(path, entries),
        _ => Ok(()),
    }
}

impl From<RawSchema> for TableSchema {
    /// Schemas written before ids existed get them by position, the same for every reader.
    fn from(raw: RawSchema) -> Self {
        let legacy = !raw.columns.is_empty() && raw.columns.iter().all(|c| c.id == 0);
        let mut s = TableSchema {
            columns: raw.columns,
            last_column_id: raw.last_column_id,
            name_mapped_ids: raw.name_mapped_ids,
        };
        s.assign_ids();
        if legacy {
            s.name_mapped_ids = s.last_column_id;
        }
        s
    }
}

impl TableSchema {
    /// A schema of `columns`, with ids given to every field that has none.
    pub fn new(columns: Vec<Column>) -> Self {
        let mut s = Self {
            columns,
            ..Default::default()
        };
        s.assign_ids();
        s
    }

    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }

    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// The column each top-level name, current or former, stands for. Files written before
    /// ids (which may hold the columns with ids up to `name_mapped_ids`) name columns as they
    /// were then, so a name several columns have had (`a` renamed to `c`, then `b` to `a`) is
    /// the column's whose first name it is (its first alias, or its name if it never changed);
    /// any other, the lowest id's.
    pub(crate) fn name_owners(&self) -> std::collections::HashMap<&str, u32> {
        let mut owner: std::collections::HashMap<&str, (bool, u32)> = Default::default();
        for c in &self.columns {
            let first = c.aliases.first().unwrap_or(&c.name);
            for n in std::iter::once(&c.name).chain(&c.aliases) {
                let claim = (!(c.id <= self.name_mapped_ids && n == first), c.id);
                let e = owner.entry(n.as_str()).or_insert(claim);
                *e = (*e).min(claim);
            }
        }
        owner.into_iter().map(|(n, (_, id))| (n, id)).collect()
    }

    /// Every column and nested field, depth first, with its path (`user.plan`, `tags[]`,
    /// `attrs.key`).
    pub fn fields(&self) -> Vec<(String, &Column)> {
        let mut out = Vec::new();
        for c in &self.columns {
            c.visit(&c.name, &mut out);
        }
        out
    }

    /// Give every column and field without an id the next free one.
    pub(crate) fn assign_ids(&mut self) {
        let mut last = self
            .last_column_id
            .max(self.columns.iter().map(Column::max_id).max().unwrap_or(0));
        for c in &mut self.columns {
            c.assign_ids(&mut last);
        }
        self.last_column_id = last;
    }

    /// The vocabulary view of an Arrow schema (an input's): every column nullable, no ids.
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
            refuse_extension(f.name(), f)?;
            columns.push(Column::new(
                f.name(),
                ColumnType::from_arrow(f.name(), f.data_type())?,
                true,
            ));
        }
        Ok(Self {
            columns,
            ..Default::default()
        })
    }

    /// The Arrow schema data files are written with (field ids in the field metadata).
    pub fn to_arrow(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.columns
                .iter()
                .map(Column::to_arrow)
                .collect::<Vec<_>>(),
        ))
    }

    /// Top-level columns of `self` that `newer` renamed (old name to `Some(new)`) or dropped
    /// (to `None`), matched by id: the statistics of files written under `self` are keyed by
    /// the old names.
    pub fn renames_and_drops(&self, newer: &TableSchema) -> HashMap<String, Option<String>> {
        // Every path whose column or struct field moved: statistics are keyed by full path
        // (`user.plan`), and renaming `user` moves every path under it.
        let now: HashMap<u32, String> = newer
            .fields()
            .into_iter()
            .filter(|(_, c)| c.id != 0)
            .map(|(p, c)| (c.id, p))
            .collect();
        let mut out = HashMap::new();
        for (path, c) in self.fields() {
            match now.get(&c.id) {
                Some(p) if *p == path => {}
                Some(p) => {
                    out.insert(path, Some(p.clone()));
                }
                None => {
                    out.insert(path, None);
                }
            }
        }
        out
    }

    /// Whether the schema needs format version 2 to be read right (nested or new types,
    /// `not null`, renamed or dropped columns).
    pub fn needs_v2(&self) -> bool {
        self.fields().iter().any(|(path, c)| {
            path.contains(['.', '['])
                || !c.nullable
                || !c.aliases.is_empty()
                || c.epoch_unit.is_some()
                || matches!(
                    c.column_type,
                    ColumnType::Time
                        | ColumnType::Fixed(_)
                        | ColumnType::Struct(_)
                        | ColumnType::List(_)
                        | ColumnType::Map(..)
                )
        }) || self.last_column_id > self.fields().len() as u32
    }
}

/// The id of an Arrow field, from its metadata.
pub fn field_id(f: &FieldRef) -> Option<u32> {
    f.metadata().get(FIELD_ID_KEY).and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod tests;
