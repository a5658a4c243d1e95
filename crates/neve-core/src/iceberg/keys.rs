//! Key ids: the keys of a writer's groups of position deletes, each numbered once.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::DataType;
use arrow::row::RowConverter;

use crate::error::{Error, Result};

/// The keys of a writer's groups, each once, numbered: a group's best rows name their key by
/// its number. A table's partitions hold mostly the same keys (the same taxis every month), so
/// this is small enough to stay in the CPU's cache while a group's rows are weighed, where each
/// group keeping its own keys' bytes spread the lookups over the memory of every group (90 MB
/// for 132 month partitions, more than the cache; BENCHMARKS.md, "Forty-fourth session").
/// Shared by the groups decided at once: most keys are known, found under the read lock, and a
/// file's new keys are added under the write lock together.
///
/// A key is its bytes: a single string or binary column's own (a null has an id of its own),
/// else the key columns in row format. The two forms may share the table, and their bytes may
/// collide, but a group's keys are all of one form (its key columns' types), and within a form
/// distinct keys have distinct bytes, so one id never names two keys of a group.
#[derive(Debug, Default)]
pub(crate) struct KeyIds {
    hasher: ahash::RandomState,
    keys: std::sync::RwLock<KeyTable>,
    /// The ids of the values of the dictionaries numbered last (see [`KeyIds::ids`]), by
    /// the values' array, held so that its address names it.
    dictionaries: std::sync::Mutex<Vec<(ArrayRef, Arc<Vec<u32>>)>>,
}

/// Dictionaries whose values' ids are kept: an insert's files share their chunk's one. Each
/// holds at most the writer's cap on a chunk's dictionary (`write/keys.rs`, 4 MiB of values).
const DICTIONARIES: usize = 4;

/// Whether a single key column of type `t` is numbered by its values' bytes.
fn is_bytes(t: &DataType) -> bool {
    use DataType::*;
    matches!(
        t,
        Utf8 | LargeUtf8 | Utf8View | Binary | LargeBinary | BinaryView
    )
}

#[derive(Debug, Default)]
struct KeyTable {
    /// Ids by their key's hash (every id but the null key's).
    table: hashbrown::HashTable<u32>,
    /// Key `i`'s bytes are `bytes[ends[i - 1]..ends[i]]` (from 0 for the first).
    ends: Vec<usize>,
    hashes: Vec<u64>,
    bytes: Vec<u8>,
    /// The id of a null single-column key, once seen.
    null: Option<u32>,
}

impl KeyTable {
    fn key(&self, id: u32) -> &[u8] {
        let i = id as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    /// The id of `key` (its hash `hash`; `None`, a null single-column key), if known.
    fn find(&self, hash: u64, key: Option<&[u8]>) -> Option<u32> {
        match key {
            None => self.null,
            Some(key) => self.table.find(hash, |&id| self.key(id) == key).copied(),
        }
    }

    /// Numbers `key`, not known (its hash `hash`).
    fn insert(&mut self, hash: u64, key: Option<&[u8]>) -> Result<u32> {
        let id = u32::try_from(self.ends.len()).map_err(|_| Error::IcebergTooManyKeys {
            limit: u32::MAX.into(),
        })?;
        self.bytes.extend_from_slice(key.unwrap_or_default());
        self.ends.push(self.bytes.len());
        self.hashes.push(hash);
        if key.is_none() {
            self.null = Some(id);
            return Ok(id);
        }
        let hashes = &self.hashes;
        self.table
            .insert_unique(hash, id, |&id| hashes[id as usize]);
        Ok(id)
    }
}

impl KeyIds {
    /// Keys known.
    pub(crate) fn len(&self) -> usize {
        self.keys.read().expect("key ids").ends.len()
    }

    /// The id of each row of the key columns `keys`, numbering those not known yet. A single
    /// string or binary column is numbered by its values' bytes; other keys are turned into
    /// rows by `rows` (turning keys and versions into rows was 15% of deciding; BENCHMARKS.md,
    /// "Forty-fourth session").
    pub(crate) fn ids(&self, keys: &[ArrayRef], rows: &RowConverter) -> Result<Vec<u32>> {
        fn bytes<'a, T: arrow::array::ArrayAccessor + 'a>(
            a: T,
            value: impl Fn(T::Item) -> &'a [u8],
        ) -> impl Fn(usize) -> Option<&'a [u8]> {
            move |i| a.is_valid(i).then(|| value(a.value(i)))
        }
        let n = keys.first().map_or(0, |k| k.len());
        if let [k] = keys {
            if let Some(d) = k
                .as_any_dictionary_opt()
                .filter(|d| is_bytes(d.values().data_type()))
            {
                return self.dictionary_ids(d, rows);
            }
            match k.data_type() {
                DataType::Utf8 => {
                    return self.ids_by(n, bytes(k.as_string::<i32>(), str::as_bytes))
                }
                DataType::LargeUtf8 => {
                    return self.ids_by(n, bytes(k.as_string::<i64>(), str::as_bytes))
                }
                DataType::Utf8View => {
                    return self.ids_by(n, bytes(k.as_string_view(), str::as_bytes))
                }
                DataType::Binary => return self.ids_by(n, bytes(k.as_binary::<i32>(), |v| v)),
                DataType::LargeBinary => return self.ids_by(n, bytes(k.as_binary::<i64>(), |v| v)),
                DataType::BinaryView => return self.ids_by(n, bytes(k.as_binary_view(), |v| v)),
                _ => {}
            }
        }
        let rows = rows.convert_columns(keys)?;
        self.ids_by(rows.num_rows(), |i| Some(rows.row(i).data()))
    }

    /// The ids of a single key column kept as a dictionary (a string column the writer keyed,
    /// `write::keys`): its values numbered once for every file that shares them (an insert's
    /// files share their chunk's), then each row's id looked up by its index. Numbering each
    /// row's bytes, after turning the column back into strings, was most of the ids' cost.
    /// A row is null when its index or its value is.
    fn dictionary_ids(
        &self,
        d: &dyn arrow::array::AnyDictionaryArray,
        rows: &RowConverter,
    ) -> Result<Vec<u32>> {
        let values = d.values();
        let known = {
            let kept = self.dictionaries.lock().expect("dictionary ids");
            kept.iter()
                .find(|(v, _)| Arc::ptr_eq(v, values))
                .map(|(_, ids)| ids.clone())
        };
        let value_ids = match known {
            Some(ids) => ids,
            None => {
                let ids = Arc::new(self.ids(std::slice::from_ref(values), rows)?);
                let mut kept = self.dictionaries.lock().expect("dictionary ids");
                if kept.len() == DICTIONARIES {
                    kept.remove(0);
                }
                kept.push((values.clone(), ids.clone()));
                ids
            }
        };
        let null = match d.keys().null_count() {
            0 => u32::MAX,
            _ => self.ids_by(1, |_| None)?[0],
        };
        let keys = d.keys();
        Ok(d.normalized_keys()
            .into_iter()
            .enumerate()
            .map(|(i, k)| if keys.is_null(i) { null } else { value_ids[k] })
            .collect())
    }

    /// The id of each of `n` keys, `key(i)` the bytes of the `i`th (`None` for a null
    /// single-column key).
    fn ids_by<'k>(&self, n: usize, key: impl Fn(usize) -> Option<&'k [u8]>) -> Result<Vec<u32>> {
        let hash = |k: Option<&[u8]>| k.map_or(0, |k| self.hasher.hash_one(k));
        let mut ids = Vec::with_capacity(n);
        let mut new = Vec::new();
        {
            // One pass, no vector of hashes: most keys are known, and the few that are not
            // are hashed again below (allocating and freeing the hashes of each file was a
            // tenth of numbering; BENCHMARKS.md, "Forty-sixth session").
            let known = self.keys.read().expect("key ids");
            for i in 0..n {
                let k = key(i);
                ids.push(known.find(hash(k), k).unwrap_or_else(|| {
                    new.push(i);
                    u32::MAX
                }));
            }
        }
        if new.is_empty() {
            return Ok(ids);
        }
        let mut known = self.keys.write().expect("key ids");
        for i in new {
            let k = key(i);
            let h = hash(k);
            ids[i] = match known.find(h, k) {
                // Another group's file numbered it meanwhile, or it repeats in this file.
                Some(id) => id,
                None => known.insert(h, k)?,
            };
        }
        Ok(ids)
    }
}

/// The ids of one given file's keys, numbered on the rayon pool while the insert commits (a
/// core is idle then) instead of in the sync after it, whose weighing only reads them
/// (BENCHMARKS.md, "Forty-eighth session"). Numbered once: by whichever of the two gets there
/// first, the other waiting.
#[derive(Debug)]
pub(crate) struct PreNumbered {
    /// The ids they are numbered by: a sync whose states name keys by others numbers again.
    by: Arc<KeyIds>,
    /// The key columns as given, and how keys of their types become rows.
    keys: Vec<ArrayRef>,
    rows: Arc<RowConverter>,
    ids: std::sync::OnceLock<Option<Vec<u32>>>,
}

impl PreNumbered {
    /// Ids for the key columns `keys` by `by` (`rows` turns keys of their types into rows).
    pub(crate) fn new(by: Arc<KeyIds>, keys: Vec<ArrayRef>, rows: Arc<RowConverter>) -> Self {
        Self {
            by,
            keys,
            rows,
            ids: Default::default(),
        }
    }

    /// The ids, numbered now unless they were; `None` when numbering failed (the sync's own
    /// numbering then reports why).
    pub(crate) fn ids(&self) -> Option<&[u32]> {
        self.ids
            .get_or_init(|| self.by.ids(&self.keys, &self.rows).ok())
            .as_deref()
    }

    /// Whether they are the ids of `keys` by `by`: the same ids, and the very arrays the sync
    /// weighs (not a cast of them, whose rows would differ).
    pub(crate) fn fits(&self, by: &Arc<KeyIds>, keys: &[ArrayRef]) -> bool {
        Arc::ptr_eq(&self.by, by)
            && self.keys.len() == keys.len()
            && self.keys.iter().zip(keys).all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};
    use std::sync::Arc;

    use arrow::array::{
        ArrayRef, BinaryArray, BinaryViewArray, DictionaryArray, Int32Array, LargeBinaryArray,
        LargeStringArray, StringArray, StringViewArray, UInt32Array,
    };
    use arrow::datatypes::{DataType, UInt32Type};
    use arrow::row::{RowConverter, SortField};
    use proptest::prelude::*;

    use super::KeyIds;

    proptest! {
        /// Ids number keys as a map from key to its first-seen number does, when files'
        /// keys (repeats within a file and across files, nulls, empty strings) are numbered
        /// one file after another: a single string column (numbered by its bytes) and a key
        /// of two columns (in row format) in one table of ids, each form against its own map.
        #[test]
        fn ids_number_each_key_once(
            files in prop::collection::vec(
                prop::collection::vec((prop::option::of("[ab]{0,3}"), 0..3i32), 0..40),
                1..6,
            )
        ) {
            let one = RowConverter::new(vec![SortField::new(DataType::Utf8)]).unwrap();
            let two = RowConverter::new(vec![
                SortField::new(DataType::Utf8),
                SortField::new(DataType::Int32),
            ])
            .unwrap();
            let ids = KeyIds::default();
            let mut seen = HashSet::new();
            let mut single: HashMap<Option<String>, u32> = HashMap::new();
            let mut pairs: HashMap<(Option<String>, i32), u32> = HashMap::new();
            for keys in files {
                let strings: ArrayRef =
                    Arc::new(StringArray::from_iter(keys.iter().map(|(s, _)| s.clone())));
                let ints: ArrayRef =
                    Arc::new(Int32Array::from_iter_values(keys.iter().map(|(_, i)| *i)));
                let got = ids.ids(std::slice::from_ref(&strings), &one).unwrap();
                for ((s, _), id) in keys.iter().zip(&got) {
                    prop_assert_eq!(*single.entry(s.clone()).or_insert(*id), *id);
                    seen.insert(*id);
                }
                let got = ids.ids(&[strings, ints], &two).unwrap();
                for (k, id) in keys.into_iter().zip(&got) {
                    prop_assert_eq!(*pairs.entry(k).or_insert(*id), *id);
                    seen.insert(*id);
                }
                // One id per key within a form.
                let distinct: HashSet<u32> = single.values().copied().collect();
                prop_assert_eq!(distinct.len(), single.len());
                let distinct: HashSet<u32> = pairs.values().copied().collect();
                prop_assert_eq!(distinct.len(), pairs.len());
                prop_assert_eq!(ids.len(), seen.len());
            }
        }
    }

    proptest! {
        /// A key kept as a dictionary (a string column the writer keyed) has the ids of its
        /// values as strings, whichever is numbered first: files sharing one dictionary and
        /// files with another of the same values, null indices and null values.
        #[test]
        fn dictionaries_number_as_their_values(
            values in prop::collection::vec(prop::option::of("[abc]{0,2}"), 1..8),
            files in prop::collection::vec(
                prop::collection::vec(prop::option::of(0..8u32), 0..30),
                1..5,
            ),
            dictionary_first in any::<bool>(),
        ) {
            let one = RowConverter::new(vec![SortField::new(DataType::Utf8)]).unwrap();
            let shared: ArrayRef = Arc::new(StringArray::from(values.clone()));
            let ids = KeyIds::default();
            for (n, file) in files.iter().enumerate() {
                let keys: Vec<Option<u32>> = file
                    .iter()
                    .map(|k| k.map(|k| k % values.len() as u32))
                    .collect();
                let of = if n % 2 == 0 {
                    shared.clone()
                } else {
                    Arc::new(StringArray::from(values.clone())) as ArrayRef
                };
                let dictionary: ArrayRef = Arc::new(
                    DictionaryArray::<UInt32Type>::try_new(UInt32Array::from(keys.clone()), of)
                        .unwrap(),
                );
                let strings: ArrayRef = Arc::new(StringArray::from_iter(
                    keys.iter().map(|k| k.and_then(|k| values[k as usize].clone())),
                ));
                let (a, b) = if dictionary_first {
                    let a = ids.ids(&[dictionary], &one).unwrap();
                    (a, ids.ids(&[strings], &one).unwrap())
                } else {
                    let b = ids.ids(&[strings], &one).unwrap();
                    (ids.ids(&[dictionary], &one).unwrap(), b)
                };
                prop_assert_eq!(a, b);
            }
        }
    }

    /// Every string and binary type is numbered by its values' bytes, the same way: equal
    /// values one id, a null apart from the empty value.
    #[test]
    fn byte_columns_number_alike() {
        let values = [
            Some("x"),
            None,
            Some(""),
            Some("x"),
            None,
            Some("y"),
            Some(""),
        ];
        let want = vec![0, 1, 2, 0, 1, 3, 2];
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(values.to_vec())),
            Arc::new(LargeStringArray::from(values.to_vec())),
            Arc::new(StringViewArray::from(values.to_vec())),
            Arc::new(BinaryArray::from_iter(
                values.iter().map(|v| v.map(str::as_bytes)),
            )),
            Arc::new(LargeBinaryArray::from_iter(
                values.iter().map(|v| v.map(str::as_bytes)),
            )),
            Arc::new(BinaryViewArray::from_iter(
                values.iter().map(|v| v.map(str::as_bytes)),
            )),
        ];
        for c in columns {
            let converter = RowConverter::new(vec![SortField::new(c.data_type().clone())]).unwrap();
            let ids = KeyIds::default();
            assert_eq!(
                ids.ids(std::slice::from_ref(&c), &converter).unwrap(),
                want,
                "{}",
                c.data_type()
            );
            assert_eq!(ids.len(), 4);
        }
    }

    /// Keys numbered ahead (while a commit runs) get the ids the sync's own numbering gives
    /// them, whichever numbers first, and are only used for the very arrays and ids they were
    /// numbered for.
    #[test]
    fn keys_numbered_ahead_are_the_syncs() {
        let converter = Arc::new(RowConverter::new(vec![SortField::new(DataType::Utf8)]).unwrap());
        let ids = Arc::new(KeyIds::default());
        let first: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "a", "c"]));
        let second: ArrayRef = Arc::new(StringArray::from(vec!["c", "d", "b"]));
        // The second file numbered ahead, then the first by the sync, then the second read.
        let ahead = super::PreNumbered::new(ids.clone(), vec![second.clone()], converter.clone());
        assert_eq!(ahead.ids().unwrap(), &[0, 1, 2]);
        let synced = ids.ids(std::slice::from_ref(&first), &converter).unwrap();
        assert_eq!(synced, vec![3, 2, 3, 0]);
        assert_eq!(ahead.ids().unwrap(), &[0, 1, 2], "numbered once");
        assert_eq!(
            ids.ids(std::slice::from_ref(&second), &converter).unwrap(),
            ahead.ids().unwrap()
        );
        assert!(ahead.fits(&ids, std::slice::from_ref(&second)));
        // Other ids, or other arrays (a cast of the same values), do not fit.
        assert!(!ahead.fits(&Arc::new(KeyIds::default()), std::slice::from_ref(&second)));
        let copy: ArrayRef = Arc::new(StringArray::from(vec!["c", "d", "b"]));
        assert!(!ahead.fits(&ids, &[copy]));
        assert!(!ahead.fits(&ids, &[]));
    }

    /// Threads numbering overlapping keys at once agree on every key's id.
    #[test]
    fn ids_agree_across_threads() {
        let ids = Arc::new(KeyIds::default());
        let numbered: Vec<Vec<(String, u32)>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|t| {
                    let ids = ids.clone();
                    s.spawn(move || {
                        let converter =
                            RowConverter::new(vec![SortField::new(DataType::Utf8)]).unwrap();
                        let keys: Vec<String> = (0..2000)
                            .map(|i| format!("k{}", (i * (t + 1)) % 3000))
                            .collect();
                        let array: ArrayRef = Arc::new(StringArray::from(keys.clone()));
                        let got = ids.ids(&[array], &converter).unwrap();
                        keys.into_iter().zip(got).collect()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut by_key: HashMap<String, u32> = HashMap::new();
        for (k, id) in numbered.into_iter().flatten() {
            assert_eq!(*by_key.entry(k.clone()).or_insert(id), id, "key {k}");
        }
        let mut distinct: Vec<u32> = by_key.values().copied().collect();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), by_key.len(), "one id per key");
        assert_eq!(ids.len(), by_key.len());
    }
}
