//! Weighing a group's rows: each key's best row so far, found by the key's id, and the rows a
//! file's rows make lose against them.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Int64Array};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Int64Type};
use arrow::row::{RowConverter, Rows, SortField};

use crate::error::{Error, Result};

/// The rows a file adds to a group's losers: per file of the group so far (by index), the
/// positions that lost, sorted.
pub(crate) type NewLosers = BTreeMap<u32, Vec<u64>>;

/// A version in row format: up to 16 bytes (with its null byte) held inline. Boxed, they cost
/// an allocation per row weighed: deciding took about 15% longer (BENCHMARKS.md).
type RowBytes = smallvec::SmallVec<[u8; 16]>;

/// A version as best rows keep it, ordered as the values are (a null lowest).
pub(crate) trait Version: Ord + Clone + std::fmt::Debug {
    /// A file's versions, ready to be read row by row.
    type Column;
    fn get(column: &Self::Column, row: usize) -> Self;
}

/// No version column (`dedupe`, or `replace` by position alone): rows of a key tie.
impl Version for () {
    type Column = ();
    fn get(_: &(), _: usize) {}
}

/// A version of an integer or temporal type: its value as an `i64`, compared without a
/// conversion or a copy of bytes per row.
impl Version for Option<i64> {
    type Column = Int64Array;
    fn get(column: &Int64Array, row: usize) -> Self {
        column.is_valid(row).then(|| column.value(row))
    }
}

/// Any other version (floats, decimals, strings…), in row format.
impl Version for RowBytes {
    type Column = Rows;
    fn get(column: &Rows, row: usize) -> Self {
        RowBytes::from_slice(column.row(row).data())
    }
}

/// Whether every value of type `t` is an `i64` that orders as the value does (a lossless cast).
fn versions_as_i64(t: &DataType) -> bool {
    use DataType::*;
    matches!(
        t,
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | Date32 | Date64 | Timestamp(..)
    )
}

/// A group's best rows, one per key, by how its versions compare.
#[derive(Debug, Clone)]
pub(crate) enum Weighed {
    Unversioned(BestRows<()>),
    Ints(BestRows<Option<i64>>),
    Rows(BestRows<RowBytes>, Arc<RowConverter>),
}

impl Weighed {
    /// No best rows yet, for versions of type `version` (none without a version column).
    pub(crate) fn new(version: Option<&DataType>) -> Result<Self> {
        Ok(match version {
            None => Self::Unversioned(BestRows::default()),
            Some(t) if versions_as_i64(t) => Self::Ints(BestRows::default()),
            Some(t) => Self::Rows(
                BestRows::default(),
                Arc::new(RowConverter::new(vec![SortField::new(t.clone())])?),
            ),
        })
    }

    /// Best rows held: one per key.
    pub(crate) fn rows(&self) -> usize {
        match self {
            Self::Unversioned(b) => b.rows.len(),
            Self::Ints(b) => b.rows.len(),
            Self::Rows(b, _) => b.rows.len(),
        }
    }

    /// Weighs the rows of the group's file number `file`, in merge order (position), each
    /// against its key's best row so far: `ids` their keys' ids, `version` their versions
    /// (given exactly when the state was made with a version type), `deleted` whether each
    /// hides its key. Returns the rows that now lose; the winners become best rows. The first
    /// row wins under `dedupe`; else the highest version, and on a tie, or without one, the
    /// later row.
    pub(crate) fn step(
        &mut self,
        file: u32,
        ids: &[u32],
        version: Option<&ArrayRef>,
        deleted: Option<&BooleanArray>,
        dedupe: bool,
    ) -> Result<NewLosers> {
        let version = || version.expect("best rows with versions weigh a version column");
        match self {
            Self::Unversioned(b) => b.step(file, ids, &(), deleted, dedupe),
            Self::Ints(b) => {
                let v = cast(version(), &DataType::Int64)?;
                b.step(file, ids, v.as_primitive::<Int64Type>(), deleted, dedupe)
            }
            Self::Rows(b, converter) => {
                let v = converter.convert_columns(std::slice::from_ref(version()))?;
                b.step(file, ids, &v, deleted, dedupe)
            }
        }
    }
}

/// Best rows, one per key, found by their key's id.
#[derive(Debug, Clone)]
pub(crate) struct BestRows<V> {
    index: Index,
    rows: Vec<Best<V>>,
    /// One past the highest id among `rows`: what a dense index must span (kept as rows are
    /// added, so choosing the index does not scan every row of the group each file).
    span: usize,
}

impl<V> Default for BestRows<V> {
    fn default() -> Self {
        Self {
            index: Index::Sparse(Default::default()),
            rows: Vec::new(),
            span: 0,
        }
    }
}

/// Where each key's best row is in `rows`.
#[derive(Debug, Clone)]
enum Index {
    /// By id (`NONE` for a key the group lacks): for a group holding a good part of the ids
    /// (a table whose partitions share their keys), a read of a small array instead of a hash
    /// probe per row. Its length is at most a few times the group's keys (see `index_for`).
    Dense(Vec<u32>),
    /// By the hash of the id: for a group of few of the ids.
    Sparse(hashbrown::HashTable<u32>),
}

/// A key absent from a dense index.
const NONE: u32 = u32::MAX;

/// A key's best row so far.
#[derive(Debug, Clone)]
struct Best<V> {
    version: V,
    /// Its position in its file, with `HIDDEN` set when it hides its key (a tombstone: it is
    /// among the losers already). Positions are array indices, below 2⁶³.
    at: u64,
    /// Its key's id.
    id: u32,
    /// Its file, by index in the group.
    file: u32,
}

const HIDDEN: u64 = 1 << 63;

/// The hash of a key id in a group's table: a multiply spreads dense ids over the table's
/// tags and keeps their low bits distinct for its buckets.
fn id_hash(id: u32) -> u64 {
    u64::from(id).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Files row `i` (key `id`) of `rows` in a sparse index.
fn insert_sparse<V>(table: &mut hashbrown::HashTable<u32>, rows: &[Best<V>], id: u32, i: u32) {
    table.insert_unique(id_hash(id), i, |&j| id_hash(rows[j as usize].id));
}

impl<V: Version> BestRows<V> {
    fn step(
        &mut self,
        file: u32,
        ids: &[u32],
        versions: &V::Column,
        deleted: Option<&BooleanArray>,
        dedupe: bool,
    ) -> Result<NewLosers> {
        self.index_for(ids);
        // (file, position): at most two a row, so the vector never grows (growing vectors of
        // each file was a quarter of weighing; BENCHMARKS.md, "Forty-fifth session").
        let mut lost: Vec<(u32, u64)> = Vec::with_capacity(2 * ids.len());
        for (p, &id) in ids.iter().enumerate() {
            let hidden = deleted.is_some_and(|d| d.is_valid(p) && d.value(p));
            let row = Best {
                version: V::get(versions, p),
                at: p as u64 | if hidden { HIDDEN } else { 0 },
                id,
                file,
            };
            match self.find(id) {
                None => {
                    if hidden {
                        lost.push((file, p as u64));
                    }
                    self.push(row)?;
                }
                Some(i) => {
                    let best = &mut self.rows[i];
                    if dedupe || row.version < best.version {
                        lost.push((file, p as u64));
                        continue;
                    }
                    // A tombstone best lost when it became best.
                    if best.at & HIDDEN == 0 {
                        lost.push((best.file, best.at));
                    }
                    if hidden {
                        lost.push((file, p as u64));
                    }
                    *best = row;
                }
            }
        }
        lost.sort_unstable();
        let mut out = NewLosers::new();
        for run in lost.chunk_by(|a, b| a.0 == b.0) {
            out.insert(run[0].0, run.iter().map(|&(_, p)| p).collect());
        }
        Ok(out)
    }

    fn find(&self, id: u32) -> Option<usize> {
        match &self.index {
            Index::Dense(at) => at
                .get(id as usize)
                .copied()
                .filter(|&i| i != NONE)
                .map(|i| i as usize),
            Index::Sparse(table) => table
                .find(id_hash(id), |&i| self.rows[i as usize].id == id)
                .map(|&i| i as usize),
        }
    }

    /// Adds the best row of a key not held yet.
    fn push(&mut self, row: Best<V>) -> Result<()> {
        let i = u32::try_from(self.rows.len())
            .ok()
            .filter(|&i| i != NONE)
            .ok_or(Error::IcebergTooManyKeys { limit: NONE.into() })?;
        let Self { index, rows, span } = self;
        match index {
            // Long enough for every id of the file (`index_for`).
            Index::Dense(at) => at[row.id as usize] = i,
            Index::Sparse(table) => insert_sparse(table, rows, row.id, i),
        }
        *span = (*span).max(row.id as usize + 1);
        rows.push(row);
        Ok(())
    }

    /// Lays the index out for a file of keys `ids`: dense while the ids it must span are at
    /// most four times the group's keys (16 bytes a key, less than a best row), by hash once
    /// they are over eight times (a group of few of a table's keys).
    fn index_for(&mut self, ids: &[u32]) {
        let need = ids.iter().max().map_or(0, |&m| m as usize + 1);
        let keys = self.rows.len().max(ids.len());
        match &mut self.index {
            Index::Dense(at) if at.len().max(need) > 8 * keys => {
                let mut table = hashbrown::HashTable::with_capacity(self.rows.len());
                for (i, r) in self.rows.iter().enumerate() {
                    insert_sparse(&mut table, &self.rows, r.id, i as u32);
                }
                self.index = Index::Sparse(table);
            }
            Index::Dense(at) => {
                if need > at.len() {
                    at.resize(need, NONE);
                }
            }
            Index::Sparse(_) => {
                let span = self.span.max(need);
                if span <= 4 * keys {
                    let mut at = vec![NONE; span];
                    for (i, r) in self.rows.iter().enumerate() {
                        at[r.id as usize] = i as u32;
                    }
                    self.index = Index::Dense(at);
                }
            }
        }
    }
}
