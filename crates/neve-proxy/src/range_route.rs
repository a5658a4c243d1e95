//! Reads whose `Range` header s3s cannot parse, answered as S3 answers them.
//!
//! S3 (and MinIO, the S3 at hand in the tests) ignores a `Range` it does not understand (a
//! list of ranges, a typo, a missing `bytes=`) and serves the whole object with 200, as RFC
//! 9110 lets a server do; only a range whose first byte is past its last is `InvalidRange`
//! (416). s3s refuses all of them with 400 while deserializing the operation, after it has
//! checked the signature. The header is signed, so it cannot be dropped before s3s sees it:
//! these requests go through this custom route instead, which s3s runs after the signature
//! check, with the same policy ([`crate::auth::Access`]) and the same operations
//! ([`NeveS3::get_object`], [`NeveS3::head_object`]) on the bucket and key s3s's own parser
//! reads from the path.

use axum::http::{header, Extensions, HeaderMap, HeaderValue, Method, Uri};
use s3s::dto::{self, TimestampFormat};
use s3s::{Body, S3Request, S3Response, S3Result, S3};

use crate::auth::{self, Access};
use crate::s3::NeveS3;

/// A GET or HEAD of an object whose `Range` s3s cannot parse: the object, decoded from the
/// path once, as s3s decodes it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UnparsedRange {
    bucket: String,
    key: String,
    /// `bytes=B-A` with B > A: refused as S3 refuses it, not ignored.
    backwards: bool,
}

impl UnparsedRange {
    /// `Some` for a request this route answers; anything else is left to s3s.
    pub(crate) fn of(method: &Method, uri: &Uri, headers: &HeaderMap) -> Option<Self> {
        if method != Method::GET && method != Method::HEAD {
            return None;
        }
        let value = headers.get(header::RANGE)?;
        let text = value.to_str().ok();
        // s3s reads `bytes=-` as a suffix of no bytes (416); S3 ignores it.
        if text.is_some_and(|t| t != "bytes=-" && dto::Range::parse(t).is_ok()) {
            return None;
        }
        // Response header overrides are s3s's to apply: such a request keeps its 400.
        if uri.query().is_some_and(|q| {
            auth::url_pairs(q)
                .iter()
                .any(|(k, _)| k.starts_with("response-"))
        }) {
            return None;
        }
        let decoded = urlencoding::decode(uri.path()).ok()?;
        let path = s3s::path::parse_path_style_with_validation_and_normalization(
            &decoded,
            &crate::TableBucketNames,
            false,
        )
        .ok()?;
        let (bucket, key) = path.as_object()?;
        Some(Self {
            bucket: bucket.to_string(),
            key: key.to_string(),
            backwards: text.is_some_and(backwards),
        })
    }
}

/// `bytes=B-A`, both plain decimal numbers, B > A: the one malformed range S3 refuses.
fn backwards(range: &str) -> bool {
    let number = |s: &str| {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<i64>().ok())
            .flatten()
    };
    range
        .strip_prefix("bytes=")
        .and_then(|r| r.split_once('-'))
        .and_then(|(b, a)| Some((number(b)?, number(a)?)))
        .is_some_and(|(b, a)| b > a)
}

/// The route; [`crate::listing::route::ListRoute`] is the other one s3s runs.
pub(crate) struct RangeRoute {
    pub s3: NeveS3,
    pub access: Access,
}

impl RangeRoute {
    pub(crate) fn is_match(
        &self,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
        extensions: &mut Extensions,
    ) -> bool {
        UnparsedRange::of(method, uri, headers)
            .map(|u| extensions.insert(u))
            .is_some()
    }

    fn op(method: &Method) -> &'static str {
        if method == Method::HEAD {
            "HeadObject"
        } else {
            "GetObject"
        }
    }

    fn unparsed(req: &S3Request<Body>) -> S3Result<UnparsedRange> {
        req.extensions
            .get::<UnparsedRange>()
            .cloned()
            .or_else(|| UnparsedRange::of(&req.method, &req.uri, &req.headers))
            .ok_or_else(|| s3s::s3_error!(InternalError, "not a read with a range to ignore"))
    }

    pub(crate) async fn check_access(&self, req: &mut S3Request<Body>) -> S3Result<()> {
        let u = Self::unparsed(req)?;
        self.access.check_request(
            Self::op(&req.method),
            &auth::Request {
                method: &req.method,
                uri: &req.uri,
                headers: &req.headers,
                credentials: req.credentials.as_ref(),
                bucket: Some(&u.bucket),
                key: Some(&u.key),
            },
        )?;
        Ok(())
    }

    pub(crate) async fn call(&self, req: S3Request<Body>) -> S3Result<S3Response<Body>> {
        let u = Self::unparsed(&req)?;
        let since = |name| date_header(&req.headers, name);
        let (if_modified_since, if_unmodified_since) = (
            since(header::IF_MODIFIED_SINCE)?,
            since(header::IF_UNMODIFIED_SINCE)?,
        );
        if u.backwards {
            let size = self
                .s3
                .object_size(req.credentials.as_ref(), &u.bucket, &u.key)
                .await?;
            return Err(crate::s3::invalid_range(size));
        }
        if req.method == Method::HEAD {
            let out = self
                .s3
                .head_object(req.map_input(|_| dto::HeadObjectInput {
                    bucket: u.bucket,
                    key: u.key,
                    if_modified_since,
                    if_unmodified_since,
                    ..Default::default()
                }))
                .await?
                .output;
            return answer(
                out.accept_ranges,
                out.content_length,
                out.content_type,
                out.e_tag,
                out.last_modified,
                Body::empty(),
            );
        }
        let out = self
            .s3
            .get_object(req.map_input(|_| dto::GetObjectInput {
                bucket: u.bucket,
                key: u.key,
                if_modified_since,
                if_unmodified_since,
                ..Default::default()
            }))
            .await?
            .output;
        answer(
            out.accept_ranges,
            out.content_length,
            out.content_type,
            out.e_tag,
            out.last_modified,
            out.body.map(Body::from).unwrap_or_default(),
        )
    }
}

/// An HTTP date header, as s3s reads it for GetObject (`InvalidArgument` if it is not one).
fn date_header(headers: &HeaderMap, name: header::HeaderName) -> S3Result<Option<dto::Timestamp>> {
    let Some(v) = headers.get(&name) else {
        return Ok(None);
    };
    v.to_str()
        .ok()
        .and_then(|s| dto::Timestamp::parse(TimestampFormat::HttpDate, s).ok())
        .map(Some)
        .ok_or_else(|| s3s::s3_error!(InvalidArgument, "invalid header: {name}"))
}

/// A whole object's answer with the headers the operations set, written as s3s writes them
/// (a test compares them with s3s's answer to the same read without a range).
fn answer(
    accept_ranges: Option<String>,
    content_length: Option<i64>,
    content_type: Option<String>,
    e_tag: Option<dto::ETag>,
    last_modified: Option<dto::Timestamp>,
    body: Body,
) -> S3Result<S3Response<Body>> {
    let bad = |e: &dyn std::fmt::Display| s3s::s3_error!(InternalError, "answer header: {e}");
    let mut res = S3Response::new(body);
    let h = &mut res.headers;
    if let Some(v) = accept_ranges {
        h.insert(header::ACCEPT_RANGES, v.parse().map_err(|e| bad(&e))?);
    }
    if let Some(v) = content_length {
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(v));
    }
    if let Some(v) = content_type {
        h.insert(header::CONTENT_TYPE, v.parse().map_err(|e| bad(&e))?);
    }
    if let Some(v) = e_tag {
        h.insert(header::ETAG, v.to_http_header().map_err(|e| bad(&e))?);
    }
    if let Some(t) = last_modified {
        let mut buf = Vec::new();
        t.format(TimestampFormat::HttpDate, &mut buf)
            .map_err(|e| bad(&e))?;
        h.insert(
            header::LAST_MODIFIED,
            HeaderValue::from_bytes(&buf).map_err(|e| bad(&e))?,
        );
    }
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(method: Method, path: &str, range: &[u8]) -> Option<UnparsedRange> {
        let mut headers = HeaderMap::new();
        headers.insert(header::RANGE, HeaderValue::from_bytes(range).unwrap());
        UnparsedRange::of(&method, &path.parse().unwrap(), &headers)
    }

    #[test]
    fn only_reads_of_objects_with_a_range_s3s_refuses_take_the_route() {
        let path = "/taxi/d%3D2021-08/part-1.parquet";
        let want = |backwards| {
            Some(UnparsedRange {
                bucket: "taxi".into(),
                key: "d=2021-08/part-1.parquet".into(),
                backwards,
            })
        };
        for r in [
            &b"bytes=0-1,3-4"[..],
            b"bytes=abc",
            b"bytes=5",
            b"bites=0-9",
            b"bytes=-",
            b"bytes=+1-5",
            b"",
            b"bytes=\xff",
        ] {
            assert_eq!(of(Method::GET, path, r), want(false), "{r:?}");
            assert_eq!(of(Method::HEAD, path, r), want(false), "{r:?}");
        }
        assert_eq!(of(Method::GET, path, b"bytes=10-5"), want(true));
        // Ranges s3s reads, other methods, buckets, overrides and bad paths stay with s3s.
        for r in [&b"bytes=0-9"[..], b"bytes=-8", b"bytes=5-"] {
            assert_eq!(of(Method::GET, path, r), None, "{r:?}");
        }
        assert_eq!(of(Method::PUT, path, b"bytes=abc"), None);
        assert_eq!(of(Method::GET, "/taxi", b"bytes=abc"), None);
        assert_eq!(of(Method::GET, "/taxi/", b"bytes=abc"), None);
        assert_eq!(
            of(
                Method::GET,
                "/taxi/a.parquet?response-content-type=x",
                b"bytes=abc"
            ),
            None
        );
        assert_eq!(of(Method::GET, "/taxi/%ff", b"bytes=abc"), None);
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        assert_eq!(
            UnparsedRange::of(&Method::GET, &path.parse().unwrap(), &headers),
            None
        );
    }

    #[test]
    fn only_a_plain_backwards_range_is_refused() {
        assert!(backwards("bytes=10-5"));
        assert!(backwards("bytes=0010-0005"));
        for r in [
            "bytes=5-10",
            "bytes=5-5",
            "bytes=+10-5",
            "bytes=10-+5",
            "bytes=10-5,1-2",
            "bytes=99999999999999999999-1",
            "bytes=a-1",
            "10-5",
        ] {
            assert!(!backwards(r), "{r}");
        }
    }
}
