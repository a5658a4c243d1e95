//! Dropping partitions and deleting rows, each as one atomic commit.
//!
//! - `drop_partitions` is metadata only: one commit removes every file of the partitions,
//!   computed on the latest snapshot at each commit attempt, so at the committed version the
//!   partitions are empty.
//! - `delete` decides per file from the log's statistics whether the predicate holds for all,
//!   none or some of its rows; files where it holds for all are removed, files where it may
//!   hold for some are rewritten without those rows, the others are not touched. The commit
//!   checks that the files it removes are still alive and that no file added since could hold
//!   a matching row; otherwise it plans again on the new snapshot. So at the committed version
//!   no row matches the predicate.
//!
//! Removed files stay readable for time travel until `neve gc` deletes them after the
//! retention.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Instant;

use datafusion::common::DFSchema;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::{Expr, ExprSchemable};
use datafusion::prelude::SessionContext;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::log::{Action, AddFile, Snapshot};
use crate::merge::{known_partitions, remove};
use crate::partition::partition_path;
use crate::query::{query_error, SnapshotTable};
use crate::storage::TableLocation;
use crate::table::Table;
use crate::write::sink::{delete_quietly, rewrite_props, run_rewrites, RewriteJob, SinkConfig};
use crate::write::Progress;

/// What `drop_partitions` did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DropReport {
    pub version: u64,
    pub partitions: Vec<String>,
    pub files: u64,
    pub rows: u64,
    pub bytes: u64,
}

/// What `delete` did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DeleteReport {
    /// `None` when no row matched (nothing committed).
    pub version: Option<u64>,
    pub rows_deleted: u64,
    /// Files removed whole (every row matched).
    pub files_removed: u64,
    /// Files rewritten without the matching rows.
    pub files_rewritten: u64,
    pub files_added: u64,
    pub bytes_removed: u64,
    pub bytes_added: u64,
    pub partitions: Vec<String>,
    /// Plans made (more than 1 when concurrent commits touched the same files).
    pub attempts: u32,
    pub elapsed_ms: u64,
}

/// Plans a delete may make before giving up under contention.
const DELETE_ATTEMPTS: u32 = 10;

impl Table {
    /// Remove every file of the given partition folders (`d=2021-08`, or just `2021-08` for a
    /// table with one partition level; a prefix of a multi-level path drops all below it).
    pub async fn drop_partitions(&self, partitions: &[String]) -> Result<DropReport> {
        if partitions.is_empty() {
            // Refused rather than committed as an empty version.
            return Err(Error::InvalidPartitionSpec {
                spec: String::new(),
                reason: "no partition named: nothing to drop".into(),
            });
        }
        let mut snapshot = self.snapshot().await?;
        let fields = snapshot.metadata.partition_by.clone();
        if fields.is_empty() {
            return Err(Error::InvalidPartitionSpec {
                spec: partitions.join(" "),
                reason: "the table is not partitioned".into(),
            });
        }
        let wanted: Vec<String> = partitions
            .iter()
            .map(|p| {
                let p = p.trim_matches('/');
                if !p.contains('=') && fields.len() == 1 {
                    format!("{}={p}", fields[0].name)
                } else {
                    p.to_string()
                }
            })
            .collect();
        let mut report = DropReport::default();
        let outcome = self
            .committer
            .commit(&mut snapshot, "DROP PARTITION", |snap| {
                let now = self.clock.now_millis();
                let mut matched = vec![false; wanted.len()];
                let mut actions = Vec::new();
                let mut rows = 0;
                let mut bytes = 0;
                let mut all = BTreeSet::new();
                for f in snap.files.values() {
                    let folder = folder_of(snap, f);
                    let hit = wanted.iter().enumerate().fold(false, |hit, (i, w)| {
                        let m = folder == *w || folder.starts_with(&format!("{w}/"));
                        matched[i] |= m;
                        hit || m
                    });
                    if hit {
                        rows += f.rows;
                        bytes += f.size;
                        actions.push(remove(f, now));
                    }
                    all.insert(folder);
                }
                if let Some(i) = matched.iter().position(|m| !m) {
                    return Err(Error::PartitionNotFound {
                        partition: wanted[i].clone(),
                        known: known_partitions(all.iter()),
                    });
                }
                report = DropReport {
                    version: 0,
                    partitions: wanted.clone(),
                    files: actions.len() as u64,
                    rows,
                    bytes,
                };
                Ok(actions)
            })
            .await?;
        *self.cache.lock().await = Some(snapshot);
        report.version = outcome.version;
        Ok(report)
    }

    /// Delete the rows for which the SQL `predicate` is true, in one commit.
    pub async fn delete(
        &self,
        predicate: &str,
        parallelism: usize,
        progress: Arc<dyn Progress>,
    ) -> Result<DeleteReport> {
        let started = Instant::now();
        for attempt in 1..=DELETE_ATTEMPTS {
            let snapshot = self.snapshot().await?;
            let expr = parse_predicate(&snapshot, predicate)?;
            if let Some(spec) = &snapshot.metadata.merge {
                // Dropping some stored rows of a key would bring an older row of it back:
                // only whole keys can go.
                if let Some(c) = expr
                    .column_refs()
                    .into_iter()
                    .find(|c| !spec.key().contains(&c.name))
                {
                    return Err(Error::InvalidQuery {
                        message: format!(
                            "the table merges rows by key ({spec}), so a delete may only name key columns, not '{}'; {}",
                            c.name,
                            match spec.deleted() {
                                Some(d) => format!("to delete keys by another column, insert their rows with {d} = true"),
                                None => "select the keys to delete first".to_string(),
                            }
                        ),
                    });
                }
            }
            match self
                .delete_once(snapshot, &expr, parallelism, progress.clone())
                .await?
            {
                Some(mut report) => {
                    report.attempts = attempt;
                    report.elapsed_ms = started.elapsed().as_millis() as u64;
                    return Ok(report);
                }
                None => tracing::info!(attempt, "delete raced with another commit; planning again"),
            }
        }
        Err(Error::CommitRetriesExhausted {
            attempts: DELETE_ATTEMPTS,
        })
    }

    /// Plan, rewrite and commit; `None` when a concurrent commit forces a new plan (a file
    /// this delete read is gone, or the schema changed). Files a concurrent insert added that
    /// the predicate may match are planned and rewritten on their own, keeping what was
    /// rewritten already, so a delete on a table that is being written to finishes.
    async fn delete_once(
        &self,
        mut snapshot: Snapshot,
        expr: &Expr,
        parallelism: usize,
        progress: Arc<dyn Progress>,
    ) -> Result<Option<DeleteReport>> {
        let mut todo: Vec<AddFile> = snapshot
            .files
            .values()
            .map(|f| f.as_ref().clone())
            .collect();
        let mut planned: HashSet<String> = snapshot.files.keys().cloned().collect();
        let written_with = snapshot.metadata.schema.clone();
        let started_ms = self.clock.now_millis();
        let mut report = DeleteReport::default();
        let mut whole: Vec<AddFile> = Vec::new();
        // Rewritten files that lost rows, with what replaces them.
        let mut changed: Vec<(AddFile, Vec<AddFile>)> = Vec::new();
        // The paths of what the rounds so far wrote, for when they are given up.
        let written = |changed: &[(AddFile, Vec<AddFile>)]| {
            changed
                .iter()
                .flat_map(|(_, o)| o.iter().map(|a| self.location.child(&a.path)))
                .collect()
        };
        for round in 1..=DELETE_ATTEMPTS {
            let mut partial: Vec<AddFile> = Vec::new();
            for (f, d) in decide(&self.location, &snapshot, std::mem::take(&mut todo), expr) {
                match d {
                    Some(true) => whole.push(f),
                    None => partial.push(f),
                    Some(false) => {}
                }
            }
            let rewritten = match self
                .rewrite_without(&snapshot, &partial, expr, parallelism, progress.clone())
                .await
            {
                Ok(r) => r,
                Err(e) => {
                    // What earlier rounds wrote goes too: nothing is left behind.
                    delete_quietly(&self.location, written(&changed)).await;
                    return Err(e);
                }
            };
            let mut unchanged_outputs = Vec::new();
            for (input, out) in rewritten {
                let kept: u64 = out.iter().map(|a| a.rows).sum();
                if kept < input.rows {
                    report.rows_deleted += input.rows - kept;
                    changed.push((input, out));
                } else {
                    // A file that turned out to hold no matching row is left as it was.
                    unchanged_outputs.extend(out.iter().map(|a| self.location.child(&a.path)));
                }
            }
            delete_quietly(&self.location, unchanged_outputs).await;
            let deleted = report.rows_deleted + whole.iter().map(|f| f.rows).sum::<u64>();
            if deleted == 0 {
                return Ok(Some(report));
            }
            let outputs: Vec<AddFile> = changed.iter().flat_map(|(_, o)| o.clone()).collect();
            let mut raced = false;
            let mut more: Vec<AddFile> = Vec::new();
            let result = self
                .committer
                .commit(&mut snapshot, "DELETE", |snap| {
                    let now = self.clock.now_millis();
                    if !outputs.is_empty() {
                        crate::table::written_within_grace(
                            &snap.metadata.settings,
                            None,
                            now - started_ms,
                            "delete",
                        )?;
                    }
                    let renamed = written_with.renames_and_drops(&snap.metadata.schema);
                    let gone = whole
                        .iter()
                        .chain(changed.iter().map(|(i, _)| i))
                        .any(|f| !snap.files.contains_key(&f.path));
                    let added: Vec<AddFile> = snap
                        .files
                        .values()
                        .filter(|f| !planned.contains(&f.path))
                        .map(|f| f.as_ref().clone())
                        .collect();
                    let may_match: Vec<AddFile> = decide(&self.location, snap, added, expr)
                        .into_iter()
                        .filter(|(_, d)| *d != Some(false))
                        .map(|(f, _)| f)
                        .collect();
                    if gone || !may_match.is_empty() {
                        raced = true;
                        // Files added meanwhile are planned on their own, unless a file
                        // this delete read is gone (then everything is planned again).
                        more = if gone { Vec::new() } else { may_match };
                        return Err(Error::CommitConflict {
                            version: snap.version,
                            reason: "files this delete read were changed by a concurrent commit"
                                .into(),
                        });
                    }
                    let mut actions: Vec<Action> = whole.iter().map(|f| remove(f, now)).collect();
                    for (input, out) in &changed {
                        actions.push(remove(input, now));
                        actions.extend(
                            out.iter()
                                .map(|f| Action::Add(crate::log::rekey_stats(f, &renamed))),
                        );
                    }
                    Ok(actions)
                })
                .await;
            let outcome = match result {
                Ok(o) => o,
                // A commit that may have landed keeps its files (gc's, if it did not).
                Err(e @ Error::CommitOutcomeUnknown { .. }) => return Err(e),
                Err(e) => {
                    let same_schema = snapshot.metadata.schema == written_with;
                    if raced && !more.is_empty() && same_schema && round < DELETE_ATTEMPTS {
                        tracing::info!(
                            round,
                            files = more.len(),
                            "files added while deleting may match; rewriting those too"
                        );
                        planned.extend(more.iter().map(|f| f.path.clone()));
                        todo = more;
                        continue;
                    }
                    delete_quietly(&self.location, written(&changed)).await;
                    return if raced { Ok(None) } else { Err(e) };
                }
            };
            *self.cache.lock().await = Some(snapshot.clone());
            report.rows_deleted = deleted;
            let mut partitions = BTreeSet::new();
            for f in whole.iter().chain(changed.iter().map(|(i, _)| i)) {
                partitions.insert(folder_of(&snapshot, f));
                report.bytes_removed += f.size;
            }
            for (_, out) in &changed {
                report.files_added += out.len() as u64;
                report.bytes_added += out.iter().map(|a| a.size).sum::<u64>();
            }
            report.version = Some(outcome.version);
            report.files_removed = whole.len() as u64;
            report.files_rewritten = changed.len() as u64;
            report.partitions = partitions.into_iter().collect();
            return Ok(Some(report));
        }
        Err(Error::CommitRetriesExhausted {
            attempts: DELETE_ATTEMPTS,
        })
    }

    /// Each of `files` rewritten without the rows matching `expr`, in parallel.
    async fn rewrite_without(
        &self,
        snapshot: &Snapshot,
        files: &[AddFile],
        expr: &Expr,
        parallelism: usize,
        progress: Arc<dyn Progress>,
    ) -> Result<Vec<(AddFile, Vec<AddFile>)>> {
        let (schema, props, ids) = rewrite_props(&snapshot.metadata)?;
        let committer = self.committer.clone();
        let new_id: Arc<dyn Fn() -> String + Send + Sync> =
            Arc::new(move || committer.new_id().to_string());
        let keep = Expr::IsNotTrue(Box::new(expr.clone()));
        let now = self.clock.now_millis();
        let jobs = files
            .iter()
            .map(|f| RewriteJob {
                config: SinkConfig {
                    location: self.location.clone(),
                    schema: schema.clone(),
                    props: crate::write::sink::without_nan_statistics(
                        &props,
                        &schema,
                        std::slice::from_ref(f),
                    ),
                    ids: ids.clone(),
                    folder: folder_of(snapshot, f),
                    partition_values: f.partition_values.clone(),
                    target_size: u64::MAX,
                    new_id: new_id.clone(),
                    now_ms: now,
                    progress: progress.clone(),
                    seq: f.seq,
                    merged: f.merged,
                },
                inputs: vec![f.clone()],
                sort_by: Vec::new(),
                keep: Some(keep.clone()),
                reduce: None,
            })
            .collect();
        let outputs = run_rewrites(&self.location, jobs, parallelism).await?;
        Ok(files.iter().cloned().zip(outputs).collect())
    }
}

/// The partition folder of a file.
fn folder_of(snapshot: &Snapshot, f: &AddFile) -> String {
    let fields = &snapshot.metadata.partition_by;
    let values: Vec<Option<String>> = fields
        .iter()
        .map(|p| f.partition_values.get(&p.name).cloned().flatten())
        .collect();
    partition_path(fields, &values)
}

/// Parse a SQL predicate over the table's columns; it must be boolean.
fn parse_predicate(snapshot: &Snapshot, sql: &str) -> Result<Expr> {
    crate::query::dialect::check_depth(sql)?;
    let schema = snapshot.metadata.schema.to_arrow();
    let df_schema = DFSchema::try_from(schema).map_err(query_error)?;
    let ctx = SessionContext::new();
    let expr = ctx
        .parse_sql_expr(sql, &df_schema)
        .map_err(|e| match query_error(e) {
            // Only a subquery names a table here.
            Error::UnknownTable { message } => Error::InvalidQuery {
                message: format!(
                    "the predicate '{sql}' reads a table ({message}): it may use only the table's own columns, with no subquery"
                ),
            },
            e => e,
        })?;
    let t = expr.get_type(&df_schema).map_err(query_error)?;
    if t != arrow::datatypes::DataType::Boolean {
        return Err(Error::InvalidQuery {
            message: format!("the predicate '{sql}' is of type {t}, not boolean"),
        });
    }
    crate::query::coerce_predicate(expr, &df_schema)
}

/// What the log says of `expr` in each of `files` (see `SnapshotTable::decide`).
fn decide(
    location: &TableLocation,
    snapshot: &Snapshot,
    files: Vec<AddFile>,
    expr: &Expr,
) -> Vec<(AddFile, Option<bool>)> {
    if files.is_empty() {
        return Vec::new();
    }
    let view = Snapshot {
        version: snapshot.version,
        timestamp: snapshot.timestamp,
        protocol: snapshot.protocol.clone(),
        metadata: snapshot.metadata.clone(),
        files: files
            .into_iter()
            .map(|f| (f.path.clone(), Arc::new(f)))
            .collect(),
        tombstones: Default::default(),
        requests: Default::default(),
    };
    let url = ObjectStoreUrl::parse("neve://delete").expect("valid url");
    let table = SnapshotTable::new(location.clone(), view, url);
    let stats = table.stats().expect("built from a full snapshot");
    let d = table.decide(stats, expr);
    stats
        .files
        .iter()
        .map(|f| f.as_ref().clone())
        .zip(d)
        .collect()
}
