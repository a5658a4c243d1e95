//! The block cache (foyer's hybrid cache): aligned blocks of data files, keyed by path, ETag
//! and byte range, in memory and optionally on a local disk, both bounded. Data files are
//! immutable, so an entry never goes stale. Concurrent misses on one block share one upstream
//! GET (foyer runs the first caller's fetch and hands its result to every waiter). A file's
//! last block takes in a tail shorter than half a block: its own GET would cost a whole round
//! trip for a few bytes.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use foyer::{
    BlockEngineConfig, Code, DeviceBuilder, FsDeviceBuilder, HybridCache, HybridCacheBuilder,
    HybridCachePolicy, RecoverMode, Source,
};
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore};

use crate::config::CacheSettings;
use crate::error::{Error, Result};
use crate::metrics::Metrics;

/// Blocks read ahead of the one being sent, per request.
const READ_AHEAD: usize = 4;

/// One block of one version of a file, named by its byte range: a key means the same bytes
/// whatever the block size was when it was cached (the disk part outlives restarts).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BlockKey {
    pub path: Arc<str>,
    pub etag: Arc<str>,
    pub start: u64,
    pub len: u64,
}

/// Leads every key on disk; keys of an older layout (block numbers) do not decode, so foyer
/// drops them when it recovers the disk cache.
const KEY_FORMAT: u64 = u64::MAX - 2;

fn put_str(w: &mut impl std::io::Write, s: &str) -> foyer::Result<()> {
    (s.len() as u64).encode(w)?;
    w.write_all(s.as_bytes()).map_err(foyer::Error::io_error)
}

fn get_str(r: &mut impl std::io::Read) -> foyer::Result<Arc<str>> {
    let mut b = vec![0; u64::decode(r)? as usize];
    r.read_exact(&mut b).map_err(foyer::Error::io_error)?;
    String::from_utf8(b)
        .map(Into::into)
        .map_err(|e| foyer::Error::new(foyer::ErrorKind::Parse, "cache key").with_source(e))
}

/// How a key is written on the cache's disk.
impl Code for BlockKey {
    fn encode(&self, w: &mut impl std::io::Write) -> foyer::Result<()> {
        KEY_FORMAT.encode(w)?;
        put_str(w, &self.path)?;
        put_str(w, &self.etag)?;
        self.start.encode(w)?;
        self.len.encode(w)
    }

    fn decode(r: &mut impl std::io::Read) -> foyer::Result<Self> {
        if u64::decode(r)? != KEY_FORMAT {
            return Err(foyer::Error::new(
                foyer::ErrorKind::Parse,
                "cache key of an older layout",
            ));
        }
        Ok(Self {
            path: get_str(r)?,
            etag: get_str(r)?,
            start: u64::decode(r)?,
            len: u64::decode(r)?,
        })
    }

    fn estimated_size(&self) -> usize {
        48 + self.path.len() + self.etag.len()
    }
}

/// What a read names: a file and its size.
#[derive(Debug, Clone)]
pub struct FileBlocks {
    pub store: Arc<dyn ObjectStore>,
    pub path: Path,
    pub etag: Arc<str>,
    pub size: u64,
}

/// The cache, with the block size it was built for.
pub struct BlockCache {
    cache: HybridCache<BlockKey, Bytes>,
    block_size: u64,
    metrics: Arc<Metrics>,
}

/// One GET of `range` of a file.
async fn fetch(
    store: &Arc<dyn ObjectStore>,
    path: &Path,
    range: Range<u64>,
    metrics: &Metrics,
) -> Result<Bytes, object_store::Error> {
    metrics.upstream_requests.inc();
    let got = store
        .get_opts(
            path,
            GetOptions {
                range: Some(GetRange::Bounded(range.clone())),
                ..Default::default()
            },
        )
        .await?
        .bytes()
        .await?;
    metrics.upstream_bytes.inc_by(got.len() as u64);
    let want = range.end - range.start;
    if got.len() as u64 != want {
        // Never cached, and never sliced past its end: the store holds another object than
        // the log describes.
        return Err(short_object(path, &range, got.len() as u64));
    }
    Ok(got)
}

/// A data file in the store is not the size its commit logged (truncated, or replaced by
/// hand): a fault of the store, said loudly, and a failed read rather than wrong bytes.
fn short_object(path: &Path, range: &Range<u64>, got: u64) -> object_store::Error {
    tracing::error!(
        path = %path,
        start = range.start,
        expected = range.end - range.start,
        got,
        "a data file in the store is not the size its commit logged"
    );
    object_store::Error::Generic {
        store: "neve-proxy",
        source: format!(
            "the data file is not the size the table's log gives it ({} bytes from offset {} were read, {} expected)",
            got,
            range.start,
            range.end - range.start
        )
        .into(),
    }
}

/// The bytes of `range` of a file straight from the store (no cache).
pub async fn read_direct(
    file: &FileBlocks,
    range: Range<u64>,
    metrics: Arc<Metrics>,
) -> Result<BoxStream<'static, Result<Bytes, object_store::Error>>, object_store::Error> {
    if range.is_empty() {
        return Ok(futures::stream::empty().boxed());
    }
    metrics.upstream_requests.inc();
    let got = file
        .store
        .get_opts(
            &file.path,
            GetOptions {
                range: Some(GetRange::Bounded(range.clone())),
                ..Default::default()
            },
        )
        .await?;
    /// What the body's stream carries from one chunk to the next.
    struct Body {
        inner: BoxStream<'static, Result<Bytes, object_store::Error>>,
        seen: u64,
        want: u64,
        done: bool,
        path: Path,
        range: Range<u64>,
        metrics: Arc<Metrics>,
    }
    let state = Body {
        inner: got.into_stream(),
        seen: 0,
        want: range.end - range.start,
        done: false,
        path: file.path.clone(),
        range,
        metrics,
    };
    // Counted as they pass; a body that ends short (or runs long) ends in an error, so the
    // client's read fails rather than ends early with what looks like the whole range.
    Ok(futures::stream::unfold(state, |mut s| async move {
        if s.done {
            return None;
        }
        let item = match s.inner.next().await {
            Some(Ok(c)) => {
                s.metrics.upstream_bytes.inc_by(c.len() as u64);
                s.seen += c.len() as u64;
                if s.seen > s.want {
                    s.done = true;
                    Err(short_object(&s.path, &s.range, s.seen))
                } else {
                    Ok(c)
                }
            }
            Some(Err(e)) => {
                s.done = true;
                Err(e)
            }
            None if s.seen != s.want => {
                s.done = true;
                Err(short_object(&s.path, &s.range, s.seen))
            }
            None => return None,
        };
        Some((item, s))
    })
    .boxed())
}

impl BlockCache {
    /// Build the cache; `None` when it is switched off (`memory = 0`).
    pub async fn new(settings: &CacheSettings, metrics: Arc<Metrics>) -> Result<Option<Self>> {
        if settings.memory == 0 {
            return Ok(None);
        }
        let bad = |e: foyer::Error| Error::InvalidConfig {
            reason: format!("proxy.cache: {e}"),
        };
        let builder = HybridCacheBuilder::new()
            .with_name("neve-proxy")
            .with_metrics_registry(Box::new(
                mixtrics::registry::prometheus_client_0_24::PrometheusClientMetricsRegistry::new(
                    metrics.registry.clone(),
                ),
            ))
            .with_policy(HybridCachePolicy::WriteOnInsertion)
            .with_flush_on_close(false)
            .memory(settings.memory as usize)
            .with_weighter(|k: &BlockKey, v: &Bytes| v.len() + k.estimated_size() + 64)
            .storage();
        let cache = match (&settings.dir, settings.disk) {
            (Some(dir), disk) if disk > 0 => {
                std::fs::create_dir_all(dir).map_err(|e| Error::InvalidConfig {
                    reason: format!("proxy.cache.dir {}: {e}", dir.display()),
                })?;
                // Disk blocks of at most 64 MiB (foyer keeps one file open per block), big
                // enough for a cache block and its key, and at least 16 of them.
                let engine_block = (disk / 16)
                    .clamp(4 * settings.block_size + (64 << 10), 64 << 20)
                    .next_multiple_of(4096) as usize;
                let device = FsDeviceBuilder::new(dir)
                    .with_capacity(disk as usize)
                    .build()
                    .map_err(bad)?;
                builder
                    .with_engine_config(
                        BlockEngineConfig::new(device)
                            .with_block_size(engine_block)
                            .with_buffer_pool_size(engine_block),
                    )
                    .with_recover_mode(RecoverMode::Quiet)
                    .build()
                    .await
                    .map_err(bad)?
            }
            _ => builder.build().await.map_err(bad)?,
        };
        Ok(Some(Self {
            cache,
            block_size: settings.block_size,
            metrics,
        }))
    }

    /// How many blocks a file of `size` bytes has.
    fn block_count(&self, size: u64) -> u64 {
        let b = self.block_size;
        let n = size.div_ceil(b);
        if n > 1 && size - (n - 1) * b < b / 2 {
            n - 1
        } else {
            n
        }
    }

    /// The key of block `index` of a file.
    fn key(&self, path: &str, etag: &Arc<str>, size: u64, index: u64) -> BlockKey {
        let start = index * self.block_size;
        let end = if index + 1 >= self.block_count(size) {
            size
        } else {
            start + self.block_size
        };
        BlockKey {
            path: Arc::from(path),
            etag: etag.clone(),
            start,
            len: end - start,
        }
    }

    /// Every block's key of one version of a file.
    pub fn keys_of(&self, path: &Path, etag: &str, size: u64) -> Vec<BlockKey> {
        let etag: Arc<str> = Arc::from(etag);
        (0..self.block_count(size))
            .map(|i| self.key(path.as_ref(), &etag, size, i))
            .collect()
    }

    /// One block, from the cache or (once, however many ask) from the store.
    async fn block(&self, file: &FileBlocks, index: u64) -> Result<Bytes, object_store::Error> {
        let key = self.key(file.path.as_ref(), &file.etag, file.size, index);
        let range = key.start..key.start + key.len;
        let (store, path, metrics) = (file.store.clone(), file.path.clone(), self.metrics.clone());
        let entry = self
            .cache
            .get_or_fetch(&key, move || async move {
                metrics.cache_misses.inc();
                fetch(&store, &path, range, &metrics).await
            })
            .await
            .map_err(|e| match e.downcast_ref::<object_store::Error>() {
                Some(object_store::Error::NotFound { path, .. }) => object_store::Error::NotFound {
                    path: path.clone(),
                    source: e.to_string().into(),
                },
                _ => object_store::Error::Generic {
                    store: "neve-proxy cache",
                    source: Box::new(e),
                },
            })?;
        let bytes = entry.value().clone();
        if matches!(entry.source(), Source::Memory | Source::Disk) {
            self.metrics.cache_hits.inc();
            self.metrics.cache_hit_bytes.inc_by(bytes.len() as u64);
        }
        Ok(bytes)
    }

    /// The bytes of `range` of a file, block by block, a few blocks ahead.
    pub fn read(
        self: &Arc<Self>,
        file: FileBlocks,
        range: Range<u64>,
    ) -> BoxStream<'static, Result<Bytes, object_store::Error>> {
        if range.is_empty() {
            return futures::stream::empty().boxed();
        }
        let b = self.block_size;
        let count = self.block_count(file.size);
        let block_of = |offset: u64| (offset / b).min(count.saturating_sub(1));
        let (first, last) = (block_of(range.start), block_of(range.end - 1));
        let this = self.clone();
        futures::stream::iter(first..=last)
            .map(move |i| {
                let (this, file, range) = (this.clone(), file.clone(), range.clone());
                async move {
                    let block = this.block(&file, i).await?;
                    let start = i * b;
                    let key = this.key(file.path.as_ref(), &file.etag, file.size, i);
                    let from = range.start.max(start) - start;
                    let to = (range.end.min(start + key.len) - start).max(from);
                    if to > block.len() as u64 {
                        // A block kept by a build that did not check what it fetched.
                        return Err(short_object(
                            &file.path,
                            &(start..start + key.len),
                            block.len() as u64,
                        ));
                    }
                    Ok(block.slice(from as usize..to as usize))
                }
            })
            .buffered(READ_AHEAD)
            .boxed()
    }

    /// Drop every cached block of one version of a file; how many there were.
    pub fn drop_file(&self, path: &Path, etag: &str, size: u64) -> u64 {
        let mut dropped = 0;
        for key in self.keys_of(path, etag, size) {
            if self.cache.contains(&key) {
                dropped += 1;
            }
            self.cache.remove(&key);
        }
        dropped
    }

    /// Whether a block is cached (memory, or maybe on disk).
    pub fn contains(&self, key: &BlockKey) -> bool {
        self.cache.contains(key)
    }

    pub async fn close(&self) {
        if let Err(e) = self.cache.close().await {
            tracing::warn!(error = %e, "closing the cache");
        }
    }
}

pub mod sweep;

#[cfg(test)]
mod tests;
