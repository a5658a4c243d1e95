//! The write path: decode inputs in batches, conform them to the table schema, cut them into
//! bounded chunks, split each chunk by partition, sort, encode Parquet in parallel and upload
//! concurrently. Nothing here commits: the caller commits the returned files in one commit.

pub(crate) mod conform;
mod encode;
mod gather;
mod held;
pub mod input;
mod keys;
mod order;
pub(crate) mod sink;
mod stats;
mod stored;
pub mod text;
mod validate;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, SchemaRef};
use futures::{StreamExt, TryStreamExt};
use object_store::buffered::BufWriter;
use object_store::path::Path;
use object_store::ObjectStoreExt;
use rayon::prelude::*;
use tokio::io::AsyncWriteExt;

pub use encode::parse_compression;
pub(crate) use encode::{
    assign_batch, encode_parquet, gather_sorted, group_by_partition, writer_properties, FileFormat,
};
pub use held::held_bytes;
pub(crate) use stats::{file_stats, timestamp_string};
pub use validate::validate_foreign;

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
    /// The input's batches are already in memory (`Table::insert_batches`, which sets it):
    /// only what conforming them copies counts toward the chunk's bounds, so the whole input is
    /// one chunk, grouped by partition a few partitions at a time (each pass copying at most
    /// `chunk_bytes`), and a partition gets one file per insert instead of one per chunk.
    pub resident: bool,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self {
            chunk_rows: 2 << 20,
            chunk_bytes: 512 << 20,
            upload_concurrency: 16,
            resident: false,
        }
    }
}

/// One input batch, conformed to the table schema, with each row's partition.
pub(crate) struct SplitBatch {
    pub batch: RecordBatch,
    pub partitions: crate::partition::PartitionAssignment,
    /// Bytes of the columns conforming made anew (cast, filled in); the rest share the
    /// input's buffers.
    pub copied: usize,
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
        let cpu = thread_cpu();
        let conformed =
            conform::conform_batch(&batch, &self.target, &Default::default(), input, &|i| {
                format!("row {}", first_row + i as u64 + 1)
            })?;
        let in_schema = batch.schema();
        let copied = conformed
            .schema()
            .fields()
            .iter()
            .zip(conformed.columns())
            .filter(|(f, c)| {
                let shared = in_schema
                    .index_of(f.name())
                    .is_ok_and(|i| batch.column(i).to_data().ptr_eq(&c.to_data()));
                !shared
            })
            .map(|(_, c)| column_bytes(c))
            .sum();
        let partitions = assign_batch(&conformed, &self.fields)?;
        tracing::trace!(
            split_cpu_us = (thread_cpu() - cpu).as_micros() as u64,
            "split batch"
        );
        Ok(SplitBatch {
            batch: conformed,
            partitions,
            copied,
        })
    }
}

/// Batches split at once when the input is resident: a few per thread, so that the copies
/// conforming makes stay bounded before the writer sees them (and can cut a chunk).
const SPLIT_WINDOW_PER_THREAD: usize = 2;

/// Split an input's batches in order and send them to the writer, stopping at the first
/// error (in input order). A resident input's batches are split a window at a time on the
/// rayon pool: otherwise the whole input is conformed and assigned its partitions on one
/// thread before any grouping starts, with the other cores idle (about 1% of a 1M-row
/// insert's CPU: BENCHMARKS.md, issue 15).
pub(crate) fn split_input(
    splitter: &Splitter,
    batches: impl Iterator<Item = Result<RecordBatch>>,
    input: &str,
    resident: bool,
    tx: &tokio::sync::mpsc::Sender<Result<SplitBatch>>,
) {
    let window = if resident {
        SPLIT_WINDOW_PER_THREAD * rayon::current_num_threads().max(1)
    } else {
        1
    };
    let mut rows = 0u64;
    let mut batches = batches.peekable();
    while batches.peek().is_some() {
        let mut taken = Vec::with_capacity(window);
        for b in batches.by_ref().take(window) {
            let first = rows;
            if let Ok(b) = &b {
                rows += b.num_rows() as u64;
            }
            let stop = b.is_err();
            taken.push((b, first));
            if stop {
                break;
            }
        }
        let split = |(b, first): (Result<RecordBatch>, u64)| {
            b.and_then(|b| splitter.split(b, input, first))
        };
        let splits: Vec<Result<SplitBatch>> = if taken.len() > 1 {
            taken.into_par_iter().map(split).collect()
        } else {
            taken.into_iter().map(split).collect()
        };
        for s in splits {
            let stop = s.is_err();
            if tx.blocking_send(s).is_err() || stop {
                return;
            }
        }
    }
}

/// A chunk's batches, each with its rows' partition as an index into the chunk's labels.
#[derive(Default)]
struct Chunk {
    batches: Vec<(RecordBatch, Vec<u32>)>,
    labels: Vec<Vec<Option<String>>>,
    /// Bytes of the rows, resident or not.
    bytes: usize,
}

/// Writes data files for one insert.
pub(crate) struct DataWriter {
    location: TableLocation,
    metadata: Metadata,
    target: SchemaRef,
    sort_cols: Vec<usize>,
    /// What every file is encoded with: fixed by the table's settings for the whole insert.
    format: Arc<FileFormat>,
    opts: WriteOptions,
    progress: Arc<dyn Progress>,
    new_id: Arc<dyn Fn() -> String + Send + Sync>,
    now_ms: i64,
    /// Every file uploaded so far, for cleanup on failure.
    pub written: Vec<AddFile>,
    /// The columns to keep of each file written (see [`DataWriter::keeping`]), by index in
    /// the table schema and whether they may stay dictionaries, and the bytes they may hold
    /// at most.
    keep: Vec<(usize, bool)>,
    keep_budget: usize,
    /// What was kept: per file (its path), those columns, named, as written.
    pub kept: Vec<(String, KeptColumns)>,
}

/// Some columns of a file as it was written, by name.
pub(crate) type KeptColumns = Vec<(String, arrow::array::ArrayRef)>;

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
        let props = writer_properties(
            compression,
            metadata.settings.row_group_rows,
            &target,
            &sort_cols,
        );
        let format = Arc::new(FileFormat::new(&target, props)?);
        Ok(Self {
            location,
            metadata,
            target,
            sort_cols,
            format,
            opts,
            progress,
            new_id,
            now_ms,
            written: Vec::new(),
            keep: Vec::new(),
            keep_budget: 0,
            kept: Vec::new(),
        })
    }

    /// Keep `columns` of each file as it is written (in its rows' order), up to `budget`
    /// bytes over the insert: what the Iceberg sync after the commit would otherwise read
    /// back from the files (a table with merge semantics weighs the key and version columns
    /// of the files an insert adds). The columns share the encoder's buffers; nothing is
    /// copied, but a column the writer keyed (`keys.rs`) is turned back into the table's type,
    /// except the first `dictionaries` columns (a single key, whose ids the sync finds by the
    /// dictionary's values).
    pub fn keeping(mut self, columns: &[String], dictionaries: usize, budget: usize) -> Self {
        self.keep = columns
            .iter()
            .enumerate()
            .filter_map(|(at, c)| Some((self.target.index_of(c).ok()?, at < dictionaries)))
            .collect();
        self.keep_budget = budget;
        self
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
            let SplitBatch {
                batch,
                partitions,
                copied,
            } = split?;
            let n = batch.num_rows();
            if n == 0 {
                continue;
            }
            self.progress.rows_read(n as u64);
            let size = slice_bytes(&batch);
            chunk.bytes += size;
            if self.opts.resident {
                // What the chunk holds beyond the caller's batches: the conformed copies, and
                // a partition code and a position (8 bytes) a row.
                bytes += copied + 8 * n;
            } else {
                rows += n;
                bytes += size;
            }
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
        if !chunk.batches.is_empty() {
            self.write_parts(chunk).await?;
        }
        Ok(())
    }

    /// On the rayon pool: group each batch's rows by partition (in parallel over batches),
    /// then per partition (in parallel) sort its rows by the keys, gather them in that order
    /// (one copy of the data) and encode; upload concurrently as files come out. A resident
    /// chunk larger than `chunk_bytes` is grouped in passes of a few partitions ([`passes`]).
    async fn write_parts(&mut self, chunk: Chunk) -> Result<()> {
        // A resident input larger than a chunk is grouped a few partitions at a time.
        let resident_budget = (self.opts.resident && chunk.bytes > self.opts.chunk_bytes)
            .then_some(self.opts.chunk_bytes);
        let ctx = Arc::new(PartContext {
            fields: self.metadata.partition_by.clone(),
            format: self.format.clone(),
            sort_cols: self.sort_cols.clone(),
            root: self.location.clone(),
            now: self.now_ms,
            keep: self.keep.clone(),
        });
        let new_id = self.new_id.clone();
        let (tx, mut rx) =
            tokio::sync::mpsc::channel::<Result<EncodedFile>>(self.opts.upload_concurrency.max(1));
        let encoder = tokio::task::spawn_blocking(move || {
            let Chunk {
                mut batches,
                labels,
                ..
            } = chunk;
            let num_parts = labels.len();
            // The parts' schema: the table's, with few-valued strings as keys (`keys.rs`).
            // Keyed first, so that the passes count the rows' keyed size: fewer passes, each
            // copying as many bytes.
            let schema = match keys::key_few_valued(&mut batches) {
                Ok(keyed) => keyed.unwrap_or_else(|| ctx.format.schema().clone()),
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    return;
                }
            };
            let passes = passes(&batches, num_parts, resident_budget);
            for pass in passes {
                let selected = |code: usize| pass.codes.as_ref().is_none_or(|m| m[code]);
                let grouped = batches[pass.batches.clone()]
                    .par_iter()
                    .map(|(batch, codes)| {
                        let cpu = thread_cpu();
                        let grouped = group_by_partition(
                            batch.clone(),
                            codes,
                            num_parts,
                            pass.codes.as_deref(),
                        );
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
                let parts = labels
                    .iter()
                    .zip(slices)
                    .enumerate()
                    .filter(|(code, (_, slices))| selected(*code) && !slices.is_empty())
                    .map(|(_, (values, slices))| (values.clone(), slices, new_id()))
                    .collect();
                encode_parts(parts, &ctx, &schema, tx.clone());
            }
        });
        let store = self.location.store.clone();
        let progress = self.progress.clone();
        let files = futures::stream::poll_fn(|cx| rx.poll_recv(cx))
            .map(|item| {
                let store = store.clone();
                let progress = progress.clone();
                async move {
                    let (path, bytes, add, kept) = item?;
                    upload(store, &path, bytes).await?;
                    progress.file_written(add.size);
                    Ok::<_, Error>((add, kept))
                }
            })
            .buffer_unordered(self.opts.upload_concurrency.max(1));
        futures::pin_mut!(files);
        let mut first_err = None;
        while let Some(r) = files.next().await {
            match r {
                Ok((add, Kept(kept))) => {
                    let bytes: usize = kept.iter().map(column_bytes).sum();
                    if !kept.is_empty() && bytes <= self.keep_budget {
                        self.keep_budget -= bytes;
                        let names = self
                            .keep
                            .iter()
                            .map(|&(i, _)| self.target.field(i).name().clone());
                        self.kept
                            .push((add.path.clone(), names.zip(kept).collect()));
                    }
                    self.written.push(add)
                }
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
    batch.columns().iter().map(column_bytes).sum()
}

/// A batch's bytes a row (rounded up), what a pass over a resident input counts its rows at.
fn mean_row_bytes(batch: &RecordBatch) -> usize {
    slice_bytes(batch) / batch.num_rows().max(1) + 1
}

pub(crate) fn column_bytes(c: &arrow::array::ArrayRef) -> usize {
    use arrow::array::AsArray;
    if let Some(d) = c.as_any_dictionary_opt() {
        // A keyed column (`keys.rs`): its dictionary is the chunk's, shared by every batch.
        return d.keys().to_data().get_slice_memory_size().unwrap_or(0);
    }
    c.to_data()
        .get_slice_memory_size()
        .unwrap_or_else(|_| c.get_array_memory_size())
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
mod conform_tests;
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

/// What every part of a chunk is encoded with.
struct PartContext {
    fields: Vec<crate::partition::PartitionField>,
    /// The table's schema (every part's), its Parquet form and the writer properties.
    format: Arc<FileFormat>,
    sort_cols: Vec<usize>,
    root: TableLocation,
    now: i64,
    /// Columns kept of each file (see [`DataWriter::keeping`]).
    keep: Vec<(usize, bool)>,
}

/// A file encoded: where it goes, its bytes, its log entry, and the columns kept of it.
type EncodedFile = (Path, Vec<u8>, AddFile, Kept);

/// The columns kept of a file (a named type: a spawned insert's future stays `Send` for
/// any lifetime, which a bare `Vec<ArrayRef>` in the upload closure's type broke).
struct Kept(Vec<arrow::array::ArrayRef>);

/// Per partition (in parallel, largest first, so the last tasks on the pool are short ones):
/// sort its slices' rows by the keys and gather them in that order, encode them and send the
/// file to the uploads. `schema` is the slices' (the table's, or its keyed form).
fn encode_parts(
    mut parts: Vec<(Vec<Option<String>>, Vec<RecordBatch>, String)>,
    ctx: &PartContext,
    schema: &SchemaRef,
    tx: tokio::sync::mpsc::Sender<Result<EncodedFile>>,
) {
    parts.sort_by_key(|(_, slices, _)| {
        std::cmp::Reverse(slices.iter().map(|s| s.num_rows()).sum::<usize>())
    });
    parts
        .into_par_iter()
        .for_each_with(tx, |tx, (values, slices, id)| {
            let res = (|| {
                let (t, cpu) = (std::time::Instant::now(), thread_cpu());
                let part = gather_sorted(schema, &slices, &ctx.sort_cols)?;
                drop(slices);
                let (t_sort, cpu_sort) = (t.elapsed(), thread_cpu());
                let (bytes, footer) = encode_parquet(&part, &ctx.format)?;
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
                let stats = file_stats(ctx.format.schema(), &part, &footer)?;
                tracing::trace!(
                    stats_cpu_us = (thread_cpu() - cpu_stats).as_micros() as u64,
                    "part statistics"
                );
                let folder = partition_path(&ctx.fields, &values);
                let rel = if folder.is_empty() {
                    format!("_data/part-{id}.parquet")
                } else {
                    format!("_data/{folder}/part-{id}.parquet")
                };
                let partition_values: BTreeMap<String, Option<String>> = ctx
                    .fields
                    .iter()
                    .zip(&values)
                    .map(|(f, v)| (f.name.clone(), v.clone()))
                    .collect();
                let add = AddFile {
                    path: rel.clone(),
                    partition_values,
                    size: bytes.len() as u64,
                    rows: part.num_rows() as u64,
                    modification_time: ctx.now,
                    stats,
                    seq: None,
                    merged: false,
                    added_version: None,
                };
                let table = ctx.format.schema();
                let kept = ctx
                    .keep
                    .iter()
                    .map(|&(i, dictionary)| {
                        let (c, t) = (part.column(i), table.field(i).data_type());
                        match c.data_type() {
                            DataType::Dictionary(_, v) if dictionary && **v == *t => Ok(c.clone()),
                            _ => keys::unkeyed(c, t),
                        }
                    })
                    .collect::<Result<Vec<_>>>()?;
                let kept = Kept(kept);
                Ok((ctx.root.child(&rel), bytes, add, kept))
            })();
            let _ = tx.blocking_send(res);
        });
}

/// One grouping pass over a chunk: the batches it reads and the partitions it groups (all
/// when `None`).
struct Pass {
    batches: std::ops::Range<usize>,
    codes: Option<Vec<bool>>,
}

/// How a chunk is grouped: in one pass, or, for a resident input larger than `budget` bytes, in
/// passes of a few partitions each, so that no pass copies more than `budget` (a partition
/// larger than that on its own gets a pass per run of batches that fits). Each pass reads
/// every batch again, but only copies its own partitions' rows, and each partition gets one
/// file per insert instead of one per chunk.
fn passes(
    batches: &[(RecordBatch, Vec<u32>)],
    num_parts: usize,
    budget: Option<usize>,
) -> Vec<Pass> {
    let all = Pass {
        batches: 0..batches.len(),
        codes: None,
    };
    let Some(budget) = budget else {
        return vec![all];
    };
    let budget = budget.max(1);
    // Bytes of each partition's rows, at each batch's mean row size (a table per thread, not
    // per batch: a table may have many partitions).
    let add = |mut a: Vec<usize>, b: Vec<usize>| {
        a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
        a
    };
    let totals = batches
        .par_iter()
        .fold(
            || vec![0usize; num_parts],
            |mut acc, (batch, codes)| {
                let row = mean_row_bytes(batch);
                for &c in codes {
                    acc[c as usize] += row;
                }
                acc
            },
        )
        .reduce(|| vec![0usize; num_parts], add);
    let mut out = Vec::new();
    let (mut mask, mut used) = (vec![false; num_parts], 0usize);
    for (code, &size) in totals.iter().enumerate() {
        if size > budget {
            // On its own, in runs of batches of at most `budget` (there are few such
            // partitions: their rows are more than a chunk each).
            let mut first = 0;
            let mut run = 0usize;
            for (b, (batch, codes)) in batches.iter().enumerate() {
                let bytes =
                    codes.iter().filter(|&&c| c as usize == code).count() * mean_row_bytes(batch);
                if run > 0 && run + bytes > budget {
                    out.push(one(code, first..b, num_parts));
                    (first, run) = (b, 0);
                }
                run += bytes;
            }
            out.push(one(code, first..batches.len(), num_parts));
            continue;
        }
        if used > 0 && used + size > budget {
            out.push(Pass {
                batches: 0..batches.len(),
                codes: Some(std::mem::replace(&mut mask, vec![false; num_parts])),
            });
            used = 0;
        }
        mask[code] = true;
        used += size;
    }
    if used > 0 {
        out.push(Pass {
            batches: 0..batches.len(),
            codes: Some(mask),
        });
    }
    out
}

fn one(code: usize, batches: std::ops::Range<usize>, num_parts: usize) -> Pass {
    let mut mask = vec![false; num_parts];
    mask[code] = true;
    Pass {
        batches,
        codes: Some(mask),
    }
}
