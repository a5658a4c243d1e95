//! Merge semantics declared in the table: what several stored rows of one key mean.
//!
//! `replace` keeps the row with the highest version per key (ties: the later commit), and an
//! optional deleted flag removes the key; `aggregate` folds a key's rows into one (sum, min,
//! max, a row count, and the first or last value of other columns); `dedupe` keeps the first
//! row per key. Rows are merged within a partition. The key is a prefix of the sort key, so
//! every merge and every exact read is a streaming merge of sorted runs.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::schema::{ColumnType, TableSchema};

/// A table's merge semantics, as the log stores it (`"merge"` in the metadata).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MergeSpec {
    /// The row with the highest `version` per key wins (the later commit on a tie, the later
    /// commit outright without a version column); a winner whose `deleted` is true removes the
    /// key.
    Replace {
        key: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        version: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deleted: Option<String>,
    },
    /// One row per key: `sum`, `min`, `max` of the named columns, `count` the number of rows
    /// folded (a stored null counts as one row), `any` the first row's value, and every other
    /// column the last row's value.
    Aggregate {
        key: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        sum: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        min: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        max: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        any: Vec<String>,
    },
    /// The first row per key (the earliest commit) is kept; later ones are dropped.
    Dedupe { key: Vec<String> },
}

/// What the merge does with one column of an `aggregate` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fold {
    Key,
    Sum,
    Min,
    Max,
    Count,
    Any,
    Last,
}

impl MergeSpec {
    pub fn key(&self) -> &[String] {
        match self {
            Self::Replace { key, .. } | Self::Aggregate { key, .. } | Self::Dedupe { key } => key,
        }
    }

    /// The deleted flag of a `replace` table.
    pub fn deleted(&self) -> Option<&str> {
        match self {
            Self::Replace { deleted, .. } => deleted.as_deref(),
            _ => None,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Self::Replace { .. } => "replace",
            Self::Aggregate { .. } => "aggregate",
            Self::Dedupe { .. } => "dedupe",
        }
    }

    /// Every column the spec names.
    pub fn columns(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self.key().iter().map(String::as_str).collect();
        match self {
            Self::Replace {
                version, deleted, ..
            } => out.extend(version.iter().chain(deleted).map(String::as_str)),
            Self::Aggregate {
                sum,
                min,
                max,
                count,
                any,
                ..
            } => out.extend(
                sum.iter()
                    .chain(min)
                    .chain(max)
                    .chain(any)
                    .chain(count)
                    .map(String::as_str),
            ),
            Self::Dedupe { .. } => {}
        }
        out
    }

    /// What an `aggregate` table does with `column`.
    pub(crate) fn fold(&self, column: &str) -> Fold {
        let has = |v: &[String]| v.iter().any(|c| c == column);
        if has(self.key()) {
            return Fold::Key;
        }
        match self {
            Self::Aggregate {
                sum,
                min,
                max,
                count,
                any,
                ..
            } => {
                if has(sum) {
                    Fold::Sum
                } else if has(min) {
                    Fold::Min
                } else if has(max) {
                    Fold::Max
                } else if count.as_deref() == Some(column) {
                    Fold::Count
                } else if has(any) {
                    Fold::Any
                } else {
                    Fold::Last
                }
            }
            _ => Fold::Last,
        }
    }

    /// Check the spec against the table's layout; `schema` may be empty (the first insert
    /// sets it, and is checked then).
    pub fn validate(&self, schema: &TableSchema, sort_by: &[String]) -> Result<()> {
        let bad = |reason: String| Error::InvalidMergeSpec {
            spec: self.to_string(),
            reason,
        };
        let key = self.key();
        if key.is_empty() {
            return Err(bad("the key names no column".into()));
        }
        let mut seen = BTreeSet::new();
        for c in self.columns() {
            if !seen.insert(c) {
                return Err(bad(format!(
                    "column '{c}' is named twice; each column has one role"
                )));
            }
        }
        if sort_by.len() < key.len() || sort_by[..key.len()] != *key {
            return Err(bad(format!(
                "the key [{}] must be a prefix of the sort key [{}], so rows of one key are adjacent in every file (e.g. --sort-by {})",
                key.join(", "),
                sort_by.join(", "),
                key.join(",")
            )));
        }
        if schema.is_empty() {
            return Ok(());
        }
        let column = |name: &str, role: &str| {
            schema.column(name).map(|c| &c.column_type).ok_or_else(|| {
                bad(format!(
                    "{role} column '{name}' is not a column of the table ({})",
                    schema
                        .columns
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
        };
        let primitive = |name: &str, role: &str| -> Result<()> {
            let t = column(name, role)?;
            if t.is_nested() {
                return Err(bad(format!(
                    "{role} column '{name}' is {t}; it must be a primitive column"
                )));
            }
            Ok(())
        };
        for k in key {
            primitive(k, "key")?;
        }
        match self {
            Self::Replace {
                version, deleted, ..
            } => {
                if let Some(v) = version {
                    primitive(v, "version")?;
                }
                if let Some(d) = deleted {
                    let t = column(d, "deleted")?;
                    if !matches!(t, ColumnType::Boolean | ColumnType::Null) {
                        return Err(bad(format!(
                            "deleted column '{d}' is {t}; it must be boolean"
                        )));
                    }
                }
            }
            Self::Aggregate {
                sum,
                min,
                max,
                count,
                any,
                ..
            } => {
                for s in sum {
                    let t = column(s, "sum")?;
                    if !is_summable(t) {
                        return Err(bad(format!(
                            "sum of column '{s}', which is {t}: sum needs a numeric column"
                        )));
                    }
                }
                for m in min.iter().chain(max) {
                    primitive(m, "min/max")?;
                }
                if let Some(c) = count {
                    let t = column(c, "count")?;
                    if !is_integer(t) {
                        return Err(bad(format!(
                            "count column '{c}' is {t}; it must be an integer column (inserts may leave it null: each row counts one)"
                        )));
                    }
                }
                for a in any {
                    column(a, "any")?;
                }
            }
            Self::Dedupe { .. } => {}
        }
        Ok(())
    }
}

fn is_integer(t: &ColumnType) -> bool {
    use ColumnType::*;
    matches!(
        t,
        Null | Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64
    )
}

fn is_summable(t: &ColumnType) -> bool {
    is_integer(t)
        || matches!(
            t,
            ColumnType::Float32 | ColumnType::Float64 | ColumnType::Decimal(..)
        )
}

impl fmt::Display for MergeSpec {
    /// The form `--merge` takes, e.g. `replace(key = [user_id], version = updated_at)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |v: &[String]| {
            format!(
                "[{}]",
                v.iter().map(|c| quote(c)).collect::<Vec<_>>().join(", ")
            )
        };
        let mut parts = vec![format!("key = {}", list(self.key()))];
        match self {
            Self::Replace {
                version, deleted, ..
            } => {
                parts.extend(version.iter().map(|v| format!("version = {}", quote(v))));
                parts.extend(deleted.iter().map(|d| format!("deleted = {}", quote(d))));
            }
            Self::Aggregate {
                sum,
                min,
                max,
                count,
                any,
                ..
            } => {
                for (name, v) in [("sum", sum), ("min", min), ("max", max)] {
                    if !v.is_empty() {
                        parts.push(format!("{name} = {}", list(v)));
                    }
                }
                parts.extend(count.iter().map(|c| format!("count = {}", quote(c))));
                if !any.is_empty() {
                    parts.push(format!("any = {}", list(any)));
                }
            }
            Self::Dedupe { .. } => {}
        }
        write!(f, "{}({})", self.kind(), parts.join(", "))
    }
}

fn quote(name: &str) -> String {
    if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

impl std::str::FromStr for MergeSpec {
    type Err = Error;

    /// `replace(key = [a, b], version = v, deleted = d)`, `aggregate(key = [..], sum = [..],
    /// min = [..], max = [..], count = c, any = [..])`, `dedupe(key = [..])`. A list of one
    /// may drop its brackets; names with other characters than letters, digits and `_` are
    /// double-quoted.
    fn from_str(s: &str) -> Result<Self> {
        let bad = |reason: String| Error::InvalidMergeSpec {
            spec: s.to_string(),
            reason,
        };
        let mut p = Parser {
            tokens: tokenize(s).map_err(&bad)?,
            at: 0,
        };
        let kind = p.name().map_err(&bad)?;
        p.expect("(").map_err(&bad)?;
        let mut args: Vec<(String, Vec<String>, bool)> = Vec::new();
        if !p.peek_is(")") {
            loop {
                let name = p.name().map_err(&bad)?.to_ascii_lowercase();
                p.expect("=").map_err(&bad)?;
                let (values, listed) = if p.peek_is("[") {
                    p.expect("[").map_err(&bad)?;
                    let mut v = Vec::new();
                    if !p.peek_is("]") {
                        loop {
                            v.push(p.name().map_err(&bad)?);
                            if !p.eat(",") {
                                break;
                            }
                        }
                    }
                    p.expect("]").map_err(&bad)?;
                    (v, true)
                } else {
                    (vec![p.name().map_err(&bad)?], false)
                };
                if args.iter().any(|(n, ..)| *n == name) {
                    return Err(bad(format!("'{name}' is given twice")));
                }
                args.push((name, values, listed));
                if !p.eat(",") {
                    break;
                }
            }
        }
        p.expect(")").map_err(&bad)?;
        if p.at < p.tokens.len() {
            return Err(bad(format!(
                "unexpected '{}' after the closing parenthesis",
                p.tokens[p.at]
            )));
        }
        let allowed: &[&str] = match kind.to_ascii_lowercase().as_str() {
            "replace" => &["key", "version", "deleted"],
            "aggregate" => &["key", "sum", "min", "max", "count", "any"],
            "dedupe" => &["key"],
            other => {
                return Err(bad(format!(
                    "unknown merge '{other}': expected replace(...), aggregate(...) or dedupe(...)"
                )))
            }
        };
        for (name, ..) in &args {
            if !allowed.contains(&name.as_str()) {
                return Err(bad(format!(
                    "{kind} takes {}, not '{name}'",
                    allowed.join(", ")
                )));
            }
        }
        let list = |n: &str| -> Vec<String> {
            args.iter()
                .find(|(a, ..)| a == n)
                .map(|(_, v, _)| v.clone())
                .unwrap_or_default()
        };
        let one = |n: &str| -> Result<Option<String>> {
            match args.iter().find(|(a, ..)| a == n) {
                None => Ok(None),
                Some((_, v, listed)) if v.len() == 1 && !listed => Ok(Some(v[0].clone())),
                Some(_) => Err(bad(format!("'{n}' names one column, without brackets"))),
            }
        };
        let key = list("key");
        if key.is_empty() {
            return Err(bad("a key is required, e.g. key = [user_id]".into()));
        }
        Ok(match kind.to_ascii_lowercase().as_str() {
            "replace" => Self::Replace {
                key,
                version: one("version")?,
                deleted: one("deleted")?,
            },
            "aggregate" => Self::Aggregate {
                key,
                sum: list("sum"),
                min: list("min"),
                max: list("max"),
                count: one("count")?,
                any: list("any"),
            },
            _ => Self::Dedupe { key },
        })
    }
}

struct Parser {
    tokens: Vec<String>,
    at: usize,
}

impl Parser {
    fn peek_is(&self, t: &str) -> bool {
        self.tokens.get(self.at).is_some_and(|x| x == t)
    }

    fn eat(&mut self, t: &str) -> bool {
        let yes = self.peek_is(t);
        if yes {
            self.at += 1;
        }
        yes
    }

    fn expect(&mut self, t: &str) -> std::result::Result<(), String> {
        match self.tokens.get(self.at) {
            Some(x) if x == t => {
                self.at += 1;
                Ok(())
            }
            Some(x) => Err(format!("expected '{t}', found '{x}'")),
            None => Err(format!("expected '{t}' at the end")),
        }
    }

    fn name(&mut self) -> std::result::Result<String, String> {
        match self.tokens.get(self.at) {
            Some(x) if !matches!(x.as_str(), "(" | ")" | "[" | "]" | "," | "=") => {
                self.at += 1;
                Ok(x.strip_prefix('\u{0}').unwrap_or(x).to_string())
            }
            Some(x) => Err(format!("expected a name, found '{x}'")),
            None => Err("expected a name at the end".into()),
        }
    }
}

/// Punctuation, bare names and double-quoted names (marked with a leading NUL so a quoted
/// `"("` stays a name).
fn tokenize(s: &str) -> std::result::Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if "()[],=".contains(c) {
            out.push(c.to_string());
            chars.next();
        } else if c == '"' {
            chars.next();
            let name =
                crate::schema::read_quoted(&mut chars, '"').ok_or("a quoted name is not closed")?;
            out.push(format!("\u{0}{name}"));
        } else if c.is_alphanumeric() || c == '_' || c == '.' {
            let mut name = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_alphanumeric() || c == '_' || c == '.' {
                    name.push(c);
                    chars.next();
                } else {
                    break;
                }
            }
            out.push(name);
        } else {
            return Err(format!("unexpected character '{c}'"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Column;

    fn schema() -> TableSchema {
        TableSchema::new(vec![
            Column::new("user_id", ColumnType::Int64, true),
            Column::new("updated_at", ColumnType::Timestamp(None), true),
            Column::new("is_deleted", ColumnType::Boolean, true),
            Column::new("name", ColumnType::String, true),
            Column::new("views", ColumnType::Int64, true),
            Column::new("rows", ColumnType::Int64, true),
        ])
    }

    #[test]
    fn parses_each_kind_and_prints_what_it_parsed() {
        let r: MergeSpec = "replace(key = [user_id], version = updated_at, deleted = is_deleted)"
            .parse()
            .unwrap();
        assert_eq!(
            r,
            MergeSpec::Replace {
                key: vec!["user_id".into()],
                version: Some("updated_at".into()),
                deleted: Some("is_deleted".into()),
            }
        );
        let a: MergeSpec = "aggregate(key = [site, page, day], sum = [views, clicks], min = [first_seen], max = [last_seen], count = rows)"
            .parse()
            .unwrap();
        let d: MergeSpec = "DEDUPE(key = event_id)".parse().unwrap();
        assert_eq!(d.key(), ["event_id"]);
        for s in [r, a, d] {
            assert_eq!(s.to_string().parse::<MergeSpec>().unwrap(), s);
        }
        let q: MergeSpec = r#"dedupe(key = ["user id", "a""b"])"#.parse().unwrap();
        assert_eq!(q.key(), ["user id", "a\"b"]);
        assert_eq!(q.to_string().parse::<MergeSpec>().unwrap(), q);
    }

    #[test]
    fn malformed_specs_say_what_is_wrong() {
        for (s, needle) in [
            ("upsert(key = [a])", "unknown merge 'upsert'"),
            ("replace(version = v)", "a key is required"),
            ("replace(key = [a], sum = [b])", "not 'sum'"),
            (
                "replace(key = [a], version = [v])",
                "'version' names one column",
            ),
            ("replace(key = [a]", "expected ')'"),
            ("replace(key = [a], key = [b])", "given twice"),
            ("dedupe(key = [a]) x", "unexpected 'x'"),
        ] {
            let e = s.parse::<MergeSpec>().unwrap_err().to_string();
            assert!(e.contains(needle), "{s}: {e}");
        }
    }

    #[test]
    fn validation_names_the_column_and_the_rule() {
        let sort = vec!["user_id".to_string(), "updated_at".to_string()];
        let ok: MergeSpec = "replace(key = [user_id], version = updated_at, deleted = is_deleted)"
            .parse()
            .unwrap();
        ok.validate(&schema(), &sort).unwrap();
        ok.validate(&TableSchema::default(), &sort).unwrap();
        for (s, sort_by, needle) in [
            (
                "replace(key = [name])",
                &sort,
                "must be a prefix of the sort key",
            ),
            (
                "replace(key = [user_id], version = nope)",
                &sort,
                "version column 'nope' is not a column",
            ),
            (
                "replace(key = [user_id], deleted = name)",
                &sort,
                "must be boolean",
            ),
            (
                "aggregate(key = [user_id], sum = [name])",
                &sort,
                "sum needs a numeric column",
            ),
            (
                "aggregate(key = [user_id], count = name)",
                &sort,
                "must be an integer column",
            ),
            (
                "aggregate(key = [user_id], sum = [views], max = [views])",
                &sort,
                "named twice",
            ),
            (
                "aggregate(key = [user_id], sum = [user_id])",
                &sort,
                "named twice",
            ),
        ] {
            let spec: MergeSpec = s.parse().unwrap();
            let e = spec.validate(&schema(), sort_by).unwrap_err().to_string();
            assert!(e.contains(needle), "{s}: {e}");
        }
    }
}
