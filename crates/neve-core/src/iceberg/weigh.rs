//! Weighing a group's rows: each key's best row so far, found by the key's id, and the rows a
//! file's rows make lose against them.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Int64Array};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Int64Type};
use arrow::row::{RowConverter, Rows, SortField};

use crate::error::Result;

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
            Self::Unversioned(b) => b.keys,
            Self::Ints(b) => b.keys,
            Self::Rows(b, _) => b.keys,
        }
    }

    /// Rows' room held: slots by id, or a hash table's buckets (what a writer's cap on memory
    /// counts).
    pub(crate) fn slots(&self) -> usize {
        match self {
            Self::Unversioned(b) => b.slots(),
            Self::Ints(b) => b.slots(),
            Self::Rows(b, _) => b.slots(),
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
    slots: Slots<V>,
    /// Keys held.
    keys: usize,
    /// One past the highest id held: what slots by id must span (kept as rows are added, so
    /// choosing the layout does not scan every row of the group each file).
    span: usize,
}

impl<V> Default for BestRows<V> {
    fn default() -> Self {
        Self {
            slots: Slots::Sparse(Default::default()),
            keys: 0,
            span: 0,
        }
    }
}

/// Where each key's best row is.
#[derive(Debug, Clone)]
enum Slots<V> {
    /// At its key's id (an empty slot's `file` is `NO_FILE`): for a group holding a good part
    /// of the ids (a table whose partitions share their keys), one read of the row itself,
    /// where an index by id and then the rows were two reads from memory each row
    /// (BENCHMARKS.md, "Forty-sixth session"). At most a few times as many slots as the
    /// group's keys (see `lay_out`).
    Dense(Vec<Best<V>>),
    /// By the hash of the id: for a group of few of the ids.
    Sparse(hashbrown::HashTable<Best<V>>),
}

/// The `file` of an empty slot.
const NO_FILE: u32 = u32::MAX;

/// A key's best row so far.
#[derive(Debug, Clone, Default)]
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

/// Files `row` in a sparse table.
fn insert_sparse<V>(table: &mut hashbrown::HashTable<Best<V>>, row: Best<V>) {
    table.insert_unique(id_hash(row.id), row, |r| id_hash(r.id));
}

/// The rows a file's rows make lose, a bit per position of each file: read out in order, where
/// sorting them was a fifth of weighing (BENCHMARKS.md, "Forty-sixth session"). A row loses
/// once, so a set bit is one loser.
#[derive(Default)]
struct Marks(Vec<Vec<u64>>);

/// A file's first marks' words: 1,024 positions, most of a group's file in the worst case of a
/// `replace` table (BENCHMARKS.md, issue 19).
const MARK_WORDS: usize = 16;

impl Marks {
    #[inline]
    fn mark(&mut self, file: u32, pos: u64) {
        let (f, word) = (file as usize, (pos / 64) as usize);
        match self.0.get_mut(f).and_then(|words| words.get_mut(word)) {
            Some(w) => *w |= 1 << (pos % 64),
            None => self.grow(f, word, pos),
        }
    }

    /// Marks `pos` of file `f` past the words it has: at least doubled, and at least
    /// `MARK_WORDS` at first (a file's marks grew one word at a time, and the reallocations
    /// were a twentieth of weighing).
    #[cold]
    #[inline(never)]
    fn grow(&mut self, f: usize, word: usize, pos: u64) {
        if self.0.len() <= f {
            self.0.resize_with(f + 1, Vec::new);
        }
        let words = &mut self.0[f];
        words.resize((word + 1).max(2 * words.len()).max(MARK_WORDS), 0);
        words[word] |= 1 << (pos % 64);
    }

    fn losers(self) -> NewLosers {
        let mut out = NewLosers::new();
        for (file, words) in (0u32..).zip(self.0) {
            let n: u32 = words.iter().map(|w| w.count_ones()).sum();
            if n == 0 {
                continue;
            }
            let mut positions = Vec::with_capacity(n as usize);
            for (at, mut w) in (0u64..).step_by(64).zip(words) {
                while w != 0 {
                    positions.push(at + u64::from(w.trailing_zeros()));
                    w &= w - 1;
                }
            }
            out.insert(file, positions);
        }
        out
    }
}

/// An empty slot.
fn empty<V: Default>() -> Best<V> {
    Best {
        file: NO_FILE,
        ..Default::default()
    }
}

impl<V> BestRows<V> {
    fn slots(&self) -> usize {
        match &self.slots {
            Slots::Dense(slots) => slots.len(),
            Slots::Sparse(table) => table.capacity(),
        }
    }
}

impl<V: Version + Default> BestRows<V> {
    fn step(
        &mut self,
        file: u32,
        ids: &[u32],
        versions: &V::Column,
        deleted: Option<&BooleanArray>,
        dedupe: bool,
    ) -> Result<NewLosers> {
        // A group's files are listed in memory: never four billion of them.
        debug_assert!(file != NO_FILE);
        self.lay_out(ids);
        self.touch(ids);
        let mut lost = Marks::default();
        for (p, &id) in ids.iter().enumerate() {
            let hidden = deleted.is_some_and(|d| d.is_valid(p) && d.value(p));
            let row = Best {
                version: V::get(versions, p),
                at: p as u64 | if hidden { HIDDEN } else { 0 },
                id,
                file,
            };
            let Some(best) = self.find(id) else {
                if hidden {
                    lost.mark(file, p as u64);
                }
                self.add(row);
                continue;
            };
            if dedupe || row.version < best.version {
                lost.mark(file, p as u64);
                continue;
            }
            // A tombstone best lost when it became best.
            if best.at & HIDDEN == 0 {
                lost.mark(best.file, best.at);
            }
            if hidden {
                lost.mark(file, p as u64);
            }
            *best = row;
        }
        Ok(lost.losers())
    }

    /// Reads the slot of every id of a file before it is weighed: the reads do not depend on
    /// each other, so the processor has many from memory under way at once, where weighing
    /// waits for each (a group's rows are out of the cache by its next file: every other
    /// group was weighed since).
    fn touch(&self, ids: &[u32]) {
        if let Slots::Dense(slots) = &self.slots {
            let files = ids.iter().fold(0u32, |acc, &id| {
                acc ^ slots.get(id as usize).map_or(0, |b| b.file)
            });
            std::hint::black_box(files);
        }
    }

    fn find(&mut self, id: u32) -> Option<&mut Best<V>> {
        match &mut self.slots {
            Slots::Dense(slots) => slots.get_mut(id as usize).filter(|b| b.file != NO_FILE),
            Slots::Sparse(table) => table.find_mut(id_hash(id), |r| r.id == id),
        }
    }

    /// Adds the best row of a key not held yet.
    fn add(&mut self, row: Best<V>) {
        self.keys += 1;
        self.span = self.span.max(row.id as usize + 1);
        match &mut self.slots {
            // Long enough for every id of the file (`lay_out`).
            Slots::Dense(slots) => {
                let i = row.id as usize;
                slots[i] = row;
            }
            Slots::Sparse(table) => insert_sparse(table, row),
        }
    }

    /// Lays the slots out for a file of keys `ids`: by id while the ids they must span are
    /// at most twice the group's keys, by hash once they are over four times (a group of few
    /// of a table's keys), so slots by id never take more than four rows' room a key.
    /// A table made or first filled here has room for every key the file may add (at most
    /// its rows), so it is allocated once, where growing by doubling rehashed its rows each
    /// time.
    fn lay_out(&mut self, ids: &[u32]) {
        let need = ids.iter().max().map_or(0, |&m| m as usize + 1);
        let keys = self.keys.max(ids.len());
        match &mut self.slots {
            Slots::Dense(slots) if slots.len().max(need) > 4 * keys => {
                let mut table = hashbrown::HashTable::with_capacity(self.keys + ids.len());
                for row in std::mem::take(slots) {
                    if row.file != NO_FILE {
                        insert_sparse(&mut table, row);
                    }
                }
                self.slots = Slots::Sparse(table);
            }
            Slots::Dense(slots) => {
                if need > slots.len() {
                    slots.resize_with(need, empty);
                }
            }
            Slots::Sparse(table) => {
                let span = self.span.max(need);
                if span <= 2 * keys {
                    let mut slots = Vec::with_capacity(span);
                    slots.resize_with(span, empty);
                    for row in std::mem::take(table) {
                        let i = row.id as usize;
                        slots[i] = row;
                    }
                    self.slots = Slots::Dense(slots);
                } else if table.is_empty() {
                    table.reserve(ids.len(), |r| id_hash(r.id));
                }
            }
        }
    }
}
