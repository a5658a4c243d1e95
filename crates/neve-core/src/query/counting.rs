//! An object store wrapper that counts the bytes and requests a query reads, so `neve sql`
//! and `neve bench query` can report what a query cost in storage traffic; given a
//! [`ChunkCache`], it answers from it first and counts only what the store serves.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

use super::ChunkCache;

/// Bytes and GET requests read through a [`CountingStore`].
#[derive(Debug, Default)]
pub struct ReadCounter {
    bytes: AtomicU64,
    requests: AtomicU64,
    /// Also counts everything counted here (a server's total over its queries).
    parent: Option<Arc<ReadCounter>>,
}

impl ReadCounter {
    /// A counter whose reads also count in `parent`.
    pub fn child_of(parent: Arc<ReadCounter>) -> Self {
        Self {
            parent: Some(parent),
            ..Default::default()
        }
    }

    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
    fn add(&self, bytes: u64, requests: u64) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.requests.fetch_add(requests, Ordering::Relaxed);
        if let Some(p) = &self.parent {
            p.add(bytes, requests);
        }
    }
}

/// Passes everything to `inner`, counting what GETs return.
#[derive(Debug)]
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    counter: Arc<ReadCounter>,
    chunks: Option<ChunkCache>,
}

impl CountingStore {
    pub fn new(inner: Arc<dyn ObjectStore>, counter: Arc<ReadCounter>) -> Self {
        Self {
            inner,
            counter,
            chunks: None,
        }
    }

    /// Reads of data files are answered from `chunks` when it holds them, and kept there.
    pub fn with_chunks(mut self, chunks: ChunkCache) -> Self {
        self.chunks = Some(chunks);
        self
    }
}

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let head = options.head;
        let cached = self
            .chunks
            .as_ref()
            .zip(ChunkCache::range_of(location, &options));
        if let Some((chunks, range)) = &cached {
            if let Some(hit) = chunks.hit(location, range) {
                return Ok(hit);
            }
        }
        let r = self.inner.get_opts(location, options).await?;
        let bytes = if head { 0 } else { r.range.end - r.range.start };
        tracing::trace!(%location, range = ?r.range, "get");
        self.counter.add(bytes, 1);
        match cached {
            Some((chunks, _)) => chunks.keep(location, r).await,
            None => Ok(r),
        }
    }
    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        let kept = self
            .chunks
            .as_ref()
            .and_then(|c| Some((c, c.lookup(location, ranges)?)));
        let missing: Vec<Range<u64>> = match &kept {
            Some((_, out)) => ranges
                .iter()
                .zip(out)
                .filter(|(_, b)| b.is_none())
                .map(|(r, _)| r.clone())
                .collect(),
            None => ranges.to_vec(),
        };
        let r = if missing.is_empty() {
            Vec::new()
        } else {
            self.inner.get_ranges(location, &missing).await?
        };
        let bytes: u64 = r.iter().map(|b| b.len() as u64).sum();
        tracing::trace!(%location, ranges = ?missing, "get_ranges");
        self.counter.add(bytes, missing.len() as u64);
        Ok(match kept {
            Some((chunks, out)) => chunks.fill(location, &missing, r, out),
            None => r,
        })
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
