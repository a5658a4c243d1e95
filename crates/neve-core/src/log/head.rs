//! The head of the latest version: its definition and per-partition totals, read without the
//! file list. This is what lets `count(*)` by partition answer in a few requests whatever the
//! number of files: the checkpoint's first lines (one ranged GET) and the first line of each
//! later commit, whose summary carries its net change per partition.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use object_store::{GetOptions, GetRange};

use super::actions::{Action, CheckpointHeader, CommitInfo, Metadata, PartitionTotals, Protocol};
use super::store::{LogStore, READ_CONCURRENCY};
use crate::error::{Error, Result};

/// A version's definition and per-partition totals.
#[derive(Debug, Clone)]
pub struct SnapshotHead {
    pub version: u64,
    /// Timestamp of the commit at `version` (ms since the epoch).
    pub timestamp: i64,
    pub metadata: Metadata,
    /// Partitions with at least one alive file, in partition order.
    pub partitions: Vec<PartitionTotals>,
}

/// Totals by partition values, while replaying.
type Totals = BTreeMap<BTreeMap<String, Option<String>>, PartitionTotals>;

impl LogStore {
    /// The head of the latest version, or `None` when the log cannot give it without the
    /// file list (entries written before per-partition totals existed, or entries removed
    /// while reading): the caller then loads the full snapshot.
    pub async fn load_head(&self) -> Result<Option<SnapshotHead>> {
        let pointer = self.read_pointer_full().await?;
        let after = pointer.as_ref().map(|p| p.version);
        // The listing decides what exists; meanwhile the pointer's checkpoint and the commit
        // after it, which nearly always are what it will name, are read at the same time:
        // one round trip instead of three.
        let first = after.map(|v| v + 1).unwrap_or(0);
        let first_path = self.commit_path(first);
        let (listing, guessed, first_body) = futures::try_join!(
            self.list(after),
            async {
                match &pointer {
                    Some(p) => self
                        .read_checkpoint_head(p.version, p.head_bytes)
                        .await
                        .map(|h| Some((p.version, h))),
                    None => Ok(None),
                }
            },
            self.get_prefix(&first_path),
        )?;
        let newest_ckpt = listing.checkpoints.iter().next_back().copied().max(after);
        let mut head = match (newest_ckpt, guessed) {
            (Some(v), Some((g, h))) if v == g => match h {
                Some(h) => h,
                None => return Ok(None),
            },
            (Some(v), _) => match self.read_checkpoint_head(v, None).await? {
                Some(h) => h,
                None => return Ok(None),
            },
            (None, _) => Replay::default(),
        };
        let start = head.version.map(|v| v + 1).unwrap_or(0);
        let Some(&latest) = listing.commits.iter().next_back() else {
            return Ok(head.finish());
        };
        if (start..=latest).any(|v| !listing.commits.contains(&v)) {
            return Ok(None);
        }
        let mut first_body = (start == first).then_some(first_body).flatten();
        let bodies: Vec<Option<(bytes::Bytes, bool)>> =
            futures::stream::iter((start..=latest).map(|v| {
                let known = if v == first { first_body.take() } else { None };
                async move {
                    match known {
                        Some(body) => Ok(Some(body)),
                        None => self.get_prefix(&self.commit_path(v)).await,
                    }
                }
            }))
            .buffered(READ_CONCURRENCY)
            .try_collect()
            .await?;
        for (v, body) in (start..=latest).zip(bodies) {
            let Some((body, whole)) = body else {
                return Ok(None);
            };
            let path = self.commit_path(v);
            let mut outcome = head.apply_commit(path.as_ref(), v, &body, whole)?;
            if outcome == Applied::NeedsMore {
                let Some(body) = self.get_opt(&path).await? else {
                    return Ok(None);
                };
                outcome = head.apply_commit(path.as_ref(), v, &body, true)?;
            }
            if outcome != Applied::Yes {
                return Ok(None);
            }
        }
        Ok(head.finish())
    }

    /// The first `COMMIT_PREFIX` bytes of an object, and whether that is all of it.
    async fn get_prefix(
        &self,
        path: &object_store::path::Path,
    ) -> Result<Option<(bytes::Bytes, bool)>> {
        let opts = GetOptions {
            range: Some(GetRange::Bounded(0..COMMIT_PREFIX)),
            ..Default::default()
        };
        match self.store().get_opts(path, opts).await {
            Ok(r) => {
                let whole = r.range.end >= r.meta.size;
                Ok(Some((r.bytes().await?, whole)))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The header, protocol and metadata lines of a checkpoint; a ranged GET when the
    /// pointer says how long they are.
    async fn read_checkpoint_head(
        &self,
        version: u64,
        head_bytes: Option<u64>,
    ) -> Result<Option<Replay>> {
        let path = self.checkpoint_path(version);
        let opts = GetOptions {
            range: head_bytes.map(|n| GetRange::Bounded(0..n)),
            ..Default::default()
        };
        let bytes = match self.store().get_opts(&path, opts).await {
            Ok(r) => r.bytes().await?,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let mut header: Option<CheckpointHeader> = None;
        let mut protocol: Option<Protocol> = None;
        let mut metadata: Option<Metadata> = None;
        for line in bytes.split(|&b| b == b'\n').take(3) {
            match serde_json::from_slice::<Action>(line)
                .map_err(|e| Error::corrupt(path.as_ref(), e))?
            {
                Action::Checkpoint(h) => header = Some(h),
                Action::Protocol(p) => protocol = Some(p),
                Action::Metadata(m) => metadata = Some(m),
                _ => {}
            }
        }
        let (Some(header), Some(protocol), Some(metadata)) = (header, protocol, metadata) else {
            return Err(Error::corrupt(
                path.as_ref(),
                "checkpoint does not start with its header, protocol and metadata",
            ));
        };
        protocol.check()?;
        let Some(partitions) = header.partitions else {
            return Ok(None);
        };
        Ok(Some(Replay {
            version: Some(header.version),
            timestamp: header.timestamp,
            metadata: Some(metadata),
            totals: partitions
                .into_iter()
                .map(|t| (t.values.clone(), t))
                .collect(),
        }))
    }
}

/// Bytes of a commit read first: its commit info (with the per-partition totals) and any
/// metadata line come before its add and remove lines.
const COMMIT_PREFIX: u64 = 64 << 10;

/// What applying one commit to a head gave.
#[derive(Debug, PartialEq, Eq)]
enum Applied {
    Yes,
    /// The commit has no per-partition totals (an older writer).
    NoTotals,
    /// The prefix read cut a line that matters: read the whole commit.
    NeedsMore,
}

/// A head being built: a checkpoint's, then each later commit's changes.
#[derive(Default)]
struct Replay {
    version: Option<u64>,
    timestamp: i64,
    metadata: Option<Metadata>,
    totals: Totals,
}

impl Replay {
    /// Apply one commit from its commit info and its metadata/protocol lines; add and remove
    /// lines are skipped unparsed. `body` may be only the start of the commit (`whole`
    /// false): then a line it cuts off is not trusted.
    fn apply_commit(
        &mut self,
        path: &str,
        version: u64,
        body: &[u8],
        whole: bool,
    ) -> Result<Applied> {
        let mut info: Option<CommitInfo> = None;
        let mut lines: Vec<&[u8]> = body.split(|&b| b == b'\n').collect();
        if !whole {
            // The last piece may be cut; what it holds is needed only if it is not an add
            // or remove line (those come last). A prefix ending on a line's end tells
            // nothing of the next line unless that line was an add or a remove too.
            let last = lines.pop().unwrap_or_default();
            let tail = match (last.is_empty(), lines.last()) {
                (true, Some(previous)) => previous,
                _ => last,
            };
            let known = tail.starts_with(b"{\"add\"") || tail.starts_with(b"{\"remove\"");
            if !known {
                return Ok(Applied::NeedsMore);
            }
        }
        let mut metadata = None;
        for line in lines {
            let parse = || {
                serde_json::from_slice::<Action>(line)
                    .map_err(|e| Error::corrupt(path, format!("commit {version}: {e}")))
            };
            if line.starts_with(b"{\"commitInfo\"") {
                if let Action::CommitInfo(i) = parse()? {
                    info = Some(i);
                }
            } else if line.starts_with(b"{\"metadata\"") {
                if let Action::Metadata(m) = parse()? {
                    metadata = Some(m);
                }
            } else if line.starts_with(b"{\"protocol\"") {
                if let Action::Protocol(p) = parse()? {
                    p.check()?;
                }
            }
        }
        let Some(info) = info else {
            if !whole {
                return Ok(Applied::NeedsMore);
            }
            return Err(Error::corrupt(path, "commit without commitInfo"));
        };
        let s = &info.summary;
        match &s.partitions {
            Some(changes) => {
                for c in changes {
                    self.totals
                        .entry(c.values.clone())
                        .or_insert_with(|| PartitionTotals {
                            values: c.values.clone(),
                            ..Default::default()
                        })
                        .add_all(c);
                }
            }
            None if s.files_added == 0 && s.files_removed == 0 => {}
            None => return Ok(Applied::NoTotals),
        }
        if metadata.is_some() {
            self.metadata = metadata;
        }
        self.version = Some(version);
        self.timestamp = info.timestamp;
        Ok(Applied::Yes)
    }

    fn finish(self) -> Option<SnapshotHead> {
        Some(SnapshotHead {
            version: self.version?,
            timestamp: self.timestamp,
            metadata: self.metadata?,
            partitions: self.totals.into_values().filter(|t| t.files > 0).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A prefix that ends right after the commit info, before the metadata line of a commit
    /// that changed the schema: the commit is read whole, or the head misses the new schema.
    #[tokio::test]
    async fn a_prefix_ending_on_a_line_end_before_the_metadata_needs_more() {
        use crate::{CreateOptions, InsertOptions, TableBuilder, TableLocation};
        use arrow::array::{Int64Array, RecordBatch};
        use arrow::datatypes::{DataType, Field, Schema};
        use std::sync::Arc;

        let t = TableBuilder::new(TableLocation::memory("h")).build();
        t.create(CreateOptions::default()).await.unwrap();
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, true)]));
        let b = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(vec![1]))])
            .unwrap();
        let progress = Arc::new(crate::write::NoProgress);
        t.insert_batches(schema, vec![b], &InsertOptions::default(), progress)
            .await
            .unwrap();
        let path = t.log().commit_path(1);
        let body = t.log().get_opt(&path).await.unwrap().unwrap();
        let lines: Vec<&[u8]> = body.split(|&b| b == b'\n').collect();
        assert!(lines[0].starts_with(b"{\"commitInfo\""));
        assert!(
            lines.iter().any(|l| l.starts_with(b"{\"metadata\"")),
            "the insert added a column"
        );
        let cut = &body[..lines[0].len() + 1];
        let mut replay = Replay::default();
        let got = replay.apply_commit(path.as_ref(), 1, cut, false).unwrap();
        assert_eq!(got, Applied::NeedsMore);
        let mut replay = Replay::default();
        let got = replay.apply_commit(path.as_ref(), 1, &body, true).unwrap();
        assert_eq!(got, Applied::Yes);
        assert!(replay.metadata.is_some());
    }
}
