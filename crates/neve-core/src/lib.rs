//! neve-core: the neve table format, storage, commit protocol, write path and SQL engine.
//!
//! A table is a folder (local or in a bucket) holding Parquet data files under `_data/` and
//! a log of numbered JSON-lines commits under `_log/`. See docs/FORMAT.md.

pub mod clock;
pub mod describe;
pub mod error;
pub mod failpoint;
pub mod gc;
pub mod iceberg;
pub mod log;
pub mod merge;
pub mod partition;
pub mod query;
pub mod rewrite;
pub mod schema;
pub mod storage;
pub mod table;
pub mod write;

pub use error::{Error, ErrorKind, Result};
pub use query::QueryEngine;
pub use storage::TableLocation;
pub use table::{AsOf, CreateOptions, InsertOptions, InsertReport, Table, TableBuilder};
