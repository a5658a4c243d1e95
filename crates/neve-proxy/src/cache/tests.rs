use super::*;
use futures::TryStreamExt;
use object_store::memory::InMemory;
use object_store::{ObjectStoreExt, PutPayload};
use proptest::prelude::*;

const BLOCK: u64 = 64 << 10;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn file_of(data: &[u8], name: &str) -> FileBlocks {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let path = Path::from(name);
    store
        .put(&path, PutPayload::from(data.to_vec()))
        .await
        .unwrap();
    FileBlocks {
        store,
        path,
        etag: Arc::from("e1"),
        size: data.len() as u64,
    }
}

fn settings(memory: u64) -> CacheSettings {
    CacheSettings {
        memory,
        disk: 0,
        dir: None,
        block_size: BLOCK,
    }
}

async fn collect(s: BoxStream<'static, Result<Bytes, object_store::Error>>) -> Vec<u8> {
    s.try_fold(Vec::new(), |mut v, b| async move {
        v.extend_from_slice(&b);
        Ok(v)
    })
    .await
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Whatever the range, whether its blocks were cached or not, in memory or spilled to the
    /// disk, the bytes are those of the file's version asked for: a file rewritten in place
    /// (another ETag, other bytes, under the same path) never answers with the old bytes.
    #[test]
    fn reads_through_the_cache_are_the_files_bytes(
        len in 1usize..(5 * BLOCK as usize),
        ranges in proptest::collection::vec((0.0f64..1.0, 0.0f64..1.0, 0usize..2), 1..8),
        memory in prop_oneof![Just(4u64 << 20), Just(200u64 << 10)],
        disk in prop_oneof![Just(0u64), Just(16u64 << 20)],
    ) {
        let versions: Vec<Vec<u8>> = (0..2)
            .map(|v| (0..len).map(|i| ((i + v * 7) * 31 % 251) as u8).collect())
            .collect();
        let dir = tempfile::tempdir().unwrap();
        runtime().block_on(async {
            let mut files = Vec::new();
            for (v, data) in versions.iter().enumerate() {
                let f = file_of(data, "f.parquet").await;
                files.push(FileBlocks { etag: Arc::from(format!("e{v}").as_str()), ..f });
            }
            let metrics = Arc::new(Metrics::new());
            let settings = CacheSettings {
                disk,
                dir: (disk > 0).then(|| dir.path().to_path_buf()),
                ..settings(memory)
            };
            let cache = Arc::new(BlockCache::new(&settings, metrics.clone()).await.unwrap().unwrap());
            for (a, b, v) in &ranges {
                let (a, b) = ((a * len as f64) as u64, (b * len as f64) as u64);
                let r = a.min(b)..a.max(b) + 1;
                let r = r.start..r.end.min(len as u64);
                let (file, data) = (&files[*v], &versions[*v]);
                let want = &data[r.start as usize..r.end as usize];
                for _ in 0..2 {
                    let got = collect(cache.read(file.clone(), r.clone())).await;
                    prop_assert_eq!(&got[..], want);
                    let direct = collect(read_direct(file, r.clone(), metrics.clone()).await.unwrap()).await;
                    prop_assert_eq!(&direct[..], want);
                }
            }
            cache.close().await;
            Ok(())
        })?;
    }
}

#[test]
fn concurrent_cold_readers_of_one_block_make_one_upstream_get() {
    runtime().block_on(async {
        let data = vec![7u8; 3 * BLOCK as usize];
        let file = file_of(&data, "f.parquet").await;
        let metrics = Arc::new(Metrics::new());
        let cache = Arc::new(
            BlockCache::new(&settings(8 << 20), metrics.clone())
                .await
                .unwrap()
                .unwrap(),
        );
        let readers: Vec<_> = (0..32)
            .map(|i| {
                let (cache, file) = (cache.clone(), file.clone());
                tokio::spawn(
                    async move { collect(cache.read(file, BLOCK + i..BLOCK + 100 + i)).await },
                )
            })
            .collect();
        for (i, r) in readers.into_iter().enumerate() {
            assert_eq!(r.await.unwrap().len(), 100, "reader {i}");
        }
        assert_eq!(metrics.upstream_requests.get(), 1);
        assert_eq!(metrics.cache_misses.get(), 1);
        // Now hot: no more GETs.
        collect(cache.read(file.clone(), BLOCK..2 * BLOCK)).await;
        assert_eq!(metrics.upstream_requests.get(), 1);
        assert!(metrics.cache_hits.get() >= 1);
    });
}

#[test]
fn a_file_that_is_gone_is_not_found() {
    runtime().block_on(async {
        let file = file_of(b"x", "f.parquet").await;
        file.store.delete(&file.path).await.unwrap();
        let cache = Arc::new(
            BlockCache::new(&settings(1 << 20), Arc::new(Metrics::new()))
                .await
                .unwrap()
                .unwrap(),
        );
        let err = cache.read(file, 0..1).next().await.unwrap().unwrap_err();
        assert!(
            matches!(err, object_store::Error::NotFound { .. }),
            "{err:?}"
        );
    });
}

/// A data file shorter in the store than its log says (truncated, replaced by hand): every
/// read of it fails, cached or not, none panics, and no short block is kept.
#[test]
fn a_file_shorter_than_logged_fails_its_reads_and_is_not_cached() {
    runtime().block_on(async {
        let data = vec![7u8; 10];
        let mut file = file_of(&data, "f.parquet").await;
        file.size = 3 * BLOCK / 2; // what the log says
        let metrics = Arc::new(Metrics::new());
        let cache = Arc::new(
            BlockCache::new(&settings(1 << 20), metrics.clone())
                .await
                .unwrap()
                .unwrap(),
        );
        for range in [100..200, 0..file.size, 5..8] {
            let got: Vec<_> = cache.read(file.clone(), range.clone()).collect().await;
            assert!(got.iter().any(|r| r.is_err()), "{range:?}: {got:?}");
            if range.end <= data.len() as u64 {
                // Straight from the store, bytes that exist are the file's.
                continue;
            }
            let direct = read_direct(&file, range.clone(), metrics.clone()).await;
            match direct {
                Err(_) => {}
                Ok(s) => {
                    let got: Vec<_> = s.collect().await;
                    assert!(got.iter().any(|r| r.is_err()), "{range:?}: {got:?}");
                }
            }
        }
        for key in cache.keys_of(&file.path, &file.etag, file.size) {
            assert!(!cache.contains(&key), "{key:?}");
        }
        // A file longer than its log says is as wrong.
        let mut long = file_of(&[1u8; 100], "g.parquet").await;
        long.size = 50;
        let direct: Vec<_> = read_direct(&long, 0..50, metrics.clone())
            .await
            .unwrap()
            .collect()
            .await;
        assert!(direct.iter().all(|r| r.is_ok()), "a range inside is served");
        assert_eq!(collect(cache.read(long, 0..50)).await, vec![1u8; 50]);
    });
}

#[test]
fn the_disk_part_stays_within_its_size() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let disk = 16u64 << 20;
    runtime().block_on(async {
        let data: Vec<u8> = (0..48 * BLOCK as usize).map(|i| (i % 253) as u8).collect();
        let file = file_of(&data, "big.parquet").await;
        let metrics = Arc::new(Metrics::new());
        let cache = Arc::new(
            BlockCache::new(
                &CacheSettings {
                    memory: 1 << 20,
                    disk,
                    dir: Some(dir.path().to_path_buf()),
                    block_size: BLOCK,
                },
                metrics.clone(),
            )
            .await
            .unwrap()
            .unwrap(),
        );
        // 3 MB of distinct blocks, many times over: more than the disk holds.
        for round in 0..12u64 {
            let f = FileBlocks {
                etag: Arc::from(format!("e{round}").as_str()),
                ..file.clone()
            };
            let got = collect(cache.read(f, 0..data.len() as u64)).await;
            assert!(got == data, "round {round}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let used: u64 = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().blocks() * 512)
            .sum();
        assert!(used <= disk, "the cache's files use {used} bytes of {disk}");
        assert!(used > 0, "something reached the disk");
        cache.close().await;
    });
}

/// Once a merge has removed files for longer than `removed_files_readable`, their cached
/// blocks are dropped; the merged file's stay, and so do removed files' within the window.
#[test]
fn blocks_of_files_removed_past_the_readable_window_are_dropped() {
    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use neve_core::merge::MergeOptions;
    use neve_core::write::NoProgress;
    use neve_core::{CreateOptions, InsertOptions, TableBuilder, TableLocation};

    runtime().block_on(async {
        let warehouse = TableLocation::memory("wh");
        let table = TableBuilder::new(warehouse.sub("t")).build();
        table.create(CreateOptions::default()).await.unwrap();
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)]));
        for i in 0..3i64 {
            // Scrambled, so the file does not compress below a few blocks.
            let ids: Vec<i64> = (i * 50_000..(i + 1) * 50_000)
                .map(|j| (j as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) as i64)
                .collect();
            let b = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(ids))])
                .unwrap();
            table
                .insert_batches(
                    schema.clone(),
                    vec![b],
                    &InsertOptions::default(),
                    Arc::new(NoProgress),
                )
                .await
                .unwrap();
        }
        let metrics = Arc::new(Metrics::new());
        let cache = Arc::new(
            BlockCache::new(&settings(64 << 20), metrics.clone())
                .await
                .unwrap()
                .unwrap(),
        );
        let catalog = Arc::new(crate::catalog::Catalog::new(
            warehouse,
            std::time::Duration::ZERO,
        ));
        let loc = catalog.location("t");
        // Every block of every alive file, read through the cache.
        let cache_all = |snap: Arc<neve_core::log::Snapshot>| {
            let (cache, loc) = (cache.clone(), loc.clone());
            async move {
                let mut keys = Vec::new();
                for f in snap.files.values() {
                    let file = FileBlocks {
                        store: loc.store.clone(),
                        path: loc.child(&f.path),
                        etag: Arc::from(crate::s3::etag_of(&f.path, f.size)),
                        size: f.size,
                    };
                    collect(cache.read(file.clone(), 0..f.size)).await;
                    keys.extend(cache.keys_of(&file.path, &file.etag, f.size));
                }
                keys
            }
        };
        let before = cache_all(
            catalog
                .latest("t", std::time::Duration::ZERO)
                .await
                .unwrap(),
        )
        .await;
        assert!(
            before.len() >= 6,
            "files of several blocks: {}",
            before.len()
        );
        let merged = table
            .merge(
                &MergeOptions {
                    min_files: 2,
                    ..Default::default()
                },
                Arc::new(NoProgress),
            )
            .await
            .unwrap();
        assert!(merged.version.is_some());
        let after = cache_all(
            catalog
                .latest("t", std::time::Duration::ZERO)
                .await
                .unwrap(),
        )
        .await;
        let now = chrono::Utc::now().timestamp_millis();

        // Within the window: kept (a reader may have listed them just before the merge).
        let mut within = crate::cache::sweep::Sweeper::new(
            catalog.clone(),
            cache.clone(),
            metrics.clone(),
            std::time::Duration::from_secs(3600),
        );
        assert_eq!(within.sweep(now), 0);
        assert!(before.iter().all(|k| cache.contains(k)));

        let mut past = crate::cache::sweep::Sweeper::new(
            catalog.clone(),
            cache.clone(),
            metrics.clone(),
            std::time::Duration::from_secs(1),
        );
        assert_eq!(past.sweep(now + 2_000), 3, "the three merged-away files");
        assert!(
            before.iter().all(|k| !cache.contains(k)),
            "removed files' blocks dropped"
        );
        assert!(
            after.iter().all(|k| cache.contains(k)),
            "the merged file's blocks kept"
        );
        assert_eq!(metrics.cache_dropped_blocks.get(), before.len() as u64);
        // Once only.
        assert_eq!(past.sweep(now + 3_000), 0);
    });
}

/// A tail shorter than half a block rides with the block before it (one GET, not two); a
/// longer one is a block of its own. Either way the bytes are the file's.
#[test]
fn a_short_tail_joins_the_last_block() {
    runtime().block_on(async {
        for (len, gets) in [
            (BLOCK + BLOCK / 4, 1),
            (BLOCK + BLOCK / 2, 2),
            (3 * BLOCK + 1, 3),
            (BLOCK / 3, 1),
        ] {
            let data: Vec<u8> = (0..len as usize).map(|i| (i * 7 % 253) as u8).collect();
            let file = file_of(&data, "t.parquet").await;
            let metrics = Arc::new(Metrics::new());
            let cache = Arc::new(
                BlockCache::new(&settings(16 << 20), metrics.clone())
                    .await
                    .unwrap()
                    .unwrap(),
            );
            // The footer first, as readers do, then the whole file.
            let tail = collect(cache.read(file.clone(), len - 8..len)).await;
            assert_eq!(tail, data[data.len() - 8..]);
            assert_eq!(collect(cache.read(file.clone(), 0..len)).await, data);
            assert_eq!(metrics.upstream_requests.get(), gets, "file of {len} bytes");
            let keys = cache.keys_of(&file.path, &file.etag, len);
            assert_eq!(keys.len() as u64, gets);
            assert_eq!(keys.iter().map(|k| k.len).sum::<u64>(), len);
        }
    });
}

/// Keys name byte ranges, so a disk cache written with another block size is never read as
/// this one's blocks; keys of the older layout (block numbers) do not decode.
#[test]
fn keys_name_byte_ranges_and_the_older_layout_does_not_decode() {
    let key = BlockKey {
        path: Arc::from("t/_data/part-1.parquet"),
        etag: Arc::from("\"e1\""),
        start: 1 << 20,
        len: 300_000,
    };
    let mut buf = Vec::new();
    key.encode(&mut buf).unwrap();
    assert_eq!(BlockKey::decode(&mut buf.as_slice()).unwrap(), key);
    let mut old = Vec::new();
    put_str(&mut old, &key.path).unwrap();
    put_str(&mut old, &key.etag).unwrap();
    1u64.encode(&mut old).unwrap();
    assert!(BlockKey::decode(&mut old.as_slice()).is_err());
}
