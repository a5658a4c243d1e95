//! The public table API: create, open snapshots (latest, by version, by time), insert
//! (`insert.rs`), alter, history.

use std::sync::{Arc, Mutex};

use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::log::{
    Action, Committer, LogStore, LoggedCommit, Metadata, Protocol, Snapshot, TableSettings,
};
use crate::partition::{check_source_type, PartitionField};
use crate::schema::{AlterOp, TableSchema};
use crate::storage::TableLocation;

mod insert;

pub(crate) use insert::written_within_grace;
pub use insert::{InsertOptions, InsertReport, PreparedInput};

/// Which snapshot to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AsOf {
    #[default]
    Latest,
    Version(u64),
    /// Milliseconds since the epoch.
    Timestamp(i64),
}

impl std::str::FromStr for AsOf {
    type Err = Error;
    /// A version number, or an RFC 3339 timestamp / `YYYY-MM-DD[ HH:MM:SS]` (UTC).
    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim();
        if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
            return s.parse().map(AsOf::Version).map_err(|_| bad_as_of(s));
        }
        if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
            return Ok(AsOf::Timestamp(t.timestamp_millis()));
        }
        for f in ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"] {
            if let Ok(t) = chrono::NaiveDateTime::parse_from_str(s, f) {
                return Ok(AsOf::Timestamp(t.and_utc().timestamp_millis()));
            }
        }
        if let Ok(d) = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d") {
            return Ok(AsOf::Timestamp(
                d.and_hms_opt(0, 0, 0)
                    .expect("midnight")
                    .and_utc()
                    .timestamp_millis(),
            ));
        }
        Err(bad_as_of(s))
    }
}

fn bad_as_of(s: &str) -> Error {
    Error::InvalidSetting {
        name: "as-of".into(),
        reason: format!("'{s}' is neither a version number nor a timestamp (2024-05-01T12:00:00Z)"),
    }
}

/// How to create a table.
#[derive(Debug, Clone, Default)]
pub struct CreateOptions {
    pub partition_by: Vec<PartitionField>,
    pub sort_by: Vec<String>,
    pub settings: TableSettings,
    /// Optional schema up front; otherwise the first insert sets it.
    pub schema: TableSchema,
    /// Merge semantics (see [`crate::merge::MergeSpec`]).
    pub merge: Option<crate::merge::MergeSpec>,
}

impl CreateOptions {
    /// The metadata a table created with these options has (what version 0 records).
    pub fn into_metadata(self, table_id: String, created_time: i64) -> Metadata {
        Metadata {
            table_id,
            created_time,
            schema: self.schema,
            partition_by: self.partition_by,
            sort_by: self.sort_by,
            settings: self.settings,
            merge: self.merge,
        }
    }
}

/// Builds a [`Table`] with injected clock and randomness.
pub struct TableBuilder {
    location: TableLocation,
    clock: Arc<dyn Clock>,
    seed: Option<u64>,
    writer: Option<String>,
    iceberg_after_commit: bool,
    iceberg_in_background: bool,
}

impl TableBuilder {
    pub fn new(location: TableLocation) -> Self {
        Self {
            location,
            clock: Arc::new(SystemClock),
            seed: None,
            writer: None,
            iceberg_after_commit: true,
            iceberg_in_background: false,
        }
    }
    /// Whether commits to a table with `iceberg=true` write its Iceberg metadata before they
    /// return (the default). A process that syncs on its own schedule (the server's
    /// maintenance) turns it off.
    pub fn with_iceberg_after_commit(mut self, on: bool) -> Self {
        self.iceberg_after_commit = on;
        self
    }
    /// Whether that metadata is written after the commit returns, by a task of the table's,
    /// instead of before (off by default). An insert then returns without waiting for it, and
    /// Iceberg readers see its rows one sync later: the server's `[iceberg] sync =
    /// "after_answer"`. Commits must run in a tokio runtime that outlives them; wait for the
    /// writing with [`Table::iceberg_settled`] before the runtime ends.
    pub fn with_iceberg_in_background(mut self, on: bool) -> Self {
        self.iceberg_in_background = on;
        self
    }
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
    /// Seed for ids and backoff jitter (tests); random by default.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }
    /// The `writer` recorded in commits.
    pub fn with_writer(mut self, writer: impl Into<String>) -> Self {
        self.writer = Some(writer.into());
        self
    }
    pub fn build(self) -> Table {
        let rng = match self.seed {
            Some(s) => StdRng::seed_from_u64(s),
            None => StdRng::from_os_rng(),
        };
        let writer = self.writer.unwrap_or_else(default_writer);
        let log = LogStore::new(self.location.clone());
        let iceberg = self.iceberg_after_commit.then(|| {
            crate::iceberg::IcebergWriter::new(
                self.location.clone(),
                log.clone(),
                self.clock.clone(),
            )
        });
        let committer = Committer::new(
            log.clone(),
            self.clock.clone(),
            Arc::new(Mutex::new(rng)),
            writer,
        )
        .with_iceberg(iceberg, self.iceberg_in_background);
        Table {
            location: self.location,
            log,
            committer,
            clock: self.clock,
            cache: tokio::sync::Mutex::new(None),
        }
    }
}

/// This process as commits name their writer (`neve/<version> <host> pid <pid>`): also who
/// holds a maintenance claim.
pub fn default_writer() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    format!(
        "neve/{} {host} pid {}",
        env!("CARGO_PKG_VERSION"),
        std::process::id()
    )
}

/// A neve table.
pub struct Table {
    pub(crate) location: TableLocation,
    log: LogStore,
    pub(crate) committer: Committer,
    pub(crate) clock: Arc<dyn Clock>,
    /// The last snapshot this handle saw; later opens only read the commits after it.
    pub(crate) cache: tokio::sync::Mutex<Option<Snapshot>>,
}

impl Table {
    /// Wait until the Iceberg metadata of every commit this handle made is written (or failed
    /// to be, which is logged); at once unless it is written in the background
    /// ([`TableBuilder::with_iceberg_in_background`]).
    pub async fn iceberg_settled(&self) {
        self.committer.iceberg_settled().await;
    }

    /// Whether Iceberg metadata of a commit this handle made is still to be written in the
    /// background (a handle dropped meanwhile leaves it to finish unwatched).
    pub fn iceberg_busy(&self) -> bool {
        self.committer.iceberg_busy()
    }

    /// Open the table at `address` with the system clock.
    pub fn at(address: &str) -> Result<Self> {
        Ok(TableBuilder::new(TableLocation::parse(address)?).build())
    }

    /// Open the table at `address` with store settings over the environment's.
    pub fn at_with(address: &str, options: &crate::storage::StorageOptions) -> Result<Self> {
        Ok(TableBuilder::new(TableLocation::parse_with(address, options)?).build())
    }

    pub fn location(&self) -> &TableLocation {
        &self.location
    }

    pub fn log(&self) -> &LogStore {
        &self.log
    }

    /// Create the table (version 0). Fails with `TableExists` if any version 0 is there.
    pub async fn create(&self, opts: CreateOptions) -> Result<Snapshot> {
        for (i, s) in opts.sort_by.iter().enumerate() {
            let bad = |reason: &str| {
                Err(Error::InvalidSortKey {
                    column: s.clone(),
                    reason: reason.into(),
                })
            };
            if s.trim().is_empty() {
                return bad("is empty");
            }
            if opts.sort_by[..i].contains(s) {
                return bad("is given twice");
            }
            if let Some((_, dir)) = s.rsplit_once(' ') {
                if ["asc", "desc"].contains(&dir.to_ascii_lowercase().as_str()) {
                    return bad(
                        "sort keys are ascending, with no direction: name the column alone",
                    );
                }
            }
            if opts.partition_by.iter().any(|p| p.name == *s) {
                return Err(Error::InvalidSortKey {
                    column: s.clone(),
                    reason: "is a partition name, not a column".into(),
                });
            }
        }
        if let Some(m) = &opts.merge {
            m.validate(&opts.schema, &opts.sort_by)?;
        }
        if !opts.schema.is_empty() {
            validate_layout(
                &opts.schema,
                &opts.partition_by,
                &opts.sort_by,
                opts.merge.as_ref(),
            )?;
            // Without declared columns the names are checked when the setting changes.
            crate::iceberg::check_metrics_columns(&opts.settings, &opts.schema)?;
        }
        if opts.settings.iceberg {
            crate::iceberg::check_table(&opts.schema, &opts.partition_by, opts.merge.as_ref())?;
        }
        if let crate::storage::StoreKind::Local { dir } = &self.location.kind {
            std::fs::create_dir_all(dir).map_err(|source| Error::Io {
                path: dir.clone(),
                source,
            })?;
        }
        let now = self.clock.now_millis();
        let metadata = opts.into_metadata(self.committer.new_id().to_string(), now);
        let info = crate::log::CommitInfo {
            timestamp: now,
            operation: "CREATE".into(),
            commit_id: self.committer.new_id().to_string(),
            writer: self.committer.writer().to_string(),
            read_version: None,
            summary: Default::default(),
            requests: Vec::new(),
        };
        let commit_id = info.commit_id.clone();
        let format_version = crate::log::format_version_of(&metadata);
        let actions = vec![
            Action::CommitInfo(info),
            Action::Protocol(Protocol { format_version }),
            Action::Metadata(metadata),
        ];
        let body = crate::log::actions::to_json_lines(&actions);
        let opts = object_store::PutOptions {
            mode: object_store::PutMode::Create,
            ..Default::default()
        };
        match self
            .location
            .store
            .put_opts(&self.log.commit_path(0), body.into(), opts)
            .await
        {
            Ok(_) => {}
            Err(object_store::Error::AlreadyExists { .. }) => {
                // The store may have retried a PUT of ours that had landed: then it is ours.
                let mine = self.log.read_commit(0).await?;
                if mine.is_none_or(|c| c.info.commit_id != commit_id) {
                    return Err(Error::TableExists {
                        location: self.location.display.clone(),
                    });
                }
            }
            Err(e) => return Err(e.into()),
        }
        let snap = self.snapshot().await?;
        if snap.metadata.settings.iceberg {
            // The empty table's metadata, so readers find it from the start. The table exists
            // whatever happens here: a failure is logged (the next commit or sync catches up),
            // as after any commit, not reported as a create that did not happen.
            if let Err(e) = self.iceberg_sync(&Default::default()).await {
                tracing::warn!(table = %self.location.display, error = %e, "created; its Iceberg metadata is left to the next sync");
            }
        }
        Ok(snap)
    }

    /// Bring the table's Iceberg metadata (`metadata/`) up to its latest version.
    pub async fn iceberg_sync(
        &self,
        opts: &crate::iceberg::SyncOptions,
    ) -> Result<crate::iceberg::SyncReport> {
        let latest = self.snapshot().await?;
        if !latest.metadata.settings.iceberg {
            return Err(Error::IcebergNotEnabled {
                table: self.location.display.clone(),
            });
        }
        crate::iceberg::IcebergWriter::new(
            self.location.clone(),
            self.log.clone(),
            self.clock.clone(),
        )
        .sync_to(&latest, opts)
        .await
    }

    /// The latest snapshot. A handle keeps the last one it saw and then reads only newer
    /// commits (one LIST after its version, one GET per new commit).
    pub async fn snapshot(&self) -> Result<Snapshot> {
        let mut cache = self.cache.lock().await;
        let snap = match cache.take() {
            Some(mut s) => match self.log.update(&mut s).await {
                Ok(_) => s,
                // Commits behind the cached version were cleaned: open afresh.
                Err(Error::VersionNotFound { .. }) => self.log.load_latest().await?,
                Err(e) => return Err(e),
            },
            None => self.log.load_latest().await?,
        };
        *cache = Some(snap.clone());
        Ok(snap)
    }

    /// The snapshot `as_of`.
    pub async fn snapshot_as_of(&self, as_of: AsOf) -> Result<Snapshot> {
        match as_of {
            AsOf::Latest => self.log.load_latest().await,
            AsOf::Version(v) => self.log.load_version(v).await,
            AsOf::Timestamp(t) => self.log.load_at_timestamp(t).await,
        }
    }

    /// The table's metadata as last read by this handle (no storage access), or read now.
    pub async fn metadata(&self) -> Result<Metadata> {
        if let Some(s) = self.cache.lock().await.as_ref() {
            return Ok(s.metadata.clone());
        }
        Ok(self.snapshot().await?.metadata)
    }

    /// Change the schema (`neve alter`): one metadata-only commit. Refused with the reason
    /// when unsafe: dropping a partition source or sort key, `set not null` on a column that
    /// has nulls in alive files (from the log's null counts), a lossy type change.
    pub async fn alter(&self, op: &AlterOp) -> Result<u64> {
        let mut snapshot = self.snapshot().await?;
        let outcome = self
            .committer
            .commit(&mut snapshot, "ALTER", |snap| {
                let mut meta = snap.metadata.clone();
                let refuse = |column: &str, reason: String| Error::UnsafeAlter {
                    column: column.to_string(),
                    reason,
                };
                let in_layout = |c: &str| {
                    meta.partition_by.iter().any(|p| p.source == c) || meta.sort_by.iter().any(|s| s == c)
                };
                let in_merge = |c: &str| meta.merge.as_ref().is_some_and(|m| m.columns().contains(&c));
                match op {
                    AlterOp::DropColumn(c) | AlterOp::RenameColumn { from: c, .. } if in_merge(c) => {
                        return Err(refuse(c, format!("the table's merge spec names it: {}", meta.merge.as_ref().expect("checked"))))
                    }
                    AlterOp::DropColumn(c) if in_layout(c) => {
                        return Err(refuse(c, "the table is partitioned or sorted by it".into()))
                    }
                    AlterOp::SetNotNull(c) => {
                        if meta.schema.column(c).is_none() && c.contains('.') {
                            return Err(refuse(
                                c,
                                "not null can be set on top-level columns; declare nested fields not null when creating the table".into(),
                            ));
                        }
                        let nulls: u64 = snap
                            .files
                            .values()
                            .map(|f| f.stats.get(c).map_or(f.rows, |s| s.nulls))
                            .sum();
                        if nulls > 0 && meta.schema.column(c).is_some() {
                            return Err(refuse(
                                c,
                                format!("{nulls} rows of alive files have no value there; fill or delete them first"),
                            ));
                        }
                    }
                    AlterOp::SetSetting { key, value } if key == "merge" => {
                        let spec: Option<crate::merge::MergeSpec> = match value.trim() {
                            "" | "none" => None,
                            v => Some(v.parse()?),
                        };
                        if let Some(m) = &spec {
                            m.validate(&meta.schema, &meta.sort_by)?;
                        }
                        if spec != meta.merge && !snap.files.is_empty() {
                            return Err(Error::InvalidMergeSpec {
                                spec: value.clone(),
                                reason: format!(
                                    "the table holds {} rows in {} files, merged as {}: another merge spec would change what reads of them answer; set it on an empty table (or create a new table and insert the rows there)",
                                    snap.rows(),
                                    snap.files.len(),
                                    meta.merge.as_ref().map_or("nothing (every row stands alone)".to_string(), |m| m.to_string())
                                ),
                            });
                        }
                        meta.merge = spec;
                        let mut actions = Vec::new();
                        let needed = crate::log::format_version_of(&meta);
                        if needed > snap.protocol.format_version {
                            actions.push(Action::Protocol(Protocol {
                                format_version: needed,
                            }));
                        }
                        actions.push(Action::Metadata(meta));
                        return Ok(actions);
                    }
                    AlterOp::SetSetting { key, value } => {
                        meta.settings.set(key, value)?;
                        // Only when it is the setting being changed: one that names a column
                        // dropped since must not block every other setting.
                        if matches!(key.as_str(), "iceberg_metrics" | "icebergMetrics") {
                            crate::iceberg::check_metrics_columns(&meta.settings, &meta.schema)?;
                        }
                        return Ok(vec![Action::Metadata(meta)]);
                    }
                    _ => {}
                }
                let schema = meta.schema.alter(op, !snap.files.is_empty())?;
                if let AlterOp::RenameColumn { from, to } = op {
                    for p in &mut meta.partition_by {
                        if p.source == *from {
                            p.source = to.clone();
                        }
                    }
                    for s in &mut meta.sort_by {
                        if s == from {
                            *s = to.clone();
                        }
                    }
                }
                validate_layout(&schema, &meta.partition_by, &meta.sort_by, meta.merge.as_ref())?;
                crate::partition::check_source_change(&meta.partition_by, &meta.schema, &schema)?;
                meta.settings.iceberg_metrics =
                    crate::iceberg::metrics_after_alter(&meta.settings, &meta.schema, &schema);
                let mut actions = Vec::new();
                // Renames and drops need readers that match columns by id.
                let by_id = matches!(op, AlterOp::RenameColumn { .. } | AlterOp::DropColumn(_));
                let needed = crate::log::format_version_for(&schema).max(if by_id { 2 } else { 1 });
                if needed > snap.protocol.format_version {
                    actions.push(Action::Protocol(Protocol {
                        format_version: needed,
                    }));
                }
                meta.schema = schema;
                actions.push(Action::Metadata(meta));
                Ok(actions)
            })
            .await?;
        *self.cache.lock().await = Some(snapshot);
        Ok(outcome.version)
    }

    /// Commits in order, the last `limit` if given.
    pub async fn history(&self, limit: Option<usize>) -> Result<Vec<LoggedCommit>> {
        let listing = self.log.list(None).await?;
        if listing.commits.is_empty() {
            return Err(Error::TableNotFound {
                location: self.location.display.clone(),
            });
        }
        let versions: Vec<u64> = listing.commits.iter().copied().collect();
        let skip = limit.map(|l| versions.len().saturating_sub(l)).unwrap_or(0);
        self.log
            .read_commits(versions[skip..].iter().copied())
            .await
    }
}

/// Partition sources and sort keys must be columns of suitable types.
fn validate_layout(
    schema: &TableSchema,
    partition_by: &[PartitionField],
    sort_by: &[String],
    merge: Option<&crate::merge::MergeSpec>,
) -> Result<()> {
    if let Some(m) = merge {
        m.validate(schema, sort_by)?;
    }
    for f in partition_by {
        let c = schema
            .column(&f.source)
            .ok_or_else(|| Error::InvalidPartitionSpec {
                spec: crate::partition::format_spec(std::slice::from_ref(f)),
                reason: format!("no column '{}'", f.source),
            })?;
        if c.column_type != crate::schema::ColumnType::Null {
            check_source_type(f, &c.column_type.to_arrow())?;
        }
    }
    for s in sort_by {
        match schema.column(s) {
            None => {
                return Err(Error::InvalidSortKey {
                    column: s.clone(),
                    reason: "no such column in the table or the input".into(),
                })
            }
            Some(c) if c.column_type.is_nested() => {
                return Err(Error::InvalidSortKey {
                    column: s.clone(),
                    reason: format!("is {}; sort keys must be primitive columns", c.column_type),
                })
            }
            Some(_) => {}
        }
    }
    Ok(())
}
