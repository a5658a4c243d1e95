//! `neve proxy`: each tenant's tables as read-only S3 buckets holding exactly the tables' alive
//! data files, so ClickHouse, DuckDB, Spark or any S3 client reads a table with a glob and no
//! access to the real bucket. Requests are SigV4-signed with per-tenant keys; a listing shows
//! one snapshot, and files it listed stay readable while gc's grace lasts. See docs/PROXY.md.

pub mod auth;
pub mod buckets;
pub mod cache;
pub mod catalog;
pub mod config;
pub mod error;
pub mod listing;
pub mod metrics;
pub mod process;
mod range_route;
mod s3;
pub mod serve;
pub mod tls;

use std::sync::Arc;

use axum::routing::get;
use neve_core::TableLocation;
use s3s::service::S3ServiceBuilder;

pub use config::{AccessKeyConfig, ProxyConfig, ProxySettings};
pub use error::{Error, Result};

/// Bucket names as neve names them (letters, digits, `_`, `-`, `.` between table path
/// segments, a `--v`/`--t` pin): wider than AWS's rules, which forbid `_` and capitals that
/// table names may have. Path-style requests only, so no name reaches DNS.
struct TableBucketNames;

impl s3s::validation::NameValidation for TableBucketNames {
    fn validate_bucket_name(&self, name: &str) -> bool {
        buckets::parse(name).is_some()
    }
}

/// Closes the connection after an error answer to a request that announced a body.
///
/// A refused write is answered before its body is read. A client that sent
/// `Expect: 100-continue` (boto3 does for every PutObject) then never sends the body, and
/// may reuse the connection; had the server kept it, it would take the next request's first
/// bytes as the unread body and parse the rest as a mangled request (seen as a `DELETE`
/// arriving as `ELETE`, failing its signature). Closing is what S3 itself does.
async fn close_after_unread_body(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::header;
    let has_body = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .is_some_and(|v| v.as_bytes() != b"0")
        || request.headers().contains_key(header::TRANSFER_ENCODING);
    let mut response = next.run(request).await;
    if has_body && (response.status().is_client_error() || response.status().is_server_error()) {
        response.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
    }
    response
}

/// A HEAD of a range is 206, as S3 answers it: s3s answers HeadObject with 200 whatever its
/// handler says, so the status follows the `Content-Range` the handler set.
async fn partial_head(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let head = request.method() == axum::http::Method::HEAD;
    let mut response = next.run(request).await;
    if head
        && response.status() == axum::http::StatusCode::OK
        && response
            .headers()
            .contains_key(axum::http::header::CONTENT_RANGE)
    {
        *response.status_mut() = axum::http::StatusCode::PARTIAL_CONTENT;
    }
    response
}

/// Each request's outcome at debug level (`NEVE_LOG=warn,neve_proxy=debug` is an access log):
/// method, path, status, and the time until the response's head left (a body streams on).
/// Never the query string, which may hold a presigned URL's signature.
async fn log_answer(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return next.run(request).await;
    }
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    let ms = started.elapsed().as_secs_f64() * 1e3;
    tracing::debug!(%method, path, status = response.status().as_u16(), ms, "answered");
    response
}

/// The requests s3s hands to neve's code instead of its own operations, after checking their
/// signature: listings (served from rendered entries) and reads with a `Range` s3s cannot
/// parse (answered as S3 answers them).
struct Routes {
    list: listing::route::ListRoute,
    range: range_route::RangeRoute,
}

#[async_trait::async_trait]
impl s3s::route::S3Route for Routes {
    fn is_match(
        &self,
        method: &axum::http::Method,
        uri: &axum::http::Uri,
        headers: &axum::http::HeaderMap,
        extensions: &mut axum::http::Extensions,
    ) -> bool {
        self.list.is_match(method, uri, headers, extensions)
            || self.range.is_match(method, uri, headers, extensions)
    }

    async fn check_access(&self, req: &mut s3s::S3Request<s3s::Body>) -> s3s::S3Result<()> {
        if req.extensions.get::<range_route::UnparsedRange>().is_some() {
            self.range.check_access(req).await
        } else {
            self.list.check_access(req).await
        }
    }

    async fn call(
        &self,
        req: s3s::S3Request<s3s::Body>,
    ) -> s3s::S3Result<s3s::S3Response<s3s::Body>> {
        if req.extensions.get::<range_route::UnparsedRange>().is_some() {
            self.range.call(req).await
        } else {
            self.list.call(req).await
        }
    }
}

/// Puts a config file's access keys in force in a running proxy (`neve proxy` and `neve
/// serve --s3-listen` on SIGHUP): revoking a key, adding one, changing a key's buckets.
#[derive(Clone)]
pub struct KeyReloader {
    keys: Arc<auth::Keys>,
    /// What the file does not say: the warehouse and the flags' single key, as started.
    warehouse: String,
    single_key: Option<AccessKeyConfig>,
    metrics: Arc<metrics::Metrics>,
}

impl KeyReloader {
    /// The keys of the file at `path` for requests from now on; a file that would not start
    /// the proxy is refused and the keys in force stay. Counted in the metrics either way.
    pub fn reload_file(&self, path: &std::path::Path) -> Result<usize> {
        let done = std::fs::read_to_string(path)
            .map_err(|e| Error::InvalidConfig {
                reason: format!("{}: {e}", path.display()),
            })
            .and_then(|text| ProxyConfig::from_toml(&text))
            .and_then(|mut config| {
                config.warehouse = self.warehouse.clone();
                config.single_key = self.single_key.clone();
                config.validate()?;
                self.keys.replace(&config)
            });
        match &done {
            Ok(_) => self.metrics.key_reloads.inc(),
            Err(_) => self.metrics.key_reload_failures.inc(),
        };
        done
    }
}

/// How long requests in flight may take once the proxy is told to stop.
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

/// A proxy bound to its address, not yet serving.
pub struct Proxy {
    listener: tokio::net::TcpListener,
    app: axum::Router,
    tls: Option<tls::Acceptor>,
    /// Timeouts and the connection cap of `[proxy]`.
    limits: serve::Limits,
    reloader: KeyReloader,
    cache: Option<Arc<cache::BlockCache>>,
    sweeper: Option<cache::sweep::Sweeper>,
    forgetter: Forgetter,
    /// How long requests in flight may take once told to stop.
    shutdown_grace: std::time::Duration,
}

/// Drops idle tables from memory: the catalog's snapshots and the rendered listing entries.
struct Forgetter {
    catalog: Arc<catalog::Catalog>,
    rendered: Arc<listing::route::Rendered>,
    metrics: Arc<metrics::Metrics>,
    idle: std::time::Duration,
}

impl Forgetter {
    fn pass(&self, now: std::time::Instant) {
        let forgotten = self.catalog.forget_idle(now, self.idle);
        self.rendered.retain(|t| self.catalog.knows(t));
        self.metrics.tables_forgotten.inc_by(forgotten as u64);
        self.metrics.tables_in_memory.set(self.catalog.len() as i64);
        if forgotten > 0 {
            tracing::debug!(forgotten, "idle tables dropped from memory");
        }
    }

    async fn run(self) {
        let period = (self.idle / 4).clamp(
            std::time::Duration::from_secs(1),
            std::time::Duration::from_secs(60),
        );
        let mut every = tokio::time::interval(period);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            self.pass(std::time::Instant::now());
        }
    }
}

impl Proxy {
    /// Check the settings, open the warehouse and bind the listening socket.
    pub async fn bind(config: ProxyConfig) -> Result<Self> {
        config.validate()?;
        let warehouse = TableLocation::parse(config.warehouse.trim_end_matches('/'))?;
        Self::bind_on(config, warehouse).await
    }

    /// As [`Proxy::bind`], on a warehouse location built elsewhere (tests, embedding).
    pub async fn bind_on(config: ProxyConfig, warehouse: TableLocation) -> Result<Self> {
        config.validate()?;
        let keys = Arc::new(auth::Keys::new(&config)?);
        let keys_handle = keys.clone();
        let metrics = Arc::new(metrics::Metrics::new());
        let metrics_handle = metrics.clone();
        let tls = match &config.tls {
            Some(files) => Some(
                tls::Certificates::load(files.clone(), metrics.tls.clone())?
                    .acceptor(&[b"http/1.1"])?,
            ),
            None => None,
        };
        let catalog = Arc::new(catalog::Catalog::new(
            warehouse,
            config.settings.refresh_interval,
        ));
        let cache = cache::BlockCache::new(&config.settings.cache, metrics.clone())
            .await?
            .map(Arc::new);
        let rendered = Arc::new(listing::route::Rendered::default());
        let forgetter = Forgetter {
            catalog: catalog.clone(),
            rendered: rendered.clone(),
            metrics: metrics.clone(),
            idle: config.settings.keep_idle_tables,
        };
        let sweeper = cache.as_ref().map(|c| {
            cache::sweep::Sweeper::new(
                catalog.clone(),
                c.clone(),
                metrics.clone(),
                config.settings.removed_files_readable,
            )
        });
        let service = s3::NeveS3 {
            cache: cache.clone(),
            catalog,
            keys: keys.clone(),
            metrics: metrics.clone(),
            settings: config.settings.clone(),
        };
        let mut builder = S3ServiceBuilder::new(service.clone());
        builder.set_auth(auth::KeyStore(keys.clone()));
        builder.set_access(auth::Access {
            keys: keys.clone(),
            metrics: metrics.clone(),
        });
        let access = auth::Access {
            keys,
            metrics: metrics.clone(),
        };
        builder.set_route(Routes {
            list: listing::route::ListRoute {
                s3: service.clone(),
                access: access.clone(),
                rendered,
            },
            range: range_route::RangeRoute {
                s3: service,
                access,
            },
        });
        builder.set_validation(TableBucketNames);
        let s3 = axum::error_handling::HandleError::new(
            builder.build(),
            |e: s3s::HttpError| async move {
                tracing::error!(error = ?e, "S3 service error");
                (
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    "internal error",
                )
            },
        );
        let m = metrics.clone();
        let app = axum::Router::new()
            .route("/_neve/metrics", get(move || async move { m.encode() }))
            .route("/_neve/healthz", get(|| async { "ok" }))
            .fallback_service(s3)
            .layer(axum::middleware::from_fn(close_after_unread_body))
            .layer(axum::middleware::from_fn(partial_head))
            .layer(axum::middleware::from_fn(log_answer));
        let addr = config.settings.listen;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| Error::Listen { addr, source })?;
        let reloader = KeyReloader {
            keys: keys_handle,
            warehouse: config.warehouse.clone(),
            single_key: config.single_key.clone(),
            metrics: metrics_handle,
        };
        Ok(Self {
            listener,
            app,
            tls,
            limits: serve::Limits {
                header_read: config.settings.header_read_timeout,
                body_idle: config.settings.body_read_timeout,
                max_connections: config.settings.max_connections,
            },
            reloader,
            cache,
            sweeper,
            forgetter,
            shutdown_grace: SHUTDOWN_GRACE,
        })
    }

    /// Another bound on the requests in flight at shutdown than [`SHUTDOWN_GRACE`]: inside
    /// `neve serve`, the server's `shutdown_grace`, so both ports stop within one bound.
    pub fn with_shutdown_grace(mut self, grace: std::time::Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.listener.local_addr().expect("a bound socket")
    }

    /// What reads the config file's access keys again while the proxy runs.
    pub fn keys(&self) -> KeyReloader {
        self.reloader.clone()
    }

    /// `https` with TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// Serve until `shutdown` resolves, then finish the requests in flight, for at most
    /// [`SHUTDOWN_GRACE`] (or [`Proxy::with_shutdown_grace`]): a reader that stopped reading mid-object would otherwise keep the
    /// process alive for ever.
    pub async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        let addr = self.local_addr();
        let grace = self.shutdown_grace;
        tracing::info!(%addr, tls = self.tls.is_some(), "neve proxy listening");
        let sweeping = self.sweeper.map(|s| tokio::spawn(s.run()));
        let forgetting = tokio::spawn(self.forgetter.run());
        let (stopping_tx, mut stopping) = tokio::sync::watch::channel(false);
        let serving = serve::serve(self.listener, self.app, self.limits, self.tls, async move {
            shutdown.await;
            let _ = stopping_tx.send(true);
        });
        tokio::select! {
            _ = serving => {}
            _ = async {
                let _ = stopping.wait_for(|s| *s).await;
                tokio::time::sleep(grace).await;
            } => {
                tracing::warn!(?grace, "S3 connections still open after the shutdown grace: closed");
            }
        }
        if let Some(s) = sweeping {
            s.abort();
        }
        forgetting.abort();
        if let Some(cache) = &self.cache {
            cache.close().await;
        }
        Ok(())
    }
}
