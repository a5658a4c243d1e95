//! `POST /v1/sql`: the body is the SQL text (or `{"sql": "..."}` as JSON); `Accept` picks
//! the format; `?as_of=` a version or a time; `?timeout=` shortens the server's limit.
//!
//! The status is decided when the first batch is ready, so errors in planning and in the
//! first batch get their own status and JSON body. After that the result streams batch by
//! batch, as fast as the client reads it (the server holds about one batch); an error or the
//! time limit then ends the response early (the body is cut, not closed properly), and a
//! client that hangs up cancels the query.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use neve_core::query::{query_error, ResultFormat, ResultWriter, SendableRecordBatchStream};
use neve_core::AsOf;
use serde::Deserialize;
use tokio::sync::OwnedSemaphorePermit;

use crate::auth::Role;
use crate::error::{Error, Result};
use crate::http::AppState;
use crate::metrics::Metrics;

#[derive(Debug, Default, Deserialize)]
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

/// The format the `Accept` header asks for: the first type it lists that neve writes; JSON
/// when it lists none or `*/*`.
pub fn negotiate(headers: &HeaderMap) -> Result<ResultFormat> {
    let Some(accept) = headers.get(header::ACCEPT) else {
        return Ok(ResultFormat::Json);
    };
    let text = accept.to_str().unwrap_or_default();
    for media in text.split(',') {
        let essence = media.split(';').next().unwrap_or("").trim();
        if essence.is_empty() || essence == "*/*" || essence == "application/*" {
            return Ok(ResultFormat::Json);
        }
        if let Some(f) = ResultFormat::from_media_type(essence) {
            return Ok(f);
        }
    }
    Err(Error::NotAcceptable {
        accept: text.to_string(),
        known: ResultFormat::known_media_types(),
    })
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
    let caller = state.auth.caller(&headers, None)?;
    caller.require(Role::Read, "query tables")?;
    let format = negotiate(&headers)?;
    let sql = sql_text(&headers, &body)?;
    let as_of = p.as_of.as_deref().map(str::parse::<AsOf>).transpose()?;
    let limit = state.queries.config.timeout;
    let timeout = match &p.timeout {
        Some(t) => humantime::parse_duration(t)
            .map_err(|e| Error::BadRequest {
                reason: format!("timeout '{t}': {e}"),
            })?
            .min(limit),
        None => limit,
    };
    let permit = state.queries.admit().inspect_err(|_| {
        state.metrics.queries_refused.inc();
    })?;
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + timeout;
    let metrics = state.metrics.clone();
    let out = tokio::time::timeout_at(deadline, async {
        let engine = state.query_engine(&caller, &sql, as_of).await?;
        let versions: Vec<String> = engine
            .tables()
            .iter()
            .map(|(t, v)| format!("{t}={v}"))
            .collect();
        let mut batches = engine.stream(&sql).await?;
        let first = match batches.next().await {
            Some(b) => Some(b.map_err(query_error)?),
            None => None,
        };
        Ok::<_, Error>((batches, first, versions))
    })
    .await;
    let (batches, first, versions) = match out {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            metrics.query_outcome(&e);
            return Err(e);
        }
        Err(_) => {
            let e = Error::QueryTimeout { after: timeout };
            metrics.query_outcome(&e);
            return Err(e);
        }
    };
    tracing::debug!(tables = ?versions, ms = started.elapsed().as_millis() as u64, "query started");
    let buf = SharedBuf::default();
    let writer = ResultWriter::new(format, batches.schema(), buf.clone())?;
    let stream = ResultStream {
        batches,
        first,
        writer: Some(writer),
        buf,
        deadline,
        timeout,
        started,
        metrics,
        rows: 0,
        finished: false,
        _permit: permit,
    };
    let body = Body::from_stream(futures::stream::unfold(stream, |mut s| async move {
        s.next_chunk().await.map(|c| (c, s))
    }));
    let mut r = body.into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.media_type()),
    );
    if let Ok(v) = HeaderValue::from_str(&versions.join(", ")) {
        r.headers_mut().insert("neve-snapshot", v);
    }
    Ok(r)
}

/// Where a writer puts its bytes until they are sent.
#[derive(Clone, Default)]
struct SharedBuf(Arc<Mutex<Vec<u8>>>);

impl SharedBuf {
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

/// A result on its way out: batches in, encoded chunks out.
struct ResultStream {
    batches: SendableRecordBatchStream,
    first: Option<arrow::array::RecordBatch>,
    writer: Option<ResultWriter<SharedBuf>>,
    buf: SharedBuf,
    deadline: tokio::time::Instant,
    timeout: Duration,
    started: Instant,
    metrics: Arc<Metrics>,
    rows: u64,
    finished: bool,
    /// The query's slot, given back when the response ends or is dropped.
    _permit: OwnedSemaphorePermit,
}

type Chunk = std::result::Result<Bytes, std::io::Error>;

impl ResultStream {
    /// The next bytes to send; `None` at the end.
    async fn next_chunk(&mut self) -> Option<Chunk> {
        if self.finished {
            return None;
        }
        loop {
            let batch = match self.first.take() {
                Some(b) => Some(Ok(b)),
                None => match tokio::time::timeout_at(self.deadline, self.batches.next()).await {
                    Ok(b) => b,
                    Err(_) => {
                        return Some(Err(self.fail(Error::QueryTimeout {
                            after: self.timeout,
                        })));
                    }
                },
            };
            let writer = self.writer.as_mut()?;
            match batch {
                Some(Ok(b)) => {
                    self.rows += b.num_rows() as u64;
                    if let Err(e) = writer.write(&b) {
                        return Some(Err(self.fail(e.into())));
                    }
                }
                Some(Err(e)) => return Some(Err(self.fail(query_error(e).into()))),
                None => {
                    let writer = self.writer.take().expect("checked above");
                    if let Err(e) = writer.finish() {
                        return Some(Err(self.fail(e.into())));
                    }
                    self.finished = true;
                    self.metrics.queries_ok.inc();
                    self.metrics
                        .query_seconds
                        .observe(self.started.elapsed().as_secs_f64());
                    self.metrics.query_rows.inc_by(self.rows);
                    let rest = self.buf.take();
                    self.metrics.query_bytes.inc_by(rest.len() as u64);
                    return Some(Ok(Bytes::from(rest)));
                }
            }
            // Parquet holds rows until a row group is full: nothing to send yet.
            let chunk = self.buf.take();
            if !chunk.is_empty() {
                self.metrics.query_bytes.inc_by(chunk.len() as u64);
                return Some(Ok(Bytes::from(chunk)));
            }
        }
    }

    /// End the response early; the client sees a cut body.
    fn fail(&mut self, e: Error) -> std::io::Error {
        self.finished = true;
        self.writer = None;
        tracing::warn!(error = %e, rows = self.rows, "query failed while streaming");
        self.metrics.query_outcome(&e);
        std::io::Error::other(e.to_string())
    }
}

impl Drop for ResultStream {
    fn drop(&mut self) {
        if !self.finished {
            // The client went away: dropping the batches stops the query.
            self.metrics.queries_cancelled.inc();
            tracing::info!(
                rows = self.rows,
                "query cancelled: the client closed the connection"
            );
        }
    }
}
