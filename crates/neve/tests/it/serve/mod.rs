//! `neve serve` end to end: the built binary on MinIO (and a local folder), real HTTP clients,
//! many at once, processes killed and stopped in the middle of a load.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use crate::common::{info, neve_bin, neve_ok, s3_table};

mod budget;
mod idle;
mod line_protocol;
mod logs;
mod maintain;
mod sql;
mod stop;
mod tls;
mod tokens;

/// A running `neve serve`.
/// The URL on a started process's first stdout line, `<prefix><url>`.
fn listening_url(child: &mut Child, prefix: &str) -> String {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.trim()
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_string()
}

struct ServerProc {
    child: Child,
    url: String,
}

impl ServerProc {
    fn start(warehouse: &str, extra: &[&str]) -> Self {
        Self::start_with(warehouse, extra, &[])
    }

    fn start_with(warehouse: &str, extra: &[&str], env: &[(&str, &str)]) -> Self {
        let mut args = vec!["serve", "--warehouse", warehouse, "--listen", "127.0.0.1:0"];
        if !extra.contains(&"--flush-interval") {
            args.extend(["--flush-interval", "100ms"]);
        }
        // Commits are counted by the tests: background merges only where a test asks for them.
        if !extra.contains(&"--maintenance-interval") {
            args.push("--no-maintenance");
        }
        args.extend_from_slice(extra);
        let mut child = Command::new(neve_bin())
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .envs(env.iter().copied())
            .spawn()
            .expect("start neve serve");
        let url = listening_url(&mut child, "neve serve listening on ");
        Self { child, url }
    }

    /// SIGTERM, then wait for the exit.
    fn terminate(mut self) -> std::process::ExitStatus {
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        self.child.wait().unwrap()
    }

    /// Its exit status once it ends on its own, or `None` (and killed) after `limit`.
    fn exited_within(mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let until = std::time::Instant::now() + limit;
        while std::time::Instant::now() < until {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server with token `t` whose maintenance merges any two small files every second.
fn merging_server(w: &str) -> ServerProc {
    ServerProc::start(
        w,
        &[
            "--token",
            "t",
            "--maintenance-interval",
            "1s",
            "--merge-min-files",
            "2",
            "--gc-grace",
            "10s",
        ],
    )
}

/// A server config file in `dir`: `text` with each `{token:NAME}` replaced by NAME's hash.
fn config_file(dir: &tempfile::TempDir, text: &str) -> String {
    let mut text = text.to_string();
    while let Some(start) = text.find("{token:") {
        let end = start + text[start..].find('}').unwrap();
        let hash = neve_ok(&["hash-token", &text[start + 7..end]])
            .trim()
            .to_string();
        text.replace_range(start..=end, &hash);
    }
    let path = dir.path().join("neve.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A response body as JSON (`null` when it is not JSON).
async fn json(r: reqwest::Response) -> serde_json::Value {
    serde_json::from_slice(&r.bytes().await.unwrap()).unwrap_or(serde_json::Value::Null)
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// The warehouse and a table address in it.
fn warehouse() -> (String, String) {
    let w = s3_table("serve");
    let t = format!("{w}/events");
    (w, t)
}

async fn create(c: &reqwest::Client, url: &str, token: &str, table: &str) {
    let r = c
        .put(format!("{url}/v1/tables/{table}"))
        .bearer_auth(token)
        .body(r#"{"partition_by": "identity(region)", "sort_by": ["id"]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
}

/// `n` NDJSON rows with ids `first..first+n`.
fn rows(first: u64, n: u64) -> String {
    (first..first + n)
        .map(|i| {
            format!(
                "{{\"id\": {i}, \"region\": \"r{}\", \"v\": \"x{i}\"}}\n",
                i % 3
            )
        })
        .collect()
}

async fn insert(
    c: &reqwest::Client,
    url: &str,
    token: &str,
    table: &str,
    body: String,
    key: Option<&str>,
) -> (u16, serde_json::Value) {
    let mut r = c
        .post(format!("{url}/v1/tables/{table}/insert"))
        .bearer_auth(token)
        .header("content-type", "application/x-ndjson")
        .body(body);
    if let Some(k) = key {
        r = r.header("idempotency-key", k);
    }
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    let v = json(r).await;
    (status, v)
}

/// A server's `/metrics` text.
async fn metrics_text(c: &reqwest::Client, url: &str) -> String {
    let r = c.get(format!("{url}/metrics")).send().await.unwrap();
    r.text().await.unwrap()
}

/// The value of the first sample of `name` in `/metrics` text.
fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} in\n{text}"))
}

/// (rows, distinct ids) of a table, through `neve sql`.
fn counts(table: &str) -> (u64, u64) {
    let out = neve_ok(&[
        "sql",
        "SELECT count(*) AS n, count(DISTINCT id) AS d FROM t",
        "--table",
        &format!("t={table}"),
        "--format",
        "ndjson",
    ]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    (v["n"].as_u64().unwrap(), v["d"].as_u64().unwrap())
}

/// Many clients over one or two servers: every acknowledged row present exactly once, and
/// many requests per commit.
async fn many_clients(servers: usize) {
    let (w, table) = warehouse();
    let procs: Vec<ServerProc> = (0..servers)
        .map(|_| ServerProc::start(&w, &["--token", "s3cret"]))
        .collect();
    let urls: Vec<String> = procs.iter().map(|p| p.url.clone()).collect();
    let c = client();
    create(&c, &urls[0], "s3cret", "events").await;
    let (clients, requests, per) = (64u64, 50u64, 20u64);
    let mut tasks = Vec::new();
    for k in 0..clients {
        let c = c.clone();
        let url = urls[k as usize % urls.len()].clone();
        tasks.push(tokio::spawn(async move {
            let mut versions = Vec::new();
            for r in 0..requests {
                let first = (k * requests + r) * per;
                let (status, v) =
                    insert(&c, &url, "s3cret", "events", rows(first, per), None).await;
                assert_eq!(status, 200, "{v}");
                assert_eq!(v["rows"], per);
                versions.push(v["version"].as_u64().unwrap());
            }
            versions
        }));
    }
    let mut versions = std::collections::BTreeSet::new();
    for t in tasks {
        versions.extend(t.await.unwrap());
    }
    let total = clients * requests * per;
    assert_eq!(
        counts(&table),
        (total, total),
        "every acknowledged row once"
    );
    let commits = info(&table)["version"].as_u64().unwrap();
    eprintln!("{commits} commits for {} requests", clients * requests);
    assert!(
        commits <= clients * requests / 10,
        "{commits} commits for {} requests",
        clients * requests
    );
    assert!(versions.len() as u64 <= commits);
    // One file per partition per flush, not one per request.
    let files = info(&table)["files"].as_u64().unwrap();
    assert!(files <= commits * 3, "{files} files for {commits} commits");
    // The servers' metrics count the same commits, and the requests by route and status.
    let mut counted = 0;
    for url in &urls {
        for probe in ["healthz", "readyz"] {
            let r = c.get(format!("{url}/{probe}")).send().await.unwrap();
            assert_eq!(r.status(), 200, "{probe}");
        }
        let text = metrics_text(&c, url).await;
        counted += metric(&text, "neve_commits_total") as u64;
        assert!(metric(&text, "neve_flush_seconds_count") >= 1.0);
        assert!(
            text.contains("route=\"/v1/tables/{name}/insert\",status=\"200\""),
            "{text}"
        );
        // The process's own figures, under the names dashboards expect.
        assert!(
            metric(&text, "process_resident_memory_bytes") > 1e6,
            "{text}"
        );
        assert!(metric(&text, "process_cpu_seconds_total") > 0.0, "{text}");
        assert!(metric(&text, "process_open_fds") >= 3.0, "{text}");
        assert_eq!(metric(&text, "neve_build_info"), 1.0, "{text}");
    }
    assert_eq!(
        counted, commits,
        "every commit after the create is a flush's"
    );
    drop(procs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn group_commit_many_clients_one_server() {
    many_clients(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn group_commit_many_clients_two_servers() {
    many_clients(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retried_request_is_committed_once() {
    let (w, table) = warehouse();
    let c = client();
    let a = ServerProc::start(&w, &["--token", "t"]);
    let b = ServerProc::start(&w, &["--token", "t"]);
    create(&c, &a.url, "t", "events").await;
    let body = rows(0, 20);
    // Concurrently to both instances, then again to each.
    let (r1, r2) = tokio::join!(
        insert(&c, &a.url, "t", "events", body.clone(), Some("req-1")),
        insert(&c, &b.url, "t", "events", body.clone(), Some("req-1")),
    );
    assert_eq!((r1.0, r2.0), (200, 200), "{} {}", r1.1, r2.1);
    assert_eq!(
        r1.1["version"], r2.1["version"],
        "both answered with the one commit"
    );
    let r3 = insert(&c, &b.url, "t", "events", body.clone(), Some("req-1")).await;
    assert_eq!(r3.1["version"], r1.1["version"]);
    assert_eq!(r3.1["duplicate"], true);
    // Across a restart.
    a.kill();
    let a2 = ServerProc::start(&w, &["--token", "t"]);
    let r4 = insert(&c, &a2.url, "t", "events", body.clone(), Some("req-1")).await;
    assert_eq!((r4.0, &r4.1["version"]), (200, &r1.1["version"]));
    // Another key is another request.
    let r5 = insert(&c, &a2.url, "t", "events", rows(20, 20), Some("req-2")).await;
    assert_eq!(r5.0, 200);
    assert_eq!(counts(&table), (40, 40));
    // A key sent again with other rows is not a retry: 422, and nothing of it is written,
    // whether the key is in the log already or only in the same flush.
    let r6 = insert(&c, &b.url, "t", "events", rows(40, 5), Some("req-1")).await;
    assert_eq!(r6.0, 422, "{}", r6.1);
    assert_eq!(r6.1["error"]["code"], "idempotency_key_reused", "{}", r6.1);
    let (x, y) = tokio::join!(
        insert(&c, &b.url, "t", "events", rows(50, 5), Some("req-3")),
        insert(&c, &b.url, "t", "events", rows(60, 5), Some("req-3")),
    );
    let mut statuses = [x.0, y.0];
    statuses.sort();
    assert_eq!(statuses, [200, 422], "{} {}", x.1, y.1);
    assert_eq!(counts(&table), (45, 45));
    // Two keys on one request: which one a proxy keeps is unknown, so neither is guessed.
    let r = c
        .post(format!("{}/v1/tables/events/insert", b.url))
        .bearer_auth("t")
        .header("idempotency-key", "req-4")
        .header("idempotency-key", "req-5")
        .body(rows(70, 5))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v = json(r).await;
    assert!(
        v["error"]["message"].to_string().contains("more than once"),
        "{v}"
    );
    assert_eq!(counts(&table), (45, 45));
    drop(b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_requests_are_refused_alone_inside_a_busy_flush() {
    let (w, _) = warehouse();
    let dir = tempfile::tempdir().unwrap();
    let config = config_file(
        &dir,
        "[ingest]\nmax_body_bytes = \"64KiB\"\n[[tenants]]\nname = \"acme\"\n\
         tokens = [{ sha256 = \"{token:admin-token}\", role = \"admin\" }, { sha256 = \"{token:read-token}\", role = \"read\" }]\n",
    );
    let s = ServerProc::start(&w, &["--config", &config]);
    let c = client();
    create(&c, &s.url, "admin-token", "events").await;
    let url = s.url.clone();
    // The first insert gives the table its columns: without it, a wrong-typed request that
    // happened to flush first would define them.
    let (st, v) = insert(&c, &url, "admin-token", "events", rows(10_000_000, 1), None).await;
    assert_eq!(st, 200, "{v}");
    // Good requests keep the queue busy while the bad ones arrive.
    let mut good = Vec::new();
    for k in 0..16u64 {
        let (c, url) = (c.clone(), url.clone());
        good.push(tokio::spawn(async move {
            for r in 0..10u64 {
                let (st, v) = insert(
                    &c,
                    &url,
                    "admin-token",
                    "events",
                    rows((k * 10 + r) * 5, 5),
                    None,
                )
                .await;
                assert_eq!(st, 200, "{v}");
            }
        }));
    }
    let malformed =
        "{\"id\": 1000000, \"region\": \"r1\"}\n{\"id\": 1000001, \"region\": \n".to_string();
    let (st, v) = insert(&c, &url, "admin-token", "events", malformed, None).await;
    assert_eq!(st, 400, "{v}");
    assert_eq!(v["error"]["line"], 2, "{v}");
    let wrong_type = "{\"id\": \"not a number\", \"region\": \"r1\"}\n".to_string();
    let (st, v) = insert(&c, &url, "admin-token", "events", wrong_type, None).await;
    assert_eq!(st, 400, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("id"),
        "{v}"
    );
    let (st, v) = insert(&c, &url, "admin-token", "nope", rows(0, 1), None).await;
    assert_eq!(st, 404, "{v}");
    let (st, v) = insert(
        &c,
        &url,
        "admin-token",
        "events",
        rows(2_000_000, 2000),
        None,
    )
    .await;
    assert_eq!(st, 413, "{v}");
    assert_eq!(v["error"]["code"], "body_too_large", "{v}");
    let (st, v) = insert(&c, &url, "wrong-token", "events", rows(0, 1), None).await;
    assert_eq!(st, 401, "{v}");
    let (st, v) = insert(&c, &url, "read-token", "events", rows(0, 1), None).await;
    assert_eq!(st, 403, "{v}");
    for g in good {
        g.await.unwrap();
    }
    let t = format!("{w}/acme/events");
    assert_eq!(counts(&t), (801, 801), "only the good requests' rows");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tenants_see_only_their_own_tables() {
    let (w, _) = warehouse();
    let dir = tempfile::tempdir().unwrap();
    let config = config_file(
        &dir,
        "[[tenants]]\nname = \"a\"\ntokens = [{ sha256 = \"{token:token-a}\", role = \"admin\" }]\n\
         [[tenants]]\nname = \"b\"\ntokens = [{ sha256 = \"{token:token-b}\", role = \"admin\" }]\n",
    );
    let s = ServerProc::start(&w, &["--config", &config]);
    let c = client();
    create(&c, &s.url, "token-b", "secret").await;
    let (st, _) = insert(&c, &s.url, "token-b", "secret", rows(0, 3), None).await;
    assert_eq!(st, 200);
    // A cannot write, read or list B's table: for A it does not exist.
    let (st, _) = insert(&c, &s.url, "token-a", "secret", rows(0, 3), None).await;
    assert_eq!(st, 404);
    let r = c
        .get(format!("{}/v1/tables/secret", s.url))
        .bearer_auth("token-a")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let list = |token: &'static str| {
        let (c, url) = (c.clone(), s.url.clone());
        async move {
            let v = c
                .get(format!("{url}/v1/tables"))
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            json(v).await
        }
    };
    assert_eq!(list("token-a").await["tables"], serde_json::json!([]));
    assert_eq!(
        list("token-b").await["tables"],
        serde_json::json!(["secret"])
    );
    assert_eq!(counts(&format!("{w}/b/secret")), (3, 3));
}

/// Rows per request id (`id / per`) in the table.
fn rows_per_request(table: &str, per: u64) -> HashMap<u64, u64> {
    let out = neve_ok(&[
        "sql",
        &format!("SELECT id / {per} AS r, count(*) AS n FROM t GROUP BY 1"),
        "--table",
        &format!("t={table}"),
        "--format",
        "ndjson",
    ]);
    out.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["r"].as_u64().unwrap(), v["n"].as_u64().unwrap())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retry_after_an_unknown_outcome_is_committed_once() {
    let (w, table) = warehouse();
    let c = client();
    // The server dies right after its commit landed, before answering: the client cannot
    // know whether the rows were stored.
    let s = ServerProc::start_with(
        &w,
        &["--token", "t"],
        &[("NEVE_FAILPOINT", "commit:after-put")],
    );
    create(&c, &s.url, "t", "events").await;
    let sent = c
        .post(format!("{}/v1/tables/events/insert", s.url))
        .bearer_auth("t")
        .header("idempotency-key", "unknown-1")
        .body(rows(0, 20))
        .send()
        .await;
    assert!(sent.is_err(), "the connection dies with the server");
    drop(s);
    assert_eq!(counts(&table), (20, 20), "the commit had landed");
    // The retry, to a fresh server, is answered with the commit that holds the rows.
    let s2 = ServerProc::start(&w, &["--token", "t"]);
    let (st, v) = insert(&c, &s2.url, "t", "events", rows(0, 20), Some("unknown-1")).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["duplicate"], true);
    assert_eq!(v["version"], info(&table)["version"]);
    assert_eq!(counts(&table), (20, 20), "added once");
}

/// Clients that wait for their answer before sending again are flushed as soon as all of them
/// are back, not after `flush_interval` (an hour here: without the early flush the test
/// could not finish), and still together, one commit per round.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flush_starts_when_every_waiting_client_is_back() {
    let (w, table) = warehouse();
    let dir = tempfile::tempdir().unwrap();
    // The first round (4 × 100 rows) is cut by `flush_rows`; later rounds of 1-row requests
    // can only be cut early.
    let config = config_file(&dir, "[ingest]\nflush_rows = 400\n");
    let s = ServerProc::start(
        &w,
        &[
            "--token",
            "t",
            "--config",
            &config,
            "--flush-interval",
            "1h",
        ],
    );
    let c = client();
    create(&c, &s.url, "t", "events").await;
    let (clients, rounds) = (4u64, 10u64);
    let mut tasks = Vec::new();
    for k in 0..clients {
        let (c, url) = (c.clone(), s.url.clone());
        tasks.push(tokio::spawn(async move {
            let mut versions = Vec::new();
            for r in 0..rounds {
                let (first, n) = if r == 0 {
                    (k * 100, 100)
                } else {
                    (10_000 + k * rounds + r, 1)
                };
                let (st, v) = insert(&c, &url, "t", "events", rows(first, n), None).await;
                assert_eq!(st, 200, "{v}");
                versions.push(v["version"].as_u64().unwrap());
            }
            versions
        }));
    }
    let all = async {
        let mut per_client = Vec::new();
        for t in tasks {
            per_client.push(t.await.unwrap());
        }
        per_client
    };
    let per_client = tokio::time::timeout(Duration::from_secs(120), all)
        .await
        .expect("every round flushed without waiting out the hour");
    // Every client saw the same version in each round: one commit per round.
    for v in &per_client[1..] {
        assert_eq!(v, &per_client[0]);
    }
    // Version 0 is the create.
    assert_eq!(info(&table)["version"].as_u64().unwrap(), rounds);
    assert_eq!(counts(&table), (400 + 4 * 9, 400 + 4 * 9));
}

/// Table names equal but for case: the server refuses to make the second (SQL could not tell
/// them apart), and a warehouse that has both anyway still lists and answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_names_equal_but_for_case() {
    let (w, _) = warehouse();
    let s = ServerProc::start(&w, &["--token", "tok"]);
    let c = client();
    create(&c, &s.url, "tok", "bar").await;
    let r = c
        .put(format!("{}/v1/tables/Bar", s.url))
        .bearer_auth("tok")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let v = json(r).await;
    assert!(
        v["error"]["message"].to_string().contains("only in case"),
        "{v}"
    );
    // Made by hand beside it: the listing keeps working, the second is left out of SQL.
    neve_ok(&["create", &format!("{w}/BAR")]);
    let r = c
        .get(format!("{}/v1/tables", s.url))
        .bearer_auth("tok")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let v = json(r).await;
    assert_eq!(v["tables"].as_array().unwrap().len(), 1, "{v}");
}

/// Every error is JSON, axum's own refusals included, and no message shows where the
/// warehouse is: tables are named as the caller names them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_is_json_and_shows_no_server_path() {
    let (w, _) = warehouse();
    let s = ServerProc::start(&w, &["--token", "tok"]);
    let c = client();
    create(&c, &s.url, "tok", "events").await;
    let bucket_path = w.trim_start_matches("s3://").to_string();
    let u = &s.url;
    let cases = [
        (c.get(format!("{u}/v1/tables/a/b")), 404, "no_such_route"),
        (
            c.delete(format!("{u}/v1/tables/events")),
            405,
            "method_not_allowed",
        ),
        (
            c.post(format!("{u}/api/v2/write?precision=s")),
            400,
            "bad_request",
        ),
        (c.get(format!("{u}/query")), 400, "bad_request"),
        (
            c.put(format!("{u}/v1/tables/events")).body("{}"),
            409,
            "conflict",
        ),
        (
            c.post(format!("{u}/v1/sql")).body("SELECT * FROM nope"),
            404,
            "table_not_found",
        ),
    ];
    for (req, status, code) in cases {
        let r = req.bearer_auth("tok").send().await.unwrap();
        assert_eq!(r.status().as_u16(), status);
        let ct = r.headers()["content-type"].to_str().unwrap().to_string();
        assert!(ct.starts_with("application/json"), "{ct}");
        let v = json(r).await;
        assert_eq!(v["error"]["code"], code, "{v}");
        let m = v["error"]["message"].as_str().unwrap();
        assert!(!m.contains(&bucket_path), "{m}");
    }
    // A name far too long is echoed in part only, and the limit is said.
    let r = c
        .get(format!("{u}/v1/tables/{}", "a".repeat(10_000)))
        .bearer_auth("tok")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v = json(r).await;
    let m = v["error"]["message"].as_str().unwrap();
    assert!(m.contains("at most 128") && m.len() < 1_000, "{m}");
    // Tables that do not exist keep no handle open.
    for i in 0..5 {
        let r = c
            .get(format!("{u}/v1/tables/missing{i}"))
            .bearer_auth("tok")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404);
        let (st, _) = insert(&c, u, "tok", &format!("missing{i}"), rows(0, 1), None).await;
        assert_eq!(st, 404);
    }
    let text = metrics_text(&c, u).await;
    assert!(metric(&text, "neve_tables_open") <= 1.0, "{text}");
    // The table that exists is named as the caller named it.
    let r = c
        .put(format!("{u}/v1/tables/events"))
        .bearer_auth("tok")
        .body("{}")
        .send()
        .await
        .unwrap();
    let v = json(r).await;
    assert!(
        v["error"]["message"].as_str().unwrap().contains("'events'"),
        "{v}"
    );
    // A body whose format cannot be told asks for a Content-Type, not a CLI flag.
    let r = c
        .post(format!("{u}/v1/tables/events/insert"))
        .bearer_auth("tok")
        .body(vec![0xffu8, 0x00, 0x13, 0x37, 0x00, 0xfe])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v = json(r).await;
    let m = v["error"]["message"].as_str().unwrap();
    assert!(m.contains("Content-Type") && !m.contains("--format"), "{v}");
    // A huge value is echoed in part only.
    let (status, v) = insert(&c, u, "tok", "events", rows(0, 1), None).await;
    assert_eq!(status, 200, "{v}");
    let big = format!(
        "{{\"id\": \"{}\", \"region\": \"r\"}}\n",
        "9".repeat(900_000)
    );
    let (status, v) = insert(&c, u, "tok", "events", big, None).await;
    assert_eq!(status, 400, "{v}");
    assert!(v.to_string().len() < 4_000, "{}", v.to_string().len());
    // A plan names the files it reads as the caller knows them, from the table's folder.
    let folder = w.rsplit('/').next().unwrap();
    let r = c
        .post(format!("{u}/v1/sql"))
        .bearer_auth("tok")
        .body("EXPLAIN SELECT * FROM events")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let plan = r.text().await.unwrap();
    assert!(
        plan.contains("events/_data/") && !plan.contains(folder),
        "{plan}"
    );
    // A file gone from under a query: storage's message names it the same way.
    let t = crate::common::table(&format!("{w}/events"));
    let snap = t.snapshot().await.unwrap();
    let gone = snap.files.values().next().unwrap();
    object_store::ObjectStoreExt::delete(&*t.location().store, &t.location().child(&gone.path))
        .await
        .unwrap();
    let r = c
        .post(format!("{u}/v1/sql"))
        .bearer_auth("tok")
        .body("SELECT * FROM events")
        .send()
        .await
        .unwrap();
    assert!(r.status().is_server_error(), "{}", r.status());
    let m = json(r).await["error"]["message"].to_string();
    assert!(
        m.contains(&format!("events/{}", gone.path)) && !m.contains(folder),
        "{m}"
    );
}
