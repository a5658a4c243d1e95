//! `neve bench stream` (issue 17): results of `neve serve` streamed to clients, against the
//! ceiling of one loopback TCP connection. The driver is `bench/stream.py` (embedded); the
//! Rust sides are `neve bench stream-client`: an HTTP client that decodes the Arrow stream
//! (or counts NDJSON lines) as it arrives, and the two ends of the ceiling.

use std::io::{Read, Write};
use std::time::Instant;

use arrow::buffer::Buffer;

use crate::cli::{BenchStreamArgs, BenchStreamClientArgs};
use crate::error::{CliError, Result};

const SCRIPT: &str = include_str!("../../../../bench/stream.py");

/// The driver: serves, streams, prints the table.
pub async fn run(a: BenchStreamArgs) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let script = dir.path().join("stream.py");
    std::fs::write(&script, SCRIPT)?;
    let me = std::env::current_exe()?;
    let status = tokio::process::Command::new(&a.python)
        .arg(&script)
        .args(["--neve-bin", &me.display().to_string()])
        .args(["--rows", &a.rows.to_string()])
        .args(["--ndjson-rows", &a.ndjson_rows.to_string()])
        .args(["--taxi-rows", &a.taxi_rows.to_string()])
        .args(["--runs", &a.runs.to_string()])
        .args(["--dir", &a.dir])
        .status()
        .await?;
    if !status.success() {
        return Err(CliError::PeerFailed {
            peer: "bench/stream.py".into(),
            reason: format!("exited with {status}"),
        });
    }
    Ok(())
}

/// This process's peak resident memory (MB).
fn peak_rss_mb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}

/// One side of a measurement; prints one JSON line.
pub async fn client(a: BenchStreamClientArgs) -> Result<()> {
    let started = Instant::now();
    let (rows, bytes, first_byte) = if let Some(addr) = &a.sink {
        // The ceiling's reader: accept one connection, read it to the end.
        let listener = std::net::TcpListener::bind(addr)?;
        println!("{}", listener.local_addr()?);
        std::io::stdout().flush()?;
        let (mut conn, _) = listener.accept()?;
        let started = Instant::now();
        let mut buf = vec![0u8; 1 << 20];
        let (mut n, mut first) = (0u64, None);
        loop {
            let got = conn.read(&mut buf)?;
            if got == 0 {
                break;
            }
            first.get_or_insert_with(|| started.elapsed().as_secs_f64());
            n += got as u64;
        }
        let secs = started.elapsed().as_secs_f64();
        return print_line(0, n, first.unwrap_or(secs), secs);
    } else if let Some(addr) = &a.source {
        // The ceiling's writer: the same bytes, in 1 MiB writes.
        let mut conn = std::net::TcpStream::connect(addr)?;
        let buf = vec![7u8; 1 << 20];
        let mut left = a.bytes;
        while left > 0 {
            let n = left.min(buf.len() as u64) as usize;
            conn.write_all(&buf[..n])?;
            left -= n as u64;
        }
        return Ok(());
    } else if let Some(endpoint) = &a.flight {
        flight(endpoint, &a.token, &a.sql, started).await?
    } else {
        let url = a
            .url
            .as_deref()
            .ok_or_else(|| CliError::Usage("--url, --sink or --source".into()))?;
        let accept = match a.format.as_str() {
            "arrow" => "application/vnd.apache.arrow.stream",
            "ndjson" => "application/x-ndjson",
            other => {
                return Err(CliError::Usage(format!(
                    "--format {other}: arrow or ndjson"
                )))
            }
        };
        let mut http = reqwest::Client::builder();
        if let Some(ca) = &a.ca_cert {
            let pem = std::fs::read(ca)?;
            let ca = reqwest::Certificate::from_pem(&pem)
                .map_err(|e| CliError::Usage(format!("--ca-cert {}: {e}", ca.display())))?;
            http = http.tls_built_in_root_certs(false).add_root_certificate(ca);
        }
        let http = http
            .build()
            .map_err(|e| served_failed(format!("client: {e}")))?;
        let mut r = http
            .post(format!("{url}/v1/sql"))
            .bearer_auth(&a.token)
            .header("accept", accept)
            .body(a.sql.clone())
            .send()
            .await
            .map_err(|e| served_failed(format!("request: {e}")))?;
        if !r.status().is_success() {
            let status = r.status();
            let text = r.text().await.unwrap_or_default();
            return Err(served_failed(format!("{status}: {text}")));
        }
        let mut decoder = arrow::ipc::reader::StreamDecoder::new();
        let mut framer = Framer::default();
        let (mut rows, mut bytes, mut first) = (0u64, 0u64, None);
        while let Some(chunk) = r
            .chunk()
            .await
            .map_err(|e| served_failed(format!("body: {e}")))?
        {
            first.get_or_insert_with(|| started.elapsed().as_secs_f64());
            bytes += chunk.len() as u64;
            if a.format == "arrow" {
                framer.push(&chunk, &mut |mut message| {
                    while !message.is_empty() {
                        if let Some(b) = decoder
                            .decode(&mut message)
                            .map_err(|e| CliError::Core(e.into()))?
                        {
                            rows += b.num_rows() as u64;
                        }
                    }
                    Ok(())
                })?;
            } else {
                rows += chunk.iter().filter(|&&c| c == b'\n').count() as u64;
            }
        }
        if !framer.pending.is_empty() {
            return Err(served_failed(format!(
                "the Arrow stream ended inside a message ({} bytes of it)",
                framer.pending.len()
            )));
        }
        (rows, bytes, first.unwrap_or(0.0))
    };
    print_line(rows, bytes, first_byte, started.elapsed().as_secs_f64())
}

/// Cuts an Arrow IPC stream, arriving in chunks of any size, into whole messages, each copied
/// once into a buffer allocated at its final size (64-byte aligned), which `StreamDecoder`
/// then decodes in place. Fed the HTTP chunks as they come (hyper's are at most 400 KiB), the
/// decoder grows its buffer by doubling for every message that spans chunks: those copies
/// were half of this client's CPU (`perf`), and a client shares the 2 cores with the server.
#[derive(Default)]
struct Framer {
    pending: arrow::buffer::MutableBuffer,
    /// The message's whole length, once its prefix and metadata are in.
    total: Option<usize>,
}

/// How much of a message `head` (its first bytes) says there is.
enum Needed {
    /// At least this many bytes before the length is known.
    AtLeast(usize),
    /// The whole message: prefix, metadata and body.
    Total(usize),
}

fn needed(head: &[u8]) -> Result<Needed> {
    const CONTINUATION: [u8; 4] = [0xff; 4];
    let word = |at: usize| u32::from_le_bytes(head[at..at + 4].try_into().expect("4 bytes"));
    if head.len() < 4 {
        return Ok(Needed::AtLeast(4));
    }
    let (prefix, meta) = if head[..4] == CONTINUATION {
        if head.len() < 8 {
            return Ok(Needed::AtLeast(8));
        }
        (8, word(4) as usize)
    } else {
        (4, word(0) as usize) // the format before 0.15, without the marker
    };
    if meta == 0 {
        return Ok(Needed::Total(prefix)); // end of stream
    }
    if head.len() < prefix + meta {
        return Ok(Needed::AtLeast(prefix + meta));
    }
    let message = arrow::ipc::root_as_message(&head[prefix..prefix + meta])
        .map_err(|e| served_failed(format!("an IPC message that does not parse: {e}")))?;
    let body = usize::try_from(message.bodyLength())
        .map_err(|_| served_failed("an IPC message of negative length".into()))?;
    Ok(Needed::Total(prefix + meta + body))
}

impl Framer {
    /// Feed the next chunk; `f` gets each message completed by it.
    fn push(&mut self, mut chunk: &[u8], f: &mut impl FnMut(Buffer) -> Result<()>) -> Result<()> {
        loop {
            let target = match self.total {
                Some(t) => t,
                None => match needed(self.pending.as_slice())? {
                    Needed::AtLeast(n) => n,
                    Needed::Total(t) => {
                        self.pending.reserve(t - self.pending.len());
                        self.total = Some(t);
                        t
                    }
                },
            };
            if self.total == Some(self.pending.len()) {
                self.total = None;
                f(std::mem::take(&mut self.pending).into())?;
                continue;
            }
            if chunk.is_empty() {
                return Ok(());
            }
            let take = (target - self.pending.len()).min(chunk.len());
            self.pending.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
        }
    }
}

/// Run `sql` over Flight SQL and decode every batch: rows, bytes of Arrow data, first batch.
async fn flight(
    endpoint: &str,
    token: &str,
    sql: &str,
    started: Instant,
) -> Result<(u64, u64, f64)> {
    use arrow_flight::sql::client::FlightSqlServiceClient;
    use futures::TryStreamExt;
    let failed = |e: &dyn std::fmt::Display| served_failed(format!("flight: {e}"));
    let channel = tonic::transport::Endpoint::from_shared(endpoint.replace("grpc://", "http://"))
        .map_err(|e| failed(&e))?
        .connect()
        .await
        .map_err(|e| failed(&e))?;
    let mut client = FlightSqlServiceClient::new(channel);
    client.set_token(token.to_string());
    let info = client
        .execute(sql.to_string(), None)
        .await
        .map_err(|e| failed(&e))?;
    let (mut rows, mut bytes, mut first) = (0u64, 0u64, None);
    for endpoint in info.endpoint {
        let ticket = endpoint
            .ticket
            .ok_or_else(|| served_failed("flight: an endpoint without a ticket".into()))?;
        let mut stream = client.do_get(ticket).await.map_err(|e| failed(&e))?;
        while let Some(b) = stream.try_next().await.map_err(|e| failed(&e))? {
            first.get_or_insert_with(|| started.elapsed().as_secs_f64());
            rows += b.num_rows() as u64;
            // As pyarrow's `nbytes`, which the ADBC client reports: the buffers' bytes.
            for c in b.columns() {
                bytes += c.to_data().get_slice_memory_size().unwrap_or(0) as u64;
            }
        }
    }
    Ok((rows, bytes, first.unwrap_or(0.0)))
}

/// The server being measured failed (not the arguments): exit 69, as a benchmark peer.
/// A plain TCP relay: each connection's bytes both ways through 1 MiB buffers in memory (as a
/// proxy that must see them, to cache or check them, would), with no parsing and no copy
/// beyond the kernel's.
pub async fn relay(a: crate::cli::BenchRelayArgs) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(&a.listen).await?;
    println!("{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    loop {
        let (mut client, _) = listener.accept().await?;
        let (to, keep) = (a.to.clone(), a.keep);
        tokio::spawn(async move {
            let Ok(mut upstream) = tokio::net::TcpStream::connect(&to).await else {
                return;
            };
            let _ = client.set_nodelay(true);
            let _ = upstream.set_nodelay(true);
            if keep {
                let (mut client_rx, client_tx) = client.into_split();
                let (upstream_rx, mut upstream_tx) = upstream.into_split();
                let requests = tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut client_rx, &mut upstream_tx).await;
                });
                forward_keeping(upstream_rx, client_tx).await;
                requests.abort();
                return;
            }
            let _ = tokio::io::copy_bidirectional_with_sizes(
                &mut client,
                &mut upstream,
                1 << 20,
                1 << 20,
            )
            .await;
        });
    }
}

/// What `relay --keep` has forwarded, kept until the process ends.
static KEPT: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());

/// Forward `from` to `to` through a 1 MiB buffer, and copy each read into memory kept for
/// good, in pieces of 1 MiB allocated as they fill: what a proxy does that caches each block
/// it sends (one copy into fresh memory, beyond the kernel's two).
async fn forward_keeping(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const PIECE: usize = 1 << 20;
    let mut buf = vec![0u8; PIECE];
    let mut kept: Vec<Vec<u8>> = Vec::new();
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
        let mut rest = &buf[..n];
        while !rest.is_empty() {
            match kept.last_mut() {
                Some(piece) if piece.len() < piece.capacity() => {
                    let take = rest.len().min(piece.capacity() - piece.len());
                    piece.extend_from_slice(&rest[..take]);
                    rest = &rest[take..];
                }
                _ => kept.push(Vec::with_capacity(PIECE)),
            }
        }
    }
    KEPT.lock().expect("not poisoned").extend(kept);
}

fn served_failed(reason: String) -> CliError {
    CliError::PeerFailed {
        peer: "neve serve".into(),
        reason,
    }
}

fn print_line(rows: u64, bytes: u64, first_byte_s: f64, secs: f64) -> Result<()> {
    println!(
        "{}",
        serde_json::json!({
            "rows": rows,
            "bytes": bytes,
            "seconds": secs,
            "first_byte_s": first_byte_s,
            "peak_rss_mb": peak_rss_mb(),
        })
    );
    Ok(())
}
