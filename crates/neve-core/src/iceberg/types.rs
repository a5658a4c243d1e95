//! neve's schema, partitioning and statistics in Iceberg's terms: the schema JSON with field
//! ids, the partition spec, typed partition values and single-value binary bounds.

use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::log::ColumnStats;
use crate::partition::{parse_unscaled, PartitionField, Transform};
use crate::schema::{Column, ColumnType, TableSchema};

/// Iceberg's first partition field id (its `PARTITION_DATA_ID_START`).
pub(crate) const FIRST_PARTITION_FIELD_ID: i32 = 1000;

/// A primitive Iceberg type, as far as bounds and partition values need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prim {
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Date,
    Time,
    Timestamp,
    String,
    Binary,
    Decimal(u8, i8),
    Other,
}

fn unsupported(column: &str, reason: impl Into<String>) -> Error {
    Error::IcebergUnsupported {
        column: column.to_string(),
        reason: reason.into(),
    }
}

/// The Iceberg type of a neve column type (JSON as in the table metadata). `None` for the
/// `null` type: a column with no type yet holds only nulls and is left out until it has one.
fn type_json(path: &str, t: &ColumnType) -> Result<Option<Value>> {
    use ColumnType::*;
    Ok(Some(match t {
        Null => return Ok(None),
        Boolean => json!("boolean"),
        Int8 | Int16 | Int32 | UInt8 | UInt16 => json!("int"),
        Int64 | UInt32 => json!("long"),
        UInt64 => {
            return Err(unsupported(
                path,
                "uint64 has no Iceberg type (Iceberg's long is signed); use int64",
            ))
        }
        Float32 => json!("float"),
        Float64 => json!("double"),
        String => json!("string"),
        Binary => json!("binary"),
        Fixed(n) => json!(format!("fixed[{n}]")),
        Date => json!("date"),
        Time => json!("time"),
        Timestamp(None) => json!("timestamp"),
        Timestamp(Some(_)) => json!("timestamptz"),
        Decimal(p, s) => {
            if *s < 0 || *p > 38 {
                return Err(unsupported(
                    path,
                    format!(
                        "decimal({p},{s}): Iceberg decimals have 0 <= scale and precision <= 38"
                    ),
                ));
            }
            json!(format!("decimal({p}, {s})"))
        }
        Struct(fields) => json!({"type": "struct", "fields": fields_json(path, fields)?}),
        List(e) => match type_json(&format!("{path}[]"), &e.column_type)? {
            Some(et) => json!({
                "type": "list",
                "element-id": e.id,
                "element": et,
                "element-required": !e.nullable,
            }),
            None => return Err(unsupported(path, "a list of nulls has no Iceberg type")),
        },
        Map(k, v) => {
            let kt = type_json(&format!("{path}.key"), &k.column_type)?;
            let vt = type_json(&format!("{path}.value"), &v.column_type)?;
            match (kt, vt) {
                (Some(kt), Some(vt)) => json!({
                    "type": "map",
                    "key-id": k.id,
                    "key": kt,
                    "value-id": v.id,
                    "value": vt,
                    "value-required": !v.nullable,
                }),
                _ => return Err(unsupported(path, "a map of nulls has no Iceberg type")),
            }
        }
    }))
}

fn fields_json(prefix: &str, columns: &[Column]) -> Result<Vec<Value>> {
    let mut out = Vec::with_capacity(columns.len());
    for c in columns {
        let path = if prefix.is_empty() {
            c.name.clone()
        } else {
            format!("{prefix}.{}", c.name)
        };
        if let Some(t) = type_json(&path, &c.column_type)? {
            out.push(json!({"id": c.id, "name": c.name, "required": !c.nullable, "type": t}));
        }
    }
    Ok(out)
}

/// The schema's `fields` (without `schema-id`), refusing what Iceberg cannot describe.
pub(crate) fn schema_fields(schema: &TableSchema) -> Result<Vec<Value>> {
    fields_json("", &schema.columns)
}

/// Check a table can be described in Iceberg metadata: its schema and its partitioning.
pub fn check_table(
    schema: &TableSchema,
    partition_by: &[PartitionField],
    merge: Option<&crate::merge::MergeSpec>,
) -> Result<()> {
    if let Some(spec @ crate::merge::MergeSpec::Aggregate { .. }) = merge {
        // A key's row is folded from its stored rows: no set of stored rows is the table.
        return Err(Error::IcebergMergeSemantics {
            spec: spec.to_string(),
        });
    }
    schema_fields(schema)?;
    partition_spec(schema, partition_by)?;
    Ok(())
}

/// Check a schema change of a table with Iceberg metadata: files written before it keep their
/// types, which Iceberg's readers take only through its promotions (int to long, float to
/// double, a decimal's precision with its scale kept). neve's own widenings are wider (an int
/// to a double, fixed to binary, a decimal's scale), but its reader casts each file itself.
pub fn check_change(before: &TableSchema, after: &TableSchema) -> Result<()> {
    let was: std::collections::HashMap<u32, (String, &ColumnType)> = before
        .fields()
        .into_iter()
        .map(|(path, c)| (c.id, (path, &c.column_type)))
        .collect();
    for (path, c) in after.fields() {
        let Some((_, old)) = was.get(&c.id) else {
            continue;
        };
        let (Some(from), Some(to)) = (type_json(&path, old)?, type_json(&path, &c.column_type)?)
        else {
            continue;
        };
        // Nested types are compared field by field.
        if !from.is_string() || !to.is_string() || from == to {
            continue;
        }
        let (from, to) = (from.as_str().unwrap_or(""), to.as_str().unwrap_or(""));
        let promoted = match (from, to) {
            ("int", "long") | ("float", "double") => true,
            _ => match (decimal_of(from), decimal_of(to)) {
                (Some((p1, s1)), Some((p2, s2))) => s1 == s2 && p2 >= p1,
                _ => false,
            },
        };
        if !promoted {
            return Err(unsupported(
                &path,
                format!(
                    "a change from {from} to {to}: Iceberg's readers read the files written \
                     before only through its promotions (int to long, float to double, a \
                     decimal's precision with its scale kept), not {from} to {to}"
                ),
            ));
        }
    }
    Ok(())
}

/// `decimal(P, S)` as Iceberg's JSON names it.
fn decimal_of(t: &str) -> Option<(u8, i8)> {
    let (p, s) = t
        .strip_prefix("decimal(")?
        .strip_suffix(')')?
        .split_once(',')?;
    Some((p.trim().parse().ok()?, s.trim().parse().ok()?))
}

/// The primitive type of a column (for bounds); `Other` for nested and unmapped types.
pub(crate) fn prim(t: &ColumnType) -> Prim {
    use ColumnType::*;
    match t {
        Boolean => Prim::Boolean,
        Int8 | Int16 | Int32 | UInt8 | UInt16 => Prim::Int,
        Int64 | UInt32 => Prim::Long,
        Float32 => Prim::Float,
        Float64 => Prim::Double,
        Date => Prim::Date,
        Time => Prim::Time,
        Timestamp(_) => Prim::Timestamp,
        String => Prim::String,
        Binary | Fixed(_) => Prim::Binary,
        Decimal(p, s) => Prim::Decimal(*p, *s),
        _ => Prim::Other,
    }
}

/// One partition field in Iceberg's terms.
#[derive(Debug, Clone)]
pub(crate) struct SpecField {
    /// neve's partition name (the key of `partition_values`).
    pub name: String,
    pub transform: Transform,
    pub source_id: u32,
    pub field_id: i32,
    /// The type of the transform's result.
    pub result: Prim,
    /// The source column's type (a timestamp's zone).
    pub source_type: ColumnType,
}

impl SpecField {
    /// The length of the result's Avro `fixed`: decimals are written in one.
    pub fn fixed_size(&self) -> Option<usize> {
        match self.result {
            Prim::Decimal(p, _) => Some(decimal_required_bytes(p)),
            _ => None,
        }
    }
}

/// The fewest bytes that hold every unscaled value of a decimal of precision `p` (Iceberg's
/// `decimalRequiredBytes`).
pub(crate) fn decimal_required_bytes(p: u8) -> usize {
    (1..=16)
        .find(|&b| {
            10i128
                .checked_pow(p as u32)
                .is_none_or(|t| t - 1 <= largest_in(b))
        })
        .unwrap_or(16)
}

/// The largest two's complement value of `bytes` bytes.
fn largest_in(bytes: usize) -> i128 {
    if bytes >= 16 {
        i128::MAX
    } else {
        (1i128 << (8 * bytes - 1)) - 1
    }
}

/// The partition spec: each neve partition level, its source column's id and result type.
pub(crate) fn partition_spec(
    schema: &TableSchema,
    partition_by: &[PartitionField],
) -> Result<Vec<SpecField>> {
    let mut out = Vec::with_capacity(partition_by.len());
    for (i, p) in partition_by.iter().enumerate() {
        let Some(col) = schema.column(&p.source) else {
            // No schema yet (created without one): the first insert brings the column.
            if schema.is_empty() {
                continue;
            }
            return Err(unsupported(
                &p.source,
                "the partition source is not in the schema",
            ));
        };
        let source = prim(&col.column_type);
        let result = match p.transform {
            Transform::Year | Transform::Month | Transform::Hour | Transform::Bucket(_) => {
                Prim::Int
            }
            Transform::Day => Prim::Date,
            Transform::Identity | Transform::Truncate(_) => source,
        };
        if matches!(result, Prim::Other | Prim::Float | Prim::Double) {
            return Err(unsupported(
                &p.source,
                format!(
                    "{} partitions of type {} are not written to Iceberg",
                    p.transform, col.column_type
                ),
            ));
        }
        if p.transform == Transform::Identity && matches!(col.column_type, ColumnType::Fixed(_)) {
            // Its value would be an Avro `fixed`, which Iceberg's Java reader (1.12, Spark's)
            // reads as length-prefixed bytes, and fails.
            return Err(unsupported(
                &p.source,
                format!(
                    "identity partitions of a {} column are not read by Iceberg's Java reader; partition by bucket(N, {})",
                    col.column_type, p.source
                ),
            ));
        }
        if let (Transform::Truncate(w), Prim::Decimal(prec, _)) = (p.transform, result) {
            // A value rounded down may have one more digit than the type holds (-99 by 70 is
            // -140): the partition value must still fit the type's bytes.
            let max = largest_in(decimal_required_bytes(prec));
            let lowest = 10i128
                .checked_pow(prec as u32)
                .and_then(|t| t.checked_add(w as i128 - 2));
            if lowest.is_none_or(|l| l > max) {
                return Err(unsupported(
                    &p.source,
                    format!(
                        "truncate[{w}] of {} can round a value past what the type holds; use a smaller width",
                        col.column_type
                    ),
                ));
            }
        }
        if p.name != p.source && schema.column(&p.name).is_some() {
            return Err(unsupported(
                &p.name,
                format!(
                    "the partition name '{}' is also a column; Iceberg needs them distinct (name the partition with 'as')",
                    p.name
                ),
            ));
        }
        out.push(SpecField {
            name: p.name.clone(),
            transform: p.transform,
            source_id: col.id,
            field_id: FIRST_PARTITION_FIELD_ID + i as i32,
            result,
            source_type: col.column_type.clone(),
        });
    }
    Ok(out)
}

/// The spec as table metadata spells it.
pub(crate) fn spec_json(spec: &[SpecField]) -> Value {
    json!({
        "spec-id": 0,
        "fields": spec.iter().map(|f| json!({
            "name": f.name,
            "transform": f.transform.to_string(),
            "source-id": f.source_id,
            "field-id": f.field_id,
        })).collect::<Vec<_>>(),
    })
}

/// A partition value or bound, typed.
#[derive(Debug, Clone, PartialEq, PartialOrd)]
pub(crate) enum Datum {
    Boolean(bool),
    Int(i32),
    Long(i64),
    Float(f32),
    Double(f64),
    String(String),
    /// Unscaled value of a decimal.
    Decimal(i128),
    Binary(Vec<u8>),
}

impl Datum {
    /// Iceberg's single-value binary serialization.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Datum::Boolean(b) => vec![*b as u8],
            Datum::Int(v) => v.to_le_bytes().to_vec(),
            Datum::Long(v) => v.to_le_bytes().to_vec(),
            Datum::Float(v) => v.to_le_bytes().to_vec(),
            Datum::Double(v) => v.to_le_bytes().to_vec(),
            Datum::String(s) => s.as_bytes().to_vec(),
            Datum::Decimal(v) => crate::partition::decimal_bytes(*v),
            Datum::Binary(b) => b.clone(),
        }
    }
}

/// Days since the epoch of `YYYY-MM-DD`.
fn parse_date(s: &str) -> Option<i32> {
    let d = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
    Some((d - chrono::NaiveDate::from_ymd_opt(1970, 1, 1)?).num_days() as i32)
}

/// A partition value (as neve labels it in `partition_values`) in the spec field's type.
pub(crate) fn partition_datum(f: &SpecField, label: &str) -> Option<Datum> {
    let months = |y: i64, m: i64| (y - 1970) * 12 + m - 1;
    Some(match f.transform {
        Transform::Year => Datum::Int(label.parse::<i32>().ok()? - 1970),
        Transform::Month => {
            // `-001-12` is December of 2 BC: the year may have a sign.
            let (y, m) = label.rsplit_once('-')?;
            Datum::Int(months(y.parse().ok()?, m.parse().ok()?) as i32)
        }
        Transform::Day => Datum::Int(parse_date(label)?),
        Transform::Hour => {
            let (start, _) = crate::partition::time_bounds(Transform::Hour, label)?;
            Datum::Int(start.div_euclid(3_600_000_000) as i32)
        }
        Transform::Bucket(_) => Datum::Int(label.parse().ok()?),
        Transform::Identity | Transform::Truncate(_) => match f.result {
            Prim::Boolean => Datum::Boolean(label.parse().ok()?),
            // A truncation below the type's least value wraps, as Iceberg's does (neve's label
            // keeps the true multiple).
            Prim::Int => Datum::Int(label.parse::<i64>().ok()? as i32),
            Prim::Long => Datum::Long(label.parse::<i128>().ok()? as i64),
            Prim::Date => Datum::Int(parse_date(label)?),
            Prim::String => Datum::String(label.to_string()),
            Prim::Decimal(_, scale) => Datum::Decimal(parse_unscaled(label, scale)?),
            Prim::Binary => Datum::Binary(crate::partition::unhex(label)?),
            p @ (Prim::Time | Prim::Timestamp) => stat_datum(p, &Value::from(label))?,
            Prim::Float | Prim::Double | Prim::Other => return None,
        },
    })
}

/// A statistics value (JSON as the log stores it) as a bound of a column of type `p`.
pub(crate) fn stat_datum(p: Prim, v: &Value) -> Option<Datum> {
    Some(match p {
        Prim::Boolean => Datum::Boolean(v.as_bool()?),
        Prim::Int => Datum::Int(i32::try_from(v.as_i64()?).ok()?),
        Prim::Long => Datum::Long(v.as_i64()?),
        Prim::Float => Datum::Float(v.as_f64()? as f32),
        Prim::Double => Datum::Double(v.as_f64()?),
        Prim::Date => Datum::Int(parse_date(v.as_str()?)?),
        Prim::Time => {
            let t = chrono::NaiveTime::parse_from_str(v.as_str()?, "%H:%M:%S%.f").ok()?;
            let us = (t - chrono::NaiveTime::MIN).num_microseconds()?;
            Datum::Long(us)
        }
        Prim::Timestamp => {
            let s = v.as_str()?.trim_end_matches('Z');
            let t = chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f").ok()?;
            Datum::Long(t.and_utc().timestamp_micros())
        }
        Prim::String => Datum::String(v.as_str()?.to_string()),
        Prim::Decimal(_, scale) => Datum::Decimal(parse_unscaled(v.as_str()?, scale)?),
        Prim::Binary | Prim::Other => return None,
    })
}

/// Per-field statistics of one data file in Iceberg's terms (field id keyed).
#[derive(Debug, Default)]
pub(crate) struct FileBounds {
    pub value_counts: Vec<(i32, i64)>,
    pub null_counts: Vec<(i32, i64)>,
    pub lower: Vec<(i32, Vec<u8>)>,
    pub upper: Vec<(i32, Vec<u8>)>,
}

/// Where each statistics key of the log (`col`, `struct.field`) points: field id and type.
/// Old names (aliases) of renamed top-level columns too, as older files' statistics use them.
pub(crate) fn stat_fields(schema: &TableSchema) -> Vec<(String, i32, Prim, bool)> {
    let mut out = Vec::new();
    let mut aliases = Vec::new();
    for (path, c) in schema.fields() {
        // Fields inside lists and maps have no per-row statistics.
        if path.contains("[]") || path.contains(".key") || path.contains(".value") {
            continue;
        }
        let top = !path.contains('.');
        out.push((path.clone(), c.id as i32, prim(&c.column_type), top));
        if top {
            for a in &c.aliases {
                aliases.push((a.clone(), c.id as i32, prim(&c.column_type), true));
            }
        }
    }
    // After every current name, and never one of them: a file's statistics under a name a
    // column has now are that column's, whoever had the name before.
    aliases.retain(|(a, ..)| !out.iter().any(|(p, ..)| p == a));
    out.extend(aliases);
    out
}

/// The counts and bounds of a file from its log statistics, as far as each field's metrics
/// mode lets them through.
pub(crate) fn file_bounds(
    fields: &[(String, i32, Prim, bool)],
    metrics: &super::metrics::Resolved,
    stats: &std::collections::BTreeMap<String, ColumnStats>,
    rows: u64,
) -> FileBounds {
    use super::metrics::{truncate_lower, truncate_upper, MetricsMode};
    // Sized for every field at once: growing them was a third of the bounds' time.
    let n = fields.len();
    let mut b = FileBounds {
        value_counts: Vec::with_capacity(n),
        null_counts: Vec::with_capacity(n),
        lower: Vec::with_capacity(n),
        upper: Vec::with_capacity(n),
    };
    let mut seen = std::collections::HashSet::with_capacity(n);
    for (path, id, p, top) in fields {
        let Some(s) = stats.get(path) else { continue };
        if !seen.insert(*id) {
            continue;
        }
        let mode = metrics.mode(*id);
        if !mode.counts() {
            continue;
        }
        if *top && *p != Prim::Other {
            b.value_counts.push((*id, rows as i64));
        }
        b.null_counts.push((*id, s.nulls as i64));
        if !mode.bounds() {
            continue;
        }
        let lower = s.min.as_ref().and_then(|v| stat_datum(*p, v));
        let upper = s.max.as_ref().and_then(|v| stat_datum(*p, v));
        let (lower, upper) = match (mode, lower, upper) {
            (MetricsMode::Truncate(n), lo, hi) => (
                lo.map(|d| match d {
                    Datum::String(s) => Datum::String(truncate_lower(&s, n).to_string()),
                    d => d,
                }),
                hi.and_then(|d| match d {
                    Datum::String(s) => truncate_upper(&s, n).map(Datum::String),
                    d => Some(d),
                }),
            ),
            (_, lo, hi) => (lo, hi),
        };
        if let Some(d) = lower {
            b.lower.push((*id, d.to_bytes()));
        }
        if let Some(d) = upper {
            b.upper.push((*id, d.to_bytes()));
        }
    }
    b.value_counts.sort();
    b.null_counts.sort();
    b.lower.sort();
    b.upper.sort();
    b
}

/// `schema.name-mapping.default`: every field id with its names, current and former, so
/// readers find columns in files written before neve wrote field ids. A name is listed once,
/// under the column [`TableSchema::name_owners`] gives it (Java's reader refuses a mapping that
/// lists a name twice).
pub(crate) fn name_mapping(schema: &TableSchema) -> Value {
    /// A top-level column's names in the mapping.
    type TopNames<'a> = &'a dyn Fn(&Column) -> Vec<String>;
    fn fields(columns: &[Column], top: Option<TopNames<'_>>) -> Vec<Value> {
        columns
            .iter()
            .filter_map(|c| {
                let names = match top {
                    Some(f) => f(c),
                    None => std::iter::once(&c.name)
                        .chain(&c.aliases)
                        .cloned()
                        .collect(),
                };
                // A column added since ids were written whose name an older column's files
                // use: files without ids cannot hold it, so it has no place in the mapping.
                if names.is_empty() {
                    return None;
                }
                let mut m = json!({"field-id": c.id, "names": names});
                let nested = match &c.column_type {
                    ColumnType::Struct(fs) => fields(fs, None),
                    ColumnType::List(e) => fields(std::slice::from_ref(e), None),
                    ColumnType::Map(k, v) => fields(&[(**k).clone(), (**v).clone()], None),
                    _ => vec![],
                };
                if !nested.is_empty() {
                    m["fields"] = Value::Array(nested);
                }
                Some(m)
            })
            .collect()
    }
    let owner = schema.name_owners();
    let top_names = |c: &Column| -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for n in std::iter::once(&c.name).chain(&c.aliases) {
            if owner.get(n.as_str()) == Some(&c.id) && !names.contains(n) {
                names.push(n.clone());
            }
        }
        names
    };
    Value::Array(fields(&schema.columns, Some(&top_names)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table from before field ids with `a` and `b`, after `alters` (renames, or `+x` to add
    /// a column `x`).
    fn legacy_after(alters: &[&str]) -> TableSchema {
        use crate::schema::AlterOp;
        let legacy = r#"{"columns":[{"name":"a","type":"int64"},{"name":"b","type":"string"}]}"#;
        let mut s: TableSchema = serde_json::from_str(legacy).unwrap();
        for a in alters {
            let op = match a.strip_prefix('+') {
                Some(name) => AlterOp::AddColumn {
                    parent: None,
                    column: crate::schema::parse_schema(&format!("{name} int32"))
                        .unwrap()
                        .columns
                        .remove(0),
                },
                None => {
                    let (from, to) = a.split_once('>').unwrap();
                    AlterOp::RenameColumn {
                        from: from.into(),
                        to: to.into(),
                    }
                }
            };
            s = s.alter(&op, true).unwrap();
        }
        s
    }

    /// Each name once in the mapping (Java refuses a mapping with a name twice), standing for
    /// the column files without ids meant by it.
    #[test]
    fn the_name_mapping_lists_each_name_once() {
        let names = |s: &TableSchema| -> Vec<(u64, Vec<String>)> {
            name_mapping(s)
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    let names = f["names"].as_array().unwrap();
                    let names = names.iter().map(|n| n.as_str().unwrap().to_string());
                    (f["field-id"].as_u64().unwrap(), names.collect())
                })
                .collect()
        };
        let v = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // Renamed away and back.
        let s = legacy_after(&["a>x", "x>a"]);
        assert_eq!(names(&s), vec![(1, v(&["a", "x"])), (2, v(&["b"]))]);
        // Renamed, then a new column of the old name: files without ids hold only the old one.
        let s = legacy_after(&["a>x", "+a"]);
        assert_eq!(names(&s), vec![(1, v(&["x", "a"])), (2, v(&["b"]))]);
        // Names swapped between two old columns: each keeps the name it had in those files.
        let s = legacy_after(&["a>c", "b>a"]);
        assert_eq!(names(&s), vec![(1, v(&["c", "a"])), (2, v(&["b"]))]);
        assert_eq!(s.name_owners().get("a"), Some(&1));
        // A new column's statistics are its own, under its name, whatever the alias.
        let s = legacy_after(&["a>x", "+a"]);
        let fields = stat_fields(&s);
        let a = fields.iter().find(|f| f.0 == "a").unwrap();
        assert_eq!(a.1, s.column("a").unwrap().id as i32);
        assert_eq!(fields.iter().filter(|f| f.0 == "a").count(), 1);
    }

    #[test]
    fn decimals_are_minimal_twos_complement() {
        assert_eq!(Datum::Decimal(0).to_bytes(), vec![0]);
        assert_eq!(Datum::Decimal(127).to_bytes(), vec![0x7f]);
        assert_eq!(Datum::Decimal(128).to_bytes(), vec![0x00, 0x80]);
        assert_eq!(Datum::Decimal(-1).to_bytes(), vec![0xff]);
        assert_eq!(Datum::Decimal(-129).to_bytes(), vec![0xff, 0x7f]);
        assert_eq!(parse_unscaled("-12.5", 3), Some(-12500));
        assert_eq!(parse_unscaled("7", 2), Some(700));
        assert_eq!(parse_unscaled("1.234", 2), None);
    }

    #[test]
    fn partition_labels_become_iceberg_values() {
        let f = |transform, result| SpecField {
            name: "p".into(),
            transform,
            source_id: 1,
            field_id: 1000,
            result,
            source_type: ColumnType::Null,
        };
        let ts = Prim::Timestamp;
        assert_eq!(
            partition_datum(&f(Transform::Year, Prim::Int), "2021"),
            Some(Datum::Int(51))
        );
        assert_eq!(
            partition_datum(&f(Transform::Month, Prim::Int), "1970-02"),
            Some(Datum::Int(1))
        );
        assert_eq!(
            partition_datum(&f(Transform::Month, Prim::Int), "-001-12"),
            Some(Datum::Int(-23641))
        );
        assert_eq!(
            partition_datum(&f(Transform::Month, Prim::Int), "1969-12"),
            Some(Datum::Int(-1))
        );
        assert_eq!(
            partition_datum(&f(Transform::Day, Prim::Date), "1970-01-03"),
            Some(Datum::Int(2))
        );
        assert_eq!(
            partition_datum(&f(Transform::Hour, Prim::Int), "1970-01-02-01"),
            Some(Datum::Int(25))
        );
        assert_eq!(
            partition_datum(&f(Transform::Bucket(16), Prim::Int), "7"),
            Some(Datum::Int(7))
        );
        assert_eq!(
            partition_datum(&f(Transform::Identity, Prim::String), "a b"),
            Some(Datum::String("a b".into()))
        );
        assert_eq!(partition_datum(&f(Transform::Identity, ts), "x"), None);
        assert_eq!(
            partition_datum(&f(Transform::Identity, ts), "2021-08-15T13:45:00.000001Z"),
            Some(Datum::Long(1_629_035_100_000_001))
        );
        assert_eq!(
            partition_datum(&f(Transform::Identity, Prim::Time), "13:45:00.000007"),
            Some(Datum::Long(49_500_000_007))
        );
        let dec = Prim::Decimal(9, 2);
        assert_eq!(
            partition_datum(&f(Transform::Truncate(10), dec), "-10.70"),
            Some(Datum::Decimal(-1070))
        );
        assert_eq!(
            partition_datum(&f(Transform::Identity, Prim::Binary), "01ab"),
            Some(Datum::Binary(vec![1, 0xab]))
        );
        assert_eq!(
            partition_datum(&f(Transform::Identity, Prim::Binary), "1"),
            None
        );
        // Iceberg's truncation wraps where neve's label keeps the true multiple.
        assert_eq!(
            partition_datum(&f(Transform::Truncate(3), Prim::Int), "-2147483650"),
            Some(Datum::Int(2147483646))
        );
        assert_eq!(
            partition_datum(
                &f(Transform::Truncate(3), Prim::Long),
                "-9223372036854775810"
            ),
            Some(Datum::Long(9223372036854775806))
        );
        // Java's decimalRequiredBytes.
        for (p, b) in [
            (1, 1),
            (2, 1),
            (3, 2),
            (9, 4),
            (10, 5),
            (18, 8),
            (19, 9),
            (38, 16),
        ] {
            assert_eq!(decimal_required_bytes(p), b, "precision {p}");
        }
        assert_eq!(
            stat_datum(Prim::Timestamp, &json!("1970-01-01T00:00:01.000002Z")),
            Some(Datum::Long(1_000_002))
        );
        assert_eq!(
            stat_datum(Prim::Date, &json!("1969-12-31")),
            Some(Datum::Int(-1))
        );
        assert_eq!(
            stat_datum(Prim::Time, &json!("00:00:01.500000")),
            Some(Datum::Long(1_500_000))
        );
    }

    #[test]
    fn unsupported_types_are_named() {
        let s = TableSchema::new(vec![
            Column::new("a", ColumnType::Int64, true),
            Column::new("u", ColumnType::UInt64, true),
        ]);
        let e = schema_fields(&s).unwrap_err().to_string();
        assert!(e.contains("'u'") && e.contains("uint64"), "{e}");
        let ok = TableSchema::new(vec![
            Column::new("a", ColumnType::Int64, false),
            Column::new("n", ColumnType::Null, true),
        ]);
        let f = schema_fields(&ok).unwrap();
        assert_eq!(f.len(), 1);
        assert_eq!(f[0]["required"], json!(true));
        assert_eq!(f[0]["type"], json!("long"));
    }

    #[test]
    fn partition_specs_iceberg_cannot_hold_are_refused() {
        let s = TableSchema::new(vec![
            Column::new("d", ColumnType::Decimal(2, 0), true),
            Column::new("id", ColumnType::Fixed(16), true),
        ]);
        let spec = |text: &str| partition_spec(&s, &crate::partition::parse_spec(text).unwrap());
        // -99 rounded down by 70 is -140, past decimal(2,0)'s one byte; by 10, -100 fits.
        let e = spec("truncate(70, d)").unwrap_err().to_string();
        assert!(e.contains("truncate[70] of decimal(2,0)"), "{e}");
        let f = spec("truncate(10, d), bucket(4, id)").unwrap();
        assert_eq!((f[0].fixed_size(), f[1].result), (Some(1), Prim::Int));
        let e = spec("identity(id) as i").unwrap_err().to_string();
        assert!(e.contains("bucket(N, id)"), "{e}");
    }
}
