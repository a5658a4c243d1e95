//! `neve files`: the alive files of a snapshot, for people and for other engines.

use std::io::Write;

use neve_core::merge::{relation, Scan};
use neve_core::storage::StoreKind;
use neve_core::Table;

use crate::cli::{FilesArgs, FilesFormat};
use crate::error::Result;

pub async fn run(a: FilesArgs) -> Result<()> {
    let table = Table::at(&a.table)?;
    let s = table.snapshot_as_of(super::parse_as_of(&a.as_of)?).await?;
    let loc = table.location();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    // Tables with merge semantics are read one row per key, unless `--raw`.
    let merge = s.metadata.merge.as_ref().filter(|_| !a.raw);
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
                let urls: Vec<String> = s.files.values().map(|f| loc.file_url(&f.path)).collect();
                let rel = relation(&s.metadata.schema, merge, Scan::DuckDb { urls: &urls })?;
                writeln!(out, "{rel}")?;
            }
        }
        FilesFormat::Clickhouse => {
            let rels: Vec<&str> = s.files.values().map(|f| f.path.as_str()).collect();
            let function = if matches!(loc.kind, StoreKind::S3 { .. }) {
                "s3"
            } else {
                "file"
            };
            let url = match rels.as_slice() {
                [] => String::new(),
                [one] => loc.http_url(one),
                many => {
                    // One URL with a {a,b,...} alternation of the paths under the table root,
                    // each spelled as its own URL spells it (an escaped partition value's `%`
                    // encoded as the store names it).
                    let root = loc.http_url("");
                    let root = root.trim_end_matches('/');
                    let parts: Vec<String> = many
                        .iter()
                        .map(|r| {
                            let url = loc.http_url(r);
                            match url.strip_prefix(root) {
                                Some(rest) => rest.trim_start_matches('/').to_string(),
                                None => url,
                            }
                        })
                        .collect();
                    format!("{root}/{{{}}}", parts.join(","))
                }
            };
            let scan = Scan::ClickHouse {
                function,
                url: &url,
            };
            writeln!(out, "{}", relation(&s.metadata.schema, merge, scan)?)?;
        }
    }
    out.flush()?;
    Ok(())
}
