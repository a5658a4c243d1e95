//! Where the warehouse is, is no business of a client's: messages from storage and DataFusion
//! name objects by their full paths, and an `EXPLAIN` names every file it reads. Whatever the
//! server answers with such text (HTTP error bodies, Flight SQL statuses, plans) goes through
//! [`Redact`], which leaves names relative to the caller's own folder (`events/_data/…`).

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray};
use arrow::datatypes::DataType;
use arrow_flight::flight_service_server::FlightService;
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightInfo,
    HandshakeRequest, HandshakeResponse, PollInfo, PutResult, SchemaResult, Ticket,
};
use futures::{Stream, StreamExt};
use neve_core::query::{RecordBatchStreamAdapter, SendableRecordBatchStream};
use tonic::{Code, Request, Response, Status, Streaming};
use tracing::Instrument;

use crate::metrics::Metrics;

/// Takes the warehouse's own paths out of text.
#[derive(Debug)]
pub struct Redact {
    /// Longest first, so a shorter one never cuts part of a longer one.
    prefixes: Vec<String>,
}

impl Redact {
    /// `roots`: the folders whose tables callers name (each tenant's, or the warehouse).
    pub fn new(roots: &[String]) -> Self {
        let mut prefixes = Vec::new();
        for base in roots {
            let base = base.trim_end_matches('/');
            prefixes.push(format!("{base}/"));
            // Storage messages and plans name objects by their path in the store, without
            // the scheme or the leading '/'.
            if let Ok(l) = neve_core::TableLocation::parse(base) {
                let root = l.root.as_ref().trim_matches('/');
                if !root.is_empty() {
                    prefixes.push(format!("{root}/"));
                }
            }
            if let Some(rest) = base.strip_prefix("s3://") {
                prefixes.push(format!("{rest}/"));
            }
        }
        prefixes.sort_by_key(|p| std::cmp::Reverse(p.len()));
        prefixes.dedup();
        prefixes.retain(|p| p.len() > 1 && !p.contains(['"', '\\']));
        Self { prefixes }
    }

    pub fn apply<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = signed_request_cut(text);
        for p in &self.prefixes {
            if out.contains(p.as_str()) {
                out = out.replace(p.as_str(), "").into();
            }
        }
        out
    }

    /// The same status with its message redacted (code, details and metadata kept).
    pub fn status(&self, s: Status) -> Status {
        match self.apply(s.message()) {
            Cow::Borrowed(_) => s,
            Cow::Owned(message) => Status::with_details_and_metadata(
                s.code(),
                message,
                bytes::Bytes::copy_from_slice(s.details()),
                s.metadata().clone(),
            ),
        }
    }

    /// A plan's rows with their text redacted (an `EXPLAIN`'s columns are strings).
    pub fn batch(&self, batch: RecordBatch) -> RecordBatch {
        let columns: Vec<ArrayRef> = batch
            .columns()
            .iter()
            .map(|c| match c.data_type() {
                DataType::Utf8 => {
                    let strings = c.as_string::<i32>();
                    let out: StringArray =
                        strings.iter().map(|v| v.map(|v| self.apply(v))).collect();
                    Arc::new(out) as ArrayRef
                }
                _ => c.clone(),
            })
            .collect();
        RecordBatch::try_new(batch.schema(), columns).unwrap_or(batch)
    }

    /// An `EXPLAIN`'s answer, redacted batch by batch.
    pub fn plan(self: &Arc<Self>, plan: SendableRecordBatchStream) -> SendableRecordBatchStream {
        let redact = self.clone();
        let schema = plan.schema();
        Box::pin(RecordBatchStreamAdapter::new(
            schema,
            plan.map(move |b| b.map(|b| redact.batch(b))),
        ))
    }
}

type Out<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// A Flight service whose every status, returned or streamed, is redacted, and whose every
/// call is counted by method and outcome (`neve_flight_calls_total`).
pub struct RedactedFlight<S> {
    inner: S,
    redact: Arc<Redact>,
    metrics: Arc<Metrics>,
}

impl<S> RedactedFlight<S> {
    pub fn new(inner: S, redact: Arc<Redact>, metrics: Arc<Metrics>) -> Self {
        Self {
            inner,
            redact,
            metrics,
        }
    }

    /// A call's span: its method, and its tenant once the token is known (`Auth::caller`).
    fn span(method: &'static str) -> tracing::Span {
        tracing::info_span!("flight", method, tenant = tracing::field::Empty)
    }

    async fn call_unary<T>(
        &self,
        method: &'static str,
        call: impl Future<Output = Result<Response<T>, Status>>,
    ) -> Result<Response<T>, Status> {
        let (span, started) = (Self::span(method), Instant::now());
        let r = call.instrument(span.clone()).await;
        self.unary(method, &span, started, r)
    }

    async fn call_stream<T, St>(
        &self,
        method: &'static str,
        call: impl Future<Output = Result<Response<St>, Status>>,
    ) -> Result<Response<Out<T>>, Status>
    where
        T: Send + 'static,
        St: Stream<Item = Result<T, Status>> + Send + 'static,
    {
        let (span, started) = (Self::span(method), Instant::now());
        let r = call.instrument(span.clone()).await;
        self.stream(method, span, started, r)
    }

    fn unary<T>(
        &self,
        method: &'static str,
        span: &tracing::Span,
        started: Instant,
        r: Result<Response<T>, Status>,
    ) -> Result<Response<T>, Status> {
        let code = r.as_ref().err().map_or(Code::Ok, Status::code);
        answered(&self.metrics, method, span, code, started);
        r.map_err(|s| self.redact.status(s))
    }

    fn stream<T, St>(
        &self,
        method: &'static str,
        span: tracing::Span,
        started: Instant,
        r: Result<Response<St>, Status>,
    ) -> Result<Response<Out<T>>, Status>
    where
        T: Send + 'static,
        St: Stream<Item = Result<T, Status>> + Send + 'static,
    {
        let r = match r {
            Ok(r) => r,
            Err(e) => return self.unary(method, &span, started, Err(e)),
        };
        let redact = self.redact.clone();
        let call = Call {
            method,
            span,
            started,
            metrics: self.metrics.clone(),
            ended: false,
        };
        Ok(r.map(|s| {
            Metered {
                inner: s
                    .map(move |item| item.map_err(|e| redact.status(e)))
                    .boxed(),
                call,
            }
            .boxed()
        }))
    }
}

/// A streamed call's count, taken once: at its first error, at its end, or, when the client
/// dropped it first, as `Cancelled`.
struct Call {
    method: &'static str,
    span: tracing::Span,
    started: Instant,
    metrics: Arc<Metrics>,
    ended: bool,
}

impl Call {
    fn end(&mut self, code: Code) {
        if !std::mem::replace(&mut self.ended, true) {
            answered(&self.metrics, self.method, &self.span, code, self.started);
        }
    }
}

/// Counts a call that ended with `code`, and logs it at debug as HTTP requests are.
fn answered(
    metrics: &Metrics,
    method: &'static str,
    span: &tracing::Span,
    code: Code,
    started: Instant,
) {
    let seconds = started.elapsed().as_secs_f64();
    metrics.flight_call(method, code, seconds);
    span.in_scope(|| tracing::debug!(code = ?code, ms = seconds * 1e3, "answered"));
}

impl Drop for Call {
    fn drop(&mut self) {
        self.end(Code::Cancelled);
    }
}

struct Metered<T> {
    inner: Out<T>,
    call: Call,
}

impl<T> Stream for Metered<T> {
    type Item = Result<T, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        // What the stream logs while it runs (a query's failure) names the call and tenant.
        let item = {
            let _in = this.call.span.enter();
            this.inner.as_mut().poll_next(cx)
        };
        match &item {
            Poll::Ready(Some(Err(e))) => this.call.end(e.code()),
            Poll::Ready(None) => this.call.end(Code::Ok),
            _ => {}
        }
        item
    }
}

#[tonic::async_trait]
impl<S: FlightService> FlightService for RedactedFlight<S> {
    type HandshakeStream = Out<HandshakeResponse>;
    type ListFlightsStream = Out<FlightInfo>;
    type DoGetStream = Out<FlightData>;
    type DoPutStream = Out<PutResult>;
    type DoExchangeStream = Out<FlightData>;
    type DoActionStream = Out<arrow_flight::Result>;
    type ListActionsStream = Out<ActionType>;

    async fn handshake(
        &self,
        r: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<Self::HandshakeStream>, Status> {
        self.call_stream("handshake", self.inner.handshake(r)).await
    }

    async fn list_flights(
        &self,
        r: Request<Criteria>,
    ) -> Result<Response<Self::ListFlightsStream>, Status> {
        self.call_stream("list_flights", self.inner.list_flights(r))
            .await
    }

    async fn get_flight_info(
        &self,
        r: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.call_unary("get_flight_info", self.inner.get_flight_info(r))
            .await
    }

    async fn poll_flight_info(
        &self,
        r: Request<FlightDescriptor>,
    ) -> Result<Response<PollInfo>, Status> {
        self.call_unary("poll_flight_info", self.inner.poll_flight_info(r))
            .await
    }

    async fn get_schema(
        &self,
        r: Request<FlightDescriptor>,
    ) -> Result<Response<SchemaResult>, Status> {
        self.call_unary("get_schema", self.inner.get_schema(r))
            .await
    }

    async fn do_get(&self, r: Request<Ticket>) -> Result<Response<Self::DoGetStream>, Status> {
        self.call_stream("do_get", self.inner.do_get(r)).await
    }

    async fn do_put(
        &self,
        r: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        self.call_stream("do_put", self.inner.do_put(r)).await
    }

    async fn do_exchange(
        &self,
        r: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        self.call_stream("do_exchange", self.inner.do_exchange(r))
            .await
    }

    async fn do_action(
        &self,
        r: Request<Action>,
    ) -> Result<Response<Self::DoActionStream>, Status> {
        self.call_stream("do_action", self.inner.do_action(r)).await
    }

    async fn list_actions(
        &self,
        r: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        self.call_stream("list_actions", self.inner.list_actions(r))
            .await
    }
}

/// Elements of an S3 error body that echo the request as the server signed it: its session
/// token (`x-amz-security-token` in the canonical request), its access key and signature.
/// object_store keeps the body in its error's text, and a `SignatureDoesNotMatch` from AWS
/// holds them all; no client of the server is to see its credentials.
const SIGNED_REQUEST_ELEMENTS: [&str; 6] = [
    "CanonicalRequest",
    "CanonicalRequestBytes",
    "StringToSign",
    "StringToSignBytes",
    "SignatureProvided",
    "AWSAccessKeyId",
];

fn signed_request_cut(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    for tag in SIGNED_REQUEST_ELEMENTS {
        let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
        let mut from = 0;
        while let Some(start) = out[from..].find(&open).map(|i| from + i + open.len()) {
            // An element cut short by the message's end: up to the end.
            let end = out[start..].find(&close).map_or(out.len(), |i| start + i);
            let mut text = out.into_owned();
            text.replace_range(start..end, "(redacted)");
            from = start + "(redacted)".len();
            out = Cow::Owned(text);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_s3_error_body_loses_the_servers_credentials() {
        let r = Redact::new(&["s3://lake/acme".into()]);
        let body = "Generic S3 error: Error performing PUT https://s3.amazonaws.com/lake/acme/t/_log/x.json in 1.2s - Server returned non-retryable error. Received 403 Forbidden: <?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match</Message><AWSAccessKeyId>ASIAEXAMPLE</AWSAccessKeyId><StringToSign>AWS4-HMAC-SHA256\n20261206T000000Z</StringToSign><SignatureProvided>abc123</SignatureProvided><CanonicalRequest>PUT\n/lake/acme/t/_log/x.json\n\nhost:s3.amazonaws.com\nx-amz-security-token:FwoGZXIvYXdzEXAMPLETOKEN\n</CanonicalRequest><RequestId>R1</RequestId></Error>";
        let out = r.apply(body);
        for secret in [
            "ASIAEXAMPLE",
            "abc123",
            "FwoGZXIvYXdzEXAMPLETOKEN",
            "20261206T000000Z",
        ] {
            assert!(!out.contains(secret), "{secret} in {out}");
        }
        assert!(out.contains("<Code>SignatureDoesNotMatch</Code>"), "{out}");
        assert!(
            out.contains("<CanonicalRequest>(redacted)</CanonicalRequest>"),
            "{out}"
        );
        assert!(out.contains("<RequestId>R1</RequestId>"), "{out}");
        assert!(!out.contains("lake/acme/"), "{out}");
        // Cut short by the message's end, the rest goes too.
        let cut = r.apply("<Error><CanonicalRequest>PUT\nx-amz-security-token:TOK");
        assert_eq!(cut, "<Error><CanonicalRequest>(redacted)");
    }

    #[test]
    fn paths_are_taken_out_of_text_statuses_and_plans() {
        let r = Redact::new(&["/srv/wh/alpha".into(), "s3://lake/beta/".into()]);
        assert_eq!(
            r.apply("a table already exists at '/srv/wh/alpha/events'"),
            "a table already exists at 'events'"
        );
        assert_eq!(
            r.apply("Object at location srv/wh/alpha/t/_data/p.parquet not found"),
            "Object at location t/_data/p.parquet not found"
        );
        assert_eq!(r.apply("s3://lake/beta/t and lake/beta/u"), "t and u");
        // Text that names nothing of the warehouse is left as it is, not copied.
        assert!(matches!(r.apply("no such column"), Cow::Borrowed(_)));

        let s = r.status(Status::not_found("missing srv/wh/alpha/x/_log/1.json"));
        assert_eq!(s.code(), tonic::Code::NotFound);
        assert_eq!(s.message(), "missing x/_log/1.json");

        let batch = RecordBatch::try_from_iter([
            (
                "plan",
                Arc::new(StringArray::from(vec![
                    Some("file_groups={1 group: [[srv/wh/alpha/e/_data/a.parquet]]}"),
                    None,
                ])) as ArrayRef,
            ),
            (
                "n",
                Arc::new(arrow::array::Int64Array::from(vec![1, 2])) as ArrayRef,
            ),
        ])
        .unwrap();
        let out = r.batch(batch);
        let plan = out.column(0).as_string::<i32>();
        assert_eq!(
            plan.value(0),
            "file_groups={1 group: [[e/_data/a.parquet]]}"
        );
        assert!(plan.is_null(1));
        assert_eq!(out.column(1).len(), 2);
    }

    fn calls(m: &Metrics) -> String {
        let text = m.render();
        let mut lines: Vec<_> = text
            .lines()
            .filter(|l| l.starts_with("neve_flight_calls_total{"))
            .collect();
        lines.sort();
        lines.join("\n")
    }

    /// A stream is counted once: with its first error's code, `Ok` at its end, or `Cancelled`
    /// when dropped before either; an error returned at once is counted with its code.
    #[tokio::test]
    async fn flight_calls_are_counted_by_how_they_ended() {
        let metrics = Arc::new(Metrics::new());
        let front = RedactedFlight::new((), Arc::new(Redact::new(&[])), metrics.clone());
        let stream = |items: Vec<Result<u8, Status>>| {
            front
                .stream(
                    "do_get",
                    tracing::Span::none(),
                    Instant::now(),
                    Ok(Response::new(futures::stream::iter(items))),
                )
                .unwrap()
                .into_inner()
        };
        let all: Vec<_> = stream(vec![Ok(1), Ok(2)]).collect().await;
        assert_eq!(all.len(), 2);
        let mut failing = stream(vec![Ok(1), Err(Status::not_found("x")), Ok(3)]);
        assert!(failing.next().await.unwrap().is_ok());
        assert_eq!(
            failing.next().await.unwrap().unwrap_err().code(),
            Code::NotFound
        );
        drop(failing);
        let mut dropped = stream(vec![Ok(1), Ok(2)]);
        assert!(dropped.next().await.is_some());
        drop(dropped);
        let refused = front.stream::<u8, futures::stream::Empty<_>>(
            "do_get",
            tracing::Span::none(),
            Instant::now(),
            Err(Status::unauthenticated("no token")),
        );
        assert!(refused.is_err());
        let _ = front.unary(
            "get_flight_info",
            &tracing::Span::none(),
            Instant::now(),
            Ok(Response::new(())),
        );
        assert_eq!(
            calls(&metrics),
            [
                r#"neve_flight_calls_total{method="do_get",code="Cancelled"} 1"#,
                r#"neve_flight_calls_total{method="do_get",code="NotFound"} 1"#,
                r#"neve_flight_calls_total{method="do_get",code="Ok"} 1"#,
                r#"neve_flight_calls_total{method="do_get",code="Unauthenticated"} 1"#,
                r#"neve_flight_calls_total{method="get_flight_info",code="Ok"} 1"#,
            ]
            .join("\n"),
            "{}",
            metrics.render()
        );
        assert!(metrics
            .render()
            .contains(r#"neve_flight_call_seconds_count{method="do_get"} 4"#));
    }
}
