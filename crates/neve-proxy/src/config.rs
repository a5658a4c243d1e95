//! Settings: the same TOML file as `neve serve` (its `warehouse`, its `[[tenants]]` with their
//! `access_keys`, and a `[proxy]` section), overridden by flags. Plain serde data.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Everything `neve proxy` is told.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// Where tables live: a local folder or `s3://bucket/prefix`.
    pub warehouse: String,
    pub settings: ProxySettings,
    /// Who may read what. Empty: one tenant, the whole warehouse, read by `single_key`.
    pub tenants: Vec<TenantKeys>,
    /// The one key pair of the no-config mode (`--access-key-id`, `--secret-access-key`).
    pub single_key: Option<AccessKeyConfig>,
    /// HTTPS instead of HTTP: the shared file's `[tls]`, or `--tls-cert` and `--tls-key`.
    pub tls: Option<crate::tls::TlsFiles>,
}

/// The `[proxy]` section.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProxySettings {
    pub listen: SocketAddr,
    /// A listing reads the log's tail when its table's snapshot is older than this; `0s`
    /// (the default) means every listing sees the latest commit.
    #[serde(with = "duration_text")]
    pub refresh_interval: Duration,
    /// How long files removed by a merge or delete stay readable through the proxy after the
    /// commit that removed them: at most gc's grace, after which gc may delete them.
    #[serde(with = "duration_text")]
    pub removed_files_readable: Duration,
    /// Region reported by GetBucketLocation and ListBuckets.
    pub region: String,
    /// A table no request has asked for this long is dropped from memory (its snapshots and
    /// rendered listing entries; not its cached blocks); the next request reads its log again.
    #[serde(with = "duration_text")]
    pub keep_idle_tables: Duration,
    /// A request's headers must arrive within this (and a TLS handshake end); then the
    /// connection is closed.
    #[serde(with = "duration_text")]
    pub header_read_timeout: Duration,
    /// A request body silent this long fails.
    #[serde(with = "duration_text")]
    pub body_read_timeout: Duration,
    /// Connections served at once; more wait in the listen queue until one closes. Keep it
    /// below the open-file limit (`ulimit -n`), which the store's connections and the disk
    /// cache share.
    pub max_connections: usize,
    pub cache: CacheSettings,
}

/// `[proxy.cache]`: blocks of data files kept in memory and on a local disk.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheSettings {
    /// Memory for cached blocks (`0`: no cache at all).
    #[serde(with = "size_text")]
    pub memory: u64,
    /// Local disk for cached blocks (`0`: memory only); needs `dir`.
    #[serde(with = "size_text")]
    pub disk: u64,
    pub dir: Option<std::path::PathBuf>,
    /// Files are cached in aligned blocks of this size.
    #[serde(with = "size_text")]
    pub block_size: u64,
}

impl Default for CacheSettings {
    fn default() -> Self {
        Self {
            memory: 256 << 20,
            disk: 0,
            dir: None,
            block_size: 1 << 20,
        }
    }
}

impl Default for ProxySettings {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:9300".parse().expect("an address"),
            refresh_interval: Duration::ZERO,
            removed_files_readable: Duration::from_secs(3600),
            region: "us-east-1".into(),
            keep_idle_tables: Duration::from_secs(600),
            header_read_timeout: crate::serve::HEADER_READ_TIMEOUT,
            body_read_timeout: crate::serve::BODY_READ_TIMEOUT,
            max_connections: crate::serve::MAX_CONNECTIONS,
            cache: CacheSettings::default(),
        }
    }
}

/// One S3 access key. The secret is needed in plain text to check SigV4 signatures (an HMAC
/// over the request), so it can come from the environment instead of the file.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessKeyConfig {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// The name of an environment variable holding the secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_env: Option<String>,
    /// The tenant's buckets this key may read; absent or `["*"]`: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buckets: Option<Vec<String>>,
}

/// Never the secret: a config printed with `{:?}` in a log must not carry it.
impl std::fmt::Debug for AccessKeyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessKeyConfig")
            .field("id", &self.id)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("secret_env", &self.secret_env)
            .field("buckets", &self.buckets)
            .finish()
    }
}

impl AccessKeyConfig {
    /// The secret, from the file or the environment.
    pub fn resolve_secret(&self) -> Result<String> {
        match (&self.secret, &self.secret_env) {
            (Some(s), None) => Ok(s.clone()),
            (None, Some(var)) => std::env::var(var).map_err(|_| Error::InvalidConfig {
                reason: format!(
                    "access key '{}': environment variable {var} is not set",
                    self.id
                ),
            }),
            _ => Err(Error::InvalidConfig {
                reason: format!(
                    "access key '{}': give exactly one of secret and secret_env",
                    self.id
                ),
            }),
        }
    }
}

/// A tenant as the proxy sees it: its folder and its S3 keys.
#[derive(Debug, Clone)]
pub struct TenantKeys {
    pub name: String,
    pub prefix: String,
    pub access_keys: Vec<AccessKeyConfig>,
}

/// The file, read leniently: the keys `neve serve` uses are its business.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct SharedFile {
    warehouse: Option<String>,
    proxy: ProxySettings,
    tenants: Vec<SharedTenant>,
    tls: Option<crate::tls::TlsFiles>,
}

#[derive(Debug, Deserialize)]
struct SharedTenant {
    name: String,
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    access_keys: Vec<AccessKeyConfig>,
}

/// A TOML error as its line and column and what is wrong, never the line itself: toml's own
/// message quotes the offending line, which in this file may hold a secret key or a token.
pub fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim_end();
    match e.span() {
        Some(span) => {
            let before = &text.as_bytes()[..span.start.min(text.len())];
            let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
            let column = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
            format!("line {line}, column {column}: {message}")
        }
        None => message.to_string(),
    }
}

impl ProxyConfig {
    /// Read the shared TOML file. `warehouse` may be left to a flag.
    pub fn from_toml(text: &str) -> Result<Self> {
        let f: SharedFile = toml::from_str(text).map_err(|e| Error::InvalidConfig {
            reason: toml_error(text, &e),
        })?;
        Ok(Self {
            warehouse: f.warehouse.unwrap_or_default(),
            settings: f.proxy,
            tenants: f
                .tenants
                .into_iter()
                .map(|t| TenantKeys {
                    prefix: t.prefix.unwrap_or_else(|| t.name.clone()),
                    name: t.name,
                    access_keys: t.access_keys,
                })
                .collect(),
            single_key: None,
            tls: f.tls,
        })
    }

    /// Settings for one warehouse and no file.
    pub fn new(warehouse: impl Into<String>) -> Self {
        Self {
            warehouse: warehouse.into(),
            settings: ProxySettings::default(),
            tenants: Vec::new(),
            single_key: None,
            tls: None,
        }
    }

    /// Refuse settings that cannot work, with the reason.
    pub fn validate(&self) -> Result<()> {
        let bad = |reason: String| Err(Error::InvalidConfig { reason });
        if self.warehouse.is_empty() {
            return bad("no warehouse: give --warehouse or `warehouse` in the file".into());
        }
        if self.tenants.is_empty() && self.single_key.is_none() {
            return bad("no access keys: give --access-key-id and --secret-access-key (or NEVE_PROXY_ACCESS_KEY_ID and NEVE_PROXY_SECRET_ACCESS_KEY), or tenants with access_keys in the config file; the proxy never serves anonymous requests".into());
        }
        let s = &self.settings;
        if s.max_connections == 0 {
            return bad("[proxy] max_connections must be above 0".into());
        }
        if s.header_read_timeout.is_zero() || s.body_read_timeout.is_zero() {
            return bad(
                "[proxy] header_read_timeout and body_read_timeout must be above 0s".into(),
            );
        }
        if !self.tenants.is_empty() && self.single_key.is_some() {
            return bad(
                "--access-key-id applies only without tenants in the config file; give the keys in the tenants' access_keys".into(),
            );
        }
        // Each tenant is one folder of the warehouse, its own: an empty prefix would be the
        // whole warehouse, a shared one another tenant's tables.
        let mut folders = std::collections::HashMap::new();
        for t in &self.tenants {
            let p = &t.prefix;
            if t.name.is_empty()
                || p.is_empty()
                || p.len() > 128
                || p.starts_with('_')
                || !p
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            {
                return bad(format!(
                    "tenant '{}': name and prefix are letters, digits, '_' and '-' (the tenant's folder in the warehouse)",
                    t.name
                ));
            }
            if let Some(other) = folders.insert(p.as_str(), t.name.as_str()) {
                return bad(format!(
                    "tenants '{other}' and '{}' have the same folder '{p}': each tenant needs its own",
                    t.name
                ));
            }
        }
        let mut seen = std::collections::HashSet::new();
        let keys = self
            .tenants
            .iter()
            .flat_map(|t| t.access_keys.iter())
            .chain(self.single_key.iter());
        for k in keys {
            if k.id.is_empty() || !k.id.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return bad(format!(
                    "access key id '{}': use letters and digits only",
                    k.id
                ));
            }
            if !seen.insert(k.id.clone()) {
                return bad(format!("access key id '{}' is given twice", k.id));
            }
            if k.resolve_secret()?.len() < 8 {
                return bad(format!(
                    "access key '{}': the secret must be at least 8 characters",
                    k.id
                ));
            }
        }
        let cache = &self.settings.cache;
        if cache.disk > 0 && cache.dir.is_none() {
            return bad("proxy.cache.disk needs proxy.cache.dir (--cache-dir)".into());
        }
        if !(64 << 10..=16 << 20).contains(&cache.block_size) {
            return bad("proxy.cache.block_size: between 64KiB and 16MiB".into());
        }
        if cache.disk > 0 && cache.disk < 16 * cache.block_size.max(1 << 20) {
            return bad(
                "proxy.cache.disk: at least 16 blocks (16 MiB for blocks up to 1 MiB)".into(),
            );
        }
        if self.settings.removed_files_readable > Duration::from_secs(7 * 24 * 3600) {
            return bad("proxy.removed_files_readable: at most 7 days".into());
        }
        Ok(())
    }
}

/// Sizes as text (`256MiB`, `50GiB`) or a number of bytes.
pub mod size_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(n: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&bytesize::ByteSize::b(*n).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Size {
            Bytes(u64),
            Text(String),
        }
        match Size::deserialize(d)? {
            Size::Bytes(n) => Ok(n),
            Size::Text(t) => t
                .parse::<bytesize::ByteSize>()
                .map(|b| b.as_u64())
                .map_err(serde::de::Error::custom),
        }
    }
}

/// `"1h"`, `"30s"` in the file, as `neve serve`'s settings.
pub mod duration_text {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_shared_file_and_ignores_what_serve_uses() {
        let c = ProxyConfig::from_toml(
            r#"
            warehouse = "s3://lake"
            listen = "127.0.0.1:8080"
            [ingest]
            flush_interval = "200ms"
            [proxy]
            listen = "127.0.0.1:9301"
            refresh_interval = "1s"
            header_read_timeout = "5s"
            body_read_timeout = "7s"
            max_connections = 100
            [[tenants]]
            name = "acme"
            tokens = [{ sha256 = "00", role = "read" }]
            access_keys = [{ id = "AKIAACME", secret = "acme-secret", buckets = ["taxi"] }]
            "#,
        )
        .unwrap();
        assert_eq!(c.warehouse, "s3://lake");
        assert_eq!(c.settings.listen.port(), 9301);
        assert_eq!(c.settings.refresh_interval, Duration::from_secs(1));
        assert_eq!(c.settings.header_read_timeout, Duration::from_secs(5));
        assert_eq!(c.settings.body_read_timeout, Duration::from_secs(7));
        assert_eq!(c.settings.max_connections, 100);
        assert_eq!(c.tenants[0].prefix, "acme");
        assert_eq!(
            c.tenants[0].access_keys[0].buckets.as_deref(),
            Some(&["taxi".to_string()][..])
        );
        c.validate().unwrap();
        // A config, or its keys in force, printed in a log never carry a secret.
        let keys = crate::auth::Keys::new(&c).unwrap();
        for text in [format!("{c:?}"), format!("{keys:?}")] {
            assert!(text.contains("AKIAACME"), "{text}");
            assert!(!text.contains("acme-secret"), "{text}");
        }
    }

    #[test]
    fn refuses_settings_that_cannot_work() {
        let mut c = ProxyConfig::new("/tmp/w");
        assert!(c.validate().unwrap_err().to_string().contains("anonymous"));
        c.single_key = Some(AccessKeyConfig {
            id: "AK".into(),
            secret: Some("short".into()),
            secret_env: None,
            buckets: None,
        });
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("8 characters"));
        c.single_key.as_mut().unwrap().secret = Some("long-enough".into());
        c.validate().unwrap();
        c.settings.max_connections = 0;
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("max_connections"));
        c.settings.max_connections = 1;
        c.settings.header_read_timeout = Duration::ZERO;
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("header_read_timeout"));
        assert!(ProxyConfig::from_toml("[proxy]\nlisten_typo = 1")
            .unwrap_err()
            .to_string()
            .contains("listen_typo"));
        // A typo beside a secret: the refusal names the field and its place, not the line.
        let e = ProxyConfig::from_toml(
            "[[tenants]]\nname = 'a'\naccess_keys = [{ id = 'AK', secret = 'sk-9f8e', bukets = ['x'] }]",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("bukets") && e.contains("line 3"), "{e}");
        assert!(!e.contains("sk-9f8e"), "{e}");
        // A tenant's folder is its own: not the whole warehouse, not another's, not a path.
        let tenants = |a: &str, b: &str| {
            ProxyConfig::from_toml(&format!(
                "warehouse = '/tmp/w'\n\
                 [[tenants]]\nname = 'a'\n{a}\naccess_keys = [{{ id = 'AKA', secret = 'secret-of-a' }}]\n\
                 [[tenants]]\nname = 'b'\n{b}\naccess_keys = [{{ id = 'AKB', secret = 'secret-of-b' }}]\n"
            ))
            .unwrap()
            .validate()
        };
        tenants("", "").unwrap();
        tenants("prefix = 'x'", "prefix = 'y'").unwrap();
        for (a, b, says) in [
            ("prefix = ''", "", "letters"),
            ("prefix = '..'", "", "letters"),
            ("prefix = 'a/b'", "", "letters"),
            ("prefix = '_log'", "", "letters"),
            ("", "prefix = 'a'", "same folder 'a'"),
            ("prefix = 's'", "prefix = 's'", "same folder 's'"),
        ] {
            let e = tenants(a, b).unwrap_err().to_string();
            assert!(e.contains(says), "{a} {b}: {e}");
        }
    }
}
