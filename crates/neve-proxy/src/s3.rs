//! The S3 operations the proxy serves, each on the bucket and key the access check passed.

use std::sync::Arc;
use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use neve_core::log::Snapshot;
use object_store::path::Path;
use object_store::GetOptions;
use s3s::dto::{self, StreamingBlob, Timestamp};
use s3s::{s3_error, S3Request, S3Response, S3Result, S3};
use sha2::Digest;

use crate::auth::{KeyInfo, Keys};
use crate::buckets::{self, BucketRef, Pin};
use crate::cache::{read_direct, BlockCache, FileBlocks};
use crate::catalog::Catalog;
use crate::config::ProxySettings;
use crate::error::{Error, Result};
use crate::listing::{self, Resume, DATA};
use crate::metrics::Metrics;

/// The proxy's S3 service.
#[derive(Clone)]
pub struct NeveS3 {
    pub catalog: Arc<Catalog>,
    pub keys: Arc<Keys>,
    pub metrics: Arc<Metrics>,
    pub settings: ProxySettings,
    /// `None` with `proxy.cache.memory = 0`.
    pub cache: Option<Arc<BlockCache>>,
}

/// A data file a key resolved to.
struct FileRef {
    path: Path,
    size: u64,
    /// ms since the epoch.
    modified: i64,
    etag: String,
}

/// A listing's answer ([`NeveS3::list_v2`], [`NeveS3::list_v1`]).
pub(crate) struct ListPage<O> {
    /// Everything but `contents`.
    pub out: O,
    pub page: listing::Page,
    /// Keys are URL-encoded (`encoding-type=url`).
    pub encode: bool,
    /// The table's folder relative to the warehouse.
    pub table: String,
    /// Alive files in the snapshot listed.
    pub files: usize,
}

pub(crate) type V2Page = ListPage<dto::ListObjectsV2Output>;
pub(crate) type V1Page = ListPage<dto::ListObjectsOutput>;

fn timestamp(ms: i64) -> Option<Timestamp> {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    Some(Timestamp::from(t))
}

/// Files are immutable and their paths unique, so a digest of the path is a stable ETag
/// that needs no request to the store.
pub(crate) fn etag_of(path: &str, size: u64) -> String {
    etag_from(&[path], size)
}

/// [`etag_of`] the path that is the concatenation of `parts`.
fn etag_from(parts: &[&str], size: u64) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut h = sha2::Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
    }
    h.update([0]);
    h.update(size.to_string().as_bytes());
    let d = h.finalize();
    let mut out = String::with_capacity(32);
    for b in &d[..16] {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
    out
}

impl NeveS3 {
    /// The bucket a request names, for the key that signed it (checked by `Access` already;
    /// checked again here so no operation depends on the order of the two).
    fn resolve(
        &self,
        creds: Option<&s3s::auth::Credentials>,
        bucket: &str,
    ) -> Result<(Arc<KeyInfo>, BucketRef, String)> {
        let key = self.keys.caller(creds)?;
        let b = buckets::parse(bucket).ok_or_else(|| Error::NoSuchBucket {
            bucket: bucket.to_string(),
        })?;
        if !key.may_read(&b.base) {
            return Err(Error::AccessDenied {
                reason: format!("key '{}' may not read bucket '{}'", key.id, b.base),
            });
        }
        let table = key.table_path(&b.table);
        Ok((key, b, table))
    }

    /// The size of the file `key` names in `bucket` (for an answer that needs only that).
    pub(crate) async fn object_size(
        &self,
        creds: Option<&s3s::auth::Credentials>,
        bucket: &str,
        key: &str,
    ) -> Result<u64> {
        let (_, b, table) = self.resolve(creds, bucket)?;
        Ok(self.find(bucket, &b, &table, key).await?.size)
    }

    /// The bucket is one of the key's and its snapshot can be read (HeadBucket,
    /// GetBucketLocation): `NoSuchBucket` or `AccessDenied` otherwise, as a listing answers.
    async fn bucket_exists(
        &self,
        creds: Option<&s3s::auth::Credentials>,
        bucket: &str,
    ) -> Result<()> {
        let (_, b, table) = self.resolve(creds, bucket)?;
        self.snapshot(bucket, &table, b.pin).await.map(|_| ())
    }

    async fn snapshot(&self, bucket: &str, table: &str, pin: Pin) -> Result<Arc<Snapshot>> {
        let r = self.catalog.snapshot(table, pin).await;
        self.metrics.log_refreshes.inc();
        r.map_err(|e| self.not_found(e, bucket, table))
    }

    /// The file a key names in the bucket's view: an alive file of the snapshot; for the
    /// latest view also a file removed less than `removed_files_readable` ago (a reader
    /// may have listed it just before).
    async fn find(&self, bucket: &str, b: &BucketRef, table: &str, key: &str) -> Result<FileRef> {
        buckets::check_key(key)?;
        let path = format!("{DATA}{key}");
        let location = self.catalog.location(table);
        let found = |snap: &Snapshot| -> Option<(u64, i64)> {
            if let Some(f) = snap.files.get(&path) {
                return Some((f.size, f.modification_time));
            }
            let grace = self.settings.removed_files_readable.as_millis() as i64;
            match (b.pin, snap.tombstones.get(&path)) {
                (Pin::Latest, Some(r))
                    if chrono::Utc::now().timestamp_millis() - r.deletion_timestamp < grace =>
                {
                    // Its `Last-Modified` as listed, when the proxy saw it alive (else, read
                    // since its removal, the removal's time).
                    let written = self.catalog.removed_written(table, &path);
                    let modified = written.unwrap_or(r.deletion_timestamp);
                    Some((r.size.unwrap_or(u64::MAX), modified))
                }
                _ => None,
            }
        };
        let mut hit = match b.pin {
            Pin::Latest => {
                // The snapshot in memory, unless it is older than a removed file may be read:
                // a file merged away and gc'd is not answered from memory for ever.
                let snap = self
                    .catalog
                    .latest(table, self.settings.removed_files_readable)
                    .await
                    .map_err(|e| self.not_found(e, bucket, table))?;
                found(&snap)
            }
            pin => found(&*self.snapshot(bucket, table, pin).await?),
        };
        if hit.is_none() && b.pin == Pin::Latest {
            // Committed since the snapshot in memory was read?
            hit = found(&*self.snapshot(bucket, table, Pin::Latest).await?);
        }
        let (mut size, modified) = hit.ok_or_else(|| Error::NoSuchKey {
            bucket: bucket.to_string(),
            key: key.to_string(),
        })?;
        let object = location.child(&path);
        if size == u64::MAX {
            // A tombstone that does not carry the size.
            let head = location
                .store
                .get_opts(
                    &object,
                    GetOptions {
                        head: true,
                        ..Default::default()
                    },
                )
                .await
                .map_err(|e| missing(e, bucket, key))?;
            size = head.meta.size;
        }
        Ok(FileRef {
            etag: etag_of(&path, size),
            path: object,
            size,
            modified,
        })
    }

    /// A page of ListObjectsV2: the answer without its `Contents`, and the page they are made
    /// of (the S3 operation and the listing route each render them their own way).
    pub(crate) async fn list_v2(
        &self,
        credentials: Option<&s3s::auth::Credentials>,
        input: &dto::ListObjectsV2Input,
    ) -> Result<V2Page> {
        let (key, b, table) = self.resolve(credentials, &input.bucket)?;
        let (snap, start) = match &input.continuation_token {
            Some(token) => {
                let (version, at) = listing::decode_token(key.secret(), &input.bucket, token)?;
                (
                    self.snapshot(&input.bucket, &table, Pin::Version(version))
                        .await?,
                    Some(at),
                )
            }
            None => (
                self.snapshot(&input.bucket, &table, b.pin).await?,
                input.start_after.clone().map(|after| Resume {
                    after,
                    prefix: false,
                }),
            ),
        };
        let Listed {
            page,
            max_keys,
            prefix,
            encode,
        } = list_page(
            &snap,
            input.prefix.as_deref(),
            input.delimiter.as_deref(),
            start.as_ref(),
            input.max_keys,
            input.encoding_type.as_ref(),
        )?;
        let next = page
            .next
            .as_ref()
            .map(|at| listing::encode_token(key.secret(), &input.bucket, snap.version, at));
        let key_count = (page.contents.len() + page.common_prefixes.len()) as i32;
        let out = dto::ListObjectsV2Output {
            name: Some(input.bucket.clone()),
            prefix: Some(url_encode(&prefix, encode)),
            delimiter: input.delimiter.as_deref().map(|d| url_encode(d, encode)),
            max_keys: Some(max_keys as i32),
            key_count: Some(key_count),
            continuation_token: input.continuation_token.clone(),
            start_after: input.start_after.as_deref().map(|s| url_encode(s, encode)),
            is_truncated: Some(next.is_some()),
            next_continuation_token: next,
            contents: None,
            common_prefixes: Some(prefixes(&page, encode)),
            encoding_type: input.encoding_type.clone(),
            ..Default::default()
        };
        Ok(V2Page {
            out,
            page,
            encode,
            table,
            files: snap.files.len(),
        })
    }

    /// A page of ListObjects (v1): as [`NeveS3::list_v2`], resuming after `marker`, always
    /// from the bucket's own snapshot (v1 has no token to pin one).
    pub(crate) async fn list_v1(
        &self,
        credentials: Option<&s3s::auth::Credentials>,
        input: &dto::ListObjectsInput,
    ) -> Result<V1Page> {
        let (_, b, table) = self.resolve(credentials, &input.bucket)?;
        let snap = self.snapshot(&input.bucket, &table, b.pin).await?;
        let start = input.marker.clone().filter(|m| !m.is_empty()).map(|m| {
            Resume::after_marker(
                m,
                input.prefix.as_deref().unwrap_or(""),
                input.delimiter.as_deref(),
            )
        });
        let Listed {
            page,
            max_keys,
            prefix,
            encode,
        } = list_page(
            &snap,
            input.prefix.as_deref(),
            input.delimiter.as_deref(),
            start.as_ref(),
            input.max_keys,
            input.encoding_type.as_ref(),
        )?;
        let out = dto::ListObjectsOutput {
            name: Some(input.bucket.clone()),
            prefix: Some(url_encode(&prefix, encode)),
            delimiter: input.delimiter.as_deref().map(|d| url_encode(d, encode)),
            marker: input.marker.as_deref().map(|m| url_encode(m, encode)),
            max_keys: Some(max_keys as i32),
            is_truncated: Some(page.next.is_some()),
            next_marker: page.next.as_ref().map(|r| url_encode(&r.after, encode)),
            contents: None,
            common_prefixes: Some(prefixes(&page, encode)),
            encoding_type: input.encoding_type.clone(),
            ..Default::default()
        };
        Ok(V1Page {
            out,
            page,
            encode,
            table,
            files: snap.files.len(),
        })
    }

    fn not_found(&self, e: Error, bucket: &str, table: &str) -> Error {
        match e {
            // Only a table that is gone is forgotten: a pin naming a version or a time the
            // table does not have leaves its snapshots in memory for every other reader.
            Error::Table(neve_core::Error::TableNotFound { .. }) => {
                self.catalog.forget(table);
                Error::NoSuchBucket {
                    bucket: bucket.to_string(),
                }
            }
            e => e,
        }
    }
}

/// A file gc has deleted is not there any more.
fn missing(e: object_store::Error, bucket: &str, key: &str) -> Error {
    match e {
        object_store::Error::NotFound { .. } => Error::NoSuchKey {
            bucket: bucket.to_string(),
            key: key.to_string(),
        },
        e => Error::Storage(e),
    }
}

fn url_encode(s: &str, encode: bool) -> String {
    if encode {
        urlencoding::encode(s).into_owned()
    } else {
        s.to_string()
    }
}

/// The request's preconditions, in RFC 9110's order (13.2.2): `If-Match`, else
/// `If-Unmodified-Since` (412); then `If-None-Match`, else `If-Modified-Since` (304, with the
/// ETag). The entity-tag headers are read as sent, lists included (`"a", "b"`, `W/"b"`, `*`);
/// dates come parsed by s3s.
fn check_conditions(
    file: &FileRef,
    headers: &axum::http::HeaderMap,
    if_modified_since: Option<&Timestamp>,
    if_unmodified_since: Option<&Timestamp>,
) -> S3Result<()> {
    let listed = |name: &str| -> Option<Vec<String>> {
        let mut tags = Vec::new();
        let mut any = false;
        for v in headers.get_all(name) {
            any = true;
            for t in v.to_str().unwrap_or("").split(',') {
                tags.push(t.trim().to_string());
            }
        }
        any.then_some(tags)
    };
    // If-Match compares strongly (a weak tag never matches), If-None-Match weakly. A tag may
    // come without its quotes, as S3 takes it (AWS SDK for Java v1 sends them so).
    let names_file = |tags: &[String], weak: bool| {
        tags.iter().any(|t| {
            let t = if weak { t.trim_start_matches("W/") } else { t };
            let bare = t.strip_prefix('"').and_then(|t| t.strip_suffix('"'));
            t == "*" || bare.unwrap_or(t) == file.etag
        })
    };
    let modified = file.modified.div_euclid(1000);
    let seconds = |t: &Timestamp| time::OffsetDateTime::from(t.clone()).unix_timestamp();
    let if_match = listed("if-match");
    match &if_match {
        Some(tags) if !names_file(tags, false) => return Err(s3_error!(PreconditionFailed)),
        Some(_) => {}
        None => {
            if let Some(since) = if_unmodified_since.map(seconds) {
                if modified > since {
                    return Err(s3_error!(PreconditionFailed));
                }
            }
        }
    }
    let not_modified = match listed("if-none-match") {
        Some(tags) => names_file(&tags, true),
        None => if_modified_since
            .map(seconds)
            .is_some_and(|since| modified <= since),
    };
    if not_modified {
        return Err(with_header(
            s3_error!(NotModified),
            axum::http::header::ETAG,
            format!("\"{}\"", file.etag),
        ));
    }
    Ok(())
}

/// The bytes a `Range` asks of a file of `size` bytes (none: the whole file), or
/// `InvalidRange`.
fn satisfied(range: Option<dto::Range>, size: u64) -> S3Result<Option<std::ops::Range<u64>>> {
    range
        .map(|r| r.check(size).map_err(|_| invalid_range(size)))
        .transpose()
}

/// `Content-Range` of a satisfied range.
fn content_range(r: &std::ops::Range<u64>, size: u64) -> String {
    format!("bytes {}-{}/{size}", r.start, r.end.saturating_sub(1))
}

/// `InvalidRange` (416) with the `Content-Range: bytes */SIZE` RFC 9110 asks for.
pub(crate) fn invalid_range(size: u64) -> s3s::S3Error {
    with_header(
        s3_error!(InvalidRange),
        axum::http::header::CONTENT_RANGE,
        format!("bytes */{size}"),
    )
}

/// An error answer that carries one header.
fn with_header(
    mut e: s3s::S3Error,
    name: axum::http::header::HeaderName,
    value: String,
) -> s3s::S3Error {
    let mut h = axum::http::HeaderMap::new();
    if let Ok(v) = value.parse() {
        h.insert(name, v);
    }
    e.set_headers(h);
    e
}

#[async_trait::async_trait]
impl S3 for NeveS3 {
    async fn list_buckets(
        &self,
        req: S3Request<dto::ListBucketsInput>,
    ) -> S3Result<S3Response<dto::ListBucketsOutput>> {
        self.metrics.served("ListBuckets");
        let key = self.keys.caller(req.credentials.as_ref())?;
        let root = if key.prefix.is_empty() {
            self.catalog.warehouse().clone()
        } else {
            self.catalog.location(&key.prefix)
        };
        let tables = root.find_tables(1).await.map_err(Error::Table)?;
        let buckets = tables
            .iter()
            .map(|t| buckets::name_of(t))
            .filter(|name| key.may_read(name))
            .map(|name| dto::Bucket {
                name: Some(name),
                bucket_region: Some(self.settings.region.clone()),
                creation_date: None,
            })
            .collect();
        Ok(S3Response::new(dto::ListBucketsOutput {
            buckets: Some(buckets),
            owner: Some(dto::Owner {
                display_name: Some(key.id.clone()),
                id: Some(key.id.clone()),
            }),
            ..Default::default()
        }))
    }

    async fn get_bucket_location(
        &self,
        req: S3Request<dto::GetBucketLocationInput>,
    ) -> S3Result<S3Response<dto::GetBucketLocationOutput>> {
        self.metrics.served("GetBucketLocation");
        self.bucket_exists(req.credentials.as_ref(), &req.input.bucket)
            .await?;
        let region = &self.settings.region;
        Ok(S3Response::new(dto::GetBucketLocationOutput {
            location_constraint: (region != "us-east-1")
                .then(|| dto::BucketLocationConstraint::from(region.clone())),
        }))
    }

    /// Whether the bucket exists for this key (pyarrow's datasets, boto3's `head_bucket`,
    /// Spark's S3A and rclone ask before they read): 200, or the same 404 or 403 as a listing.
    async fn head_bucket(
        &self,
        req: S3Request<dto::HeadBucketInput>,
    ) -> S3Result<S3Response<dto::HeadBucketOutput>> {
        self.metrics.served("HeadBucket");
        self.bucket_exists(req.credentials.as_ref(), &req.input.bucket)
            .await?;
        Ok(S3Response::new(dto::HeadBucketOutput {
            bucket_region: Some(self.settings.region.clone()),
            ..Default::default()
        }))
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<dto::ListObjectsV2Input>,
    ) -> S3Result<S3Response<dto::ListObjectsV2Output>> {
        self.metrics.served("ListObjectsV2");
        let t0 = Instant::now();
        let V2Page {
            mut out,
            page,
            encode,
            ..
        } = self.list_v2(req.credentials.as_ref(), &req.input).await?;
        out.contents = Some(objects(&page, encode));
        self.metrics
            .list_seconds
            .observe(t0.elapsed().as_secs_f64());
        Ok(S3Response::new(out))
    }

    async fn list_objects(
        &self,
        req: S3Request<dto::ListObjectsInput>,
    ) -> S3Result<S3Response<dto::ListObjectsOutput>> {
        self.metrics.served("ListObjects");
        let t0 = Instant::now();
        let V1Page {
            mut out,
            page,
            encode,
            ..
        } = self.list_v1(req.credentials.as_ref(), &req.input).await?;
        out.contents = Some(objects(&page, encode));
        self.metrics
            .list_seconds
            .observe(t0.elapsed().as_secs_f64());
        Ok(S3Response::new(out))
    }

    async fn head_object(
        &self,
        req: S3Request<dto::HeadObjectInput>,
    ) -> S3Result<S3Response<dto::HeadObjectOutput>> {
        self.metrics.served("HeadObject");
        let input = req.input;
        let (_, b, table) = self.resolve(req.credentials.as_ref(), &input.bucket)?;
        let file = self.find(&input.bucket, &b, &table, &input.key).await?;
        check_conditions(
            &file,
            &req.headers,
            input.if_modified_since.as_ref(),
            input.if_unmodified_since.as_ref(),
        )?;
        // As S3 answers it: a range changes only the length (and the status to 206, which
        // `partial_head` sets).
        let range = satisfied(input.range, file.size)?;
        Ok(S3Response::new(dto::HeadObjectOutput {
            accept_ranges: Some("bytes".into()),
            content_length: Some(range.as_ref().map_or(file.size, |r| r.end - r.start) as i64),
            content_range: range.as_ref().map(|r| content_range(r, file.size)),
            content_type: Some(parquet_type()),
            e_tag: Some(dto::ETag::Strong(file.etag.clone())),
            last_modified: timestamp(file.modified),
            ..Default::default()
        }))
    }

    async fn get_object(
        &self,
        req: S3Request<dto::GetObjectInput>,
    ) -> S3Result<S3Response<dto::GetObjectOutput>> {
        self.metrics.served("GetObject");
        let input = req.input;
        let (_, b, table) = self.resolve(req.credentials.as_ref(), &input.bucket)?;
        let file = self.find(&input.bucket, &b, &table, &input.key).await?;
        check_conditions(
            &file,
            &req.headers,
            input.if_modified_since.as_ref(),
            input.if_unmodified_since.as_ref(),
        )?;
        let range = satisfied(input.range, file.size)?;
        let span = range.clone().unwrap_or(0..file.size);
        let blocks = FileBlocks {
            store: self.catalog.location(&table).store.clone(),
            path: file.path.clone(),
            etag: Arc::from(file.etag.as_str()),
            size: file.size,
        };
        let mut body = match &self.cache {
            Some(cache) => cache.read(blocks, span.clone()),
            None => read_direct(&blocks, span.clone(), self.metrics.clone())
                .await
                .map_err(|e| missing(e, &input.bucket, &input.key))?,
        };
        // The first bytes before the answer: a file gc has deleted is NoSuchKey, not a cut
        // body.
        let first = match body.next().await {
            Some(Ok(b)) => Some(b),
            Some(Err(e)) => return Err(missing(e, &input.bucket, &input.key).into()),
            None => None,
        };
        let metrics = self.metrics.clone();
        let body = futures::stream::iter(first.map(Ok))
            .chain(body)
            .inspect_ok(move |c| {
                metrics.bytes_served.inc_by(c.len() as u64);
            })
            .boxed();
        Ok(S3Response::new(dto::GetObjectOutput {
            accept_ranges: Some("bytes".into()),
            body: Some(StreamingBlob::wrap(sync_wrapper::SyncStream::new(body))),
            content_length: Some((span.end - span.start) as i64),
            content_range: range.map(|r| content_range(&r, file.size)),
            content_type: Some(parquet_type()),
            e_tag: Some(dto::ETag::Strong(file.etag.clone())),
            last_modified: timestamp(file.modified),
            ..Default::default()
        }))
    }
}

/// A page of a listing and how to write it.
struct Listed {
    page: listing::Page,
    max_keys: usize,
    prefix: String,
    encode: bool,
}

fn list_page(
    snap: &Snapshot,
    prefix: Option<&str>,
    delimiter: Option<&str>,
    start: Option<&Resume>,
    given_max_keys: Option<i32>,
    encoding: Option<&dto::EncodingType>,
) -> Result<Listed> {
    let max_keys = max_keys(given_max_keys)?;
    if let Some(e) = encoding.filter(|e| e.as_str() != dto::EncodingType::URL) {
        return Err(Error::InvalidArgument {
            reason: format!("encoding-type '{}': the only encoding is 'url'", e.as_str()),
        });
    }
    let prefix = prefix.unwrap_or_default().to_string();
    Ok(Listed {
        page: listing::list(&snap.files, &prefix, delimiter, start, max_keys),
        max_keys,
        prefix,
        encode: encoding.is_some_and(|e| e.as_str() == dto::EncodingType::URL),
    })
}

fn parquet_type() -> dto::ContentType {
    "application/vnd.apache.parquet"
        .parse()
        .expect("a media type")
}

fn max_keys(given: Option<i32>) -> Result<usize> {
    match given {
        None => Ok(listing::MAX_KEYS),
        Some(n) if n >= 0 => Ok(n as usize),
        Some(n) => Err(Error::InvalidArgument {
            reason: format!("max-keys {n} is negative"),
        }),
    }
}

fn objects(page: &listing::Page, encode: bool) -> Vec<dto::Object> {
    page.contents.iter().map(|l| object(l, encode)).collect()
}

/// A listed file as S3 lists it.
pub(crate) fn object(l: &listing::Listed, encode: bool) -> dto::Object {
    dto::Object {
        key: Some(url_encode(&l.key, encode)),
        size: Some(l.size as i64),
        last_modified: timestamp(l.modified),
        e_tag: Some(dto::ETag::Strong(etag_from(&[DATA, &l.key], l.size))),
        storage_class: Some(dto::ObjectStorageClass::from_static(
            dto::ObjectStorageClass::STANDARD,
        )),
        ..Default::default()
    }
}

fn prefixes(page: &listing::Page, encode: bool) -> Vec<dto::CommonPrefix> {
    page.common_prefixes
        .iter()
        .map(|p| dto::CommonPrefix {
            prefix: Some(url_encode(p, encode)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ProxyConfig;
    use neve_core::{CreateOptions, TableBuilder};
    use s3s::{S3Error, S3ErrorCode};
    use std::time::Duration;

    /// A pin the table has no version for is that bucket's NoSuchBucket; the table's snapshots
    /// stay in memory for every other reader (it once made each reader read the log again).
    #[tokio::test]
    async fn a_bad_pin_does_not_forget_the_table() {
        let warehouse = neve_core::TableLocation::memory("wh");
        TableBuilder::new(warehouse.sub("a"))
            .build()
            .create(CreateOptions::default())
            .await
            .unwrap();
        let config = ProxyConfig {
            warehouse: "memory".into(),
            settings: ProxySettings::default(),
            tenants: vec![],
            single_key: None,
            tls: None,
        };
        let s3 = NeveS3 {
            catalog: Arc::new(Catalog::new(warehouse, Duration::ZERO)),
            keys: Arc::new(Keys::new(&config).unwrap()),
            metrics: Arc::new(Metrics::new()),
            settings: ProxySettings::default(),
            cache: None,
        };
        s3.snapshot("a", "a", Pin::Latest).await.unwrap();
        assert!(s3.catalog.knows("a"));
        for pin in [Pin::Version(99), Pin::Time(0)] {
            let e = s3.snapshot("a--x", "a", pin).await.unwrap_err();
            assert!(matches!(e, Error::Table(_)), "{e:?}");
            assert_eq!(S3Error::from(e).code(), &S3ErrorCode::NoSuchBucket);
            assert!(s3.catalog.knows("a"), "{pin:?}");
        }
        // A table that is gone is forgotten.
        let e = s3.snapshot("b", "b", Pin::Latest).await.unwrap_err();
        assert!(matches!(e, Error::NoSuchBucket { .. }), "{e:?}");
        assert!(!s3.catalog.knows("b"));
    }

    /// ETags key the disk cache across restarts and clients' caches: they never change.
    #[test]
    fn etags_are_stable() {
        let golden = "90fa3e40e9e28da0aa20ffc55f84a75e";
        assert_eq!(super::etag_of("_data/d=1/part-x.parquet", 123), golden);
        assert_eq!(
            super::etag_from(&["_data/", "d=1/part-x.parquet"], 123),
            golden
        );
    }
}
