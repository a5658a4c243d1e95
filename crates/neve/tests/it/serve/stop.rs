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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_answers_every_accepted_request() {
    let (w, table) = warehouse();
    let s = ServerProc::start(&w, &["--token", "t"]);
    create(&client(), &s.url, "t", "events").await;
    let l = tokio::spawn(load(s.url.clone(), "t", 16, 10));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let status = tokio::task::spawn_blocking(move || s.terminate())
        .await
        .unwrap();
    assert!(status.success(), "{status}");
    let (ok, _failed) = l.await.unwrap();
    assert!(!ok.is_empty());
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
