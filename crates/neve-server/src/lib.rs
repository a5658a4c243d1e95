//! `neve serve`: an HTTP ingest server. Many small insert requests become few commits (group
//! commit per table), each request is answered only once its rows are durable in the bucket,
//! and a retried request (`Idempotency-Key`) is never written twice, across any number of
//! instances, because the keys are in the table's log. See docs/SERVER.md.

pub mod auth;
pub mod config;
pub mod error;
pub(crate) mod http;
pub mod ingest;
pub mod maintain;
pub mod metrics;
pub mod query;
pub mod redact;
mod tables;

use std::sync::atomic::Ordering;
use std::sync::Arc;

pub use config::ServerConfig;
pub use error::{Error, Result};

/// Table, tenant and namespace names: letters, digits, `_` and `-`, not starting with `_`
/// (a table's own folders are `_log` and `_data`: a line-protocol measurement of that name
/// would land inside a table).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('_')
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Whether `name` can be a namespace (a folder of tables, one level down): a valid name
/// that SQL does not reserve as a schema (`public` reads the tenant's root,
/// `information_schema` is the catalog's; identifiers are matched case-insensitively).
pub fn check_namespace(name: &str) -> Result<()> {
    if !valid_name(name) {
        return Err(Error::InvalidTableName {
            name: name.to_string(),
        });
    }
    if reserved_namespace(name) {
        return Err(Error::ReservedNamespace {
            name: name.to_string(),
        });
    }
    Ok(())
}

fn reserved_namespace(name: &str) -> bool {
    name.eq_ignore_ascii_case("public") || name.eq_ignore_ascii_case("information_schema")
}

/// Puts a config file's tokens in force in a running server (`neve serve` on SIGHUP).
#[derive(Clone)]
pub struct Tokens(Arc<http::AppState>);

impl Tokens {
    /// The tokens of `new` for requests from now on; refused, the ones in force kept, when
    /// `new` changes anything but tokens that a running server can take (see
    /// `AppState::reload_tokens`). Counted in the metrics either way.
    pub fn reload(&self, new: &ServerConfig) -> Result<usize> {
        self.counted(self.0.reload_tokens(new))
    }

    /// As [`Tokens::reload`], from the config file at `path`.
    pub fn reload_file(&self, path: &std::path::Path) -> Result<usize> {
        let read = std::fs::read_to_string(path)
            .map_err(|e| Error::InvalidConfig {
                reason: format!("{}: {e}", path.display()),
            })
            .and_then(|text| ServerConfig::from_toml(&text));
        match read {
            Ok(config) => self.reload(&config),
            Err(e) => self.counted(Err(e)),
        }
    }

    fn counted(&self, done: Result<usize>) -> Result<usize> {
        match &done {
            Ok(_) => self.0.metrics.token_reloads.inc(),
            Err(_) => self.0.metrics.token_reload_failures.inc(),
        };
        done
    }
}

/// A server bound to its address, not yet serving.
pub struct Server {
    listener: tokio::net::TcpListener,
    flight: Option<tokio::net::TcpListener>,
    /// The acceptors of the HTTP and the Flight SQL ports (ALPN `http/1.1` and `h2`), sharing
    /// one certificate, with TLS.
    tls: Option<(neve_proxy::tls::Acceptor, neve_proxy::tls::Acceptor)>,
    state: Arc<http::AppState>,
}

impl Server {
    /// Check the settings and bind the listening socket.
    pub async fn bind(config: ServerConfig) -> Result<Self> {
        config.validate()?;
        let auth = auth::Auth::new(&config)?;
        let metrics = Arc::new(metrics::Metrics::new());
        let tls = match &config.tls {
            Some(files) => {
                let certs =
                    neve_proxy::tls::Certificates::load(files.clone(), metrics.tls.clone())?;
                Some((certs.acceptor(&[b"http/1.1"])?, certs.acceptor(&[b"h2"])?))
            }
            None => None,
        };
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| Error::Listen {
                addr: config.listen,
                source,
            })?;
        let flight = match config.flight_listen {
            Some(addr) => Some(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|source| Error::Listen { addr, source })?,
            ),
            None => None,
        };
        let state = Arc::new(http::AppState::new(config, auth, metrics));
        Ok(Self {
            listener,
            flight,
            tls,
            state,
        })
    }

    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.listener.local_addr().expect("a bound socket")
    }

    /// What puts a changed config file's tokens in force while the server runs.
    pub fn tokens(&self) -> Tokens {
        Tokens(self.state.clone())
    }

    /// `https` with TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// Flight SQL's: `grpc+tls` with TLS, else `grpc`.
    pub fn flight_scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "grpc+tls"
        } else {
            "grpc"
        }
    }

    /// Where Flight SQL listens, if it does.
    pub fn flight_addr(&self) -> Option<std::net::SocketAddr> {
        self.flight
            .as_ref()
            .map(|l| l.local_addr().expect("a bound socket"))
    }

    /// Serve until `shutdown` resolves; then stop accepting, answer every queued request
    /// (flushing the queues) and return.
    pub async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        let state = self.state.clone();
        // The warehouse must be reachable before the server says it is ready.
        let probe = neve_core::TableLocation::parse(&state.config.warehouse)?;
        {
            use futures::TryStreamExt;
            let root = probe.child("");
            let mut list = probe.store.list(Some(&root));
            list.try_next().await.map_err(|e| Error::Table(e.into()))?;
        }
        state.ready.store(true, Ordering::SeqCst);
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        // When shutdown began: new requests stop then, and in-flight ones have until
        // `shutdown_grace` after it.
        let (stopping_tx, stopping) = tokio::sync::watch::channel(None::<tokio::time::Instant>);
        let flight_stop = stopping.clone();
        let maintenance = state.config.maintenance.enabled.then(|| {
            tokio::spawn(maintain::run(
                state.config.table_roots(),
                state.config.maintenance.clone(),
                state.metrics.clone(),
                maintain::first_discovery(state.config.maintenance.interval, rand::random()),
                stop_rx,
            ))
        });
        let (http_tls, flight_tls) = self.tls.unzip();
        let handshake_timeout = state.config.header_read_timeout;
        let max_connections = state.config.max_connections;
        let flight = self.flight.map(|listener| {
            let service = arrow_flight::flight_service_server::FlightServiceServer::new(
                redact::RedactedFlight::new(
                    query::flight::FlightSqlServer::new(state.clone()),
                    state.redact.clone(),
                    state.metrics.clone(),
                ),
            );
            let mut rx = flight_stop;
            tokio::spawn(async move {
                let stopped = async move {
                    let _ = rx.wait_for(|s| s.is_some()).await;
                };
                let router = tonic::transport::Server::builder().add_service(service);
                // The HTTP port's connection cap and handshake timeout, and TCP_NODELAY:
                // without it, h2's 16 KiB frames (the most a Go client takes) wait for ACKs
                // (Nagle): the first batch came 50 ms late and a 4 GB stream took 20% longer.
                use futures::StreamExt;
                let incoming = neve_proxy::serve::Incoming::new(
                    listener,
                    flight_tls,
                    handshake_timeout,
                    max_connections,
                )
                .map(|c| c.map(query::flight::FlightConn));
                let served = router.serve_with_incoming_shutdown(incoming, stopped).await;
                if let Err(e) = served {
                    tracing::error!(error = %e, "flight sql server failed");
                }
            })
        });
        let app = http::router(state.clone());
        let st = state.clone();
        let serving = neve_proxy::serve::serve(
            self.listener,
            app,
            neve_proxy::serve::Limits {
                header_read: state.config.header_read_timeout,
                body_idle: state.config.body_read_timeout,
                max_connections: state.config.max_connections,
            },
            http_tls,
            async move {
                shutdown.await;
                st.ready.store(false, Ordering::SeqCst);
                let _ = stopping_tx.send(Some(tokio::time::Instant::now()));
                tracing::info!("shutting down: no new connections; answering queued requests");
            },
        );
        let grace = state.config.shutdown_grace;
        // Requests in flight get `shutdown_grace` to finish; a query streaming to a client
        // that stopped reading would otherwise keep the process alive for ever.
        tokio::select! {
            _ = serving => {}
            _ = async {
                let mut rx = stopping.clone();
                let _ = rx.wait_for(|s| s.is_some()).await;
                tokio::time::sleep(grace).await;
            } => {
                tracing::warn!(?grace, "connections still open after the shutdown grace: closed");
            }
        }
        if let Some(f) = flight {
            // Flight stopped accepting with HTTP; its streams share the same grace. Waited for
            // before the drain: an ingest stream ending now still queues its rows.
            let started = (*stopping.borrow()).unwrap_or_else(tokio::time::Instant::now);
            let abort = f.abort_handle();
            if tokio::time::timeout_at(started + grace, f).await.is_err() {
                tracing::warn!(
                    ?grace,
                    "flight streams still open after the shutdown grace: closed"
                );
                abort.abort();
            }
        }
        // Queued requests are committed, and metadata written after answering is written,
        // before the process ends: within one more grace each, as a store that stopped
        // answering would hold the process for ever. Cut off, a commit is as a crash leaves
        // it (landed or not, nothing half-made; its clients were not answered), and the
        // metadata is caught up by the next sync.
        if tokio::time::timeout(grace, state.ingest.drain())
            .await
            .is_err()
        {
            tracing::warn!(
                ?grace,
                "queued requests not committed within the shutdown grace: abandoned"
            );
        }
        if tokio::time::timeout(grace, state.iceberg_settled())
            .await
            .is_err()
        {
            tracing::warn!(
                ?grace,
                "Iceberg metadata not written within the shutdown grace: the next sync writes it"
            );
        }
        // A merge cut short commits nothing; its partial output is gc's to collect.
        let _ = stop_tx.send(true);
        if let Some(m) = maintenance {
            m.abort();
        }
        tracing::info!("stopped");
        Ok(())
    }
}
