//! Strings of few distinct values (a device id, a company, a payment type) carried through a
//! chunk's grouping and gather as 4-byte keys into one dictionary per chunk, instead of their
//! bytes: both passes copy every row of every column, and on the taxi data three string
//! columns of a few thousand values or fewer were 90 of each row's 198 string bytes, copied
//! twice. The dictionary is sorted, so a key's order is its value's (the sort and the Parquet
//! encoder's bounds see the same order either way), and it stays in cache while the encoder
//! reads values through the keys. The Parquet file is the same either way: the encoder takes
//! a dictionary array as the values it stands for (`tests.rs` compares the bytes).
//!
//! A column is keyed only when it pays: not when a sample of the chunk's largest batch (of its
//! first batches together, when the largest is smaller than a sample) is nearly all distinct
//! (ids), nor when a batch has more than a quarter of its rows distinct, nor when
//! the chunk's dictionary would outgrow [`MAX_VALUES`] or [`MAX_BYTES`]. Each value is hashed
//! once (with a keyed hasher: crafted values must not make every lookup a scan).

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, DictionaryArray, GenericByteArray, RecordBatch, UInt32Array,
};
use arrow::buffer::{OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{
    ArrowNativeType, BinaryType, ByteArrayType, DataType, Field, LargeBinaryType, LargeUtf8Type,
    Schema, SchemaRef, UInt32Type, Utf8Type,
};
use hashbrown::hash_table::{Entry, HashTable};
use rayon::prelude::*;

use crate::error::Result;

/// Distinct values a chunk's dictionary may hold.
const MAX_VALUES: usize = 1 << 16;

/// Value bytes a chunk's dictionary may hold: well within the L3 cache, where the encoder reads
/// it in the parts' row order.
const MAX_BYTES: usize = 4 << 20;

/// A batch whose distinct values exceed this share of its rows is not keyed (then the keys
/// save little and the dictionary is large).
const MAX_SHARE_DEN: usize = 4;

/// Key the few-valued string and binary columns of a chunk's batches (in place). Returns the
/// schema the batches have now, `None` when no column was keyed (the batches are unchanged).
pub(crate) fn key_few_valued(batches: &mut [(RecordBatch, Vec<u32>)]) -> Result<Option<SchemaRef>> {
    // The columns worth trying are judged on the largest batch: byte types whose sample is
    // not nearly all distinct, and which that batch keys within the share.
    let Some(judge) = (0..batches.len()).max_by_key(|&i| batches[i].0.num_rows()) else {
        return Ok(None);
    };
    let schema = batches[judge].0.schema();
    let candidates: Vec<usize> = (0..schema.fields().len())
        .filter(|&c| is_bytes(schema.field(c).data_type()))
        .filter(|&c| !mostly_distinct(sample_column(batches, judge, c).as_ref()))
        .collect();
    if candidates.is_empty() {
        return Ok(None);
    }
    let state = crate::partition::keyed_hasher();
    let judged: Vec<Option<Local>> = candidates
        .par_iter()
        .map(|&c| local(batches[judge].0.column(c).as_ref(), &state))
        .collect();
    let (candidates, judged): (Vec<usize>, Vec<Local>) = candidates
        .into_iter()
        .zip(judged)
        .filter_map(|(c, l)| Some((c, l?)))
        .unzip();
    if candidates.is_empty() {
        return Ok(None);
    }
    // Every other batch's local dictionaries, in parallel.
    let mut locals: Vec<Vec<Option<Local>>> = batches
        .par_iter()
        .enumerate()
        .map(|(i, (b, _))| {
            if i == judge {
                return Vec::new();
            }
            candidates
                .iter()
                .map(|&c| local(b.column(c).as_ref(), &state))
                .collect()
        })
        .collect();
    locals[judge] = judged.into_iter().map(Some).collect();
    // Per column: one sorted dictionary for the chunk and each batch's local-to-chunk key map,
    // unless a batch or the chunk's dictionary is too large.
    // (candidate index, column, the chunk's dictionary, per batch its local-to-chunk keys)
    let mut keyed: Vec<(usize, usize, ArrayRef, Vec<Vec<u32>>)> = Vec::new();
    for (i, &c) in candidates.iter().enumerate() {
        let per_batch: Option<Vec<&Local>> = locals.iter().map(|l| l[i].as_ref()).collect();
        let Some(per_batch) = per_batch else { continue };
        let arrays: Vec<&dyn Array> = batches.iter().map(|(b, _)| b.column(c).as_ref()).collect();
        if let Some((values, maps)) = chunk_dictionary(&arrays, &per_batch) {
            keyed.push((i, c, values, maps));
        }
    }
    if keyed.is_empty() {
        return Ok(None);
    }
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    for (_, c, values, _) in &keyed {
        let dict = DataType::Dictionary(
            Box::new(DataType::UInt32),
            Box::new(values.data_type().clone()),
        );
        fields[*c] = fields[*c].clone().with_data_type(dict);
    }
    let keyed_schema = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
    batches
        .par_iter_mut()
        .zip(locals)
        .enumerate()
        .try_for_each(|(b, ((batch, _), locals))| -> Result<()> {
            let mut columns = batch.columns().to_vec();
            for (i, c, values, maps) in &keyed {
                let local = locals[*i].as_ref().expect("keyed in every batch");
                let map = &maps[b];
                // A null's key is 0, which a batch of nulls only has no entry for.
                let keys: ScalarBuffer<u32> = local
                    .keys
                    .iter()
                    .map(|&k| map.get(k as usize).copied().unwrap_or(0))
                    .collect();
                let keys = UInt32Array::new(keys, columns[*c].logical_nulls());
                // SAFETY: every key is a chunk key of a value of this batch (`map`), so below
                // `values.len()`.
                let dict =
                    unsafe { DictionaryArray::<UInt32Type>::new_unchecked(keys, values.clone()) };
                columns[*c] = Arc::new(dict);
            }
            *batch = RecordBatch::try_new_with_options(
                keyed_schema.clone(),
                columns,
                &arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
            )?;
            Ok(())
        })?;
    Ok(Some(keyed_schema))
}

/// The column's values again, for what must see the table's own type (kept columns).
pub(crate) fn unkeyed(a: &ArrayRef, target: &DataType) -> Result<ArrayRef> {
    Ok(if a.data_type() == target {
        a.clone()
    } else {
        arrow::compute::cast(a, target)?
    })
}

fn is_bytes(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Binary | DataType::LargeBinary
    )
}

/// Column `c` as its distinctness is judged: the largest batch's, or, when that batch is
/// smaller than a full sample (a chunk of many small inserts), the first batches' rows
/// together up to one: judged on a batch of a few dozen rows, ids looked few-valued, and each
/// batch's own handful of them passed the share, so an id column was keyed.
fn sample_column(batches: &[(RecordBatch, Vec<u32>)], judge: usize, c: usize) -> ArrayRef {
    let largest = batches[judge].0.column(c);
    if largest.len() >= super::encode::SAMPLE {
        return largest.clone();
    }
    let mut parts: Vec<&dyn Array> = Vec::new();
    let mut rows = 0;
    for (b, _) in batches {
        if rows >= super::encode::SAMPLE {
            break;
        }
        parts.push(b.column(c).as_ref());
        rows += b.num_rows();
    }
    // The batches of a chunk share a schema, so this cannot fail; the largest alone is the
    // judgement before this one if it did.
    arrow::compute::concat(&parts).unwrap_or_else(|_| largest.clone())
}

/// Whether a sample of the column is nearly all distinct (ids, hashes): the same test as the
/// encoder's for going without a Parquet dictionary.
fn mostly_distinct(a: &dyn Array) -> bool {
    fn sample<T: ByteArrayType>(a: &dyn Array) -> bool {
        let a = a.as_bytes::<T>();
        super::encode::bytes_distinct(a, |i| a.value(i).as_ref())
    }
    match a.data_type() {
        DataType::Utf8 => sample::<Utf8Type>(a),
        DataType::LargeUtf8 => sample::<LargeUtf8Type>(a),
        DataType::Binary => sample::<BinaryType>(a),
        DataType::LargeBinary => sample::<LargeBinaryType>(a),
        _ => true,
    }
}

/// One batch's column as keys into its own distinct values (in order of first appearance).
struct Local {
    /// A key a row (0 for a null).
    keys: Vec<u32>,
    /// The row where each distinct value first appears.
    firsts: Vec<u32>,
    /// Each distinct value's hash.
    hashes: Vec<u64>,
}

/// A batch column's [`Local`] dictionary, or `None` when more than a quarter of its rows (at
/// least 64) are distinct.
fn local(a: &dyn Array, state: &ahash::RandomState) -> Option<Local> {
    fn build<T: ByteArrayType>(a: &dyn Array, state: &ahash::RandomState) -> Option<Local> {
        let a = a.as_bytes::<T>();
        let (offsets, data) = (a.value_offsets(), a.value_data());
        let value = |i: usize| &data[offsets[i].as_usize()..offsets[i + 1].as_usize()];
        let limit = (a.len() / MAX_SHARE_DEN).max(64);
        let mut table: HashTable<u32> = HashTable::new();
        let mut l = Local {
            keys: Vec::with_capacity(a.len()),
            firsts: Vec::new(),
            hashes: Vec::new(),
        };
        let nulls = a.nulls().filter(|n| n.null_count() > 0);
        for i in 0..a.len() {
            if nulls.is_some_and(|n| n.is_null(i)) {
                l.keys.push(0);
                continue;
            }
            let v = value(i);
            let h = state.hash_one(v);
            let key = match table.entry(
                h,
                |&k| value(l.firsts[k as usize] as usize) == v,
                |&k| l.hashes[k as usize],
            ) {
                Entry::Occupied(e) => *e.get(),
                Entry::Vacant(e) => {
                    let k = l.firsts.len() as u32;
                    if k as usize >= limit {
                        return None;
                    }
                    l.firsts.push(i as u32);
                    l.hashes.push(h);
                    e.insert(k);
                    k
                }
            };
            l.keys.push(key);
        }
        Some(l)
    }
    if a.len() > u32::MAX as usize {
        return None;
    }
    match a.data_type() {
        DataType::Utf8 => build::<Utf8Type>(a, state),
        DataType::LargeUtf8 => build::<LargeUtf8Type>(a, state),
        DataType::Binary => build::<BinaryType>(a, state),
        DataType::LargeBinary => build::<LargeBinaryType>(a, state),
        _ => None,
    }
}

/// The chunk's sorted dictionary of one column (of the column's own type) and, per batch, its
/// local keys' chunk keys; `None` when it would hold more than [`MAX_VALUES`] values or
/// [`MAX_BYTES`] bytes.
fn chunk_dictionary(arrays: &[&dyn Array], locals: &[&Local]) -> Option<(ArrayRef, Vec<Vec<u32>>)> {
    /// The chunk's keys are looked up by the hashes the batches' dictionaries computed (one
    /// hasher for the chunk).
    fn build<T: ByteArrayType>(
        arrays: &[&dyn Array],
        locals: &[&Local],
    ) -> Option<(ArrayRef, Vec<Vec<u32>>)> {
        let typed: Vec<&GenericByteArray<T>> = arrays.iter().map(|a| a.as_bytes::<T>()).collect();
        let value = |b: usize, row: u32| -> &[u8] {
            let a = typed[b];
            let o = a.value_offsets();
            &a.value_data()[o[row as usize].as_usize()..o[row as usize + 1].as_usize()]
        };
        let mut table: HashTable<u32> = HashTable::new();
        let mut distinct: Vec<(&[u8], u64)> = Vec::new();
        let mut bytes = 0usize;
        let mut maps = Vec::with_capacity(locals.len());
        for (b, l) in locals.iter().enumerate() {
            let mut map = Vec::with_capacity(l.firsts.len());
            for (&row, &h) in l.firsts.iter().zip(&l.hashes) {
                let v = value(b, row);
                let id = match table.entry(
                    h,
                    |&k| distinct[k as usize].0 == v,
                    |&k| distinct[k as usize].1,
                ) {
                    Entry::Occupied(e) => *e.get(),
                    Entry::Vacant(e) => {
                        bytes += v.len();
                        if distinct.len() >= MAX_VALUES || bytes > MAX_BYTES {
                            return None;
                        }
                        let k = distinct.len() as u32;
                        distinct.push((v, h));
                        e.insert(k);
                        k
                    }
                };
                map.push(id);
            }
            maps.push(map);
        }
        // Sort the values; a chunk key is its value's rank.
        let mut by_value: Vec<u32> = (0..distinct.len() as u32).collect();
        by_value.sort_unstable_by_key(|&k| distinct[k as usize].0);
        let mut rank = vec![0u32; distinct.len()];
        for (r, &k) in by_value.iter().enumerate() {
            rank[k as usize] = r as u32;
        }
        for map in &mut maps {
            map.iter_mut().for_each(|k| *k = rank[*k as usize]);
        }
        let mut lengths = Vec::with_capacity(by_value.len());
        let mut data = Vec::with_capacity(bytes);
        for &k in &by_value {
            let v = distinct[k as usize].0;
            lengths.push(v.len());
            data.extend_from_slice(v);
        }
        let offsets = OffsetBuffer::<T::Offset>::from_lengths(lengths);
        // SAFETY: the values are copied whole from arrays of this very type, so each is valid
        // (UTF-8 for strings), and the offsets are their lengths end to end.
        let values = unsafe { GenericByteArray::<T>::new_unchecked(offsets, data.into(), None) };
        Some((Arc::new(values), maps))
    }
    match arrays[0].data_type() {
        DataType::Utf8 => build::<Utf8Type>(arrays, locals),
        DataType::LargeUtf8 => build::<LargeUtf8Type>(arrays, locals),
        DataType::Binary => build::<BinaryType>(arrays, locals),
        DataType::LargeBinary => build::<LargeBinaryType>(arrays, locals),
        _ => None,
    }
}

/// The values array that the slices of a keyed column all share (a chunk's keyed column's
/// slices do), or `None` when any slice is not a dictionary array into that same array.
pub(crate) fn shared_values<'a>(arrays: &[&'a dyn Array]) -> Option<&'a ArrayRef> {
    let first = arrays.first()?.as_dictionary_opt::<UInt32Type>()?.values();
    arrays
        .iter()
        .all(|a| {
            a.as_dictionary_opt::<UInt32Type>()
                .is_some_and(|d| Arc::ptr_eq(d.values(), first))
        })
        .then_some(first)
}

/// Whether `a` is a keyed column's dictionary array: keys into values sorted strictly
/// ascending, so that a key's order is its value's.
pub(crate) fn sorted_keys(a: &dyn Array) -> Option<&UInt32Array> {
    let d = a.as_dictionary_opt::<UInt32Type>()?;
    fn ascending<T: ByteArrayType>(v: &dyn Array) -> bool {
        let v = v.as_bytes::<T>();
        let at = |i: usize| -> &[u8] { v.value(i).as_ref() };
        v.null_count() == 0 && (1..v.len()).all(|i| at(i - 1) < at(i))
    }
    let values = d.values().as_ref();
    let sorted = match values.data_type() {
        DataType::Utf8 => ascending::<Utf8Type>(values),
        DataType::LargeUtf8 => ascending::<LargeUtf8Type>(values),
        DataType::Binary => ascending::<BinaryType>(values),
        DataType::LargeBinary => ascending::<LargeBinaryType>(values),
        _ => false,
    };
    sorted.then(|| d.keys())
}

#[cfg(test)]
mod tests;
