//! Prometheus metrics (`GET /metrics`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabels {
    pub code: String,
}

/// What a background gc deleted: `removed` (merged-away or deleted files past the retention),
/// `orphan`, `interrupted_upload` (a local PUT's staging file), `log_entry`, `iceberg`,
/// `claim` (a maintenance claim its holder left).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: &'static str,
}

/// A background maintenance task: `open`, `merge`, `gc`, `list` (the warehouse's walk) or
/// `panic` (a table's visit).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TaskLabels {
    pub task: &'static str,
}

/// A Flight RPC (`do_get`, `get_flight_info`, …) and how it ended: the gRPC code's name as Go
/// and grpc-prometheus spell it (`Ok`, `InvalidArgument`, `Cancelled` for a stream the client
/// dropped).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FlightLabels {
    pub method: &'static str,
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    pub method: &'static str,
}

type Seconds = Family<MethodLabels, Histogram, fn() -> Histogram>;

fn call_seconds() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 20))
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub route: String,
    pub status: u16,
}

/// Every metric the server exports.
pub struct Metrics {
    pub registry: Registry,
    pub requests: Family<RouteLabels, Counter>,
    pub rows_in: Counter,
    pub bytes_in: Counter,
    pub flushes: Counter,
    pub flush_failures: Counter,
    pub commits: Counter,
    pub commit_attempts: Counter,
    pub commit_conflicts: Counter,
    pub duplicates: Counter,
    pub files_written: Counter,
    pub rejected_overloaded: Counter,
    pub queued_requests: Gauge,
    pub queued_bytes: Gauge,
    pub ingest_queues: Gauge,
    pub tables_open: Gauge,
    pub flush_rows: Histogram,
    pub flush_seconds: Histogram,
    pub ack_seconds: Histogram,
    pub merges: Counter,
    pub gcs: Counter,
    pub gc_deleted_files: Family<KindLabels, Counter>,
    pub gc_deleted_bytes: Counter,
    pub maintenance_failures: Family<TaskLabels, Counter>,
    pub maintenance_elsewhere: Counter,
    pub queries_ok: Counter,
    pub queries_failed: Family<CodeLabels, Counter>,
    pub queries_refused: Counter,
    pub queries_cancelled: Counter,
    pub query_seconds: Histogram,
    pub query_rows: Counter,
    pub query_bytes: Counter,
    pub query_read_bytes: Counter,
    /// Flight RPCs by method and outcome, and their time to the last message (a stream's end).
    pub flight_calls: Family<FlightLabels, Counter>,
    pub flight_seconds: Seconds,
    /// Token lists read again from the config file (SIGHUP), and files refused then.
    pub token_reloads: Counter,
    pub token_reload_failures: Counter,
    /// Certificate reloads and handshake failures, with `--tls-cert`.
    pub tls: neve_proxy::tls::TlsMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("neve");
        let m = Self {
            requests: Family::default(),
            rows_in: Counter::default(),
            bytes_in: Counter::default(),
            flushes: Counter::default(),
            flush_failures: Counter::default(),
            commits: Counter::default(),
            commit_attempts: Counter::default(),
            commit_conflicts: Counter::default(),
            duplicates: Counter::default(),
            files_written: Counter::default(),
            rejected_overloaded: Counter::default(),
            queued_requests: Gauge::default(),
            queued_bytes: Gauge::default(),
            ingest_queues: Gauge::default(),
            tables_open: Gauge::default(),
            flush_rows: Histogram::new(exponential_buckets(10.0, 4.0, 10)),
            flush_seconds: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
            ack_seconds: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
            merges: Counter::default(),
            gcs: Counter::default(),
            gc_deleted_files: Family::default(),
            gc_deleted_bytes: Counter::default(),
            maintenance_failures: Family::default(),
            maintenance_elsewhere: Counter::default(),
            queries_ok: Counter::default(),
            queries_failed: Family::default(),
            queries_refused: Counter::default(),
            queries_cancelled: Counter::default(),
            query_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 20)),
            query_rows: Counter::default(),
            query_bytes: Counter::default(),
            query_read_bytes: Counter::default(),
            flight_calls: Family::default(),
            flight_seconds: Family::new_with_constructor(call_seconds),
            token_reloads: Counter::default(),
            token_reload_failures: Counter::default(),
            tls: Default::default(),
            registry: Registry::default(),
        };
        registry.register(
            "http_requests",
            "HTTP requests by route and status",
            m.requests.clone(),
        );
        registry.register(
            "ingest_rows",
            "Rows accepted into queues",
            m.rows_in.clone(),
        );
        registry.register(
            "ingest_bytes",
            "Request body bytes received",
            m.bytes_in.clone(),
        );
        registry.register("flushes", "Group commits started", m.flushes.clone());
        registry.register(
            "flush_failures",
            "Group commits that failed",
            m.flush_failures.clone(),
        );
        registry.register("commits", "Commits made by flushes", m.commits.clone());
        registry.register(
            "commit_attempts",
            "Commit attempts (PUTs of a log entry)",
            m.commit_attempts.clone(),
        );
        registry.register(
            "commit_conflicts",
            "Commit attempts lost to another writer",
            m.commit_conflicts.clone(),
        );
        registry.register(
            "duplicate_requests",
            "Requests whose idempotency key was committed already",
            m.duplicates.clone(),
        );
        registry.register(
            "files_written",
            "Data files written by flushes",
            m.files_written.clone(),
        );
        registry.register(
            "rejected_overloaded",
            "Requests refused with 429",
            m.rejected_overloaded.clone(),
        );
        registry.register(
            "queue_requests",
            "Requests waiting in queues",
            m.queued_requests.clone(),
        );
        registry.register(
            "queue_bytes",
            "Memory held by queued requests",
            m.queued_bytes.clone(),
        );
        registry.register(
            "ingest_queues",
            "Tables with a queue and its flush task (idle ones end after keep_idle_tables)",
            m.ingest_queues.clone(),
        );
        registry.register(
            "tables_open",
            "Table handles kept in memory (idle ones are dropped after keep_idle_tables)",
            m.tables_open.clone(),
        );
        registry.register("flush_rows", "Rows per flush", m.flush_rows.clone());
        registry.register(
            "flush_seconds",
            "Time to write and commit a flush",
            m.flush_seconds.clone(),
        );
        registry.register(
            "ack_seconds",
            "Time from a request's arrival in the queue to its answer",
            m.ack_seconds.clone(),
        );
        registry.register(
            "merges",
            "Background merges that committed",
            m.merges.clone(),
        );
        registry.register("gc_runs", "Background gc runs", m.gcs.clone());
        registry.register(
            "gc_deleted_files",
            "Files background gc deleted, by kind",
            m.gc_deleted_files.clone(),
        );
        registry.register(
            "gc_deleted_bytes",
            "Bytes of data files and interrupted uploads background gc deleted",
            m.gc_deleted_bytes.clone(),
        );
        registry.register(
            "maintenance_failures",
            "Background maintenance steps that failed, by task",
            m.maintenance_failures.clone(),
        );
        registry.register(
            "maintenance_elsewhere",
            "Table visits skipped as another server or worker was maintaining the table",
            m.maintenance_elsewhere.clone(),
        );
        registry.register(
            "queries_ok",
            "SQL queries answered to the end",
            m.queries_ok.clone(),
        );
        registry.register(
            "queries_failed",
            "SQL queries that failed, by error code",
            m.queries_failed.clone(),
        );
        registry.register(
            "queries_refused",
            "SQL queries refused with 429 (query.max_concurrent)",
            m.queries_refused.clone(),
        );
        registry.register(
            "queries_cancelled",
            "SQL queries stopped because the client hung up",
            m.queries_cancelled.clone(),
        );
        registry.register(
            "query_seconds",
            "Time of a SQL query to its last byte",
            m.query_seconds.clone(),
        );
        registry.register(
            "query_rows",
            "Rows sent by SQL queries",
            m.query_rows.clone(),
        );
        registry.register(
            "query_result_bytes",
            "Result bytes sent by SQL queries",
            m.query_bytes.clone(),
        );
        registry.register(
            "query_read_bytes",
            "Bytes SQL queries read from storage",
            m.query_read_bytes.clone(),
        );
        registry.register(
            "flight_calls",
            "Flight RPCs by method and gRPC code (a stream's code is its end's)",
            m.flight_calls.clone(),
        );
        registry.register(
            "flight_call_seconds",
            "Time of a Flight RPC to its last message",
            m.flight_seconds.clone(),
        );
        registry.register(
            "token_reloads",
            "Tokens read again from the config file (SIGHUP)",
            m.token_reloads.clone(),
        );
        registry.register(
            "token_reload_failures",
            "Config files refused when reading tokens again (the tokens before stay in force)",
            m.token_reload_failures.clone(),
        );
        m.tls.register(&mut registry);
        Self { registry, ..m }
    }

    /// Count a query that failed (or was refused) with `e`.
    pub fn query_outcome(&self, e: &crate::error::Error) {
        self.queries_failed
            .get_or_create(&CodeLabels {
                code: e.code().to_string(),
            })
            .inc();
    }

    /// Count a Flight RPC that ended with `code` after `seconds`.
    pub fn flight_call(&self, method: &'static str, code: tonic::Code, seconds: f64) {
        self.flight_calls
            .get_or_create(&FlightLabels {
                method,
                code: format!("{code:?}"),
            })
            .inc();
        self.flight_seconds
            .get_or_create(&MethodLabels { method })
            .observe(seconds);
    }

    /// The text exposition format, the process's figures (`process_…`) after the server's own.
    pub fn render(&self) -> String {
        neve_proxy::process::render(&self.registry)
    }

    /// `GET /metrics`' answer: [`Metrics::render`] with its content type.
    pub fn response(&self) -> axum::response::Response {
        use axum::response::IntoResponse;
        (
            [(
                axum::http::header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            self.render(),
        )
            .into_response()
    }
}

/// `GET /metrics` (and `/healthz`) alone on `listener`, for a process that serves nothing else
/// (`neve maintain --metrics-listen`), until `shutdown` resolves.
pub async fn serve_alone(
    listener: tokio::net::TcpListener,
    metrics: std::sync::Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) {
    use axum::routing::get;
    let app = axum::Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/metrics",
            get(move || {
                let metrics = metrics.clone();
                async move { metrics.response() }
            }),
        );
    neve_proxy::serve::serve(listener, app, Default::default(), None, shutdown).await;
}
