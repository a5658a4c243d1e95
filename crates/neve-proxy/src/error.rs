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

    /// A TLS certificate or key that cannot be read or used.
    #[error("TLS: {}: {reason}", path.display())]
    Tls {
        path: std::path::PathBuf,
        reason: String,
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
            | Error::Tls { .. }
            | Error::Table(_)
            | Error::Storage(_) => S3ErrorCode::InternalError,
        };
        let message = match (&code, &e) {
            // The store's and the log's messages name the warehouse's paths, its endpoint and
            // how its credentials are set: for the operator's log, not for a reader.
            (S3ErrorCode::InternalError, _) => {
                tracing::error!(error = %e, "a request failed in the proxy");
                "the proxy could not read the table or the store; its log says why".to_string()
            }
            (_, Error::Table(_)) => "no such bucket".to_string(),
            (_, Error::Storage(_)) => "no such key".to_string(),
            _ => e.to_string(),
        };
        S3Error::with_message(code, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_name_no_path_of_the_warehouse() {
        let internal = Error::Storage(object_store::Error::Generic {
            store: "S3",
            source: "error performing GET http://store/lake/acme/t/_log/1.json".into(),
        });
        let e = S3Error::from(internal);
        assert_eq!(e.code(), &S3ErrorCode::InternalError);
        assert!(!e.message().unwrap_or("").contains("acme"), "{e:?}");
        let missing = Error::Storage(object_store::Error::NotFound {
            path: "srv/wh/acme/t/_data/p.parquet".into(),
            source: "gone".into(),
        });
        let e = S3Error::from(missing);
        assert_eq!(e.code(), &S3ErrorCode::NoSuchKey);
        assert_eq!(e.message(), Some("no such key"));
        // What the client named is echoed.
        let e = S3Error::from(Error::NoSuchBucket {
            bucket: "taxi".into(),
        });
        assert!(e.message().unwrap().contains("taxi"));
    }
}
