//! Building the metadata for a neve version: each snapshot's manifests and manifest list,
//! written with create-only PUTs (the same bytes from any sync), on top of what the previous
//! metadata already describes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Value as Json};
use sha2::{Digest, Sha256};

use super::deletes::{self, deletes_property, DeleteFile};
use super::groups::Grouping;
use super::manifest::{self, assemble_manifest, build_manifest_list, chunks_named};
use super::manifest::{manifest_list_key, Chunk, Layout, ManifestInfo};
use super::{
    max_snapshots, operation, schema_with_id, types, IcebergWriter, Listed, MetricsConfig, Run,
    SnapshotEntry, SnapshotLogEntry, TableMetadata, DELETES_PROPERTY,
};
use crate::error::{Error, Result};
use crate::log::{AddFile, CommitInfo, Snapshot};

impl IcebergWriter {
    /// The metadata describing `latest`, built on `prev`; and how many snapshots it added.
    pub(super) async fn build(
        &self,
        run: &mut Run<'_>,
        latest: &Snapshot,
        info: Option<&CommitInfo>,
        prev: Option<TableMetadata>,
        cutoff: i64,
        floor: Option<i64>,
    ) -> Result<(TableMetadata, usize)> {
        let described = prev.as_ref().and_then(|p| p.neve_version());
        // How the position deletes of the version described were decided.
        let decided_by = prev
            .as_ref()
            .and_then(|p| p.properties.get(DELETES_PROPERTY).cloned());
        let mut entries: BTreeMap<i64, SnapshotEntry> = BTreeMap::new();
        let mut schemas: BTreeMap<i32, Json> = BTreeMap::new();
        if let Some(p) = &prev {
            for s in &p.schemas {
                if let Some(id) = s["schema-id"].as_i64() {
                    schemas.insert(id as i32, s.clone());
                }
            }
            for e in &p.snapshots {
                entries.insert(e.snapshot_id, e.clone());
            }
        }
        let before = entries.len();
        // Where to start: right after what `prev` describes; else the version current at
        // the cutoff, or the oldest the log still has.
        let start_after = described.filter(|&d| d < latest.version);
        // The oldest version the cap keeps: a rebuild starts there, not at the cutoff.
        let max = max_snapshots(&latest.metadata.settings);
        let lowest = (latest.version + 1).saturating_sub(max).max(1);
        if latest.version > 0 && described.is_none_or(|d| d < latest.version) {
            if start_after == Some(latest.version - 1) {
                // The common case, right after a commit: the previous manifests are known
                // from their list; only this version's new chunks are written.
                if self.learn_list(run, latest.version - 1).await? {
                    run.decided = decided_by.clone().map(|d| (latest.version - 1, d));
                }
                self.snapshot_entry(run, latest, info, &mut entries, &mut schemas)
                    .await?;
            } else {
                let mut snap = match start_after.filter(|&s| s + 1 >= lowest) {
                    Some(s) => match self.log.load_version(s).await {
                        Ok(snap) => {
                            if self.learn_list(run, s).await? {
                                run.decided = decided_by.clone().map(|d| (s, d));
                            }
                            Some(snap)
                        }
                        Err(_) => None,
                    },
                    None => None,
                };
                if snap.is_none() {
                    let mut first = self.first_retained(cutoff).await?;
                    if first.version < lowest {
                        first = self.log.load_version(lowest).await?;
                    }
                    let info = self.log.read_commit(first.version).await?.map(|c| c.info);
                    if first.version > 0 {
                        self.snapshot_entry(run, &first, info.as_ref(), &mut entries, &mut schemas)
                            .await?;
                    }
                    snap = Some(first);
                }
                let mut snap = snap.expect("a start");
                let versions: Vec<u64> = (snap.version + 1..=latest.version).collect();
                for chunk in versions.chunks(64) {
                    let commits = self.log.read_commits(chunk.iter().copied()).await?;
                    for c in commits {
                        self.log.apply_all(&mut snap, std::slice::from_ref(&c))?;
                        self.snapshot_entry(run, &snap, Some(&c.info), &mut entries, &mut schemas)
                            .await?;
                    }
                }
            }
        }
        let added = entries.len() - before;
        // Expire: keep what was committed after the cutoff, the snapshot current at the
        // cutoff, and always the newest.
        let current_at_cutoff = entries
            .values()
            .filter(|e| e.timestamp_ms <= cutoff)
            .map(|e| e.snapshot_id)
            .max();
        let newest = entries.keys().next_back().copied();
        let total = entries.len();
        entries.retain(|id, e| {
            let kept = e.timestamp_ms > cutoff || Some(*id) == current_at_cutoff;
            (kept && floor.is_none_or(|f| *id >= f)) || Some(*id) == newest
        });
        while entries.len() as u64 > max {
            entries.pop_first();
        }
        run.report.snapshots_expired = total - entries.len();

        let meta = &latest.metadata;
        let (schema_id, schema) = schema_with_id(types::schema_fields(&meta.schema)?);
        schemas.insert(schema_id, schema);
        let used: HashSet<i32> = entries
            .values()
            .map(|e| e.schema_id)
            .chain([schema_id])
            .collect();
        schemas.retain(|id, _| used.contains(id));
        let spec = types::partition_spec(&meta.schema, &meta.partition_by)?;
        let mut properties = BTreeMap::from([
            ("neve.version".to_string(), latest.version.to_string()),
            ("neve.table-id".to_string(), meta.table_id.clone()),
            ("write.format.default".to_string(), "parquet".to_string()),
            // Spark's Iceberg reader otherwise sizes splits for its 200 shuffle partitions (16
            // MB, not 128): a table of many small files became 6.6× as many tasks as Spark's
            // own Parquet reader makes of the same files, and ran 1.7-2.3× slower. Without it,
            // splits are `read.split.target-size` (128 MB), as Spark's file source makes them.
            (
                "read.split.adaptive-size.enabled".to_string(),
                "false".to_string(),
            ),
            (
                "schema.name-mapping.default".to_string(),
                types::name_mapping(&meta.schema).to_string(),
            ),
        ]);
        properties.extend(MetricsConfig::of(meta.settings.iceberg_metrics.as_deref()).properties());
        // Every group of `latest` was decided by this run when it added `latest`'s
        // snapshot; otherwise as the metadata before said.
        let decided_now = meta.merge.as_ref().map(deletes_property);
        if let Some(d) = if added > 0 { decided_now } else { decided_by } {
            properties.insert(DELETES_PROPERTY.to_string(), d);
        }
        properties.insert(
            "comment".into(),
            "written by neve from its log (_log/); read-only for other engines".into(),
        );
        let snapshots: Vec<SnapshotEntry> = entries.into_values().collect();
        let current = snapshots.last().map(|s| s.snapshot_id);
        let mut refs = BTreeMap::new();
        if let Some(c) = current {
            refs.insert(
                "main".to_string(),
                json!({"snapshot-id": c, "type": "branch"}),
            );
        }
        let table_uuid = uuid::Uuid::parse_str(&meta.table_id)
            .unwrap_or_else(|_| {
                let d = Sha256::digest(meta.table_id.as_bytes());
                uuid::Builder::from_random_bytes(d[..16].try_into().expect("16")).into_uuid()
            })
            .to_string();
        let metadata = TableMetadata {
            format_version: 2,
            table_uuid,
            location: self.location.file_url("").trim_end_matches('/').to_string(),
            last_sequence_number: latest.version as i64,
            last_updated_ms: latest.timestamp,
            last_column_id: meta.schema.last_column_id as i64,
            current_schema_id: schema_id,
            schemas: schemas.into_values().collect(),
            default_spec_id: 0,
            partition_specs: vec![types::spec_json(&spec)],
            last_partition_id: types::FIRST_PARTITION_FIELD_ID - 1 + spec.len() as i32,
            properties,
            current_snapshot_id: current.unwrap_or(-1),
            snapshot_log: snapshots
                .iter()
                .map(|s| SnapshotLogEntry {
                    timestamp_ms: s.timestamp_ms,
                    snapshot_id: s.snapshot_id,
                })
                .collect(),
            snapshots,
            metadata_log: vec![],
            sort_orders: vec![json!({"order-id": 0, "fields": []})],
            default_sort_order_id: 0,
            refs,
        };
        Ok((metadata, added))
    }

    /// The snapshot to start a rebuild from: current at `cutoff`, else the oldest readable.
    async fn first_retained(&self, cutoff: i64) -> Result<Snapshot> {
        match self.log.load_at_timestamp(cutoff).await {
            Ok(s) => Ok(s),
            Err(Error::TimestampNotFound { .. } | Error::VersionNotFound { .. }) => {
                let listing = self.log.list(None).await?;
                let oldest = listing
                    .checkpoints
                    .iter()
                    .chain(listing.commits.iter())
                    .copied()
                    .min()
                    .unwrap_or(0);
                self.log.load_version(oldest).await
            }
            Err(e) => Err(e),
        }
    }

    /// Learn the manifests snapshot `version` lists (they are stored), if its list is there;
    /// whether it was.
    async fn learn_list(&self, run: &mut Run<'_>, version: u64) -> Result<bool> {
        let key = manifest_list_key(version);
        let listed = match run.prefetched.take() {
            Some((v, Listed::Known(infos))) if v == version => Some(infos),
            Some((v, Listed::Stored(bytes))) if v == version => match bytes {
                Some(bytes) => Some(manifest::read_manifest_list(&key, &bytes)?),
                None => None,
            },
            _ => match self.get(&key).await? {
                Some(bytes) => Some(manifest::read_manifest_list(&key, &bytes)?),
                None => None,
            },
        };
        let found = listed.is_some();
        for info in listed.into_iter().flatten() {
            run.known.insert(info.key.clone(), (info, true));
        }
        Ok(found)
    }

    /// Write snapshot `snap.version` (its manifests and list) and record its entry.
    async fn snapshot_entry(
        &self,
        run: &mut Run<'_>,
        snap: &Snapshot,
        info: Option<&CommitInfo>,
        entries: &mut BTreeMap<i64, SnapshotEntry>,
        schemas: &mut BTreeMap<i32, Json>,
    ) -> Result<()> {
        let info = match info {
            Some(i) => i.clone(),
            None => match self.log.read_commit(snap.version).await? {
                Some(c) => c.info,
                None => {
                    return Err(Error::VersionNotFound {
                        version: snap.version,
                        reason: "its log entry was removed".into(),
                    })
                }
            },
        };
        let meta = &snap.metadata;
        let fields = types::schema_fields(&meta.schema)?;
        let (schema_id, schema) = schema_with_id(fields);
        let schema_text = schema.to_string();
        let spec = types::partition_spec(&meta.schema, &meta.partition_by)?;
        let metrics = MetricsConfig::of(meta.settings.iceberg_metrics.as_deref());
        let layout_key = format!("{schema_text}\n{}\n{metrics}", types::spec_json(&spec));
        if run.layout.as_ref().is_none_or(|l| l.0 != layout_key) {
            // Kept by the writer across syncs: parsing the manifest schema was a tenth of a
            // commit's sync.
            let kept = self.layout.lock().expect("layout").clone();
            let layout = match kept.filter(|l| l.0 == layout_key) {
                Some(l) => l,
                None => {
                    let layout = Layout::new(
                        run.location,
                        &meta.schema,
                        schema_text,
                        schema_id,
                        spec,
                        &metrics,
                    )?;
                    let l = Arc::new((layout_key, layout));
                    *self.layout.lock().expect("layout") = Some(l.clone());
                    l
                }
            };
            run.layout = Some(layout);
        }
        schemas.insert(schema_id, schema);
        let mut infos = Vec::new();
        let mut writes = Vec::new();
        {
            let layout = &run.layout.as_ref().expect("layout").1;
            // Known manifests are reused; the new ones (an insert's own, or a rebuild's
            // many) are encoded in parallel.
            let mut todo = Vec::new();
            let mut memo = self.chunk_memo.lock().expect("chunk memo").take();
            let mut encoded = memo
                .as_mut()
                .map(|m| m.take_entries(layout))
                .unwrap_or_default();
            // Those of the files a commit of this writer's gave ahead of it, when they are in
            // this layout (the version is checked below, file by file).
            let ahead = self.ahead.lock().expect("ahead").take();
            if let Some(ahead) = ahead.filter(|a| a.is_for(&run.layout.as_ref().expect("layout").0))
            {
                for (path, e) in ahead.entries().into_iter().flatten() {
                    encoded.entry(path.clone()).or_insert_with(|| e.clone());
                }
            }
            let (chunks, mut memo) = chunks_named(layout, snap.version, &snap.files, memo.as_ref());
            for Chunk { named, files } in chunks {
                match run.known.get(&named.0) {
                    Some((info, _)) => infos.push(Some(info.clone())),
                    None => {
                        todo.push((infos.len(), files.resolve(&snap.files), named));
                        infos.push(None);
                    }
                }
            }
            // Entries not kept from the sync before, encoded in parallel file by file (an
            // insert's new files usually fall in one or two chunks).
            use rayon::prelude::*;
            let missing: Vec<&AddFile> = todo
                .iter()
                .flat_map(|(_, chunk, _)| chunk.iter().copied())
                .filter(|f| encoded.get(&f.path).is_none_or(|e| !e.is_of(f)))
                .collect();
            let writer = manifest::entry_writer(layout)?;
            let fresh = missing
                .into_par_iter()
                .map(|f| Ok((f.path.clone(), manifest::encode_entry(layout, &writer, f)?)))
                .collect::<Result<Vec<_>>>()?;
            encoded.extend(fresh);
            let built: Vec<_> = todo
                .into_par_iter()
                .map(|(at, chunk, named)| {
                    let entries: Vec<&manifest::EncodedEntry> =
                        chunk.iter().map(|f| &encoded[&f.path]).collect();
                    (at, assemble_manifest(layout, &entries, named))
                })
                .collect();
            memo.keep_entries(&mut encoded);
            *self.chunk_memo.lock().expect("chunk memo") = Some(memo);
            for (at, (info, bytes)) in built {
                writes.push((info.key.clone(), Bytes::from(bytes)));
                infos[at] = Some(info);
            }
        }
        let mut infos: Vec<ManifestInfo> = infos.into_iter().flatten().collect();
        // A table with merge semantics: the rows that lose to another row of their key, as
        // position deletes (see `deletes`).
        let mut delete_totals = (0usize, 0u64);
        let started = std::time::Instant::now();
        if let Some(spec) = &meta.merge {
            let deletes = self.position_deletes(run, snap, &info, spec).await?;
            if !deletes.is_empty() {
                delete_totals = (deletes.len(), deletes.iter().map(|d| d.file.rows).sum());
                let layout = &run.layout.as_ref().expect("layout").1;
                let t = std::time::Instant::now();
                let chunks = manifest::assemble_delete_manifests(
                    layout,
                    &deletes,
                    &mut self.delete_entries.lock().expect("delete entries"),
                    |key| run.known.get(key).map(|(i, _)| i.clone()),
                )?;
                tracing::debug!(
                    version = snap.version,
                    entries = deletes.len(),
                    manifests = chunks.len(),
                    written = chunks.iter().filter(|(_, b)| b.is_some()).count(),
                    ms = t.elapsed().as_secs_f64() * 1e3,
                    "delete manifests encoded"
                );
                // Their delete files are the ones the writer now keeps: a sync after the next
                // commit need not read them back.
                let mut listed = Vec::with_capacity(chunks.len());
                for (info, bytes) in chunks {
                    if let Some(bytes) = bytes {
                        writes.push((info.key.clone(), Bytes::from(bytes)));
                    }
                    listed.push(info.key.clone());
                    infos.push(info);
                }
                *self.deletes_listed.lock().expect("deletes listed") = listed;
            }
        }
        for i in &infos {
            run.known
                .entry(i.key.clone())
                .or_insert_with(|| (i.clone(), true));
        }
        let parent = snap.version.checked_sub(1).filter(|&p| p > 0);
        let refs: Vec<&ManifestInfo> = infos.iter().collect();
        let list = build_manifest_list(&self.location, snap.version, parent, &refs)?;
        let list_key = manifest_list_key(snap.version);
        // Readers reach the manifests and the list only through the metadata file written
        // after them, so they are all PUT at once.
        run.list = Some((snap.version, infos));
        writes.push((list_key.clone(), Bytes::from(list)));
        let (deletes_ms, puts_started) = (
            started.elapsed().as_secs_f64() * 1e3,
            std::time::Instant::now(),
        );
        let n_writes = writes.len();
        for len in self.location.put_new(writes).await?.into_iter().flatten() {
            run.report.files_written += 1;
            run.report.bytes_written += len;
        }
        tracing::debug!(
            version = snap.version,
            deletes_ms,
            puts_ms = puts_started.elapsed().as_secs_f64() * 1e3,
            files = n_writes,
            "snapshot's manifests, list and delete files written"
        );
        crate::failpoint::hit("iceberg:after-manifests");

        let s = &info.summary;
        let total_rows: u64 = snap.files.values().map(|f| f.rows).sum();
        let summary = BTreeMap::from([
            ("operation".to_string(), operation(&info).to_string()),
            ("added-data-files".to_string(), s.files_added.to_string()),
            (
                "deleted-data-files".to_string(),
                s.files_removed.to_string(),
            ),
            ("added-records".to_string(), s.rows_added.to_string()),
            ("deleted-records".to_string(), s.rows_removed.to_string()),
            ("total-data-files".to_string(), snap.files.len().to_string()),
            ("total-records".to_string(), total_rows.to_string()),
            (
                "total-delete-files".to_string(),
                delete_totals.0.to_string(),
            ),
            (
                "total-position-deletes".to_string(),
                delete_totals.1.to_string(),
            ),
            ("total-equality-deletes".to_string(), "0".to_string()),
            ("neve.operation".to_string(), info.operation.clone()),
        ]);
        entries.insert(
            snap.version as i64,
            SnapshotEntry {
                snapshot_id: snap.version as i64,
                parent_snapshot_id: parent.map(|p| p as i64),
                sequence_number: snap.version as i64,
                timestamp_ms: snap.timestamp,
                manifest_list: self.location.file_url(&list_key),
                summary,
                schema_id,
            },
        );
        run.report.snapshots_added += 1;
        Ok(())
    }

    /// The position delete files of `snap` (a table with merge semantics `spec`): per group of
    /// files whose rows are not all rows of the table, one per prefix of the group (in merge
    /// order) that adds losers, holding the rows it adds; new ones are PUT here, each group's
    /// as soon as it is decided.
    async fn position_deletes(
        &self,
        run: &mut Run<'_>,
        snap: &Snapshot,
        info: &CommitInfo,
        spec: &crate::merge::MergeSpec,
    ) -> Result<Vec<DeleteFile>> {
        use futures::{FutureExt, StreamExt, TryStreamExt};

        let t0 = std::time::Instant::now();
        let before = self.grouping.lock().expect("grouping").take();
        let grouping = Grouping::of(before, &self.location, snap, spec);
        let (groups, keys): (Vec<Vec<&AddFile>>, Vec<Vec<&str>>) = grouping
            .groups()
            .into_iter()
            .map(|g| (g.files, g.keys))
            .unzip();
        let groups_ms = t0.elapsed().as_secs_f64() * 1e3;
        let t0 = std::time::Instant::now();
        let mut memo = std::mem::take(&mut *self.deletes.lock().expect("deletes"));
        // The delete manifest whose files `memo` holds (taken with it: an error before both
        // are kept again loses both).
        run.deletes_read.extend(std::mem::take(
            &mut *self.deletes_listed.lock().expect("deletes listed"),
        ));
        let mut states = std::mem::take(&mut *self.states.lock().expect("states"));
        let ids = self.key_ids.lock().expect("key ids").clone();
        // Whether each prefix's delete file is known, each looked up once: the memo holds
        // every delete file of the table, and looking each up again at every step below was
        // most of the sync's own thread at 4,000 of them (BENCHMARKS.md, "Forty-seventh
        // session").
        let mut known: Vec<Vec<bool>> = keys
            .iter()
            .map(|ks| ks.iter().map(|k| memo.contains_key(*k)).collect())
            .collect();
        if known.iter().flatten().any(|k| !k) {
            // Learn the delete files the manifests read so far list (the previous version's).
            let unread: Vec<String> = run
                .known
                .values()
                .filter(|(i, _)| i.content == manifest::DELETES)
                .map(|(i, _)| i.key.clone())
                .filter(|k| !run.deletes_read.contains(k))
                .collect();
            // Read a few at a time: a table's delete files are listed by many manifests.
            run.deletes_read.extend(unread.iter().cloned());
            let mut reads = futures::stream::iter(unread.into_iter().map(|key| async move {
                let bytes = self.get(&key).await?;
                Ok::<_, Error>((key, bytes))
            }))
            .buffer_unordered(crate::log::READ_CONCURRENCY);
            while let Some((key, bytes)) = reads.try_next().await? {
                match bytes {
                    Some(bytes) => {
                        for (k, known) in manifest::read_delete_manifest(&key, &bytes)? {
                            memo.entry(k).or_insert(known);
                        }
                    }
                    // Its delete files are not known: nothing is taken as decided.
                    None => run.decided = None,
                }
            }
            drop(reads);
            // A commit that only added files leaves every group none of them joined as the
            // version before had it, and the sync of that version decided each of its
            // prefixes: those that made rows lose are in its delete manifest, read above; the
            // others made none. So a fresh process (each CLI insert) decides only the groups
            // the commit changed.
            let decided = deletes_property(spec);
            let before = snap.version.checked_sub(1);
            if info.summary.files_removed == 0
                && run
                    .decided
                    .as_ref()
                    .is_some_and(|(v, d)| Some(*v) == before && *d == decided)
            {
                for (group, keys) in groups.iter().zip(&keys) {
                    if group.iter().all(|f| f.added_version != Some(snap.version)) {
                        for k in keys {
                            if !memo.contains_key(*k) {
                                memo.insert(k.to_string(), deletes::Known::default());
                            }
                        }
                    }
                }
            }
            // The delete files learnt above.
            for (ks, known) in keys.iter().zip(&mut known) {
                for (k, known) in ks.iter().zip(known) {
                    *known = *known || memo.contains_key(*k);
                }
            }
        }
        // The groups with a prefix not known, each decided from the state kept of its first
        // files (when every prefix it covers is known), reading only the files past it.
        let location = &self.location;
        let given = self.given.as_ref();
        // Time spent weighing rows and encoding delete files, summed over the threads: against
        // `decide_ms` (the wall), how many groups ran at once; more than the cores, and they
        // waited for one.
        let busy = std::sync::atomic::AtomicU64::new(0);
        let shared = &deletes::Shared::new(spec, snap, &ids, Some(given), &busy)?;
        let todo: Vec<(usize, Option<Arc<deletes::GroupState>>)> = (0..groups.len())
            .filter(|&i| known[i].iter().any(|k| !k))
            .map(|i| {
                // Taken, not shared: the decision goes on from it without a copy.
                let kept = states.remove(&groups[i][0].path).filter(|s| {
                    s.files().len() <= groups[i].len()
                        && known[i][..s.files().len()].iter().all(|k| *k)
                });
                (i, kept)
            })
            .collect();
        // Each group's new delete files are encoded as soon as each is decided, on the thread
        // that decided it, while other groups are decided: encoding them all after every
        // decision left a core idle for a third of it (BENCHMARKS.md, "Forty-fourth session").
        // Boxed, so the future of a sync stays `Send` for any lifetime (a server spawns it).
        let decisions: Vec<futures::future::BoxFuture<'_, Result<_>>> = todo
            .into_iter()
            .map(|(i, kept)| {
                let group = &groups[i];
                // Only the prefixes whose delete file is not known are encoded.
                let known = known[i].clone();
                let files = shared.files.clone();
                async move {
                    let (encoded, state) = deletes::resolve(
                        location,
                        spec,
                        group,
                        kept,
                        shared,
                        move |state, j, losers| {
                            if known[j] {
                                return Ok(None);
                            }
                            let rows = losers
                                .into_iter()
                                .map(|(at, p)| (state.url(at), p))
                                .collect();
                            Ok(Some((j, files.bytes(rows)?)))
                        },
                    )
                    .await?;
                    Ok((i, (state, encoded)))
                }
                .boxed()
            })
            .collect();
        let memo_ms = t0.elapsed().as_secs_f64() * 1e3;
        let (groups_decided, t, cpu) = (decisions.len(), std::time::Instant::now(), process_cpu());
        // Each group's delete files are PUT as soon as it is decided, while other groups are
        // decided (readers reach them only through the metadata file written last, as the
        // manifests): PUT after every decision, they waited for the last group. Those decided
        // while a batch is being written go in the next, one batch at a time (see
        // `TableLocation::put_new`).
        let mut decisions = futures::stream::iter(decisions).buffer_unordered(GROUPS_AT_ONCE);
        let mut puts = futures::stream::FuturesUnordered::new();
        let mut pending: Vec<(String, Bytes)> = Vec::new();
        // Sized up front, as `out` below: growing them was a tenth of the sync's own thread.
        let mut decided: HashMap<usize, deletes::GroupState> =
            HashMap::with_capacity(groups_decided);
        // The new prefixes' delete files, by key.
        let mut encoded: HashMap<&str, deletes::Known> =
            HashMap::with_capacity(known.iter().flatten().filter(|k| !**k).count());
        let mut deciding = true;
        while deciding || !puts.is_empty() || !pending.is_empty() {
            if puts.is_empty() && !pending.is_empty() {
                puts.push(self.location.put_new(std::mem::take(&mut pending)));
            }
            tokio::select! {
                d = decisions.next(), if deciding => match d {
                    Some(d) => {
                        let (i, (state, files)) = d?;
                        decided.insert(i, state);
                        for (j, (known, bytes)) in files {
                            let key = keys[i][j];
                            if known.rows > 0 {
                                pending.push((key.to_string(), Bytes::from(bytes)));
                            }
                            encoded.insert(key, known);
                        }
                    }
                    None => deciding = false,
                },
                Some(put) = puts.next(), if !puts.is_empty() => {
                    for len in put?.into_iter().flatten() {
                        run.report.files_written += 1;
                        run.report.bytes_written += len;
                    }
                }
            }
        }
        drop(decisions);
        tracing::debug!(
            version = snap.version,
            groups_decided,
            decide_ms = t.elapsed().as_secs_f64() * 1e3,
            cpu_ms = (process_cpu() - cpu).as_secs_f64() * 1e3,
            weigh_ms = busy.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1e6,
            files_encoded = encoded.len(),
            encode_ms = shared.files.busy.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1e6,
            "position deletes decided and encoded (weigh_ms, with encoding, and encode_ms: summed over the threads; cpu_ms: the process's)"
        );
        let t0 = std::time::Instant::now();
        let named: usize = keys.iter().map(Vec::len).sum();
        let mut out = Vec::with_capacity(named);
        memo.reserve(encoded.len());
        // The delete files known before stay in `memo`, looked up where they are, and the new
        // ones join them: moving every one into a new map took a millisecond of a worst-case
        // sync at 1,581 of them (BENCHMARKS.md, "Seventy-seventh session").
        let mut kept_states = deletes::States::new();
        // Room for best rows of every complete state, and best rows of those kept.
        let (mut kept_slots, mut named_rows) = (0, 0);
        for (i, group) in groups.iter().enumerate() {
            let mut partition_values = None;
            let state = match decided.remove(&i) {
                Some(state) => Some(Arc::new(state)),
                // Unchanged: its state carries over.
                None => states.get(&group[0].path).cloned(),
            };
            let mut sequence = 0;
            for (j, f) in group.iter().enumerate() {
                sequence = sequence.max(f.added_version.unwrap_or(0) as i64);
                let key = keys[i][j];
                let known = match memo.get(key) {
                    // Decided before (a group decided again from its first file in a fresh
                    // process decides the same rows: the file is there).
                    Some(known) => known.clone(),
                    None => {
                        // PUT above, when it has rows.
                        let d = encoded.remove(key).expect("encoded above");
                        memo.insert(key.to_string(), d.clone());
                        d
                    }
                };
                if known.rows > 0 {
                    out.push(DeleteFile {
                        key: key.to_string(),
                        partition_values: partition_values
                            .get_or_insert_with(|| Arc::new(group[0].partition_values.clone()))
                            .clone(),
                        file: known,
                        sequence,
                    });
                }
            }
            if let Some(s) = state.filter(|s| s.files().len() == group.len()) {
                kept_slots += s.slots();
                if kept_slots <= KEPT_SLOTS {
                    named_rows += s.rows();
                    kept_states.insert(group[0].path.clone(), s);
                }
            }
        }
        // Keys no kept state names (groups merged away, or past the cap) are dropped with the
        // states once they outnumber those the states can name: memory stays bounded by the
        // best rows kept, and the groups are decided from their files again.
        if ids.len() > named_rows + KEY_IDS_SLACK {
            *self.key_ids.lock().expect("key ids") = Arc::default();
            kept_states.clear();
        }
        // What was given of files it described and did not need is of no more use.
        self.forget_columns(snap.files.keys().map(|p| p.as_str()));
        // Those no group names any more (groups merged away, or learnt from a manifest and
        // not of this version) are dropped; looked up by the memo's fast hash, as each of
        // them is.
        if memo.len() > named {
            let names: std::collections::HashSet<&str, ahash::RandomState> =
                keys.iter().flatten().copied().collect();
            memo.retain(|k, _| names.contains(k.as_str()));
        }
        *self.deletes.lock().expect("deletes") = memo;
        *self.states.lock().expect("states") = kept_states;
        drop((groups, keys));
        *self.grouping.lock().expect("grouping") = Some(grouping);
        tracing::debug!(
            version = snap.version,
            groups_ms,
            memo_ms,
            out_ms = t0.elapsed().as_secs_f64() * 1e3,
            "position deletes: grouped (the files added) and kept (every delete file)"
        );
        Ok(out)
    }
}

/// CPU time of the whole process, for the debug log: against a phase's wall, how busy the
/// cores were. Zero where the platform has no such clock, and when nothing listens.
fn process_cpu() -> std::time::Duration {
    #[cfg(unix)]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime only writes the timespec it is given.
        if tracing::enabled!(tracing::Level::DEBUG)
            && unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) } == 0
        {
            return std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
        }
    }
    std::time::Duration::ZERO
}

/// Groups of position deletes decided at once (each reads up to `READ_CONCURRENCY` files);
/// their weighing queues on the rayon pool, a thread a core, so more than the cores keep it
/// fed (2, 8 and 32 at once on 2 cores: BENCHMARKS.md, "Forty-seventh session").
const GROUPS_AT_ONCE: usize = 8;

/// The most room for best rows (one per key of a group: 16 to 40 bytes each, and slots by id
/// left empty) a writer keeps of the groups it decided last; past it, a group's files are read
/// again when it next changes.
const KEPT_SLOTS: usize = 8 << 20;

/// How many more keys than the kept states' best rows the key ids may hold before they are
/// dropped with the states.
const KEY_IDS_SLACK: usize = 1 << 20;
