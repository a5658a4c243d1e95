//! Manifest entries encoded ahead of a commit: an insert's files are known before its commit
//! runs, and so is the version it will most likely make (the one after its snapshot's), so
//! their entries are encoded on the rayon pool while the commit's log entry is built and PUT,
//! instead of after it, on the insert's path. A commit at another version (it lost a race)
//! re-encodes them: an entry records the version that added its file (`EncodedEntry::is_of`).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;

use super::manifest::{self, EncodedEntry};
use super::KeyedLayout;
use crate::log::AddFile;

/// The entries of files about to be committed, for one layout.
#[derive(Debug)]
pub(crate) struct Ahead {
    layout: KeyedLayout,
    /// The files, and the version expected to add them.
    files: Arc<Vec<AddFile>>,
    version: u64,
    /// Encoded once, by the pool's job or by a sync that comes first (which then waits for,
    /// or does, the same work it would have done).
    entries: OnceLock<HashMap<String, EncodedEntry>>,
}

impl Ahead {
    /// `adds` as committed at `version`, to be encoded in `layout` (the writer's last).
    pub(crate) fn new(layout: KeyedLayout, version: u64, adds: Arc<Vec<AddFile>>) -> Arc<Self> {
        Arc::new(Self {
            layout,
            files: adds,
            version,
            entries: OnceLock::new(),
        })
    }

    /// Whether they were encoded in the layout keyed `key`.
    pub(crate) fn is_for(&self, key: &str) -> bool {
        self.layout.0 == key
    }

    /// The entries by path. A file whose entry fails to encode is left out: the sync encodes
    /// it again and reports why.
    pub(crate) fn entries(&self) -> &HashMap<String, EncodedEntry> {
        self.entries.get_or_init(|| {
            let layout = &self.layout.1;
            let Ok(writer) = manifest::entry_writer(layout) else {
                return HashMap::new();
            };
            self.files
                .par_iter()
                .filter_map(|f| {
                    let e =
                        manifest::encode_entry_at(layout, &writer, f, self.version as i64).ok()?;
                    Some((f.path.clone(), e))
                })
                .collect()
        })
    }
}
