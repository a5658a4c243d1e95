//! A query being streamed to a client (over HTTP or Flight): its batches under the time
//! limit, its slot, and its outcome in the metrics. Dropping it before the end (the client
//! went away) drops the batches, which stops the query.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use futures::StreamExt;
use neve_core::query::{query_error, SendableRecordBatchStream};
use tokio::sync::OwnedSemaphorePermit;

use crate::error::Error;
use crate::metrics::Metrics;

pub struct Running {
    batches: SendableRecordBatchStream,
    /// A batch read already (to decide the status before answering), sent first.
    first: Option<RecordBatch>,
    deadline: tokio::time::Instant,
    timeout: Duration,
    started: Instant,
    metrics: Arc<Metrics>,
    rows: u64,
    finished: bool,
    /// The query's slot. Given back as the query ends, before its last bytes are sent, so a
    /// client that has read the whole answer finds the slot free for its next query.
    slot: Arc<std::sync::Mutex<Option<OwnedSemaphorePermit>>>,
    /// Gives the slot back at the deadline even if the client stopped reading (nothing polls
    /// `next` while the socket is full). Aborted when this is dropped.
    watchdog: tokio::task::AbortHandle,
}

impl Running {
    pub fn new(
        batches: SendableRecordBatchStream,
        first: Option<RecordBatch>,
        deadline: tokio::time::Instant,
        timeout: Duration,
        metrics: Arc<Metrics>,
        permit: OwnedSemaphorePermit,
    ) -> Self {
        let slot = Arc::new(std::sync::Mutex::new(Some(permit)));
        let held = slot.clone();
        Self {
            batches,
            first,
            deadline,
            timeout,
            started: Instant::now(),
            metrics,
            rows: 0,
            finished: false,
            slot,
            watchdog: tokio::spawn(async move {
                tokio::time::sleep_until(deadline).await;
                release(&held);
            })
            .abort_handle(),
        }
    }

    pub fn schema(&self) -> arrow::datatypes::SchemaRef {
        self.batches.schema()
    }

    /// The next batch; `None` at the end (counted as answered). An error ends the query.
    pub async fn next(&mut self) -> Option<Result<RecordBatch, Error>> {
        if self.finished {
            return None;
        }
        let next = match self.first.take() {
            Some(b) => Some(Ok(b)),
            None => match tokio::time::timeout_at(self.deadline, self.batches.next()).await {
                Ok(b) => b.map(|r| r.map_err(|e| Error::from(query_error(e)))),
                Err(_) => Some(Err(Error::QueryTimeout {
                    after: self.timeout,
                })),
            },
        };
        match next {
            Some(Ok(b)) => {
                self.rows += b.num_rows() as u64;
                Some(Ok(b))
            }
            Some(Err(e)) => Some(Err(self.fail(e))),
            None => {
                self.finished = true;
                release(&self.slot);
                self.metrics.queries_ok.inc();
                self.metrics
                    .query_seconds
                    .observe(self.started.elapsed().as_secs_f64());
                self.metrics.query_rows.inc_by(self.rows);
                None
            }
        }
    }

    /// End the query with `e` (counted by its code).
    pub fn fail(&mut self, e: Error) -> Error {
        self.finished = true;
        release(&self.slot);
        tracing::warn!(error = %e, rows = self.rows, "query failed while streaming");
        self.metrics.query_outcome(&e);
        e
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.watchdog.abort();
        release(&self.slot);
        if !self.finished {
            self.metrics.queries_cancelled.inc();
            tracing::info!(
                rows = self.rows,
                "query cancelled: the client closed the connection"
            );
        }
    }
}

/// Give the query's slot back (once; later calls find it gone).
fn release(slot: &std::sync::Mutex<Option<OwnedSemaphorePermit>>) {
    drop(slot.lock().unwrap_or_else(|e| e.into_inner()).take());
}
