//! Stopping a loaded server: SIGTERM answers every accepted request, SIGKILL loses only
//! requests that were never answered.

use super::*;

/// Clients inserting request `r` (ids `r*per..`) until told to stop; returns what was acked
/// and what failed.
async fn load(url: String, token: &'static str, clients: u64, per: u64) -> (Vec<u64>, Vec<u64>) {
    let c = client();
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (c, url, next) = (c.clone(), url.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let (mut ok, mut failed) = (Vec::new(), Vec::new());
            loop {
                let r = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let sent = c
                    .post(format!("{url}/v1/tables/events/insert"))
                    .bearer_auth(token)
                    .body(rows(r * per, per))
                    .send()
                    .await;
                match sent {
                    Ok(resp) if resp.status() == 200 => ok.push(r),
                    Ok(resp) if resp.status() == 503 => {
                        failed.push(r);
                        break;
                    }
                    Ok(resp) => panic!("unexpected {}", resp.status()),
                    Err(_) => {
                        failed.push(r);
                        break;
                    }
                }
            }
            (ok, failed)
        }));
    }
    let (mut ok, mut failed) = (Vec::new(), Vec::new());
    for t in tasks {
        let (o, f) = t.await.unwrap();
        ok.extend(o);
        failed.extend(f);
    }
    (ok, failed)
}

/// `clients` loading `s` (requests of 10 rows) for 1.5 s, then SIGTERM: the server exits
/// cleanly; the requests acknowledged (some).
async fn load_then_terminate(s: ServerProc, clients: u64) -> Vec<u64> {
    let l = tokio::spawn(load(s.url.clone(), "t", clients, 10));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let status = tokio::task::spawn_blocking(move || s.terminate())
        .await
        .unwrap();
    assert!(status.success(), "{status}");
    let (ok, _failed) = l.await.unwrap();
    assert!(!ok.is_empty());
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_answers_every_accepted_request() {
    let (w, table) = warehouse();
    let s = ServerProc::start(&w, &["--token", "t"]);
    create(&client(), &s.url, "t", "events").await;
    let ok = load_then_terminate(s, 16).await;
    let present = rows_per_request(&table, 10);
    for r in &ok {
        assert_eq!(
            present.get(r),
            Some(&10),
            "acknowledged request {r} is present whole"
        );
    }
    // Nothing else was committed half: every present request is whole.
    assert!(present.values().all(|&n| n == 10), "{present:?}");
    // And none was committed unanswered: a request refused (503) or cut off at shutdown left
    // nothing; every one present was acknowledged.
    let acked: std::collections::HashSet<u64> = ok.iter().copied().collect();
    for r in present.keys() {
        assert!(
            acked.contains(r),
            "request {r} is present but was never acknowledged"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_loses_only_unanswered_requests() {
    let (w, table) = warehouse();
    let s = ServerProc::start(&w, &["--token", "t"]);
    create(&client(), &s.url, "t", "events").await;
    let l = tokio::spawn(load(s.url.clone(), "t", 16, 10));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    tokio::task::spawn_blocking(move || s.kill()).await.unwrap();
    let (ok, _) = l.await.unwrap();
    assert!(!ok.is_empty());
    // Restarted, the server serves the same table; every acknowledged row is there, and no
    // part of an unacknowledged flush is.
    let s2 = ServerProc::start(&w, &["--token", "t"]);
    let (st, _) = insert(
        &client(),
        &s2.url,
        "t",
        "events",
        rows(10_000_000, 10),
        None,
    )
    .await;
    assert_eq!(st, 200);
    let present = rows_per_request(&table, 10);
    for r in &ok {
        assert_eq!(
            present.get(r),
            Some(&10),
            "acknowledged request {r} is present"
        );
    }
    assert!(present.values().all(|&n| n == 10), "{present:?}");
}

/// With `[iceberg] sync = "after_answer"`, inserts are answered before their Iceberg metadata
/// is written; SIGTERM still leaves metadata that describes every commit, one snapshot each.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metadata_written_after_answering_is_complete_when_the_server_stops() {
    let (w, table) = warehouse();
    let dir = tempfile::tempdir().unwrap();
    let config = config_file(&dir, "[iceberg]\nsync = \"after_answer\"\n");
    let s = ServerProc::start(&w, &["--token", "t", "--config", &config]);
    let c = client();
    let r = c
        .put(format!("{}/v1/tables/events", s.url))
        .bearer_auth("t")
        .body(r#"{"partition_by": "identity(region)", "sort_by": ["id"], "settings": {"iceberg": "true"}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let ok = load_then_terminate(s, 8).await;
    let info: serde_json::Value =
        serde_json::from_str(&neve_ok(&["info", &table, "--json"])).unwrap();
    let latest = info["version"].as_u64().unwrap();
    assert!(latest >= 2, "{info}");
    // Nothing left to write: the server wrote the metadata of its last commits before exiting.
    let sync: serde_json::Value =
        serde_json::from_str(&neve_ok(&["iceberg", "sync", &table, "--json"])).unwrap();
    assert_eq!(sync["up_to_date"], true, "{sync}");
    assert_eq!(sync["version"].as_u64(), Some(latest), "{sync}");
    assert_eq!(
        sync["snapshots"].as_u64(),
        Some(latest),
        "one snapshot a commit: {sync}"
    );
    let present = rows_per_request(&table, 10);
    for r in &ok {
        assert_eq!(present.get(r), Some(&10), "acknowledged request {r}");
    }
}

#[test]
fn an_unknown_iceberg_sync_mode_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_file(&dir, "[iceberg]\nsync = \"eventually\"\n");
    let out = crate::common::neve(&["serve", "--warehouse", "/nonexistent", "--config", &config]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("eventually") && err.contains("after_answer"),
        "{err}"
    );
}

/// With `[iceberg] sync = "after_answer"` the commit is done before its metadata is written:
/// a server that dies as the metadata is about to be written keeps the rows, and the next
/// sync catches the metadata up.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crash_before_the_metadata_after_answering_keeps_the_rows_and_the_next_sync_catches_up() {
    let (w, table) = warehouse();
    let dir = tempfile::tempdir().unwrap();
    let config = config_file(&dir, "[iceberg]\nsync = \"after_answer\"\n");
    neve_ok(&[
        "create",
        &table,
        "--partition-by",
        "identity(region)",
        "--sort-by",
        "id",
        "--iceberg",
    ]);
    let s = ServerProc::start_with(
        &w,
        &["--token", "t", "--config", &config],
        &[("NEVE_FAILPOINT", "iceberg:background-sync")],
    );
    // The answer races the abort: either way the rows are committed.
    let _ = client()
        .post(format!("{}/v1/tables/events/insert", s.url))
        .bearer_auth("t")
        .body(rows(0, 20))
        .send()
        .await;
    let status = tokio::task::spawn_blocking(move || s.exited_within(Duration::from_secs(30)))
        .await
        .unwrap()
        .expect("the server aborts at the failpoint");
    assert!(!status.success(), "{status}");
    assert_eq!(counts(&table), (20, 20));
    let sync: serde_json::Value =
        serde_json::from_str(&neve_ok(&["iceberg", "sync", &table, "--json"])).unwrap();
    assert_eq!(sync["up_to_date"], false, "{sync}");
    assert_eq!(sync["version"].as_u64(), Some(1), "{sync}");
    assert_eq!(sync["snapshots_added"].as_u64(), Some(1), "{sync}");
}
