//! `POST /v1/sql`: the body is the SQL text (or `{"sql": "..."}` as JSON); `Accept` picks
//! the format; `?as_of=` a version or a time; `?timeout=` shortens the server's limit.
//!
//! The status is decided when the first batch is ready, so errors in planning and in the
//! first batch get their own status and JSON body. After that the result streams batch by
//! batch, as fast as the client reads it (the server holds about one batch); an error or the
//! time limit then ends the response early (the body is cut, not closed properly), and a
//! client that hangs up cancels the query.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use neve_core::query::{ResultFormat, ResultWriter};
use neve_core::AsOf;
use serde::Deserialize;

use crate::auth::Role;
use crate::error::{Error, Result};
use crate::http::AppState;
use crate::metrics::Metrics;
use crate::query::ipc::IpcPieces;
use crate::query::{At, Running};

/// Unknown parameters are refused (400): `?as-of=42` or `?version=42` read silently as the
/// latest would answer another question than the one asked.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqlParams {
    /// A version number or a timestamp (`2024-05-01T12:00:00Z`).
    as_of: Option<String>,
    /// `30s`, `2m`: at most the server's `query.timeout`.
    timeout: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonRequest {
    sql: String,
}

/// The format the `Accept` header asks for (RFC 9110): of the types it lists with a weight
/// above 0, the most wanted that neve writes, the first listed among equals; `*/*` and
/// `application/*` are JSON, `text/*` CSV. JSON when there is no header.
pub fn negotiate(headers: &HeaderMap) -> Result<ResultFormat> {
    let Some(accept) = headers.get(header::ACCEPT) else {
        return Ok(ResultFormat::Json);
    };
    let text = accept.to_str().unwrap_or_default();
    let mut wanted: Vec<(f32, ResultFormat)> = Vec::new();
    for media in text.split(',') {
        let mut parts = media.split(';');
        let essence = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let mut q = 1.0f32;
        for p in parts {
            if let Some((k, v)) = p.split_once('=') {
                if k.trim().eq_ignore_ascii_case("q") {
                    // A weight that does not parse counts as none.
                    q = v
                        .trim()
                        .parse()
                        .ok()
                        .filter(|q: &f32| (0.0..=1.0).contains(q))
                        .unwrap_or(0.0);
                }
            }
        }
        let format = match essence.as_str() {
            "" | "*/*" | "application/*" => Some(ResultFormat::Json),
            "text/*" => Some(ResultFormat::Csv),
            e => ResultFormat::from_media_type(e),
        };
        if let Some(f) = format.filter(|_| q > 0.0) {
            wanted.push((q, f));
        }
    }
    // Stable: among equal weights the first listed wins.
    wanted.sort_by(|a, b| b.0.total_cmp(&a.0));
    match wanted.first() {
        Some((_, f)) => Ok(*f),
        None => Err(Error::NotAcceptable {
            accept: neve_core::error::clip(text, 200).into_owned(),
            known: ResultFormat::known_media_types(),
        }),
    }
}

fn sql_text(headers: &HeaderMap, body: &Bytes) -> Result<String> {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.split(';').next().unwrap_or("").trim() == "application/json");
    let sql = if is_json {
        serde_json::from_slice::<JsonRequest>(body)
            .map_err(|e| Error::BadRequest {
                reason: format!("a JSON body is {{\"sql\": \"SELECT ...\"}}: {e}"),
            })?
            .sql
    } else {
        String::from_utf8(body.to_vec()).map_err(|_| Error::BadRequest {
            reason: "the SQL text is not UTF-8".into(),
        })?
    };
    if sql.trim().is_empty() {
        return Err(Error::BadRequest {
            reason: "no SQL in the request body".into(),
        });
    }
    Ok(sql)
}

pub async fn sql(
    State(state): State<Arc<AppState>>,
    Query(p): Query<SqlParams>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response> {
    let caller = state.auth().caller(&headers, None)?;
    caller.require(Role::Read, "query tables")?;
    let format = negotiate(&headers)?;
    let sql = sql_text(&headers, &body)?;
    let at = match p.as_of.as_deref() {
        Some(a) => At::AsOf(a.parse::<AsOf>().map_err(|e| {
            // `+02:00` unescaped in a query string arrives as ` 02:00`.
            if a.len() > 19 && a[19..].contains(' ') {
                Error::BadRequest {
                    reason: format!(
                        "as_of '{a}' is neither a version nor a time: a '+' in a query string is read as a space, write it as %2B"
                    ),
                }
            } else {
                Error::Table(e)
            }
        })?),
        None => At::Latest,
    };
    let timeout = p
        .timeout
        .as_deref()
        .map(|t| {
            humantime::parse_duration(t).map_err(|e| Error::BadRequest {
                reason: format!("timeout '{t}': {e}"),
            })
        })
        .transpose()?;
    let started = state.start_query(&caller, &sql, at, None, timeout).await?;
    let mut running = started.running;
    // The first batch is encoded before the status is sent: a format that cannot hold the
    // result's types is a 406, not a 200 whose body breaks off.
    let unwritable = |e: Error| Error::ResultNotWritable {
        media_type: format.media_type(),
        reason: e.to_string(),
    };
    let mut pending = VecDeque::new();
    let encoder = match Encoder::new(format, running.schema()).and_then(|mut encoder| {
        if let Some(first) = running.take_first() {
            encoder.write(&first, true, &mut pending)?;
        }
        Ok(encoder)
    }) {
        Ok(encoder) => encoder,
        Err(e) => return Err(running.fail(unwritable(e))),
    };
    let stream = ResultStream {
        running,
        encoder: Some(encoder),
        pending,
        metrics: state.metrics.clone(),
        sent: 0,
    };
    let body = Body::from_stream(futures::stream::unfold(stream, |mut s| async move {
        s.next_chunk().await.map(|c| (c, s))
    }));
    let mut r = body.into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.media_type()),
    );
    let versions: Vec<String> = started.versions.iter().map(|v| v.to_string()).collect();
    if let Ok(v) = HeaderValue::from_str(&versions.join(", ")) {
        r.headers_mut().insert("neve-snapshot", v);
    }
    Ok(r)
}

/// Where a writer puts its bytes until they are sent.
#[derive(Clone, Default)]
struct SharedBuf(Arc<Mutex<Vec<u8>>>);

impl SharedBuf {
    fn len(&self) -> usize {
        self.0.lock().expect("not poisoned").len()
    }

    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.0.lock().expect("not poisoned"))
    }
}

impl std::io::Write for SharedBuf {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("not poisoned").extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Turns batches into the body's bytes.
enum Encoder {
    /// Arrow IPC: the batches' buffers themselves, no copy (`ipc.rs`).
    Arrow(IpcPieces),
    /// Text and Parquet: written into a buffer, sent in chunks.
    Written {
        writer: ResultWriter<SharedBuf>,
        buf: SharedBuf,
    },
}

impl Encoder {
    fn new(format: ResultFormat, schema: arrow::datatypes::SchemaRef) -> Result<Self> {
        Ok(match format {
            ResultFormat::Arrow => {
                Self::Arrow(IpcPieces::try_new(&schema).map_err(|e| Error::Table(e.into()))?)
            }
            _ => {
                let buf = SharedBuf::default();
                Self::Written {
                    writer: ResultWriter::new(format, schema, buf.clone())?,
                    buf,
                }
            }
        })
    }

    /// Encode `batch`; what is ready to send goes to `out` (`eager`: whatever there is).
    fn write(&mut self, batch: &RecordBatch, eager: bool, out: &mut VecDeque<Bytes>) -> Result<()> {
        match self {
            Self::Arrow(p) => p.encode(batch, out).map_err(|e| Error::Table(e.into())),
            Self::Written { writer, buf } => {
                writer.write(batch)?;
                // Parquet holds rows until a row group is full: often nothing to send yet.
                if eager || buf.len() >= CHUNK {
                    let chunk = buf.take();
                    if !chunk.is_empty() {
                        out.push_back(Bytes::from(chunk));
                    }
                }
                Ok(())
            }
        }
    }

    /// The end of the result (JSON's closing bracket, Parquet's footer, Arrow's end marker).
    fn finish(self, out: &mut VecDeque<Bytes>) -> Result<()> {
        match self {
            Self::Arrow(p) => p.finish(out).map_err(|e| Error::Table(e.into())),
            Self::Written { writer, buf } => {
                writer.finish()?;
                let chunk = buf.take();
                if !chunk.is_empty() {
                    out.push_back(Bytes::from(chunk));
                }
                Ok(())
            }
        }
    }
}

/// A result on its way out: batches in, encoded chunks out.
struct ResultStream {
    running: Running,
    encoder: Option<Encoder>,
    /// Encoded, not yet sent.
    pending: VecDeque<Bytes>,
    metrics: Arc<Metrics>,
    /// Bytes sent so far.
    sent: u64,
}

/// Bytes of text or Parquet gathered before a chunk is sent (after the first).
const CHUNK: usize = 4 << 20;

type Chunk = std::result::Result<Bytes, std::io::Error>;

impl ResultStream {
    /// The next bytes to send; `None` at the end. An error cuts the response short.
    async fn next_chunk(&mut self) -> Option<Chunk> {
        loop {
            if let Some(chunk) = self.pending.pop_front() {
                return Some(Ok(self.send(chunk)));
            }
            let encoder = self.encoder.as_mut()?;
            match self.running.next().await {
                Some(Ok(b)) => {
                    // The first bytes leave at once.
                    if let Err(e) = encoder.write(&b, self.sent == 0, &mut self.pending) {
                        return Some(Err(self.cut(e)));
                    }
                }
                Some(Err(e)) => {
                    self.encoder = None;
                    return Some(Err(std::io::Error::other(e.to_string())));
                }
                None => {
                    let encoder = self.encoder.take().expect("checked above");
                    if let Err(e) = encoder.finish(&mut self.pending) {
                        return Some(Err(self.cut(e)));
                    }
                }
            }
        }
    }

    fn send(&mut self, chunk: Bytes) -> Bytes {
        self.sent += chunk.len() as u64;
        self.metrics.query_bytes.inc_by(chunk.len() as u64);
        chunk
    }

    fn cut(&mut self, e: Error) -> std::io::Error {
        self.encoder = None;
        self.pending.clear();
        std::io::Error::other(self.running.fail(e).to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(v: &str) -> Result<ResultFormat> {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, v.parse().unwrap());
        negotiate(&h)
    }

    #[test]
    fn accept_weights_choose_the_format() {
        use ResultFormat::*;
        assert_eq!(negotiate(&HeaderMap::new()).unwrap(), Json);
        assert_eq!(accept("text/csv").unwrap(), Csv);
        assert_eq!(accept("text/html, text/csv").unwrap(), Csv);
        // q=0 is "not this", and a heavier type wins over an earlier one.
        assert_eq!(accept("application/json;q=0, text/csv").unwrap(), Csv);
        assert_eq!(
            accept("application/json;q=0.5, application/vnd.apache.arrow.stream").unwrap(),
            Arrow
        );
        assert_eq!(
            accept("text/csv;q=0.2, application/x-ndjson;q=0.9").unwrap(),
            Ndjson
        );
        // Among equals, the first listed.
        assert_eq!(accept("application/x-ndjson, text/csv").unwrap(), Ndjson);
        assert_eq!(accept("text/*").unwrap(), Csv);
        assert_eq!(accept("*/*").unwrap(), Json);
        assert_eq!(accept("TEXT/CSV").unwrap(), Csv);
        for refused in [
            "text/html",
            "text/csv;q=0",
            "application/json;q=abc",
            "*/*;q=0",
        ] {
            assert!(
                matches!(accept(refused), Err(Error::NotAcceptable { .. })),
                "{refused}"
            );
        }
    }
}
