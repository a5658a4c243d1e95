//! Where a table lives: parse a table address into an object store and a root path.
//!
//! Addresses: `./dir`, `/abs/dir`, `file:///abs/dir`, `s3://bucket/prefix/table`, and
//! `memory://name` (in-process, for tests). S3 settings come from the usual `AWS_*`
//! environment variables; `AWS_ENDPOINT_URL` points at MinIO, and plain http is allowed
//! for loopback endpoints (or when `AWS_ALLOW_HTTP=true`).

use std::path::{Path as StdPath, PathBuf};
use std::sync::Arc;

use object_store::aws::AmazonS3Builder;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ClientOptions, ObjectStore, RetryConfig};

use crate::error::{Error, Result};

mod durable;
mod local;
mod shared;
pub(crate) use durable::stale_staging;
pub use local::LocalStore;
pub use shared::share_s3_clients;
use shared::{sharing, store_key, S3_STORES};

/// The HTTP client for an endpoint reached over plain http (MinIO on loopback or inside a
/// cluster). object_store's own client loads the system's root certificates, every file of
/// `/etc/ssl/certs`, each time a store is built: about 5 ms, on every command, for a TLS that
/// plain http never uses. Otherwise the client follows the store's `ClientOptions` (timeouts,
/// proxy, pool) and object_store's fixed choices: HTTP/1, no response compression (it breaks
/// `Content-Length`).
#[derive(Debug)]
struct PlainHttp;

impl object_store::client::HttpConnector for PlainHttp {
    fn connect(
        &self,
        options: &ClientOptions,
    ) -> object_store::Result<object_store::client::HttpClient> {
        use object_store::ClientConfigKey as K;
        let err = |e: Box<dyn std::error::Error + Send + Sync>| object_store::Error::Generic {
            store: "S3",
            source: e,
        };
        let get = |k: K| options.get_config_value(&k);
        let duration = |k: K| -> object_store::Result<Option<std::time::Duration>> {
            get(k)
                .map(|v| humantime::parse_duration(&v).map_err(|e| err(Box::new(e))))
                .transpose()
        };
        let mut b = reqwest::Client::builder()
            .user_agent(
                get(K::UserAgent)
                    .unwrap_or_else(|| concat!("neve/", env!("CARGO_PKG_VERSION")).into()),
            )
            .tls_built_in_root_certs(false)
            .http1_only()
            .no_gzip()
            .no_brotli()
            .no_zstd()
            .no_deflate();
        if let Some(t) = duration(K::Timeout)? {
            b = b.timeout(t);
        }
        if let Some(t) = duration(K::ConnectTimeout)? {
            b = b.connect_timeout(t);
        }
        if let Some(t) = duration(K::PoolIdleTimeout)? {
            b = b.pool_idle_timeout(t);
        }
        if let Some(n) = get(K::PoolMaxIdlePerHost) {
            b = b.pool_max_idle_per_host(n.parse().map_err(|e| err(Box::new(e)))?);
        }
        if let Some(url) = get(K::ProxyUrl) {
            let mut proxy = reqwest::Proxy::all(&url).map_err(|e| err(Box::new(e)))?;
            if let Some(excludes) = get(K::ProxyExcludes) {
                proxy = proxy.no_proxy(reqwest::NoProxy::from_string(&excludes));
            }
            b = b.proxy(proxy);
        }
        let client = b.build().map_err(|e| err(Box::new(e)))?;
        Ok(object_store::client::HttpClient::new(client))
    }
}

/// Variables the HTTP client reads by itself (trusted CAs, proxies): part of what a cached
/// store was built from.
const CLIENT_ENV: &[&str] = &[
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
];

/// What kind of store a table lives on, with what external readers need to address it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreKind {
    /// A local directory (absolute path).
    Local { dir: PathBuf },
    /// An S3 bucket; `endpoint` is set for MinIO and other S3-compatible stores.
    S3 {
        bucket: String,
        prefix: String,
        endpoint: Option<String>,
        region: String,
    },
    /// An in-process store, lost at exit.
    Memory,
}

/// A table's store and root.
#[derive(Debug, Clone)]
pub struct TableLocation {
    pub store: Arc<dyn ObjectStore>,
    /// Root of the table inside the store; `_log/` and `_data/` live under it.
    pub root: Path,
    pub kind: StoreKind,
    /// The address as the user gave it, for messages.
    pub display: String,
}

/// Store settings given with an address (`storage_options` in Python), over the `AWS_*`
/// environment: object_store's S3 keys (`aws_access_key_id`, `access_key_id`,
/// `aws_secret_access_key`, `aws_session_token`, `region`, `allow_http`, ...) and
/// `endpoint_url` / `aws_endpoint_url` as in the AWS SDKs.
pub type StorageOptions = std::collections::BTreeMap<String, String>;

impl TableLocation {
    /// Parse a table address. Local directories are not created here.
    pub fn parse(address: &str) -> Result<Self> {
        Self::parse_with(address, &StorageOptions::new())
    }

    /// Parse a table address with store settings. Unknown keys are refused by name; S3 keys
    /// given for a local folder are accepted and unused, so one set of options can serve
    /// both.
    pub fn parse_with(address: &str, options: &StorageOptions) -> Result<Self> {
        Self::parse_sharing(address, options, sharing())
    }

    /// [`Self::parse_with`], an S3 table's client shared with tables opened before on the
    /// same settings when `share` (see [`share_s3_clients`]).
    fn parse_sharing(address: &str, options: &StorageOptions, share: bool) -> Result<Self> {
        let invalid = |reason: &str| Error::InvalidLocation {
            location: address.to_string(),
            reason: reason.to_string(),
        };
        if address.trim().is_empty() {
            return Err(invalid("empty address"));
        }
        if let Some(rest) = address.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(invalid("missing bucket name"));
            }
            let prefix = prefix.trim_matches('/').to_string();
            return Self::s3(address, bucket, &prefix, options, share);
        }
        for key in options.keys() {
            s3_option(address, key)?;
        }
        if let Some(name) = address.strip_prefix("memory://") {
            return Ok(Self::memory(name));
        }
        let path = if address.starts_with("file:/") {
            // A URL (RFC 8089): percent-escapes decoded, as every other reader of it does.
            let url = url::Url::parse(address).map_err(|e| invalid(&format!("not a URL: {e}")))?;
            if url.query().is_some() || url.fragment().is_some() {
                return Err(invalid("a file: URL names a folder: no '?' or '#'"));
            }
            if !matches!(url.host_str(), None | Some("") | Some("localhost")) {
                return Err(invalid(
                    "file: URLs must be absolute (file:///abs/dir), on this machine",
                ));
            }
            url.to_file_path()
                .map_err(|_| invalid("file: URLs must be absolute (file:///abs/dir)"))?
        } else if address.contains("://") {
            return Err(invalid(
                "unsupported scheme (use a path, file://, or s3://)",
            ));
        } else {
            PathBuf::from(address)
        };
        Self::local(address, &path)
    }

    /// A table in a local directory.
    pub fn local(display: &str, dir: &StdPath) -> Result<Self> {
        let abs = if dir.is_absolute() {
            dir.to_path_buf()
        } else {
            std::env::current_dir()
                .map_err(|source| Error::Io {
                    path: dir.to_path_buf(),
                    source,
                })?
                .join(dir)
        };
        let abs = normalize(&abs);
        if abs.is_file() {
            return Err(Error::InvalidLocation {
                location: display.to_string(),
                reason: "is a file; a table is a folder (holding _log/ and _data/)".into(),
            });
        }
        let root = Path::from_absolute_path(&abs).map_err(|e| Error::InvalidLocation {
            location: display.to_string(),
            reason: e.to_string(),
        })?;
        Ok(Self {
            store: local::shared().clone(),
            root,
            kind: StoreKind::Local { dir: abs },
            display: display.to_string(),
        })
    }

    /// Writes objects (keys relative to the root) that must not exist yet: `Some(length)`
    /// for each written, `None` for one already there (left as it was). On a local folder in
    /// one go (see [`LocalStore`]), elsewhere as concurrent create-only PUTs.
    pub(crate) async fn put_new(
        &self,
        objects: Vec<(String, bytes::Bytes)>,
    ) -> Result<Vec<Option<u64>>> {
        use object_store::{PutMode, PutOptions, PutPayload};
        let lengths: Vec<u64> = objects.iter().map(|(_, b)| b.len() as u64).collect();
        let local = local::shared();
        let results = if std::ptr::addr_eq(Arc::as_ptr(&self.store), Arc::as_ptr(local)) {
            let objects = objects
                .into_iter()
                .map(|(key, bytes)| (self.child(&key), PutPayload::from(bytes)))
                .collect();
            local.put_new_all(objects).await?
        } else {
            let puts = objects.into_iter().map(|(key, bytes)| async move {
                let path = self.child(&key);
                let opts = PutOptions::from(PutMode::Create);
                self.store
                    .put_opts(&path, bytes.into(), opts)
                    .await
                    .map(|_| ())
            });
            futures::future::join_all(puts).await
        };
        results
            .into_iter()
            .zip(lengths)
            .map(|(r, length)| match r {
                Ok(()) => Ok(Some(length)),
                Err(object_store::Error::AlreadyExists { .. }) => Ok(None),
                Err(e) => Err(e.into()),
            })
            .collect()
    }

    /// A fresh in-memory table (unit tests).
    pub fn memory(name: &str) -> Self {
        Self::with_store(Arc::new(InMemory::new()), name, StoreKind::Memory)
    }

    /// A table on a store built elsewhere (tests, embedding applications).
    pub fn with_store(store: Arc<dyn ObjectStore>, root: &str, kind: StoreKind) -> Self {
        Self {
            store,
            root: Path::from(root.trim_matches('/')),
            kind,
            display: root.to_string(),
        }
    }

    fn s3(
        display: &str,
        bucket: &str,
        prefix: &str,
        options: &StorageOptions,
        share: bool,
    ) -> Result<Self> {
        use object_store::aws::AmazonS3ConfigKey as K;
        let mut given: Vec<(K, &str)> = Vec::new();
        for (key, value) in options {
            given.push((s3_option(display, key)?, value.as_str()));
        }
        let option = |want: K| {
            given
                .iter()
                .rev()
                .find(|(k, _)| *k == want)
                .map(|(_, v)| v.to_string())
        };
        let endpoint = option(K::Endpoint)
            .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())
            .or_else(|| std::env::var("AWS_ENDPOINT").ok())
            .filter(|e| !e.is_empty());
        let region = option(K::Region)
            .or_else(|| std::env::var("AWS_REGION").ok())
            .or_else(|| std::env::var("AWS_DEFAULT_REGION").ok())
            .unwrap_or_else(|| "us-east-1".to_string());
        let allow_http = match option(K::Client(object_store::ClientConfigKey::AllowHttp))
            .or_else(|| {
                std::env::var("AWS_ALLOW_HTTP")
                    .ok()
                    .filter(|v| !v.is_empty())
            })
            .map(|v| v.to_ascii_lowercase())
            .as_deref()
        {
            None | Some("false") | Some("0") => false,
            Some("true") | Some("1") => true,
            Some(other) => {
                return Err(Error::InvalidLocation {
                    location: display.to_string(),
                    reason: format!(
                        "allow_http (or AWS_ALLOW_HTTP) is '{other}': use true or false"
                    ),
                })
            }
        } || endpoint.as_deref().is_some_and(is_loopback_http);
        check_s3(bucket, endpoint.as_deref(), &region).map_err(|reason| {
            Error::InvalidLocation {
                location: display.to_string(),
                reason,
            }
        })?;
        // The plain-http client below is neve's own, so it must apply `allow_http` itself:
        // credentials and data would otherwise cross the network unencrypted, unasked.
        if let Some(ep) = endpoint.as_deref().filter(|e| e.starts_with("http://")) {
            if !allow_http {
                return Err(Error::InvalidLocation {
                    location: display.to_string(),
                    reason: format!("the endpoint '{ep}' is plain http, which would send credentials and data unencrypted: use https, or set allow_http=true (AWS_ALLOW_HTTP=true) for a network you trust (loopback endpoints are allowed as they are)"),
                });
            }
        }
        // `AmazonS3Builder::from_env`, but an empty variable counts as unset, as in the AWS SDKs
        // (an empty endpoint would otherwise become the base of every request's URL).
        // The client's defaults come first, so that the environment's client settings
        // (AWS_ALLOW_INVALID_CERTIFICATES, AWS_PROXY_URL, AWS_TIMEOUT...) apply over them;
        // `allow_http` was decided above, from the environment too.
        let allow_http_key = K::Client(object_store::ClientConfigKey::AllowHttp);
        // What the store is built from: the AWS_ settings, and what the HTTP client reads
        // of the environment itself (the CAs it trusts, its proxies).
        let env: Vec<(String, String)> = {
            let mut env: Vec<(String, String)> = std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .filter(|(k, v)| {
                    !v.is_empty()
                        && (k.starts_with("AWS_")
                            || CLIENT_ENV.contains(&k.to_ascii_uppercase().as_str()))
                })
                .collect();
            env.sort();
            env
        };
        let kind = StoreKind::S3 {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
            endpoint: endpoint.clone(),
            region: region.clone(),
        };
        // Hashed only when clients are shared: the key is of no use otherwise.
        let key = share.then(|| {
            store_key(
                bucket,
                &region,
                endpoint.as_deref(),
                allow_http,
                &given,
                &env,
            )
        });
        if let Some(store) = key.as_ref().and_then(|k| S3_STORES.get(k)) {
            return Ok(Self {
                store,
                root: Path::from(prefix),
                kind,
                display: display.to_string(),
            });
        }
        let mut builder = AmazonS3Builder::new().with_client_options(
            ClientOptions::new()
                .with_allow_http(allow_http)
                .with_timeout(std::time::Duration::from_secs(60)),
        );
        for (key, value) in env.iter().filter(|(k, _)| k.starts_with("AWS_")) {
            match key.to_ascii_lowercase().parse::<K>() {
                Ok(k) if k != allow_http_key => builder = builder.with_config(k, value),
                _ => {}
            }
        }
        let mut builder = builder
            .with_bucket_name(bucket)
            .with_region(&region)
            .with_retry(RetryConfig::default())
            // Skip SHA-256 of every uploaded byte (TLS or the loopback protects the payload);
            // AWS_UNSIGNED_PAYLOAD=false turns signing back on.
            .with_unsigned_payload(
                std::env::var("AWS_UNSIGNED_PAYLOAD")
                    .map(|v| v != "false")
                    .unwrap_or(true),
            );
        for (k, v) in &given {
            if !matches!(k, K::Endpoint | K::Region) && *k != allow_http_key {
                builder = builder.with_config(*k, *v);
            }
        }
        if let Some(ep) = &endpoint {
            builder = builder.with_endpoint(ep);
            if ep.starts_with("http://") {
                builder = builder.with_http_connector(PlainHttp);
            }
        }
        let store = builder.build().map_err(|e| Error::InvalidLocation {
            location: display.to_string(),
            reason: e.to_string(),
        })?;
        Ok(Self {
            store: match key {
                Some(key) => S3_STORES.insert(key, Arc::new(store)),
                None => Arc::new(store),
            },
            root: Path::from(prefix),
            kind,
            display: display.to_string(),
        })
    }

    /// Path of an object relative to the table root.
    pub fn child(&self, relative: &str) -> Path {
        encoded_parts(relative).fold(self.root.clone(), |p, part| p.join(part))
    }

    /// The location of a folder under this one (a table of a warehouse), on the same store:
    /// a process serving many tables keeps one client and its connection pool.
    pub fn sub(&self, relative: &str) -> TableLocation {
        let relative = relative.trim_matches('/');
        let kind = match &self.kind {
            StoreKind::Local { dir } => StoreKind::Local {
                dir: dir.join(relative),
            },
            k => k.clone(),
        };
        TableLocation {
            store: self.store.clone(),
            root: self.child(relative),
            kind,
            display: format!("{}/{relative}", self.display.trim_end_matches('/')),
        }
    }

    /// The tables under this folder, as paths relative to it: folders holding a `_log/`, found
    /// down to `max_depth` folders deep (1: `ns/table`). Folders starting with `_` and Hive
    /// partition folders (`k=v`) are not entered.
    pub async fn find_tables(&self, max_depth: usize) -> Result<Vec<String>> {
        let mut out = Vec::new();
        let mut folders = vec![(String::new(), 0usize)];
        while let Some((folder, depth)) = folders.pop() {
            let listing = self
                .store
                .list_with_delimiter(Some(&self.child(&folder)))
                .await?;
            for p in listing.common_prefixes {
                let Some(name) = p.filename() else { continue };
                if name == "_log" {
                    if !folder.is_empty() {
                        out.push(folder.clone());
                    }
                } else if depth < max_depth + 1 && !name.starts_with('_') && !name.contains('=') {
                    let sub = if folder.is_empty() {
                        name.to_string()
                    } else {
                        format!("{folder}/{name}")
                    };
                    folders.push((sub, depth + 1));
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// An address external engines can read a table-relative file at
    /// (`s3://bucket/key` or an absolute local path).
    pub fn file_url(&self, relative: &str) -> String {
        match &self.kind {
            // Each part as the store names it on disk (an escaped partition value's `%` is
            // itself encoded, as `child` does).
            StoreKind::Local { dir } => encoded_parts(relative)
                .fold(dir.clone(), |d, part| d.join(part.as_ref()))
                .display()
                .to_string(),
            StoreKind::S3 { bucket, .. } => format!("s3://{bucket}/{}", self.child(relative)),
            StoreKind::Memory => format!("memory://{}", self.child(relative)),
        }
    }

    /// An http(s) URL for engines that want one (ClickHouse `s3()`); local paths as is.
    /// The key is percent-encoded, as a URL's path is: a reader decodes it once, and a key
    /// holds `%` (an escaped partition value's, itself encoded by object_store).
    pub fn http_url(&self, relative: &str) -> String {
        match &self.kind {
            StoreKind::S3 {
                bucket,
                endpoint,
                region,
                ..
            } => {
                use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
                const KEY: &AsciiSet = &NON_ALPHANUMERIC
                    .remove(b'-')
                    .remove(b'.')
                    .remove(b'_')
                    .remove(b'~')
                    .remove(b'/')
                    .remove(b'=');
                let child = self.child(relative);
                let key = utf8_percent_encode(child.as_ref(), KEY);
                match endpoint {
                    Some(ep) => format!("{}/{bucket}/{key}", ep.trim_end_matches('/')),
                    None => format!("https://{bucket}.s3.{region}.amazonaws.com/{key}"),
                }
            }
            _ => self.file_url(relative),
        }
    }
}

/// The object_store key a storage option names (`endpoint_url` as the AWS SDKs spell it too).
fn s3_option(address: &str, key: &str) -> Result<object_store::aws::AmazonS3ConfigKey> {
    key.to_ascii_lowercase().parse().map_err(|_| Error::InvalidLocation {
        location: address.to_string(),
        reason: format!(
            "unknown storage option '{key}' (S3 options: endpoint_url, region, access_key_id, secret_access_key, session_token, allow_http, ...)"
        ),
    })
}

/// A table-relative path's parts as the store names them: object_store percent-encodes what
/// S3 advises against (an escaped partition value's `%` among them), on every store alike.
fn encoded_parts(relative: &str) -> impl Iterator<Item = object_store::path::PathPart<'_>> {
    relative
        .split('/')
        .filter(|s| !s.is_empty())
        .map(object_store::path::PathPart::from)
}

/// What object_store would otherwise only find out when it builds a request's URL (and
/// panics): the bucket, the endpoint and the region must each fit in one.
fn check_s3(bucket: &str, endpoint: Option<&str>, region: &str) -> Result<(), String> {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b"._-".contains(&b);
    if bucket.is_empty() || bucket.len() > 255 || !bucket.bytes().all(plain) {
        return Err(format!(
            "'{bucket}' is not a bucket name (letters, digits, '.', '-' and '_')"
        ));
    }
    if region.is_empty() || !region.bytes().all(plain) {
        return Err(format!(
            "'{region}' is not a region (AWS_REGION or the storage option region), e.g. us-east-1"
        ));
    }
    if let Some(ep) = endpoint {
        let bad = |why: &str| {
            Err(format!(
                "endpoint '{ep}' (AWS_ENDPOINT_URL or the storage option endpoint_url): {why}, e.g. http://127.0.0.1:9000"
            ))
        };
        if ep.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return bad("it holds a space or a control character");
        }
        match url::Url::parse(ep) {
            Err(e) => return bad(&format!("not a URL ({e})")),
            Ok(u) if !matches!(u.scheme(), "http" | "https") => {
                return bad("the scheme must be http or https")
            }
            Ok(u) if u.host_str().is_none_or(str::is_empty) => return bad("no host"),
            Ok(u) if u.query().is_some() || u.fragment().is_some() => {
                return bad("a query or fragment cannot lead a request's URL")
            }
            Ok(_) => {}
        }
    }
    Ok(())
}

fn is_loopback_http(endpoint: &str) -> bool {
    let Ok(url) = url::Url::parse(endpoint) else {
        return false;
    };
    if url.scheme() != "http" {
        return false;
    }
    match url.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Lexically normalize `.` and `..` (the directory may not exist yet).
fn normalize(p: &StdPath) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_addresses() {
        let l = TableLocation::parse("/tmp/x/../t").unwrap();
        assert_eq!(
            l.kind,
            StoreKind::Local {
                dir: "/tmp/t".into()
            }
        );
        assert_eq!(l.file_url("_data/a.parquet"), "/tmp/t/_data/a.parquet");
        let f = TableLocation::parse("file:///tmp/t").unwrap();
        assert_eq!(f.root.as_ref(), "tmp/t");
        assert!(TableLocation::parse("file://rel/t").is_err());
        // URLs are decoded, and name a folder only.
        let f = TableLocation::parse("file:///tmp/sp%20ace%25t").unwrap();
        assert_eq!(
            f.kind,
            StoreKind::Local {
                dir: "/tmp/sp ace%t".into()
            }
        );
        assert_eq!(
            TableLocation::parse("file:/tmp/t").unwrap().root.as_ref(),
            "tmp/t"
        );
        assert!(TableLocation::parse("file:///tmp/t?x=1").is_err());
        assert!(TableLocation::parse("file:///tmp/t#x").is_err());
        assert!(TableLocation::parse("gs://b/t").is_err());
        assert!(TableLocation::parse("s3:///t").is_err());
        assert!(TableLocation::parse("").is_err());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("taxi.parquet");
        std::fs::write(&file, b"PAR1").unwrap();
        let e = TableLocation::parse(&file.display().to_string()).unwrap_err();
        assert!(
            e.to_string().contains("is a file; a table is a folder"),
            "{e}"
        );
    }

    #[test]
    fn http_urls_encode_the_key_once_more() {
        let opts = StorageOptions::from([(
            "endpoint_url".to_string(),
            "http://127.0.0.1:9000/".to_string(),
        )]);
        let l = TableLocation::parse_with("s3://lake/t", &opts).unwrap();
        // The key holds `region=United%2520States` (the escaped space, its `%` encoded).
        let rel = "_data/region=United%20States/x,{y}.parquet";
        assert_eq!(
            l.file_url(rel),
            "s3://lake/t/_data/region=United%2520States/x,%7By%7D.parquet"
        );
        assert_eq!(
            l.http_url(rel),
            "http://127.0.0.1:9000/lake/t/_data/region=United%252520States/x%2C%257By%257D.parquet"
        );
    }

    #[test]
    fn s3_settings_that_cannot_make_a_url_are_refused() {
        check_s3("lake", Some("http://127.0.0.1:9000"), "us-east-1").unwrap();
        check_s3("my.bucket_1", None, "eu-west-3").unwrap();
        check_s3("lake", Some("https://s3.example.com/base/"), "auto").unwrap();
        for (bucket, endpoint, region, needle) in [
            ("bu cket", None, "us-east-1", "not a bucket name"),
            ("", None, "us-east-1", "not a bucket name"),
            ("lake", None, "not a region!", "not a region"),
            ("lake", Some("not a url"), "us-east-1", "holds a space"),
            ("lake", Some("127.0.0.1:9000"), "us-east-1", "not a URL"),
            (
                "lake",
                Some("http://127.0.0.1:99999"),
                "us-east-1",
                "not a URL",
            ),
            ("lake", Some("http://[::1"), "us-east-1", "not a URL"),
            (
                "lake",
                Some("http://127.0.0.1:9000/ "),
                "us-east-1",
                "holds a space",
            ),
            ("lake", Some("ftp://host"), "us-east-1", "http or https"),
            ("lake", Some("http://h/?x=1"), "us-east-1", "query"),
        ] {
            let e = check_s3(bucket, endpoint, region).unwrap_err();
            assert!(e.contains(needle), "{bucket} {endpoint:?} {region}: {e}");
        }
        // Through the address: an error naming the table, not a panic at the first request.
        let opts = StorageOptions::from([("endpoint_url".to_string(), "not a url".to_string())]);
        let e = TableLocation::parse_with("s3://lake/t", &opts).unwrap_err();
        assert!(e.to_string().contains("endpoint 'not a url'"), "{e}");
    }

    /// Plain http to a host that is not loopback only when asked for: credentials would cross
    /// the network unencrypted.
    #[test]
    fn plain_http_beyond_loopback_needs_allow_http() {
        let with = |allow: &str| {
            StorageOptions::from([
                (
                    "endpoint_url".to_string(),
                    "http://10.1.2.3:9000".to_string(),
                ),
                ("allow_http".to_string(), allow.to_string()),
            ])
        };
        let e = TableLocation::parse_with("s3://lake/t", &with("false"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("plain http") && e.contains("allow_http=true"),
            "{e}"
        );
        let e = TableLocation::parse_with("s3://lake/t", &with("maybe"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("'maybe'"), "{e}");
        TableLocation::parse_with("s3://lake/t", &with("true")).unwrap();
        let local = StorageOptions::from([
            (
                "endpoint_url".to_string(),
                "http://127.0.0.1:9000".to_string(),
            ),
            ("allow_http".to_string(), "false".to_string()),
        ]);
        TableLocation::parse_with("s3://lake/t", &local).unwrap();
    }

    /// "connection refused" is in a cause of object_store's error, not in its text.
    #[test]
    fn storage_errors_say_their_causes() {
        #[derive(Debug)]
        struct Sending(std::io::Error);
        impl std::fmt::Display for Sending {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "error sending request for url (http://169.254.169.254/latest/api/token)",
                )
            }
        }
        impl std::error::Error for Sending {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let refused = std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused (os error 111)",
        );
        let e = Error::from(object_store::Error::Generic {
            store: "S3",
            source: Box::new(Sending(refused)),
        });
        let m = e.to_string();
        assert!(
            m.contains("api/token): Connection refused (os error 111)"),
            "{m}"
        );
        assert!(m.contains("no AWS credentials were given"), "{m}");
    }

    #[test]
    fn loopback_detection() {
        assert!(is_loopback_http("http://127.0.0.1:9000"));
        assert!(is_loopback_http("http://localhost:9000"));
        assert!(!is_loopback_http("http://10.0.0.1:9000"));
        assert!(!is_loopback_http("https://127.0.0.1:9000"));
    }
}
