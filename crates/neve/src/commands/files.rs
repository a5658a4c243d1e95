//! `neve files`: the alive files of a snapshot, for people and for other engines.

use std::io::Write;

use neve_core::storage::StoreKind;
use neve_core::Table;

use crate::cli::{FilesArgs, FilesFormat};
use crate::error::Result;

pub async fn run(a: FilesArgs) -> Result<()> {
    let table = Table::at(&a.table)?;
    let s = table.snapshot_as_of(super::parse_as_of(&a.as_of)?).await?;
    let loc = table.location();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let quote = |u: &str| format!("'{}'", u.replace('\'', "''"));
    match a.format {
        FilesFormat::Plain => {
            for f in s.files.values() {
                writeln!(out, "{}", loc.file_url(&f.path))?;
            }
        }
        FilesFormat::Json => {
            writeln!(out, "{}", neve_core::describe::files(loc, &s))?;
        }
        FilesFormat::Duckdb => {
            if s.files.is_empty() {
                // An empty list is an error in DuckDB; an empty relation of the same shape is not known here.
                writeln!(out, "read_parquet([])")?;
            } else {
                let list: Vec<String> = s
                    .files
                    .values()
                    .map(|f| quote(&loc.file_url(&f.path)))
                    .collect();
                writeln!(
                    out,
                    "read_parquet([{}], union_by_name = true)",
                    list.join(", ")
                )?;
            }
        }
        FilesFormat::Clickhouse => {
            let rels: Vec<&str> = s.files.values().map(|f| f.path.as_str()).collect();
            let func = if matches!(loc.kind, StoreKind::S3 { .. }) {
                "s3"
            } else {
                "file"
            };
            let url = match rels.as_slice() {
                [] => String::new(),
                [one] => loc.http_url(one),
                many => {
                    // One URL with a {a,b,...} alternation of the paths under the table root.
                    let root = loc.http_url("");
                    let root = root.trim_end_matches('/');
                    format!("{root}/{{{}}}", many.join(","))
                }
            };
            writeln!(out, "{func}({}, 'Parquet')", quote(&url))?;
        }
    }
    out.flush()?;
    Ok(())
}
