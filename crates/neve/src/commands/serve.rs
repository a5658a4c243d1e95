//! `neve serve` and `neve hash-token`.

use std::io::Read;

use neve_server::{Server, ServerConfig};

use crate::cli::{
    HashTokenArgs, MaintainArgs, MaintenanceArgs, ProxyArgs, ProxyKeyArgs, ServeArgs,
};
use crate::error::{CliError, Result};

fn read_config(path: Option<&std::path::Path>) -> Result<ServerConfig> {
    Ok(match path {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(CliError::read(format!("config file {}", path.display())))?;
            ServerConfig::from_toml(&text)?
        }
        None => ServerConfig::default(),
    })
}

fn apply_policy(config: &mut ServerConfig, p: &MaintenanceArgs) {
    let m = &mut config.maintenance;
    if let Some(d) = p.maintenance_interval {
        m.interval = d.into();
    }
    if let Some(n) = p.merge_min_files {
        m.min_files = n;
    }
    if let Some(b) = p.merge_target_file_size {
        m.target_file_size = b.as_u64();
    }
    if let Some(d) = p.gc_grace {
        m.gc_grace = d.into();
    }
}

/// `neve maintain`: the maintenance loop alone.
pub async fn maintain(a: MaintainArgs) -> Result<()> {
    let mut config = read_config(a.config.as_deref())?;
    if let Some(w) = a.warehouse {
        config.warehouse = w;
    }
    apply_policy(&mut config, &a.policy);
    // The checks `neve serve` makes of its settings (a worker's gc grace too short loses rows
    // a server is about to commit), not of its ports: this process answers on none.
    config.validate_settings()?;
    let metrics = std::sync::Arc::new(neve_server::metrics::Metrics::new());
    if a.once {
        let found = neve_server::maintain::discover(&config.table_roots()).await;
        let round =
            neve_server::maintain::round(&found.tables, &config.maintenance, &metrics).await;
        match round.elsewhere {
            0 => println!("maintained {} tables", found.tables.len()),
            n => println!(
                "maintained {} tables ({n} by another server or worker at the time)",
                found.tables.len()
            ),
        }
        if round.failed > 0 || !found.complete {
            return Err(CliError::MaintenanceFailed {
                failed: round.failed,
                tables: found.tables.len(),
                listed: found.complete,
                lasting: round.lasting,
            });
        }
        return Ok(());
    }
    let (tx, rx) = tokio::sync::watch::channel(false);
    if let Some(addr) = a.metrics_listen {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| neve_server::Error::Listen { addr, source })?;
        println!(
            "neve maintain metrics on http://{}/metrics",
            listener.local_addr()?
        );
        let mut stop = rx.clone();
        tokio::spawn(neve_server::metrics::serve_alone(
            listener,
            metrics.clone(),
            async move {
                let _ = stop.wait_for(|s| *s).await;
            },
        ));
    }
    let mut lp = tokio::spawn(neve_server::maintain::run(
        config.table_roots(),
        config.maintenance.clone(),
        metrics,
        neve_server::maintain::first_discovery(config.maintenance.interval, rand::random()),
        rx,
    ));
    tokio::select! {
        _ = shutdown_signal() => {}
        // The loop never ends on its own: if it did, the worker says so rather than idle.
        ended = &mut lp => {
            return Err(CliError::MaintenanceStopped {
                reason: match ended {
                    Ok(()) => "it returned".into(),
                    Err(e) => e.to_string(),
                },
            });
        }
    }
    let _ = tx.send(true);
    lp.abort();
    Ok(())
}

pub async fn run(a: ServeArgs) -> Result<()> {
    // A key that would read every table, given where nothing serves it: say so, not ignore it.
    if a.s3_listen.is_none()
        && (a.s3_key.access_key_id.is_some() || a.s3_key.secret_access_key.is_some())
    {
        return Err(CliError::Usage(
            "--access-key-id and --secret-access-key (NEVE_PROXY_ACCESS_KEY_ID, \
             NEVE_PROXY_SECRET_ACCESS_KEY) are the S3 keys of --s3-listen, which is not given"
                .into(),
        ));
    }
    let mut config = read_config(a.config.as_deref())?;
    apply_policy(&mut config, &a.policy);
    if a.no_maintenance {
        config.maintenance.enabled = false;
    }
    if let Some(w) = a.warehouse {
        config.warehouse = w;
    }
    if let Some(l) = a.listen {
        config.listen = l;
    }
    if let Some(t) = a.token.filter(|t| !t.is_empty()) {
        if !config.tenants.is_empty() {
            return Err(CliError::Usage(
                "--token (NEVE_TOKEN) is the single tenant's admin token; with tenants in the config, tokens are listed there".into(),
            ));
        }
        config.admin_token = Some(neve_server::config::Secret::new(t));
    }
    if let Some(d) = a.flush_interval {
        config.ingest.flush_interval = d.into();
    }
    if let Some(b) = a.max_pending_bytes {
        config.ingest.max_pending_bytes = b.as_u64();
    }
    if let Some(l) = a.flight_listen {
        config.flight_listen = Some(l);
    }
    if let Some(n) = a.max_concurrent_queries {
        config.query.max_concurrent = n;
    }
    if let Some(b) = a.query_memory {
        config.query.memory_per_query = b.as_u64();
    }
    if let Some(d) = a.query_timeout {
        config.query.timeout = d.into();
    }
    if let Some(d) = a.shutdown_grace {
        config.shutdown_grace = d.into();
    }
    if let Some(b) = a.max_body_bytes {
        config.ingest.max_body_bytes = b.as_u64();
    }
    if let Some(files) = a.tls.files() {
        config.tls = Some(files);
    }
    let proxy = match a.s3_listen {
        Some(listen) => {
            let mut p = proxy_config(
                a.config.as_deref(),
                Some(config.warehouse.clone()),
                &a.s3_key,
            )?;
            p.settings.listen = listen;
            // One process, one certificate for its ports.
            p.tls = config.tls.clone();
            Some(neve_proxy::Proxy::bind(p).await?)
        }
        None => None,
    };
    let server = Server::bind(config.clone()).await?;
    if let Some(path) = a.config.clone() {
        let mut reloads = vec![token_reload(server.tokens())];
        if let Some(p) = &proxy {
            reloads.push(key_reload(p.keys()));
        }
        reload_on_hangup(path, reloads);
    }
    let stop = shutdown_signal();
    // One line on stdout, for scripts and tests that start the server on port 0.
    println!(
        "neve serve listening on {}://{}",
        server.scheme(),
        server.local_addr()
    );
    if let Some(f) = server.flight_addr() {
        println!(
            "neve flight sql listening on {}://{f}",
            server.flight_scheme()
        );
    }
    tracing::info!(warehouse = %config.warehouse, listen = %server.local_addr(), "serving");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let proxy_task = proxy.map(|p| {
        println!(
            "neve proxy listening on {}://{}",
            p.scheme(),
            p.local_addr()
        );
        let mut rx = stop_rx.clone();
        let p = p.with_shutdown_grace(config.shutdown_grace);
        tokio::spawn(p.run(async move {
            let _ = rx.wait_for(|s| *s).await;
        }))
    });
    server
        .run(async move {
            stop.await;
            let _ = stop_tx.send(true);
        })
        .await?;
    if let Some(t) = proxy_task {
        t.await.map_err(|e| {
            CliError::Core(neve_core::Error::TaskFailed(format!("the S3 proxy: {e}")))
        })??;
    }
    Ok(())
}

/// The proxy's settings: the shared config file (if any), then flags.
fn proxy_config(
    path: Option<&std::path::Path>,
    warehouse: Option<String>,
    key: &ProxyKeyArgs,
) -> Result<neve_proxy::ProxyConfig> {
    let mut config = match path {
        Some(path) => neve_proxy::ProxyConfig::from_toml(
            &std::fs::read_to_string(path)
                .map_err(CliError::read(format!("config file {}", path.display())))?,
        )?,
        None => neve_proxy::ProxyConfig::new(""),
    };
    if let Some(w) = warehouse.filter(|w| !w.is_empty()) {
        config.warehouse = w;
    }
    match (&key.access_key_id, &key.secret_access_key) {
        (Some(id), Some(secret)) => {
            config.single_key = Some(neve_proxy::AccessKeyConfig {
                id: id.clone(),
                secret: Some(secret.clone()),
                secret_env: None,
                buckets: None,
            })
        }
        (None, None) => {}
        _ => {
            return Err(CliError::Usage(
                "give both --access-key-id and --secret-access-key (or neither)".into(),
            ))
        }
    }
    Ok(config)
}

/// `neve proxy`: the S3 API over the warehouse's tables.
pub async fn proxy(a: ProxyArgs) -> Result<()> {
    let mut config = proxy_config(a.config.as_deref(), a.warehouse, &a.key)?;
    if let Some(l) = a.listen {
        config.settings.listen = l;
    }
    if let Some(d) = a.refresh_interval {
        config.settings.refresh_interval = d.into();
    }
    let cache = &mut config.settings.cache;
    if let Some(b) = a.cache_memory {
        cache.memory = b.as_u64();
    }
    if let Some(b) = a.cache_disk {
        cache.disk = b.as_u64();
    }
    if let Some(d) = a.cache_dir {
        cache.dir = Some(d);
    }
    if let Some(files) = a.tls.files() {
        config.tls = Some(files);
    }
    let proxy = neve_proxy::Proxy::bind(config.clone()).await?;
    if let Some(path) = a.config.clone() {
        reload_on_hangup(path, vec![key_reload(proxy.keys())]);
    }
    let stop = shutdown_signal();
    println!(
        "neve proxy listening on {}://{}",
        proxy.scheme(),
        proxy.local_addr()
    );
    tracing::info!(warehouse = %config.warehouse, listen = %proxy.local_addr(), "serving S3");
    proxy.run(stop).await?;
    Ok(())
}

/// What a SIGHUP does with the config file read again.
type Reload = Box<dyn Fn(&std::path::Path) + Send>;

fn token_reload(tokens: neve_server::Tokens) -> Reload {
    Box::new(move |p| match tokens.reload_file(p) {
        Ok(n) => {
            tracing::info!(tokens = n, file = %p.display(), "tokens read again: in force for new requests")
        }
        Err(e) => {
            tracing::warn!(error = %e, file = %p.display(), "tokens not read again; those in force are kept")
        }
    })
}

fn key_reload(keys: neve_proxy::KeyReloader) -> Reload {
    Box::new(move |p| match keys.reload_file(p) {
        Ok(n) => {
            tracing::info!(keys = n, file = %p.display(), "S3 access keys read again: in force for new requests")
        }
        Err(e) => {
            tracing::warn!(error = %e, file = %p.display(), "S3 access keys not read again; those in force are kept")
        }
    })
}

/// On each SIGHUP, the config file's tokens and access keys put in force (revoking one,
/// adding one) without a restart; a file that cannot be used leaves them as they were.
///
/// The handler is in place when this returns (before the process says it listens): a SIGHUP
/// sent as soon as it does must not end the process, as the default action would.
fn reload_on_hangup(path: std::path::PathBuf, reloads: Vec<Reload>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            tracing::warn!("no SIGHUP handler: tokens and keys change with a restart");
            return;
        };
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                for reload in &reloads {
                    reload(&path);
                }
            }
        });
    }
    #[cfg(not(unix))]
    let _ = (path, reloads);
}

/// SIGTERM or Ctrl-C (SIGINT). The handlers are in place when this returns, not when the
/// future is first polled: a SIGTERM sent as soon as the process says it listens (a supervisor
/// stopping it at once) starts the graceful shutdown instead of killing it.
fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
        let mut int = signal(SignalKind::interrupt()).expect("a SIGINT handler");
        async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

pub fn hash_token(a: HashTokenArgs) -> Result<()> {
    let token = if a.token == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(CliError::read("the token from standard input"))?;
        s.trim().to_string()
    } else {
        a.token
    };
    println!("{}", neve_server::auth::hash_token(&token));
    Ok(())
}
