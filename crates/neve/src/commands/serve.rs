//! `neve serve` and `neve hash-token`.

use std::io::Read;

use neve_server::{Server, ServerConfig};

use crate::cli::{HashTokenArgs, ServeArgs};
use crate::error::{CliError, Result};

pub async fn run(a: ServeArgs) -> Result<()> {
    let mut config = match &a.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)?;
            ServerConfig::from_toml(&text)?
        }
        None => ServerConfig::default(),
    };
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
        config.admin_token = Some(t);
    }
    if let Some(d) = a.flush_interval {
        config.ingest.flush_interval = d.into();
    }
    if let Some(b) = a.max_pending_bytes {
        config.ingest.max_pending_bytes = b.as_u64();
    }
    if let Some(b) = a.max_body_bytes {
        config.ingest.max_body_bytes = b.as_u64();
    }
    let server = Server::bind(config.clone()).await?;
    // One line on stdout, for scripts and tests that start the server on port 0.
    println!("neve serve listening on http://{}", server.local_addr());
    tracing::info!(warehouse = %config.warehouse, listen = %server.local_addr(), "serving");
    server.run(shutdown_signal()).await?;
    Ok(())
}

/// SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

pub fn hash_token(a: HashTokenArgs) -> Result<()> {
    let token = if a.token == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s)?;
        s.trim().to_string()
    } else {
        a.token
    };
    println!("{}", neve_server::auth::hash_token(&token));
    Ok(())
}
