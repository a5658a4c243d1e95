//! Accepted connections as a stream, for a server that takes one (tonic's, for Flight SQL):
//! the same connection cap, `TCP_NODELAY` and TLS handshakes as `serve` gives HTTP.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::OwnedSemaphorePermit;

use super::{accept, Slots};
use crate::tls::Acceptor;

/// An accepted connection, past its TLS handshake when the listener has one. It holds one of
/// the listener's `max_connections` slots until it is dropped.
pub struct Conn {
    io: Io,
    _slot: OwnedSemaphorePermit,
}

enum Io {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

/// A listener's connections. Handshakes run in tasks of their own, each within
/// `handshake_timeout`, so a client that stalls one holds up no other; with `max_connections`
/// served, accepting waits until one closes. Accepting stops when this is dropped.
pub struct Incoming {
    rx: tokio::sync::mpsc::Receiver<Conn>,
    accepting: tokio::task::AbortHandle,
}

impl Incoming {
    pub fn new(
        listener: TcpListener,
        tls: Option<Acceptor>,
        handshake_timeout: Duration,
        max_connections: usize,
    ) -> Self {
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let accepting = tokio::spawn(async move {
            let mut slots = Slots::new(max_connections);
            loop {
                let slot = slots.next().await;
                let tcp = accept(&listener).await;
                let Some(acceptor) = tls.clone() else {
                    let conn = Conn {
                        io: Io::Plain(tcp),
                        _slot: slot,
                    };
                    if tx.send(conn).await.is_err() {
                        return;
                    }
                    continue;
                };
                let tx = tx.clone();
                tokio::spawn(async move {
                    if let Some(s) = acceptor.handshake(tcp, handshake_timeout).await {
                        let conn = Conn {
                            io: Io::Tls(Box::new(s)),
                            _slot: slot,
                        };
                        let _ = tx.send(conn).await;
                    }
                });
            }
        })
        .abort_handle();
        Self { rx, accepting }
    }
}

impl Drop for Incoming {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl futures::Stream for Incoming {
    type Item = std::io::Result<Conn>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx).map(|c| c.map(Ok))
    }
}

/// `$e` with `$s` the pinned stream under the connection, plain or TLS.
macro_rules! each {
    ($self:ident, $s:ident => $e:expr) => {
        match &mut $self.get_mut().io {
            Io::Plain($s) => {
                let $s = Pin::new($s);
                $e
            }
            Io::Tls($s) => {
                let $s = Pin::new(&mut **$s);
                $e
            }
        }
    };
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        each!(self, s => s.poll_read(cx, buf))
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        each!(self, s => s.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        each!(self, s => s.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Plain(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        each!(self, s => s.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        each!(self, s => s.poll_shutdown(cx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// With every slot taken, the next connection is not handed on until one is dropped; then
    /// it is, whole.
    #[tokio::test]
    async fn connections_past_the_limit_wait_for_a_slot() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut incoming = Incoming::new(listener, None, Duration::from_secs(5), 1);
        let _a = TcpStream::connect(addr).await.unwrap();
        let mut b = TcpStream::connect(addr).await.unwrap();
        let first = incoming.next().await.unwrap().unwrap();
        let waiting = tokio::time::timeout(Duration::from_millis(500), incoming.next()).await;
        assert!(
            waiting.is_err(),
            "a second connection was served past the limit"
        );
        drop(first);
        let mut second = tokio::time::timeout(Duration::from_secs(5), incoming.next())
            .await
            .expect("the freed slot serves the waiting connection")
            .unwrap()
            .unwrap();
        // It is `b`'s: bytes cross it both ways, and `TCP_NODELAY` is set.
        b.write_all(b"ping").await.unwrap();
        let mut got = [0u8; 4];
        second.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
        second.write_all(b"pong").await.unwrap();
        b.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"pong");
        let Io::Plain(tcp) = &second.io else {
            unreachable!("no TLS given")
        };
        assert!(tcp.nodelay().unwrap());
    }
}
