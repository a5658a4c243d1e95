//! Who may read what. s3s checks the SigV4 signature (header or presigned URL, clock skew at
//! most 15 minutes) against the secret [`Keys`] gives it; [`Access`] then refuses, before any
//! operation runs, everything the proxy does not serve: anonymous and SigV2 requests,
//! signatures that leave `Host` unsigned, presigned URLs valid for over 7 days, writes, buckets
//! the key may not read, and keys that try to leave their bucket. The bucket and key it checks
//! are the ones the operation then uses (decoded once, by s3s, before both).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::{S3Auth, SecretKey};
use s3s::{s3_error, S3Result};

use crate::buckets;
use crate::config::ProxyConfig;
use crate::error::{Error, Result};
use crate::metrics::Metrics;

/// Longest validity of a presigned URL, as in AWS.
pub const MAX_PRESIGNED_EXPIRY_SECS: u64 = 7 * 24 * 3600;

/// One access key: whose it is and what it may read.
pub struct KeyInfo {
    pub id: String,
    secret: String,
    /// The tenant's folder relative to the warehouse; empty for the whole warehouse.
    pub prefix: String,
    /// Bucket names (without pins) it may read; `None`: all of the tenant's.
    buckets: Option<HashSet<String>>,
}

/// Never the secret: keys printed with `{:?}` in a log must not carry it.
impl std::fmt::Debug for KeyInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyInfo")
            .field("id", &self.id)
            .field("secret", &"<redacted>")
            .field("prefix", &self.prefix)
            .field("buckets", &self.buckets)
            .finish()
    }
}

impl KeyInfo {
    pub fn secret(&self) -> &str {
        &self.secret
    }

    pub fn may_read(&self, bucket_base: &str) -> bool {
        self.buckets
            .as_ref()
            .is_none_or(|b| b.contains(bucket_base))
    }

    /// A table's folder relative to the warehouse.
    pub fn table_path(&self, table: &str) -> String {
        if self.prefix.is_empty() {
            table.to_string()
        } else {
            format!("{}/{table}", self.prefix)
        }
    }
}

/// The access keys, by id: replaced whole when the config file is read again (SIGHUP), so a
/// request sees the keys before or after, never a mix.
#[derive(Debug, Default)]
pub struct Keys {
    by_id: std::sync::RwLock<Arc<HashMap<String, Arc<KeyInfo>>>>,
}

impl Keys {
    /// Puts the keys of `config` in force for requests from now on.
    pub fn replace(&self, config: &ProxyConfig) -> Result<usize> {
        let new = Self::new(config)?.by_id.into_inner().expect("keys");
        let n = new.len();
        *self.by_id.write().expect("keys") = new;
        Ok(n)
    }

    fn current(&self) -> Arc<HashMap<String, Arc<KeyInfo>>> {
        self.by_id.read().expect("keys").clone()
    }

    pub fn new(config: &ProxyConfig) -> Result<Self> {
        let mut by_id = HashMap::new();
        let mut add = |k: &crate::config::AccessKeyConfig, prefix: &str| -> Result<()> {
            let buckets = k
                .buckets
                .as_ref()
                .filter(|b| !b.iter().any(|n| n == "*"))
                .map(|b| b.iter().cloned().collect());
            by_id.insert(
                k.id.clone(),
                Arc::new(KeyInfo {
                    id: k.id.clone(),
                    secret: k.resolve_secret()?,
                    prefix: prefix.to_string(),
                    buckets,
                }),
            );
            Ok(())
        };
        if let Some(k) = &config.single_key {
            add(k, "")?;
        }
        for t in &config.tenants {
            for k in &t.access_keys {
                add(k, t.prefix.trim_matches('/'))?;
            }
        }
        Ok(Self {
            by_id: std::sync::RwLock::new(Arc::new(by_id)),
        })
    }

    pub fn get(&self, id: &str) -> Option<Arc<KeyInfo>> {
        self.current().get(id).cloned()
    }

    /// The key a verified request was signed with.
    pub fn caller(&self, credentials: Option<&s3s::auth::Credentials>) -> Result<Arc<KeyInfo>> {
        credentials
            .and_then(|c| self.get(&c.access_key))
            .ok_or_else(|| Error::AccessDenied {
                reason: "the request is not signed with a known key".into(),
            })
    }
}

/// Gives s3s the secret to check a signature with.
pub struct KeyStore(pub Arc<Keys>);

#[async_trait::async_trait]
impl S3Auth for KeyStore {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        match self.0.get(access_key) {
            Some(k) => Ok(SecretKey::from(k.secret.as_str())),
            None => Err(s3_error!(
                InvalidAccessKeyId,
                "The access key id you provided does not exist."
            )),
        }
    }
}

/// The policy checks, run on every request after its signature was checked.
#[derive(Clone)]
pub struct Access {
    pub keys: Arc<Keys>,
    pub metrics: Arc<Metrics>,
}

#[async_trait::async_trait]
impl S3Access for Access {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        let op = cx.s3_op().name().to_string();
        let result = self.decide(cx);
        if let Err(e) = &result {
            self.metrics.refused(&op);
            tracing::info!(op, path = cx.uri().path(), error = %e, "refused");
        }
        result.map_err(Into::into)
    }
}

impl Access {
    fn decide(&self, cx: &S3AccessContext<'_>) -> Result<()> {
        let path = cx.s3_path();
        self.decide_request(&Request {
            method: cx.method(),
            uri: cx.uri(),
            headers: cx.headers(),
            credentials: cx.credentials(),
            bucket: path.get_bucket_name(),
            key: path.get_object_key(),
        })
    }

    /// [`S3Access::check`] for a request s3s hands to a custom route (its signature checked
    /// already), `op` naming it in the metrics and the log.
    pub(crate) fn check_request(&self, op: &str, req: &Request<'_>) -> Result<()> {
        let result = self.decide_request(req);
        if let Err(e) = &result {
            self.metrics.refused(op);
            // The path only: a presigned URL's query holds its signature.
            tracing::info!(op, path = req.uri.path(), error = %e, "refused");
        }
        result
    }

    fn decide_request(&self, req: &Request<'_>) -> Result<()> {
        let deny = |reason: &str| {
            Err(Error::AccessDenied {
                reason: reason.to_string(),
            })
        };
        let headers = req.headers;
        let query = req.uri.query().unwrap_or("");
        let params: Vec<(String, String)> = url_pairs(query);
        let param = |name: &str| {
            params
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        let authorization = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if authorization.starts_with("AWS ") || param("Signature").is_some() {
            return deny("Signature Version 2 is not accepted; sign with SigV4");
        }
        let Some(creds) = req.credentials else {
            return deny("anonymous requests are not accepted; sign with SigV4");
        };
        let Some(key) = self.keys.get(&creds.access_key) else {
            return deny("unknown access key");
        };
        // Query parameter names are case-sensitive, and s3s reads `X-Amz-*` as spelled so.
        let exact = |name: &str| {
            params
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        // The signed headers of the signature s3s checks: the query's only for a presigned URL
        // (`X-Amz-Signature` present, as s3s decides), else the Authorization header's.
        let signed_headers = match exact("X-Amz-Signature") {
            Some(_) => exact("X-Amz-SignedHeaders"),
            None => header_signed_headers(authorization),
        };
        if !signed_headers.is_some_and(|s| s.split(';').any(|h| h == "host")) {
            return deny("the signature must cover the Host header");
        }
        // Every spelling is held to the cap: which one a signer used is not for the policy to
        // guess.
        for (_, expires) in params
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("X-Amz-Expires"))
        {
            match expires.parse::<u64>() {
                Ok(s) if s <= MAX_PRESIGNED_EXPIRY_SECS => {}
                _ => return deny("a presigned URL may be valid for at most 7 days"),
            }
        }
        if req.method != axum::http::Method::GET && req.method != axum::http::Method::HEAD {
            return deny("the proxy is read-only");
        }
        // A bucket is one snapshot of immutable files: an object has no other versions and no
        // parts, and serving the whole object to a client that asked for one part would give
        // it the file as many times as it has parts.
        if params.iter().any(|(k, v)| k == "versionId" && v != "null") {
            return Err(Error::InvalidArgument {
                reason: "versionId: objects here have one version; a table's versions are buckets (<bucket>--v<N>)".into(),
            });
        }
        if params.iter().any(|(k, _)| k == "partNumber") {
            return Err(Error::InvalidArgument {
                reason: "partNumber: objects here have no parts; read ranges with Range".into(),
            });
        }
        if headers
            .get("x-amz-content-sha256")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("STREAMING-"))
        {
            return deny("streaming payloads are not accepted by a read-only proxy");
        }
        if let Some(bucket) = req.bucket {
            let Some(b) = buckets::parse(bucket) else {
                return Err(Error::NoSuchBucket {
                    bucket: bucket.to_string(),
                });
            };
            if !key.may_read(&b.base) {
                return Err(Error::AccessDenied {
                    reason: format!("key '{}' may not read bucket '{}'", key.id, b.base),
                });
            }
        }
        if let Some(k) = req.key {
            buckets::check_key(k)?;
        }
        Ok(())
    }
}

/// What the policy looks at in a request whose signature s3s has checked: the bucket and key
/// are the ones the operation then uses, decoded once.
pub(crate) struct Request<'a> {
    pub method: &'a axum::http::Method,
    pub uri: &'a axum::http::Uri,
    pub headers: &'a axum::http::HeaderMap,
    pub credentials: Option<&'a s3s::auth::Credentials>,
    pub bucket: Option<&'a str>,
    pub key: Option<&'a str>,
}

/// The query string's pairs, decoded.
/// `SignedHeaders` of a SigV4 Authorization header, read as s3s reads it: the credential's
/// five `/`-separated parts may hold commas (`…/x,SignedHeaders=host;y/s3/aws4_request`), so
/// the list is the one after `aws4_request,`, not the first `SignedHeaders=` in the text.
fn header_signed_headers(authorization: &str) -> Option<&str> {
    let (_algorithm, rest) = authorization.split_once(|c: char| c.is_ascii_whitespace())?;
    let mut credential = rest.trim_start().strip_prefix("Credential=")?;
    for _ in 0..4 {
        credential = &credential[credential.find('/')? + 1..];
    }
    let rest = credential.strip_prefix("aws4_request,")?.trim_start();
    let rest = rest.strip_prefix("SignedHeaders=")?;
    Some(&rest[..rest.find(',')?])
}

pub(crate) fn url_pairs(query: &str) -> Vec<(String, String)> {
    url::form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::header_signed_headers;

    #[test]
    fn signed_headers_are_the_ones_after_the_credential() {
        let h = "AWS4-HMAC-SHA256 Credential=AK/20261206/us-east-1/s3/aws4_request, \
                 SignedHeaders=host;x-amz-date, Signature=abc";
        assert_eq!(header_signed_headers(h), Some("host;x-amz-date"));
        // A region with a comma cannot lend its text as the list.
        let h = "AWS4-HMAC-SHA256 Credential=AK/20261206/x,SignedHeaders=host;y/s3/aws4_request,\
                 SignedHeaders=x-amz-date,Signature=abc";
        assert_eq!(header_signed_headers(h), Some("x-amz-date"));
        for bad in [
            "",
            "AWS4-HMAC-SHA256",
            "AWS4-HMAC-SHA256 SignedHeaders=host, Signature=abc",
            "AWS4-HMAC-SHA256 Credential=AK/20261206/us-east-1/s3/aws4_request, Signature=abc",
            "AWS4-HMAC-SHA256 Credential=AK/20261206/us-east-1/aws4_request,SignedHeaders=host,Signature=a",
        ] {
            assert_eq!(header_signed_headers(bad), None, "{bad}");
        }
    }
}
