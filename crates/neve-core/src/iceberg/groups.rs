//! The groups of a table with merge semantics (see [`super::deletes`]), kept by a writer from
//! one sync to the next, partition by partition. Computing them and their delete files' keys
//! from every file of the table at each sync grew with the table: at the thirtieth insert
//! of a table whose inserts touch all of its 132 partitions it took longer than deciding
//! (BENCHMARKS.md, issue 19). After an insert, a partition's run only grows at its end, so
//! its groups and keys follow from the files it added.

use std::collections::BTreeMap;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::log::{AddFile, Snapshot};
use crate::merge::{seq_of, MergeSpec};
use crate::storage::TableLocation;

/// A partition's values: what its files share.
type PartKey = BTreeMap<String, Option<String>>;

/// The groups of one version's files, by partition, with their delete files' keys.
#[derive(Debug, Clone)]
pub(crate) struct Grouping {
    version: u64,
    /// What the keys are a function of besides the files: the table's URL and the spec.
    scheme: String,
    files: usize,
    parts: BTreeMap<PartKey, Part>,
}

/// One partition's files as the reader splits them ([`crate::query::merged::split`]).
#[derive(Debug, Clone, Default)]
struct Part {
    /// Files alone in their key range (merged files), in merge order, each with its delete
    /// file's key if it may hold tombstones (a group of its own), `None` if it holds only
    /// rows of the table.
    alone: Vec<(Arc<AddFile>, Option<String>)>,
    /// The run of overlapping files, in merge order, each with its prefix's key.
    run: Vec<(Arc<AddFile>, String)>,
    /// The keys' hash over the run so far, to go on from when files join it.
    chain: Option<KeyChain>,
}

/// The hash that names a group's prefixes' delete files: one hash over the group, finished
/// at each file, so a group of n files costs n file hashes, not n².
#[derive(Debug, Clone)]
pub(crate) struct KeyChain(Sha256);

/// The scheme of the delete files' keys, and of their bytes: equal names must hold equal bytes
/// (a manifest records the size its writer wrote), so a change of how a delete file is encoded
/// takes a new scheme. 3: pages encoded by `delete_file.rs`, not the arrow writer.
pub(crate) const KEY_SCHEME: &str = "neve iceberg position deletes 3";

impl KeyChain {
    pub(crate) fn new(location: &TableLocation, spec: &MergeSpec) -> Self {
        let mut h = Sha256::new();
        h.update(KEY_SCHEME.as_bytes());
        h.update(b"\n");
        h.update(location.file_url("").as_bytes());
        h.update(b"\n");
        h.update(spec.to_string().as_bytes());
        Self(h)
    }

    /// The key of the prefix that ends with `f`.
    pub(crate) fn push(&mut self, f: &AddFile) -> String {
        let (lo, hi) = seq_of(f);
        self.0
            .update(format!("\n{}\t{lo}\t{hi}\t{}", f.path, f.size).as_bytes());
        let d = self.0.clone().finalize();
        let hex = crate::partition::hex(&d[..16]);
        format!("metadata/neve-{hex}-deletes.parquet")
    }
}

/// One group: its files in merge order and each prefix's delete file key.
pub(crate) struct Group<'a> {
    pub files: Vec<&'a AddFile>,
    pub keys: Vec<&'a str>,
}

impl Grouping {
    /// The groups of `snap`, from `before` (the grouping of the version before) when `snap`
    /// only added files to it; else from every file.
    pub(crate) fn of(
        before: Option<Grouping>,
        location: &TableLocation,
        snap: &Snapshot,
        spec: &MergeSpec,
    ) -> Grouping {
        let scheme = format!("{}\n{spec}", location.file_url(""));
        let added: Vec<&Arc<AddFile>> = snap
            .files
            .values()
            .filter(|f| f.added_version == Some(snap.version))
            .collect();
        let grown = before.filter(|b| {
            b.version + 1 == snap.version
                && b.scheme == scheme
                // Nothing removed: the files not added now are the ones it grouped.
                && b.files + added.len() == snap.files.len()
        });
        let schema = snap.metadata.schema.to_arrow();
        let mut parts = match grown {
            Some(b) => b.parts,
            None => {
                let mut parts: BTreeMap<PartKey, Vec<Arc<AddFile>>> = BTreeMap::new();
                for f in snap.files.values() {
                    parts
                        .entry(f.partition_values.clone())
                        .or_default()
                        .push(f.clone());
                }
                let parts = parts
                    .into_iter()
                    .map(|(k, files)| (k, Part::of(&schema, location, spec, files)))
                    .collect();
                return Grouping {
                    version: snap.version,
                    scheme,
                    files: snap.files.len(),
                    parts,
                };
            }
        };
        let mut joined: BTreeMap<&PartKey, Vec<Arc<AddFile>>> = BTreeMap::new();
        for f in added {
            joined
                .entry(&f.partition_values)
                .or_default()
                .push(f.clone());
        }
        for (key, new) in joined {
            let mut part = parts.remove(key).unwrap_or_default();
            if !part.grow(&schema, location, spec, &new) {
                let files = part.into_files().chain(new).collect();
                part = Part::of(&schema, location, spec, files);
            }
            parts.insert(key.clone(), part);
        }
        Grouping {
            version: snap.version,
            scheme,
            files: snap.files.len(),
            parts,
        }
    }

    /// Every group, partition by partition (its files alone that may hold tombstones, then
    /// its run).
    pub(crate) fn groups(&self) -> Vec<Group<'_>> {
        let mut out = Vec::new();
        for part in self.parts.values() {
            for (f, key) in &part.alone {
                if let Some(key) = key {
                    out.push(Group {
                        files: vec![f.as_ref()],
                        keys: vec![key.as_str()],
                    });
                }
            }
            if !part.run.is_empty() {
                out.push(Group {
                    files: part.run.iter().map(|(f, _)| f.as_ref()).collect(),
                    keys: part.run.iter().map(|(_, k)| k.as_str()).collect(),
                });
            }
        }
        out
    }
}

impl Part {
    /// A partition's groups from all its files.
    fn of(
        schema: &arrow::datatypes::SchemaRef,
        location: &TableLocation,
        spec: &MergeSpec,
        mut files: Vec<Arc<AddFile>>,
    ) -> Part {
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let split = split(schema, spec, &files);
        let by_path = |f: &AddFile| {
            files
                .binary_search_by(|g| g.path.as_str().cmp(&f.path))
                .map(|i| files[i].clone())
                .expect("a file of the partition")
        };
        let mut alone: Vec<(Arc<AddFile>, Option<String>)> = split
            .plain
            .iter()
            .map(|f| (by_path(f), None))
            .chain(split.live.iter().map(|f| {
                let key = KeyChain::new(location, spec).push(f);
                (by_path(f), Some(key))
            }))
            .collect();
        alone.sort_by(|a, b| (seq_of(&a.0), &a.0.path).cmp(&(seq_of(&b.0), &b.0.path)));
        let mut part = Part {
            alone,
            run: Vec::new(),
            chain: None,
        };
        let run: Vec<Arc<AddFile>> = split.merged.into_iter().flatten().map(by_path).collect();
        part.extend(location, spec, run);
        part
    }

    fn extend(&mut self, location: &TableLocation, spec: &MergeSpec, files: Vec<Arc<AddFile>>) {
        if files.is_empty() {
            return;
        }
        let chain = self
            .chain
            .get_or_insert_with(|| KeyChain::new(location, spec));
        for f in files {
            let key = chain.push(&f);
            self.run.push((f, key));
        }
    }

    /// Adds `new` files (inserted, not merged) if they only extend its run: each sorts after
    /// the run's files and no file alone before overlaps one of them. Whether they did (else
    /// it is left as it was).
    fn grow(
        &mut self,
        schema: &arrow::datatypes::SchemaRef,
        location: &TableLocation,
        spec: &MergeSpec,
        new: &[Arc<AddFile>],
    ) -> bool {
        let mut new = new.to_vec();
        new.sort_by(|a, b| (seq_of(a), &a.path).cmp(&(seq_of(b), &b.path)));
        let last = self.run.last().map(|(f, _)| seq_of(f));
        if new.iter().any(|f| f.merged) || last.is_some_and(|l| l >= seq_of(&new[0])) {
            return false;
        }
        if !self.alone.is_empty() {
            // Still alone: split again with the new files only (a file alone before was
            // apart from every other file then).
            let mut files: Vec<Arc<AddFile>> = self.alone.iter().map(|(f, _)| f.clone()).collect();
            files.extend(new.iter().cloned());
            files.sort_by(|a, b| a.path.cmp(&b.path));
            let split = split(schema, spec, &files);
            if split.plain.len() + split.live.len() != self.alone.len() {
                return false;
            }
        }
        self.extend(location, spec, new);
        true
    }

    /// All its files.
    fn into_files(self) -> impl Iterator<Item = Arc<AddFile>> {
        self.alone
            .into_iter()
            .map(|(f, _)| f)
            .chain(self.run.into_iter().map(|(f, _)| f))
    }
}

/// Splits one partition's `files`, sorted by path (the reader's order before its stable sort
/// by sequence), as the reader does.
fn split<'a>(
    schema: &arrow::datatypes::SchemaRef,
    spec: &MergeSpec,
    files: &'a [Arc<AddFile>],
) -> crate::query::merged::MergedFiles<'a> {
    let stats = crate::query::stats::FileStats::new(files.to_vec(), schema.clone());
    crate::query::merged::split(
        spec,
        &stats,
        files.iter().map(|f| f.as_ref()).enumerate().collect(),
    )
}
