//! Group commit. Each table has one queue and one flusher task: requests are decoded and
//! checked before they join the queue (a bad one is refused alone), then flushed together
//! when the oldest has waited `flush_interval`, the queue holds `flush_bytes`/`flush_rows`,
//! or (`flush_early`) as many requests wait as the last flush answered.
//! A flush is one insert: one set of files, one commit. Each request is answered only after
//! that commit is in the bucket, with its version; a failed flush fails all of its requests
//! and leaves none of their rows visible. A queue nothing has joined for `keep_idle_tables`
//! ends, with its task, so a server that has written to thousands of tables keeps tasks only
//! for those being written.

pub mod body;
pub(crate) mod flight;
pub mod lineproto;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use neve_core::log::RequestKey;
use neve_core::table::PreparedInput;
use neve_core::{InsertOptions, Table};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};

use crate::config::IngestConfig;
use crate::error::{Error, Result};
use crate::metrics::Metrics;

/// What a request is answered with.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Ack {
    pub version: u64,
    pub rows: u64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub commit_id: String,
    /// True when the request was a retry of one committed before: nothing was added.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub duplicate: bool,
}

/// A request's `Idempotency-Key` and a fingerprint of what it sent: a retry sends the same,
/// and another request reusing the key is refused (422) rather than answered as a retry.
#[derive(Debug, Clone)]
pub struct Idempotency {
    pub key: String,
    pub digest: String,
}

impl Idempotency {
    /// The fingerprint of `parts` (the body as decoded, and whatever changes its meaning).
    pub fn new(key: String, parts: &[&[u8]]) -> Self {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        for p in parts {
            h.update((p.len() as u64).to_le_bytes());
            h.update(p);
        }
        let digest = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        Self { key, digest }
    }

    /// The refusal of this request, whose key another request used.
    fn reused(&self) -> Error {
        Error::IdempotencyKeyReused {
            key: self.key.clone(),
        }
    }

    /// Whether a request committed with `logged` (absent in older logs) was this one.
    fn matches(&self, logged: Option<&str>) -> bool {
        logged.is_none_or(|d| d == self.digest)
    }
}

struct Pending {
    input: PreparedInput,
    key: Option<Idempotency>,
    respond: oneshot::Sender<Result<Ack>>,
    arrived: Instant,
    /// Memory this request holds until it is answered (the backpressure budget).
    _permit: OwnedSemaphorePermit,
}

/// The queues of all tables this server has written to.
pub struct Ingest {
    config: IngestConfig,
    metrics: Arc<Metrics>,
    /// The grace of this server's own gc: an insert older than half of it is not committed.
    gc_grace_ms: Option<i64>,
    budget: Arc<Semaphore>,
    /// How long a queue waits for a request before it ends.
    idle: std::time::Duration,
    queues: Arc<tokio::sync::Mutex<Queues>>,
    flushers: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// Each table's queue.
type Queues = HashMap<String, mpsc::UnboundedSender<Pending>>;

/// Budget units of 1 KiB, so a semaphore's permit count is enough for any memory size.
const UNIT: u64 = 1024;

impl Ingest {
    /// `gc_grace`: the grace of the gc this server runs, if it runs one.
    /// `idle`: how long a table's queue and task outlive its last request.
    pub fn new(
        config: IngestConfig,
        gc_grace: Option<std::time::Duration>,
        idle: std::time::Duration,
        metrics: Arc<Metrics>,
    ) -> Self {
        let units = (config.max_pending_bytes / UNIT).clamp(1, Semaphore::MAX_PERMITS as u64);
        Self {
            gc_grace_ms: gc_grace.map(|g| g.as_millis() as i64),
            budget: Arc::new(Semaphore::new(units as usize)),
            config,
            metrics,
            idle,
            queues: Default::default(),
            flushers: Default::default(),
        }
    }

    /// Reserve memory for a request of `bytes`, or refuse it with 429 (never wait: a client
    /// told to come back is better than a server out of memory), or with 413 when the whole
    /// budget is smaller than it.
    pub fn reserve(&self, bytes: u64) -> Result<OwnedSemaphorePermit> {
        self.fits(bytes)?;
        let units = bytes.div_ceil(UNIT).max(1);
        let units = u32::try_from(units).map_err(|_| Error::BodyTooLarge {
            limit: self.config.max_body_bytes,
        })?;
        self.budget
            .clone()
            .try_acquire_many_owned(units)
            .map_err(|_| {
                self.metrics.rejected_overloaded.inc();
                Error::Overloaded {
                    retry_after_s: self.config.flush_interval.as_secs().max(1),
                }
            })
    }

    /// Refuses (413) a request of `bytes` that the whole budget could never hold: told 429, a
    /// client would retry it forever.
    fn fits(&self, bytes: u64) -> Result<()> {
        let limit = self.config.max_pending_bytes;
        if bytes > limit {
            return Err(Error::RequestTooLarge { bytes, limit });
        }
        Ok(())
    }

    /// Grow `permit` to cover `bytes` (a request whose decoded form is larger than its
    /// body), or refuse with 429 (or 413, as `reserve`).
    pub fn top_up(&self, permit: &mut OwnedSemaphorePermit, bytes: u64) -> Result<()> {
        self.fits(bytes)?;
        let held = permit.num_permits() as u64 * UNIT;
        if bytes > held {
            permit.merge(self.reserve(bytes - held)?);
        }
        Ok(())
    }

    /// Queue a prepared request for `table` (at `address`) and wait for its commit.
    pub async fn submit(
        &self,
        address: &str,
        table: &Arc<Table>,
        input: PreparedInput,
        key: Option<Idempotency>,
        permit: OwnedSemaphorePermit,
    ) -> Result<Ack> {
        let (tx, rx) = oneshot::channel();
        let pending = Pending {
            input,
            key,
            respond: tx,
            arrived: Instant::now(),
            _permit: permit,
        };
        {
            // Sent under the lock: a flusher that ends for being idle takes it to leave, so
            // nothing is sent to a queue that is no longer read.
            let mut queues = self.queues.lock().await;
            // A flusher that panicked (a bug) left its queue unread: a new one takes over, so
            // one bad batch does not refuse the table's inserts until a restart.
            if queues.get(address).is_some_and(|s| s.is_closed()) {
                tracing::error!(table = %address, "insert queue's flusher ended unexpectedly; starting a new one");
                queues.remove(address);
                self.metrics.ingest_queues.dec();
            }
            let sender = queues.entry(address.to_string()).or_insert_with(|| {
                let (s, r) = mpsc::unbounded_channel();
                let flusher = Flusher {
                    table: table.clone(),
                    config: self.config.clone(),
                    metrics: self.metrics.clone(),
                    gc_grace_ms: self.gc_grace_ms,
                    idle: self.idle,
                    queues: self.queues.clone(),
                    address: address.to_string(),
                    own: s.downgrade(),
                };
                let handle = tokio::spawn(flusher.run(r));
                let mut flushers = self.flushers.lock().expect("not poisoned");
                flushers.retain(|h| !h.is_finished());
                flushers.push(handle);
                self.metrics.ingest_queues.inc();
                s
            });
            self.metrics.queued_requests.inc();
            self.metrics.queued_bytes.inc_by(pending.input.bytes as i64);
            sender.send(pending).map_err(|_| Error::ShuttingDown)?;
        }
        rx.await.map_err(|_| Error::ShuttingDown)?
    }

    /// Close every queue and wait until every queued request is flushed and answered.
    pub async fn drain(&self) {
        let closed = std::mem::take(&mut *self.queues.lock().await);
        self.metrics.ingest_queues.dec_by(closed.len() as i64);
        drop(closed);
        let handles: Vec<_> = std::mem::take(&mut *self.flushers.lock().expect("not poisoned"));
        for h in handles {
            let _ = h.await;
        }
    }
}

struct Flusher {
    table: Arc<Table>,
    config: IngestConfig,
    metrics: Arc<Metrics>,
    gc_grace_ms: Option<i64>,
    idle: std::time::Duration,
    queues: Arc<tokio::sync::Mutex<Queues>>,
    address: String,
    /// Its own queue's sender, to tell it from a newer queue of the same table (weak, so
    /// the queue still closes when the map drops it).
    own: mpsc::WeakUnboundedSender<Pending>,
}

impl Flusher {
    async fn run(self, mut rx: mpsc::UnboundedReceiver<Pending>) {
        // Requests answered by the last flush: when as many wait again, the clients that
        // were answered are back and the batch is flushed without waiting out the interval.
        // A batch cut by the interval lowers it (clients left); one cut early takes all that
        // already wait, which raises it (clients joined). Below 2 it never cuts early, so a
        // trickle of single requests keeps interval batching.
        let mut expected = usize::MAX;
        while let Some(first) = self.next(&mut rx).await {
            let deadline =
                tokio::time::Instant::from_std(first.arrived + self.config.flush_interval);
            let mut rows = first.input.rows;
            let mut bytes = first.input.bytes;
            let mut batch = vec![first];
            let full = |rows: u64, bytes: u64| {
                rows >= self.config.flush_rows || bytes >= self.config.flush_bytes
            };
            let mut timed_out = false;
            while !full(rows, bytes) {
                if self.config.flush_early && expected >= 2 && batch.len() >= expected {
                    // Take what already waits, without waiting for more.
                    while !full(rows, bytes) {
                        let Ok(p) = rx.try_recv() else { break };
                        rows += p.input.rows;
                        bytes += p.input.bytes;
                        batch.push(p);
                    }
                    break;
                }
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(p)) => {
                        rows += p.input.rows;
                        bytes += p.input.bytes;
                        batch.push(p);
                    }
                    // Closed (shutting down) or time is up: flush what there is.
                    Ok(None) | Err(_) => {
                        timed_out = true;
                        break;
                    }
                }
            }
            expected = if timed_out || expected == usize::MAX {
                batch.len()
            } else {
                batch.len().max(expected)
            };
            self.metrics.queued_requests.dec_by(batch.len() as i64);
            self.metrics.queued_bytes.dec_by(bytes as i64);
            self.flush(batch).await;
        }
    }

    /// The next request, or `None` when the queue is closed or has been idle for `idle` (it
    /// then leaves the map, under the lock submitters send under).
    async fn next(&self, rx: &mut mpsc::UnboundedReceiver<Pending>) -> Option<Pending> {
        if let Ok(p) = tokio::time::timeout(self.idle, rx.recv()).await {
            return p;
        }
        let mut queues = self.queues.lock().await;
        if let Ok(p) = rx.try_recv() {
            return Some(p);
        }
        let ours = |s: &mpsc::UnboundedSender<Pending>| {
            self.own.upgrade().is_some_and(|own| own.same_channel(s))
        };
        if queues.get(&self.address).is_some_and(ours) {
            queues.remove(&self.address);
            self.metrics.ingest_queues.dec();
        }
        // No request can be in the queue: they are sent under the lock held here.
        None
    }

    async fn flush(&self, mut batch: Vec<Pending>) {
        let started = Instant::now();
        // The same key twice in one flush: the later ones are answered with the first's
        // result and add nothing.
        let mut twins: Vec<(usize, Pending)> = Vec::new();
        {
            let mut first_of: HashMap<String, usize> = HashMap::new();
            let mut kept = Vec::with_capacity(batch.len());
            for p in batch {
                match p.key.as_ref().and_then(|k| first_of.get(&k.key).copied()) {
                    Some(i) => twins.push((i, p)),
                    None => {
                        if let Some(k) = &p.key {
                            first_of.insert(k.key.clone(), kept.len());
                        }
                        kept.push(p);
                    }
                }
            }
            batch = kept;
        }
        let mut results: Vec<Option<Result<Ack>>> = (0..batch.len()).map(|_| None).collect();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let open: Vec<usize> = (0..batch.len()).filter(|&i| results[i].is_none()).collect();
            if open.is_empty() {
                break;
            }
            match self.commit(&batch, &open, &mut results).await {
                Ok(()) => break,
                Err(Retry::Again) if attempts < 8 => continue,
                Err(Retry::Again) => {
                    for i in open {
                        results[i].get_or_insert_with(|| {
                            Err(Error::CommitFailed {
                                kind: neve_core::ErrorKind::Conflict,
                                code: "conflict",
                                reason: "gave up after repeated duplicate requests".into(),
                            })
                        });
                    }
                    break;
                }
            }
        }
        let elapsed = started.elapsed();
        self.metrics.flush_seconds.observe(elapsed.as_secs_f64());
        for (i, twin) in twins {
            let reused = match (&twin.key, &batch[i].key) {
                (Some(t), Some(first)) if !t.matches(Some(&first.digest)) => Some(t.reused()),
                _ => None,
            };
            let r = match (&results[i], reused) {
                (_, Some(e)) => Err(e),
                (Some(Ok(ack)), None) => Ok(Ack {
                    duplicate: true,
                    ..ack.clone()
                }),
                (Some(Err(e)), None) => Err(e.duplicate()),
                (None, None) => Err(Error::ShuttingDown),
            };
            self.answer(twin, r);
        }
        for (p, r) in batch.into_iter().zip(results) {
            self.answer(p, r.unwrap_or(Err(Error::ShuttingDown)));
        }
    }

    fn answer(&self, p: Pending, r: Result<Ack>) {
        self.metrics
            .ack_seconds
            .observe(p.arrived.elapsed().as_secs_f64());
        let _ = p.respond.send(r);
    }

    /// One attempt at committing the requests `open` of `batch`; fills their results.
    async fn commit(
        &self,
        batch: &[Pending],
        open: &[usize],
        results: &mut [Option<Result<Ack>>],
    ) -> Result<(), Retry> {
        let fail_all = |results: &mut [Option<Result<Ack>>], e: &neve_core::Error| {
            for &i in open {
                results[i] = Some(Err(crate::error::commit_failed(e)));
            }
        };
        let snapshot = match self.table.snapshot().await {
            Ok(s) => s,
            Err(e) => {
                fail_all(results, &e);
                return Ok(());
            }
        };
        // Retries of requests committed before (by this or another instance): answered
        // with the original commit, nothing added.
        let mut todo = Vec::with_capacity(open.len());
        for &i in open {
            let key = batch[i].key.as_ref();
            match key.and_then(|k| Some((k, snapshot.request(&k.key)?))) {
                Some((k, logged)) if !k.matches(logged.digest.as_deref()) => {
                    results[i] = Some(Err(k.reused()));
                }
                Some((_, logged)) => {
                    results[i] = Some(Ok(replayed(logged)));
                }
                None => todo.push(i),
            }
        }
        // Requests whose new columns clash with another's in this flush (or with a schema
        // changed since they were checked) are refused alone.
        let meta = &snapshot.metadata;
        let mut merged = meta.schema.clone();
        let mut go = Vec::with_capacity(todo.len());
        for i in todo {
            let fitted = batch[i].input.fit(&meta.schema);
            let fits = neve_core::schema::TableSchema::from_arrow(&fitted.schema)
                .and_then(|s| merged.evolve(&s, meta.settings.strict_schema));
            match fits {
                Ok(m) => {
                    merged = m;
                    go.push(i);
                }
                Err(e) => results[i] = Some(Err(Error::Table(e))),
            }
        }
        if go.is_empty() {
            return Ok(());
        }
        let expires = chrono::Utc::now().timestamp_millis()
            + self.config.idempotency_window.as_millis() as i64;
        let opts = InsertOptions {
            requests: go
                .iter()
                .filter_map(|&i| {
                    batch[i].key.as_ref().map(|k| RequestKey {
                        key: k.key.clone(),
                        rows: batch[i].input.rows,
                        expires,
                        digest: Some(k.digest.clone()),
                    })
                })
                .collect(),
            gc_grace_ms: self.gc_grace_ms,
            ..Default::default()
        };
        let inputs: Vec<PreparedInput> = go.iter().map(|&i| batch[i].input.clone()).collect();
        self.metrics.flushes.inc();
        match self.table.insert_prepared(&inputs, &opts).await {
            Ok(report) => {
                let version = report.version.unwrap_or(snapshot.version);
                self.metrics.commits.inc();
                self.metrics.commit_attempts.inc_by(report.attempts as u64);
                self.metrics
                    .commit_conflicts
                    .inc_by(report.attempts.saturating_sub(1) as u64);
                self.metrics.flush_rows.observe(report.rows as f64);
                self.metrics.files_written.inc_by(report.files);
                let commit_id = report.commit_id.clone();
                for &i in &go {
                    results[i] = Some(Ok(Ack {
                        version,
                        rows: batch[i].input.rows,
                        commit_id: commit_id.clone(),
                        duplicate: false,
                    }));
                }
                Ok(())
            }
            // A request of this flush was committed meanwhile by someone else: answer it, and
            // commit the others again.
            Err(neve_core::Error::RequestCommitted {
                key,
                version,
                rows,
                digest,
            }) => {
                self.metrics.duplicates.inc();
                for &i in &go {
                    let Some(k) = batch[i].key.as_ref().filter(|k| k.key == key) else {
                        continue;
                    };
                    results[i] = Some(if k.matches(digest.as_deref()) {
                        Ok(Ack {
                            version,
                            rows,
                            commit_id: String::new(),
                            duplicate: true,
                        })
                    } else {
                        Err(k.reused())
                    });
                }
                Err(Retry::Again)
            }
            // The table's schema changed under the flush (another writer's commit added a
            // column of another type) and the requests no longer fit together: each alone,
            // so only those that no longer fit fail, with their own error.
            Err(e) if e.kind() == neve_core::ErrorKind::BadInput && go.len() > 1 => {
                tracing::info!(table = %self.table.location().display, error = %e, requests = go.len(), "flush refused: committing its requests one by one");
                for &i in &go {
                    // A request committed meanwhile under its key is left open for the
                    // flush's next attempt, as any other.
                    let _ = Box::pin(self.commit(batch, &[i], results)).await;
                }
                match go.iter().any(|&i| results[i].is_none()) {
                    true => Err(Retry::Again),
                    false => Ok(()),
                }
            }
            Err(e) => {
                tracing::warn!(table = %self.table.location().display, error = %e, requests = go.len(), "flush failed");
                self.metrics.flush_failures.inc();
                for &i in &go {
                    results[i] = Some(Err(crate::error::commit_failed(&e)));
                }
                Ok(())
            }
        }
    }
}

enum Retry {
    Again,
}

#[cfg(test)]
mod tests;

fn replayed(logged: &neve_core::log::LoggedRequest) -> Ack {
    Ack {
        version: logged.version,
        rows: logged.rows,
        commit_id: String::new(),
        duplicate: true,
    }
}
