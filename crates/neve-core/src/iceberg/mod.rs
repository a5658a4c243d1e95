//! Iceberg v2 metadata beside the log, so engines that read Iceberg read neve tables
//! (docs/FORMAT.md, "Iceberg metadata").
//!
//! The log stays the truth; `metadata/` describes it. Snapshot V (id V, sequence number V)
//! lists exactly the files alive at neve version V, and its manifests and manifest list are a
//! function of version V alone, named by what they hold: any number of syncs may write them at
//! once (create-only PUTs, equal bytes). The `vN.metadata.json` files form a chain like the
//! log: each sync creates the next number with a create-only PUT and, when another sync got
//! there first, reads it and goes on from it. `version-hint.text` names the newest for readers
//! that start from the folder.

mod ahead;
mod avro;
pub(crate) mod background;
mod build;
mod delete_file;
pub(crate) mod deletes;
mod groups;
mod keys;
mod manifest;
mod metrics;
mod types;
mod varint;
mod weigh;

#[cfg(test)]
mod deletes_tests;
#[cfg(test)]
mod metrics_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod weigh_tests;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};
use sha2::{Digest, Sha256};

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::log::{CommitInfo, LogStore, Snapshot};
use crate::storage::TableLocation;

pub use metrics::{MetricsConfig, MetricsMode};
pub use types::{check_change, check_table};

/// A table's `iceberg_metrics` may only name its columns (current or former names): a
/// misspelt name would silently keep the default.
pub(crate) fn check_metrics_columns(
    settings: &crate::log::TableSettings,
    schema: &crate::schema::TableSchema,
) -> Result<()> {
    let Some(setting) = settings.iceberg_metrics.as_deref() else {
        return Ok(());
    };
    let config = MetricsConfig::of(Some(setting));
    let fields = types::stat_fields(schema);
    let (_, unknown) = config.resolve(&fields);
    if unknown.is_empty() {
        return Ok(());
    }
    Err(Error::InvalidSetting {
        name: "iceberg_metrics".into(),
        reason: format!(
            "'{setting}': the table has no column {} (name a column, or a struct's field as struct.field)",
            unknown.iter().map(|c| format!("'{c}'")).collect::<Vec<_>>().join(", ")
        ),
    })
}

/// A table's `iceberg_metrics` after an alter changed its schema from `before` to `after`
/// ([`MetricsConfig::after_alter`]); `None` when the table has none.
pub(crate) fn metrics_after_alter(
    settings: &crate::log::TableSettings,
    before: &crate::schema::TableSchema,
    after: &crate::schema::TableSchema,
) -> Option<String> {
    let config = MetricsConfig::of(Some(settings.iceberg_metrics.as_deref()?));
    let config = config.after_alter(&types::stat_fields(before), &types::stat_fields(after));
    Some(config.to_string())
}

use manifest::manifest_list_key;
use manifest::{ChunkMemo, Layout, ManifestInfo};

/// The folder Iceberg readers look in.
pub const METADATA_DIR: &str = "metadata";
const HINT: &str = "metadata/version-hint.text";
/// How often a sync tries for the next metadata number against other syncs.
const MAX_ATTEMPTS: u32 = 20;

/// How long a writer builds on the metadata it wrote without reading it back.
const CACHE_MS: i64 = 60_000;

/// Snapshots the metadata lists when the table's `iceberg_max_snapshots` is unset: the
/// metadata file is rewritten by every commit, and each snapshot adds about 400 bytes to it.
pub const DEFAULT_MAX_SNAPSHOTS: u64 = 500;

/// Most snapshots a table's metadata lists, by its settings.
pub fn max_snapshots(settings: &crate::log::TableSettings) -> u64 {
    settings
        .iceberg_max_snapshots
        .unwrap_or(DEFAULT_MAX_SNAPSHOTS)
        .max(1)
}

fn metadata_key(n: u64) -> String {
    format!("metadata/v{n}.metadata.json")
}

/// How a sync runs.
#[derive(Debug, Clone, Default)]
pub struct SyncOptions {
    /// Rebuild every retained snapshot from the log, ignoring what `metadata/` holds.
    pub full: bool,
    /// Expire snapshots committed before this time (ms since the epoch), keeping the one
    /// current then; by default now minus the table's log retention. gc passes its own cutoff
    /// so that no snapshot lists a file it deletes.
    pub expire_before_ms: Option<i64>,
}

/// What a sync did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SyncReport {
    /// The neve version the newest metadata describes.
    pub version: u64,
    /// Its number (`vN.metadata.json`), and where it is.
    pub metadata_version: u64,
    pub metadata_file: String,
    /// Snapshots it lists, added by this sync, and expired by it.
    pub snapshots: usize,
    pub snapshots_added: usize,
    pub snapshots_expired: usize,
    /// Files (manifests, manifest lists, metadata, hint) written and their bytes.
    pub files_written: u64,
    pub bytes_written: u64,
    /// Nothing to do: the metadata already described the latest version.
    pub up_to_date: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct SnapshotEntry {
    snapshot_id: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parent_snapshot_id: Option<i64>,
    sequence_number: i64,
    timestamp_ms: i64,
    manifest_list: String,
    summary: BTreeMap<String, String>,
    schema_id: i32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct SnapshotLogEntry {
    timestamp_ms: i64,
    snapshot_id: i64,
}

/// `vN.metadata.json`, as neve writes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct TableMetadata {
    format_version: u8,
    table_uuid: String,
    location: String,
    last_sequence_number: i64,
    last_updated_ms: i64,
    last_column_id: i64,
    current_schema_id: i32,
    schemas: Vec<Json>,
    default_spec_id: i32,
    partition_specs: Vec<Json>,
    last_partition_id: i32,
    properties: BTreeMap<String, String>,
    current_snapshot_id: i64,
    snapshots: Vec<SnapshotEntry>,
    snapshot_log: Vec<SnapshotLogEntry>,
    metadata_log: Vec<Json>,
    sort_orders: Vec<Json>,
    default_sort_order_id: i32,
    #[serde(default)]
    refs: BTreeMap<String, Json>,
}

/// The most bytes of columns given by inserts a writer holds for its next syncs.
pub(crate) const GIVEN_BYTES: usize = 256 << 20;

/// The property naming how the position deletes of the version described were decided (the
/// key scheme and the merge spec): a sync that finds it knows every group of that version
/// was decided, and decides again only the groups a commit changed.
const DELETES_PROPERTY: &str = "neve.position-deletes";

impl TableMetadata {
    /// The neve version this metadata describes.
    fn neve_version(&self) -> Option<u64> {
        self.properties.get("neve.version")?.parse().ok()
    }
}

/// A schema's id: a hash of its fields, so every sync gives one schema the same id.
fn schema_with_id(fields: Vec<Json>) -> (i32, Json) {
    let text = Json::Array(fields.clone()).to_string();
    let d = Sha256::digest(text.as_bytes());
    let id = (u32::from_le_bytes(d[..4].try_into().expect("4 bytes")) & 0x7fff_ffff) as i32;
    (
        id,
        json!({"type": "struct", "schema-id": id, "fields": fields}),
    )
}

/// The Iceberg operation for a commit.
fn operation(info: &CommitInfo) -> &'static str {
    let s = &info.summary;
    match (s.files_added > 0, s.files_removed > 0) {
        _ if info.operation == "MERGE" => "replace",
        (true, false) => "append",
        (false, true) => "delete",
        (true, true) => "overwrite",
        (false, false) => "replace",
    }
}

/// Writes a table's Iceberg metadata.
#[derive(Debug, Clone)]
pub struct IcebergWriter {
    location: TableLocation,
    log: LogStore,
    clock: Arc<dyn Clock>,
    /// What this writer last wrote, so that the sync after its next commit need not read it
    /// back (two round trips fewer on a writer that commits in a stream).
    last: Arc<std::sync::Mutex<Option<Written>>>,
    /// How the version described last was cut into chunks (see [`chunks_named`]).
    chunk_memo: Arc<std::sync::Mutex<Option<ChunkMemo>>>,
    /// The layout of the schema last written, with its key (see [`Run`]).
    layout: Arc<std::sync::Mutex<Option<KeyedLayout>>>,
    /// The position delete files of the snapshot written last (tables with merge semantics):
    /// rows and size by key. A group unchanged since is not read again.
    deletes: Arc<std::sync::Mutex<deletes::KnownDeletes>>,
    /// What was decided of those groups (see [`deletes::GroupState`]): a group that grew is
    /// decided by reading only the files that joined it.
    states: Arc<std::sync::Mutex<deletes::States>>,
    /// The key ids those states name their keys by.
    key_ids: Arc<std::sync::Mutex<Arc<deletes::KeyIds>>>,
    /// The groups of the snapshot written last, with their delete files' keys: an insert's
    /// sync groups only the files it added.
    grouping: Arc<std::sync::Mutex<Option<groups::Grouping>>>,
    /// The delete manifests of the snapshot written last: `deletes` holds their files.
    deletes_listed: Arc<std::sync::Mutex<Vec<String>>>,
    /// The encoded manifest entries of those delete files.
    delete_entries: Arc<std::sync::Mutex<manifest::DeleteEntries>>,
    /// Decisive columns of files this process wrote, given before their commit, so the sync
    /// after it does not read them back (see [`IcebergWriter::give_columns`]).
    given: Arc<deletes::GivenColumns>,
    /// Manifest entries of the files of a commit under way (see [`ahead`]).
    ahead: Arc<std::sync::Mutex<Option<Arc<ahead::Ahead>>>>,
}

/// Metadata `n` as this writer wrote it, and the manifest list of the version it describes.
#[derive(Debug)]
struct Written {
    /// When (ms since the epoch): it is used for a minute at most, far inside any gc grace,
    /// so gc never deletes a newer metadata file a stale copy could be written over.
    at_ms: i64,
    n: u64,
    metadata: TableMetadata,
    /// The manifests the version it describes lists (parsing its list back was a tenth of
    /// a commit's sync).
    listed: Vec<ManifestInfo>,
}

/// The previous version's manifests: its list as stored (absent if it is not), or as this
/// writer wrote it.
enum Listed {
    Stored(Option<Bytes>),
    Known(Vec<ManifestInfo>),
}

/// A layout with its key: the schema's JSON and the spec's.
type KeyedLayout = Arc<(String, Layout)>;

/// One sync's state: the layout of the current schema and the manifests it knows.
struct Run<'a> {
    location: &'a TableLocation,
    /// The layout of the schema (its JSON and spec as the key).
    layout: Option<KeyedLayout>,
    /// Manifests by key: described, and whether they are known to be stored.
    known: HashMap<String, (ManifestInfo, bool)>,
    /// The previous version's manifest list, read while the newest metadata was found.
    prefetched: Option<(u64, Listed)>,
    /// The manifests of the list written last, and its version.
    list: Option<(u64, Vec<ManifestInfo>)>,
    /// Delete manifests already read back for the delete files they list.
    deletes_read: HashSet<String>,
    /// The version whose every group's position deletes a sync decided, under which
    /// [`DELETES_PROPERTY`] (when its manifest list was read: see [`deletes`]).
    decided: Option<(u64, String)>,
    report: SyncReport,
}

impl IcebergWriter {
    pub fn new(location: TableLocation, log: LogStore, clock: Arc<dyn Clock>) -> Self {
        Self {
            location,
            log,
            clock,
            last: Arc::default(),
            chunk_memo: Arc::default(),
            layout: Arc::default(),
            deletes: Arc::default(),
            states: Arc::default(),
            key_ids: Arc::default(),
            grouping: Arc::default(),
            deletes_listed: Arc::default(),
            delete_entries: Arc::default(),
            given: Arc::default(),
            ahead: Arc::default(),
        }
    }

    /// The files an insert is about to commit, at `version` most likely: their manifest
    /// entries are encoded at once on the rayon pool, while the commit runs (see [`ahead`]).
    /// Only when this writer knows the table's layout (it synced before).
    pub(crate) fn give_adds(&self, version: u64, adds: Arc<Vec<crate::log::AddFile>>) {
        let Some(layout) = self.layout.lock().expect("layout").clone() else {
            return;
        };
        let ahead = ahead::Ahead::new(layout, version, adds);
        *self.ahead.lock().expect("ahead") = Some(ahead.clone());
        rayon::spawn(move || ahead.encode());
    }

    /// Columns of files about to be committed (path, named columns as written), for the
    /// position deletes of a table with merge semantics: the sync after the commit takes
    /// them instead of reading the files. What is held stays under [`GIVEN_BYTES`]; a sync
    /// drops what it did not take of the files it described.
    ///
    /// Their keys (the columns named `keys`) are numbered at once on the rayon pool, while
    /// the commit runs (see [`deletes::PreNumbered`]).
    pub(crate) fn give_columns(
        &self,
        keys: &[String],
        files: Vec<(String, crate::write::KeptColumns)>,
    ) {
        let by = self.key_ids.lock().expect("key ids").clone();
        let mut numbering = Vec::new();
        // One converter for the files' key types (an insert's files share them).
        let mut rows: Option<(
            Vec<arrow::datatypes::DataType>,
            Arc<arrow::row::RowConverter>,
        )> = None;
        {
            let mut given = self.given.lock().expect("given columns");
            // A dictionary's values are shared by the insert's files: counted by its keys.
            let bytes = |cols: &crate::write::KeptColumns| -> usize {
                cols.iter()
                    .map(|(_, c)| crate::write::column_bytes(c))
                    .sum()
            };
            let mut held: usize = given.values().map(|(c, _)| bytes(c)).sum();
            for (path, cols) in files {
                held += bytes(&cols);
                if held > GIVEN_BYTES {
                    break;
                }
                let key_cols: Vec<arrow::array::ArrayRef> = keys
                    .iter()
                    .filter_map(|k| cols.iter().find(|(n, _)| n == k).map(|(_, c)| c.clone()))
                    .collect();
                let types: Vec<_> = key_cols.iter().map(|c| c.data_type().clone()).collect();
                let converter = match &rows {
                    Some((t, r)) if *t == types => Some(r.clone()),
                    _ => arrow::row::RowConverter::new(
                        types
                            .iter()
                            .map(|t| arrow::row::SortField::new(t.clone()))
                            .collect(),
                    )
                    .ok()
                    .map(|r| {
                        let r = Arc::new(r);
                        rows = Some((types, r.clone()));
                        r
                    }),
                };
                let numbered = (key_cols.len() == keys.len() && !keys.is_empty())
                    .then_some(converter)
                    .flatten()
                    .map(|r| Arc::new(deletes::PreNumbered::new(by.clone(), key_cols, r)));
                numbering.extend(numbered.clone());
                given.insert(path, (cols, numbered));
            }
        }
        if !numbering.is_empty() {
            // A panic there is the sync's to report (it numbers them again), not an abort.
            rayon::spawn(move || {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    for n in numbering {
                        n.ids();
                    }
                }));
            });
        }
    }

    /// Drops what was given of files that will not be committed.
    pub(crate) fn forget_columns<'a>(&self, paths: impl IntoIterator<Item = &'a str>) {
        let mut given = self.given.lock().expect("given columns");
        // Most syncs were given nothing: no walk over every file of the table.
        if given.is_empty() {
            return;
        }
        for p in paths {
            given.remove(p);
        }
    }

    /// Whether the table's inserts should keep the decisive columns of their files for it.
    /// With them, how many (the first) may stay the dictionaries the writer keyed them into.
    pub(crate) fn wants_columns(meta: &crate::log::Metadata) -> Option<(Vec<String>, usize)> {
        let spec = meta.merge.as_ref().filter(|_| meta.settings.iceberg)?;
        let names = deletes::decisive_names(spec).ok()?;
        Some((names, deletes::dictionary_keys(spec)))
    }

    /// Bring `metadata/` up to the latest version of the log.
    pub async fn sync(&self, opts: &SyncOptions) -> Result<SyncReport> {
        let latest = self.log.load_latest().await?;
        self.sync_to(&latest, opts).await
    }

    /// Bring `metadata/` up to `latest` (a snapshot just committed, say).
    pub async fn sync_to(&self, latest: &Snapshot, opts: &SyncOptions) -> Result<SyncReport> {
        self.sync_inner(latest, None, opts).await
    }

    /// Right after this process committed `latest`, with the commit's `info` when it is at
    /// that version: the commit is not read back.
    pub(crate) async fn sync_committed(
        &self,
        latest: &Snapshot,
        info: Option<&CommitInfo>,
    ) -> Result<SyncReport> {
        self.sync_inner(latest, info, &SyncOptions::default()).await
    }

    async fn sync_inner(
        &self,
        latest: &Snapshot,
        info: Option<&CommitInfo>,
        opts: &SyncOptions,
    ) -> Result<SyncReport> {
        types::check_table(
            &latest.metadata.schema,
            &latest.metadata.partition_by,
            latest.metadata.merge.as_ref(),
        )?;
        let retention_ms = latest.metadata.settings.log_retention_hours as i64 * 3_600_000;
        let cutoff = opts
            .expire_before_ms
            .unwrap_or_else(|| self.clock.now_millis() - retention_ms);
        for attempt in 0..MAX_ATTEMPTS {
            // Right after a commit the previous version's list is needed too: read it while
            // the newest metadata is found (one round trip less per commit).
            let previous = latest
                .version
                .checked_sub(1)
                .filter(|&v| v > 0 && attempt == 0);
            // This writer's own last metadata, when it describes the version before: nobody
            // else can have described anything newer, and if another sync wrote the next
            // number anyway the create-only PUT below fails and the next attempt reads.
            let mine = self.last.lock().expect("iceberg cache").take().filter(|w| {
                !opts.full
                    && previous.is_some()
                    && previous == w.metadata.neve_version()
                    && self.clock.now_millis() - w.at_ms < CACHE_MS
            });
            let (n, hint, prev, prefetched) = match mine {
                Some(w) => {
                    let v = previous.expect("filtered on it");
                    (
                        w.n,
                        w.n,
                        Some(w.metadata),
                        Some((v, Listed::Known(w.listed))),
                    )
                }
                None => {
                    let (current, prefetched) = futures::join!(self.current(), async {
                        match previous {
                            Some(v) => Some((v, self.get(&manifest_list_key(v)).await)),
                            None => None,
                        }
                    });
                    let (n, hint, prev) = current?;
                    let prefetched = match prefetched {
                        Some((v, bytes)) => Some((v, Listed::Stored(bytes?))),
                        None => None,
                    };
                    (n, hint, prev, prefetched)
                }
            };
            // Snapshots gc expired stay expired, even in a rebuild: their files may be gone.
            let floor = prev
                .as_ref()
                .and_then(|p| p.snapshots.first().map(|s| s.snapshot_id));
            let prev = if opts.full { None } else { prev };
            if let Some(p) = &prev {
                let described = p.neve_version().unwrap_or(0);
                if described >= latest.version
                    && !expires_any(p, cutoff, max_snapshots(&latest.metadata.settings))
                {
                    if hint < n {
                        // A sync died between its metadata and the hint.
                        self.write_hint(n).await?;
                    }
                    return Ok(SyncReport {
                        version: described,
                        metadata_version: n,
                        metadata_file: self.location.file_url(&metadata_key(n)),
                        snapshots: p.snapshots.len(),
                        up_to_date: true,
                        ..Default::default()
                    });
                }
            }
            let mut run = Run {
                location: &self.location,
                layout: None,
                known: HashMap::new(),
                prefetched,
                list: None,
                deletes_read: HashSet::new(),
                decided: None,
                report: SyncReport::default(),
            };
            let info = info.filter(|_| attempt == 0);
            let (metadata, added) = self
                .build(&mut run, latest, info, prev, cutoff, floor)
                .await?;
            let body = serde_json::to_vec(&metadata).expect("metadata serializes");
            let key = metadata_key(n + 1);
            let len = body.len() as u64;
            let put = self
                .location
                .store
                .put_opts(
                    &self.location.child(&key),
                    PutPayload::from(body),
                    PutOptions::from(PutMode::Create),
                )
                .await;
            match put {
                Ok(_) => {}
                Err(object_store::Error::AlreadyExists { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
            crate::failpoint::hit("iceberg:after-metadata");
            run.report.files_written += 1;
            run.report.bytes_written += len;
            run.report.bytes_written += self.write_hint(n + 1).await?;
            run.report.files_written += 1;
            let mut report = run.report;
            report.version = metadata.neve_version().unwrap_or(0);
            report.metadata_version = n + 1;
            report.metadata_file = self.location.file_url(&key);
            report.snapshots = metadata.snapshots.len();
            report.snapshots_added = added;
            // Kept when the list written last is the one of the version the metadata describes.
            if let Some((_, listed)) = run.list.filter(|(v, _)| *v == latest.version) {
                *self.last.lock().expect("iceberg cache") = Some(Written {
                    at_ms: self.clock.now_millis(),
                    n: n + 1,
                    metadata,
                    listed,
                });
            }
            tracing::debug!(?report, "iceberg sync");
            return Ok(report);
        }
        Err(Error::IcebergSyncContended {
            attempts: MAX_ATTEMPTS,
        })
    }

    /// Point `version-hint.text` at `n`, for readers that start from the folder. A slower
    /// sync may set an older number after ours: readers then see an older (complete) version
    /// until the next sync.
    async fn write_hint(&self, n: u64) -> Result<u64> {
        let hint = Bytes::from(n.to_string());
        let len = hint.len() as u64;
        self.location
            .store
            .put(&self.location.child(HINT), hint.into())
            .await?;
        Ok(len)
    }

    /// The newest metadata number, the hint's, and the newest content (`None` when absent or
    /// not neve's).
    async fn current(&self) -> Result<(u64, u64, Option<TableMetadata>)> {
        let store = &self.location.store;
        let hint = match self.get(HINT).await? {
            Some(b) => String::from_utf8_lossy(&b).trim().parse().unwrap_or(0),
            None => 0,
        };
        let mut n = hint;
        if n == 0 {
            // No hint (lost, or never written): the highest number in the folder.
            use futures::TryStreamExt;
            let listed: Vec<object_store::ObjectMeta> = store
                .list(Some(&self.location.child(METADATA_DIR)))
                .try_collect()
                .await?;
            n = listed
                .iter()
                .filter_map(|o| {
                    let name = o.location.filename()?;
                    name.strip_prefix('v')?
                        .strip_suffix(".metadata.json")?
                        .parse::<u64>()
                        .ok()
                })
                .max()
                .unwrap_or(0);
        }
        // The hint may lag: the chain goes on as long as the next number exists. The
        // newest candidate is read while the next one is looked for.
        loop {
            let next_path = self.location.child(&metadata_key(n + 1));
            let (next, body) = futures::join!(store.head(&next_path), async {
                match n {
                    0 => Ok(None),
                    _ => self.get(&metadata_key(n)).await,
                }
            });
            if next.is_ok() {
                n += 1;
                continue;
            }
            if n == 0 {
                return Ok((0, hint, None));
            }
            let prev = body?.and_then(|b| serde_json::from_slice::<TableMetadata>(&b).ok());
            return Ok((n, hint, prev));
        }
    }

    async fn get(&self, key: &str) -> Result<Option<Bytes>> {
        match self.location.store.get(&self.location.child(key)).await {
            Ok(r) => Ok(Some(r.bytes().await?)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

impl IcebergWriter {
    /// Files under `metadata/` that no retained snapshot needs, written before `before_ms`:
    /// older metadata files, manifest lists of expired snapshots, manifests no retained list
    /// names. Read after a sync, so what it expired is gone from the newest metadata.
    pub async fn unreferenced(&self, before_ms: i64) -> Result<Vec<object_store::ObjectMeta>> {
        use futures::{StreamExt, TryStreamExt};
        let (n, _, Some(meta)) = self.current().await? else {
            return Ok(vec![]);
        };
        let lists: Vec<String> = meta
            .snapshots
            .iter()
            .map(|s| manifest_list_key(s.snapshot_id as u64))
            .collect();
        let fetches: Vec<(String, object_store::path::Path)> = lists
            .iter()
            .map(|k| (k.clone(), self.location.child(k)))
            .collect();
        let store = self.location.store.clone();
        let named: Vec<Vec<ManifestInfo>> = futures::stream::iter(fetches)
            .map(move |(key, path)| {
                let store = store.clone();
                async move {
                    match store.get(&path).await {
                        Ok(r) => manifest::read_manifest_list(&key, &r.bytes().await?),
                        Err(object_store::Error::NotFound { .. }) => Ok(vec![]),
                        Err(e) => Err(Error::from(e)),
                    }
                }
            })
            .buffer_unordered(crate::log::READ_CONCURRENCY)
            .try_collect()
            .await?;
        let named: Vec<ManifestInfo> = named.into_iter().flatten().collect();
        // The position delete files the kept delete manifests list.
        let delete_manifests: HashSet<String> = named
            .iter()
            .filter(|m| m.content == manifest::DELETES)
            .map(|m| m.key.clone())
            .collect();
        // Read a few at a time: snapshots share most of theirs, but there are many.
        let delete_files: Vec<Vec<String>> = futures::stream::iter(delete_manifests)
            .map(|key| async move {
                Ok::<_, Error>(match self.get(&key).await? {
                    Some(bytes) => manifest::read_delete_manifest(&key, &bytes)?
                        .into_iter()
                        .map(|(k, _)| k)
                        .collect(),
                    None => Vec::new(),
                })
            })
            .buffer_unordered(crate::log::READ_CONCURRENCY)
            .try_collect()
            .await?;
        let delete_files = delete_files.into_iter().flatten();
        let keep: HashSet<String> = named
            .into_iter()
            .map(|m| m.key)
            .chain(delete_files)
            .chain(lists)
            .chain([metadata_key(n), HINT.to_string()])
            .collect();
        let root = self.location.child("");
        let listed: Vec<object_store::ObjectMeta> = self
            .location
            .store
            .list(Some(&self.location.child(METADATA_DIR)))
            .try_collect()
            .await?;
        Ok(listed
            .into_iter()
            .filter(|o| o.last_modified.timestamp_millis() < before_ms)
            .filter(|o| {
                let rel = o.location.prefix_match(&root).map(|parts| {
                    parts
                        .map(|p| p.as_ref().to_string())
                        .collect::<Vec<_>>()
                        .join("/")
                });
                rel.is_some_and(|r| {
                    let ours = r.starts_with("metadata/neve-")
                        || r.starts_with("metadata/snap-")
                        || (r.starts_with("metadata/v") && r.ends_with(".metadata.json"));
                    ours && !keep.contains(&r)
                })
            })
            .collect())
    }
}

/// Whether `meta` lists snapshots a sync with `cutoff` and cap `max` would expire.
fn expires_any(meta: &TableMetadata, cutoff: i64, max: u64) -> bool {
    meta.snapshots.len() as u64 > max
        || meta
            .snapshots
            .iter()
            .filter(|s| s.timestamp_ms <= cutoff)
            .count()
            > 1
}
