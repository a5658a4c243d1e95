//! Iceberg metadata written after a commit returns: the commit's caller (the server answering
//! an insert) does not wait for it, and Iceberg readers see the commit one sync later.
//!
//! One task per table at a time writes the newest committed snapshot it was handed; commits
//! made meanwhile are described by its next round, all at once (a sync describes every
//! version up to the one it is given). So the metadata lags the log by at most the sync
//! running and the one after it. A sync that fails is logged and caught up by the next one,
//! as after a commit.

use std::sync::{Arc, Mutex};

use super::IcebergWriter;
use crate::log::{CommitInfo, Snapshot};

/// Syncs a table's Iceberg metadata in the background, newest snapshot first.
#[derive(Debug)]
pub(crate) struct Background {
    writer: IcebergWriter,
    state: Mutex<State>,
    settled: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct State {
    /// The newest snapshot handed over and not yet synced, with its commit's info.
    next: Option<(Snapshot, Option<CommitInfo>)>,
    /// Whether a task is syncing. Always set while `next` is: it is what `busy` and
    /// `settled` read.
    running: bool,
}

impl Background {
    pub(crate) fn new(writer: IcebergWriter) -> Arc<Self> {
        Arc::new(Self {
            writer,
            state: Mutex::default(),
            settled: tokio::sync::Notify::new(),
        })
    }

    /// Hand over a snapshot just committed. Returns at once; a task syncs it (with anything
    /// newer handed over before it starts). Must be called within a tokio runtime.
    pub(crate) fn submit(self: &Arc<Self>, snapshot: &Snapshot, info: Option<&CommitInfo>) {
        // Copied before the lock, which the task takes between its syncs.
        let handed = (snapshot.clone(), info.cloned());
        let mut state = self.state.lock().expect("background sync");
        if state
            .next
            .as_ref()
            .is_none_or(|(s, _)| s.version < snapshot.version)
        {
            state.next = Some(handed);
        }
        if !state.running {
            state.running = true;
            tokio::spawn(self.clone().run());
        }
    }

    async fn run(self: Arc<Self>) {
        // A sync that panics must not leave waiters (a server shutting down) waiting forever.
        let _unwind = Unwind(&self);
        loop {
            let Some((snapshot, info)) = ({
                let mut state = self.state.lock().expect("background sync");
                let next = state.next.take();
                if next.is_none() {
                    state.running = false;
                    self.settled.notify_waiters();
                }
                next
            }) else {
                return;
            };
            crate::failpoint::hit("iceberg:background-sync");
            if let Err(e) = self.writer.sync_committed(&snapshot, info.as_ref()).await {
                tracing::warn!(
                    version = snapshot.version,
                    error = %e,
                    "Iceberg metadata not written in the background; the next sync catches up"
                );
            }
        }
    }

    /// Whether a snapshot handed over is still being synced or waits to be.
    pub(crate) fn busy(&self) -> bool {
        self.state.lock().expect("background sync").running
    }

    /// Wait until every snapshot handed over so far has been synced (or failed to be).
    pub(crate) async fn settled(&self) {
        loop {
            let notified = self.settled.notified();
            tokio::pin!(notified);
            // Registered before the state is read, so a task ending in between still wakes it.
            notified.as_mut().enable();
            if !self.busy() {
                return;
            }
            notified.await;
        }
    }
}

/// Marks the task ended if it unwinds (the normal end does so under the lock, with the check
/// for a next snapshot).
struct Unwind<'a>(&'a Background);

impl Drop for Unwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Ok(mut state) = self.0.state.lock() {
                state.running = false;
                state.next = None;
            }
            self.0.settled.notify_waiters();
        }
    }
}
