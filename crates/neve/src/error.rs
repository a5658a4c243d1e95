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
    /// A file or standard input could not be read (missing, unreadable, not UTF-8).
    #[error("cannot read {what}: {source}")]
    Read {
        what: String,
        source: std::io::Error,
    },
    /// A benchmark peer (e.g. the delta-rs script) failed.
    #[error("benchmark peer '{peer}' failed: {reason}")]
    PeerFailed { peer: String, reason: String },
    /// `neve maintain --once`: some tables' merge or gc failed (each is logged), or a folder
    /// could not be listed. Exit 75 (run it again) when every failure may pass by itself (the
    /// store's, a race's); 70 when one lasts until someone acts (`lasting`).
    #[error("maintenance failed on {failed} of {tables} tables{}{}",
        if *listed { "" } else { ", and a folder could not be listed" },
        if *lasting > 0 { format!("; {lasting} will fail again until fixed (a corrupt table, a merge longer than the gc grace: see the log)") } else { String::new() })]
    MaintenanceFailed {
        failed: usize,
        tables: usize,
        listed: bool,
        lasting: usize,
    },
    /// The maintenance loop of `neve maintain` ended, which it never does on its own.
    #[error("the maintenance loop stopped: {reason}")]
    MaintenanceStopped { reason: String },
    /// The server could not start or stopped with an error.
    #[error(transparent)]
    Server(#[from] neve_server::Error),
    #[error(transparent)]
    Proxy(#[from] neve_proxy::Error),
}

impl CliError {
    /// The error of reading `what` (a path, or standard input).
    pub fn read(what: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> Self {
        let what = what.to_string();
        move |source| CliError::Read { what, source }
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Core(e) => e.exit_code(),
            CliError::Usage(_) => 64,
            CliError::Output(_) => 74,
            // EX_DATAERR for text that is not UTF-8, else EX_NOINPUT.
            CliError::Read { source, .. } if source.kind() == std::io::ErrorKind::InvalidData => 65,
            CliError::Read { .. } => 66,
            CliError::PeerFailed { .. } => 69,
            // EX_TEMPFAIL: the next run may succeed.
            CliError::MaintenanceFailed { lasting: 0, .. } => 75,
            CliError::MaintenanceFailed { .. } => 70,
            CliError::MaintenanceStopped { .. } => 70,
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
