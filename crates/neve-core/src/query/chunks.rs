//! Byte ranges of data files kept from one query to the next, for long-lived processes (a
//! Python session, a server) reading a remote store.
//!
//! On S3 or MinIO a repeated query of one column over many small files is one GET per file,
//! each costing the store more than the bytes it returns. neve never writes a data file twice
//! under one name (each name carries a random id), so a range read once stays right for as long
//! as it is kept. Only `_data/` files are cached: the log and the Iceberg metadata change.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetRange, GetResult, GetResultPayload, ListResult, MultipartUpload,
    ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

type Key = (Path, u64, u64);

/// A range's bytes, and the object's metadata when the read that brought them returned it (a
/// single-range GET does; `get_ranges` does not).
#[derive(Clone)]
struct Chunk {
    meta: Option<ObjectMeta>,
    bytes: Bytes,
}

/// Ranges of data files, least recently used out first, shared by the queries of a process.
#[derive(Clone)]
pub struct ChunkCache {
    cache: foyer::Cache<Key, Chunk>,
}

impl ChunkCache {
    /// A cache of at most about `bytes` of file ranges.
    pub fn new(bytes: usize) -> Self {
        let cache = foyer::CacheBuilder::new(bytes.max(1))
            .with_name("neve chunks")
            .with_weighter(|k: &Key, v: &Chunk| v.bytes.len() + 2 * k.0.as_ref().len() + 128)
            .build();
        Self { cache }
    }

    /// Bytes held (with the keys' share).
    pub fn usage(&self) -> usize {
        self.cache.usage()
    }

    /// The limit, in bytes.
    pub fn limit(&self) -> usize {
        self.cache.capacity()
    }

    fn get(&self, path: &Path, r: &Range<u64>) -> Option<Chunk> {
        self.cache
            .get(&(path.clone(), r.start, r.end))
            .map(|e| e.value().clone())
    }

    fn put(&self, path: &Path, r: &Range<u64>, meta: Option<ObjectMeta>, b: &Bytes) {
        // A range bigger than a tenth of the cache would push out most of it for one read.
        if b.len() <= self.limit() / 10 {
            // Its own copy: `b` may be a slice of a larger response buffer.
            let bytes = Bytes::copy_from_slice(b);
            self.cache
                .insert((path.clone(), r.start, r.end), Chunk { meta, bytes });
        }
    }
}

impl fmt::Debug for ChunkCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChunkCache")
            .field("usage", &self.usage())
            .field("limit", &self.limit())
            .finish()
    }
}

/// Serves ranges of data files from a [`ChunkCache`], reading the rest through `inner`.
#[derive(Debug)]
pub(crate) struct CachedStore {
    inner: Arc<dyn ObjectStore>,
    cache: ChunkCache,
}

impl CachedStore {
    pub fn new(inner: Arc<dyn ObjectStore>, cache: ChunkCache) -> Self {
        Self { inner, cache }
    }
}

/// Data files are immutable; everything else (the log, Iceberg metadata) is not.
fn cacheable(path: &Path) -> bool {
    path.parts().any(|p| p.as_ref() == "_data")
}

impl fmt::Display for CachedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cached({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for CachedStore {
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
        // Plain bounded range reads only (what the Parquet reader does); a conditional or
        // open-ended read goes to the store as it is.
        let plain = !options.head
            && options.if_match.is_none()
            && options.if_none_match.is_none()
            && options.if_modified_since.is_none()
            && options.if_unmodified_since.is_none()
            && options.version.is_none();
        let Some(GetRange::Bounded(range)) = options.range.clone().filter(|_| plain) else {
            return self.inner.get_opts(location, options).await;
        };
        if !cacheable(location) {
            return self.inner.get_opts(location, options).await;
        }
        if let Some(Chunk {
            meta: Some(meta),
            bytes,
        }) = self.cache.get(location, &range)
        {
            let stream = futures::stream::once(async move { Ok(bytes) });
            return Ok(GetResult {
                payload: GetResultPayload::Stream(Box::pin(stream)),
                meta,
                range,
                attributes: Default::default(),
            });
        }
        let r = self.inner.get_opts(location, options).await?;
        let (meta, attributes, got) = (r.meta.clone(), r.attributes.clone(), r.range.clone());
        let bytes = r.bytes().await?;
        self.cache.put(location, &got, Some(meta.clone()), &bytes);
        let stream = futures::stream::once(async move { Ok(bytes) });
        Ok(GetResult {
            payload: GetResultPayload::Stream(Box::pin(stream)),
            meta,
            range: got,
            attributes,
        })
    }
    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        if !cacheable(location) {
            return self.inner.get_ranges(location, ranges).await;
        }
        let mut out: Vec<Option<Bytes>> = ranges
            .iter()
            .map(|r| self.cache.get(location, r).map(|c| c.bytes))
            .collect();
        let missing: Vec<Range<u64>> = ranges
            .iter()
            .zip(&out)
            .filter(|(_, b)| b.is_none())
            .map(|(r, _)| r.clone())
            .collect();
        if !missing.is_empty() {
            let got = self.inner.get_ranges(location, &missing).await?;
            let mut got = missing.iter().zip(got);
            for slot in out.iter_mut().filter(|b| b.is_none()) {
                let (r, b) = got.next().expect("one response per missing range");
                self.cache.put(location, r, None, &b);
                *slot = Some(b);
            }
        }
        Ok(out.into_iter().map(|b| b.expect("filled")).collect())
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
