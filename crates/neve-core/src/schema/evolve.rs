//! Schema evolution: what an insert may change on its own (new nullable columns and nested
//! fields, lossless widening at any depth) and what `neve alter` changes explicitly.

use super::{Column, ColumnType, TableSchema};
use crate::error::{Error, Result};

/// How deep structs, lists and maps may nest in one column: deeper, the log's JSON and Arrow's
/// schema format (both depth-limited) could not hold the schema, and no reader would open the
/// table again.
pub const MAX_NESTING: usize = 32;

/// Columns and nested fields a table may have: each costs every insert, merge and query some
/// work, and an input of a hundred thousand keys would otherwise hold a core for minutes.
pub const MAX_FIELDS: usize = 10_000;

impl TableSchema {
    /// Evolve `self` (the table) to accept `input`: new columns and nested fields are appended
    /// and types widen losslessly, unless `strict`: then new names are refused and a wider input
    /// type leaves the table's as it is (its values are then narrowed one by one on the way in,
    /// and one that does not fit exactly is an error; see `write::conform`). Input fields that carry an id (the schema an
    /// insert wrote its files with) keep it, and must agree with the table's: a column renamed,
    /// dropped or given that id by a concurrent commit is a conflict. Returns the new schema;
    /// an error names the first conflict.
    pub fn evolve(&self, input: &TableSchema, strict: bool) -> Result<TableSchema> {
        let mut out = self.clone();
        let mut new_fields = Vec::new();
        let last = self.last_column_id;
        for col in &input.columns {
            match out.columns.iter_mut().find(|c| c.name == col.name) {
                Some(existing) => {
                    evolve_column(existing, col, &col.name, strict, last, &mut new_fields)?
                }
                None => {
                    missing_since(col, &col.name, last)?;
                    new_fields.push(col.name.clone());
                    out.columns.push(Column {
                        nullable: true,
                        aliases: Vec::new(),
                        ..col.clone()
                    });
                }
            }
        }
        if strict && !self.is_empty() && !new_fields.is_empty() {
            return Err(Error::NewColumnRejected {
                columns: new_fields.join(", "),
            });
        }
        out.assign_ids();
        out.check_unique_ids()?;
        out.check_new_names(self)
            .map_err(|(column, message)| Error::InvalidInput {
                input: "schema".into(),
                line: None,
                column: Some(column),
                message,
            })?;
        Ok(out)
    }

    /// The names `self` has that `before` did not: none empty, and none equal to another of
    /// its level but for case (Spark, Trino and Iceberg readers match names ignoring case, so
    /// they could not tell the two apart). Names a table already had are left as they are.
    /// An error is the new name's path and why.
    pub(crate) fn check_new_names(
        &self,
        before: &TableSchema,
    ) -> std::result::Result<(), (String, String)> {
        for c in &self.columns {
            let depth = c.column_type.depth();
            let had = before.column(&c.name).map_or(0, |b| b.column_type.depth());
            if depth > MAX_NESTING && depth > had {
                return Err((
                    c.name.clone(),
                    format!("nests {depth} levels deep, and neve keeps at most {MAX_NESTING} (its log and Arrow's schema format have depth limits; flatten the value or store it as a JSON string)"),
                ));
            }
        }
        let all = self.fields();
        let had = before.fields();
        if all.len() > MAX_FIELDS && all.len() > had.len() {
            return Err((
                all[MAX_FIELDS].0.clone(),
                format!("the table would have {} columns and nested fields, and neve keeps at most {MAX_FIELDS}", all.len()),
            ));
        }
        let old: std::collections::HashSet<String> = had.into_iter().map(|(p, _)| p).collect();
        let mut by_lower: std::collections::HashMap<String, String> = Default::default();
        for (path, c) in self.fields() {
            let new = !old.contains(&path);
            if new && c.name.trim().is_empty() {
                let what = match path.rsplit_once('.') {
                    Some((parent, _)) => format!("a field of '{parent}' has an empty name"),
                    None => "a column has an empty name".to_string(),
                };
                return Err((path, what));
            }
            if let Some(other) = by_lower.insert(path.to_lowercase(), path.clone()) {
                if new || !old.contains(&other) {
                    return Err((
                        path.clone(),
                        format!("'{path}' and '{other}' differ only in case, and engines that match names ignoring case (Spark, Trino) could not tell them apart"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Two fields with one id: a concurrent commit gave an id this schema also uses.
    fn check_unique_ids(&self) -> Result<()> {
        let mut seen = std::collections::HashMap::new();
        for (path, c) in self.fields() {
            if let Some(other) = seen.insert(c.id, path.clone()) {
                return Err(Error::ConcurrentSchemaChange {
                    version: 0,
                    reason: format!(
                        "columns '{other}' and '{path}' would share field id {}",
                        c.id
                    ),
                });
            }
        }
        Ok(())
    }

    /// Apply one `neve alter` change. `has_rows` says whether the table holds any rows (a new
    /// `not null` column needs an empty table). Null counts for `set not null` are checked by
    /// the caller, which has the files.
    pub fn alter(&self, op: &AlterOp, has_rows: bool) -> Result<TableSchema> {
        let mut out = self.clone();
        let unsafe_alter = |column: &str, reason: String| Error::UnsafeAlter {
            column: column.to_string(),
            reason,
        };
        match op {
            // Inside a list's elements, only what an insert's own evolution does there (and
            // readers are tested on): add fields, widen, make nullable.
            AlterOp::RenameColumn { from: path, .. }
            | AlterOp::DropColumn(path)
            | AlterOp::SetNotNull(path)
                if through_list(&self.columns, path) =>
            {
                return Err(unsafe_alter(
                    path,
                    "a field inside a list can be added, widened or made nullable, not renamed, dropped or set not null".into(),
                ));
            }
            _ => {}
        }
        match op {
            AlterOp::AddColumn { parent, column } => {
                if !column.nullable && has_rows {
                    return Err(unsafe_alter(
                        &column.name,
                        "the table has rows, which would have no value in a not null column; add it nullable, fill it, then `set not null`".into(),
                    ));
                }
                let siblings = match parent {
                    None => &mut out.columns,
                    Some(p) => match &mut field_mut(&mut out.columns, p)?.column_type {
                        ColumnType::Struct(fields) => fields,
                        ColumnType::List(e) if matches!(e.column_type, ColumnType::Struct(_)) => {
                            return Err(unsafe_alter(
                                p,
                                format!(
                                    "is a list: add to its elements' struct as `{p}[].{}`",
                                    column.name
                                ),
                            ))
                        }
                        other => {
                            return Err(unsafe_alter(
                                p,
                                format!(
                                    "is {other}, not a struct: fields can only be added to structs"
                                ),
                            ))
                        }
                    },
                };
                if siblings.iter().any(|c| c.name == column.name) {
                    return Err(unsafe_alter(
                        &column.name,
                        "a column of that name exists".into(),
                    ));
                }
                let mut c = column.clone();
                clear_ids(&mut c);
                siblings.push(c);
            }
            AlterOp::RenameColumn { from, to } => {
                if let Some((parent, _)) = nested_path(&out.columns, from) {
                    // `rename column user.plan to tier` (or `to user.tier`): a field keeps its
                    // struct; only its name changes.
                    let leaf = match to.rsplit_once('.') {
                        Some((p, l)) if p == parent => l,
                        Some(_) => {
                            return Err(unsafe_alter(
                                from,
                                format!("a nested field is renamed within its struct, e.g. `rename column {from} to NEW_NAME`; '{to}' is elsewhere"),
                            ))
                        }
                        None => to.as_str(),
                    };
                    let siblings = struct_fields(&mut out.columns, parent, from)?;
                    if siblings.iter().any(|c| c.name == leaf) {
                        return Err(unsafe_alter(
                            from,
                            format!("'{parent}' has a field named '{leaf}'"),
                        ));
                    }
                    let name = from.rsplit_once('.').map(|(_, n)| n).unwrap_or(from);
                    let c = siblings
                        .iter_mut()
                        .find(|c| c.name == name)
                        .ok_or_else(|| unsafe_alter(from, "no such column".into()))?;
                    c.name = leaf.to_string();
                } else {
                    if out.column(to).is_some() {
                        return Err(unsafe_alter(from, format!("a column named '{to}' exists")));
                    }
                    let name_mapped = out.name_mapped_ids;
                    let c = field_mut(&mut out.columns, from)?;
                    if c.id <= name_mapped && !c.aliases.contains(from) {
                        c.aliases.push(from.clone());
                    }
                    c.name = to.clone();
                }
            }
            AlterOp::DropColumn(name) => {
                if let Some((parent, leaf)) = nested_path(&out.columns, name) {
                    let siblings = struct_fields(&mut out.columns, parent, name)?;
                    let i = siblings
                        .iter()
                        .position(|c| c.name == leaf)
                        .ok_or_else(|| unsafe_alter(name, "no such column".into()))?;
                    if siblings.len() == 1 {
                        return Err(unsafe_alter(
                            name,
                            format!("it is the only field of '{parent}'; drop '{parent}' instead"),
                        ));
                    }
                    siblings.remove(i);
                } else {
                    let i = out
                        .index_of(name)
                        .ok_or_else(|| unsafe_alter(name, "no such column".into()))?;
                    if out.columns.len() == 1 {
                        return Err(unsafe_alter(name, "it is the table's only column".into()));
                    }
                    out.columns.remove(i);
                }
            }
            AlterOp::Widen { column, to } => {
                let c = field_mut(&mut out.columns, column)?;
                if c.column_type.is_nested() || to.is_nested() {
                    return Err(unsafe_alter(
                        column,
                        "only primitive types widen; nested types change by adding fields".into(),
                    ));
                }
                if c.column_type == *to {
                    return Err(unsafe_alter(column, format!("is {to} already")));
                }
                if !c.column_type.widens_to(to) {
                    return Err(unsafe_alter(
                        column,
                        format!(
                            "{} to {to} is not lossless (ints widen to wider ints, float32 to float64, decimal(p,s) to more integer and fraction digits, fixed to binary)",
                            c.column_type
                        ),
                    ));
                }
                c.column_type = to.clone();
            }
            AlterOp::SetNotNull(column) => {
                let c = field_mut(&mut out.columns, column)?;
                if !c.nullable {
                    return Err(unsafe_alter(column, "is not null already".into()));
                }
                c.nullable = false;
            }
            AlterOp::DropNotNull(column) => {
                let c = field_mut(&mut out.columns, column)?;
                if c.nullable {
                    return Err(unsafe_alter(column, "is nullable already".into()));
                }
                c.nullable = true;
            }
            // Not a schema change: `Table::alter` applies it to the settings.
            AlterOp::SetSetting { .. } => {}
        }
        out.assign_ids();
        out.check_new_names(self)
            .map_err(|(column, reason)| unsafe_alter(&column, reason))?;
        Ok(out)
    }
}

/// New fields from `neve alter add` get fresh ids, whatever the definition said.
fn clear_ids(c: &mut Column) {
    c.id = 0;
    match &mut c.column_type {
        ColumnType::Struct(fields) => fields.iter_mut().for_each(clear_ids),
        ColumnType::List(e) => clear_ids(e),
        ColumnType::Map(k, v) => {
            clear_ids(k);
            clear_ids(v);
        }
        _ => {}
    }
}

/// The fields of the struct at `parent`, for a change to `path` inside it.
fn struct_fields<'a>(
    columns: &'a mut [Column],
    parent: &str,
    path: &str,
) -> Result<&'a mut Vec<Column>> {
    match &mut field_mut(columns, parent)?.column_type {
        ColumnType::Struct(fields) => Ok(fields),
        other => Err(Error::UnsafeAlter {
            column: path.to_string(),
            reason: format!("'{parent}' is {other}, not a struct"),
        }),
    }
}

/// A dotted path's struct and field (`user.plan`), unless a top-level column has that
/// very name (`user.id` from a CSV header): the name a table has is found first.
fn nested_path<'p>(columns: &[Column], path: &'p str) -> Option<(&'p str, &'p str)> {
    if columns.iter().any(|c| c.name == path) {
        return None;
    }
    path.rsplit_once('.')
}

/// The field at a dotted path (`user.plan`) through structs, or the top-level column of
/// exactly that name. `[]` after a part steps into a list's element, as the insert path names
/// them (`events[].kind`).
fn field_mut<'a>(columns: &'a mut [Column], path: &str) -> Result<&'a mut Column> {
    let missing = || Error::UnsafeAlter {
        column: path.to_string(),
        reason: "no such column".into(),
    };
    if let Some(i) = columns.iter().position(|c| c.name == path) {
        return Ok(&mut columns[i]);
    }
    let mut parts = path.split('.');
    let first = parts.next().ok_or_else(missing)?;
    let (name, lists) = list_steps(first);
    let mut c = columns
        .iter_mut()
        .find(|c| c.name == name)
        .ok_or_else(missing)?;
    c = into_elements(c, lists).ok_or_else(missing)?;
    for part in parts {
        let ColumnType::Struct(fields) = &mut c.column_type else {
            return Err(missing());
        };
        let (name, lists) = list_steps(part);
        c = fields
            .iter_mut()
            .find(|f| f.name == name)
            .ok_or_else(missing)?;
        c = into_elements(c, lists).ok_or_else(missing)?;
    }
    Ok(c)
}

/// A path part's name and how many `[]` follow it (`matrix[][]`: 2).
fn list_steps(part: &str) -> (&str, usize) {
    let mut name = part;
    let mut n = 0;
    while let Some(rest) = name.strip_suffix("[]") {
        name = rest;
        n += 1;
    }
    (name, n)
}

/// `n` steps into nested lists' elements; `None` where a step meets something else.
fn into_elements(mut c: &mut Column, n: usize) -> Option<&mut Column> {
    for _ in 0..n {
        let ColumnType::List(element) = &mut c.column_type else {
            return None;
        };
        c = element;
    }
    Some(c)
}

/// Whether `path` steps into a list's element (and is not a top-level column's own name).
fn through_list(columns: &[Column], path: &str) -> bool {
    path.contains("[]") && !columns.iter().any(|c| c.name == path)
}

fn conflict(path: &str, table: &ColumnType, input: &ColumnType) -> Error {
    use ColumnType::*;
    let hint = match (table, input) {
        (Int64 | UInt64, Float32 | Float64) => Some(
            "a float does not fit an integer column (a fraction, NaN or infinity would be lost); cast the input's column explicitly"
                .into(),
        ),
        (Float32 | Float64, Int64 | UInt64) => Some(
            "an integer above 2^53 does not fit a float exactly; cast the input's column explicitly"
                .into(),
        ),
        _ if table.is_integer() && input.is_integer() => {
            Some("the table's type cannot hold every value of the input's type".into())
        }
        _ => None,
    };
    Error::SchemaConflict {
        column: path.to_string(),
        table_type: table.to_string(),
        input_type: input.to_string(),
        hint,
    }
}

fn id_conflict(path: &str, table: u32, input: u32) -> Error {
    Error::ConcurrentSchemaChange {
        version: 0,
        reason: format!(
            "column '{path}' has field id {table} in the table but {input} in this insert's files (a concurrent commit renamed, dropped or added it)"
        ),
    }
}

/// An input field the table has no field of that name for, but with an id the table gave
/// (`last` is the table's last id): a column the insert's files were written with that a
/// concurrent commit dropped or renamed. Added back it would bring its old values back
/// (readers match files' columns by id), so the insert is written again instead.
fn missing_since(input: &Column, path: &str, last: u32) -> Result<()> {
    if input.id != 0 && input.id <= last {
        return Err(Error::ConcurrentSchemaChange {
            version: 0,
            reason: format!(
                "column '{path}' (field id {}) is no longer in the table: a concurrent commit dropped or renamed it",
                input.id
            ),
        });
    }
    Ok(())
}

/// Evolve one existing field to accept `input` (same name).
fn evolve_column(
    existing: &mut Column,
    input: &Column,
    path: &str,
    strict: bool,
    last: u32,
    new_fields: &mut Vec<String>,
) -> Result<()> {
    if input.id != 0 && existing.id != 0 && input.id != existing.id {
        return Err(id_conflict(path, existing.id, input.id));
    }
    use ColumnType as C;
    match (&mut existing.column_type, &input.column_type) {
        (_, C::Null) => {}
        (C::Null, t) => existing.column_type = t.clone(),
        (C::Struct(fields), C::Struct(inputs)) => {
            for f in inputs {
                let p = format!("{path}.{}", f.name);
                match fields.iter_mut().find(|c| c.name == f.name) {
                    Some(e) => evolve_column(e, f, &p, strict, last, new_fields)?,
                    None => {
                        missing_since(f, &p, last)?;
                        new_fields.push(p);
                        fields.push(Column {
                            nullable: true,
                            aliases: Vec::new(),
                            ..f.clone()
                        });
                    }
                }
            }
        }
        (C::List(e), C::List(i)) => {
            evolve_column(e, i, &format!("{path}[]"), strict, last, new_fields)?
        }
        (C::Map(k, v), C::Map(ik, iv)) => {
            let kp = format!("{path}.key");
            if k.column_type != ik.column_type {
                match k.column_type.unify(&ik.column_type) {
                    Some(t) if !t.is_nested() => {
                        if !strict {
                            k.column_type = t
                        }
                    }
                    _ => return Err(conflict(&kp, &k.column_type, &ik.column_type)),
                }
            }
            if ik.id != 0 && k.id != 0 && ik.id != k.id {
                return Err(id_conflict(&kp, k.id, ik.id));
            }
            let before = new_fields.len();
            let table_type = C::Map(k.clone(), v.clone());
            evolve_column(v, iv, &format!("{path}.value"), strict, last, new_fields)?;
            // Readers cast a file's map to the table's whole (DataFusion casts a map's values
            // only between structs of the same fields): with a field added, every file written
            // before it would fail to read.
            if new_fields.len() > before {
                return Err(Error::SchemaConflict {
                    column: path.to_string(),
                    table_type: table_type.to_string(),
                    input_type: input.column_type.to_string(),
                    hint: Some(format!(
                        "a map's values cannot gain fields ({}): files written before could not be read; write the new field as a column of its own",
                        new_fields[before..].join(", ")
                    )),
                });
            }
        }
        (t, i) if !t.is_nested() && !i.is_nested() => {
            if t != i {
                match t.unify(i) {
                    Some(u) if !strict => *t = u,
                    Some(_) => {}
                    None => return Err(conflict(path, t, i)),
                }
            }
        }
        (t, i) => return Err(conflict(path, t, i)),
    }
    Ok(())
}

/// One explicit schema change, as `neve alter` takes it.
#[derive(Debug, Clone, PartialEq)]
pub enum AlterOp {
    /// `add column "country string"`, or `add column "user.country string"` into a struct.
    AddColumn {
        parent: Option<String>,
        column: Column,
    },
    /// `rename column tags to labels`.
    RenameColumn { from: String, to: String },
    /// `drop column attrs`.
    DropColumn(String),
    /// `widen amount decimal(28,2)`.
    Widen { column: String, to: ColumnType },
    /// `set not null id`.
    SetNotNull(String),
    /// `drop not null id`.
    DropNotNull(String),
    /// `set merge_min_files=4`: a table setting (see `TableSettings::set`).
    SetSetting { key: String, value: String },
}

/// `text` cut at whitespace outside double quotes; a quoted part loses its quotes, and `""`
/// inside one is a quote (as the shell would have handed the words over).
fn split_words(text: &str) -> std::result::Result<Vec<String>, &'static str> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                let quoted =
                    super::read_quoted(&mut chars, '"').ok_or("a quoted name is not closed")?;
                word.get_or_insert_with(String::new).push_str(&quoted);
            }
            c if c.is_whitespace() => words.extend(word.take()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Ok(words)
}

impl AlterOp {
    /// Parse the words after `neve alter TABLE`; the whole change may also come as one
    /// argument (`neve alter t 'add column "x string"'`), split at spaces outside quotes.
    pub fn parse(words: &[String]) -> Result<Self> {
        let split;
        let words = match words {
            [one] if one.trim().contains(char::is_whitespace) => {
                split = split_words(one).map_err(|reason| Error::InvalidSchema {
                    spec: one.clone(),
                    reason: reason.into(),
                })?;
                &split[..]
            }
            _ => words,
        };
        let spec = words.join(" ");
        let bad = |reason: &str| Error::InvalidSchema {
            spec: spec.clone(),
            reason: reason.to_string(),
        };
        let lower: Vec<String> = words.iter().map(|w| w.to_ascii_lowercase()).collect();
        let l: Vec<&str> = lower.iter().map(String::as_str).collect();
        let w: Vec<&str> = words.iter().map(String::as_str).collect();
        Ok(match l.as_slice() {
            ["add", "column", ..] | ["add", ..] => {
                let skip = if l.get(1) == Some(&"column") { 2 } else { 1 };
                let def = w[skip..].join(" ");
                if def.trim().is_empty() {
                    return Err(bad("expected `add column \"NAME TYPE [not null]\"`"));
                }
                // `user.country string`: the path's last part is the new field's name.
                let def = def.trim();
                let (path, rest) = def.split_once(char::is_whitespace).unwrap_or((def, ""));
                let (parent, def) = match path.rsplit_once('.') {
                    Some((p, n)) if !path.starts_with(['"', '`']) => {
                        (Some(p.to_string()), format!("{n} {rest}"))
                    }
                    _ => (None, def.to_string()),
                };
                let column = super::parse_column(&def)?;
                AlterOp::AddColumn { parent, column }
            }
            ["rename", "column", _, "to", _] => AlterOp::RenameColumn {
                from: w[2].to_string(),
                to: w[4].to_string(),
            },
            ["rename", _, "to", _] => AlterOp::RenameColumn {
                from: w[1].to_string(),
                to: w[3].to_string(),
            },
            ["drop", "column", _] => AlterOp::DropColumn(w[2].to_string()),
            ["widen", _, ..] if w.len() > 2 => AlterOp::Widen {
                column: w[1].to_string(),
                to: super::parse_type(&w[2..].join(" ")).map_err(|r| bad(&r))?,
            },
            ["set", "not", "null", _] => AlterOp::SetNotNull(w[3].to_string()),
            ["drop", "not", "null", _] => AlterOp::DropNotNull(w[3].to_string()),
            // `set merge=replace(key = [id])`, `set iceberg_metrics=none, a=full`: a value
            // may span words.
            ["set", kv, ..] if kv.contains('=') => {
                let rest = w[1..].join(" ");
                let (k, v) = rest.split_once('=').expect("checked");
                AlterOp::SetSetting {
                    key: k.trim().to_string(),
                    value: v.trim().to_string(),
                }
            }
            _ => {
                return Err(bad(
                    "expected one of: add column \"NAME TYPE\", rename column A to B, drop column C, widen C TYPE, set not null C, drop not null C, set SETTING=VALUE",
                ))
            }
        })
    }
}
