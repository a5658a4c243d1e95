//! ListObjects over a snapshot: the alive files under `_data/`, keyed relative to it, with S3's
//! prefix, delimiter, start-after and max-keys rules, and continuation tokens that name a
//! position in one snapshot and are signed, so a client cannot forge one.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use base64::Engine as _;
use hmac::{KeyInit, Mac};
use neve_core::log::AddFile;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Where the files of a table live, relative to its root; keys are relative to this.
pub const DATA: &str = "_data/";

/// S3's ceiling on one page.
pub const MAX_KEYS: usize = 1000;

/// One listed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub key: String,
    pub size: u64,
    /// ms since the epoch.
    pub modified: i64,
}

/// Where a page starts: after `after`, and after every key under it when it was a common
/// prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resume {
    #[serde(rename = "k")]
    pub after: String,
    #[serde(rename = "p", default)]
    pub prefix: bool,
}

impl Resume {
    /// Where a ListObjects (v1) page resumes after `marker`. A client continues a truncated
    /// page from its `NextMarker`, which is the page's last key or common prefix; as in S3, a
    /// key rolled up into a common prefix at or before the marker is not listed again, so a
    /// marker under (or equal to) a common prefix resumes after everything under it.
    pub fn after_marker(marker: String, prefix: &str, delimiter: Option<&str>) -> Self {
        let rolled = delimiter.filter(|d| !d.is_empty()).and_then(|d| {
            marker
                .strip_prefix(prefix)
                .and_then(|rest| rest.find(d))
                .map(|i| prefix.len() + i + d.len())
        });
        match rolled {
            Some(end) => Resume {
                after: marker[..end].to_string(),
                prefix: true,
            },
            None => Resume {
                after: marker,
                prefix: false,
            },
        }
    }
}

/// A page of a listing.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Page {
    pub contents: Vec<Listed>,
    pub common_prefixes: Vec<String>,
    /// Set when the listing goes on: the last entry of this page.
    pub next: Option<Resume>,
}

/// List `files` (a snapshot's alive files by path) under `prefix`.
pub fn list(
    files: &BTreeMap<String, Arc<AddFile>>,
    prefix: &str,
    delimiter: Option<&str>,
    start: Option<&Resume>,
    max_keys: usize,
) -> Page {
    let mut page = Page::default();
    let max_keys = max_keys.min(MAX_KEYS);
    if max_keys == 0 {
        return page;
    }
    let delimiter = delimiter.filter(|d| !d.is_empty());
    let lower = match start {
        Some(r) if r.after.as_str() >= prefix => Bound::Excluded(format!("{DATA}{}", r.after)),
        _ => Bound::Included(format!("{DATA}{prefix}")),
    };
    let mut last_prefix: Option<String> = None;
    let mut emitted = 0usize;
    let mut last: Option<Resume> = None;
    for (path, file) in files.range::<String, _>((lower, Bound::Unbounded)) {
        let Some(key) = path.strip_prefix(DATA) else {
            break;
        };
        if !key.starts_with(prefix) {
            break;
        }
        if let Some(r) = start.filter(|r| r.prefix) {
            if key.starts_with(r.after.as_str()) {
                continue;
            }
        }
        let common = delimiter.and_then(|d| {
            key[prefix.len()..]
                .find(d)
                .map(|i| &key[..prefix.len() + i + d.len()])
        });
        if let Some(cp) = common {
            if last_prefix.as_deref() == Some(cp) {
                continue;
            }
        }
        if emitted == max_keys {
            // There is more: the page ends at its last entry.
            page.next = last.take();
            break;
        }
        emitted += 1;
        match common {
            Some(cp) => {
                last_prefix = Some(cp.to_string());
                page.common_prefixes.push(cp.to_string());
                last = Some(Resume {
                    after: cp.to_string(),
                    prefix: true,
                });
            }
            None => {
                page.contents.push(Listed {
                    key: key.to_string(),
                    size: file.size,
                    modified: file.modification_time,
                });
                last = Some(Resume {
                    after: key.to_string(),
                    prefix: false,
                });
            }
        }
    }
    page
}

#[derive(Serialize, Deserialize)]
struct TokenBody {
    /// The bucket (with its pin) the listing is of.
    b: String,
    /// The snapshot version every page of the listing shows.
    v: u64,
    #[serde(flatten)]
    at: Resume,
}

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

fn mac(secret: &str, body: &[u8]) -> HmacSha256 {
    let mut m = <HmacSha256 as KeyInit>::new_from_slice(secret.as_bytes())
        .expect("HMAC takes keys of any length");
    m.update(b"neve-proxy continuation token\0");
    m.update(body);
    m
}

/// A continuation token: the position, signed with the caller's secret key, so only the key
/// that listed can continue, and only inside what it listed.
pub fn encode_token(secret: &str, bucket: &str, version: u64, at: &Resume) -> String {
    let body = serde_json::to_vec(&TokenBody {
        b: bucket.to_string(),
        v: version,
        at: at.clone(),
    })
    .expect("a token serializes");
    let tag = mac(secret, &body).finalize().into_bytes();
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    format!("{}.{}", b64.encode(&body), b64.encode(tag))
}

/// Check and read a token given back by a client: the version and position, if `secret`
/// signed it for `bucket`.
pub fn decode_token(secret: &str, bucket: &str, token: &str) -> Result<(u64, Resume)> {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let (body, tag) = token.split_once('.').ok_or(Error::InvalidToken)?;
    let body = b64.decode(body).map_err(|_| Error::InvalidToken)?;
    let tag = b64.decode(tag).map_err(|_| Error::InvalidToken)?;
    mac(secret, &body)
        .verify_slice(&tag)
        .map_err(|_| Error::InvalidToken)?;
    let t: TokenBody = serde_json::from_slice(&body).map_err(|_| Error::InvalidToken)?;
    if t.b != bucket {
        return Err(Error::InvalidToken);
    }
    Ok((t.v, t.at))
}

pub(crate) mod route;

#[cfg(test)]
mod tests;
