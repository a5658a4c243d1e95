//! Settings: a TOML file, overridden by flags (see docs/SERVER.md). Plain serde data.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::auth::Role;
use crate::error::{Error, Result};

/// Everything `neve serve` is told.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Where tables live: a local folder or `s3://bucket/prefix`.
    pub warehouse: String,
    pub listen: SocketAddr,
    /// Arrow Flight SQL on this address too (`--flight-listen`); off when unset.
    pub flight_listen: Option<SocketAddr>,
    pub ingest: IngestConfig,
    pub maintenance: crate::maintain::MaintenanceConfig,
    /// SQL (`POST /v1/sql`): limits.
    pub query: QueryConfig,
    /// When tables with `iceberg=true` get their Iceberg metadata.
    pub iceberg: IcebergConfig,
    /// After SIGTERM, how long requests in flight may take to finish (inserts are answered
    /// within a flush; a query streaming to a slow client may not be) before their
    /// connections are closed. Kubernetes' default termination grace is 30 s too.
    #[serde(with = "duration_text")]
    pub shutdown_grace: Duration,
    /// How long a client may take to send a request's headers; then its connection is closed
    /// (a client trickling headers would otherwise hold a connection and a task for ever,
    /// before any token is checked).
    #[serde(with = "duration_text")]
    pub header_read_timeout: Duration,
    /// How long a request's body may go without sending a byte; then the request fails
    /// (400) and the memory reserved for it is freed.
    #[serde(with = "duration_text")]
    pub body_read_timeout: Duration,
    /// Connections served at once on each port (HTTP, Flight SQL); more wait in the listen
    /// queue until one closes. Keep the sum below the process's open-file limit (`ulimit -n`),
    /// which the store's connections share.
    pub max_connections: usize,
    /// A table no request has used this long leaves memory: its handle (with its snapshot)
    /// and its insert queue's task. The next request opens it again.
    #[serde(with = "duration_text")]
    pub keep_idle_tables: Duration,
    /// Who may do what. Empty: one tenant, the whole warehouse, with `admin_token` (or, with
    /// no token at all, open, and only on a loopback address).
    pub tenants: Vec<TenantConfig>,
    /// The admin token of the single tenant when `tenants` is empty (`--token`, `NEVE_TOKEN`).
    /// Never read from the file, where tenants' tokens are stored hashed: a file naming it is
    /// refused as an unknown field.
    #[serde(skip)]
    pub admin_token: Option<Secret>,
    /// `neve proxy`'s section of the shared file (read by the proxy, see docs/PROXY.md).
    pub proxy: neve_proxy::ProxySettings,
    /// HTTPS and Flight SQL over TLS (and the S3 port's HTTPS): `[tls]` in the file, or
    /// `--tls-cert` and `--tls-key`.
    pub tls: Option<neve_proxy::tls::TlsFiles>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            warehouse: "./neve-data".into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            flight_listen: None,
            ingest: IngestConfig::default(),
            maintenance: Default::default(),
            query: Default::default(),
            iceberg: Default::default(),
            shutdown_grace: Duration::from_secs(30),
            header_read_timeout: neve_proxy::serve::HEADER_READ_TIMEOUT,
            body_read_timeout: neve_proxy::serve::BODY_READ_TIMEOUT,
            max_connections: neve_proxy::serve::MAX_CONNECTIONS,
            keep_idle_tables: Duration::from_secs(600),
            tenants: Vec::new(),
            admin_token: None,
            proxy: Default::default(),
            tls: None,
        }
    }
}

/// `[iceberg]`: when the server writes a table's Iceberg metadata.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IcebergConfig {
    pub sync: IcebergSync,
}

/// Whether a commit's Iceberg metadata is written before or after its requests are answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IcebergSync {
    /// Before: an Iceberg reader sees every row the server acknowledged (the default).
    #[default]
    BeforeAnswer,
    /// After, by a task of the table's: inserts are answered sooner, and Iceberg readers
    /// see them one sync later (the metadata lags the log by at most the sync running and
    /// the next one). Shutdown waits for it.
    AfterAnswer,
}

/// Limits of SQL queries.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueryConfig {
    /// Queries running at once; more are refused with 429.
    pub max_concurrent: usize,
    /// Memory each query's sorts, joins and aggregates may hold; beyond it they spill to a
    /// temporary folder where they can, and the query fails (400) where they cannot.
    /// Streaming a result holds about one batch, whatever its size.
    #[serde(with = "size_text")]
    pub memory_per_query: u64,
    /// The longest a query may run, to its last byte; a request's `?timeout=` can only
    /// shorten it.
    #[serde(with = "duration_text")]
    pub timeout: Duration,
    /// Parsed Parquet footers kept between queries, shared by all of them (about 10 KB per
    /// file of a taxi-like table); `0` turns the cache off.
    #[serde(with = "size_text")]
    pub footer_cache: u64,
    /// Ranges of data files kept between queries, for tables on S3 or MinIO (a hot table's
    /// repeated queries then read from memory); `0` turns the cache off.
    #[serde(with = "size_text")]
    pub chunk_cache: u64,
}

impl Default for QueryConfig {
    fn default() -> Self {
        Self {
            max_concurrent: 16,
            memory_per_query: 1 << 30,
            timeout: Duration::from_secs(300),
            footer_cache: 64 << 20,
            chunk_cache: 128 << 20,
        }
    }
}

/// Group commit and limits.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IngestConfig {
    /// A table's queue is flushed when its oldest request has waited this long...
    #[serde(with = "duration_text")]
    pub flush_interval: Duration,
    /// ...or it holds this many bytes (in memory)...
    #[serde(with = "size_text")]
    pub flush_bytes: u64,
    /// ...or this many rows.
    pub flush_rows: u64,
    /// Also flush as soon as the queue holds as many requests as the last flush answered:
    /// clients that wait for their answer before sending again (most agents and loaders)
    /// are all back, and waiting out `flush_interval` would only add latency. Off: strict
    /// interval batching, fewer and larger commits under light load.
    pub flush_early: bool,
    /// Memory all queued requests may hold; above it, requests get 429.
    #[serde(with = "size_text")]
    pub max_pending_bytes: u64,
    /// Largest request body (after decompression); above it, 413.
    #[serde(with = "size_text")]
    pub max_body_bytes: u64,
    /// How long an `Idempotency-Key` is remembered (in the log).
    #[serde(with = "duration_text")]
    pub idempotency_window: Duration,
}

impl Default for IngestConfig {
    fn default() -> Self {
        Self {
            flush_interval: Duration::from_millis(200),
            flush_bytes: 64 << 20,
            flush_rows: 1_000_000,
            flush_early: true,
            max_pending_bytes: 1 << 30,
            max_body_bytes: 256 << 20,
            idempotency_window: Duration::from_secs(3600),
        }
    }
}

/// One tenant: a folder of the warehouse and the tokens that reach it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    pub name: String,
    /// The tenant's folder under the warehouse (defaults to its name).
    #[serde(default)]
    pub prefix: Option<String>,
    #[serde(default)]
    pub tokens: Vec<TokenConfig>,
    /// S3 keys of `neve proxy` (or `neve serve --s3-listen`); see docs/PROXY.md.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access_keys: Vec<neve_proxy::AccessKeyConfig>,
}

/// A secret held in memory: `{:?}` of a config that holds it never shows it (a log line
/// printing a config would otherwise carry the admin token).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(text: String) -> Self {
        Self(text)
    }

    /// The text, for the one place that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// A token, stored as the hex SHA-256 of its text (`neve hash-token` prints it).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    pub sha256: String,
    pub role: Role,
}

impl ServerConfig {
    /// The folders of tables maintenance walks: each tenant's, or the whole warehouse.
    pub fn table_roots(&self) -> Vec<String> {
        let base = self.warehouse.trim_end_matches('/');
        if self.tenants.is_empty() {
            return vec![base.to_string()];
        }
        self.tenants
            .iter()
            .map(|t| format!("{base}/{}", t.prefix.as_deref().unwrap_or(&t.name)))
            .collect()
    }

    /// Read a TOML file.
    pub fn from_toml(text: &str) -> Result<Self> {
        toml::from_str(text).map_err(|e| Error::InvalidConfig {
            reason: neve_proxy::config::toml_error(text, &e),
        })
    }

    /// Refuse settings that cannot work, with the reason.
    pub fn validate(&self) -> Result<()> {
        let bad = |reason: String| Err(Error::InvalidConfig { reason });
        // Every port that answers requests counts: Flight SQL reads and writes tables too.
        let open = std::iter::once(self.listen)
            .chain(self.flight_listen)
            .find(|a| !a.ip().is_loopback());
        if let (true, None, Some(addr)) = (self.tenants.is_empty(), &self.admin_token, open) {
            return bad(format!(
                "no tenants and no token: the server would be open to anyone on {addr}; set --token (or NEVE_TOKEN), or listen on 127.0.0.1",
            ));
        }
        self.validate_settings()
    }

    /// The checks of [`validate`](Self::validate) that do not concern the ports a server
    /// answers on: what `neve maintain` checks, which answers on none (a server file without
    /// tenants, open with `--token`, is its too).
    pub fn validate_settings(&self) -> Result<()> {
        let bad = |reason: String| Err(Error::InvalidConfig { reason });
        let mut folders = std::collections::HashMap::new();
        for t in &self.tenants {
            let folder = t.prefix.as_deref().unwrap_or(&t.name);
            if t.name.is_empty() || !crate::valid_name(folder) {
                return bad(format!(
                    "tenant '{}': name and prefix are letters, digits, '_' and '-'",
                    t.name
                ));
            }
            // A shared folder would give each tenant the other's tables.
            if let Some(other) = folders.insert(folder, t.name.as_str()) {
                return bad(format!(
                    "tenants '{other}' and '{}' have the same folder '{folder}': each tenant needs its own",
                    t.name
                ));
            }
            for k in &t.tokens {
                if k.sha256.len() != 64 || !k.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return bad(format!(
                        "tenant '{}': a token's sha256 must be 64 hex digits",
                        t.name
                    ));
                }
            }
        }
        if self.maintenance.interval.is_zero() {
            return bad("maintenance.interval must be above 0".into());
        }
        // Also with maintenance off: the grace is the deployment's (workers' gc), and this
        // server refuses inserts older than half of it.
        if self.maintenance.gc_grace < MIN_GC_GRACE {
            return bad(format!(
                "maintenance.gc_grace ({}) must be at least {}: no insert or merge whose files are older than half the grace is committed (gc may have taken them)",
                humantime::format_duration(self.maintenance.gc_grace),
                humantime::format_duration(MIN_GC_GRACE)
            ));
        }
        if self.maintenance.target_file_size == 0 || self.maintenance.max_input_bytes == 0 {
            return bad(
                "maintenance.target_file_size and maintenance.max_input_bytes must be above 0"
                    .into(),
            );
        }
        if self.shutdown_grace.is_zero() {
            return bad("shutdown_grace must be above 0: every request in flight would be cut off unanswered".into());
        }
        if self.query.max_concurrent == 0 || self.query.memory_per_query == 0 {
            return bad("query.max_concurrent and query.memory_per_query must be above 0".into());
        }
        if self.query.timeout.is_zero() {
            return bad("query.timeout must be above 0".into());
        }
        if self.max_connections == 0 {
            return bad("max_connections must be above 0".into());
        }
        if self.ingest.flush_interval.is_zero() {
            return bad("ingest.flush_interval must be above 0".into());
        }
        if self.ingest.max_body_bytes > self.ingest.max_pending_bytes {
            return bad("ingest.max_body_bytes cannot exceed ingest.max_pending_bytes".into());
        }
        Ok(())
    }
}

/// The same text forms as the proxy's settings in the shared file.
pub(crate) use neve_proxy::config::{duration_text, size_text};

/// The shortest gc grace maintenance may use: below it, a slow flush would be refused.
pub const MIN_GC_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_printed_never_shows_the_admin_token() {
        let mut c = ServerConfig::from_toml("warehouse = \"/tmp/w\"").unwrap();
        c.admin_token = Some(Secret::new("tok-9f2c1e".into()));
        let text = format!("{c:?}");
        assert!(
            text.contains("admin_token: Some(Secret(<redacted>))"),
            "{text}"
        );
        assert!(!text.contains("tok-9f2c1e"), "{text}");
        assert_eq!(c.admin_token.unwrap().expose(), "tok-9f2c1e");
    }

    #[test]
    fn a_config_file_reads_and_checks() {
        let c = ServerConfig::from_toml(
            r#"
            warehouse = "s3://lake"
            listen = "0.0.0.0:8080"
            [ingest]
            flush_interval = "50ms"
            max_pending_bytes = "512MiB"
            [[tenants]]
            name = "acme"
            tokens = [{ sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", role = "write" }]
            "#,
        )
        .unwrap();
        assert_eq!(c.ingest.flush_interval, Duration::from_millis(50));
        assert_eq!(c.ingest.max_pending_bytes, 512 << 20);
        assert_eq!(c.ingest.flush_rows, 1_000_000);
        assert_eq!(c.tenants[0].tokens[0].role, Role::Write);
        c.validate().unwrap();
        let e = ServerConfig::from_toml("flush = 1").unwrap_err();
        assert!(e.to_string().contains("flush"), "{e}");
        // The admin token comes from `--token` or `NEVE_TOKEN`, never in clear from the file.
        // …and the refusal does not quote the line that holds it.
        let e = ServerConfig::from_toml("listen = \"127.0.0.1:1\"\nadmin_token = \"s3cr3t\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("admin_token") && e.contains("line 2"), "{e}");
        assert!(!e.contains("s3cr3t"), "{e}");
        let e = ServerConfig::from_toml(
            "[[tenants]]\nname = \"a\"\ntokens = [{ sha256 = \"ab\", roel = \"x\", plain = \"s3cr3t\" }]",
        )
        .unwrap_err()
        .to_string();
        assert!(!e.contains("s3cr3t"), "{e}");
        // Open to the network without a token: refused.
        let open = ServerConfig {
            listen: "0.0.0.0:8080".parse().unwrap(),
            ..Default::default()
        };
        assert!(open.validate().unwrap_err().to_string().contains("--token"));
        // Flight SQL on the network, HTTP on loopback: as open, refused.
        let open_flight = ServerConfig {
            flight_listen: Some("0.0.0.0:8815".parse().unwrap()),
            ..Default::default()
        };
        let e = open_flight.validate().unwrap_err().to_string();
        assert!(e.contains("0.0.0.0:8815") && e.contains("--token"), "{e}");
        let loopback_flight = ServerConfig {
            flight_listen: Some("127.0.0.1:8815".parse().unwrap()),
            ..Default::default()
        };
        loopback_flight.validate().unwrap();
        // A gc grace so short that the server's own flushes could not commit: refused.
        let mut quick = ServerConfig::default();
        quick.maintenance.gc_grace = Duration::ZERO;
        let e = quick.validate().unwrap_err().to_string();
        assert!(
            e.contains("maintenance.gc_grace (0s) must be at least 10s"),
            "{e}"
        );
        // With maintenance off too: the grace is the workers', and bounds this server's inserts.
        quick.maintenance.enabled = false;
        assert!(quick.validate().is_err());
        // Files of 0 bytes, or no time to answer at shutdown: refused.
        let mut empty = ServerConfig::default();
        empty.maintenance.target_file_size = 0;
        assert!(empty
            .validate()
            .unwrap_err()
            .to_string()
            .contains("target_file_size"));
        let abrupt = ServerConfig {
            shutdown_grace: Duration::ZERO,
            ..Default::default()
        };
        assert!(abrupt
            .validate()
            .unwrap_err()
            .to_string()
            .contains("shutdown_grace"));
        // Two tenants on one folder would each have the other's tables.
        let shared = ServerConfig::from_toml(
            "[[tenants]]\nname = 'acme'\n[[tenants]]\nname = 'acme2'\nprefix = 'acme'\n",
        )
        .unwrap();
        let e = shared.validate().unwrap_err().to_string();
        assert!(e.contains("same folder 'acme'"), "{e}");
    }

    /// One `[tls]` section, read by the server and by the proxy from the shared file.
    #[test]
    fn the_tls_section_is_read_by_both_processes() {
        let text = "warehouse = 's3://lake'\n[tls]\ncert = '/etc/neve/tls.crt'\nkey = '/etc/neve/tls.key'\n";
        let want = neve_proxy::tls::TlsFiles {
            cert: "/etc/neve/tls.crt".into(),
            key: "/etc/neve/tls.key".into(),
            client_ca: None,
        };
        assert_eq!(
            ServerConfig::from_toml(text).unwrap().tls,
            Some(want.clone())
        );
        assert_eq!(
            neve_proxy::ProxyConfig::from_toml(text).unwrap().tls,
            Some(want)
        );
        assert_eq!(ServerConfig::default().tls, None);
        let mutual = format!("{text}client_ca = '/etc/neve/clients.pem'\n");
        assert_eq!(
            neve_proxy::ProxyConfig::from_toml(&mutual)
                .unwrap()
                .tls
                .unwrap()
                .client_ca,
            Some("/etc/neve/clients.pem".into())
        );
        // A key without its certificate, or a misspelt field: refused by name.
        let e = ServerConfig::from_toml("[tls]\nkey = 'k'\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cert"), "{e}");
        let e = ServerConfig::from_toml("[tls]\ncert = 'c'\nkey = 'k'\nca = 'x'\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("ca"), "{e}");
        let e = neve_proxy::ProxyConfig::from_toml("[tls]\ncert = 'c'\n").unwrap_err();
        assert!(e.to_string().contains("key"), "{e}");
    }
}
