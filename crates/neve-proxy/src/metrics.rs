//! Prometheus metrics (`GET /_neve/metrics`; a bucket name cannot start with `_`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OpLabels {
    pub op: String,
}

/// Every metric the proxy exports.
pub struct Metrics {
    /// Shared with the cache, which registers foyer's own metrics in it.
    pub registry: std::sync::Arc<parking_lot::Mutex<Registry>>,
    /// Operations that ran (after the access check), by S3 operation.
    pub requests: Family<OpLabels, Counter>,
    /// Requests refused by the access check, by S3 operation.
    pub refusals: Family<OpLabels, Counter>,
    pub bytes_served: Counter,
    pub upstream_requests: Counter,
    pub upstream_bytes: Counter,
    pub log_refreshes: Counter,
    pub cache_hits: Counter,
    pub cache_misses: Counter,
    pub cache_hit_bytes: Counter,
    pub cache_dropped_blocks: Counter,
    pub list_seconds: Histogram,
    pub tables_in_memory: Gauge,
    pub tables_forgotten: Counter,
    /// Access keys read again from the config file (SIGHUP), and files refused then.
    pub key_reloads: Counter,
    pub key_reload_failures: Counter,
    pub tls: crate::tls::TlsMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut r = Registry::with_prefix("neve_proxy");
        let m = Self {
            requests: Family::default(),
            refusals: Family::default(),
            bytes_served: Counter::default(),
            upstream_requests: Counter::default(),
            upstream_bytes: Counter::default(),
            log_refreshes: Counter::default(),
            cache_hits: Counter::default(),
            cache_misses: Counter::default(),
            cache_hit_bytes: Counter::default(),
            cache_dropped_blocks: Counter::default(),
            list_seconds: Histogram::new(exponential_buckets(0.0005, 2.0, 14)),
            tables_in_memory: Gauge::default(),
            tables_forgotten: Counter::default(),
            key_reloads: Counter::default(),
            key_reload_failures: Counter::default(),
            tls: Default::default(),
            registry: Default::default(),
        };
        r.register("requests", "S3 operations served", m.requests.clone());
        r.register("refusals", "Requests refused by policy", m.refusals.clone());
        r.register(
            "served_bytes",
            "Object bytes sent to clients",
            m.bytes_served.clone(),
        );
        r.register(
            "upstream_requests",
            "GETs sent to the warehouse's store for object data",
            m.upstream_requests.clone(),
        );
        r.register(
            "upstream_bytes",
            "Object bytes read from the warehouse's store",
            m.upstream_bytes.clone(),
        );
        r.register(
            "log_refreshes",
            "Reads of a table log's tail",
            m.log_refreshes.clone(),
        );
        r.register(
            "list_seconds",
            "Time to answer a listing",
            m.list_seconds.clone(),
        );
        r.register(
            "cache_hits",
            "Blocks read from the cache",
            m.cache_hits.clone(),
        );
        r.register(
            "cache_misses",
            "Blocks fetched from the store for the cache",
            m.cache_misses.clone(),
        );
        r.register(
            "cache_hit_bytes",
            "Bytes read from the cache",
            m.cache_hit_bytes.clone(),
        );
        r.register(
            "cache_dropped_blocks",
            "Cached blocks dropped because their file was removed from its table",
            m.cache_dropped_blocks.clone(),
        );
        r.register(
            "tables_in_memory",
            "Tables whose snapshots are kept in memory",
            m.tables_in_memory.clone(),
        );
        r.register(
            "tables_forgotten",
            "Tables dropped from memory after keep_idle_tables without a request",
            m.tables_forgotten.clone(),
        );
        r.register(
            "key_reloads",
            "Access keys read again from the config file (SIGHUP)",
            m.key_reloads.clone(),
        );
        r.register(
            "key_reload_failures",
            "Config files refused when reading access keys again (the keys before stay in force)",
            m.key_reload_failures.clone(),
        );
        m.tls.register(&mut r);
        Self {
            registry: std::sync::Arc::new(parking_lot::Mutex::new(r)),
            ..m
        }
    }

    pub fn served(&self, op: &str) {
        self.requests
            .get_or_create(&OpLabels { op: op.to_string() })
            .inc();
    }

    pub fn refused(&self, op: &str) {
        self.refusals
            .get_or_create(&OpLabels { op: op.to_string() })
            .inc();
    }

    /// The text exposition format, the process's figures after the proxy's own.
    pub fn encode(&self) -> String {
        crate::process::render(&self.registry.lock())
    }
}
