//! The SQL another engine runs over a table's alive files to read it as neve does: the
//! files hold stored rows, several per key until merged.
//!
//! Engines cannot see a file's commit order, so what neve decides by it (ties of `replace`,
//! the first row of `dedupe`, the last value of other `aggregate` columns) is left to the
//! engine there: any row of the tie. Rows merge per partition, as in neve: the partition is
//! the file's folder.

use super::spec::{Fold, MergeSpec};
use crate::schema::TableSchema;

/// An engine neve writes the merge SQL for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    DuckDb,
    ClickHouse,
}

impl Engine {
    fn ident(self, name: &str) -> String {
        match self {
            Engine::DuckDb => format!("\"{}\"", name.replace('"', "\"\"")),
            Engine::ClickHouse => format!("`{}`", name.replace('`', "``")),
        }
    }

    /// The folder of the row's file, from the relation's file name column.
    fn folder(self) -> &'static str {
        match self {
            Engine::DuckDb => "regexp_replace(filename, '/[^/]*$', '')",
            Engine::ClickHouse => "replaceRegexpOne(_path, '/[^/]*$', '')",
        }
    }

    fn any(self) -> &'static str {
        match self {
            Engine::DuckDb => "any_value",
            Engine::ClickHouse => "any",
        }
    }
}

/// `files` (the engine's table function over the alive files) with each top-level unsigned
/// column read as its table type: data files store `uint8`/`uint16` as INT32 and `uint32` as
/// INT64 (write/stored.rs), and older files as Parquet's unsigned types, which an engine would
/// otherwise widen to a common type. Unsigned fields inside structs, lists and maps keep
/// their stored types. `files` itself when the table has no such column. With `path` (a
/// ClickHouse relation that [`merged_relation`] reads), its `_path` stays readable.
pub fn typed_relation(schema: &TableSchema, files: &str, engine: Engine, path: bool) -> String {
    use crate::schema::ColumnType;
    let casts: Vec<String> = schema
        .columns
        .iter()
        .filter_map(|c| {
            let t = match (&c.column_type, engine) {
                (ColumnType::UInt8, Engine::DuckDb) => "UTINYINT",
                (ColumnType::UInt16, Engine::DuckDb) => "USMALLINT",
                (ColumnType::UInt32, Engine::DuckDb) => "UINTEGER",
                (ColumnType::UInt8, Engine::ClickHouse) => "UInt8",
                (ColumnType::UInt16, Engine::ClickHouse) => "UInt16",
                (ColumnType::UInt32, Engine::ClickHouse) => "UInt32",
                _ => return None,
            };
            // ClickHouse keeps a NULL through CAST only to a Nullable type.
            let t = match engine {
                Engine::ClickHouse if c.nullable => format!("Nullable({t})"),
                _ => t.to_string(),
            };
            let n = engine.ident(&c.name);
            Some(format!("CAST({n} AS {t}) AS {n}"))
        })
        .collect();
    if casts.is_empty() {
        return files.to_string();
    }
    let extra = if path && engine == Engine::ClickHouse {
        ", _path"
    } else {
        ""
    };
    format!(
        "(SELECT * REPLACE ({}){extra} FROM {files})",
        casts.join(", ")
    )
}

/// A relation over `files` (the engine's table function over the alive files, for DuckDB
/// with `filename = true`) that holds one row per key, as neve reads the table.
pub fn merged_relation(
    spec: &MergeSpec,
    schema: &TableSchema,
    files: &str,
    engine: Engine,
) -> String {
    let id = |c: &str| engine.ident(c);
    let columns: Vec<String> = schema.columns.iter().map(|c| id(&c.name)).collect();
    let mut by: Vec<String> = vec![engine.folder().to_string()];
    by.extend(spec.key().iter().map(|k| id(k)));
    if !matches!(spec, MergeSpec::Aggregate { .. }) {
        let (order, deleted) = match spec {
            MergeSpec::Replace {
                version, deleted, ..
            } => (
                version
                    .as_ref()
                    .map(|v| format!(" ORDER BY {} DESC NULLS LAST", id(v)))
                    .unwrap_or_default(),
                deleted.as_ref(),
            ),
            _ => (String::new(), None),
        };
        let mut sql = format!(
            "(SELECT {} FROM (SELECT *, row_number() OVER (PARTITION BY {}{order}) AS neve_rn FROM {files}) WHERE neve_rn = 1",
            columns.join(", "),
            by.join(", ")
        );
        if let Some(d) = deleted {
            sql.push_str(&format!(" AND NOT coalesce({}, false)", id(d)));
        }
        sql.push(')');
        return sql;
    }
    let select: Vec<String> = schema
        .columns
        .iter()
        .map(|c| {
            let n = id(&c.name);
            let e = match spec.fold(&c.name) {
                // Grouped by: as it is (ClickHouse would read an alias as the grouping key).
                Fold::Key => return n,
                Fold::Any | Fold::Last => format!("{}({n})", engine.any()),
                Fold::Sum => format!("sum({n})"),
                Fold::Min => format!("min({n})"),
                Fold::Max => format!("max({n})"),
                Fold::Count => format!("sum(coalesce({n}, 1))"),
            };
            format!("{e} AS {n}")
        })
        .collect();
    format!(
        "(SELECT {} FROM {files} GROUP BY {})",
        select.join(", "),
        by.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Column, ColumnType};

    #[test]
    fn each_kind_reads_as_sql() {
        let schema = TableSchema::new(vec![
            Column::new("k", ColumnType::Int64, true),
            Column::new("v", ColumnType::Int64, true),
            Column::new("del", ColumnType::Boolean, true),
        ]);
        let r: MergeSpec = "replace(key = [k], version = v, deleted = del)"
            .parse()
            .unwrap();
        assert_eq!(
            merged_relation(&r, &schema, "F", Engine::DuckDb),
            "(SELECT \"k\", \"v\", \"del\" FROM (SELECT *, row_number() OVER (PARTITION BY regexp_replace(filename, '/[^/]*$', ''), \"k\" ORDER BY \"v\" DESC NULLS LAST) AS neve_rn FROM F) WHERE neve_rn = 1 AND NOT coalesce(\"del\", false))"
        );
        let a: MergeSpec = "aggregate(key = [k], sum = [v])".parse().unwrap();
        assert_eq!(typed_relation(&schema, "F", Engine::DuckDb, false), "F");
        assert_eq!(
            merged_relation(&a, &schema, "F", Engine::ClickHouse),
            "(SELECT `k`, sum(`v`) AS `v`, any(`del`) AS `del` FROM F GROUP BY replaceRegexpOne(_path, '/[^/]*$', ''), `k`)"
        );
    }

    #[test]
    fn unsigned_columns_are_cast_to_their_table_types() {
        let schema = TableSchema::new(vec![
            Column::new("k", ColumnType::Int64, true),
            Column::new("a", ColumnType::UInt8, false),
            Column::new("c", ColumnType::UInt32, true),
            Column::new("u", ColumnType::UInt64, true),
        ]);
        assert_eq!(
            typed_relation(&schema, "F", Engine::DuckDb, true),
            "(SELECT * REPLACE (CAST(\"a\" AS UTINYINT) AS \"a\", CAST(\"c\" AS UINTEGER) AS \"c\") FROM F)"
        );
        assert_eq!(
            typed_relation(&schema, "F", Engine::ClickHouse, true),
            "(SELECT * REPLACE (CAST(`a` AS UInt8) AS `a`, CAST(`c` AS Nullable(UInt32)) AS `c`), _path FROM F)"
        );
    }
}
