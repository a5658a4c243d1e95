//! Errors of the command line, mapped to exit codes.

/// What can go wrong in the `neve` binary.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// An error from the table engine.
    #[error(transparent)]
    Core(#[from] neve_core::Error),
    /// Arguments that parse but do not make sense together.
    #[error("{0}")]
    Usage(String),
    /// Writing output failed (closed pipe, full disk).
    #[error("cannot write output: {0}")]
    Output(#[from] std::io::Error),
    /// A benchmark peer (e.g. the delta-rs script) failed.
    #[error("benchmark peer '{peer}' failed: {reason}")]
    PeerFailed { peer: String, reason: String },
    /// The server could not start or stopped with an error.
    #[error(transparent)]
    Server(#[from] neve_server::Error),
    #[error(transparent)]
    Proxy(#[from] neve_proxy::Error),
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Core(e) => e.exit_code(),
            CliError::Usage(_) => 64,
            CliError::Output(_) => 74,
            CliError::PeerFailed { .. } => 69,
            CliError::Server(neve_server::Error::Table(e)) => e.exit_code(),
            CliError::Server(neve_server::Error::InvalidConfig { .. }) => 78,
            CliError::Server(neve_server::Error::Tls { .. }) => 78,
            CliError::Server(_) => 71,
            CliError::Proxy(neve_proxy::Error::Table(e)) => e.exit_code(),
            CliError::Proxy(neve_proxy::Error::InvalidConfig { .. }) => 78,
            CliError::Proxy(neve_proxy::Error::Tls { .. }) => 78,
            CliError::Proxy(_) => 71,
        }
    }
}

pub type Result<T, E = CliError> = std::result::Result<T, E>;
