//! Tables nobody uses leave the server's memory (their handles and insert queues), and
//! requests arriving as a queue ends are neither lost nor duplicated.

use std::process::{Command, Stdio};
use std::time::Duration;

use super::{
    client, config_file, counts, create, insert, listening_url, metric, metrics_text, rows,
    ServerProc,
};
use crate::common::{neve_bin, s3_table};

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

/// Sends `path`'s request line and one header, never the blank line that ends them, and waits
/// for the server to close the connection (the end of the stream, or a 408 and then the end):
/// how long that took, or `None` if it was still open after 10 s.
async fn trickle(url: &str, path: &str) -> Option<Duration> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut slow = tokio::net::TcpStream::connect(url.trim_start_matches("http://"))
        .await
        .unwrap();
    slow.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n").as_bytes())
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let mut buf = [0u8; 1024];
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match slow.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => continue,
            }
        }
    })
    .await
    .ok()
    .map(|()| started.elapsed())
}

/// A client trickling a request's headers is cut off after `header_read_timeout`, before any
/// token is checked, while one that sends its headers whole is answered on the same server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_trickling_its_headers_is_cut_off() {
    let w = s3_table("serve-slow");
    let dir = tempfile::tempdir().unwrap();
    let config = config_file(&dir, "header_read_timeout = \"1s\"\n");
    let s = ServerProc::start(&w, &["--config", &config, "--token", "t"]);
    let waited = trickle(&s.url, "/healthz")
        .await
        .expect("the connection was still open after 10 s");
    assert!(waited >= Duration::from_millis(900), "{waited:?}");
    let r = client()
        .get(format!("{}/healthz", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

/// `neve proxy` takes `[proxy] header_read_timeout` too: a client short of its headers is cut
/// off after it, and others are served.
#[tokio::test]
async fn the_proxy_cuts_off_a_client_trickling_its_headers() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("proxy.toml");
    std::fs::write(&config, "[proxy]\nheader_read_timeout = \"1s\"\n").unwrap();
    let mut child = Command::new(neve_bin())
        .args(["proxy", "--warehouse", dir.path().to_str().unwrap()])
        .args([
            "--config",
            config.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .args([
            "--access-key-id",
            "AKIDSLOW",
            "--secret-access-key",
            "slow-test-secret",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let url = listening_url(&mut child, "neve proxy listening on ");
    let waited = trickle(&url, "/_neve/healthz").await;
    let _ = child.kill();
    let waited = waited.expect("the connection was still open after 10 s");
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(10),
        "{waited:?}"
    );
    let _ = child.wait();
}

/// A client that sends part of an insert's body and then goes silent is answered 400 once
/// the body has been silent for `body_read_timeout`, and its memory is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_stops_arriving_fails_the_request() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let w = s3_table("serve-slow-body");
    let dir = tempfile::tempdir().unwrap();
    let config = config_file(&dir, "body_read_timeout = \"1s\"\n");
    let s = ServerProc::start(&w, &["--config", &config, "--token", "t"]);
    let c = client();
    create(&c, &s.url, "t", "events").await;
    let addr = s.url.trim_start_matches("http://").to_string();
    let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
    slow.write_all(
        b"POST /v1/tables/events/insert HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n\
          Content-Type: application/x-ndjson\r\nContent-Length: 100\r\n\r\n{\"id\":",
    )
    .await
    .unwrap();
    let started = std::time::Instant::now();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buf = [0u8; 1024];
        loop {
            match slow.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    answer.extend_from_slice(&buf[..n]);
                    if answer.windows(4).any(|w| w == b"\r\n\r\n") && answer.ends_with(b"}}") {
                        break;
                    }
                }
            }
        }
    })
    .await;
    assert!(read.is_ok(), "no answer after 10 s");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("stopped arriving"), "{answer}");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    // Nothing was written, and the table takes a whole body.
    let (status, v) = insert(&c, &s.url, "t", "events", rows(0, 3), None).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(counts(&format!("{w}/events")), (3, 3));
}

/// A request without a valid token is answered 401 as soon as its headers are in, never
/// after the server has read (and held) a body of up to `max_body_bytes`: each route that
/// takes a body, with the token wrong or missing, the body announced at 100 MB and only a
/// few bytes of it sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_a_valid_token_is_refused_before_its_body() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let w = s3_table("serve-auth-first");
    let dir = tempfile::tempdir().unwrap();
    // A body read timeout far beyond the test's wait: only the token can end these requests.
    let config = config_file(&dir, "body_read_timeout = \"60s\"\n");
    let s = ServerProc::start(&w, &["--config", &config, "--token", "t"]);
    let addr = s.url.trim_start_matches("http://").to_string();
    for (path, auth) in [
        ("/v1/sql", "Authorization: Bearer wrong\r\n"),
        ("/v1/sql", ""),
        ("/v1/tables/events/insert", "Authorization: Token wrong\r\n"),
        ("/api/v2/write?bucket=ns", ""),
        ("/write?db=ns&p=wrong", ""),
    ] {
        let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
        slow.write_all(
            format!(
                "POST {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: 100000000\r\n\r\nSELECT"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
        let mut answer = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), async {
            let mut buf = [0u8; 1024];
            while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
                match slow.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => answer.extend_from_slice(&buf[..n]),
                }
            }
        })
        .await;
        assert!(read.is_ok(), "{path}: no answer after 10 s");
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 401"), "{path}: {answer}");
    }
}
