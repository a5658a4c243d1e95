//! Where the warehouse is, is no business of a client's: messages from storage and DataFusion
//! name objects by their full paths, and an `EXPLAIN` names every file it reads. Whatever the
//! server answers with such text (HTTP error bodies, Flight SQL statuses, plans) goes through
//! [`Redact`], which leaves names relative to the caller's own folder (`events/_data/…`).

use std::borrow::Cow;
use std::pin::Pin;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray};
use arrow::datatypes::DataType;
use arrow_flight::flight_service_server::FlightService;
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightInfo,
    HandshakeRequest, HandshakeResponse, PollInfo, PutResult, SchemaResult, Ticket,
};
use futures::{Stream, StreamExt};
use neve_core::query::{RecordBatchStreamAdapter, SendableRecordBatchStream};
use tonic::{Request, Response, Status, Streaming};

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
        let mut out = Cow::Borrowed(text);
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

/// A Flight service whose every status, returned or streamed, is redacted.
pub struct RedactedFlight<S> {
    inner: S,
    redact: Arc<Redact>,
}

impl<S> RedactedFlight<S> {
    pub fn new(inner: S, redact: Arc<Redact>) -> Self {
        Self { inner, redact }
    }

    fn unary<T>(&self, r: Result<Response<T>, Status>) -> Result<Response<T>, Status> {
        r.map_err(|s| self.redact.status(s))
    }

    fn stream<T, St>(&self, r: Result<Response<St>, Status>) -> Result<Response<Out<T>>, Status>
    where
        St: Stream<Item = Result<T, Status>> + Send + 'static,
    {
        let r = self.unary(r)?;
        let redact = self.redact.clone();
        Ok(r.map(|s| {
            s.map(move |item| item.map_err(|e| redact.status(e)))
                .boxed()
        }))
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
        self.stream(self.inner.handshake(r).await)
    }

    async fn list_flights(
        &self,
        r: Request<Criteria>,
    ) -> Result<Response<Self::ListFlightsStream>, Status> {
        self.stream(self.inner.list_flights(r).await)
    }

    async fn get_flight_info(
        &self,
        r: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.unary(self.inner.get_flight_info(r).await)
    }

    async fn poll_flight_info(
        &self,
        r: Request<FlightDescriptor>,
    ) -> Result<Response<PollInfo>, Status> {
        self.unary(self.inner.poll_flight_info(r).await)
    }

    async fn get_schema(
        &self,
        r: Request<FlightDescriptor>,
    ) -> Result<Response<SchemaResult>, Status> {
        self.unary(self.inner.get_schema(r).await)
    }

    async fn do_get(&self, r: Request<Ticket>) -> Result<Response<Self::DoGetStream>, Status> {
        self.stream(self.inner.do_get(r).await)
    }

    async fn do_put(
        &self,
        r: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        self.stream(self.inner.do_put(r).await)
    }

    async fn do_exchange(
        &self,
        r: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        self.stream(self.inner.do_exchange(r).await)
    }

    async fn do_action(
        &self,
        r: Request<Action>,
    ) -> Result<Response<Self::DoActionStream>, Status> {
        self.stream(self.inner.do_action(r).await)
    }

    async fn list_actions(
        &self,
        r: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        self.stream(self.inner.list_actions(r).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
