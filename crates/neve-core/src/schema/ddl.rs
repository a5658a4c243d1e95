//! The readable schema form used by `neve create --schema`, `neve alter` and `neve info`:
//!
//! ```text
//! id string not null, ts timestamp(UTC), user struct<id int64, plan string>,
//! tags list<string>, attrs map<string, string>, amount decimal(18,2)
//! ```
//!
//! Names are identifiers or quoted with `"` or `` ` ``. Type names are the log's
//! (`int64`, `float64`, ...) plus common SQL spellings (`bigint`, `double`, `varchar`, ...).

use super::{Column, ColumnType, TableSchema};
use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Quoted(String),
    Num(i64),
    Sym(char),
}

/// Zones as writers before the tokenizer kept them whole stored them: `-05:00` as `-5:00` and
/// `Etc/GMT+5` as `Etc/GMT+05`. Read back as they were meant, so those tables open again.
fn old_writer_zone(zone: String) -> String {
    let b = zone.as_bytes();
    if b.len() == 5 && b[0] == b'-' && b[1].is_ascii_digit() && b[2] == b':' {
        return format!("-0{}", &zone[1..]);
    }
    if let Some(n) = zone.strip_prefix("Etc/GMT") {
        if n.len() == 3 && n.as_bytes()[1] == b'0' && n.as_bytes()[2] != b'0' {
            return format!("Etc/GMT{}{}", &n[..1], &n[2..]);
        }
    }
    zone
}

fn tokenize(s: &str) -> std::result::Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let cs: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '"' || c == '`' {
            let mut j = i + 1;
            let mut name = String::new();
            loop {
                match cs.get(j) {
                    None => return Err(format!("unterminated quoted name starting at {c}")),
                    // A doubled quote is the quote itself.
                    Some(&q) if q == c && cs.get(j + 1) == Some(&c) => {
                        name.push(c);
                        j += 2;
                    }
                    Some(&q) if q == c => break,
                    Some(&q) => {
                        name.push(q);
                        j += 1;
                    }
                }
            }
            out.push(Tok::Quoted(name));
            i = j + 1;
        } else if c.is_ascii_digit()
            || (c == '-' && cs.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            let mut j = i + 1;
            while j < cs.len() && cs[j].is_ascii_digit() {
                j += 1;
            }
            let text: String = cs[i..j].iter().collect();
            out.push(Tok::Num(
                text.parse()
                    .map_err(|_| format!("number '{text}' is too large"))?,
            ));
            i = j;
        } else if c.is_alphanumeric() || c == '_' {
            let mut j = i + 1;
            while j < cs.len() && (cs[j].is_alphanumeric() || cs[j] == '_' || cs[j] == '$') {
                j += 1;
            }
            out.push(Tok::Word(cs[i..j].iter().collect()));
            i = j;
        } else if c == '('
            && matches!(out.last(), Some(Tok::Word(w)) if w.eq_ignore_ascii_case("timestamp"))
        {
            // A time zone is taken as written, up to the ')': `-05:00`, `Etc/GMT+5`,
            // `America/Port-au-Prince` would not survive being split into words and numbers.
            let Some(len) = cs[i + 1..].iter().position(|&x| x == ')') else {
                return Err("timestamp(: the time zone has no closing ')'".into());
            };
            out.push(Tok::Sym('('));
            out.push(Tok::Quoted(
                cs[i + 1..i + 1 + len]
                    .iter()
                    .collect::<String>()
                    .trim()
                    .to_string(),
            ));
            out.push(Tok::Sym(')'));
            i += len + 2;
        } else if "<>(),:/+".contains(c) {
            out.push(Tok::Sym(c));
            i += 1;
        } else {
            return Err(format!("unexpected character '{c}'"));
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Tok>,
    at: usize,
}

type PResult<T> = std::result::Result<T, String>;

impl Parser {
    fn new(s: &str) -> PResult<Self> {
        Ok(Self {
            toks: tokenize(s)?,
            at: 0,
        })
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn describe(t: Option<&Tok>) -> String {
        match t {
            None => "the end".into(),
            Some(Tok::Word(w)) => format!("'{w}'"),
            Some(Tok::Quoted(w)) => format!("\"{w}\""),
            Some(Tok::Num(n)) => format!("'{n}'"),
            Some(Tok::Sym(c)) => format!("'{c}'"),
        }
    }

    fn expect_sym(&mut self, c: char) -> PResult<()> {
        match self.next() {
            Some(Tok::Sym(x)) if x == c => Ok(()),
            t => Err(format!(
                "expected '{c}', found {}",
                Self::describe(t.as_ref())
            )),
        }
    }

    fn eat_sym(&mut self, c: char) -> bool {
        if self.peek() == Some(&Tok::Sym(c)) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn eat_word(&mut self, w: &str) -> bool {
        match self.peek() {
            Some(Tok::Word(x)) if x.eq_ignore_ascii_case(w) => {
                self.at += 1;
                true
            }
            _ => false,
        }
    }

    fn number(&mut self) -> PResult<i64> {
        match self.next() {
            Some(Tok::Num(n)) => Ok(n),
            t => Err(format!(
                "expected a number, found {}",
                Self::describe(t.as_ref())
            )),
        }
    }

    fn name(&mut self) -> PResult<String> {
        match self.next() {
            Some(Tok::Word(w)) | Some(Tok::Quoted(w)) => Ok(w),
            t => Err(format!(
                "expected a column name, found {}",
                Self::describe(t.as_ref())
            )),
        }
    }

    /// `not null` / `null` after a type; true when nullable.
    fn nullability(&mut self) -> PResult<bool> {
        if self.eat_word("not") {
            if !self.eat_word("null") {
                return Err(format!(
                    "expected 'null' after 'not', found {}",
                    Self::describe(self.peek())
                ));
            }
            return Ok(false);
        }
        self.eat_word("null");
        Ok(true)
    }

    fn column(&mut self) -> PResult<Column> {
        let name = self.name()?;
        self.eat_sym(':');
        let t = self.ty()?;
        let mut nullable = self.nullability()?;
        let mut epoch_unit = None;
        if self.eat_word("epoch") {
            if !matches!(t, ColumnType::Timestamp(_)) {
                return Err(format!(
                    "'{name}': only timestamp columns take an epoch unit"
                ));
            }
            let unit = match self.next() {
                Some(Tok::Word(w)) => w,
                t => {
                    return Err(format!(
                        "expected an epoch unit (s, ms, us, ns), found {}",
                        Self::describe(t.as_ref())
                    ))
                }
            };
            epoch_unit = Some(unit.parse()?);
            nullable = nullable && self.nullability()?;
        }
        let mut c = Column::new(name, t, nullable);
        c.epoch_unit = epoch_unit;
        Ok(c)
    }

    fn ty(&mut self) -> PResult<ColumnType> {
        use ColumnType as C;
        let word = match self.next() {
            Some(Tok::Word(w)) => w.to_ascii_lowercase(),
            t => {
                return Err(format!(
                    "expected a type, found {}",
                    Self::describe(t.as_ref())
                ))
            }
        };
        Ok(match word.as_str() {
            "null" => C::Null,
            "boolean" | "bool" => C::Boolean,
            "int8" | "tinyint" | "byte" => C::Int8,
            "int16" | "smallint" | "short" => C::Int16,
            "int32" | "int" | "integer" => C::Int32,
            "int64" | "bigint" | "long" => C::Int64,
            "uint8" => C::UInt8,
            "uint16" => C::UInt16,
            "uint32" => C::UInt32,
            "uint64" => C::UInt64,
            "float32" | "float" | "real" => C::Float32,
            "float64" | "double" => C::Float64,
            "string" | "varchar" | "text" | "utf8" => C::String,
            "binary" | "bytes" | "blob" => C::Binary,
            "uuid" => C::Fixed(16),
            "fixed" => {
                self.expect_sym('(')?;
                let n = self.number()?;
                self.expect_sym(')')?;
                if !(1..=i32::MAX as i64).contains(&n) {
                    return Err(format!("fixed({n}): the length must be at least 1"));
                }
                C::Fixed(n as i32)
            }
            "date" => C::Date,
            "time" => C::Time,
            "timestamptz" => C::Timestamp(Some("UTC".into())),
            "timestamp" => {
                if self.eat_sym('(') {
                    // The tokenizer gives the zone as written, as one token.
                    let zone = match self.next() {
                        Some(Tok::Quoted(z)) => z,
                        t => {
                            return Err(format!(
                                "expected a time zone, found {}",
                                Self::describe(t.as_ref())
                            ))
                        }
                    };
                    self.expect_sym(')')?;
                    if zone.is_empty() {
                        return Err("timestamp(): the time zone is empty".into());
                    }
                    let zone = old_writer_zone(zone);
                    zone.parse::<arrow::array::timezone::Tz>()
                        .map_err(|e| format!("timestamp({zone}): {e}"))?;
                    C::Timestamp(Some(zone))
                } else {
                    C::Timestamp(None)
                }
            }
            "decimal" | "numeric" => {
                self.expect_sym('(')?;
                let p = self.number()?;
                let s = if self.eat_sym(',') { self.number()? } else { 0 };
                self.expect_sym(')')?;
                if !(1..=38).contains(&p) {
                    return Err(format!("decimal({p},{s}): precision must be 1 to 38"));
                }
                if !(0..=p).contains(&s) {
                    return Err(format!(
                        "decimal({p},{s}): scale must be 0 to the precision"
                    ));
                }
                C::Decimal(p as u8, s as i8)
            }
            "struct" | "row" => {
                self.expect_sym('<')?;
                let mut fields: Vec<Column> = Vec::new();
                loop {
                    let c = self.column()?;
                    if fields.iter().any(|f| f.name == c.name) {
                        return Err(format!("duplicate field '{}' in struct", c.name));
                    }
                    fields.push(c);
                    if self.eat_sym('>') {
                        break;
                    }
                    self.expect_sym(',')?;
                }
                C::Struct(fields)
            }
            "list" | "array" => {
                self.expect_sym('<')?;
                let e = self.ty()?;
                let nullable = self.nullability()?;
                self.expect_sym('>')?;
                C::List(Box::new(Column::new("element", e, nullable)))
            }
            "map" => {
                self.expect_sym('<')?;
                let k = self.ty()?;
                if k.is_nested() {
                    return Err("map keys must be a primitive type".into());
                }
                self.expect_sym(',')?;
                let v = self.ty()?;
                let nullable = self.nullability()?;
                self.expect_sym('>')?;
                C::Map(
                    Box::new(Column::new("key", k, false)),
                    Box::new(Column::new("value", v, nullable)),
                )
            }
            other => return Err(format!("unknown type '{other}'")),
        })
    }

    fn done(&self) -> PResult<()> {
        match self.peek() {
            None => Ok(()),
            t => Err(format!("unexpected {} after the end", Self::describe(t))),
        }
    }
}

/// Parse one type, e.g. `list<struct<a int64>>`.
pub fn parse_type(s: &str) -> std::result::Result<ColumnType, String> {
    let mut p = Parser::new(s)?;
    let t = p.ty()?;
    p.done()?;
    Ok(t)
}

fn schema_error(spec: &str, reason: String) -> Error {
    Error::InvalidSchema {
        spec: spec.to_string(),
        reason,
    }
}

/// Parse one column definition, e.g. `country string not null`.
pub fn parse_column(s: &str) -> Result<Column> {
    let mut p = Parser::new(s).map_err(|r| schema_error(s, r))?;
    let c = p.column().map_err(|r| schema_error(s, r))?;
    p.done().map_err(|r| schema_error(s, r))?;
    Ok(c)
}

/// Parse a comma-separated list of columns into a schema with ids.
pub fn parse_schema(s: &str) -> Result<TableSchema> {
    let mut p = Parser::new(s).map_err(|r| schema_error(s, r))?;
    let mut columns: Vec<Column> = Vec::new();
    loop {
        let c = p.column().map_err(|r| schema_error(s, r))?;
        if columns.iter().any(|x| x.name == c.name) {
            return Err(schema_error(s, format!("duplicate column '{}'", c.name)));
        }
        columns.push(c);
        if p.peek().is_none() {
            break;
        }
        p.expect_sym(',').map_err(|r| schema_error(s, r))?;
    }
    let schema = TableSchema::new(columns);
    schema
        .check_new_names(&TableSchema::default())
        .map_err(|(_, r)| schema_error(s, r))?;
    Ok(schema)
}

fn is_identifier(s: &str) -> bool {
    let mut cs = s.chars();
    matches!(cs.next(), Some(c) if c.is_alphabetic() || c == '_')
        && cs.all(|c| c.is_alphanumeric() || c == '_' || c == '$')
        && !matches!(s.to_ascii_lowercase().as_str(), "not" | "null")
}

/// A name as the DDL spells it: bare when it is an identifier, else quoted.
pub fn format_name(s: &str) -> String {
    if is_identifier(s) {
        s.to_string()
    } else {
        format!("\"{}\"", s.replace('"', "\"\""))
    }
}

/// `name type [not null] [epoch s|ms|us|ns]`.
pub fn format_column(c: &Column) -> String {
    let mut s = format!("{} {}", format_name(&c.name), c.column_type);
    if !c.nullable {
        s.push_str(" not null");
    }
    if let Some(u) = c.epoch_unit {
        s.push_str(" epoch ");
        s.push_str(u.as_str());
    }
    s
}

/// A list element or map value: `type [not null]`.
pub(crate) fn format_element(c: &Column) -> String {
    if c.nullable {
        c.column_type.to_string()
    } else {
        format!("{} not null", c.column_type)
    }
}

impl std::fmt::Display for TableSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cols: Vec<String> = self.columns.iter().map(format_column).collect();
        f.write_str(&cols.join(", "))
    }
}
