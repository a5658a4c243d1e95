//! The server's errors, each with its HTTP status and a JSON body that says what happened.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use neve_core::ErrorKind;

/// What went wrong with a request, or with starting the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("invalid configuration: {reason}")]
    InvalidConfig { reason: String },

    #[error("missing or unknown token")]
    Unauthorized,

    #[error("the token's role ({role}) may not {action}")]
    Forbidden { role: String, action: String },

    #[error("no table '{table}'")]
    TableNotFound { table: String },

    #[error("invalid table name '{}': use at most 128 letters, digits, '_' and '-', not starting with '_' (a table's own folders are '_log' and '_data')", neve_core::error::clip(name, 200))]
    InvalidTableName { name: String },

    /// A namespace SQL could not name: `public` is the root's schema, `information_schema`
    /// the catalog's.
    #[error("namespace '{name}' is a schema SQL reserves (public, information_schema): its tables could not be queried; choose another name")]
    ReservedNamespace { name: String },

    #[error("invalid request: {reason}")]
    BadRequest { reason: String },

    #[error("request body over {limit} bytes")]
    BodyTooLarge { limit: u64 },

    /// A request that holds more memory once decoded than the whole ingest budget: no retry
    /// can ever fit it, so 413, where a full budget is 429.
    #[error("the request holds {bytes} bytes once decoded, more than ingest.max_pending_bytes ({limit}) allows all queued requests together: send it in smaller requests")]
    RequestTooLarge { bytes: u64, limit: u64 },

    #[error("unsupported content type '{content_type}': use application/x-ndjson, application/json, text/csv, application/vnd.apache.arrow.stream or application/vnd.apache.parquet")]
    UnsupportedMediaType { content_type: String },

    #[error("too much data waiting to be committed; retry in {retry_after_s} s")]
    Overloaded { retry_after_s: u64 },

    /// An `Idempotency-Key` sent again with other content: not a retry, and not committed.
    #[error("Idempotency-Key '{key}' was used by a request with other content: a retry sends the same request, a new request needs a new key")]
    IdempotencyKeyReused { key: String },

    /// No route has this path.
    #[error("no such endpoint (see docs/SERVER.md)")]
    NoSuchRoute,

    /// A request refused before a handler ran (axum's own checks: a query string that does
    /// not parse, a method the route does not take).
    #[error("{reason}")]
    Refused { status: StatusCode, reason: String },

    #[error("the server is shutting down")]
    ShuttingDown,

    #[error("{limit} queries are running, the most this server runs at once; retry in 1 s")]
    TooManyQueries { limit: usize },

    #[error("the query ran over its time limit of {}", humantime::format_duration(*after))]
    QueryTimeout { after: std::time::Duration },

    #[error("cannot answer as '{accept}': ask for one of {known}")]
    NotAcceptable { accept: String, known: String },

    /// The asked format cannot hold the result's types (CSV and nested values, Parquet and
    /// some intervals): found on the first batch, before anything is answered.
    #[error("the result cannot be written as {media_type}: {reason}; ask for application/vnd.apache.arrow.stream or application/json")]
    ResultNotWritable {
        media_type: &'static str,
        reason: String,
    },

    /// The flush (group commit) that held the request failed; none of its rows are visible.
    #[error("commit failed: {reason}")]
    CommitFailed {
        kind: ErrorKind,
        /// The code of the error that failed it (`schema_conflict`, `storage_unavailable`…),
        /// so a client tells these apart as it does when a request fails alone.
        code: &'static str,
        reason: String,
    },

    /// Line protocol: one measurement's rows were refused (or failed to commit).
    #[error("measurement '{measurement}': {source}")]
    InMeasurement {
        measurement: String,
        #[source]
        source: Box<Error>,
    },

    /// The table refused the request (bad rows, schema conflict, ...) or failed storing it.
    #[error(transparent)]
    Table(#[from] neve_core::Error),

    /// A TLS certificate or key that cannot be read or used.
    #[error("TLS: {}: {reason}", path.display())]
    Tls {
        path: std::path::PathBuf,
        reason: String,
    },

    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<neve_proxy::Error> for Error {
    /// The proxy's errors the server meets: starting its TLS.
    fn from(e: neve_proxy::Error) -> Self {
        match e {
            neve_proxy::Error::Tls { path, reason } => Error::Tls { path, reason },
            other => Error::InvalidConfig {
                reason: other.to_string(),
            },
        }
    }
}

impl Error {
    pub fn status(&self) -> StatusCode {
        match self {
            Error::InvalidConfig { .. } | Error::Listen { .. } | Error::Tls { .. } => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
            Error::Unauthorized => StatusCode::UNAUTHORIZED,
            Error::Forbidden { .. } => StatusCode::FORBIDDEN,
            Error::TableNotFound { .. } => StatusCode::NOT_FOUND,
            Error::InvalidTableName { .. }
            | Error::ReservedNamespace { .. }
            | Error::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Error::BodyTooLarge { .. } | Error::RequestTooLarge { .. } => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            Error::UnsupportedMediaType { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Error::Overloaded { .. } | Error::TooManyQueries { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            Error::QueryTimeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            Error::NotAcceptable { .. } | Error::ResultNotWritable { .. } => {
                StatusCode::NOT_ACCEPTABLE
            }
            Error::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            Error::NoSuchRoute => StatusCode::NOT_FOUND,
            Error::Refused { status, .. } => *status,
            Error::IdempotencyKeyReused { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Error::CommitFailed { kind, .. } => kind_status(*kind),
            Error::Table(e) => kind_status(e.kind()),
            Error::InMeasurement { source, .. } => source.status(),
        }
    }

    /// The same error for a second request that shared its fate (same idempotency key).
    pub fn duplicate(&self) -> Error {
        // A reused key is the twin's answer too: 422, as for the first.
        if let Error::IdempotencyKeyReused { key } = self {
            return Error::IdempotencyKeyReused { key: key.clone() };
        }
        Error::CommitFailed {
            kind: match self.status().as_u16() {
                404 => ErrorKind::NotFound,
                409 => ErrorKind::Conflict,
                400..=499 => ErrorKind::BadInput,
                503 => ErrorKind::Unavailable,
                _ => ErrorKind::Internal,
            },
            code: self.code(),
            reason: self.to_string(),
        }
    }

    /// A short machine-readable name of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidConfig { .. } => "invalid_config",
            Error::Listen { .. } => "listen",
            Error::Tls { .. } => "tls",
            Error::Unauthorized => "unauthorized",
            Error::Forbidden { .. } => "forbidden",
            Error::TableNotFound { .. } => "table_not_found",
            Error::InvalidTableName { .. } | Error::ReservedNamespace { .. } => {
                "invalid_table_name"
            }
            Error::BadRequest { .. } => "bad_request",
            Error::BodyTooLarge { .. } => "body_too_large",
            Error::RequestTooLarge { .. } => "request_too_large",
            Error::UnsupportedMediaType { .. } => "unsupported_media_type",
            Error::Overloaded { .. } => "overloaded",
            Error::ShuttingDown => "shutting_down",
            Error::NoSuchRoute => "no_such_route",
            Error::Refused { status, .. } => match status.as_u16() {
                405 => "method_not_allowed",
                414 => "uri_too_long",
                s if s >= 500 => "internal",
                _ => "bad_request",
            },
            Error::IdempotencyKeyReused { .. } => "idempotency_key_reused",
            Error::TooManyQueries { .. } => "too_many_queries",
            Error::QueryTimeout { .. } => "query_timeout",
            Error::NotAcceptable { .. } | Error::ResultNotWritable { .. } => "not_acceptable",
            Error::CommitFailed { code, .. } => code,
            Error::InMeasurement { source, .. } => source.code(),
            Error::Table(e) => core_code(e),
        }
    }

    /// The JSON body: `{"error": {"code", "message", "line"?, "column"?}}`.
    pub fn body(&self) -> serde_json::Value {
        let mut e = serde_json::json!({"code": self.code(), "message": self.to_string()});
        let (line, column) = match self.core() {
            Some(neve_core::Error::InvalidInput { line, column, .. }) => (*line, column.clone()),
            Some(neve_core::Error::InvalidValue {
                position, column, ..
            }) => (
                position.strip_prefix("line ").and_then(|n| n.parse().ok()),
                Some(column.clone()),
            ),
            _ => (None, None),
        };
        if let Some(l) = line {
            e["line"] = l.into();
        }
        if let Some(c) = column {
            e["column"] = c.into();
        }
        if let Error::InMeasurement { measurement, .. } = self {
            e["measurement"] = measurement.clone().into();
        }
        serde_json::json!({ "error": e })
    }

    /// The table's own error behind this one, if any.
    fn core(&self) -> Option<&neve_core::Error> {
        match self {
            Error::Table(e) => Some(e),
            Error::InMeasurement { source, .. } => source.core(),
            _ => None,
        }
    }
}

fn kind_status(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::BadInput => StatusCode::BAD_REQUEST,
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Conflict => StatusCode::CONFLICT,
        ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut r = (status, axum::Json(self.body())).into_response();
        match &self {
            Error::Overloaded { retry_after_s } => {
                r.headers_mut()
                    .insert("retry-after", HeaderValue::from(*retry_after_s));
            }
            Error::TooManyQueries { .. } => {
                r.headers_mut()
                    .insert("retry-after", HeaderValue::from_static("1"));
            }
            Error::Unauthorized => {
                r.headers_mut()
                    .insert("www-authenticate", HeaderValue::from_static("Bearer"));
            }
            _ => {}
        }
        r
    }
}

/// A flush failed by `e`: the answer of each request it held.
pub(crate) fn commit_failed(e: &neve_core::Error) -> Error {
    Error::CommitFailed {
        kind: e.kind(),
        code: core_code(e),
        reason: e.to_string(),
    }
}

/// The code of a commit that may or may not have landed (the store failed under its PUT).
pub(crate) const OUTCOME_UNKNOWN: &str = "commit_outcome_unknown";

/// The code of a core error, as the server answers it.
pub(crate) fn core_code(e: &neve_core::Error) -> &'static str {
    match e {
        neve_core::Error::InvalidInput { .. } => "invalid_input",
        // What the Python package raises as `SchemaError` has codes of its own, so its
        // client raises the same exception for the server's answer.
        neve_core::Error::InvalidValue { .. } => "invalid_value",
        neve_core::Error::UnsupportedType { .. }
        | neve_core::Error::InvalidSchema { .. }
        | neve_core::Error::MissingPartitionColumn { .. }
        | neve_core::Error::UnsafeAlter { .. }
        | neve_core::Error::IcebergUnsupported { .. } => "invalid_schema",
        neve_core::Error::SchemaConflict { .. } | neve_core::Error::NewColumnRejected { .. } => {
            "schema_conflict"
        }
        neve_core::Error::SqlSyntax { .. } => "sql_syntax",
        neve_core::Error::InvalidQuery { .. } => "invalid_query",
        neve_core::Error::UnknownTable { .. } => "table_not_found",
        neve_core::Error::QueryOutOfMemory { .. } => "query_out_of_memory",
        // Retried safely only with the request's idempotency key (HTTP); not a plain 503.
        neve_core::Error::CommitOutcomeUnknown { .. } => OUTCOME_UNKNOWN,
        _ => match e.kind() {
            ErrorKind::BadInput => "bad_input",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Unavailable => "storage_unavailable",
            _ => "internal",
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_twin_of_a_request_with_a_reused_key_gets_the_same_answer() {
        let first = Error::IdempotencyKeyReused { key: "k".into() };
        let twin = first.duplicate();
        assert_eq!(twin.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(twin.code(), first.code());
    }

    /// A request refused by the flush that held it answers with the code it would have had
    /// alone (`schema_conflict`: the Python client's `SchemaError`), and so does its twin.
    #[test]
    fn a_failed_flush_keeps_the_code_of_its_error() {
        let e = neve_core::Error::SchemaConflict {
            column: "x".into(),
            table_type: "int64".into(),
            input_type: "string".into(),
            hint: None,
        };
        let failed = commit_failed(&e);
        assert_eq!(failed.code(), "schema_conflict");
        assert_eq!(failed.status(), StatusCode::BAD_REQUEST);
        assert_eq!(failed.duplicate().code(), "schema_conflict");
        assert_eq!(failed.duplicate().status(), StatusCode::BAD_REQUEST);
        let store = neve_core::Error::CommitOutcomeUnknown {
            version: 3,
            reason: "timeout".into(),
        };
        assert_eq!(commit_failed(&store).code(), "commit_outcome_unknown");
        assert_eq!(
            commit_failed(&store).status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        let status = tonic::Status::from(commit_failed(&store));
        assert_eq!(status.code(), tonic::Code::Unknown);
        let status = tonic::Status::from(Error::Table(neve_core::Error::TableExists {
            location: "t".into(),
        }));
        assert_eq!(status.code(), tonic::Code::AlreadyExists);
    }
}
