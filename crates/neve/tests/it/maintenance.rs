//! Merge, GC, drop-partition and delete through the CLI, on a local folder and MinIO: what
//! they report, what they leave, their errors, a merge killed mid-way, and a torture test of
//! inserters, mergers, a GC loop and readers at once.

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use object_store::ObjectStoreExt;

use crate::common::{
    info, int_counts, local_table, neve, neve_bin, neve_ok, read_files, s3_table, table,
    write_ndjson,
};

fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// `neve gc` with no grace and no retention: everything unreferenced or removed goes.
fn gc_now(addr: &str) -> serde_json::Value {
    json(&neve_ok(&[
        "gc",
        addr,
        "--grace",
        "0s",
        "--retention",
        "0s",
        "--json",
    ]))
}

/// Every id of the table, read from its files: each must be there exactly once.
async fn ids(addr: &str) -> BTreeSet<i64> {
    let t = table(addr);
    let snap = t.snapshot().await.unwrap();
    let counts = int_counts(&read_files(t.location(), &snap).await, "id");
    let dup: Vec<_> = counts.iter().filter(|(_, c)| **c != 1).collect();
    assert!(dup.is_empty(), "duplicated rows: {dup:?}");
    counts.into_keys().collect()
}

/// Objects stored under `_data/`.
async fn stored_files(addr: &str) -> usize {
    use futures::TryStreamExt;
    let t = table(addr);
    let loc = t.location();
    let l: Vec<_> = loc
        .store
        .list(Some(&loc.child("_data")))
        .try_collect()
        .await
        .unwrap();
    l.len()
}

/// Twelve small inserts of 50 rows (ids 0..600) over 12 months.
fn load_small(addr: &str) {
    neve_ok(&[
        "create",
        addr,
        "--partition-by",
        "month(ts) as m",
        "--sort-by",
        "id",
    ]);
    let dir = tempfile::tempdir().unwrap();
    for i in 0..12 {
        let f = dir.path().join(format!("{i}.ndjson"));
        write_ndjson(&f, i * 50..(i + 1) * 50, 0);
        neve_ok(&["insert", addr, f.to_str().unwrap()]);
    }
}

async fn maintenance_cli(addr: &str) {
    load_small(addr);
    assert_eq!(info(addr)["files"].as_u64().unwrap(), 144);
    let all: BTreeSet<i64> = (0..600).collect();

    // Merge: a dry run writes nothing; the merge keeps every row once.
    let plan = json(&neve_ok(&["merge", addr, "--dry-run", "--json"]));
    assert_eq!(plan["groups"].as_array().unwrap().len(), 12);
    assert_eq!(info(addr)["version"].as_u64().unwrap(), 12);
    let r = json(&neve_ok(&["merge", addr, "--json"]));
    assert_eq!(r["files_in"], 144);
    assert_eq!(r["files_out"], 12);
    assert_eq!(r["rows"], 600);
    assert_eq!(r["partitions"], 12);
    let i = info(addr);
    assert_eq!(
        (i["files"].as_u64(), i["rows"].as_u64()),
        (Some(12), Some(600))
    );
    assert_eq!(ids(addr).await, all);
    let text = neve_ok(&["merge", addr]);
    assert!(text.contains("nothing to merge"), "{text}");

    // Drop a month: metadata only, time travel still sees it.
    let r = json(&neve_ok(&["drop-partition", addr, "m=2021-01", "--json"]));
    assert_eq!(r["rows"], 50);
    let after_drop = info(addr)["version"].as_u64().unwrap();
    let back = neve_ok(&[
        "sql",
        "SELECT count(*) AS n FROM t",
        "--table",
        &format!("t={addr}"),
        "--as-of",
        &(after_drop - 1).to_string(),
        "--format",
        "csv",
    ]);
    assert_eq!(back.lines().nth(1), Some("600"), "{back}");

    // Delete by predicate: only matching rows go.
    let r = json(&neve_ok(&[
        "delete",
        addr,
        "--where",
        "id % 3 = 0 AND id >= 300",
        "--json",
    ]));
    assert_eq!(
        r["rows_deleted"], 75,
        "100 ids, 25 of them in the dropped month"
    );
    let expect: BTreeSet<i64> = all
        .iter()
        .copied()
        .filter(|id| id % 12 != 0)
        .filter(|id| !(id % 3 == 0 && *id >= 300))
        .collect();
    assert_eq!(ids(addr).await, expect);

    // Bad input: clear errors, exit codes, nothing committed.
    let v = info(addr)["version"].as_u64().unwrap();
    for (args, code, says) in [
        (vec!["delete", addr, "--where", "nosuch = 1"], 65, "nosuch"),
        (vec!["delete", addr, "--where", "id +"], 65, "SQL syntax"),
        (vec!["delete", addr, "--where", "id + 1"], 65, "boolean"),
        (
            vec!["delete", addr, "--where", "id > (SELECT max(id) FROM t)"],
            65,
            "with no subquery",
        ),
        (vec!["drop-partition", addr, "m=1999-01"], 66, "m=2021-02"),
        (
            vec!["merge", addr, "--partition", "m=1999-01"],
            66,
            "no partition",
        ),
        (vec!["merge", addr, "--target-file-size", "big"], 64, "big"),
        (vec!["gc", addr, "--grace", "soon"], 64, "soon"),
    ] {
        let out = neve(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert_eq!(info(addr)["version"].as_u64().unwrap(), v);

    // GC: within the grace nothing goes; with no grace and no retention the removed files go,
    // and the table still reads whole.
    let before = stored_files(addr).await;
    let r = json(&neve_ok(&["gc", addr, "--json"]));
    assert_eq!(r["tombstones_deleted"], 0);
    assert_eq!(stored_files(addr).await, before);
    let r = gc_now(addr);
    let alive = info(addr)["files"].as_u64().unwrap() as usize;
    assert_eq!(
        r["tombstones_deleted"].as_u64().unwrap() as usize,
        before - alive
    );
    assert_eq!(stored_files(addr).await, alive);
    assert_eq!(ids(addr).await, expect);
    // Idempotent.
    let r = gc_now(addr);
    assert_eq!(
        (
            r["tombstones_deleted"].as_u64(),
            r["orphans_deleted"].as_u64()
        ),
        (Some(0), Some(0))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_cli_local() {
    let (_d, addr) = local_table("maint");
    maintenance_cli(&addr).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_cli_minio() {
    maintenance_cli(&s3_table("maint")).await;
}

/// A merge killed after writing its files, and one killed at a random moment: the table is
/// intact, the orphans go with the next GC after the grace, and the next merge works.
async fn killed_merge(addr: &str) {
    load_small(addr);
    let all: BTreeSet<i64> = (0..600).collect();
    let out = Command::new(neve_bin())
        .args(["merge", addr])
        .env("NEVE_FAILPOINT", "merge:after-data")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let i = info(addr);
    assert_eq!(
        (i["version"].as_u64(), i["files"].as_u64()),
        (Some(12), Some(144))
    );
    assert_eq!(ids(addr).await, all);
    assert_eq!(
        stored_files(addr).await,
        144 + 12,
        "the killed merge left its outputs"
    );

    // A SIGKILL at a random point of a merge: either it committed or nothing is visible.
    let mut child = Command::new(neve_bin())
        .args(["merge", addr])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(150));
    let _ = child.kill();
    let finished = child.wait().unwrap().success();
    let v = info(addr)["version"].as_u64().unwrap();
    assert!(v == 12 || v == 13, "version {v}");
    if finished {
        assert_eq!(v, 13);
    }
    assert_eq!(ids(addr).await, all);

    // Orphans are kept within the grace, deleted after it.
    let r = json(&neve_ok(&["gc", addr, "--json"]));
    assert_eq!(r["orphans_deleted"], 0);
    assert!(r["orphans_kept"].as_u64().unwrap() >= 12);
    let r = json(&neve_ok(&["gc", addr, "--grace", "0s", "--json"]));
    assert!(r["orphans_deleted"].as_u64().unwrap() >= 12);
    let t = table(addr);
    let snap = t.snapshot().await.unwrap();
    assert_eq!(
        stored_files(addr).await,
        snap.files.len() + snap.tombstones.len(),
        "only files the log names are left"
    );
    neve_ok(&["merge", addr]);
    assert_eq!(info(addr)["files"].as_u64().unwrap(), 12);
    assert_eq!(ids(addr).await, all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_merge_local() {
    let (_d, addr) = local_table("kmerge");
    killed_merge(&addr).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_merge_minio() {
    killed_merge(&s3_table("kmerge")).await;
}

/// Two mergers and a GC loop on `addr` until `deadline`; the GC adds what it deleted to
/// `gc_deleted`.
pub(crate) fn spawn_maintenance(
    addr: &str,
    deadline: Instant,
    gc_deleted: Arc<AtomicU64>,
) -> Vec<std::thread::JoinHandle<String>> {
    let mut threads = Vec::new();
    for m in 0..2 {
        let addr = addr.to_string();
        threads.push(std::thread::spawn(move || {
            let (mut ok, mut conflicts) = (0, 0);
            while Instant::now() < deadline {
                let out = neve(&["merge", &addr, "--min-files", "2", "--json"]);
                match out.status.code() {
                    Some(0) => ok += 1,
                    Some(75) => conflicts += 1,
                    _ => panic!("merge: {}", String::from_utf8_lossy(&out.stderr)),
                }
                std::thread::sleep(Duration::from_millis(300));
            }
            format!("merger {m}: {ok} merges, {conflicts} lost to a concurrent merge")
        }));
    }
    let addr = addr.to_string();
    threads.push(std::thread::spawn(move || {
        let mut runs = 0;
        while Instant::now() < deadline {
            let out = neve_ok(&["gc", &addr, "--grace", "15s", "--retention", "0s", "--json"]);
            let r = json(&out);
            gc_deleted.fetch_add(
                r["tombstones_deleted"].as_u64().unwrap()
                    + r["log_entries_deleted"].as_u64().unwrap(),
                Ordering::SeqCst,
            );
            runs += 1;
            std::thread::sleep(Duration::from_secs(1));
        }
        format!("gc: {runs} runs")
    }));
    threads
}

/// Join every thread, printing their summaries; re-raise the first panic (after telling the
/// others to stop through `stop`).
pub(crate) fn join_all(threads: Vec<std::thread::JoinHandle<String>>, stop: &AtomicBool) {
    let mut failures = Vec::new();
    for t in threads {
        match t.join() {
            Ok(summary) => eprintln!("torture: {summary}"),
            Err(e) => {
                stop.store(true, Ordering::SeqCst);
                failures.push(e);
            }
        }
    }
    if let Some(e) = failures.pop() {
        std::panic::resume_unwind(e);
    }
}

pub(crate) fn torture_secs() -> u64 {
    std::env::var("NEVE_TORTURE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40)
}

/// Three inserters, two mergers, a GC loop and two readers on one MinIO table for a bounded
/// time (NEVE_TORTURE_SECS, 40 s by default). At the end the table holds exactly the
/// acknowledged inserts; no reader failed or saw a duplicate or fewer rows than were
/// acknowledged when it started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn torture_minio() {
    let secs = torture_secs();
    let addr = s3_table("torture");
    neve_ok(&[
        "create",
        &addr,
        "--partition-by",
        "month(ts) as m",
        "--sort-by",
        "id",
        "--set",
        "checkpoint_interval=10",
    ]);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(BTreeSet::<i64>::new()));
    let acked_rows = Arc::new(AtomicU64::new(0));
    let dir = tempfile::tempdir().unwrap();
    let mut threads: Vec<std::thread::JoinHandle<String>> = Vec::new();

    for w in 0..3u32 {
        let (addr, acked, acked_rows, dir) = (
            addr.clone(),
            acked.clone(),
            acked_rows.clone(),
            dir.path().to_path_buf(),
        );
        threads.push(std::thread::spawn(move || {
            let mut n = 0i64;
            while Instant::now() < deadline {
                let base = w as i64 * 1_000_000 + n * 40;
                let f = dir.join(format!("w{w}-{n}.ndjson"));
                write_ndjson(&f, base..base + 40, w);
                let out = neve(&["insert", &addr, f.to_str().unwrap()]);
                assert!(
                    out.status.success(),
                    "insert: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                acked.lock().unwrap().extend(base..base + 40);
                acked_rows.fetch_add(40, Ordering::SeqCst);
                n += 1;
            }
            format!("inserter {w}: {n} inserts")
        }));
    }
    let gc_deleted = Arc::new(AtomicU64::new(0));
    threads.extend(spawn_maintenance(&addr, deadline, gc_deleted.clone()));
    for r in 0..2 {
        let (addr, acked_rows, stop) = (addr.clone(), acked_rows.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut queries = 0;
            while Instant::now() < deadline && !stop.load(Ordering::SeqCst) {
                let floor = acked_rows.load(Ordering::SeqCst);
                if floor == 0 {
                    // No schema before the first insert.
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
                let out = neve(&[
                    "sql",
                    "SELECT count(*) AS n, count(DISTINCT id) AS d FROM t",
                    "--table",
                    &format!("t={addr}"),
                    "--format",
                    "json",
                ]);
                assert!(
                    out.status.success(),
                    "reader {r}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let v = json(&String::from_utf8_lossy(&out.stdout));
                let (n, d) = (v[0]["n"].as_u64().unwrap(), v[0]["d"].as_u64().unwrap());
                assert_eq!(n, d, "reader {r} saw duplicated rows");
                assert!(
                    n >= floor,
                    "reader {r} saw {n} rows, {floor} were acknowledged before it started"
                );
                queries += 1;
            }
            format!("reader {r}: {queries} queries")
        }));
    }
    join_all(threads, &stop);
    let expected = acked.lock().unwrap().clone();
    assert!(expected.len() > 100, "inserts ran");
    assert_eq!(ids(&addr).await, expected, "exactly the acknowledged rows");
    let history = table(&addr).history(None).await.unwrap();
    assert!(
        history.iter().any(|c| c.info.operation == "MERGE"),
        "merges committed"
    );
    assert!(
        gc_deleted.load(Ordering::SeqCst) > 0,
        "the GC deleted files or log entries"
    );
    // Every file the log names is there (read_files above read them all).
    let t = table(&addr);
    let snap = t.snapshot().await.unwrap();
    for f in snap.files.values() {
        t.location()
            .store
            .head(&t.location().child(&f.path))
            .await
            .unwrap();
    }
}
