use super::*;

fn file(path: String, version: u64) -> (String, Arc<AddFile>) {
    let f = AddFile {
        path: path.clone(),
        partition_values: BTreeMap::new(),
        size: 1,
        rows: 1,
        modification_time: 0,
        stats: BTreeMap::new(),
        seq: None,
        merged: false,
        added_version: Some(version),
    };
    (path, Arc::new(f))
}

fn named(chunks: &[Vec<&AddFile>]) -> Vec<Vec<(String, i64)>> {
    chunks
        .iter()
        .map(|c| c.iter().map(|f| (f.path.clone(), version_of(f))).collect())
        .collect()
}

#[test]
fn an_insert_writes_its_own_files_and_at_most_the_one_chunk_a_cut_closes() {
    let mut files = BTreeMap::new();
    let mut before: Vec<Vec<(String, i64)>> = vec![];
    let (mut written, mut inserted) = (0, 0);
    for v in 1..=200u64 {
        for i in 0..24 {
            let (k, f) = file(format!("_data/m={}/part-{v}-{i}.parquet", i % 12), v);
            files.insert(k, f);
        }
        let now = named(&chunks(&files));
        // Every alive file exactly once, in (version, path) order.
        let flat: Vec<_> = now.iter().flatten().cloned().collect();
        assert_eq!(flat.len(), files.len());
        assert!(flat
            .windows(2)
            .all(|w| (w[0].1, &w[0].0) < (w[1].1, &w[1].0)));
        let new: Vec<_> = now.iter().filter(|c| !before.contains(c)).collect();
        // At most one new chunk holds earlier versions' files: the one a cut among
        // this insert's files closed, which folds the previous open tail.
        let folding: Vec<_> = new
            .iter()
            .filter(|c| c.iter().any(|(_, fv)| *fv != v as i64))
            .collect();
        assert!(folding.len() <= 1, "version {v}: {folding:?}");
        // Chunks before the previous open tail are kept as they were.
        let kept = now.iter().filter(|c| before.contains(c)).count();
        assert!(kept + new.len() == now.len());
        written += new.iter().map(|c| c.len()).sum::<usize>();
        inserted += 24;
        before = now;
    }
    // Cutting the open tail by version halves the entries a commit writes: rewriting the
    // tail whole would write about CHUNK_FILES + 24 a commit.
    let per_commit = written as f64 / 200.0;
    assert!(
        per_commit < (CHUNK_FILES as f64 + 24.0) * 0.7,
        "{per_commit} entries a commit for {inserted} files"
    );
    assert!(before.len() <= files.len() / CHUNK_FILES as usize * 2 + 6);
}

proptest::proptest! {
    /// Chunks found from the memo of the version before are the chunks of every file:
    /// over inserts, and commits that also remove files (a merge, a delete), which fall
    /// back to every file.
    #[test]
    fn chunks_from_the_memo_are_the_chunks_of_every_file(
        commits in proptest::collection::vec((0usize..40, 0usize..4), 1..60),
    ) {
        let location = TableLocation::memory("t");
        let schema = crate::schema::TableSchema::new(vec![]);
        let layout = Layout::new(&location, &schema, "{}".into(), 0, vec![], &Default::default()).unwrap();
        let mut files = BTreeMap::new();
        let mut memo: Option<ChunkMemo> = None;
        for (v, (added, removed)) in commits.iter().enumerate() {
            let v = v as u64 + 1;
            // A remove takes every 7th alive file, from a different offset each time.
            if *removed == 0 {
                let gone: Vec<String> = files.keys().skip(v as usize % 7).step_by(7).cloned().collect();
                for k in gone {
                    files.remove(&k);
                }
            }
            for i in 0..*added {
                let (k, f) = file(format!("_data/m={}/part-{v}-{i}.parquet", i % 5), v);
                files.insert(k, f);
            }
            let (got, next) = chunks_named(&layout, v, &files, memo.as_ref());
            let expected: Vec<(String, Vec<String>)> = chunks(&files)
                .iter()
                .map(|c| (chunk_key(&layout, c).0, c.iter().map(|f| f.path.clone()).collect()))
                .collect();
            let got: Vec<(String, Vec<String>)> = got
                .iter()
                .map(|c| (c.named.0.clone(), c.files.resolve(&files).iter().map(|f| f.path.clone()).collect()))
                .collect();
            proptest::prop_assert_eq!(got, expected, "version {}", v);
            memo = Some(next);
        }
    }
}

proptest::proptest! {
    /// A manifest assembled from entries encoded one by one (and reused with another
    /// status) is byte for byte the one the crate's writer makes entry by entry, blocks
    /// included: entries of several versions (added and existing), null and absent
    /// partition values and statistics, chunks over several 16 kB blocks.
    #[test]
    fn manifests_from_encoded_entries_are_the_writers(
        files in proptest::collection::vec(
            (1u64..4, proptest::option::of(1u32..13), proptest::option::of("[a-z]{0,9}"),
             proptest::option::of((-1_000_000i64..1_000_000, 0i64..1_000_000)), 0u64..5),
            1..260,
        ),
    ) {
        use crate::log::ColumnStats;
        use serde_json::json;
        let location = TableLocation::memory("t");
        let schema = crate::schema::parse_schema(
            "id int64, name string, ts timestamp, amount decimal(10,2), day date",
        )
        .unwrap();
        let partition_by = crate::partition::parse_spec("month(ts) as m, name").unwrap();
        let spec = super::super::types::partition_spec(&schema, &partition_by).unwrap();
        let (schema_id, schema_json) =
            super::super::schema_with_id(super::super::types::schema_fields(&schema).unwrap());
        let layout = Layout::new(&location, &schema, schema_json.to_string(), schema_id, spec, &Default::default()).unwrap();
        let all: Vec<AddFile> = files
            .iter()
            .enumerate()
            .map(|(i, (v, month, name, bounds, nulls))| {
                let mut stats = BTreeMap::new();
                if let Some((lo, span)) = bounds {
                    let (hi, us) = (lo + span, 1_600_000_000_000_000 + lo * 1_000);
                    let ts = |us: i64| crate::write::timestamp_string(us, false);
                    let col = |min, max| ColumnStats { min: Some(min), max: Some(max), nulls: *nulls };
                    stats.insert("id".to_string(), col(json!(lo), json!(hi)));
                    stats.insert("ts".to_string(), col(json!(ts(us)), json!(ts(us + span))));
                    stats.insert("amount".to_string(), col(json!(format!("{}.{:02}", lo / 100, lo.abs() % 100)), json!("9999.99")));
                    stats.insert("day".to_string(), col(json!("2021-03-04"), json!("2021-04-05")));
                }
                if let Some(n) = name {
                    stats.insert("name".to_string(), ColumnStats { min: Some(json!(n)), max: Some(json!(format!("{n}zz"))), nulls: *nulls });
                }
                AddFile {
                    path: format!("_data/m={month:?}/part-{i:04}.parquet"),
                    partition_values: BTreeMap::from([
                        ("m".to_string(), month.map(|m| format!("2021-{m:02}"))),
                        ("name".to_string(), name.clone()),
                    ]),
                    size: 1_000 + i as u64,
                    rows: 10 + *nulls,
                    modification_time: 0,
                    stats,
                    seq: None,
                    merged: false,
                    added_version: Some(*v),
                }
            })
            .collect();
        let mut chunk: Vec<&AddFile> = all.iter().collect();
        chunk.sort_by(|a, b| (version_of(a), &a.path).cmp(&(version_of(b), &b.path)));
        let named = chunk_key(&layout, &chunk);
        let want = reference_manifest(&layout, &chunk, named.clone()).unwrap();
        let writer = entry_writer(&layout).unwrap();
        let encoded: Vec<EncodedEntry> =
            chunk.iter().map(|f| encode_entry(&layout, &writer, f).unwrap()).collect();
        let (info, got) = assemble_manifest(&layout, &encoded.iter().collect::<Vec<_>>(), named);
        proptest::prop_assert!(got == want, "{} bytes against {}", got.len(), want.len());
        let top = chunk.iter().map(|f| version_of(f)).max().unwrap();
        let added: Vec<&&AddFile> = chunk.iter().filter(|f| version_of(f) == top).collect();
        proptest::prop_assert_eq!(info.added_files as usize, added.len());
        proptest::prop_assert_eq!(info.existing_files as usize, chunk.len() - added.len());
        proptest::prop_assert_eq!(info.added_rows as u64, added.iter().map(|f| f.rows).sum::<u64>());
        proptest::prop_assert_eq!(info.length as usize, got.len());
    }
}

proptest::proptest! {
    /// Delete manifests assembled with the entries and manifests kept from the snapshots
    /// before are byte for byte those assembled from nothing, over a writer's successive
    /// snapshots (files added, kept, changed and dropped; entries going from `ADDED` to
    /// `EXISTING`): a manifest's name says its bytes. Together they list each delete file
    /// once, `ADDED` exactly in a manifest of the file's own sequence.
    #[test]
    fn delete_manifests_from_kept_entries_are_those_made_from_nothing(
        snapshots in proptest::collection::vec(
            proptest::collection::vec((0u64..400, 0u64..2), 0..300),
            1..6,
        ),
    ) {
        use super::super::deletes::DeleteFile;
        let location = TableLocation::memory("t");
        let layout = delete_layout(&location);
        let mut kept = DeleteEntries::default();
        let mut stored: HashMap<String, (ManifestInfo, Vec<u8>)> = HashMap::new();
        for (s, files) in snapshots.iter().enumerate() {
            let mut deletes: Vec<DeleteFile> = files
                .iter()
                // A key is a file: the same (k, generation) is the same entry in every
                // snapshot (reused), another generation a changed one (encoded again).
                .map(|&(k, generation)| delete_file(k, generation, (k % 4 + generation * 4 + 1) as i64))
                .collect();
            deletes.sort_by(|a, b| a.key.cmp(&b.key));
            deletes.dedup_by(|a, b| a.key == b.key);
            let got = assemble_delete_manifests(&layout, &deletes, &mut kept, |k| {
                stored.get(k).map(|(i, _)| i.clone())
            })
            .unwrap();
            let want =
                assemble_delete_manifests(&layout, &deletes, &mut DeleteEntries::default(), |_| None)
                    .unwrap();
            proptest::prop_assert_eq!(got.len(), want.len());
            // It keeps entries of these delete files only (a known manifest's entries only if
            // it had them: they are encoded again if that manifest ever changes).
            proptest::prop_assert!(kept.by_key.keys().all(|k| deletes.iter().any(|d| &d.key == k)));
            let mut listed: Vec<(String, super::super::deletes::Known)> = Vec::new();
            for ((info, bytes), (want_info, want_bytes)) in got.into_iter().zip(want) {
                let want_bytes = want_bytes.expect("made from nothing");
                proptest::prop_assert_eq!(&info.key, &want_info.key);
                let bytes = match bytes {
                    Some(b) => b,
                    None => stored[&info.key].1.clone(),
                };
                proptest::prop_assert!(bytes == want_bytes, "snapshot {}, {}", s, info.key);
                let records = avro_records("m", &bytes).unwrap();
                let entries = read_delete_manifest("m", &bytes).unwrap();
                for (r, (key, _)) in records.iter().zip(&entries) {
                    let d = deletes.iter().find(|d| &d.key == key).unwrap();
                    let added = i64::from(d.sequence == info.added_snapshot);
                    proptest::prop_assert_eq!(&r["status"], &Value::Int(added as i32));
                }
                listed.extend(entries);
                stored.insert(info.key.clone(), (info, bytes));
            }
            // Read back as written: rows, size and the paths' bounds (or none).
            listed.sort_by(|a, b| a.0.cmp(&b.0));
            let want_listed: Vec<(String, super::super::deletes::Known)> =
                deletes.iter().map(|d| (d.key.clone(), d.file.clone())).collect();
            proptest::prop_assert_eq!(listed, want_listed);
        }
    }
}

proptest::proptest! {
    /// A snapshot that adds delete files after all the others (an insert's, of its own
    /// sequence) extends the chunks assembled for the snapshot before, carried over instead of
    /// sorted, cut and named again; and the manifests are byte for byte those assembled from
    /// nothing, also when snapshots that drop or change delete files come between.
    #[test]
    fn delete_manifests_of_inserts_extend_the_snapshot_before(
        steps in proptest::collection::vec(
            (proptest::bool::weighted(0.75), proptest::collection::vec(0u64..400, 0..150)),
            1..8,
        ),
    ) {
        use super::super::deletes::DeleteFile;
        let location = TableLocation::memory("t");
        let layout = delete_layout(&location);
        let mut kept = DeleteEntries::default();
        let mut stored: HashMap<String, ManifestInfo> = HashMap::new();
        let mut deletes: Vec<DeleteFile> = Vec::new();
        for (s, (insert, ks)) in steps.iter().enumerate() {
            let s = s as u64;
            if *insert {
                // Keys of their own (generation), of a sequence above every other.
                let mut added: Vec<DeleteFile> =
                    ks.iter().map(|&k| delete_file(k, s + 2, 100 + s as i64)).collect();
                added.sort_by(|a, b| a.key.cmp(&b.key));
                added.dedup_by(|a, b| a.key == b.key);
                deletes.extend(added);
            } else {
                // A merge: the delete files of some keys go, one changes.
                let gone: std::collections::HashSet<u64> = ks.iter().copied().collect();
                deletes.retain(|d| !gone.iter().any(|k| d.key.contains(&format!("-{k:04}-"))));
                if let Some(d) = deletes.first_mut() {
                    d.file.rows += 1;
                }
            }
            let got = assemble_delete_manifests(&layout, &deletes, &mut kept, |k| {
                stored.get(k).cloned()
            })
            .unwrap();
            let want =
                assemble_delete_manifests(&layout, &deletes, &mut DeleteEntries::default(), |_| None)
                    .unwrap();
            proptest::prop_assert_eq!(got.len(), want.len());
            for ((info, bytes), (want_info, want_bytes)) in got.into_iter().zip(want) {
                proptest::prop_assert_eq!(format!("{info:?}"), format!("{want_info:?}"));
                if let Some(bytes) = bytes {
                    proptest::prop_assert!(Some(bytes) == want_bytes);
                }
                stored.insert(info.key.clone(), info);
            }
        }
        // A writer's inserts alone: each after the first extends the one before.
        if steps.iter().all(|(insert, _)| *insert) {
            proptest::prop_assert_eq!(kept.extended, steps.len() - 1);
        }
    }
}

/// A manifest layout for delete files of a month-partitioned table.
fn delete_layout(location: &TableLocation) -> Layout {
    let schema = crate::schema::parse_schema("id int64, ts timestamp").unwrap();
    let partition_by = crate::partition::parse_spec("month(ts) as m").unwrap();
    let spec = super::super::types::partition_spec(&schema, &partition_by).unwrap();
    let (schema_id, schema_json) =
        super::super::schema_with_id(super::super::types::schema_fields(&schema).unwrap());
    Layout::new(
        location,
        &schema,
        schema_json.to_string(),
        schema_id,
        spec,
        &Default::default(),
    )
    .unwrap()
}

fn delete_file(k: u64, generation: u64, sequence: i64) -> super::super::deletes::DeleteFile {
    super::super::deletes::DeleteFile {
        key: format!("metadata/neve-{k:04}-{generation}-deletes.parquet"),
        partition_values: std::sync::Arc::new(BTreeMap::from([(
            "m".to_string(),
            (!k.is_multiple_of(5)).then(|| format!("2021-{:02}", k % 12 + 1)),
        )])),
        file: super::super::deletes::Known {
            rows: k * 7 + generation + 1,
            size: k * 56 + generation + 400,
            // One in three as a manifest written before bounds were lists it: none.
            paths: (!k.is_multiple_of(3)).then(|| {
                std::sync::Arc::new((
                    format!("file:///t/_data/m=x/part-{k:04}-a.parquet"),
                    format!("file:///t/_data/m=x/part-{k:04}-{generation}-z.parquet"),
                ))
            }),
        },
        sequence,
    }
}

/// A delete manifest's name covers its entries' `file_path` bounds: the same delete file with
/// them and without them (as read back from a manifest written before they were) makes two
/// manifests, so one name never stands for two contents; an entry kept without them is not
/// reused for one with them; and they read back as written.
#[test]
fn delete_manifests_are_named_by_their_bounds_too() {
    let location = TableLocation::memory("t");
    let layout = delete_layout(&location);
    let with = vec![delete_file(1, 0, 1)];
    assert!(with[0].file.paths.is_some());
    let mut without = with.clone();
    without[0].file.paths = None;
    let fresh = |d: &[super::super::deletes::DeleteFile]| {
        let mut chunks =
            assemble_delete_manifests(&layout, d, &mut DeleteEntries::default(), |_| None).unwrap();
        assert_eq!(chunks.len(), 1);
        let (info, bytes) = chunks.remove(0);
        (info.key, bytes.unwrap())
    };
    let (a, b) = (fresh(&with), fresh(&without));
    assert_ne!(a.0, b.0);
    assert_ne!(a.1, b.1);
    let back = read_delete_manifest("m", &a.1).unwrap();
    assert_eq!(back[0].1.paths, with[0].file.paths);
    assert_eq!(read_delete_manifest("m", &b.1).unwrap()[0].1.paths, None);
    let mut kept = DeleteEntries::default();
    assemble_delete_manifests(&layout, &without, &mut kept, |_| None).unwrap();
    let again = assemble_delete_manifests(&layout, &with, &mut kept, |_| None).unwrap();
    assert_eq!(
        (&again[0].0.key, again[0].1.as_ref().unwrap()),
        (&a.0, &a.1)
    );
}

/// An insert that adds delete files of its own version writes the manifests they fall in,
/// not the delete files of the versions before: about two chunks' entries besides its own.
#[test]
fn an_insert_writes_the_delete_manifests_of_its_own_delete_files() {
    let location = TableLocation::memory("t");
    let layout = delete_layout(&location);
    let mut kept = DeleteEntries::default();
    let mut known: HashMap<String, ManifestInfo> = HashMap::new();
    let mut deletes = Vec::new();
    let mut written_entries = Vec::new();
    for v in 1..=30i64 {
        deletes.extend((0..132).map(|p| delete_file(v as u64 * 1000 + p, 0, v)));
        let chunks =
            assemble_delete_manifests(&layout, &deletes, &mut kept, |k| known.get(k).cloned())
                .unwrap();
        let written: i32 = chunks
            .iter()
            .filter(|(_, b)| b.is_some())
            .map(|(i, _)| i.added_files + i.existing_files)
            .sum();
        written_entries.push(written);
        for (info, _) in chunks {
            known.insert(info.key.clone(), info);
        }
    }
    // Its own 132, and the files after the last cut before it (folded into a chunk when a
    // cut falls among its own): about a chunk more on average, against the 132·v entries of
    // one manifest listing every delete file (61,380 over the 30 inserts).
    assert!(
        written_entries.iter().all(|&n| n >= 132),
        "{written_entries:?}"
    );
    let total: i32 = written_entries.iter().sum();
    assert!(
        total < 30 * (132 + 2 * CHUNK_FILES as i32),
        "{written_entries:?}"
    );
    assert_eq!(deletes.len(), 30 * 132);
}
