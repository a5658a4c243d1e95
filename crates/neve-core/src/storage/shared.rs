//! One client per S3 store configuration, shared by every table opened on it.

use std::sync::Arc;

use object_store::ObjectStore;

/// Whether S3 clients are shared (see [`share_s3_clients`]).
static SHARING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Share one S3 client among the tables this process opens on the same bucket and settings,
/// from now on. For a process that runs one tokio runtime (neve's CLI, server and Python
/// package): a client's pooled connections are driven by the runtime that opened them, and
/// a request from another runtime on one of them fails when that runtime ends.
pub fn share_s3_clients() {
    SHARING.store(true, std::sync::atomic::Ordering::Relaxed);
}

pub(super) fn sharing() -> bool {
    SHARING.load(std::sync::atomic::Ordering::Relaxed)
}

/// The S3 stores this process built, by everything their building read. Tables of one bucket
/// then share one client: its connection pool, and its credentials (a web identity or an
/// instance role is asked once, not for each table a server or its maintenance opens: STS and
/// the instance metadata service throttle callers that ask for every table).
pub(super) static S3_STORES: StoreCache = StoreCache::new();

/// At most this many stores are kept (the least recently used goes): a process that opens
/// tables with many different credentials does not hold a client for each forever.
const MAX_CACHED_STORES: usize = 32;

/// A store under its key, and the tick it was last used at.
type Kept = ([u8; 32], Arc<dyn ObjectStore>, u64);

/// The kept stores, and a tick counting uses.
pub(super) struct StoreCache(std::sync::Mutex<(u64, Vec<Kept>)>);

impl StoreCache {
    const fn new() -> Self {
        Self(std::sync::Mutex::new((0, Vec::new())))
    }

    pub(super) fn get(&self, key: &[u8; 32]) -> Option<Arc<dyn ObjectStore>> {
        let mut guard = self.0.lock().expect("store cache");
        let (tick, stores) = &mut *guard;
        *tick += 1;
        let (_, store, used) = stores.iter_mut().find(|(k, _, _)| k == key)?;
        *used = *tick;
        Some(store.clone())
    }

    /// Keeps `store` under `key`, or returns the one another thread kept meanwhile.
    pub(super) fn insert(
        &self,
        key: [u8; 32],
        store: Arc<dyn ObjectStore>,
    ) -> Arc<dyn ObjectStore> {
        let mut guard = self.0.lock().expect("store cache");
        let (tick, stores) = &mut *guard;
        *tick += 1;
        if let Some((_, kept, used)) = stores.iter_mut().find(|(k, _, _)| *k == key) {
            *used = *tick;
            return kept.clone();
        }
        if stores.len() >= MAX_CACHED_STORES {
            if let Some(oldest) = (0..stores.len()).min_by_key(|&i| stores[i].2) {
                stores.swap_remove(oldest);
            }
        }
        stores.push((key, store.clone(), *tick));
        store
    }
}

/// A digest of what an S3 store is built from (secrets included, so it is hashed, not kept).
pub(super) fn store_key(
    bucket: &str,
    region: &str,
    endpoint: Option<&str>,
    allow_http: bool,
    given: &[(object_store::aws::AmazonS3ConfigKey, &str)],
    env: &[(String, String)],
) -> [u8; 32] {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    let mut field = |s: &[u8]| {
        h.update((s.len() as u64).to_le_bytes());
        h.update(s);
    };
    field(bucket.as_bytes());
    field(region.as_bytes());
    field(endpoint.unwrap_or("\0none").as_bytes());
    field(&[allow_http as u8]);
    for (k, v) in given {
        field(k.as_ref().as_bytes());
        field(v.as_bytes());
    }
    field(b"env");
    for (k, v) in env {
        field(k.as_bytes());
        field(v.as_bytes());
    }
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::super::{StorageOptions, TableLocation};
    use std::sync::Arc;

    fn at_sharing(address: &str, secret: &str, share: bool) -> TableLocation {
        let opts = StorageOptions::from([
            ("endpoint_url".to_string(), "http://127.0.0.1:9".to_string()),
            ("aws_access_key_id".to_string(), "AKIA-SHARED".to_string()),
            ("aws_secret_access_key".to_string(), secret.to_string()),
        ]);
        TableLocation::parse_sharing(address, &opts, share).unwrap()
    }

    fn at(address: &str, secret: &str) -> TableLocation {
        at_sharing(address, secret, true)
    }

    #[test]
    fn tables_of_one_bucket_share_a_client() {
        let (a, b) = (
            at("s3://shared-a/t1", "s1"),
            at("s3://shared-a/ns/t2", "s1"),
        );
        assert!(Arc::ptr_eq(&a.store, &b.store));
        assert_eq!(b.root.as_ref(), "ns/t2");
        // Other credentials, or another bucket: a client of its own.
        assert!(!Arc::ptr_eq(&a.store, &at("s3://shared-a/t1", "s2").store));
        assert!(!Arc::ptr_eq(&a.store, &at("s3://shared-b/t1", "s1").store));
        // Unless the process shares them (one runtime), each table has a client of its own.
        let own = at_sharing("s3://shared-a/t1", "s1", false);
        assert!(!Arc::ptr_eq(&a.store, &own.store));
    }

    #[test]
    fn the_least_recently_used_client_goes() {
        use object_store::{memory::InMemory, ObjectStore};
        let cache = super::StoreCache::new();
        let key = |i: usize| [i as u8; 32];
        let store = || -> Arc<dyn ObjectStore> { Arc::new(InMemory::new()) };
        let first = cache.insert(key(0), store());
        for i in 1..super::MAX_CACHED_STORES {
            cache.insert(key(i), store());
        }
        // A second build of the same key keeps the first one's client.
        assert!(Arc::ptr_eq(&first, &cache.insert(key(0), store())));
        // Used again, so the next one out is key 1.
        assert!(cache.get(&key(0)).is_some());
        cache.insert(key(100), store());
        assert!(cache.get(&key(1)).is_none());
        assert!(Arc::ptr_eq(&first, &cache.get(&key(0)).unwrap()));
        for i in 0..super::MAX_CACHED_STORES {
            cache.insert(key(200 + i), store());
        }
        assert!(cache.get(&key(0)).is_none());
    }
}
