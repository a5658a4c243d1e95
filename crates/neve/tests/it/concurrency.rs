//! Many processes at once, and processes killed mid-insert.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::Duration;

use rand::{Rng, SeedableRng};

use crate::common::{
    info, int_counts, local_table, neve, neve_bin, neve_ok, read_files, s3_table, table,
    write_ndjson,
};

const PROCESSES: u32 = 8;
const COMMITS_EACH: i64 = 50;
const ROWS_EACH: i64 = 3;

/// 8 processes × 50 `neve insert` each: every row once, versions contiguous, no commit lost.
async fn many_processes(addr: &str) {
    neve_ok(&["create", addr, "--partition-by", "month(ts)"]);
    let dir = tempfile::tempdir().unwrap();
    let mut threads = Vec::new();
    for w in 0..PROCESSES {
        let addr = addr.to_string();
        let dir = dir.path().to_path_buf();
        threads.push(std::thread::spawn(move || {
            for c in 0..COMMITS_EACH {
                let base = (w as i64 * COMMITS_EACH + c) * ROWS_EACH;
                let f = dir.join(format!("w{w}-c{c}.ndjson"));
                write_ndjson(&f, base..base + ROWS_EACH, w);
                let out = neve(&["insert", &addr, f.to_str().unwrap(), "--json"]);
                assert!(
                    out.status.success(),
                    "writer {w} commit {c}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    let total = PROCESSES as i64 * COMMITS_EACH;
    let t = table(addr);
    let history = t.history(None).await.unwrap();
    assert_eq!(
        history.iter().map(|c| c.version).collect::<Vec<_>>(),
        (0..=total as u64).collect::<Vec<_>>(),
        "versions contiguous"
    );
    assert_eq!(
        history
            .iter()
            .filter(|c| c.info.operation == "INSERT")
            .count() as i64,
        total,
        "no commit lost"
    );
    let writers: BTreeSet<&str> = history.iter().map(|c| c.info.writer.as_str()).collect();
    assert!(
        writers.len() as i64 > total / 2,
        "commits came from many processes"
    );
    let snap = t.snapshot().await.unwrap();
    assert_eq!(snap.rows() as i64, total * ROWS_EACH);
    let counts = int_counts(&read_files(t.location(), &snap).await, "id");
    assert_eq!(counts.len() as i64, total * ROWS_EACH, "every row present");
    assert!(counts.values().all(|&c| c == 1), "no row duplicated");
    assert_eq!(*counts.keys().next().unwrap(), 0);
    assert_eq!(*counts.keys().last().unwrap(), total * ROWS_EACH - 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_processes_local() {
    let (_d, addr) = local_table("many");
    many_processes(&addr).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_processes_minio() {
    many_processes(&s3_table("many")).await;
}

/// Kill inserts at random moments; the table always opens with whole commits only.
async fn killed_mid_insert(addr: &str) {
    neve_ok(&[
        "create",
        addr,
        "--partition-by",
        "month(trip_start_timestamp)",
        "--sort-by",
        "payment_type",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("big.csv");
    neve_ok(&["bench", "gen", input.to_str().unwrap(), "--rows", "60000"]);
    // Time one full insert to spread the kills over it.
    let started = std::time::Instant::now();
    neve_ok(&[
        "insert",
        addr,
        input.to_str().unwrap(),
        "--chunk-rows",
        "20000",
    ]);
    let full = started.elapsed();
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut rows = 60_000u64;
    let mut version = 1u64;
    for _ in 0..6 {
        let mut child = Command::new(neve_bin())
            .args([
                "insert",
                addr,
                input.to_str().unwrap(),
                "--chunk-rows",
                "20000",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let delay = full.mul_f64(rng.random_range(0.1..1.1));
        std::thread::sleep(delay);
        let _ = child.kill(); // SIGKILL
        let finished = child.wait().unwrap().success();
        let i = info(addr);
        let v = i["version"].as_u64().unwrap();
        let r = i["rows"].as_u64().unwrap();
        if v == version + 1 {
            rows += 60_000;
            version = v;
        } else {
            assert!(!finished, "a finished insert must be committed");
            assert_eq!(v, version, "no partial commit");
        }
        assert_eq!(r, rows, "only whole inserts are visible");
    }
    // Crash points: after the data is written, and right after the commit PUT.
    let out = Command::new(neve_bin())
        .args(["insert", addr, input.to_str().unwrap()])
        .env("NEVE_FAILPOINT", "insert:after-data")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(
        info(addr)["version"].as_u64().unwrap(),
        version,
        "crash before the commit: nothing visible"
    );
    let out = Command::new(neve_bin())
        .args(["insert", addr, input.to_str().unwrap()])
        .env("NEVE_FAILPOINT", "commit:after-put")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let i = info(addr);
    assert_eq!(
        i["version"].as_u64().unwrap(),
        version + 1,
        "crash after the commit PUT: the commit stands"
    );
    assert_eq!(i["rows"].as_u64().unwrap(), rows + 60_000);
    // The next insert works, and every referenced file is readable with its logged row count.
    neve_ok(&["insert", addr, input.to_str().unwrap()]);
    let t = table(addr);
    let snap = t.snapshot().await.unwrap();
    assert_eq!(snap.rows(), rows + 120_000);
    let batches = read_files(t.location(), &snap).await;
    assert_eq!(
        batches.iter().map(|b| b.num_rows() as u64).sum::<u64>(),
        rows + 120_000
    );
    tokio::time::sleep(Duration::from_millis(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_insert_local() {
    let (d, addr) = local_table("killed");
    killed_mid_insert(&addr).await;
    // A crash mid-PUT (its bytes staged, not yet linked into place) leaves the table as it
    // was and a staging file behind.
    let rows = info(&addr)["rows"].as_u64().unwrap();
    let data = tempfile::tempdir().unwrap();
    let input = data.path().join("small.csv");
    neve_ok(&["bench", "gen", input.to_str().unwrap(), "--rows", "1000"]);
    let out = Command::new(neve_bin())
        .args(["insert", &addr, input.to_str().unwrap()])
        .env("NEVE_FAILPOINT", "local-put:staged")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(info(&addr)["rows"].as_u64(), Some(rows));
    assert!(
        !staging_files(d.path()).is_empty(),
        "the crash left a staging file"
    );
    // What the crashes and kills left goes with gc; the table stays whole.
    let r: serde_json::Value =
        serde_json::from_str(&neve_ok(&["gc", &addr, "--grace", "0s", "--json"])).unwrap();
    assert_eq!(r["orphans_kept"].as_u64(), Some(0), "{r}");
    assert!(r["interrupted_uploads_deleted"].as_u64() >= Some(1), "{r}");
    assert_eq!(staging_files(d.path()), Vec::<std::path::PathBuf>::new());
    assert_eq!(info(&addr)["rows"].as_u64(), Some(rows));
}

/// The staging files (`<name>#<digits>`) under `dir`.
fn staging_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().to_string();
            if e.file_type().unwrap().is_dir() {
                todo.push(e.path());
            } else if let Some((_, digits)) = name.split_once('#') {
                if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                    found.push(e.path());
                }
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_insert_minio() {
    killed_mid_insert(&s3_table("killed")).await;
}
