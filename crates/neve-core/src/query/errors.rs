//! DataFusion's errors as neve's: the kind (what the user did, the data, the store, or a
//! fault), the message, and where in the SQL text it happened.

use arrow::error::ArrowError;
use datafusion::error::DataFusionError;

use crate::error::{Error, ErrorKind};

/// The parser names the line and column of every token but the end: a statement cut short
/// says where it ends, as the others say where they are.
pub(super) fn at_end(e: Error, sql: &str) -> Error {
    match e {
        Error::SqlSyntax { message } if message.ends_with("found: EOF") => {
            let end = sql.trim_end();
            let line = end.matches('\n').count() + 1;
            let column = end.rsplit('\n').next().unwrap_or("").chars().count() + 1;
            Error::SqlSyntax {
                message: format!(
                    "{message} at the end of the statement (line {line}, column {column})"
                ),
            }
        }
        e => e,
    }
}

/// Map a DataFusion error to neve's error type, keeping what the user needs: the kind, the
/// message, and where in the SQL text it happened.
pub fn query_error(e: DataFusionError) -> Error {
    let position = e
        .diagnostic()
        .and_then(|d| d.span)
        .map(|s| format!(" (at line {}, column {})", s.start.line, s.start.column))
        .unwrap_or_default();
    match e.find_root() {
        DataFusionError::SQL(p, _) => Error::SqlSyntax {
            message: p.to_string(),
        },
        DataFusionError::ObjectStore(s) => Error::QueryStorage {
            message: s.to_string(),
        },
        DataFusionError::Plan(m) if m.starts_with("table '") && m.contains("not found") => {
            Error::UnknownTable {
                message: format!("{m}{position}"),
            }
        }
        DataFusionError::Plan(_)
        | DataFusionError::SchemaError(..)
        | DataFusionError::NotImplemented(_)
        | DataFusionError::Configuration(_) => {
            let message = root_message(&e);
            // `user.plan`: `user` parses as the SQL keyword (CURRENT_USER), not the column.
            let hint = if message.contains("Dot access not supported") {
                "; a column named like a SQL keyword (user, date, time...) needs quotes: \"user\".plan"
            } else {
                ""
            };
            Error::InvalidQuery {
                message: format!("{message}{position}{hint}"),
            }
        }
        // The data, not neve: a division by zero, an overflow, a cast or parse of a value.
        DataFusionError::ArrowError(a, _)
            if matches!(
                a.as_ref(),
                ArrowError::DivideByZero
                    | ArrowError::ArithmeticOverflow(_)
                    | ArrowError::CastError(_)
                    | ArrowError::ParseError(_)
            ) =>
        {
            Error::InvalidQuery {
                message: format!("{}{position}", root_message(&e)),
            }
        }
        // A function refusing its arguments as it runs (a pattern that does not compile, a
        // string that does not parse as the format given): DataFusion's runtime errors; its
        // own faults are `Internal`, neve's `External`.
        DataFusionError::Execution(_) => Error::InvalidQuery {
            message: format!("{}{position}", root_message(&e)),
        },
        DataFusionError::External(x) if is_regex_error(x.as_ref()) => Error::InvalidQuery {
            message: format!("{}{position}", root_message(&e)),
        },
        DataFusionError::ArrowError(a, _) if matches!(a.as_ref(), ArrowError::ExternalError(x) if is_regex_error(x.as_ref())) => {
            Error::InvalidQuery {
                message: format!("{}{position}", root_message(&e)),
            }
        }
        DataFusionError::ResourcesExhausted(m) => Error::QueryOutOfMemory {
            message: m.to_string(),
        },
        // neve's own error raised inside the plan (a merged read's sum that overflows, a
        // table that failed to load): classed as that error is, not as a fault of the query.
        DataFusionError::External(x) if x.downcast_ref::<Error>().is_some() => {
            let inner = x.downcast_ref::<Error>().expect("checked");
            let message = inner.to_string();
            match inner.kind() {
                ErrorKind::BadInput => Error::InvalidQuery { message },
                ErrorKind::Unavailable => Error::QueryStorage { message },
                ErrorKind::NotFound | ErrorKind::Conflict | ErrorKind::Internal => {
                    Error::QueryFailed { message }
                }
            }
        }
        // The store failing under a scan: DataFusion's Parquet reader wraps the store's error
        // in its own (data reads) or only in text (a footer's read).
        _ if store_failure(&e) => Error::QueryStorage {
            message: root_message(&e),
        },
        _ => Error::QueryFailed {
            message: root_message(&e),
        },
    }
}

/// Whether an object store error caused `e`: found in its chain of sources, or named in the
/// text of the reader's footer error ("Failed to fetch metadata for file …: Object Store
/// error: …"), which keeps no source.
fn store_failure(e: &DataFusionError) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if c.downcast_ref::<object_store::Error>().is_some() {
            return true;
        }
        if let Some(parquet::errors::ParquetError::General(m)) = c.downcast_ref() {
            if m.starts_with("Failed to fetch metadata") && m.contains(": Object Store error: ") {
                return true;
            }
        }
        cause = c.source();
    }
    false
}

/// A pattern that does not compile: the regex crate's error, or the parser's that DataFusion's
/// simplifier meets first for a literal pattern.
fn is_regex_error(e: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    e.downcast_ref::<regex::Error>().is_some() || e.downcast_ref::<regex_syntax::Error>().is_some()
}

fn root_message(e: &DataFusionError) -> String {
    e.find_root().strip_backtrace()
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::errors::ParquetError;

    fn gone() -> object_store::Error {
        object_store::Error::NotFound {
            path: "t/_data/p.parquet".into(),
            source: "gone".into(),
        }
    }

    fn read() -> DataFusionError {
        DataFusionError::ParquetError(Box::new(ParquetError::External(Box::new(gone()))))
    }

    /// A store failing under a scan is the store's error (503, retried), not a fault (500).
    #[test]
    fn a_store_failure_under_a_scan_is_a_storage_error() {
        let footer = DataFusionError::ParquetError(Box::new(ParquetError::General(format!(
            "Failed to fetch metadata for file t/_data/p.parquet: {}",
            DataFusionError::ObjectStore(Box::new(gone()))
        ))));
        let in_context = DataFusionError::Context("scan".into(), Box::new(read()));
        for e in [read(), footer, in_context] {
            let e = query_error(e);
            assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
        }
        // A corrupt footer is not the store's.
        let corrupt = DataFusionError::ParquetError(Box::new(ParquetError::General(
            "Failed to fetch metadata for file p.parquet: Parquet error: bad magic".into(),
        )));
        assert_eq!(query_error(corrupt).kind(), ErrorKind::Internal);
    }
}
