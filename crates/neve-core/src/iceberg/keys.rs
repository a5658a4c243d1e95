//! Key ids: the keys of a writer's groups of position deletes, each numbered once.

use arrow::row::Rows;

use crate::error::{Error, Result};

/// The keys of a writer's groups, each once, in row format, numbered: a group's best rows name
/// their key by its number. A table's partitions hold mostly the same keys (the same taxis
/// every month), so this is small enough to stay in the CPU's cache while a group's rows are
/// weighed, where each group keeping its own keys' bytes spread the lookups over the memory
/// of every group (90 MB for 132 month partitions, more than the cache; BENCHMARKS.md,
/// "Forty-fourth session"). Shared by the groups decided at once: most keys are known, found under the read
/// lock, and a file's new keys are added under the write lock together.
#[derive(Debug, Default)]
pub(crate) struct KeyIds {
    hasher: ahash::RandomState,
    keys: std::sync::RwLock<KeyTable>,
}

#[derive(Debug, Default)]
struct KeyTable {
    /// Ids by their key's hash.
    table: hashbrown::HashTable<u32>,
    /// Key `i`'s bytes are `bytes[ends[i - 1]..ends[i]]` (from 0 for the first).
    ends: Vec<usize>,
    hashes: Vec<u64>,
    bytes: Vec<u8>,
}

impl KeyTable {
    fn key(&self, id: u32) -> &[u8] {
        let i = id as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    fn find(&self, hash: u64, key: &[u8]) -> Option<u32> {
        self.table.find(hash, |&id| self.key(id) == key).copied()
    }

    /// Numbers `key`, not known (its hash `hash`).
    fn insert(&mut self, hash: u64, key: &[u8]) -> Result<u32> {
        let id = u32::try_from(self.ends.len()).map_err(|_| Error::IcebergTooManyKeys {
            limit: u32::MAX.into(),
        })?;
        self.bytes.extend_from_slice(key);
        self.ends.push(self.bytes.len());
        self.hashes.push(hash);
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

    /// The id of each of `keys`' rows, numbering those not known yet.
    pub(crate) fn ids(&self, keys: &Rows) -> Result<Vec<u32>> {
        let hashes: Vec<u64> = keys
            .iter()
            .map(|k| self.hasher.hash_one(k.as_ref()))
            .collect();
        let mut ids = Vec::with_capacity(hashes.len());
        let mut new = Vec::new();
        {
            let known = self.keys.read().expect("key ids");
            for (i, (k, &h)) in keys.iter().zip(&hashes).enumerate() {
                ids.push(known.find(h, k.as_ref()).unwrap_or_else(|| {
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
            let (key, hash) = (keys.row(i), hashes[i]);
            let key = key.as_ref();
            ids[i] = match known.find(hash, key) {
                // Another group's file numbered it meanwhile, or it repeats in this file.
                Some(id) => id,
                None => known.insert(hash, key)?,
            };
        }
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use arrow::array::{ArrayRef, StringArray};
    use arrow::datatypes::DataType;
    use arrow::row::{RowConverter, SortField};
    use proptest::prelude::*;

    use super::KeyIds;

    proptest! {
        /// Ids number keys as a map from key to its first-seen number does, when files'
        /// keys (repeats within a file and across files, nulls, empty strings) are numbered
        /// one file after another.
        #[test]
        fn ids_number_each_key_once(
            files in prop::collection::vec(
                prop::collection::vec(prop::option::of("[ab]{0,3}"), 0..40),
                1..6,
            )
        ) {
            let converter = RowConverter::new(vec![SortField::new(DataType::Utf8)]).unwrap();
            let ids = KeyIds::default();
            let mut model: HashMap<Option<String>, u32> = HashMap::new();
            for keys in files {
                let array: ArrayRef = Arc::new(StringArray::from(keys.clone()));
                let got = ids.ids(&converter.convert_columns(&[array]).unwrap()).unwrap();
                let want: Vec<u32> = keys
                    .into_iter()
                    .map(|k| {
                        let next = model.len() as u32;
                        *model.entry(k).or_insert(next)
                    })
                    .collect();
                prop_assert_eq!(got, want);
                prop_assert_eq!(ids.len(), model.len());
            }
        }
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
                        let got = ids
                            .ids(&converter.convert_columns(&[array]).unwrap())
                            .unwrap();
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
