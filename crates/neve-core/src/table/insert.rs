//! Inserts: files, in-memory batches and prepared inputs, each in one commit, written again
//! when a concurrent commit changes the schema under them.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};

use super::{validate_layout, Table};
use crate::error::{Error, Result};
use crate::log::{Action, Metadata, Protocol, Snapshot, TableSettings};
use crate::schema::TableSchema;
use crate::write::input::{open_input, OpenedInput, ReadOptions};
use crate::write::{DataWriter, NoProgress, Progress, WriteOptions};

/// How to insert.
#[derive(Debug, Clone, Default)]
pub struct InsertOptions {
    pub read: ReadOptions,
    pub write: WriteOptions,
    /// Idempotency keys of the requests whose rows this insert commits (`neve serve`); see
    /// [`crate::log::Committer::commit_requests`].
    pub requests: Vec<crate::log::RequestKey>,
    /// The grace of a cleaner this writer knows of besides the table's `gc_grace` (the
    /// server's maintenance policy): the shorter one bounds how old the files may be at commit.
    pub gc_grace_ms: Option<i64>,
}

/// Past half the shortest gc grace in force (the table's `gc_grace`, or `known_ms` a cleaner
/// the writer knows of uses), a cleaner may already have deleted the files a writer wrote
/// `age_ms` ago as orphans: refuse rather than commit references to files that may be gone.
/// Half, so the clocks of the writer, the store and the cleaner may disagree by the other half.
pub(crate) fn written_within_grace(
    settings: &TableSettings,
    known_ms: Option<i64>,
    age_ms: i64,
    what: &str,
) -> Result<()> {
    let table_ms = settings.gc_grace_seconds.map(|g| g as i64 * 1000);
    let Some(grace_ms) = [table_ms, known_ms].into_iter().flatten().min() else {
        return Ok(());
    };
    if age_ms <= grace_ms / 2 {
        return Ok(());
    }
    let whose = if Some(grace_ms) == table_ms {
        "the table's gc_grace"
    } else {
        "the gc grace of this server's maintenance"
    };
    Err(Error::WriteOutlivedGrace {
        what: what.to_string(),
        whose: whose.to_string(),
        age_s: age_ms as f64 / 1000.0,
        grace_s: grace_ms as f64 / 1000.0,
    })
}

/// An input read, typed and checked by [`Table::prepare`], waiting to be committed.
#[derive(Debug, Clone)]
pub struct PreparedInput {
    pub name: String,
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    pub rows: u64,
    /// Memory its batches hold, each allocation once ([`crate::write::held_bytes`]).
    pub bytes: u64,
}

impl PreparedInput {
    /// This input for a table whose schema is now `table`: a column it was prepared with
    /// that the table no longer has (dropped or renamed while the input waited) and that holds
    /// no value in it (filled with nulls when it was prepared) is left out, so the commit does
    /// not bring the column back. A column with values is the input's own, and is kept.
    pub fn fit(&self, table: &TableSchema) -> PreparedInput {
        let gone: Vec<usize> = self
            .schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(i, f)| {
                table.column(f.name()).is_none()
                    && self
                        .batches
                        .iter()
                        .all(|b| b.column(*i).null_count() == b.num_rows())
            })
            .map(|(i, _)| i)
            .collect();
        if gone.is_empty() {
            return self.clone();
        }
        let keep: Vec<usize> = (0..self.schema.fields().len())
            .filter(|i| !gone.contains(i))
            .collect();
        let project = |b: &RecordBatch| b.project(&keep).expect("indices of its own columns");
        PreparedInput {
            name: self.name.clone(),
            schema: Arc::new(
                self.schema
                    .project(&keep)
                    .expect("indices of its own columns"),
            ),
            batches: self.batches.iter().map(project).collect(),
            rows: self.rows,
            bytes: self.bytes,
        }
    }
}

/// The schema the table has once `input` (named `name`) is inserted on top of `merged`:
/// refused when it lacks a not-null column or a partition source, or brings what the table's
/// rules do not allow.
fn check_input(
    meta: &Metadata,
    merged: &TableSchema,
    name: &str,
    input: &Schema,
    strict: bool,
) -> Result<TableSchema> {
    // Errors of the input's schema as a whole name the input, not "schema".
    let named = |e: Error| match e {
        Error::InvalidInput {
            input,
            line,
            column,
            message,
        } if input == "schema" => Error::InvalidInput {
            input: name.to_string(),
            line,
            column,
            message,
        },
        e => e,
    };
    let ts = TableSchema::from_arrow(input).map_err(named)?;
    let has = |c: &str| crate::write::input::has_column(input, c);
    for c in meta.schema.columns.iter().filter(|c| !c.nullable) {
        if !has(&c.name) {
            return Err(Error::InvalidInput {
                input: name.to_string(),
                line: None,
                column: Some(c.name.clone()),
                message: "the column is not null and the input has no such column".into(),
            });
        }
    }
    for f in &meta.partition_by {
        if !has(&f.source) {
            return Err(Error::MissingPartitionColumn {
                input: name.to_string(),
                column: f.source.clone(),
            });
        }
    }
    merged.evolve(&ts, strict).map_err(named)
}

/// What an insert did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct InsertReport {
    /// The version committed; `None` when the input had no rows (nothing committed).
    pub version: Option<u64>,
    pub files: u64,
    pub rows: u64,
    pub bytes: u64,
    pub partitions: u64,
    /// Commit attempts (more than 1 under contention).
    pub attempts: u32,
    /// The commit's unique id (empty when nothing was committed).
    pub commit_id: String,
    pub schema_changed: bool,
}

impl Table {
    /// Insert files (`-` is stdin) in one commit. When a concurrent commit changes the schema
    /// under the insert (see [`Error::ConcurrentSchemaChange`]), files are read and written
    /// again against the new schema, a few times; stdin cannot be read twice.
    pub async fn insert_files(
        &self,
        paths: &[String],
        opts: &InsertOptions,
        progress: Arc<dyn Progress>,
    ) -> Result<InsertReport> {
        let again = !paths.iter().any(|p| p == "-");
        self.with_schema_retries(again, || async {
            let snapshot = self.snapshot().await?;
            let paths = paths.to_vec();
            let read = opts.read.clone();
            let table_schema = snapshot.metadata.schema.clone();
            let inputs = tokio::task::spawn_blocking(move || {
                paths
                    .iter()
                    .map(|p| open_input(p, &read, &table_schema))
                    .collect::<Result<Vec<_>>>()
            })
            .await
            .map_err(|e| Error::TaskFailed(e.to_string()))??;
            self.insert_inputs(snapshot, inputs, opts, progress.clone())
                .await
        })
        .await
    }

    /// Insert in-memory Arrow batches in one commit (written again, like files, when a
    /// concurrent commit changes the schema under it).
    pub async fn insert_batches(
        &self,
        schema: SchemaRef,
        batches: Vec<RecordBatch>,
        opts: &InsertOptions,
        progress: Arc<dyn Progress>,
    ) -> Result<InsertReport> {
        let mut opts = opts.clone();
        opts.write.resident = true;
        let opts = &opts;
        self.with_schema_retries(true, || async {
            let snapshot = self.snapshot().await?;
            let input = OpenedInput {
                name: "<batches>".into(),
                format: crate::write::input::InputFormat::Arrow,
                schema: schema.clone(),
                batches: Box::new(batches.clone().into_iter().map(Ok)),
            };
            self.insert_inputs(snapshot, vec![input], opts, progress.clone())
                .await
        })
        .await
    }

    /// Run an insert again while it fails with [`Error::ConcurrentSchemaChange`] (concurrent
    /// inserts adding different columns: each round one of them commits), up to 8 times.
    async fn with_schema_retries<F, Fut>(&self, again: bool, mut insert: F) -> Result<InsertReport>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<InsertReport>>,
    {
        const ATTEMPTS: u32 = 8;
        let mut attempt = 1;
        loop {
            match insert().await {
                Err(Error::ConcurrentSchemaChange { version, reason })
                    if again && attempt < ATTEMPTS =>
                {
                    tracing::info!(version, %reason, attempt, "schema changed under the insert; writing it again");
                    attempt += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(
                        10 * attempt as u64 + self.committer.jitter_ms(50),
                    ))
                    .await;
                }
                r => return r,
            }
        }
    }

    /// Insert `inputs` (read as their options say: resident or in chunks) on `snapshot`.
    pub(crate) async fn insert_inputs(
        &self,
        mut snapshot: Snapshot,
        inputs: Vec<OpenedInput>,
        opts: &InsertOptions,
        progress: Arc<dyn Progress>,
    ) -> Result<InsertReport> {
        let meta = snapshot.metadata.clone();
        let strict = meta.settings.strict_schema;
        let mut kept = Vec::with_capacity(inputs.len());
        for inp in inputs {
            if inp.schema.fields().is_empty() {
                refuse_rows_without_columns(inp)?;
            } else {
                kept.push(inp);
            }
        }
        let inputs = kept;
        if inputs.is_empty() {
            // Only empty inputs: nothing to check or write.
            return Ok(InsertReport {
                version: None,
                files: 0,
                rows: 0,
                bytes: 0,
                partitions: 0,
                attempts: 0,
                commit_id: String::new(),
                schema_changed: false,
            });
        }
        // Every input's schema is checked before any data is written.
        let mut merged = meta.schema.clone();
        for inp in &inputs {
            merged = check_input(&meta, &merged, &inp.name, &inp.schema, strict)?;
        }
        validate_layout(
            &merged,
            &meta.partition_by,
            &meta.sort_by,
            meta.merge.as_ref(),
        )?;
        crate::partition::check_source_change(&meta.partition_by, &meta.schema, &merged)?;
        let write_meta = Metadata {
            schema: merged.clone(),
            ..meta.clone()
        };
        // When the first file is written: gc may delete files no snapshot references once
        // they are older than its grace, and until the commit these are such files.
        let started_ms = self.clock.now_millis();
        let committer = self.committer.clone();
        let new_id: Arc<dyn Fn() -> String + Send + Sync> =
            Arc::new(move || committer.new_id().to_string());
        // The sync after the commit weighs the key and version columns of a merge-semantics
        // table's new files: kept as they are written, they need not be read back.
        let iceberg = self.committer.iceberg().cloned();
        let keep = iceberg
            .as_ref()
            .and_then(|_| crate::iceberg::IcebergWriter::wants_columns(&meta));
        let mut writer = DataWriter::new(
            self.location.clone(),
            write_meta,
            opts.write.clone(),
            progress,
            new_id,
            self.clock.now_millis(),
        )?
        .keeping(
            keep.as_ref().map_or(&[][..], |(names, _)| names),
            keep.as_ref().map_or(0, |(_, dictionaries)| *dictionaries),
            crate::iceberg::GIVEN_BYTES,
        );
        let written = async {
            for inp in inputs {
                let (tx, rx) = tokio::sync::mpsc::channel(8);
                let splitter = writer.splitter();
                let name = inp.name.clone();
                let resident = opts.write.resident;
                let reader = tokio::task::spawn_blocking(move || {
                    crate::write::split_input(&splitter, inp.batches, &name, resident, &tx)
                });
                let res = writer.write_stream(rx).await;
                reader.await.map_err(|e| Error::TaskFailed(e.to_string()))?;
                res?;
            }
            Ok::<_, Error>(())
        }
        .await;
        if let Err(e) = written {
            writer.cleanup().await;
            return Err(e);
        }
        // Shared with the Iceberg writer, which encodes their manifest entries meanwhile.
        let adds = Arc::new(writer.written.clone());
        let mut report = InsertReport {
            version: None,
            files: adds.len() as u64,
            rows: adds.iter().map(|a| a.rows).sum(),
            bytes: adds.iter().map(|a| a.size).sum(),
            partitions: adds
                .iter()
                .map(|a| &a.partition_values)
                .collect::<std::collections::BTreeSet<_>>()
                .len() as u64,
            attempts: 0,
            commit_id: String::new(),
            schema_changed: false,
        };
        if adds.is_empty() {
            return Ok(report);
        }
        crate::failpoint::hit("insert:after-data");
        let given: Vec<String> = writer.kept.iter().map(|(p, _)| p.clone()).collect();
        if let Some(w) = &iceberg {
            let keys = meta.merge.as_ref().map(|m| m.key()).unwrap_or_default();
            w.give_columns(keys, std::mem::take(&mut writer.kept));
            w.give_adds(snapshot.version + 1, adds.clone());
        }
        let mut schema_changed = false;
        let result = self
            .committer
            .commit_requests(&mut snapshot, "INSERT", &opts.requests, |snap| {
                written_within_grace(
                    &snap.metadata.settings,
                    opts.gc_grace_ms,
                    self.clock.now_millis() - started_ms,
                    "insert",
                )?;
                // A partition source renamed meanwhile: the insert is written again with the
                // partitioning the table has now.
                if snap.metadata.partition_by != meta.partition_by {
                    return Err(Error::ConcurrentSchemaChange {
                        version: snap.version,
                        reason: "the table's partitioning changed while inserting".into(),
                    });
                }
                let schema = snap
                    .metadata
                    .schema
                    .evolve(&merged, snap.metadata.settings.strict_schema)
                    .map_err(|e| match e {
                        Error::ConcurrentSchemaChange { reason, .. } => {
                            Error::ConcurrentSchemaChange {
                                version: snap.version,
                                reason,
                            }
                        }
                        e => e,
                    })?;
                // The table made strict while this insert ran: a type its files were written
                // wider than the table's would not be read back exactly.
                if snap.metadata.settings.strict_schema && schema.evolve(&merged, false)? != schema {
                    return Err(Error::CommitConflict {
                        version: snap.version,
                        reason: "the table's schema was made strict while this insert ran, and its files have types wider than the table's; nothing was committed".into(),
                    });
                }
                // A column set `not null` while this insert ran: its files must have no nulls.
                for c in schema.columns.iter().filter(|c| !c.nullable) {
                    if let Some(a) = adds
                        .iter()
                        .find(|a| a.stats.get(&c.name).is_none_or(|s| s.nulls > 0))
                    {
                        return Err(Error::CommitConflict {
                            version: snap.version,
                            reason: format!(
                                "column '{}' was set not null while this insert ran, and its file {} has nulls there; nothing was committed",
                                c.name, a.path
                            ),
                        });
                    }
                }
                let mut actions = Vec::with_capacity(adds.len() + 1);
                schema_changed = schema != snap.metadata.schema;
                if schema_changed {
                    let needed = crate::log::format_version_for(&schema);
                    if needed > snap.protocol.format_version {
                        actions.push(Action::Protocol(Protocol {
                            format_version: needed,
                        }));
                    }
                    actions.push(Action::Metadata(Metadata {
                        schema,
                        ..snap.metadata.clone()
                    }));
                }
                // Merge semantics order rows of one key by the commit that added them.
                let seq = snap.metadata.merge.as_ref().map(|_| [snap.version + 1; 2]);
                actions.extend(adds.iter().cloned().map(|a| Action::Add(crate::log::AddFile { seq, ..a })));
                Ok(actions)
            })
            .await;
        match result {
            Ok(outcome) => {
                *self.cache.lock().await = Some(snapshot);
                report.version = Some(outcome.version);
                report.attempts = outcome.attempts;
                report.commit_id = outcome.commit_id;
                report.schema_changed = schema_changed;
                Ok(report)
            }
            Err(e) => {
                if let Some(w) = &iceberg {
                    w.forget_columns(given.iter().map(|p| p.as_str()));
                }
                // A commit that may have landed keeps its files (gc's, if it did not).
                if !matches!(e, Error::CommitOutcomeUnknown { .. }) {
                    writer.cleanup().await;
                }
                Err(e)
            }
        }
    }

    /// Read and check one input against `snapshot` as an insert would, before it is queued
    /// (`neve serve`): every batch decoded and conformed to the table's schema (evolved by the
    /// input, as the table's rules allow), so a bad input fails here, with its row and column,
    /// and never fails the inserts it would later be committed with.
    pub fn prepare(&self, meta: &Metadata, input: OpenedInput) -> Result<PreparedInput> {
        if input.schema.fields().is_empty() {
            let (name, schema) = (input.name.clone(), input.schema.clone());
            refuse_rows_without_columns(input)?;
            return Ok(PreparedInput {
                name,
                schema,
                batches: Vec::new(),
                rows: 0,
                bytes: 0,
            });
        }
        let evolved = check_input(
            meta,
            &meta.schema,
            &input.name,
            &input.schema,
            meta.settings.strict_schema,
        )?;
        validate_layout(
            &evolved,
            &meta.partition_by,
            &meta.sort_by,
            meta.merge.as_ref(),
        )?;
        crate::partition::check_source_change(&meta.partition_by, &meta.schema, &evolved)?;
        let target = evolved.to_arrow();
        let mut batches = Vec::new();
        let mut rows = 0u64;
        for b in input.batches {
            let b = b?;
            let first = rows;
            rows += b.num_rows() as u64;
            let b = crate::write::conform::conform_batch(
                &b,
                &target,
                &Default::default(),
                &input.name,
                &|i| format!("row {}", first + i as u64 + 1),
            )?;
            crate::write::assign_batch(&b, &meta.partition_by)?;
            batches.push(b);
        }
        let bytes = crate::write::held_bytes(&batches);
        Ok(PreparedInput {
            name: input.name,
            schema: target,
            batches,
            rows,
            bytes,
        })
    }

    /// Insert prepared inputs (see [`Table::prepare`]) in one commit. An input whose schema
    /// no longer fits the table (a concurrent change) fails the insert as `insert_batches`
    /// would; the caller may prepare it again.
    pub async fn insert_prepared(
        &self,
        inputs: &[PreparedInput],
        opts: &InsertOptions,
    ) -> Result<InsertReport> {
        self.with_schema_retries(true, || async {
            let snapshot = self.snapshot().await?;
            let fitted: Vec<PreparedInput> = inputs
                .iter()
                .map(|p| p.fit(&snapshot.metadata.schema))
                .collect();
            let inputs = &fitted[..];
            // Inputs of one schema are one stream, so a flush of many small requests writes
            // one file per partition, not one per request.
            let mut opened: Vec<OpenedInput> = Vec::new();
            let mut start = 0;
            while start < inputs.len() {
                let schema = &inputs[start].schema;
                let end = inputs[start..]
                    .iter()
                    .position(|p| p.schema != *schema)
                    .map_or(inputs.len(), |n| start + n);
                let run = &inputs[start..end];
                let batches: Vec<RecordBatch> =
                    run.iter().flat_map(|p| p.batches.iter().cloned()).collect();
                opened.push(OpenedInput {
                    name: match run {
                        [one] => one.name.clone(),
                        _ => format!("{} inputs ({} ...)", run.len(), run[0].name),
                    },
                    format: crate::write::input::InputFormat::Arrow,
                    schema: schema.clone(),
                    batches: Box::new(batches.into_iter().map(Ok)),
                });
                start = end;
            }
            self.insert_inputs(snapshot, opened, opts, Arc::new(crate::write::NoProgress))
                .await
        })
        .await
    }

    /// Insert with no progress display.
    pub async fn insert(&self, paths: &[String]) -> Result<InsertReport> {
        self.insert_files(paths, &InsertOptions::default(), Arc::new(NoProgress))
            .await
    }
}

/// An input without columns is empty, or its rows could not be stored: refused, not dropped
/// (`[{}, {}]`, a table of rows and no columns).
fn refuse_rows_without_columns(input: OpenedInput) -> Result<()> {
    let mut rows = 0u64;
    for b in input.batches {
        rows += b?.num_rows() as u64;
    }
    if rows > 0 {
        return Err(Error::InvalidInput {
            input: input.name,
            line: None,
            column: None,
            message: format!("{rows} rows have no columns: a row needs a value to be stored"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
