//! Manifest entries encoded ahead of a commit: an insert's files are known before its commit
//! runs, and so is the version it will most likely make (the one after its snapshot's), so
//! their entries are encoded on the rayon pool while the commit's log entry is built and PUT,
//! instead of after it, on the insert's path. A commit at another version (it lost a race)
//! re-encodes them: an entry records the version that added its file (`EncodedEntry::is_of`).
//!
//! A worker of the pool never waits here: the encoding is claimed by whichever of the pool's
//! job and the sync comes first, and only the sync (off the pool) waits for the job. A pool
//! worker blocked on a sync that encoded in parallel, itself needing the pool, hung the tests
//! on two cores (every worker waiting, the sync's pieces queued behind them).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;

use super::manifest::{self, EncodedEntry};
use super::KeyedLayout;
use crate::log::AddFile;

const UNCLAIMED: u8 = 0;
const BY_JOB: u8 = 1;
const BY_SYNC: u8 = 2;

/// The entries of files about to be committed, for one layout.
#[derive(Debug)]
pub(crate) struct Ahead {
    layout: KeyedLayout,
    /// The files, and the version expected to add them.
    files: Arc<Vec<AddFile>>,
    version: u64,
    /// Who took the encoding, whoever came first: [`UNCLAIMED`], [`BY_JOB`] or [`BY_SYNC`].
    claimed: AtomicU8,
    /// Set by the pool's job once it has encoded them, if it took them.
    entries: OnceLock<HashMap<String, EncodedEntry>>,
}

impl Ahead {
    /// `adds` as committed at `version`, to be encoded in `layout` (the writer's last).
    pub(crate) fn new(layout: KeyedLayout, version: u64, adds: Arc<Vec<AddFile>>) -> Arc<Self> {
        Arc::new(Self {
            layout,
            files: adds,
            version,
            claimed: AtomicU8::new(UNCLAIMED),
            entries: OnceLock::new(),
        })
    }

    /// Whether they were encoded in the layout keyed `key`.
    pub(crate) fn is_for(&self, key: &str) -> bool {
        self.layout.0 == key
    }

    /// Encodes them, unless the sync came first: the pool's job. A panic leaves no entries
    /// (the sync encodes them again and reports why), never a sync waiting for ever.
    pub(crate) fn encode(&self) {
        if !self.claim(BY_JOB) {
            return;
        }
        let entries = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.encoded()))
            .unwrap_or_default();
        let _ = self.entries.set(entries);
    }

    /// The entries by path, once the pool's job has encoded them; `None` when the sync comes
    /// first (it then encodes them with the rest, and the job does nothing). Not to be called
    /// on the pool: it may wait for the job.
    pub(crate) fn entries(&self) -> Option<&HashMap<String, EncodedEntry>> {
        if self.claim(BY_SYNC) || self.claimed.load(Ordering::Acquire) == BY_SYNC {
            return None;
        }
        Some(self.entries.wait())
    }

    /// Whether `by` takes the encoding (no one had).
    fn claim(&self, by: u8) -> bool {
        self.claimed
            .compare_exchange(UNCLAIMED, by, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// A file whose entry fails to encode is left out: the sync encodes it again and reports
    /// why.
    fn encoded(&self) -> HashMap<String, EncodedEntry> {
        let layout = &self.layout.1;
        let Ok(writer) = manifest::entry_writer(layout) else {
            return HashMap::new();
        };
        self.files
            .par_iter()
            .filter_map(|f| {
                let e = manifest::encode_entry_at(layout, &writer, f, self.version as i64).ok()?;
                Some((f.path.clone(), e))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{mpsc, Arc, Barrier};
    use std::time::Duration;

    use super::Ahead;
    use crate::iceberg::manifest::Layout;
    use crate::log::AddFile;
    use crate::TableLocation;

    fn ahead(files: usize, version: u64) -> Arc<Ahead> {
        let location = TableLocation::memory("t");
        let schema = crate::schema::TableSchema::new(vec![]);
        let layout = Layout::new(
            &location,
            &schema,
            "{}".into(),
            0,
            vec![],
            &Default::default(),
        )
        .unwrap();
        let adds = (0..files)
            .map(|i| AddFile {
                path: format!("_data/part-{i}.parquet"),
                partition_values: Default::default(),
                size: 1,
                rows: 1,
                modification_time: 0,
                stats: Default::default(),
                seq: None,
                merged: false,
                added_version: Some(version),
            })
            .collect();
        Ahead::new(Arc::new(("{}".into(), layout)), version, Arc::new(adds))
    }

    /// A sync that comes before the pool's job takes nothing and waits for nothing, even
    /// with every worker of the pool busy (the job queued behind them): it encodes the
    /// files itself. Encoding them in parallel while the workers waited for it hung.
    #[test]
    fn a_sync_before_the_job_never_waits_on_the_pool() {
        let a = ahead(64, 3);
        let workers = rayon::current_num_threads();
        let release = Arc::new(Barrier::new(workers + 1));
        for _ in 0..workers {
            let release = release.clone();
            rayon::spawn(move || {
                release.wait();
            });
        }
        let job = a.clone();
        rayon::spawn(move || job.encode());
        let (tx, rx) = mpsc::channel();
        let sync = a.clone();
        std::thread::spawn(move || tx.send(sync.entries().map(|e| e.len())).unwrap());
        let got = rx.recv_timeout(Duration::from_secs(60));
        release.wait();
        assert_eq!(
            got,
            Ok(None),
            "the sync took the job's entries or waited for it"
        );
        assert_eq!(a.entries().map(|e| e.len()), None, "asked again");
    }

    /// A job that came first leaves an entry per file, of the version given, and the sync
    /// waits for it (off the pool).
    #[test]
    fn a_job_that_came_first_leaves_every_entry() {
        let a = ahead(64, 3);
        let (tx, rx) = mpsc::channel();
        let job = a.clone();
        rayon::spawn(move || {
            job.encode();
            tx.send(()).unwrap();
        });
        rx.recv_timeout(Duration::from_secs(60)).unwrap();
        let entries = a.entries().expect("encoded by the job");
        assert_eq!(entries.len(), 64);
        for f in a.files.iter() {
            assert!(entries[&f.path].is_of(f), "{}", f.path);
            let later = AddFile {
                added_version: Some(4),
                ..f.clone()
            };
            assert!(!entries[&f.path].is_of(&later), "{}", f.path);
        }
    }
}
