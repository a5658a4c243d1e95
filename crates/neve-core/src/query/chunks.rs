//! Byte ranges of data files kept from one query to the next, for long-lived processes (a
//! Python session, a server) reading a remote store.
//!
//! On S3 or MinIO a repeated query of one column over many small files is one GET per file,
//! each costing the store more than the bytes it returns. neve never writes a data file twice
//! under one name (each name carries a random id), so a range read once stays right for as long
//! as it is kept. Only `_data/` files are cached: the log and the Iceberg metadata change.

use std::fmt;
use std::ops::Range;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, GetResult, GetResultPayload, ObjectMeta};

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

/// Data files are immutable; everything else (the log, Iceberg metadata) is not.
fn cacheable(path: &Path) -> bool {
    path.parts().any(|p| p.as_ref() == "_data")
}

fn from_bytes(bytes: Bytes, meta: ObjectMeta, range: Range<u64>) -> GetResult {
    let stream = futures::stream::once(async move { Ok(bytes) });
    GetResult {
        payload: GetResultPayload::Stream(Box::pin(stream)),
        meta,
        range,
        attributes: Default::default(),
    }
}

/// The cache's side of a store's reads ([`super::CountingStore`] asks it first, and counts only
/// what the store serves).
impl ChunkCache {
    /// The range a single read asks for, when the cache may answer or keep it: a plain bounded
    /// read of a data file (what the Parquet reader does). Conditional and open-ended reads go
    /// to the store as they are.
    pub(crate) fn range_of(path: &Path, options: &GetOptions) -> Option<Range<u64>> {
        let plain = !options.head
            && options.if_match.is_none()
            && options.if_none_match.is_none()
            && options.if_modified_since.is_none()
            && options.if_unmodified_since.is_none()
            && options.version.is_none();
        match &options.range {
            Some(GetRange::Bounded(r)) if plain && cacheable(path) => Some(r.clone()),
            _ => None,
        }
    }

    /// A kept answer to a single read of `range`, if one came with the object's metadata.
    pub(crate) fn hit(&self, path: &Path, range: &Range<u64>) -> Option<GetResult> {
        match self.get(path, range)? {
            Chunk {
                meta: Some(meta),
                bytes,
            } => Some(from_bytes(bytes, meta, range.clone())),
            _ => None,
        }
    }

    /// Keep what a single read returned, and pass it on.
    pub(crate) async fn keep(&self, path: &Path, r: GetResult) -> object_store::Result<GetResult> {
        let (meta, attributes, range) = (r.meta.clone(), r.attributes.clone(), r.range.clone());
        let bytes = r.bytes().await?;
        self.put(path, &range, Some(meta.clone()), &bytes);
        let mut out = from_bytes(bytes, meta, range);
        out.attributes = attributes;
        Ok(out)
    }

    /// Per range, its kept bytes (`None`: to read), when `path` is a data file.
    pub(crate) fn lookup(&self, path: &Path, ranges: &[Range<u64>]) -> Option<Vec<Option<Bytes>>> {
        cacheable(path).then(|| {
            ranges
                .iter()
                .map(|r| self.get(path, r).map(|c| c.bytes))
                .collect()
        })
    }

    /// Fill the gaps of `out` with `got`, the store's answers to `missing` (the gaps' ranges in
    /// order), keeping them.
    pub(crate) fn fill(
        &self,
        path: &Path,
        missing: &[Range<u64>],
        got: Vec<Bytes>,
        out: Vec<Option<Bytes>>,
    ) -> Vec<Bytes> {
        let mut got = missing.iter().zip(got);
        out.into_iter()
            .map(|slot| {
                slot.unwrap_or_else(|| {
                    let (r, b) = got.next().expect("one answer per missing range");
                    self.put(path, r, None, &b);
                    b
                })
            })
            .collect()
    }
}
