//! HTTP/1 serving for the proxy and the server: `axum::serve`, plus the timeout it lacks. A
//! client that opens connections and sends their headers a byte at a time (slowloris) would
//! otherwise hold each connection, and a task, for as long as it likes, with no credentials.

use std::future::Future;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};

/// How long a client may take to send a request's headers, from its first byte (or from the
/// end of the previous response on a kept-alive connection) to the blank line.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Serve `app` on `listener` until `shutdown` resolves, then let the requests in flight finish
/// (the caller bounds how long). Each connection: HTTP/1.1 with keep-alive, `TCP_NODELAY`
/// (results leave as soon as they are written, not held back for the peer's ACK), and
/// `header_read_timeout` for its headers, after which it is closed.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    header_read_timeout: Duration,
    shutdown: impl Future<Output = ()> + Send,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let tcp = match accepted {
                    Ok((tcp, _)) => tcp,
                    Err(e) => {
                        // Out of file descriptors, or a connection reset while queued: wait a
                        // moment rather than spin.
                        tracing::debug!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                };
                if let Err(e) = tcp.set_nodelay(true) {
                    tracing::debug!(error = %e, "TCP_NODELAY");
                }
                let service = hyper_util::service::TowerToHyperService::new(app.clone());
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(header_read_timeout)
                    .serve_connection(TokioIo::new(tcp), service);
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::trace!(error = %e, "connection ended");
                    }
                });
            }
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    graceful.shutdown().await;
}
