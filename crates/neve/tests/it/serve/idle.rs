//! Tables nobody uses leave the server's memory (their handles and insert queues), and
//! requests arriving as a queue ends are neither lost nor duplicated.

use std::time::Duration;

use super::{client, config_file, counts, create, insert, metric, metrics_text, rows, ServerProc};
use crate::common::s3_table;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idle_tables_leave_memory_and_inserts_at_the_edge_are_kept() {
    let w = s3_table("serve-idle");
    let dir = tempfile::tempdir().unwrap();
    let config = config_file(
        &dir,
        "keep_idle_tables = \"1s\"\n[[tenants]]\nname = \"acme\"\n\
         tokens = [{ sha256 = \"{token:t}\", role = \"admin\" }]\n",
    );
    let s = ServerProc::start(&w, &["--config", &config]);
    let c = client();
    create(&c, &s.url, "t", "events").await;
    create(&c, &s.url, "t", "other").await;

    // Clients pausing about as long as a queue lives: requests keep arriving just as the
    // events queue ends and a new one starts.
    let (clients, requests, per) = (12u64, 6u64, 10u64);
    let mut tasks = Vec::new();
    for k in 0..clients {
        let (c, url) = (c.clone(), s.url.clone());
        tasks.push(tokio::spawn(async move {
            for r in 0..requests {
                let first = (k * requests + r) * per;
                let (status, v) = insert(&c, &url, "t", "events", rows(first, per), None).await;
                assert_eq!(status, 200, "{v}");
                if r + 1 < requests {
                    tokio::time::sleep(Duration::from_millis(900 + 37 * ((k + r) % 9))).await;
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // Idle past the limit: the queue has ended, and the next request (to another table)
    // drops the events handle.
    let info_other = || async {
        let r = c
            .get(format!("{}/v1/tables/other", s.url))
            .bearer_auth("t")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    };
    info_other().await;
    let text = metrics_text(&c, &s.url).await;
    assert_eq!(metric(&text, "neve_tables_open"), 2.0, "{text}");
    let total = clients * requests * per;
    assert_eq!(
        counts(&format!("{w}/acme/events")),
        (total, total),
        "every row once"
    );
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let text = metrics_text(&c, &s.url).await;
    assert_eq!(metric(&text, "neve_ingest_queues"), 0.0, "{text}");
    info_other().await;
    let text = metrics_text(&c, &s.url).await;
    assert_eq!(metric(&text, "neve_tables_open"), 1.0, "{text}");

    // The table comes back from its log: the next insert lands after the others.
    let (status, v) = insert(&c, &s.url, "t", "events", rows(total, per), None).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        counts(&format!("{w}/acme/events")),
        (total + per, total + per)
    );
    let text = metrics_text(&c, &s.url).await;
    assert_eq!(metric(&text, "neve_ingest_queues"), 1.0, "{text}");
}
