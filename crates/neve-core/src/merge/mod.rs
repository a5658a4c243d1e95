//! Compaction: many small sorted files of a partition become few large sorted ones.
//!
//! A merge plans against one snapshot (the log alone), streams each group's rows through a
//! k-way merge into new files (groups in parallel), then commits every group's removes and
//! adds in one commit. The commit re-checks, against the latest snapshot, that each group's
//! inputs are all still alive: a group whose input another commit removed (another merge, a
//! delete, a dropped partition) is left out and its output deleted, so two mergers racing
//! never duplicate a row. Inserts only add files, so they never conflict with a merge.

mod engines;
mod plan;
mod reduce;
mod spec;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

pub use engines::{relation, Engine, Scan};
pub(crate) use plan::known_partitions;
pub(crate) use plan::seq_of;
pub use plan::{plan, MergeGroup, MergeOptions, MergeOrder, MergePlan};
pub(crate) use reduce::Reducer;
pub use spec::MergeSpec;

use crate::error::{Error, Result};
use crate::log::{Action, AddFile, RemoveFile, Snapshot};
use crate::table::Table;
use crate::write::sink::{delete_quietly, rewrite_props, run_rewrites, RewriteJob, SinkConfig};
use crate::write::Progress;

/// What a merge did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MergeReport {
    /// The version committed; `None` when there was nothing to merge (or a dry run).
    pub version: Option<u64>,
    pub partitions: usize,
    pub files_in: u64,
    pub bytes_in: u64,
    pub files_out: u64,
    pub bytes_out: u64,
    pub rows: u64,
    /// Groups left out because a concurrent commit removed one of their inputs.
    pub groups_conflicted: usize,
    /// Partitions left for a later run by the cap.
    pub deferred_partitions: usize,
    pub plan_ms: u64,
    pub elapsed_ms: u64,
    pub attempts: u32,
    /// The partitions touched.
    pub partition_names: Vec<String>,
}

/// One group's output.
struct Merged {
    group: usize,
    outputs: Vec<AddFile>,
}

impl Table {
    /// Plan a merge against the latest snapshot, without writing anything.
    pub async fn plan_merge(&self, opts: &MergeOptions) -> Result<MergePlan> {
        let snapshot = self.snapshot().await?;
        plan(&snapshot, opts)
    }

    /// Merge small files (see [`MergeOptions`]) and commit the result in one commit.
    pub async fn merge(
        &self,
        opts: &MergeOptions,
        progress: Arc<dyn Progress>,
    ) -> Result<MergeReport> {
        let started = Instant::now();
        let mut snapshot = self.snapshot().await?;
        let plan = plan(&snapshot, opts)?;
        let mut report = MergeReport {
            plan_ms: started.elapsed().as_millis() as u64,
            deferred_partitions: plan.deferred_partitions,
            ..Default::default()
        };
        if plan.groups.is_empty() {
            report.elapsed_ms = started.elapsed().as_millis() as u64;
            return Ok(report);
        }
        tracing::info!(
            groups = plan.groups.len(),
            files = plan.files(),
            bytes = plan.bytes(),
            version = plan.version,
            "merge planned"
        );
        let started_ms = self.clock.now_millis();
        let merged = self.write_groups(&snapshot, &plan, opts, progress).await?;
        crate::failpoint::hit("merge:after-data");

        // Commit every group whose inputs are all still alive.
        let mut kept: Vec<usize> = Vec::new();
        let written_with = snapshot.metadata.schema.clone();
        let result = self
            .committer
            .commit(&mut snapshot, "MERGE", |snap| {
                kept.clear();
                crate::table::written_within_grace(
                    &snap.metadata.settings,
                    opts.gc_grace_ms,
                    self.clock.now_millis() - started_ms,
                    "merge",
                )?;
                // Outputs' statistics are keyed by the names at write time.
                let renamed = written_with.renames_and_drops(&snap.metadata.schema);
                let now = self.clock.now_millis();
                let mut actions = Vec::new();
                for m in &merged {
                    let g = &plan.groups[m.group];
                    if !g.inputs.iter().all(|f| snap.files.contains_key(&f.path)) {
                        continue;
                    }
                    kept.push(m.group);
                    actions.extend(g.inputs.iter().map(|f| remove(f, now)));
                    actions.extend(
                        m.outputs
                            .iter()
                            .map(|f| Action::Add(crate::log::rekey_stats(f, &renamed))),
                    );
                }
                if kept.is_empty() {
                    return Err(Error::CommitConflict {
                        version: snap.version,
                        reason: "every file this merge read was removed by a concurrent commit \
                                 (another merge, a delete or a dropped partition); nothing merged"
                            .into(),
                    });
                }
                Ok(actions)
            })
            .await;
        let kept_set: BTreeSet<usize> = kept.iter().copied().collect();
        let discarded: Vec<_> = merged
            .iter()
            // A commit that may have landed keeps what it would have committed.
            .filter(|m| {
                !kept_set.contains(&m.group)
                    || matches!(&result, Err(e) if !matches!(e, Error::CommitOutcomeUnknown { .. }))
            })
            .flat_map(|m| m.outputs.iter().map(|a| self.location.child(&a.path)))
            .collect();
        delete_quietly(&self.location, discarded).await;
        let outcome = result?;
        *self.cache.lock().await = Some(snapshot);

        let mut names = BTreeSet::new();
        for m in merged.iter().filter(|m| kept_set.contains(&m.group)) {
            let g = &plan.groups[m.group];
            names.insert(g.partition.clone());
            report.files_in += g.files as u64;
            report.bytes_in += g.bytes;
            report.rows += g.rows;
            report.files_out += m.outputs.len() as u64;
            report.bytes_out += m.outputs.iter().map(|a| a.size).sum::<u64>();
        }
        report.version = Some(outcome.version);
        report.attempts = outcome.attempts;
        report.groups_conflicted = merged.len() - kept_set.len();
        report.partitions = names.len();
        report.partition_names = names.into_iter().collect();
        report.elapsed_ms = started.elapsed().as_millis() as u64;
        Ok(report)
    }

    /// Write every group's merged files, `opts.parallelism` groups at a time. On failure,
    /// every file written so far is deleted.
    async fn write_groups(
        &self,
        snapshot: &Snapshot,
        plan: &MergePlan,
        opts: &MergeOptions,
        progress: Arc<dyn Progress>,
    ) -> Result<Vec<Merged>> {
        let meta = &snapshot.metadata;
        let (schema, props, ids) = rewrite_props(meta)?;
        let committer = self.committer.clone();
        let new_id: Arc<dyn Fn() -> String + Send + Sync> =
            Arc::new(move || committer.new_id().to_string());
        let now = self.clock.now_millis();
        let jobs = plan
            .groups
            .iter()
            .map(|g| {
                let mut inputs = g.inputs.clone();
                let semantic = meta.merge.as_ref();
                if semantic.is_some() {
                    inputs.sort_by_key(seq_of);
                }
                let seq = semantic.map(|_| {
                    [
                        inputs.iter().map(|f| seq_of(f).0).min().unwrap_or(0),
                        inputs.iter().map(|f| seq_of(f).1).max().unwrap_or(0),
                    ]
                });
                RewriteJob {
                    config: SinkConfig {
                        location: self.location.clone(),
                        schema: schema.clone(),
                        ids: ids.clone(),
                        props: crate::write::sink::without_nan_statistics(
                            &props, &schema, &g.inputs,
                        ),
                        folder: g.partition.clone(),
                        partition_values: g.inputs[0].partition_values.clone(),
                        target_size: opts.target_file_size,
                        new_id: new_id.clone(),
                        now_ms: now,
                        progress: progress.clone(),
                        seq,
                        merged: semantic.is_some(),
                    },
                    inputs,
                    // With merge semantics, rows of a key stay in file (commit) order: merged by
                    // the key alone, which the output, one row per key, is sorted by in full.
                    sort_by: match semantic {
                        Some(s) => s.key().to_vec(),
                        None => meta.sort_by.clone(),
                    },
                    keep: None,
                    // A deleted key's row goes only when nothing older can hold the key and
                    // nothing later can lose to it: with a version column, a later insert of a
                    // lower version must still find the delete, so the row stays (one per key).
                    reduce: semantic.map(|s| {
                        let versioned = matches!(
                            s,
                            crate::merge::MergeSpec::Replace {
                                version: Some(_),
                                ..
                            }
                        );
                        (s.clone(), g.oldest && !versioned)
                    }),
                }
            })
            .collect();
        let outputs = run_rewrites(&self.location, jobs, opts.parallelism).await?;
        Ok(outputs
            .into_iter()
            .enumerate()
            .map(|(group, outputs)| Merged { group, outputs })
            .collect())
    }
}

/// The tombstone of an alive file.
pub(crate) fn remove(f: &AddFile, now_ms: i64) -> Action {
    Action::Remove(RemoveFile {
        path: f.path.clone(),
        deletion_timestamp: now_ms,
        size: Some(f.size),
        rows: Some(f.rows),
    })
}

#[cfg(test)]
mod semantic_tests;
#[cfg(test)]
mod tests;
