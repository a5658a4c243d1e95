//! Delete manifests: a snapshot's position delete files cut into chunks as data files are
//! (`super`), their entries encoded once and kept by the writer, and read back.

use std::collections::{BTreeMap, HashMap};

use apache_avro::types::Value;
use apache_avro::writer::datum::GenericDatumWriter;
use sha2::{Digest, Sha256};

use super::{
    assemble, avro_error, avro_records, cut, entry_writer, long_field, metadata_error,
    partition_of_values, split_tail, under_metadata, ChunkName, DataFile, EncodedEntry, Entry,
    IntKeyBytes, Layout, ManifestInfo, PartitionRecord, ADDED, DELETES,
};
use crate::error::Result;
use crate::iceberg::deletes::{DeleteFile, Known, FILE_PATH_FIELD};

/// Delete files' manifest entries, encoded once (as `ADDED`; see [`EncodedEntry`]) and kept
/// by the writer: a table's delete files stay until a merge removes their groups' files, so
/// without them every commit encoded the entries of every delete file of the table again
/// (1,584 after twelve inserts touching 132 partitions), growing until a merge.
#[derive(Debug, Default)]
pub(crate) struct DeleteEntries {
    /// The layout they were encoded for.
    salt: [u8; 32],
    /// By delete file key: what it was encoded from and its entry (the entry holds its
    /// sequence). Only delete files of the last call.
    pub(super) by_key: HashMap<String, (Known, EncodedEntry), ahash::RandomState>,
    /// The chunks named last, by their first delete file's key: a chunk of the same delete
    /// files (compared: key, rows, size, bounds and sequence) is named without formatting and hashing
    /// them again: about a millisecond a sync at 4,000 delete files (BENCHMARKS.md).
    names: HashMap<String, (Vec<DeleteId>, ChunkName), ahash::RandomState>,
    /// The last call's delete files as chunks, for a call that only adds delete files after
    /// them (an insert's, of its own version).
    order: Option<Order>,
    /// Calls that extended the call before's chunks instead of sorting and cutting every
    /// delete file (for tests).
    #[cfg(test)]
    pub(super) extended: usize,
}

/// A call's delete files in (sequence, key) order, as cut: what the next call, when it only
/// adds delete files that sort after them, carries over without sorting, cutting, comparing
/// or naming them again (2.8 ms of a worst-case sync at 1,581 delete files, growing until a
/// merge: BENCHMARKS.md, "Seventy-seventh session").
#[derive(Debug)]
struct Order {
    /// The closed chunks (before the last cut): each one's first key and name.
    closed: Vec<(String, ChunkName)>,
    /// The delete files after the last cut.
    tail: Vec<DeleteFile>,
    /// How many delete files there were.
    files: usize,
    /// The last one's sequence and key.
    last: (i64, String),
}

/// What a delete manifest's name is a function of, for each of its delete files: all its entry
/// holds.
type DeleteId = (String, Known, i64);

fn delete_id(d: &DeleteFile) -> DeleteId {
    (d.key.clone(), d.file.clone(), d.sequence)
}

fn same_delete(id: &DeleteId, d: &DeleteFile) -> bool {
    id.0 == d.key && id.1 == d.file && id.2 == d.sequence
}

/// Where a delete file sorts among a snapshot's: by sequence, then key.
fn order_of(d: &DeleteFile) -> (i64, &str) {
    (d.sequence, &d.key)
}

/// When `deletes` are the delete files of the call before (`order`, each with the entry kept
/// for it) and files that sort after all of them: the closed chunks carried over, with their
/// descriptions, and what is left to cut (the tail before, then the new files in order).
/// None otherwise, or when a carried chunk's manifest is not known. Each key is in
/// `deletes` once (a delete file's key is a hash of the group prefix it is for).
fn extend<'a>(
    order: &'a Order,
    closed: &[(String, ChunkName)],
    deletes: &'a [DeleteFile],
    by_key: &HashMap<String, (Known, EncodedEntry), ahash::RandomState>,
    known: &impl Fn(&str) -> Option<ManifestInfo>,
) -> Option<(Vec<ManifestInfo>, Vec<&'a DeleteFile>)> {
    let mut old = 0;
    let mut new = Vec::new();
    for d in deletes {
        match by_key.get(&d.key) {
            Some((file, e)) if *file == d.file && e.version == d.sequence => old += 1,
            _ => new.push(d),
        }
    }
    // `by_key` holds only delete files of the call before: each one is still here.
    if old != order.files {
        return None;
    }
    new.sort_by(|a, b| order_of(a).cmp(&order_of(b)));
    if new
        .first()
        .is_some_and(|d| order_of(d) <= (order.last.0, order.last.1.as_str()))
    {
        return None;
    }
    let carried = closed
        .iter()
        .map(|(_, name)| known(&name.0))
        .collect::<Option<Vec<_>>>()?;
    let mut run: Vec<&DeleteFile> = order.tail.iter().collect();
    run.extend(new);
    Some((carried, run))
}

/// The delete manifests of a snapshot's position delete files, cut into chunks as data files
/// are: in (sequence, key) order, cut where a key hashes to a boundary, the files after the
/// last cut one chunk per sequence. An insert adds delete files of its own version only, so it
/// writes the chunks they fall in, not a manifest listing every delete file of the table
/// (3,957 entries and about 1 MB a commit at the thirtieth insert touching 132 partitions);
/// and when the call before had the same delete files but the new ones, its closed chunks are
/// carried over as they were. Each chunk is named by its entries; one `known` names is not
/// encoded again. Entries `kept` holds are not encoded again either; it keeps those of
/// `deletes` afterwards. Returns each chunk's description, with its bytes when it was not
/// known. Each key is in `deletes` once.
pub(crate) fn assemble_delete_manifests(
    layout: &Layout,
    deletes: &[DeleteFile],
    kept: &mut DeleteEntries,
    known: impl Fn(&str) -> Option<ManifestInfo> + Sync,
) -> Result<Vec<(ManifestInfo, Option<Vec<u8>>)>> {
    if kept.salt != layout.salt {
        kept.by_key.clear();
        kept.names.clear();
        kept.order = None;
        kept.salt = layout.salt;
    }
    // Its closed chunks apart, so they can be kept while its tail is cut again.
    let (closed_before, order) = match kept.order.take() {
        Some(mut o) => (std::mem::take(&mut o.closed), Some(o)),
        None => (Vec::new(), None),
    };
    let extended = order
        .as_ref()
        .and_then(|o| extend(o, &closed_before, deletes, &kept.by_key, &known));
    // Extended: the call before's entries stay as they are, and new ones are added.
    let (incremental, carried, sorted) = match extended {
        Some((carried, run)) => (true, carried, run),
        None => {
            let mut sorted: Vec<&DeleteFile> = deletes.iter().collect();
            sorted.sort_by(|a, b| order_of(a).cmp(&order_of(b)));
            (false, Vec::new(), sorted)
        }
    };
    let last = match sorted.last() {
        Some(d) => (d.sequence, d.key.clone()),
        None => order.as_ref().map(|o| o.last.clone()).unwrap_or_default(),
    };
    let (mut chunks, tail) = cut(sorted);
    let closed_now = chunks.len();
    let tail_kept: Vec<DeleteFile> = tail.iter().map(|d| (*d).clone()).collect();
    chunks.extend(split_tail(tail));
    let mut before = if incremental {
        HashMap::default()
    } else {
        std::mem::take(&mut kept.by_key)
    };
    let mut names_before = std::mem::take(&mut kept.names);
    let mut closed: Vec<(String, ChunkName)> = Vec::new();
    if incremental {
        #[cfg(test)]
        {
            kept.extended += 1;
        }
        for (first, name) in closed_before {
            if let Some(n) = names_before.remove(&first) {
                kept.names.insert(first.clone(), n);
            }
            closed.push((first, name));
        }
    }
    let writer = entry_writer(layout)?;
    // Names kept from the sync before, taken out serially; then, in parallel, the names not
    // kept, and each chunk not known encoded and assembled (serially they were a tenth of a
    // worst-case sync, after its groups were decided: BENCHMARKS.md, "Seventy-sixth session").
    let chunks: Vec<_> = chunks
        .into_iter()
        .map(|chunk| {
            let named = names_before.remove(&chunk[0].key).filter(|(ids, _)| {
                ids.len() == chunk.len() && ids.iter().zip(&chunk).all(|(id, d)| same_delete(id, d))
            });
            (chunk, named)
        })
        .collect();
    let built: Vec<Result<Built<'_>>> = {
        use rayon::prelude::*;
        let before = if incremental { &kept.by_key } else { &before };
        chunks
            .into_par_iter()
            .map(|(chunk, named)| {
                let (ids, name) = named.unwrap_or_else(|| {
                    (
                        chunk.iter().map(|d| delete_id(d)).collect(),
                        delete_chunk_key(layout, &chunk),
                    )
                });
                if let Some(info) = known(&name.0) {
                    return Ok(Built {
                        chunk,
                        ids,
                        name,
                        info,
                        written: None,
                    });
                }
                let entries = chunk
                    .iter()
                    .map(|d| match before.get(&d.key) {
                        Some((file, e)) if *file == d.file && e.version == d.sequence => {
                            Ok(e.clone())
                        }
                        _ => encode_delete_entry(layout, &writer, d),
                    })
                    .collect::<Result<Vec<_>>>()?;
                let refs: Vec<&EncodedEntry> = entries.iter().collect();
                let (info, bytes) = assemble(layout, DELETES, &refs, name.0.clone(), &name.1);
                Ok(Built {
                    chunk,
                    ids,
                    name,
                    info,
                    written: Some((entries, bytes)),
                })
            })
            .collect()
    };
    let mut out: Vec<(ManifestInfo, Option<Vec<u8>>)> =
        Vec::with_capacity(carried.len() + built.len());
    out.extend(carried.into_iter().map(|info| (info, None)));
    for (at, b) in built.into_iter().enumerate() {
        let Built {
            chunk,
            ids,
            name,
            info,
            written,
        } = b?;
        if at < closed_now {
            closed.push((chunk[0].key.clone(), name.clone()));
        }
        kept.names.insert(chunk[0].key.clone(), (ids, name));
        match written {
            // Its entries are kept as they were, for a chunk that folds them later.
            None => {
                if !incremental {
                    for d in chunk {
                        if let Some((k, v)) = before.remove_entry(&d.key) {
                            kept.by_key.insert(k, v);
                        }
                    }
                }
                out.push((info, None));
            }
            Some((entries, bytes)) => {
                for (d, entry) in chunk.into_iter().zip(entries) {
                    if incremental {
                        // The call before's entries are there already, as they were.
                        if !kept.by_key.contains_key(&d.key) {
                            kept.by_key.insert(d.key.clone(), (d.file.clone(), entry));
                        }
                        continue;
                    }
                    // Taken with its key, so a kept entry costs no copy of the key.
                    let key = match before.remove_entry(&d.key) {
                        Some((k, _)) => k,
                        None => d.key.clone(),
                    };
                    kept.by_key.insert(key, (d.file.clone(), entry));
                }
                out.push((info, Some(bytes)));
            }
        }
    }
    kept.order = Some(Order {
        closed,
        tail: tail_kept,
        files: deletes.len(),
        last,
    });
    Ok(out)
}

/// A chunk of delete files as assembled: its name (and what it is a function of), its
/// description, and when it was not known, its entries and bytes.
struct Built<'a> {
    chunk: Vec<&'a DeleteFile>,
    ids: Vec<DeleteId>,
    name: ChunkName,
    info: ManifestInfo,
    written: Option<(Vec<EncodedEntry>, Vec<u8>)>,
}

/// A delete manifest's key and digest: a function of its entries, so equal names hold equal
/// bytes (a manifest list records each manifest's length).
fn delete_chunk_key(layout: &Layout, chunk: &[&DeleteFile]) -> (String, [u8; 32]) {
    use std::fmt::Write;
    let mut h = Sha256::new();
    // 2 since entries carry their files' path bounds.
    h.update(b"neve iceberg delete manifest 2\n");
    h.update(layout.salt);
    let mut line = String::new();
    for d in chunk {
        line.clear();
        let _ = write!(
            line,
            "\n{}\t{}\t{}\t{}",
            d.key, d.file.rows, d.file.size, d.sequence
        );
        // The bounds, each after its length (a path may hold any character), or that there
        // are none (an entry read back from a manifest written before them).
        match &d.file.paths {
            Some(p) => {
                let _ = write!(line, "\t{}:{}\t{}:{}", p.0.len(), p.0, p.1.len(), p.1);
            }
            None => line.push_str("\t-"),
        }
        h.update(line.as_bytes());
    }
    let digest: [u8; 32] = h.finalize().into();
    let hex = crate::partition::hex(&digest[..16]);
    (format!("metadata/neve-{hex}-d.avro"), digest)
}

/// A delete file's manifest entry, as `ADDED`, with the bounds of the paths it names (full,
/// not truncated as data files' string bounds may be: a reader compares whole paths).
fn encode_delete_entry(
    layout: &Layout,
    writer: &GenericDatumWriter<'_>,
    d: &DeleteFile,
) -> Result<EncodedEntry> {
    let partition = partition_of_values(layout, &d.partition_values);
    let bound = |path: &str| {
        vec![IntKeyBytes {
            key: FILE_PATH_FIELD,
            value: path.as_bytes().to_vec(),
        }]
    };
    let entry = Entry {
        status: ADDED,
        snapshot_id: Some(d.sequence),
        sequence_number: Some(d.sequence),
        file_sequence_number: Some(d.sequence),
        data_file: DataFile {
            content: DELETES,
            file_path: layout.location.file_url(&d.key),
            file_format: "PARQUET",
            partition: PartitionRecord::new(layout, &partition),
            record_count: d.file.rows as i64,
            file_size_in_bytes: d.file.size as i64,
            column_sizes: None,
            value_counts: None,
            null_value_counts: None,
            nan_value_counts: None,
            lower_bounds: d.file.paths.as_ref().map(|p| bound(&p.0)),
            upper_bounds: d.file.paths.as_ref().map(|p| bound(&p.1)),
            key_metadata: None,
            split_offsets: None,
            equality_ids: None,
            sort_order_id: None,
        },
    };
    let mut datum = Vec::with_capacity(256);
    writer.write_ser(&mut datum, &entry).map_err(avro_error)?;
    Ok(EncodedEntry {
        version: d.sequence,
        rows: d.file.rows,
        datum: datum.into(),
        partition: partition.into(),
    })
}

/// The delete files a stored delete manifest (at `key`) lists: key (relative to the table
/// root), and rows, size and the bounds of the paths it names (none in a manifest written
/// before they were).
pub(crate) fn read_delete_manifest(key: &str, bytes: &[u8]) -> Result<Vec<(String, Known)>> {
    let bad = |reason: String| metadata_error(key, reason);
    let mut out = Vec::new();
    for mut entry in avro_records(key, bytes)? {
        let Some(Value::Record(file)) = entry.remove("data_file") else {
            return Err(bad("no data_file".into()));
        };
        let f: BTreeMap<String, Value> = file.into_iter().collect();
        let paths = path_bound(&f, "lower_bounds")
            .zip(path_bound(&f, "upper_bounds"))
            .map(std::sync::Arc::new);
        out.push((
            under_metadata(key, &f, "file_path")?,
            Known {
                rows: long_field(key, &f, "record_count")? as u64,
                size: long_field(key, &f, "file_size_in_bytes")? as u64,
                paths,
            },
        ));
    }
    Ok(out)
}

/// The `file_path` bound in an entry's `lower_bounds` or `upper_bounds` (a map of field id to
/// bytes, in Avro an array of key-value records), if it holds one.
fn path_bound(f: &BTreeMap<String, Value>, name: &str) -> Option<String> {
    let mut v = f.get(name)?;
    if let Value::Union(_, inner) = v {
        v = inner;
    }
    let Value::Array(items) = v else {
        return None;
    };
    items.iter().find_map(|item| {
        let Value::Record(kv) = item else {
            return None;
        };
        let field = |n: &str| kv.iter().find(|(k, _)| k == n).map(|(_, v)| v);
        match (field("key")?, field("value")?) {
            (Value::Int(k), Value::Bytes(b)) if *k == FILE_PATH_FIELD => {
                String::from_utf8(b.clone()).ok()
            }
            _ => None,
        }
    })
}
