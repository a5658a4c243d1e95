//! A streaming file writer for rewrites (merge, delete): batches of one partition, already in
//! order, go in; Parquet files of about a target size come out, uploaded while they are
//! written (multipart), with the log's statistics accumulated batch by batch. Memory stays at
//! about one row group, whatever the size of the input.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType, SchemaRef};
use futures::StreamExt;
use object_store::buffered::BufWriter;
use object_store::path::Path;
use object_store::ObjectStoreExt;
use parquet::arrow::AsyncArrowWriter;
use parquet::file::properties::WriterProperties;
use serde_json::Value;

use datafusion::logical_expr::Expr;

use super::encode::{parse_compression, tune_dictionary, writer_properties};
use super::stats::{batch_stats, stat_paths};
use super::Progress;
use crate::error::{Error, Result};
use crate::log::{AddFile, ColumnStats, Metadata};
use crate::storage::TableLocation;

/// Where the files of one rewrite go and how they are encoded.
#[derive(Clone)]
pub(crate) struct SinkConfig {
    pub location: TableLocation,
    pub schema: SchemaRef,
    pub props: WriterProperties,
    /// How input files' columns are found (by field id).
    pub ids: Arc<crate::query::FieldIdAdapterFactory>,
    /// Partition folder (`d=2021-08`), empty for an unpartitioned table.
    pub folder: String,
    pub partition_values: BTreeMap<String, Option<String>>,
    /// A file is closed once it reaches this many bytes.
    pub target_size: u64,
    pub new_id: Arc<dyn Fn() -> String + Send + Sync>,
    pub now_ms: i64,
    pub progress: Arc<dyn Progress>,
    /// Tables with merge semantics: the files' [`AddFile::seq`] and [`AddFile::merged`].
    pub seq: Option<[u64; 2]>,
    pub merged: bool,
}

struct OpenFile {
    rel: String,
    writer: AsyncArrowWriter<BufWriter>,
    stats: StatsBuilder,
    rows: u64,
}

/// `props` with no statistics for the float columns any of `inputs` may hold a NaN in (a max
/// unknown though the column has values): a rewrite's batches come one by one, and a NaN in a
/// later one than the first (which `tune_dictionary` looks at) would be left out of the bounds
/// readers prune row groups and pages by.
pub(crate) fn without_nan_statistics(
    props: &WriterProperties,
    schema: &SchemaRef,
    inputs: &[AddFile],
) -> WriterProperties {
    let nan = |name: &str| {
        inputs.iter().any(|f| {
            f.stats
                .get(name)
                .is_some_and(|s| s.max.is_none() && s.nulls < f.rows)
        })
    };
    let mut builder: Option<parquet::file::properties::WriterPropertiesBuilder> = None;
    for f in schema.fields() {
        if f.data_type().is_floating() && nan(f.name()) {
            let b = builder
                .take()
                .unwrap_or_else(|| props.clone().into_builder());
            builder = Some(b.set_column_statistics_enabled(
                parquet::schema::types::ColumnPath::from(f.name().as_str()),
                parquet::file::properties::EnabledStatistics::None,
            ));
        }
    }
    builder.map(|b| b.build()).unwrap_or_else(|| props.clone())
}

/// Writes one ordered stream of batches into files of about `target_size`.
pub(crate) struct FileSink {
    config: SinkConfig,
    stored: super::stored::Stored,
    current: Option<OpenFile>,
    /// Files completed so far.
    pub written: Vec<AddFile>,
}

impl FileSink {
    pub fn new(config: SinkConfig) -> Self {
        Self {
            stored: super::stored::Stored::new(&config.schema),
            config,
            current: None,
            written: Vec::new(),
        }
    }

    /// Append a batch (in the table schema); closes the file once it is big enough.
    pub async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        // In the types the file stores (stored.rs).
        let stored = self.stored.batch(batch)?;
        if self.current.is_none() {
            let id = (self.config.new_id)();
            let rel = if self.config.folder.is_empty() {
                format!("_data/part-{id}.parquet")
            } else {
                format!("_data/{}/part-{id}.parquet", self.config.folder)
            };
            let path = self.config.location.child(&rel);
            let upload =
                BufWriter::with_capacity(self.config.location.store.clone(), path, 8 << 20)
                    .with_max_concurrency(4);
            let props = tune_dictionary(&stored, self.config.props.clone());
            let writer =
                AsyncArrowWriter::try_new(upload, self.stored.schema.clone(), Some(props))?;
            self.current = Some(OpenFile {
                rel,
                writer,
                stats: StatsBuilder::new(&self.config.schema),
                rows: 0,
            });
        }
        let f = self.current.as_mut().expect("opened above");
        f.writer.write(&stored).await?;
        f.stats.update(batch)?;
        f.rows += batch.num_rows() as u64;
        self.config.progress.rows_read(batch.num_rows() as u64);
        let size = (f.writer.bytes_written() + f.writer.in_progress_size()) as u64;
        if size >= self.config.target_size {
            self.close_current().await?;
        }
        Ok(())
    }

    /// Close the last file; the files written, in order.
    pub async fn finish(&mut self) -> Result<Vec<AddFile>> {
        self.close_current().await?;
        Ok(std::mem::take(&mut self.written))
    }

    async fn close_current(&mut self) -> Result<()> {
        let Some(mut f) = self.current.take() else {
            return Ok(());
        };
        f.writer.finish().await?;
        let size = f.writer.bytes_written() as u64;
        self.config.progress.file_written(size);
        self.written.push(AddFile {
            path: f.rel,
            partition_values: self.config.partition_values.clone(),
            size,
            rows: f.rows,
            modification_time: self.config.now_ms,
            stats: f.stats.finish(),
            seq: self.config.seq,
            merged: self.config.merged,
            added_version: None,
        });
        Ok(())
    }

    /// Paths this sink may have created, finished or not (for cleanup after a failure).
    pub fn paths(&self) -> Vec<Path> {
        self.written
            .iter()
            .map(|a| a.path.as_str())
            .chain(self.current.as_ref().map(|f| f.rel.as_str()))
            .map(|p| self.config.location.child(p))
            .collect()
    }
}

/// Best-effort deletion of files a failed rewrite wrote; `neve gc` removes what is left.
pub(crate) async fn delete_quietly(location: &TableLocation, paths: Vec<Path>) {
    let store = location.store.clone();
    let n = paths.len();
    let failed = futures::stream::iter(paths.into_iter().map(|p| {
        let store = store.clone();
        async move { store.delete(&p).await }
    }))
    .buffer_unordered(16)
    .filter(|r| {
        futures::future::ready(
            matches!(r, Err(e) if !matches!(e, object_store::Error::NotFound { .. })),
        )
    })
    .count()
    .await;
    if failed > 0 {
        tracing::warn!(
            files = n,
            failed,
            "could not remove files of a failed rewrite; `neve gc` will"
        );
    }
}

/// Schema and Parquet properties for rewriting a table's files (merge, delete).
#[allow(clippy::type_complexity)]
pub(crate) fn rewrite_props(
    meta: &Metadata,
) -> Result<(
    SchemaRef,
    WriterProperties,
    Arc<crate::query::FieldIdAdapterFactory>,
)> {
    let schema = meta.schema.to_arrow();
    let sort_cols: Vec<usize> = meta
        .sort_by
        .iter()
        .filter_map(|c| schema.index_of(c).ok())
        .collect();
    let compression =
        parse_compression(&meta.settings.compression).map_err(|reason| Error::InvalidSetting {
            name: "compression".into(),
            reason,
        })?;
    let props = writer_properties(
        compression,
        meta.settings.row_group_rows,
        &schema,
        &sort_cols,
    );
    let ids = Arc::new(crate::query::FieldIdAdapterFactory::new(&meta.schema));
    Ok((schema, props, ids))
}

/// One rewrite: the rows of `inputs`, in `sort_by` order (file order when empty), keeping
/// the rows for which `keep` is true when given, into files as `config` says.
pub(crate) struct RewriteJob {
    pub config: SinkConfig,
    pub inputs: Vec<AddFile>,
    pub sort_by: Vec<String>,
    pub keep: Option<Expr>,
    /// Tables with merge semantics: the spec applied to the merged rows, and whether deleted
    /// keys go (the inputs hold the partition's oldest rows).
    pub reduce: Option<(crate::merge::MergeSpec, bool)>,
}

/// Run rewrites `parallelism` at a time, each on its own task (so they use every core).
/// Returns each job's files, in job order. On any failure, every file written is deleted.
pub(crate) async fn run_rewrites(
    location: &TableLocation,
    jobs: Vec<RewriteJob>,
    parallelism: usize,
) -> Result<Vec<Vec<AddFile>>> {
    let tasks = jobs.into_iter().enumerate().map(|(i, job)| {
        tokio::spawn(async move {
            let location = job.config.location.clone();
            let schema = job.config.schema.clone();
            let ids = job.config.ids.clone();
            let mut sink = FileSink::new(job.config);
            let res = async {
                let mut rows = crate::query::ordered_rows(
                    &location,
                    schema.clone(),
                    ids,
                    &job.inputs,
                    &job.sort_by,
                    job.keep.as_ref(),
                )?;
                if let Some((spec, drop_deleted)) = &job.reduce {
                    rows = crate::merge::Reducer::new(spec, schema, *drop_deleted)?.stream(rows);
                }
                while let Some(batch) = rows.next().await {
                    sink.write(&batch.map_err(crate::query::query_error)?)
                        .await?;
                }
                sink.finish().await
            }
            .await;
            match res {
                Ok(outputs) => Ok((i, outputs)),
                Err(e) => {
                    delete_quietly(&location, sink.paths()).await;
                    Err(e)
                }
            }
        })
    });
    let results: Vec<Result<(usize, Vec<AddFile>)>> = futures::stream::iter(tasks)
        .buffer_unordered(parallelism.max(1))
        .map(|r| r.map_err(|e| Error::TaskFailed(e.to_string()))?)
        .collect()
        .await;
    let mut ok = Vec::new();
    let mut first_err = None;
    for r in results {
        match r {
            Ok(x) => ok.push(x),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_err {
        let paths = ok
            .iter()
            .flat_map(|(_, out)| out.iter().map(|a| location.child(&a.path)))
            .collect();
        delete_quietly(location, paths).await;
        return Err(e);
    }
    ok.sort_by_key(|(i, _)| *i);
    Ok(ok.into_iter().map(|(_, out)| out).collect())
}

/// Per-column min/max/null counts over many batches, in the log's JSON form.
struct StatsBuilder {
    columns: Vec<(String, DataType, Acc)>,
}

#[derive(Default)]
struct Acc {
    min: Option<Value>,
    max: Option<Value>,
    nulls: u64,
    /// A batch had values but no usable min (or max): the file's is unknown too.
    min_unknown: bool,
    max_unknown: bool,
}

impl StatsBuilder {
    fn new(schema: &SchemaRef) -> Self {
        Self {
            columns: stat_paths(schema)
                .into_iter()
                .map(|(path, t)| (path, t, Acc::default()))
                .collect(),
        }
    }

    fn update(&mut self, batch: &RecordBatch) -> Result<()> {
        let stats = batch_stats(batch);
        let rows = batch.num_rows() as u64;
        for (name, dt, acc) in self.columns.iter_mut() {
            let Some(s) = stats.get(name.as_str()) else {
                continue;
            };
            acc.nulls += s.nulls;
            let has_values = s.nulls < rows;
            merge_bound(
                &mut acc.min,
                &mut acc.min_unknown,
                &s.min,
                has_values && !dt.is_nested(),
                dt,
                true,
            )?;
            merge_bound(
                &mut acc.max,
                &mut acc.max_unknown,
                &s.max,
                has_values && !dt.is_nested(),
                dt,
                false,
            )?;
        }
        Ok(())
    }

    fn finish(self) -> BTreeMap<String, ColumnStats> {
        self.columns
            .into_iter()
            .map(|(name, _, acc)| {
                let min = if acc.min_unknown { None } else { acc.min };
                let max = if acc.max_unknown { None } else { acc.max };
                (
                    name,
                    ColumnStats {
                        min,
                        max,
                        nulls: acc.nulls,
                    },
                )
            })
            .collect()
    }
}

fn merge_bound(
    acc: &mut Option<Value>,
    unknown: &mut bool,
    next: &Option<Value>,
    has_values: bool,
    dt: &DataType,
    is_min: bool,
) -> Result<()> {
    match next {
        None if has_values => *unknown = true,
        None => {}
        Some(v) => match acc {
            None => *acc = Some(v.clone()),
            Some(cur) => {
                let better = if is_min {
                    less(v, cur, dt)?
                } else {
                    less(cur, v, dt)?
                };
                if better {
                    *acc = Some(v.clone());
                }
            }
        },
    }
    Ok(())
}

/// `a < b` for two statistics of a column of type `dt`, compared as that type (decimals and
/// numbers do not order as text).
fn less(a: &Value, b: &Value, dt: &DataType) -> Result<bool> {
    let text = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    let pair: ArrayRef = Arc::new(StringArray::from(vec![text(a), text(b)]));
    let typed = arrow::compute::cast(&pair, dt)?;
    let (x, y) = (typed.slice(0, 1), typed.slice(1, 1));
    let lt = arrow::compute::kernels::cmp::lt(&x, &y)?;
    Ok(lt.is_valid(0) && lt.value(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Decimal128Array, Int64Array};
    use arrow::datatypes::{Field, Schema};

    #[test]
    fn stats_over_batches_compare_as_types() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("d", DataType::Decimal128(10, 2), true),
        ]));
        let batch = |n: Vec<Option<i64>>, s: Vec<Option<&str>>, d: Vec<Option<i128>>| {
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int64Array::from(n)),
                    Arc::new(StringArray::from(s)),
                    Arc::new(
                        Decimal128Array::from(d)
                            .with_precision_and_scale(10, 2)
                            .unwrap(),
                    ),
                ],
            )
            .unwrap()
        };
        let mut b = StatsBuilder::new(&schema);
        b.update(&batch(
            vec![Some(9), None],
            vec![Some("b"), None],
            vec![Some(-150), Some(900)],
        ))
        .unwrap();
        b.update(&batch(
            vec![Some(10), Some(-2)],
            vec![None, None],
            vec![Some(1000), None],
        ))
        .unwrap();
        let s = b.finish();
        assert_eq!(s["n"].min, Some(Value::from(-2)));
        assert_eq!(s["n"].max, Some(Value::from(10)));
        assert_eq!(s["n"].nulls, 1);
        assert_eq!(s["s"].min, Some(Value::from("b")));
        assert_eq!(s["s"].max, Some(Value::from("b")));
        assert_eq!(s["s"].nulls, 3);
        // As text "10.00" < "9.00" and "-1.50" > "10.00"; as decimals they are not.
        assert_eq!(s["d"].min, Some(Value::from("-1.50")));
        assert_eq!(s["d"].max, Some(Value::from("10.00")));
    }

    #[test]
    fn an_unknown_bound_in_one_batch_makes_the_file_bound_unknown() {
        let schema = Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8, true)]));
        let long = "z".repeat(300);
        let mut b = StatsBuilder::new(&schema);
        for v in ["m", long.as_str()] {
            let batch =
                RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(vec![v]))])
                    .unwrap();
            b.update(&batch).unwrap();
        }
        let s = b.finish();
        assert_eq!(s["s"].min, Some(Value::from("m")));
        assert_eq!(
            s["s"].max, None,
            "a max longer than 256 characters is not kept"
        );
    }
}
