//! The proxy's errors. Each request error maps to one S3 error code (and so one HTTP status)
//! in the S3 error XML a client's SDK understands.

use s3s::{S3Error, S3ErrorCode};

/// What went wrong with a request, or with starting the proxy.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("invalid configuration: {reason}")]
    InvalidConfig { reason: String },

    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },

    /// Refused by policy: anonymous, SigV2, a write, a bucket the key may not read, a path
    /// that tries to leave its bucket.
    #[error("access denied: {reason}")]
    AccessDenied { reason: String },

    #[error("no bucket '{bucket}'")]
    NoSuchBucket { bucket: String },

    #[error("no key '{key}' in bucket '{bucket}'")]
    NoSuchKey { bucket: String, key: String },

    #[error("invalid continuation token")]
    InvalidToken,

    #[error("invalid argument: {reason}")]
    InvalidArgument { reason: String },

    /// The table's log or a data file could not be read.
    #[error(transparent)]
    Table(#[from] neve_core::Error),

    #[error("storage: {0}")]
    Storage(#[from] object_store::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<Error> for S3Error {
    fn from(e: Error) -> Self {
        let code = match &e {
            Error::AccessDenied { .. } => S3ErrorCode::AccessDenied,
            Error::NoSuchBucket { .. } => S3ErrorCode::NoSuchBucket,
            Error::NoSuchKey { .. } => S3ErrorCode::NoSuchKey,
            Error::InvalidToken | Error::InvalidArgument { .. } => S3ErrorCode::InvalidArgument,
            Error::Table(t) if t.kind() == neve_core::ErrorKind::NotFound => {
                S3ErrorCode::NoSuchBucket
            }
            Error::Storage(object_store::Error::NotFound { .. }) => S3ErrorCode::NoSuchKey,
            Error::InvalidConfig { .. }
            | Error::Listen { .. }
            | Error::Table(_)
            | Error::Storage(_) => S3ErrorCode::InternalError,
        };
        S3Error::with_message(code, e.to_string())
    }
}
