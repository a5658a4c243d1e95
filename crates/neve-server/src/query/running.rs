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

/// The query's stream, shared with the watchdog, which drops it at the deadline.
type Shared = Arc<std::sync::Mutex<Option<SendableRecordBatchStream>>>;

pub struct Running {
    /// Taken (and dropped) by the watchdog at the deadline: a client that stopped reading
    /// must not keep the query's memory and spill files until it closes the connection.
    batches: Shared,
    schema: arrow::datatypes::SchemaRef,
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
    /// Gives the slot back and drops the query at the deadline even if the client stopped
    /// reading (nothing polls `next` while the socket is full). Aborted when this is dropped.
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
        let schema = batches.schema();
        let batches: Shared = Arc::new(std::sync::Mutex::new(Some(batches)));
        let query = batches.clone();
        Self {
            batches,
            schema,
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
                // Dropping the stream stops the query and frees its memory and spill files;
                // `next` then reports the timeout, if the client ever asks. A poll in progress
                // holds the lock: waited for without blocking a runtime thread.
                loop {
                    let taken = match query.try_lock() {
                        Ok(mut g) => Some(g.take()),
                        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner().take()),
                        Err(std::sync::TryLockError::WouldBlock) => None,
                    };
                    match taken {
                        Some(stream) => break drop(stream),
                        None => tokio::time::sleep(Duration::from_millis(10)).await,
                    }
                }
            })
            .abort_handle(),
        }
    }

    pub fn schema(&self) -> arrow::datatypes::SchemaRef {
        self.schema.clone()
    }

    /// The batch read before answering, if any (counted as sent), for the caller to encode
    /// before it commits to a status.
    pub fn take_first(&mut self) -> Option<RecordBatch> {
        let b = self.first.take()?;
        self.rows += b.num_rows() as u64;
        Some(b)
    }

    /// The next batch; `None` at the end (counted as answered). An error ends the query.
    pub async fn next(&mut self) -> Option<Result<RecordBatch, Error>> {
        if self.finished {
            return None;
        }
        let next = match self.first.take() {
            Some(b) => Some(Ok(b)),
            None => {
                let timeout = Error::QueryTimeout {
                    after: self.timeout,
                };
                // The lock is held for one poll at a time, never across an await.
                let batches = &self.batches;
                let next = futures::future::poll_fn(|cx| match lock(batches).as_mut() {
                    Some(s) => s.poll_next_unpin(cx).map(Ok),
                    None => std::task::Poll::Ready(Err(())),
                });
                match tokio::time::timeout_at(self.deadline, next).await {
                    Ok(Ok(b)) => b.map(|r| r.map_err(|e| Error::from(query_error(e)))),
                    Ok(Err(())) | Err(_) => Some(Err(timeout)),
                }
            }
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
    drop(lock(slot).take());
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Says when it is dropped.
    struct Flag(Arc<AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// A client that stopped reading (nobody calls `next`) still loses its query, slot and
    /// memory at the deadline; asking afterwards gets the timeout.
    #[tokio::test]
    async fn the_deadline_drops_a_query_nobody_reads() {
        let dropped = Arc::new(AtomicBool::new(false));
        let schema = Arc::new(arrow::datatypes::Schema::empty());
        // A query that never ends, and says when it is dropped.
        let flag = Flag(dropped.clone());
        let stream = Box::pin(neve_core::query::RecordBatchStreamAdapter::new(
            schema.clone(),
            futures::stream::poll_fn(move |_| {
                let _alive = &flag;
                std::task::Poll::Pending
            }),
        ));
        let slots = Arc::new(tokio::sync::Semaphore::new(1));
        let permit = slots.clone().acquire_owned().await.unwrap();
        let timeout = Duration::from_millis(400);
        let mut running = Running::new(
            stream,
            None,
            tokio::time::Instant::now() + timeout,
            timeout,
            Arc::new(Metrics::default()),
            permit,
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!dropped.load(Ordering::SeqCst));
        assert_eq!(slots.available_permits(), 0);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(
            dropped.load(Ordering::SeqCst),
            "the query outlived its deadline"
        );
        assert_eq!(slots.available_permits(), 1);
        assert_eq!(running.schema(), schema);
        let e = running.next().await.unwrap().unwrap_err();
        assert!(matches!(e, Error::QueryTimeout { .. }), "{e}");
        assert!(running.next().await.is_none());
    }
}
