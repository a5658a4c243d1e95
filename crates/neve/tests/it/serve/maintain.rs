//! Maintenance inside and beside the server: background merges, `neve maintain`, and two
//! servers merging one table while both ingest.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_server_merges_small_files_in_the_background() {
    let (w, table) = warehouse();
    let s = merging_server(&w);
    let c = client();
    create(&c, &s.url, "t", "events").await;
    // Sequential requests: one flush each, so each partition gets a file per request.
    for r in 0..6u64 {
        let (st, v) = insert(&c, &s.url, "t", "events", rows(r * 30, 30), None).await;
        assert_eq!(st, 200, "{v}");
    }
    let mut merged = false;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if info(&table)["files"].as_u64().unwrap() <= 3 {
            merged = true;
            break;
        }
    }
    assert!(merged, "small files merged: {}", info(&table));
    assert_eq!(counts(&table), (180, 180));
    let metrics = metrics_text(&client(), &s.url).await;
    assert!(metric(&metrics, "neve_merges_total") > 0.0, "{metrics}");
}

/// The background gc counts what it deletes by kind: an orphan and, on a local folder, the
/// staging file of an upload a crash cut off, each once past the grace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_gc_counts_what_it_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().display().to_string();
    let s = merging_server(&w);
    let c = client();
    create(&c, &s.url, "t", "events").await;
    let (st, v) = insert(&c, &s.url, "t", "events", rows(0, 30), None).await;
    assert_eq!(st, 200, "{v}");
    let data = dir.path().join("events/_data");
    let an_hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    let orphan = data.join("part-orphan.parquet");
    let staging = data.join("part-cut.parquet#4294967297");
    for (p, n) in [(&orphan, 100), (&staging, 1000)] {
        std::fs::write(p, vec![0u8; n]).unwrap();
        std::fs::File::options()
            .write(true)
            .open(p)
            .unwrap()
            .set_modified(an_hour_ago)
            .unwrap();
    }
    let mut metrics = String::new();
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        metrics = metrics_text(&c, &s.url).await;
        if metrics.contains("kind=\"interrupted_upload\"") && metrics.contains("kind=\"orphan\"") {
            break;
        }
    }
    let deleted = |kind: &str| {
        metric(
            &metrics,
            &format!("neve_gc_deleted_files_total{{kind=\"{kind}\"}}"),
        )
    };
    assert_eq!(
        (deleted("orphan"), deleted("interrupted_upload")),
        (1.0, 1.0),
        "{metrics}"
    );
    assert!(
        metric(&metrics, "neve_gc_deleted_bytes_total") >= 1100.0,
        "{metrics}"
    );
    assert!(!orphan.exists() && !staging.exists());
    assert!(
        !metrics.contains("neve_maintenance_failures_total{"),
        "{metrics}"
    );
    assert_eq!(counts(&format!("{w}/events")), (30, 30));
}

#[test]
fn neve_maintain_merges_every_table_of_a_warehouse() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().display().to_string();
    let data = dir.path().join("rows.ndjson");
    for name in ["a", "ns/b"] {
        let t = format!("{w}/{name}");
        neve_ok(&["create", &t, "--sort-by", "id"]);
        for r in 0..4u64 {
            std::fs::write(&data, rows(r * 10, 10)).unwrap();
            neve_ok(&["insert", &t, data.to_str().unwrap()]);
        }
    }
    let out = neve_ok(&[
        "maintain",
        "--warehouse",
        &w,
        "--once",
        "--merge-min-files",
        "2",
    ]);
    assert!(out.contains("maintained 2 tables"), "{out}");
    for name in ["a", "ns/b"] {
        let t = format!("{w}/{name}");
        assert_eq!(info(&t)["files"], 1, "{name}");
        assert_eq!(counts(&t), (40, 40));
    }
    // A worker's grace is checked as the server's is: a short one would take files a server
    // is about to commit.
    let out = crate::common::neve(&["maintain", "--warehouse", &w, "--once", "--gc-grace", "1s"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{err}");
    assert!(err.contains("gc_grace (1s) must be at least 10s"), "{err}");
    // A server's file that is open only with `--token` is a worker's too: the worker answers
    // on no port, so the server's ports are not its to check.
    let config = dir.path().join("neve.toml");
    std::fs::write(&config, "listen = \"0.0.0.0:8080\"\n").unwrap();
    let cfg = config.to_str().unwrap();
    let out = neve_ok(&["maintain", "--config", cfg, "--warehouse", &w, "--once"]);
    assert!(out.contains("maintained 2 tables"), "{out}");
    // A table that cannot be read: the others are maintained, and the run says it failed.
    let broken = dir.path().join("broken/_log");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("00000000000000000000.json"), "not json").unwrap();
    // It will fail again until someone repairs it: 70, not 75 (run it again).
    let out = crate::common::neve(&["maintain", "--warehouse", &w, "--once"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(70), "{err}");
    assert!(err.contains("maintenance failed on 1 of 3 tables"), "{err}");
    assert!(err.contains("1 will fail again until fixed"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("maintained 3 tables"));
}

/// Two servers ingest into one table while both run maintenance on it, by the table's own
/// policy (the config's would never merge): no row lost or doubled, small files merged.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_servers_merge_by_the_table_policy_while_ingesting() {
    let (w, table) = warehouse();
    let args = [
        "--token",
        "t",
        "--maintenance-interval",
        "1s",
        "--merge-min-files",
        "1000",
    ];
    let servers = [ServerProc::start(&w, &args), ServerProc::start(&w, &args)];
    let c = client();
    let r = c
        .put(format!("{}/v1/tables/events", servers[0].url))
        .bearer_auth("t")
        .body(r#"{"partition_by": "identity(region)", "settings": {"merge_min_files": "2"}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    // Set later, through the log: every server reads it from there. The grace must outlast
    // any flush (write to commit): gc must not take a file an insert is about to commit.
    neve_ok(&["alter", &table, "set", "gc_grace=5s"]);
    let meta = info(&table);
    assert_eq!(meta["settings"]["mergeMinFiles"], 2, "{meta}");
    assert_eq!(meta["settings"]["gcGraceSeconds"], 5, "{meta}");
    let bad = crate::common::neve(&["alter", &table, "set", "merge_min_files=1"]);
    assert!(!bad.status.success());

    let (clients, requests, per) = (8u64, 40u64, 10u64);
    let mut tasks = Vec::new();
    for k in 0..clients {
        let (c, url) = (c.clone(), servers[k as usize % 2].url.clone());
        tasks.push(tokio::spawn(async move {
            for r in 0..requests {
                let first = (k * requests + r) * per;
                let (st, v) = insert(&c, &url, "t", "events", rows(first, per), None).await;
                assert_eq!(st, 200, "{v}");
                // Spread the load over several maintenance rounds.
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let total = clients * requests * per;
    let mut files = u64::MAX;
    for _ in 0..60 {
        files = info(&table)["files"].as_u64().unwrap();
        if files <= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(files <= 3, "small files merged: {}", info(&table));
    assert_eq!(
        counts(&table),
        (total, total),
        "every acknowledged row once"
    );
    let mut merges = 0.0;
    for s in &servers {
        merges += metric(&metrics_text(&c, &s.url).await, "neve_merges_total");
    }
    assert!(merges >= 2.0, "{merges} merges");
}

/// A dedicated worker exports what it does: `neve maintain --metrics-listen` serves
/// `/metrics`, where its merges are counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_maintain_worker_serves_its_metrics() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().display().to_string();
    let t = format!("{w}/a");
    let data = dir.path().join("rows.ndjson");
    neve_ok(&["create", &t, "--sort-by", "id"]);
    for r in 0..3u64 {
        std::fs::write(&data, rows(r * 10, 10)).unwrap();
        neve_ok(&["insert", &t, data.to_str().unwrap()]);
    }
    let mut child = Command::new(crate::common::neve_bin())
        .args([
            "maintain",
            "--warehouse",
            &w,
            "--metrics-listen",
            "127.0.0.1:0",
            "--maintenance-interval",
            "1s",
            "--merge-min-files",
            "2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("neve maintain metrics on ")
        .unwrap_or_else(|| panic!("{line}"))
        .to_string();
    let c = client();
    let mut merges = 0.0;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let text = c.get(&url).send().await.unwrap().text().await.unwrap();
        merges = metric(&text, "neve_merges_total");
        if merges > 0.0 {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(merges > 0.0, "no merge counted");
    assert_eq!(info(&t)["files"], 1);
    assert_eq!(counts(&t), (30, 30));
}

/// A table another server or worker holds (its claim, docs/FORMAT.md) is left to it; workers
/// started together take turns, so none reads, merges and uploads the same files only to lose
/// the race to another.
#[test]
fn maintain_workers_take_turns_on_a_table() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().display().to_string();
    let t = format!("{w}/a");
    let data = dir.path().join("rows.ndjson");
    neve_ok(&["create", &t, "--sort-by", "id"]);
    // Enough rows that a merge takes a while: workers started together would overlap.
    let per = 20_000u64;
    for r in 0..6u64 {
        std::fs::write(&data, rows(r * per, per)).unwrap();
        neve_ok(&["insert", &t, data.to_str().unwrap()]);
    }
    // Held elsewhere: this minute's claim and the next one's, so the run below falls in one.
    let claims = dir.path().join("a/_maintenance");
    std::fs::create_dir_all(&claims).unwrap();
    let minute = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        / 60_000;
    for m in [minute, minute + 1] {
        std::fs::write(claims.join(format!("claim-{m}")), "{}").unwrap();
    }
    let once = [
        "maintain",
        "--warehouse",
        &w,
        "--once",
        "--merge-min-files",
        "2",
    ];
    let out = neve_ok(&once);
    assert!(
        out.contains("maintained 1 tables (1 by another server or worker at the time)"),
        "{out}"
    );
    assert_eq!(info(&t)["files"], 6, "a held table is not merged");
    std::fs::remove_dir_all(&claims).unwrap();

    let workers: Vec<_> = (0..4)
        .map(|_| {
            Command::new(neve_bin())
                .args(once)
                .env("NEVE_LOG", "info")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut logs = Vec::new();
    for w in workers {
        let o = w.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(o.status.success(), "{err}");
        logs.push(err);
    }
    // One worker merged; none merged the same files only to lose the race to another.
    let merged = logs.iter().filter(|l| l.contains(" merged ")).count();
    assert_eq!(merged, 1, "{logs:#?}");
    assert!(!logs.iter().any(|l| l.contains("lost a race")), "{logs:#?}");
    assert_eq!(info(&t)["files"], 1);
    assert_eq!(counts(&t), (6 * per, 6 * per));
    let r: serde_json::Value =
        serde_json::from_str(&neve_ok(&["gc", &t, "--dry-run", "--json"])).unwrap();
    assert_eq!(
        r["orphans_kept"].as_u64(),
        Some(0),
        "a merge lost a race: {r}"
    );
    // Each worker let go of its claim.
    let left: Vec<_> = std::fs::read_dir(&claims)
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}
