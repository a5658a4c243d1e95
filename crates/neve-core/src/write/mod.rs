//! The write path: decode inputs in batches, conform them to the table schema, cut them into
//! bounded chunks, split each chunk by partition, sort, encode Parquet in parallel and upload
//! concurrently. Nothing here commits: the caller commits the returned files in one commit.

pub(crate) mod conform;
mod encode;
pub mod input;
mod order;
pub(crate) mod sink;
mod stats;
pub mod text;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use futures::{StreamExt, TryStreamExt};
use object_store::buffered::BufWriter;
use object_store::path::Path;
use object_store::ObjectStoreExt;
use rayon::prelude::*;
use tokio::io::AsyncWriteExt;

pub use encode::parse_compression;
pub(crate) use encode::{
    assign_batch, encode_parquet, gather_sorted, group_by_partition, writer_properties,
};
pub(crate) use stats::{file_stats, timestamp_string};

use crate::error::{Error, Result};
use crate::log::{AddFile, Metadata};
use crate::partition::partition_path;
use crate::storage::TableLocation;

/// Callbacks for progress display; all optional.
pub trait Progress: Send + Sync {
    fn rows_read(&self, _rows: u64) {}
    fn file_written(&self, _bytes: u64) {}
}

/// No progress display.
#[derive(Debug, Default)]
pub struct NoProgress;
impl Progress for NoProgress {}

/// Knobs of the write path (not table settings: these may differ per writer).
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// Rows buffered before a chunk is partitioned, sorted and written.
    pub chunk_rows: usize,
    /// Arrow bytes buffered before a chunk is written, whichever comes first.
    pub chunk_bytes: usize,
    /// Concurrent uploads.
    pub upload_concurrency: usize,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self {
            chunk_rows: 2 << 20,
            chunk_bytes: 512 << 20,
            upload_concurrency: 16,
        }
    }
}

/// One input batch, conformed to the table schema, with each row's partition.
pub(crate) struct SplitBatch {
    pub batch: RecordBatch,
    pub partitions: crate::partition::PartitionAssignment,
}

/// Conforms input batches and assigns partitions; runs on the decoding threads.
#[derive(Clone)]
pub(crate) struct Splitter {
    target: SchemaRef,
    fields: Vec<crate::partition::PartitionField>,
}

impl Splitter {
    /// `first_row` is the 0-based row of the batch's first row in `input`, for errors.
    pub fn split(&self, batch: RecordBatch, input: &str, first_row: u64) -> Result<SplitBatch> {
        let batch =
            conform::conform_batch(&batch, &self.target, &Default::default(), input, &|i| {
                format!("row {}", first_row + i as u64 + 1)
            })?;
        let partitions = assign_batch(&batch, &self.fields)?;
        Ok(SplitBatch { batch, partitions })
    }
}

/// A chunk's batches, each with its rows' partition as an index into the chunk's labels.
#[derive(Default)]
struct Chunk {
    batches: Vec<(RecordBatch, Vec<u32>)>,
    labels: Vec<Vec<Option<String>>>,
}

/// Writes data files for one insert.
pub(crate) struct DataWriter {
    location: TableLocation,
    metadata: Metadata,
    target: SchemaRef,
    sort_cols: Vec<usize>,
    compression: parquet::basic::Compression,
    opts: WriteOptions,
    progress: Arc<dyn Progress>,
    new_id: Arc<dyn Fn() -> String + Send + Sync>,
    now_ms: i64,
    /// Every file uploaded so far, for cleanup on failure.
    pub written: Vec<AddFile>,
}

impl DataWriter {
    pub fn new(
        location: TableLocation,
        metadata: Metadata,
        opts: WriteOptions,
        progress: Arc<dyn Progress>,
        new_id: Arc<dyn Fn() -> String + Send + Sync>,
        now_ms: i64,
    ) -> Result<Self> {
        let target = metadata.schema.to_arrow();
        let sort_cols = metadata
            .sort_by
            .iter()
            .map(|c| {
                target.index_of(c).map_err(|_| Error::InvalidSortKey {
                    column: c.clone(),
                    reason: "no such column in the table or the input".into(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let compression = parse_compression(&metadata.settings.compression).map_err(|reason| {
            Error::InvalidSetting {
                name: "compression".into(),
                reason,
            }
        })?;
        Ok(Self {
            location,
            metadata,
            target,
            sort_cols,
            compression,
            opts,
            progress,
            new_id,
            now_ms,
            written: Vec::new(),
        })
    }

    /// What the decoding threads run on each batch: conform to the table schema and split
    /// by partition (CPU work kept off the async runtime and overlapped with encoding).
    pub fn splitter(&self) -> Splitter {
        Splitter {
            target: self.target.clone(),
            fields: self.metadata.partition_by.clone(),
        }
    }

    /// Accumulate batches into bounded chunks, numbering partitions per chunk; write each
    /// chunk.
    pub async fn write_stream(
        &mut self,
        mut batches: tokio::sync::mpsc::Receiver<Result<SplitBatch>>,
    ) -> Result<()> {
        let mut chunk = Chunk::default();
        let mut index: std::collections::HashMap<Vec<Option<String>>, u32> = Default::default();
        let (mut rows, mut bytes) = (0usize, 0usize);
        while let Some(split) = batches.recv().await {
            let SplitBatch { batch, partitions } = split?;
            let n = batch.num_rows();
            if n == 0 {
                continue;
            }
            self.progress.rows_read(n as u64);
            rows += n;
            bytes += slice_bytes(&batch);
            let global: Vec<u32> = partitions
                .labels
                .into_iter()
                .map(|l| {
                    *index.entry(l.clone()).or_insert_with(|| {
                        chunk.labels.push(l);
                        chunk.labels.len() as u32 - 1
                    })
                })
                .collect();
            let mut codes = partitions.codes;
            for c in &mut codes {
                *c = global[*c as usize];
            }
            chunk.batches.push((batch, codes));
            if rows >= self.opts.chunk_rows || bytes >= self.opts.chunk_bytes {
                (rows, bytes) = (0, 0);
                index.clear();
                self.write_parts(std::mem::take(&mut chunk)).await?;
            }
        }
        if rows > 0 {
            self.write_parts(chunk).await?;
        }
        Ok(())
    }

    /// On the rayon pool: group each batch's rows by partition (in parallel over batches),
    /// then per partition (in parallel) sort its rows by the keys, gather them in that order
    /// (one copy of the data) and encode; upload concurrently as files come out.
    async fn write_parts(&mut self, chunk: Chunk) -> Result<()> {
        let fields = self.metadata.partition_by.clone();
        let sort_cols = self.sort_cols.clone();
        let props = writer_properties(
            self.compression,
            self.metadata.settings.row_group_rows,
            &self.target,
            &sort_cols,
        );
        let new_id = self.new_id.clone();
        let target = self.target.clone();
        let now = self.now_ms;
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<(Path, Vec<u8>, AddFile)>>(
            self.opts.upload_concurrency.max(1),
        );
        let root = self.location.clone();
        let encoder = tokio::task::spawn_blocking(move || {
            let Chunk { batches, labels } = chunk;
            let num_parts = labels.len();
            let grouped = batches
                .into_par_iter()
                .map(|(batch, codes)| {
                    let cpu = thread_cpu();
                    let grouped = group_by_partition(batch, &codes, num_parts);
                    tracing::trace!(
                        group_cpu_us = (thread_cpu() - cpu).as_micros() as u64,
                        "grouped batch"
                    );
                    grouped
                })
                .collect::<Result<Vec<_>>>();
            let grouped = match grouped {
                Ok(g) => g,
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    return;
                }
            };
            let mut slices: Vec<Vec<RecordBatch>> = vec![Vec::new(); num_parts];
            for (batch, runs) in &grouped {
                for &(code, start, len) in runs {
                    slices[code as usize].push(batch.slice(start, len));
                }
            }
            drop(grouped);
            let mut work: Vec<_> = labels
                .into_iter()
                .zip(slices)
                .map(|(values, slices)| {
                    let rows: usize = slices.iter().map(|s| s.num_rows()).sum();
                    (values, slices, rows, new_id())
                })
                .collect();
            // Largest parts first, so the last tasks on the pool are short ones.
            work.sort_by_key(|(_, _, rows, _)| std::cmp::Reverse(*rows));
            work.into_par_iter()
                .for_each_with(tx, |tx, (values, slices, _, id)| {
                    let res = (|| {
                        let (t, cpu) = (std::time::Instant::now(), thread_cpu());
                        let part = gather_sorted(&target, &slices, &sort_cols)?;
                        drop(slices);
                        let (t_sort, cpu_sort) = (t.elapsed(), thread_cpu());
                        let (bytes, footer) = encode_parquet(&part, props.clone())?;
                        let cpu_end = thread_cpu();
                        tracing::trace!(
                            sort_us = t_sort.as_micros() as u64,
                            encode_us = (t.elapsed() - t_sort).as_micros() as u64,
                            sort_cpu_us = (cpu_sort - cpu).as_micros() as u64,
                            encode_cpu_us = (cpu_end - cpu_sort).as_micros() as u64,
                            rows = part.num_rows(),
                            "encoded part"
                        );
                        let cpu_stats = thread_cpu();
                        let stats = file_stats(&part, &footer)?;
                        tracing::trace!(
                            stats_cpu_us = (thread_cpu() - cpu_stats).as_micros() as u64,
                            "part statistics"
                        );
                        let folder = partition_path(&fields, &values);
                        let rel = if folder.is_empty() {
                            format!("_data/part-{id}.parquet")
                        } else {
                            format!("_data/{folder}/part-{id}.parquet")
                        };
                        let partition_values: BTreeMap<String, Option<String>> = fields
                            .iter()
                            .zip(&values)
                            .map(|(f, v)| (f.name.clone(), v.clone()))
                            .collect();
                        let add = AddFile {
                            path: rel.clone(),
                            partition_values,
                            size: bytes.len() as u64,
                            rows: part.num_rows() as u64,
                            modification_time: now,
                            stats,
                            seq: None,
                            merged: false,
                            added_version: None,
                        };
                        Ok((root.child(&rel), bytes, add))
                    })();
                    let _ = tx.blocking_send(res);
                });
        });
        let store = self.location.store.clone();
        let progress = self.progress.clone();
        let files = futures::stream::poll_fn(|cx| rx.poll_recv(cx))
            .map(|item| {
                let store = store.clone();
                let progress = progress.clone();
                async move {
                    let (path, bytes, add) = item?;
                    upload(store, &path, bytes).await?;
                    progress.file_written(add.size);
                    Ok::<_, Error>(add)
                }
            })
            .buffer_unordered(self.opts.upload_concurrency.max(1));
        futures::pin_mut!(files);
        let mut first_err = None;
        while let Some(r) = files.next().await {
            match r {
                Ok(add) => self.written.push(add),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        encoder
            .await
            .map_err(|e| Error::TaskFailed(e.to_string()))?;
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Best-effort removal of the files this writer uploaded (after a failed insert).
    pub async fn cleanup(&mut self) {
        let store = self.location.store.clone();
        let paths: Vec<Path> = self
            .written
            .drain(..)
            .map(|a| self.location.child(&a.path))
            .collect();
        let n = paths.len();
        let res: Result<Vec<()>, _> = futures::stream::iter(paths.into_iter().map(|p| {
            let store = store.clone();
            async move { store.delete(&p).await }
        }))
        .buffer_unordered(16)
        .try_collect()
        .await;
        if let Err(e) = res {
            tracing::warn!(error = %e, files = n, "could not remove files of a failed insert; `neve gc` will");
        }
    }
}

/// Bytes a batch's rows occupy. Not `get_array_memory_size`: batches decoded from one IPC or
/// Parquet buffer share it, and that counts the whole buffer for every batch.
fn slice_bytes(batch: &RecordBatch) -> usize {
    batch
        .columns()
        .iter()
        .map(|c| {
            c.to_data()
                .get_slice_memory_size()
                .unwrap_or_else(|_| c.get_array_memory_size())
        })
        .sum()
}

/// Single PUT for small files, multipart for large ones.
async fn upload(
    store: Arc<dyn object_store::ObjectStore>,
    path: &Path,
    bytes: Vec<u8>,
) -> Result<()> {
    const MULTIPART_ABOVE: usize = 32 << 20;
    if bytes.len() <= MULTIPART_ABOVE {
        store.put(path, bytes.into()).await?;
        return Ok(());
    }
    let mut w = BufWriter::with_capacity(store, path.clone(), 16 << 20).with_max_concurrency(8);
    w.write_all(&bytes).await.map_err(|source| Error::Io {
        path: path.as_ref().into(),
        source,
    })?;
    w.shutdown().await.map_err(|source| Error::Io {
        path: path.as_ref().into(),
        source,
    })?;
    Ok(())
}

#[cfg(test)]
mod tests;

/// CPU time of the calling thread, for the per-part trace: what sorting and encoding a part
/// cost, whatever else shared the cores meanwhile. Zero where the platform has no such clock,
/// and when nothing listens to the trace (no system call then).
fn thread_cpu() -> std::time::Duration {
    #[cfg(unix)]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime only writes the timespec it is given.
        if tracing::enabled!(tracing::Level::TRACE)
            && unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0
        {
            return std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
        }
    }
    std::time::Duration::ZERO
}
