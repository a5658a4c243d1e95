//! ListObjectsV2 and ListObjects (v1) served from pre-rendered entries. s3s checks the request's
//! signature and the policy ([`crate::auth::Access`]) runs on it as on every operation; the page
//! is then the one the S3 operation makes ([`NeveS3::list_v2`], [`NeveS3::list_v1`]), but each
//! file's `<Contents>` element (the same in both versions) is
//! rendered once, by s3s's own serializer, and kept: rendering a page of 1,000 entries (escaping
//! keys, formatting each date) was most of a listing's CPU, and a table's files, being
//! immutable, render the same way every time. The bytes are s3s's, as the tests check.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::http::{Extensions, HeaderMap, HeaderValue, Method, Uri};
use s3s::dto;
use s3s::route::S3Route;
use s3s::xml::Serializer;
use s3s::{Body, S3Request, S3Response, S3Result};

use super::Listed;
use crate::auth::{self, Access};
use crate::buckets;
use crate::error::{Error, Result};
use crate::s3::{object, NeveS3, V1Page};

/// The S3 namespace of a ListBucketResult, as s3s writes it.
const XMLNS_S3: &str = "http://s3.amazonaws.com/doc/2006-03-01/";

/// Which listing a request asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Version {
    V1,
    V2,
}

impl Version {
    fn op(self) -> &'static str {
        match self {
            Version::V1 => "ListObjects",
            Version::V2 => "ListObjectsV2",
        }
    }
}

/// The query parameters of ListObjects (v1); a request with any other is left to s3s.
const V1_PARAMS: [&str; 5] = ["prefix", "delimiter", "marker", "max-keys", "encoding-type"];

/// The custom route s3s runs for `GET /<bucket>?list-type=2` and `GET /<bucket>?<v1 params>`.
pub(crate) struct ListRoute {
    pub s3: NeveS3,
    pub access: Access,
    pub rendered: Arc<Rendered>,
}

/// Rendered `<Contents>` elements by table, URL-encoded or not, then by file path. Dropped
/// as a whole when a table's grows past twice its alive files (files merged or deleted away).
#[derive(Default)]
pub(crate) struct Rendered {
    tables: parking_lot::Mutex<HashMap<String, [ByPath; 2]>>,
}

/// Looked up a thousand times a page: a fast hash, seeded per process.
type ByPath = HashMap<String, Entry, foldhash::fast::RandomState>;

struct Entry {
    size: u64,
    modified: i64,
    xml: Arc<str>,
}

impl Rendered {
    /// The `<Contents>` elements of `page`'s files, rendering those not seen before.
    fn contents(&self, table: &str, alive: usize, page: &super::Page, encode: bool) -> String {
        let mut out = String::with_capacity(page.contents.len() * 256);
        let mut tables = self.tables.lock();
        let by_path = &mut tables.entry(table.to_string()).or_default()[encode as usize];
        if by_path.len() > 2 * alive + super::MAX_KEYS {
            by_path.clear();
        }
        for l in &page.contents {
            match by_path.get(l.key.as_str()) {
                Some(e) if e.size == l.size && e.modified == l.modified => out.push_str(&e.xml),
                _ => {
                    let xml = render_contents(l, encode);
                    out.push_str(&xml);
                    by_path.insert(
                        l.key.clone(),
                        Entry {
                            size: l.size,
                            modified: l.modified,
                            xml,
                        },
                    );
                }
            }
        }
        out
    }

    /// Drop what is kept for tables `known` no longer holds (a table that went away or was
    /// forgotten for being idle).
    pub(crate) fn retain(&self, known: impl Fn(&str) -> bool) {
        self.tables.lock().retain(|t, _| known(t));
    }
}

/// One file's `<Contents>` element, as s3s serializes it in a ListBucketResult.
fn render_contents(l: &Listed, encode: bool) -> Arc<str> {
    let mut buf = Vec::with_capacity(256);
    Serializer::new(&mut buf)
        .content("Contents", &object(l, encode))
        .expect("writing to memory");
    String::from_utf8(buf).expect("XML is text").into()
}

/// A ListBucketResult document whose content `fields` writes.
fn render_with(
    fields: impl FnOnce(&mut Serializer<&mut Vec<u8>>) -> s3s::xml::SerResult,
    capacity: usize,
) -> Vec<u8> {
    let mut buf = Vec::with_capacity(capacity + 1024);
    let mut s = Serializer::new(&mut buf);
    let written = s
        .decl()
        .and_then(|()| s.element_with_ns("ListBucketResult", XMLNS_S3, fields));
    written.expect("writing to memory");
    buf
}

/// An optional field, as s3s writes one: `<name>value</name>`, or nothing.
fn opt<T: s3s::xml::SerializeContent>(
    s: &mut Serializer<&mut Vec<u8>>,
    name: &str,
    value: &Option<T>,
) -> s3s::xml::SerResult {
    match value {
        Some(v) => s.content(name, v),
        None => Ok(()),
    }
}

/// The whole ListObjectsV2 document, `contents` being the page's rendered `<Contents>`
/// elements: the fields in the order s3s writes them.
fn render(out: &dto::ListObjectsV2Output, contents: &str) -> Vec<u8> {
    render_with(
        |s| {
            opt(s, "Name", &out.name)?;
            opt(s, "Prefix", &out.prefix)?;
            opt(s, "MaxKeys", &out.max_keys)?;
            opt(s, "KeyCount", &out.key_count)?;
            opt(s, "ContinuationToken", &out.continuation_token)?;
            opt(s, "IsTruncated", &out.is_truncated)?;
            opt(s, "NextContinuationToken", &out.next_continuation_token)?;
            s.write_raw_text(contents)?;
            if let Some(v) = &out.common_prefixes {
                s.flattened_list("CommonPrefixes", v)?;
            }
            opt(s, "Delimiter", &out.delimiter)?;
            opt(s, "EncodingType", &out.encoding_type)?;
            opt(s, "StartAfter", &out.start_after)
        },
        contents.len(),
    )
}

/// The whole ListObjects (v1) document, as [`render`] for v2.
fn render_v1(out: &dto::ListObjectsOutput, contents: &str) -> Vec<u8> {
    render_with(
        |s| {
            opt(s, "Name", &out.name)?;
            opt(s, "Prefix", &out.prefix)?;
            opt(s, "Marker", &out.marker)?;
            opt(s, "MaxKeys", &out.max_keys)?;
            opt(s, "IsTruncated", &out.is_truncated)?;
            s.write_raw_text(contents)?;
            if let Some(v) = &out.common_prefixes {
                s.flattened_list("CommonPrefixes", v)?;
            }
            opt(s, "Delimiter", &out.delimiter)?;
            opt(s, "NextMarker", &out.next_marker)?;
            opt(s, "EncodingType", &out.encoding_type)
        },
        contents.len(),
    )
}

/// The bucket of a path-style request on a bucket (`/<bucket>` or `/<bucket>/`), when it
/// needs no decoding; anything else is left to s3s's own route.
fn bucket_of(uri: &Uri) -> Option<&str> {
    let path = uri.path().strip_prefix('/')?;
    let bucket = path.strip_suffix('/').unwrap_or(path);
    (!bucket.is_empty() && !bucket.contains(['/', '%']) && buckets::parse(bucket).is_some())
        .then_some(bucket)
}

/// `GET /<bucket>?list-type=2` is V2; `GET /<bucket>` with only ListObjects' own parameters
/// (and a presigned URL's `X-Amz-*`) is V1. Asked of every request, so the query is scanned in
/// place.
fn listing(method: &Method, uri: &Uri) -> Option<Version> {
    if *method != Method::GET || bucket_of(uri).is_none() {
        return None;
    }
    let pairs = || url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes());
    if pairs().any(|(k, v)| k == "list-type" && v == "2") {
        return Some(Version::V2);
    }
    pairs()
        .all(|(k, _)| V1_PARAMS.contains(&&*k) || k.starts_with("X-Amz-"))
        .then_some(Version::V1)
}

/// The listing `is_match` chose for this request.
fn version_of(req: &S3Request<Body>) -> Version {
    req.extensions
        .get::<Version>()
        .copied()
        .or_else(|| listing(&req.method, &req.uri))
        .unwrap_or(Version::V2)
}

/// The query's pairs, decoded.
fn query_pairs(uri: &Uri) -> Vec<(String, String)> {
    auth::url_pairs(uri.query().unwrap_or(""))
}

/// A query parameter's value, decoded.
fn get(query: &[(String, String)], name: &str) -> Option<String> {
    query
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
}

fn max_keys(query: &[(String, String)]) -> Result<Option<i32>> {
    get(query, "max-keys")
        .map(|v| {
            v.parse::<i32>().map_err(|_| Error::InvalidArgument {
                reason: format!("max-keys '{v}' is not a number"),
            })
        })
        .transpose()
}

/// ListObjects' (v1) input, read from the query as s3s reads it.
fn input_v1(bucket: &str, query: &[(String, String)]) -> Result<dto::ListObjectsInput> {
    Ok(dto::ListObjectsInput {
        bucket: bucket.to_string(),
        delimiter: get(query, "delimiter"),
        encoding_type: get(query, "encoding-type").map(dto::EncodingType::from),
        marker: get(query, "marker"),
        max_keys: max_keys(query)?,
        prefix: get(query, "prefix"),
        ..Default::default()
    })
}

/// ListObjectsV2's input, read from the query as s3s reads it.
fn input(bucket: &str, query: &[(String, String)]) -> Result<dto::ListObjectsV2Input> {
    let get = |name: &str| get(query, name);
    let max_keys = max_keys(query)?;
    Ok(dto::ListObjectsV2Input {
        bucket: bucket.to_string(),
        continuation_token: get("continuation-token"),
        delimiter: get("delimiter"),
        encoding_type: get("encoding-type").map(dto::EncodingType::from),
        fetch_owner: get("fetch-owner").map(|v| v == "true"),
        max_keys,
        prefix: get("prefix"),
        start_after: get("start-after"),
        ..Default::default()
    })
}

#[async_trait::async_trait]
impl S3Route for ListRoute {
    fn is_match(
        &self,
        method: &Method,
        uri: &Uri,
        _headers: &HeaderMap,
        extensions: &mut Extensions,
    ) -> bool {
        // Kept for `check_access` and `call`, so the query is scanned once.
        listing(method, uri).map(|v| extensions.insert(v)).is_some()
    }

    async fn check_access(&self, req: &mut S3Request<Body>) -> S3Result<()> {
        let version = version_of(req);
        self.access.check_request(
            version.op(),
            &auth::Request {
                method: &req.method,
                uri: &req.uri,
                headers: &req.headers,
                credentials: req.credentials.as_ref(),
                bucket: bucket_of(&req.uri),
                key: None,
            },
        )?;
        Ok(())
    }

    async fn call(&self, req: S3Request<Body>) -> S3Result<S3Response<Body>> {
        let version = version_of(&req);
        self.s3.metrics.served(version.op());
        let t0 = Instant::now();
        let bucket = bucket_of(&req.uri).ok_or_else(|| Error::NoSuchBucket {
            bucket: req.uri.path().to_string(),
        })?;
        let query = query_pairs(&req.uri);
        let credentials = req.credentials.as_ref();
        let listed = match version {
            Version::V2 => {
                let input = input(bucket, &query)?;
                self.s3.list_v2(credentials, &input).await.map(|p| {
                    let contents = self.rendered.contents(&p.table, p.files, &p.page, p.encode);
                    render(&p.out, &contents)
                })
            }
            Version::V1 => {
                let input = input_v1(bucket, &query)?;
                self.s3.list_v1(credentials, &input).await.map(|p: V1Page| {
                    let contents = self.rendered.contents(&p.table, p.files, &p.page, p.encode);
                    render_v1(&p.out, &contents)
                })
            }
        };
        let body = match listed {
            Ok(body) => body,
            Err(e) => {
                if matches!(e, Error::NoSuchBucket { .. }) {
                    self.rendered.retain(|t| self.s3.catalog.knows(t));
                }
                return Err(e.into());
            }
        };
        let mut res = S3Response::new(Body::from(body));
        res.headers.insert(
            axum::http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/xml"),
        );
        self.s3
            .metrics
            .list_seconds
            .observe(t0.elapsed().as_secs_f64());
        Ok(res)
    }
}

#[cfg(test)]
mod tests;
