//! HTTP/1 serving for the proxy and the server: `axum::serve`, plus the timeouts it lacks. A
//! client that opens connections and sends their headers, or a body, a byte at a time
//! (slowloris) would otherwise hold each connection, a task and the memory reserved for its
//! body for as long as it likes.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};

mod incoming;
pub use incoming::{Conn, Incoming};

/// How long a client may take to send a request's headers, from its first byte (or from the
/// end of the previous response on a kept-alive connection) to the blank line.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a request's body may go without sending a byte, once its reading has begun.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Connections served at once, by default: below the usual open-file limits of a server
/// process, so a client opening connections without end makes others wait in the listen queue
/// instead of taking the descriptors the store's connections and the cache need.
pub const MAX_CONNECTIONS: usize = 10_000;

/// The timeouts of a connection's reads, and how many connections are served at once.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub header_read: Duration,
    pub body_idle: Duration,
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_read: HEADER_READ_TIMEOUT,
            body_idle: BODY_READ_TIMEOUT,
            max_connections: MAX_CONNECTIONS,
        }
    }
}

/// Serve `app` on `listener` until `shutdown` resolves, then let the requests in flight finish
/// (the caller bounds how long). Each connection: HTTP/1.1 with keep-alive, `TCP_NODELAY`
/// (results leave as soon as they are written, not held back for the peer's ACK), and
/// `limits.header_read` for its headers, after which it is closed, and a body that fails
/// once it has been silent for `limits.body_idle`. With `limits.max_connections` open, no
/// more is accepted until one closes.
///
/// With `tls`, each connection's handshake comes first, in the connection's own task and
/// within `limits.header_read`; a client that cannot complete it (plain HTTP, a certificate
/// it does not trust) is closed.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    limits: Limits,
    tls: Option<crate::tls::Acceptor>,
    shutdown: impl Future<Output = ()> + Send,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let mut slots = Slots::new(limits.max_connections);
    loop {
        let slot = tokio::select! {
            s = slots.next() => s,
            _ = &mut shutdown => break,
        };
        tokio::select! {
            tcp = accept(&listener) => {
                let app = app.clone();
                let idle = limits.body_idle;
                let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let req = req.map(|b| axum::body::Body::new(IdleBody::new(b, idle)));
                    let mut app = app.clone();
                    // A Router is always ready: `call` needs no `poll_ready` first.
                    async move { tower_service::Service::call(&mut app, req).await }
                });
                let mut http = hyper::server::conn::http1::Builder::new();
                http.timer(TokioTimer::new()).header_read_timeout(limits.header_read);
                let watcher = graceful.watcher();
                let tls = tls.clone();
                tokio::spawn(async move {
                    let served = match tls {
                        None => watcher.watch(http.serve_connection(TokioIo::new(tcp), service)).await,
                        Some(acceptor) => {
                            let Some(stream) = acceptor.handshake(tcp, limits.header_read).await else {
                                return;
                            };
                            watcher.watch(http.serve_connection(TokioIo::new(stream), service)).await
                        }
                    };
                    if let Err(e) = served {
                        tracing::trace!(error = %e, "connection ended");
                    }
                    drop(slot);
                });
            }
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    graceful.shutdown().await;
}

/// A listener's connection slots: `max_connections` at most are served at once.
pub(crate) struct Slots {
    free: std::sync::Arc<tokio::sync::Semaphore>,
    max: usize,
    full_since: Option<std::time::Instant>,
}

impl Slots {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            free: std::sync::Arc::new(tokio::sync::Semaphore::new(max.max(1))),
            max,
            full_since: None,
        }
    }

    /// A free slot, waiting for one to be given back when all are taken (said in the log once
    /// a minute while it lasts, not per connection). Cancel-safe.
    pub(crate) async fn next(&mut self) -> tokio::sync::OwnedSemaphorePermit {
        if let Ok(s) = self.free.clone().try_acquire_owned() {
            return s;
        }
        if self
            .full_since
            .is_none_or(|t| t.elapsed() > Duration::from_secs(60))
        {
            tracing::warn!(
                max_connections = self.max,
                "every connection slot is taken: new connections wait until one closes"
            );
            self.full_since = Some(std::time::Instant::now());
        }
        let free = self.free.clone();
        free.acquire_owned()
            .await
            .expect("the semaphore is never closed")
    }
}

/// The next connection, with `TCP_NODELAY` set (results leave as soon as they are written).
/// A failed accept (out of file descriptors, a connection reset while queued) is retried after
/// a moment rather than in a spin. Cancel-safe: no connection is lost when a `select!` drops it.
pub(crate) async fn accept(listener: &tokio::net::TcpListener) -> tokio::net::TcpStream {
    loop {
        match listener.accept().await {
            Ok((tcp, _)) => {
                if let Err(e) = tcp.set_nodelay(true) {
                    tracing::debug!(error = %e, "TCP_NODELAY");
                }
                return tcp;
            }
            Err(e) => {
                tracing::debug!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// A request body that fails with [`BodyIdle`] when no frame has come for `idle` since the
/// last one (or since it was first read: a handler that reads later is not penalised).
struct IdleBody<B> {
    inner: B,
    idle: Duration,
    /// Made at the first wait and reset at each later one: no allocation per frame.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Whether the timer counts the current wait (it stops counting when a frame comes).
    armed: bool,
}

impl<B> IdleBody<B> {
    fn new(inner: B, idle: Duration) -> Self {
        Self {
            inner,
            idle,
            timer: None,
            armed: false,
        }
    }
}

/// The client stopped sending its request's body.
#[derive(Debug, thiserror::Error)]
#[error("the request body stopped arriving: nothing for {}", humantime::format_duration(*.0))]
pub struct BodyIdle(pub Duration);

impl<B> Body for IdleBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.armed = false;
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => {
                let idle = this.idle;
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
                if !this.armed {
                    timer.as_mut().reset(tokio::time::Instant::now() + idle);
                    this.armed = true;
                }
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(BodyIdle(idle).into()))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn ask(c: &mut tokio::net::TcpStream) {
        c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
    }

    async fn answered(c: &mut tokio::net::TcpStream, within: Duration) -> bool {
        let mut buf = [0u8; 64];
        matches!(
            tokio::time::timeout(within, c.read(&mut buf)).await,
            Ok(Ok(n)) if n > 0 && buf.starts_with(b"HTTP/1.1 200")
        )
    }

    /// With every slot taken, a new connection waits, unanswered, until one closes; then it is
    /// served.
    #[tokio::test]
    async fn connections_past_the_limit_wait_for_a_slot() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = axum::Router::new().route("/", axum::routing::get(|| async { "ok" }));
        let limits = Limits {
            max_connections: 1,
            ..Limits::default()
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, app, limits, None, async {
            let _ = stopped.await;
        }));
        let mut first = tokio::net::TcpStream::connect(addr).await.unwrap();
        ask(&mut first).await;
        assert!(answered(&mut first, Duration::from_secs(5)).await);
        // Kept alive: it holds the one slot.
        let mut second = tokio::net::TcpStream::connect(addr).await.unwrap();
        ask(&mut second).await;
        assert!(!answered(&mut second, Duration::from_millis(500)).await);
        drop(first);
        assert!(answered(&mut second, Duration::from_secs(5)).await);
        drop(second);
        let _ = stop.send(());
        server.await.unwrap();
    }
}
