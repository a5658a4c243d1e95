//! The table log: numbered JSON-lines commits under `_log/`, checkpoints, and the commit
//! protocol. See docs/FORMAT.md for the on-disk format.

pub(crate) mod actions;
mod commit;
mod head;
mod snapshot;
mod store;

pub use actions::{
    format_version_for, format_version_of, Action, AddFile, CheckpointHeader, ColumnStats,
    CommitInfo, CommitSummary, LoggedRequest, Metadata, PartitionTotals, Protocol, RemoveFile,
    RequestKey, TableSettings, FORMAT_VERSION,
};
pub use commit::{CommitOutcome, Committer};
pub use head::SnapshotHead;
pub(crate) use snapshot::rekey_stats;
pub use snapshot::Snapshot;
pub(crate) use store::READ_CONCURRENCY;
pub use store::{LogListing, LogStore, LoggedCommit};

#[cfg(test)]
mod tests;
