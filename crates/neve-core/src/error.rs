//! The one public error type of neve-core. Variants are named for what happened so that the
//! CLI and server can map them to exit codes and HTTP statuses without parsing messages.

use std::path::PathBuf;

/// Result alias used across neve-core.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in neve-core.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The table address could not be understood (bad URL, unsupported scheme, missing bucket).
    #[error("invalid table location '{location}': {reason}")]
    InvalidLocation { location: String, reason: String },

    /// No table exists at the location (no `_log/` entries).
    #[error("no neve table at '{location}' (create it with `neve create {location}`)")]
    TableNotFound { location: String },

    /// `create` found a table already there.
    #[error("a table already exists at '{location}'")]
    TableExists { location: String },

    /// Time travel to a version that does not exist or whose log entries were cleaned.
    #[error("version {version} is not available: {reason}")]
    VersionNotFound { version: u64, reason: String },

    /// Time travel to a timestamp outside the retained history.
    #[error("no version at or before {timestamp}: {reason}")]
    TimestampNotFound { timestamp: String, reason: String },

    /// An input file could not be opened or read.
    #[error("cannot read input '{input}': {source}")]
    InputUnreadable {
        input: String,
        #[source]
        source: std::io::Error,
    },

    /// The input format could not be determined or is not supported.
    #[error(
        "unknown input format for '{input}': {reason} (use --format parquet|csv|ndjson|json|arrow)"
    )]
    UnknownFormat { input: String, reason: String },

    /// The input is malformed: a line that does not parse, a value of the wrong type.
    #[error("invalid input in '{input}'{}: {}", location_suffix(*line, column.as_deref()), clip(message, 1000))]
    InvalidInput {
        input: String,
        /// 1-based line (CSV, NDJSON) or row number where known.
        line: Option<u64>,
        column: Option<String>,
        message: String,
    },

    /// A column's type in the input cannot be reconciled with the table's type.
    #[error("schema conflict on column '{column}': table has {table_type}, input has {input_type}{}", hint.as_deref().map(|h| format!(" ({h})")).unwrap_or_default())]
    SchemaConflict {
        column: String,
        table_type: String,
        input_type: String,
        hint: Option<String>,
    },

    /// Strict schema mode and the input carries columns the table does not have.
    #[error(
        "table schema is strict and the input has new column(s): {}",
        clip(columns, 1000)
    )]
    NewColumnRejected { columns: String },

    /// A schema definition (`--schema`, `neve alter`) that cannot be parsed.
    #[error("invalid schema '{spec}': {reason}")]
    InvalidSchema { spec: String, reason: String },

    /// A value that cannot be stored in its column without changing it: a fraction into an
    /// integer, a number out of range, text that does not parse, a null in a `not null` column.
    #[error(
        "invalid value in '{input}' at {position}, column '{column}': {} {reason}",
        clip(value, 200)
    )]
    InvalidValue {
        input: String,
        /// `line N` (CSV, NDJSON), `element N` (JSON array) or `row N` (Arrow, Parquet).
        position: String,
        /// The column's path (`user.plan`, `tags[]`).
        column: String,
        /// The value as the input spells it (quoted when text), or `null`.
        value: String,
        /// What is wrong, naming the expected type.
        reason: String,
    },

    /// A schema change (`neve alter`) that is not safe on this table.
    #[error("cannot alter column '{column}': {reason}")]
    UnsafeAlter { column: String, reason: String },

    /// A column type neve cannot store yet.
    #[error("column '{column}' has unsupported type {data_type}")]
    UnsupportedType { column: String, data_type: String },

    /// An input lacks a column the table is partitioned by.
    #[error("input '{input}' has no column '{column}', which the table is partitioned by")]
    MissingPartitionColumn { input: String, column: String },

    /// A partition spec that cannot be parsed or applied.
    #[error("invalid partition spec '{spec}': {reason}")]
    InvalidPartitionSpec { spec: String, reason: String },

    /// A sort key that cannot be used.
    #[error("invalid sort key '{column}': {reason}")]
    InvalidSortKey { column: String, reason: String },

    /// A merge spec (`--merge`) that cannot be parsed or does not fit the table.
    #[error("invalid merge spec '{spec}': {reason}")]
    InvalidMergeSpec { spec: String, reason: String },

    /// The sum of a key's rows overflows the column's type (an `aggregate` table).
    #[error("the merged sum of column '{column}' overflows {data_type} ({values})")]
    MergedSumOverflow {
        column: String,
        data_type: String,
        values: String,
    },

    /// A setting value that is out of range or malformed.
    #[error("invalid setting '{name}': {reason}")]
    InvalidSetting { name: String, reason: String },

    /// A concurrent commit made this one impossible (e.g. it changed the partition spec).
    #[error("commit conflict at version {version}: {reason}")]
    CommitConflict { version: u64, reason: String },

    /// A concurrent commit changed the schema so that this write's files would be misread (it
    /// gave their new columns' ids to other columns, or renamed or dropped a column they hold).
    /// Nothing was committed; inserting again adapts to the new schema.
    #[error("the table's schema changed concurrently (version {version}): {reason}")]
    ConcurrentSchemaChange { version: u64, reason: String },

    /// A request's idempotency key is already in the log (a retry that another instance, or
    /// an earlier attempt, committed): nothing was committed for it.
    #[error("request '{key}' was committed already, at version {version} ({rows} rows)")]
    RequestCommitted {
        key: String,
        version: u64,
        rows: u64,
        /// The committed request's content fingerprint, when it recorded one.
        digest: Option<String>,
    },

    /// The commit lost the race too many times in a row.
    #[error("gave up committing after {attempts} attempts (too much contention)")]
    CommitRetriesExhausted { attempts: u32 },

    /// The commit's PUT may have landed, and reading the log back could not tell. The
    /// files it names are kept (gc collects them if it did not land); repeat the write with
    /// its request key to learn which, or read the table.
    #[error("commit of version {version} may or may not have landed (the store did not answer: {reason}); its files are kept")]
    CommitOutcomeUnknown { version: u64, reason: String },

    /// A log object exists but cannot be understood.
    #[error("corrupt table log at '{path}': {reason}")]
    CorruptLog { path: String, reason: String },

    /// The table was written by a newer neve with a format this one does not know.
    #[error("table format version {found} is newer than this neve supports ({supported})")]
    UnsupportedFormatVersion { found: u32, supported: u32 },

    /// The object store failed (network, permissions, missing bucket...). The message carries
    /// the causes too: "connection refused" is in a cause, not in object_store's own text.
    #[error("storage error: {}", storage_message(source))]
    Storage {
        #[from]
        source: object_store::Error,
    },

    /// Parquet encoding or decoding failed.
    #[error("parquet error: {source}")]
    Parquet {
        #[from]
        source: parquet::errors::ParquetError,
    },

    /// An Arrow compute kernel failed.
    #[error("arrow error: {source}")]
    Arrow {
        #[from]
        source: arrow::error::ArrowError,
    },

    /// A local file operation outside input reading failed.
    #[error("i/o error on '{}': {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// Writing a query's result to its destination failed (a closed pipe, a full disk).
    #[error("writing the result failed: {source}")]
    ResultWrite {
        #[source]
        source: std::io::Error,
    },

    /// The result's format cannot hold its types (CSV and nested values): the query is fine,
    /// another format answers it.
    #[error("the result cannot be written as {format}: {reason}; choose another format (arrow, parquet, json)")]
    ResultUnwritable {
        format: &'static str,
        reason: String,
    },

    /// The SQL text does not parse.
    #[error("SQL syntax error: {message}")]
    SqlSyntax { message: String },

    /// The query parses but cannot be planned: unknown column, wrong types, unsupported.
    #[error("invalid query: {message}")]
    InvalidQuery { message: String },

    /// The query names a table that is not registered.
    #[error("{message}")]
    UnknownTable { message: String },

    /// Reading data files failed during a query.
    #[error("storage error during query: {message}")]
    QueryStorage { message: String },

    /// The query needed more memory than its limit, where it could not spill to disk.
    #[error("query out of memory: {message}")]
    QueryOutOfMemory { message: String },

    /// The query failed while running.
    #[error("query failed: {message}")]
    QueryFailed { message: String },

    /// A partition named on the command line has no files in the table.
    #[error("no partition '{partition}' in the table (partitions: {known})")]
    PartitionNotFound { partition: String, known: String },

    /// A file named for a read of one version is not one of that version's files.
    #[error("file '{path}' is not alive at version {version}")]
    FileNotAlive { path: String, version: u64 },

    /// The table's schema or partitioning has something Iceberg cannot describe (a table
    /// with `iceberg=true` refuses it at create, alter and insert).
    #[error("column '{column}' cannot be described in Iceberg metadata: {reason}")]
    IcebergUnsupported { column: String, reason: String },

    /// A table with `aggregate` merge semantics and `iceberg=true`: a key's row is folded
    /// from its stored rows, which Iceberg cannot describe (`replace` and `dedupe` are
    /// described with position deletes).
    #[error(
        "a table with merge semantics {spec} cannot write Iceberg metadata: its rows are folded \
         from the stored rows of each key, which Iceberg readers cannot do; read it with \
         Spark's `neve` source, or the SQL `neve files --format duckdb|clickhouse` prints"
    )]
    IcebergMergeSemantics { spec: String },

    /// `neve iceberg sync` on a table that does not write Iceberg metadata.
    #[error(
        "table '{table}' does not write Iceberg metadata (enable it: neve iceberg enable {table})"
    )]
    IcebergNotEnabled { table: String },

    /// Iceberg metadata could not be encoded, or what is in `metadata/` cannot be read back.
    #[error("Iceberg metadata '{path}': {reason}")]
    IcebergMetadata { path: String, reason: String },

    /// Other syncs kept writing the next Iceberg metadata file first.
    #[error(
        "Iceberg sync lost the race for the next metadata file {attempts} times; run it again"
    )]
    IcebergSyncContended { attempts: u32 },

    /// A sync of position deletes would hold more distinct keys than it numbers (about four
    /// billion).
    #[error("Iceberg position deletes: more than {limit} distinct keys to weigh at once")]
    IcebergTooManyKeys { limit: u64 },

    /// The SQL another engine would run to read the table as neve does cannot be written:
    /// a column hides what that SQL needs of the engine (ClickHouse's `_path`).
    #[error("cannot write {engine} SQL that merges this table's rows: {reason}")]
    EngineCannotMerge { engine: String, reason: String },

    /// A write's files are older than half the shortest gc grace in force, so a cleaner may
    /// have deleted them: nothing was committed. Retrying writes them anew; one that always
    /// takes this long needs a longer grace (or, for a merge, less input a round).
    #[error(
        "this {what}'s files were written {age_s:.1}s ago, over half {whose} ({grace_s:.1}s), so gc may have deleted them; nothing was committed, {what} again"
    )]
    WriteOutlivedGrace {
        what: String,
        whose: String,
        age_s: f64,
        grace_s: f64,
    },

    /// A background task panicked or was cancelled.
    #[error("internal task failed: {0}")]
    TaskFailed(String),
}

/// A store's error with its causes, and what a failed credentials lookup means: with no keys
/// in the environment or the options, object_store asks the EC2 metadata service, whose
/// refusal otherwise reads as a network error.
fn storage_message(e: &object_store::Error) -> String {
    let text = with_causes(e);
    if text.contains("169.254.169.254") {
        return format!(
            "{text} (no AWS credentials were given, so the EC2 instance metadata service was asked: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or the storage options access_key_id and secret_access_key)"
        );
    }
    text
}

/// An error's text followed by each cause's that it does not already contain.
pub(crate) fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let t = c.to_string();
        if !t.is_empty() && !text.contains(&t) {
            text.push_str(": ");
            text.push_str(&t);
        }
        cause = c.source();
    }
    text
}

/// `s` cut to about `max` bytes: a message echoes input, which can be megabytes.
pub fn clip(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max {
        return s.into();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} more bytes)", &s[..end], s.len() - end).into()
}

fn location_suffix(line: Option<u64>, column: Option<&str>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(" at line {l}, column '{c}'"),
        (Some(l), None) => format!(" at line {l}"),
        (None, Some(c)) => format!(", column '{c}'"),
        (None, None) => String::new(),
    }
}

/// Coarse classes of errors, for exit codes and HTTP statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The caller's input or request is wrong (4xx, exit 65).
    BadInput,
    /// Something named does not exist (404, exit 66).
    NotFound,
    /// The request conflicts with the table's state (409, exit 75).
    Conflict,
    /// Storage or I/O failure (503, exit 74).
    Unavailable,
    /// A bug or corrupt state (500, exit 70).
    Internal,
}

impl Error {
    /// The class of this error.
    pub fn kind(&self) -> ErrorKind {
        use Error::*;
        match self {
            InvalidLocation { .. }
            | UnknownFormat { .. }
            | InvalidInput { .. }
            | SchemaConflict { .. }
            | NewColumnRejected { .. }
            | UnsupportedType { .. }
            | InvalidSchema { .. }
            | InvalidValue { .. }
            | UnsafeAlter { .. }
            | MissingPartitionColumn { .. }
            | InvalidPartitionSpec { .. }
            | InvalidSortKey { .. }
            | InvalidMergeSpec { .. }
            | MergedSumOverflow { .. }
            | InvalidSetting { .. }
            | IcebergUnsupported { .. }
            | IcebergMergeSemantics { .. }
            | IcebergNotEnabled { .. }
            | EngineCannotMerge { .. }
            | SqlSyntax { .. }
            | InvalidQuery { .. }
            | ResultUnwritable { .. }
            | QueryOutOfMemory { .. } => ErrorKind::BadInput,
            TableNotFound { .. }
            | VersionNotFound { .. }
            | TimestampNotFound { .. }
            | InputUnreadable { .. }
            | UnknownTable { .. }
            | PartitionNotFound { .. }
            | FileNotAlive { .. } => ErrorKind::NotFound,
            TableExists { .. }
            | CommitConflict { .. }
            | ConcurrentSchemaChange { .. }
            | RequestCommitted { .. }
            | WriteOutlivedGrace { .. }
            | CommitRetriesExhausted { .. }
            | IcebergSyncContended { .. } => ErrorKind::Conflict,
            Storage { .. }
            | Io { .. }
            | ResultWrite { .. }
            | QueryStorage { .. }
            | CommitOutcomeUnknown { .. } => ErrorKind::Unavailable,
            CorruptLog { .. }
            | UnsupportedFormatVersion { .. }
            | Parquet { .. }
            | Arrow { .. }
            | QueryFailed { .. }
            | IcebergMetadata { .. }
            | IcebergTooManyKeys { .. }
            | TaskFailed(_) => ErrorKind::Internal,
        }
    }

    /// Process exit code (sysexits.h conventions). A table that exists is 73 (cannot create),
    /// not the conflicts' 75 (try again): running the same create again fails the same way.
    pub fn exit_code(&self) -> i32 {
        if let Error::TableExists { .. } = self {
            return 73;
        }
        match self.kind() {
            ErrorKind::BadInput => 65,
            ErrorKind::NotFound => 66,
            ErrorKind::Conflict => 75,
            ErrorKind::Unavailable => 74,
            ErrorKind::Internal => 70,
        }
    }

    /// HTTP status for the server.
    pub fn http_status(&self) -> u16 {
        match self.kind() {
            ErrorKind::BadInput => 400,
            ErrorKind::NotFound => 404,
            ErrorKind::Conflict => 409,
            ErrorKind::Unavailable => 503,
            ErrorKind::Internal => 500,
        }
    }

    pub(crate) fn corrupt(path: impl ToString, reason: impl ToString) -> Self {
        Error::CorruptLog {
            path: path.to_string(),
            reason: reason.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_echo_at_most_a_clip_of_the_input() {
        let e = Error::InvalidValue {
            input: "body".into(),
            position: "line 1".into(),
            column: "s".into(),
            value: format!("\"{}\"", "é".repeat(500_000)),
            reason: "is not a number".into(),
        };
        let m = e.to_string();
        assert!(m.len() < 400, "{}", m.len());
        assert!(m.contains("more bytes) is not a number"), "{m}");
        assert_eq!(clip("short", 10), "short");
    }
}
