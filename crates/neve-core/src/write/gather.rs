//! Copying columns into a new row order: a part's rows from its slices into sorted order
//! (`gather_column`), and a batch's rows grouped by partition (`take_column`). At 10M rows a
//! part (about 75,000 taxi rows, 20 MB of strings) and an input batch (65,536 rows) outgrow
//! the caches, and each string value read in the new order waited for memory: the copies
//! here ask for the bytes of the value 16 rows ahead while they copy this one. A part takes
//! every row of its slices once, so its output size is known before the copy. Other types go
//! through arrow's `take` (a part's slices put end to end first): a loop of their own, tried,
//! was no faster.

use std::cell::OnceCell;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, DictionaryArray, GenericByteArray, GenericByteBuilder, UInt32Array,
};
use arrow::datatypes::{
    ArrowNativeType, BinaryType, ByteArrayType, DataType, LargeBinaryType, LargeUtf8Type,
    UInt32Type, Utf8Type,
};

use crate::error::Result;

/// One column of the part: `arrays[s]` is slice `s`'s column, `order` every row of the
/// slices once, as its position in the slices put end to end, in output order. Strings and
/// binaries are read ahead ([`warm`]) and copied here, by each row's (slice, row in slice),
/// worked out once a part in `pairs`. Other types are put end to end and then taken by
/// position: putting them end to end reads them in order, which also brings them into the
/// cache, and the take then reads one array by a 4-byte position, where `interleave` looked up
/// a (slice, row) pair of 16 bytes for every value (BENCHMARKS.md, issue 15, "Fifty-fourth
/// session").
pub(crate) fn gather_column(
    arrays: &[&dyn Array],
    order: &UInt32Array,
    pairs: &OnceCell<Vec<(usize, usize)>>,
) -> Result<ArrayRef> {
    fn bytes<T: ByteArrayType>(arrays: &[&dyn Array], order: &[(usize, usize)]) -> ArrayRef {
        let typed: Vec<&GenericByteArray<T>> = arrays.iter().map(|a| a.as_bytes::<T>()).collect();
        // Every row is copied once: the output holds exactly the slices' value bytes.
        let bytes: usize = typed
            .iter()
            .map(|a| {
                let o = a.value_offsets();
                o[o.len() - 1].as_usize() - o[0].as_usize()
            })
            .sum();
        copy_bytes(&typed, order.len(), bytes, |i| order[i])
    }
    let pairs = || {
        arrays.iter().for_each(|a| warm(*a, Warm::All));
        pairs.get_or_init(|| {
            let mut owner = Vec::with_capacity(arrays.iter().map(|a| a.len()).sum());
            for (s, a) in arrays.iter().enumerate() {
                owner.extend((0..a.len()).map(|r| (s, r)));
            }
            order.values().iter().map(|&i| owner[i as usize]).collect()
        })
    };
    Ok(match arrays[0].data_type() {
        DataType::Utf8 => bytes::<Utf8Type>(arrays, pairs()),
        DataType::LargeUtf8 => bytes::<LargeUtf8Type>(arrays, pairs()),
        DataType::Binary => bytes::<BinaryType>(arrays, pairs()),
        DataType::LargeBinary => bytes::<LargeBinaryType>(arrays, pairs()),
        DataType::Dictionary(k, _)
            if **k == DataType::UInt32 && super::keys::shared_values(arrays).is_some() =>
        {
            // Keyed strings (`keys.rs`): the keys put end to end and taken, the values shared.
            let keys: Vec<&dyn Array> = arrays
                .iter()
                .map(|a| a.as_dictionary::<UInt32Type>().keys() as &dyn Array)
                .collect();
            let keys = match keys.as_slice() {
                [one] => arrow::compute::take(*one, order, None)?,
                _ => arrow::compute::take(arrow::compute::concat(&keys)?.as_ref(), order, None)?,
            };
            let values = arrays[0].as_dictionary::<UInt32Type>().values().clone();
            // SAFETY: the keys are taken from arrays of keys into these very values.
            Arc::new(unsafe {
                DictionaryArray::<UInt32Type>::new_unchecked(keys.as_primitive().clone(), values)
            })
        }
        _ => match arrays {
            [one] => arrow::compute::take(*one, order, None)?,
            _ => arrow::compute::take(arrow::compute::concat(arrays)?.as_ref(), order, None)?,
        },
    })
}

/// What [`warm`] reads of an array.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Warm {
    /// Every buffer.
    All,
    /// Fixed-width values and the offsets of strings and binaries, not their value bytes.
    Fixed,
}

/// Read an array's bytes front to back (one byte a cache line) before a gather reads them in
/// random order: the hardware prefetcher brings sequential lines in at memory speed, where the
/// gather's random reads would each wait for memory. Only the array's own range of its
/// buffers: a part's slice is a small window of a grouped batch.
pub(crate) fn warm(a: &dyn Array, what: Warm) {
    fn touch(bytes: &[u8]) {
        let mut acc = 0u8;
        for i in (0..bytes.len()).step_by(64) {
            acc ^= bytes[i];
        }
        std::hint::black_box(acc);
    }
    // The offsets of an array's values, then (unless only fixed widths) those values' bytes.
    let touch_bytes = |offsets: &[i32], values: &[u8]| {
        touch(arrow::datatypes::ToByteSlice::to_byte_slice(offsets));
        if what == Warm::All {
            touch(&values[offsets[0] as usize..offsets[offsets.len() - 1] as usize]);
        }
    };
    if a.is_empty() {
        return;
    }
    if let Some(d) = a.as_dictionary_opt::<UInt32Type>() {
        // Keyed strings: their keys (the dictionary is shared, and small).
        let keys: &[u32] = d.keys().values();
        touch(arrow::datatypes::ToByteSlice::to_byte_slice(keys));
        return;
    }
    // Typed views of the array's own range: no `ArrayData` built per call (this runs for every
    // column of every slice of every part).
    arrow::array::downcast_primitive_array!(
        a => touch(arrow::datatypes::ToByteSlice::to_byte_slice(a.values().as_ref())),
        DataType::Utf8 => {
            let s = a.as_string::<i32>();
            touch_bytes(s.value_offsets(), s.values());
        }
        DataType::Binary => {
            let s = a.as_binary::<i32>();
            touch_bytes(s.value_offsets(), s.values());
        }
        _ => {}
    )
}

/// `take` of one column by `perm` (grouping a batch by partition), with the string and binary
/// values' bytes asked for ahead of the copy; other types through arrow's `take`.
pub(crate) fn take_column(array: &dyn Array, indices: &UInt32Array) -> Result<ArrayRef> {
    let perm: &[u32] = indices.values();
    fn bytes<T: ByteArrayType>(array: &dyn Array, perm: &[u32]) -> ArrayRef {
        let a = array.as_bytes::<T>();
        let o = a.value_offsets();
        let bytes = if perm.len() == a.len() {
            o[o.len() - 1].as_usize() - o[0].as_usize()
        } else {
            perm.iter()
                .map(|&r| o[r as usize + 1].as_usize() - o[r as usize].as_usize())
                .sum()
        };
        copy_bytes(&[a], perm.len(), bytes, |i| (0, perm[i] as usize))
    }
    Ok(match array.data_type() {
        DataType::Utf8 => bytes::<Utf8Type>(array, perm),
        DataType::LargeUtf8 => bytes::<LargeUtf8Type>(array, perm),
        DataType::Binary => bytes::<BinaryType>(array, perm),
        DataType::LargeBinary => bytes::<LargeBinaryType>(array, perm),
        _ => arrow::compute::take(array, indices, None)?,
    })
}

/// `n` values, the `i`th being row `at(i).1` of `arrays[at(i).0]`, into one array of `bytes`
/// value bytes.
fn copy_bytes<T: ByteArrayType>(
    arrays: &[&GenericByteArray<T>],
    n: usize,
    bytes: usize,
    at: impl Fn(usize) -> (usize, usize),
) -> ArrayRef {
    let mut out = GenericByteBuilder::<T>::with_capacity(n, bytes);
    let has_nulls = arrays.iter().any(|a| a.null_count() > 0);
    let parts: Vec<(&[T::Offset], &[u8])> = arrays
        .iter()
        .map(|a| (a.value_offsets(), a.values().as_slice()))
        .collect();
    for i in 0..n {
        // The values are read in an order of their own from columns larger than the caches
        // (a part of 75,000 rows, a batch of 65,536): ask for a later row's bytes while this
        // one is copied.
        if i + PREFETCH_AHEAD < n {
            let (ps, pr) = at(i + PREFETCH_AHEAD);
            let (o, v) = parts[ps];
            let (a, b) = (o[pr].as_usize(), o[pr + 1].as_usize());
            prefetch(v.as_ptr().wrapping_add(a));
            if b > a + 64 {
                prefetch(v.as_ptr().wrapping_add(b - 1));
            }
        }
        let (s, r) = at(i);
        if has_nulls && arrays[s].is_null(r) {
            out.append_null();
        } else {
            out.append_value(arrays[s].value(r));
        }
    }
    Arc::new(out.finish())
}

/// How many rows ahead of the copy [`copy_bytes`] asks for a value's bytes.
const PREFETCH_AHEAD: usize = 16;

/// A hint to bring the cache line at `p` in; never faults, whatever `p` is.
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it reads nothing and never faults.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        BinaryArray, BooleanArray, Decimal128Array, Float64Array, Int32Array, LargeStringArray,
        StringArray, StructArray, TimestampMicrosecondArray,
    };
    use arrow::buffer::NullBuffer;
    use arrow::datatypes::{Field, Fields};
    use proptest::prelude::*;

    /// Slice `s` of a test column: `len` rows, null where `null(s, row)`.
    fn columns(lens: &[usize], null: &dyn Fn(usize, usize) -> bool) -> Vec<Vec<ArrayRef>> {
        let mut out: Vec<Vec<ArrayRef>> = Vec::new();
        for (s, &len) in lens.iter().enumerate() {
            let v = |r: usize| (!null(s, r)).then_some((s * 1000 + r) as i64);
            let rows = 0..len;
            let ints: Int32Array = rows.clone().map(|r| v(r).map(|x| x as i32)).collect();
            let ts = TimestampMicrosecondArray::from_iter(rows.clone().map(v))
                .with_timezone("Europe/Paris");
            let dec = Decimal128Array::from_iter(rows.clone().map(|r| v(r).map(|x| x as i128)))
                .with_precision_and_scale(12, 2)
                .unwrap();
            let floats: Float64Array = rows.clone().map(|r| v(r).map(|x| x as f64)).collect();
            let text: StringArray = rows
                .clone()
                .map(|r| v(r).map(|x| "é".repeat((x % 7) as usize) + &x.to_string()))
                .collect();
            let large: LargeStringArray =
                rows.clone().map(|r| v(r).map(|x| x.to_string())).collect();
            let bin: BinaryArray = rows
                .clone()
                .map(|r| v(r).map(|x| x.to_le_bytes()[..(x % 9) as usize].to_vec()))
                .collect::<Vec<_>>()
                .iter()
                .map(|o| o.as_deref())
                .collect();
            let bools: BooleanArray = rows.clone().map(|r| v(r).map(|x| x % 3 == 0)).collect();
            let fields = Fields::from(vec![Field::new("x", DataType::Int32, true)]);
            let structs = StructArray::new(
                fields,
                vec![Arc::new(ints.clone())],
                Some(NullBuffer::from(
                    rows.map(|r| r % 5 != 1).collect::<Vec<_>>(),
                )),
            );
            out.push(vec![
                Arc::new(ints),
                Arc::new(ts),
                Arc::new(dec),
                Arc::new(floats),
                Arc::new(text),
                Arc::new(large),
                Arc::new(bin),
                Arc::new(bools),
                Arc::new(structs),
            ]);
        }
        out
    }

    proptest! {
        /// The same arrays as arrow's `interleave`, types, time zones and nulls included, for
        /// any permutation of slices' rows (slices cut at an offset, as a part's are).
        #[test]
        fn equals_interleave(
            lens in prop::collection::vec(1usize..40, 1..6),
            nulls in 0u8..3,
            cut in 0usize..3,
            seed in any::<u64>(),
        ) {
            let null = move |s: usize, r: usize| match nulls {
                0 => false,
                1 => (s + r).is_multiple_of(3),
                _ => true,
            };
            let full = columns(&lens.iter().map(|l| l + cut).collect::<Vec<_>>(), &null);
            let sliced: Vec<Vec<ArrayRef>> = full
                .iter()
                .zip(&lens)
                .map(|(cols, &l)| cols.iter().map(|c| c.slice(cut, l)).collect())
                .collect();
            let mut wide: Vec<(usize, usize)> = lens
                .iter()
                .enumerate()
                .flat_map(|(s, &l)| (0..l).map(move |r| (s, r)))
                .collect();
            // A Fisher–Yates shuffle from the seed.
            let mut x = seed | 1;
            for i in (1..wide.len()).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                wide.swap(i, (x % (i as u64 + 1)) as usize);
            }
            // The same order as positions in the slices put end to end.
            let starts: Vec<usize> = lens
                .iter()
                .scan(0, |at, &l| {
                    *at += l;
                    Some(*at - l)
                })
                .collect();
            let positions =
                UInt32Array::from_iter_values(wide.iter().map(|&(s, r)| (starts[s] + r) as u32));
            let pairs = OnceCell::new();
            for c in 0..sliced[0].len() {
                let arrays: Vec<&dyn Array> = sliced.iter().map(|s| s[c].as_ref()).collect();
                let want = arrow::compute::interleave(&arrays, &wide).unwrap();
                let got = gather_column(&arrays, &positions, &pairs).unwrap();
                prop_assert_eq!(got.data_type(), want.data_type());
                prop_assert_eq!(got.to_data(), want.to_data(), "column {}", c);
            }
        }

        /// The same arrays as arrow's `take` for any subset of a sliced column's rows in any
        /// order (a grouping pass takes only its partitions' rows).
        #[test]
        fn take_equals_arrow_take(
            len in 1usize..60,
            nulls in 0u8..3,
            cut in 0usize..3,
            picks in prop::collection::vec(any::<prop::sample::Index>(), 0..80),
        ) {
            let null = move |s: usize, r: usize| match nulls {
                0 => false,
                1 => (s + r).is_multiple_of(3),
                _ => true,
            };
            let full = columns(&[len + cut], &null);
            let perm = UInt32Array::from(
                picks.iter().map(|p| p.index(len) as u32).collect::<Vec<_>>(),
            );
            for (c, col) in full[0].iter().enumerate() {
                let col = col.slice(cut, len);
                let got = take_column(col.as_ref(), &perm).unwrap();
                let want = arrow::compute::take(col.as_ref(), &perm, None).unwrap();
                prop_assert_eq!(got.data_type(), want.data_type());
                prop_assert_eq!(got.to_data(), want.to_data(), "column {}", c);
            }
        }
    }
}
