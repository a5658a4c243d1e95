//! Request bodies: decompressed (gzip, zstd) within the size limit, and their format from
//! `Content-Type` (or from the content when the type says nothing more than JSON or binary).

use std::io::Read;

use axum::http::HeaderMap;
use bytes::Bytes;
use neve_core::write::input::InputFormat;

use crate::error::{Error, Result};

/// The format a `Content-Type` names; `None` means "look at the content".
pub fn format(headers: &HeaderMap) -> Result<Option<InputFormat>> {
    let Some(ct) = headers.get(axum::http::header::CONTENT_TYPE) else {
        return Ok(None);
    };
    let ct = ct.to_str().unwrap_or("").to_ascii_lowercase();
    let essence = ct.split(';').next().unwrap_or("").trim();
    Ok(match essence {
        "application/x-ndjson"
        | "application/ndjson"
        | "application/jsonl"
        | "application/x-jsonlines"
        | "application/jsonlines" => Some(InputFormat::Ndjson),
        // An array of objects, or objects one per line: the content tells.
        "application/json" | "" | "application/octet-stream" => None,
        "text/csv" => Some(InputFormat::Csv),
        "application/vnd.apache.arrow.stream" | "application/vnd.apache.arrow.file" => {
            Some(InputFormat::Arrow)
        }
        "application/vnd.apache.parquet" | "application/x-parquet" | "application/parquet" => {
            Some(InputFormat::Parquet)
        }
        _ => {
            return Err(Error::UnsupportedMediaType {
                content_type: ct.clone(),
            })
        }
    })
}

/// The body decompressed per `Content-Encoding`; refused over `limit` bytes either way (a
/// small gzip body must not unpack into gigabytes).
pub fn decode(headers: &HeaderMap, body: Bytes, limit: u64) -> Result<Bytes> {
    let encoding = headers
        .get(axum::http::header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("identity")
        .trim()
        .to_ascii_lowercase();
    let too_large = || Error::BodyTooLarge { limit };
    if body.len() as u64 > limit {
        return Err(too_large());
    }
    let reader: Box<dyn Read> = match encoding.as_str() {
        "identity" | "" => return Ok(body),
        "gzip" | "x-gzip" => Box::new(flate2::read::MultiGzDecoder::new(std::io::Cursor::new(
            body,
        ))),
        "zstd" => Box::new(
            zstd::stream::read::Decoder::new(std::io::Cursor::new(body)).map_err(|e| {
                Error::BadRequest {
                    reason: format!("zstd body: {e}"),
                }
            })?,
        ),
        other => {
            return Err(Error::BadRequest {
                reason: format!("unsupported Content-Encoding '{other}': use gzip or zstd"),
            })
        }
    };
    let mut out = Vec::new();
    reader
        .take(limit + 1)
        .read_to_end(&mut out)
        .map_err(|e| Error::BadRequest {
            reason: format!("cannot decompress the body ({encoding}): {e}"),
        })?;
    if out.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn bodies_decompress_within_the_limit() {
        let text = b"{\"a\": 1}\n".repeat(1000);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&text).unwrap();
        let gz = Bytes::from(gz.finish().unwrap());
        let h = headers(&[("content-encoding", "gzip")]);
        assert_eq!(
            decode(&h, gz.clone(), 1 << 20).unwrap(),
            Bytes::from(text.clone())
        );
        assert!(matches!(
            decode(&h, gz, 100),
            Err(Error::BodyTooLarge { limit: 100 })
        ));
        let zs = Bytes::from(zstd::encode_all(&text[..], 1).unwrap());
        let h = headers(&[("content-encoding", "zstd")]);
        assert_eq!(decode(&h, zs, 1 << 20).unwrap().len(), text.len());
        let h = headers(&[("content-encoding", "br")]);
        assert!(matches!(
            decode(&h, Bytes::new(), 10),
            Err(Error::BadRequest { .. })
        ));
        assert_eq!(
            format(&headers(&[("content-type", "text/csv; charset=utf-8")])).unwrap(),
            Some(InputFormat::Csv)
        );
        assert!(format(&headers(&[("content-type", "image/png")])).is_err());
    }
}
