//! The SQL another engine runs over a table's alive files to read it as neve does: the
//! files hold stored rows, several per key until merged.
//!
//! Engines cannot see a file's commit order, so what neve decides by it (ties of `replace`,
//! the first row of `dedupe`, the last value of other `aggregate` columns) is left to the
//! engine there: any row of the tie. Rows merge per partition, as in neve: the partition is
//! the file's folder.

use super::spec::{Fold, MergeSpec};
use crate::error::{Error, Result};
use crate::schema::{ColumnType, TableSchema};

/// An engine neve writes the merge SQL for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    DuckDb,
    ClickHouse,
}

/// Where the engine finds the alive files.
#[derive(Debug, Clone, Copy)]
pub enum Scan<'a> {
    /// DuckDB's `read_parquet` over these URLs.
    DuckDb { urls: &'a [String] },
    /// A ClickHouse table function (`s3`, `file`) over one URL, a path or a `{a,b}` alternation.
    ClickHouse { function: &'a str, url: &'a str },
}

impl Engine {
    /// A quoted identifier. ClickHouse reads backslash escapes inside backticks.
    pub fn ident(self, name: &str) -> String {
        match self {
            Engine::DuckDb => format!("\"{}\"", name.replace('"', "\"\"")),
            Engine::ClickHouse => format!("`{}`", name.replace('\\', "\\\\").replace('`', "\\`")),
        }
    }

    /// A quoted string literal. ClickHouse reads backslash escapes inside quotes.
    pub fn literal(self, text: &str) -> String {
        match self {
            Engine::DuckDb => format!("'{}'", text.replace('\'', "''")),
            Engine::ClickHouse => format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'")),
        }
    }

    /// The folder of the row's file, from the helper column holding its path.
    fn folder(self, file: &str) -> String {
        match self {
            Engine::DuckDb => format!("regexp_replace({file}, '/[^/]*$', '')"),
            Engine::ClickHouse => format!("replaceRegexpOne({file}, '/[^/]*$', '')"),
        }
    }

    /// Some row's value, a NULL included (neve keeps the row's value as it is).
    fn any(self) -> &'static str {
        match self {
            Engine::DuckDb => "first",
            Engine::ClickHouse => "any_respect_nulls",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Engine::DuckDb => "DuckDB",
            Engine::ClickHouse => "ClickHouse",
        }
    }
}

/// A relation over the alive files of `scan` that reads the table as neve does: its columns
/// with their table types, each partition column as stored in the files (the engines' Hive
/// partitioning would replace it with its folder name, escaped, typed by guess, NULL as
/// `__HIVE_DEFAULT_PARTITION__`), and with `merge`, one row per key.
pub fn relation(schema: &TableSchema, merge: Option<&MergeSpec>, scan: Scan<'_>) -> Result<String> {
    let file = merge.map(|_| unused(schema, "neve_file"));
    let (engine, source) = match scan {
        Scan::DuckDb { urls } => {
            let list: Vec<String> = urls.iter().map(|u| Engine::DuckDb.literal(u)).collect();
            let named = file
                .as_ref()
                .map(|f| format!(", filename = {}", Engine::DuckDb.literal(f)))
                .unwrap_or_default();
            let read = format!(
                "read_parquet([{}], union_by_name = true, hive_partitioning = false{named})",
                list.join(", ")
            );
            let rel = match casts(schema, Engine::DuckDb) {
                Some(c) => format!("(SELECT * REPLACE ({c}) FROM {read})"),
                None => read,
            };
            (Engine::DuckDb, rel)
        }
        Scan::ClickHouse { function, url } => {
            let ch = Engine::ClickHouse;
            // A file column named `_path` hides the virtual column of the file's path.
            if merge.is_some() && schema.columns.iter().any(|c| c.name == "_path") {
                return Err(Error::EngineCannotMerge {
                    engine: ch.name().into(),
                    reason: "the table's column `_path` hides ClickHouse's virtual column of the \
                             file path, which tells the partitions apart; read it with --raw, or \
                             rename the column"
                        .into(),
                });
            }
            let star = match casts(schema, ch) {
                Some(c) => format!("* REPLACE ({c})"),
                None => "*".into(),
            };
            let path = file
                .as_ref()
                .map(|f| format!(", _path AS {}", ch.ident(f)))
                .unwrap_or_default();
            let rel = format!(
                "(SELECT {star}{path} FROM {function}({}, 'Parquet') SETTINGS use_hive_partitioning = 0)",
                ch.literal(url)
            );
            (ch, rel)
        }
    };
    match (merge, file) {
        (Some(spec), Some(file)) => Ok(merged(spec, schema, &source, engine, &file)),
        _ => Ok(source),
    }
}

/// `base`, or `base` followed by underscores, so that it names no column of the table (in
/// any case: DuckDB's names are case-insensitive).
fn unused(schema: &TableSchema, base: &str) -> String {
    let mut name = base.to_string();
    while schema
        .columns
        .iter()
        .any(|c| c.name.eq_ignore_ascii_case(&name))
    {
        name.push('_');
    }
    name
}

/// Each top-level unsigned column cast to its table type: data files store `uint8`/`uint16`
/// as INT32 and `uint32` as INT64 (write/stored.rs), and older files as Parquet's unsigned
/// types, which an engine would otherwise widen to a common type. Unsigned fields inside
/// structs, lists and maps keep their stored types. None when the table has no such column.
fn casts(schema: &TableSchema, engine: Engine) -> Option<String> {
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
    (!casts.is_empty()).then(|| casts.join(", "))
}

/// One row per key of `files` (a relation with the helper column `file`, each row's file path).
fn merged(
    spec: &MergeSpec,
    schema: &TableSchema,
    files: &str,
    engine: Engine,
    file: &str,
) -> String {
    let id = |c: &str| engine.ident(c);
    let columns: Vec<String> = schema.columns.iter().map(|c| id(&c.name)).collect();
    let mut by: Vec<String> = vec![engine.folder(&id(file))];
    by.extend(spec.key().iter().map(|k| id(k)));
    if !matches!(spec, MergeSpec::Aggregate { .. }) {
        let (order, deleted) = match spec {
            MergeSpec::Replace {
                version, deleted, ..
            } => (
                version
                    .as_ref()
                    .map(|v| version_order(schema, engine, v))
                    .unwrap_or_default(),
                deleted.as_ref(),
            ),
            _ => (String::new(), None),
        };
        let rn = id(&unused(schema, "neve_rn"));
        let mut sql = format!(
            "(SELECT {} FROM (SELECT *, row_number() OVER (PARTITION BY {}{order}) AS {rn} FROM {files}) WHERE {rn} = 1",
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

/// The highest version first and a NULL last, as neve orders them; NaN above every number,
/// which DuckDB does too and ClickHouse sorts last unless told.
fn version_order(schema: &TableSchema, engine: Engine, version: &str) -> String {
    let v = engine.ident(version);
    let float = schema.columns.iter().any(|c| {
        c.name == version && matches!(c.column_type, ColumnType::Float32 | ColumnType::Float64)
    });
    if float && engine == Engine::ClickHouse {
        format!(" ORDER BY isNaN({v}) DESC NULLS LAST, {v} DESC NULLS LAST")
    } else {
        format!(" ORDER BY {v} DESC NULLS LAST")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Column;

    fn urls() -> Vec<String> {
        vec!["s3://b/t/_data/k=it's/a.parquet".into()]
    }

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
        let urls = urls();
        assert_eq!(
            relation(&schema, Some(&r), Scan::DuckDb { urls: &urls }).unwrap(),
            "(SELECT \"k\", \"v\", \"del\" FROM (SELECT *, row_number() OVER (PARTITION BY regexp_replace(\"neve_file\", '/[^/]*$', ''), \"k\" ORDER BY \"v\" DESC NULLS LAST) AS \"neve_rn\" FROM read_parquet(['s3://b/t/_data/k=it''s/a.parquet'], union_by_name = true, hive_partitioning = false, filename = 'neve_file')) WHERE \"neve_rn\" = 1 AND NOT coalesce(\"del\", false))"
        );
        assert_eq!(
            relation(&schema, None, Scan::DuckDb { urls: &urls }).unwrap(),
            "read_parquet(['s3://b/t/_data/k=it''s/a.parquet'], union_by_name = true, hive_partitioning = false)"
        );
        let a: MergeSpec = "aggregate(key = [k], sum = [v])".parse().unwrap();
        let ch = Scan::ClickHouse {
            function: "s3",
            url: "http://h/b/t/{x,y}",
        };
        assert_eq!(
            relation(&schema, Some(&a), ch).unwrap(),
            "(SELECT `k`, sum(`v`) AS `v`, any_respect_nulls(`del`) AS `del` FROM (SELECT *, _path AS `neve_file` FROM s3('http://h/b/t/{x,y}', 'Parquet') SETTINGS use_hive_partitioning = 0) GROUP BY replaceRegexpOne(`neve_file`, '/[^/]*$', ''), `k`)"
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
        let urls = urls();
        assert_eq!(
            relation(&schema, None, Scan::DuckDb { urls: &urls }).unwrap(),
            "(SELECT * REPLACE (CAST(\"a\" AS UTINYINT) AS \"a\", CAST(\"c\" AS UINTEGER) AS \"c\") FROM read_parquet(['s3://b/t/_data/k=it''s/a.parquet'], union_by_name = true, hive_partitioning = false))"
        );
        let d: MergeSpec = "dedupe(key = [k])".parse().unwrap();
        let ch = Scan::ClickHouse {
            function: "file",
            url: "/t/a\\b's.parquet",
        };
        assert_eq!(
            relation(&schema, Some(&d), ch).unwrap(),
            "(SELECT `k`, `a`, `c`, `u` FROM (SELECT *, row_number() OVER (PARTITION BY replaceRegexpOne(`neve_file`, '/[^/]*$', ''), `k`) AS `neve_rn` FROM (SELECT * REPLACE (CAST(`a` AS UInt8) AS `a`, CAST(`c` AS Nullable(UInt32)) AS `c`), _path AS `neve_file` FROM file('/t/a\\\\b\\'s.parquet', 'Parquet') SETTINGS use_hive_partitioning = 0)) WHERE `neve_rn` = 1)"
        );
    }

    #[test]
    fn helper_columns_never_take_a_column_s_name() {
        let schema = TableSchema::new(vec![
            Column::new("k", ColumnType::Int64, true),
            Column::new("Neve_File", ColumnType::String, true),
            Column::new("neve_rn", ColumnType::Int64, true),
            Column::new("a`\\b", ColumnType::Float64, true),
        ]);
        let r: MergeSpec = "replace(key = [k], version = \"a`\\b\")".parse().unwrap();
        let urls = urls();
        let sql = relation(&schema, Some(&r), Scan::DuckDb { urls: &urls }).unwrap();
        assert!(sql.contains("filename = 'neve_file_'"), "{sql}");
        assert!(sql.contains("AS \"neve_rn_\" FROM"), "{sql}");
        let ch = Scan::ClickHouse {
            function: "s3",
            url: "u",
        };
        let sql = relation(&schema, Some(&r), ch).unwrap();
        // The version's backtick and backslash stay inside its quotes; a NaN version wins.
        assert!(
            sql.contains(
                "ORDER BY isNaN(`a\\`\\\\b`) DESC NULLS LAST, `a\\`\\\\b` DESC NULLS LAST"
            ),
            "{sql}"
        );
        let hidden = TableSchema::new(vec![
            Column::new("k", ColumnType::Int64, true),
            Column::new("_path", ColumnType::String, true),
        ]);
        let e = relation(&hidden, Some(&r), ch).unwrap_err();
        assert!(matches!(e, Error::EngineCannotMerge { .. }), "{e}");
        assert!(relation(&hidden, None, ch).is_ok());
    }
}
