//! `POST /v1/sql` on the built `neve serve`, on MinIO: formats, snapshots, tenants, errors,
//! limits, a large result streamed with bounded memory, and a client hanging up.

use std::time::Duration;

use super::*;

/// Send `sql` as `token`, asking for `accept`; (status, headers, body).
async fn sql_as(
    c: &reqwest::Client,
    url: &str,
    token: &str,
    sql: &str,
    accept: &str,
    query: &str,
) -> (u16, reqwest::header::HeaderMap, bytes::Bytes) {
    let r = c
        .post(format!("{url}/v1/sql{query}"))
        .bearer_auth(token)
        .header("accept", accept)
        .body(sql.to_string())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, headers, r.bytes().await.unwrap())
}

/// Rows of an NDJSON or JSON body.
fn rows_of(body: &[u8]) -> Vec<serde_json::Value> {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(serde_json::Value::Array(a)) => a,
        _ => std::str::from_utf8(body)
            .unwrap()
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
    }
}

fn arrow_rows(body: &[u8]) -> Vec<arrow::array::RecordBatch> {
    arrow::ipc::reader::StreamReader::try_new(body, None)
        .unwrap()
        .map(|b| b.unwrap())
        .collect()
}

/// The error code of a JSON error body.
fn code(body: &[u8]) -> String {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap();
    v["error"]["code"].as_str().unwrap_or_default().to_string()
}

const GROUPS: &str = "SELECT region, count(*) AS n, min(id) AS lo, max(id) AS hi FROM events GROUP BY region ORDER BY region";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sql_answers_in_every_format_as_neve_sql_does() {
    let (w, table) = warehouse();
    let s = ServerProc::start(&w, &["--token", "t"]);
    let c = client();
    create(&c, &s.url, "t", "events").await;
    let (st, _) = insert(&c, &s.url, "t", "events", rows(0, 300), None).await;
    assert_eq!(st, 200);
    let expected: Vec<serde_json::Value> = rows_of(
        neve_ok(&[
            "sql",
            GROUPS,
            "--table",
            &format!("events={table}"),
            "--format",
            "json",
        ])
        .as_bytes(),
    );
    assert_eq!(expected.len(), 3);

    for accept in ["application/json", "application/x-ndjson", "*/*"] {
        let (st, h, body) = sql_as(&c, &s.url, "t", GROUPS, accept, "").await;
        assert_eq!(st, 200, "{}", String::from_utf8_lossy(&body));
        assert_eq!(rows_of(&body), expected, "{accept}");
        assert_eq!(h["neve-snapshot"], "events=1");
    }
    let (st, h, body) = sql_as(&c, &s.url, "t", GROUPS, "text/csv", "").await;
    assert_eq!(st, 200);
    assert_eq!(h["content-type"], "text/csv");
    let csv = String::from_utf8(body.to_vec()).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("region,n,lo,hi"));
    for (line, e) in lines.zip(&expected) {
        assert_eq!(
            line,
            format!(
                "{},{},{},{}",
                e["region"].as_str().unwrap(),
                e["n"],
                e["lo"],
                e["hi"]
            )
        );
    }
    let (st, _, body) = sql_as(
        &c,
        &s.url,
        "t",
        GROUPS,
        "application/vnd.apache.arrow.stream",
        "",
    )
    .await;
    assert_eq!(st, 200);
    let batches = arrow_rows(&body);
    let mut json = arrow::json::ArrayWriter::new(Vec::new());
    for b in &batches {
        json.write(b).unwrap();
    }
    json.finish().unwrap();
    assert_eq!(rows_of(&json.into_inner()), expected);
    let (st, _, body) = sql_as(
        &c,
        &s.url,
        "t",
        GROUPS,
        "application/vnd.apache.parquet",
        "",
    )
    .await;
    assert_eq!(st, 200);
    let reader =
        parquet::arrow::arrow_reader::ParquetRecordBatchReader::try_new(body, 1024).unwrap();
    let n: usize = reader.map(|b| b.unwrap().num_rows()).sum();
    assert_eq!(n, 3);

    // A JSON request body; `as_of` an earlier version; SHOW TABLES and DESCRIBE.
    let (st, _) = insert(&c, &s.url, "t", "events", rows(300, 30), None).await;
    assert_eq!(st, 200);
    let r = c
        .post(format!("{}/v1/sql?as_of=1", s.url))
        .bearer_auth("t")
        .header("content-type", "application/json")
        .body(r#"{"sql": "SELECT count(*) AS n FROM events"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["neve-snapshot"], "events=1");
    assert_eq!(json_rows(r).await, serde_json::json!([{"n": 300}]));
    let (_, h, body) = sql_as(
        &c,
        &s.url,
        "t",
        "SELECT count(*) AS n FROM events",
        "*/*",
        "",
    )
    .await;
    assert_eq!(rows_of(&body), vec![serde_json::json!({"n": 330})]);
    assert_eq!(h["neve-snapshot"], "events=2");
    let (st, _, body) = sql_as(&c, &s.url, "t", "SHOW TABLES", "application/x-ndjson", "").await;
    assert_eq!(st, 200);
    let names: Vec<String> = rows_of(&body)
        .iter()
        .filter(|r| r["table_schema"] == "public")
        .map(|r| r["table_name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["events"]);
    let (st, _, body) = sql_as(&c, &s.url, "t", "DESCRIBE events", "application/json", "").await;
    assert_eq!(st, 200);
    let cols: Vec<_> = rows_of(&body)
        .iter()
        .map(|r| r["column_name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(cols, ["id", "region", "v"]);
    // The table's own types, not the view types scans read strings as.
    let types: Vec<_> = rows_of(&body)
        .iter()
        .map(|r| r["data_type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(types[1], "Utf8");
}

async fn json_rows(r: reqwest::Response) -> serde_json::Value {
    serde_json::from_slice(&r.bytes().await.unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sql_errors_say_what_and_where() {
    let (w, _) = warehouse();
    let s = ServerProc::start(&w, &["--token", "t"]);
    let c = client();
    create(&c, &s.url, "t", "events").await;
    let cases: [(&str, &str, u16, &str, &str); 12] = [
        ("SELEC 1", "*/*", 400, "sql_syntax", "Line: 1, Column: 1"),
        // An argument a function refuses as it runs: the query's mistake, not the server's.
        (
            "SELECT regexp_like('a', '(')",
            "*/*",
            400,
            "invalid_query",
            "regex parse error",
        ),
        (
            "SELECT to_timestamp('x', '%Y-%m-%d')",
            "*/*",
            400,
            "invalid_query",
            "parsing timestamp",
        ),
        (
            "SELECT nope FROM events",
            "*/*",
            400,
            "invalid_query",
            "(at line 1, column 8)",
        ),
        (
            "SELECT * FROM other",
            "*/*",
            404,
            "table_not_found",
            "other",
        ),
        (
            "SELECT * FROM \"../x/events\"",
            "*/*",
            404,
            "table_not_found",
            "../x/events",
        ),
        (
            "CREATE EXTERNAL TABLE x STORED AS PARQUET LOCATION '/etc/'",
            "*/*",
            400,
            "invalid_query",
            "DDL not supported",
        ),
        (
            "COPY events TO '/tmp/out.csv'",
            "*/*",
            400,
            "invalid_query",
            "not supported",
        ),
        ("SELECT 1", "text/html", 406, "not_acceptable", "text/csv"),
        // A format that cannot hold the result's types: refused before a 200 is sent.
        (
            "SELECT make_array(1, 2) AS l",
            "text/csv",
            406,
            "not_acceptable",
            "cannot be written as text/csv",
        ),
        (
            "SELECT INTERVAL '1 month 2 days' AS i",
            "application/vnd.apache.parquet",
            406,
            "not_acceptable",
            "cannot be written as application/vnd.apache.parquet",
        ),
        ("  ", "*/*", 400, "bad_request", "no SQL"),
    ];
    for (sql, accept, status, want, message) in cases {
        let (st, _, body) = sql_as(&c, &s.url, "t", sql, accept, "").await;
        let text = String::from_utf8_lossy(&body);
        assert_eq!(st, status, "{sql}: {text}");
        assert_eq!(code(&body), want, "{sql}: {text}");
        assert!(text.contains(message), "{sql}: {text}");
    }
    let (st, _, body) = sql_as(&c, &s.url, "t", "SELECT 1", "*/*", "?as_of=yesterday").await;
    assert_eq!(st, 400, "{}", String::from_utf8_lossy(&body));
    // A misspelled parameter is refused, not read as the latest.
    let (st, _, body) = sql_as(&c, &s.url, "t", "SELECT 1", "*/*", "?as-of=1").await;
    let text = String::from_utf8_lossy(&body);
    assert_eq!((st, code(&body).as_str()), (400, "bad_request"), "{text}");
    assert!(text.contains("as-of"), "{text}");
    // An offset's '+' unescaped arrives as a space: the answer says so.
    let (st, _, body) = sql_as(
        &c,
        &s.url,
        "t",
        "SELECT 1",
        "*/*",
        "?as_of=2024-05-01T14:00:00+02:00",
    )
    .await;
    let text = String::from_utf8_lossy(&body);
    assert_eq!(st, 400, "{text}");
    assert!(text.contains("%2B"), "{text}");
    // The catalog at a time before the table existed lists no table; naming it is a 404.
    let before = "?as_of=2020-01-01T00:00:00Z";
    let (st, _, body) = sql_as(&c, &s.url, "t", "SHOW TABLES", "*/*", before).await;
    let text = String::from_utf8_lossy(&body);
    assert_eq!(st, 200, "{text}");
    assert!(!text.contains("events"), "{text}");
    let (st, _, body) = sql_as(&c, &s.url, "t", "SELECT * FROM events", "*/*", before).await;
    assert_eq!(st, 404, "{}", String::from_utf8_lossy(&body));
    let (st, _, body) = sql_as(&c, &s.url, "t", "SELECT * FROM events", "*/*", "?as_of=99").await;
    assert_eq!(st, 404, "{}", String::from_utf8_lossy(&body));
    let (st, _, _) = sql_as(&c, &s.url, "wrong", "SELECT 1", "*/*", "").await;
    assert_eq!(st, 401);
    let r = c
        .post(format!("{}/v1/sql", s.url))
        .body("SELECT 1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let metrics = metrics_text(&c, &s.url).await;
    assert!(
        metric(&metrics, "neve_queries_failed_total{code=\"sql_syntax\"}") >= 1.0,
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sql_sees_only_the_callers_tables() {
    let (w, _) = warehouse();
    let dir = tempfile::tempdir().unwrap();
    let config = config_file(
        &dir,
        "[[tenants]]\nname = \"a\"\ntokens = [{ sha256 = \"{token:token-a}\", role = \"read\" }]\n\
         [[tenants]]\nname = \"b\"\ntokens = [{ sha256 = \"{token:token-b}\", role = \"admin\" }]\n",
    );
    let s = ServerProc::start(&w, &["--config", &config]);
    let c = client();
    create(&c, &s.url, "token-b", "secret").await;
    let (st, _) = insert(&c, &s.url, "token-b", "secret", rows(0, 3), None).await;
    assert_eq!(st, 200);
    // B reads its table; A (read role) does not see it, by name, by path or in the catalog.
    let (st, _, body) = sql_as(
        &c,
        &s.url,
        "token-b",
        "SELECT count(*) AS n FROM secret",
        "*/*",
        "",
    )
    .await;
    assert_eq!(
        (st, rows_of(&body)),
        (200, vec![serde_json::json!({"n": 3})])
    );
    for sql in [
        "SELECT count(*) FROM secret",
        "SELECT count(*) FROM b.secret",
        "SELECT count(*) FROM \"..\".b",
    ] {
        let (st, _, body) = sql_as(&c, &s.url, "token-a", sql, "*/*", "").await;
        assert_eq!(st, 404, "{sql}: {}", String::from_utf8_lossy(&body));
    }
    let (st, _, body) = sql_as(
        &c,
        &s.url,
        "token-a",
        "SELECT table_name FROM information_schema.tables WHERE table_schema NOT IN ('information_schema')",
        "*/*",
        "",
    )
    .await;
    assert_eq!((st, rows_of(&body)), (200, vec![]));
}

/// A server whose queries may hold 32 MiB; one at a time.
fn limited_server(w: &str) -> ServerProc {
    ServerProc::start(
        w,
        &[
            "--token",
            "t",
            "--query-memory",
            "32MiB",
            "--max-concurrent-queries",
            "1",
        ],
    )
}

fn peak_rss_mb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb / 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_large_result_streams_in_bounded_memory_and_limits_hold() {
    let (w, _) = warehouse();
    let s = limited_server(&w);
    let c = client();
    // 2.4 GB of Arrow, 75 times the query's memory limit, read as it comes.
    let rows = 150_000_000u64;
    let sql = format!("SELECT value AS a, value * 2 AS b FROM range({rows})");
    let mut r = c
        .post(format!("{}/v1/sql", s.url))
        .bearer_auth("t")
        .header("accept", "application/vnd.apache.arrow.stream")
        .body(sql)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // While it streams, a second query finds no slot.
    let (st, h, body) = sql_as(&c, &s.url, "t", "SELECT 1", "*/*", "").await;
    assert_eq!((st, code(&body).as_str()), (429, "too_many_queries"));
    assert_eq!(h["retry-after"], "1");
    let mut decoder = arrow::ipc::reader::StreamDecoder::new();
    let (mut got, mut bytes, mut sum) = (0u64, 0u64, 0i128);
    while let Some(chunk) = r.chunk().await.unwrap() {
        bytes += chunk.len() as u64;
        let mut buf = arrow::buffer::Buffer::from(chunk.to_vec());
        while !buf.is_empty() {
            if let Some(b) = decoder.decode(&mut buf).unwrap() {
                got += b.num_rows() as u64;
                let a = b
                    .column(0)
                    .as_any()
                    .downcast_ref::<arrow::array::Int64Array>()
                    .unwrap();
                sum += a.values().iter().map(|v| *v as i128).sum::<i128>();
            }
        }
    }
    decoder.finish().unwrap();
    assert_eq!(got, rows, "every row arrived");
    assert_eq!(sum, (rows as i128) * (rows as i128 - 1) / 2, "each once");
    assert!(bytes > 2_400_000_000, "{bytes} bytes");
    let peak = peak_rss_mb(s.child.id());
    assert!(peak < 400, "server peak RSS {peak} MB for a 2.4 GB result");

    // A sort needing more than the limit spills, or fails with its own code; never more.
    let (st, _, body) = sql_as(
        &c,
        &s.url,
        "t",
        "SELECT count(*) AS n FROM (SELECT DISTINCT value FROM range(20000000))",
        "*/*",
        "",
    )
    .await;
    let text = String::from_utf8_lossy(&body).to_string();
    assert!(
        (st == 200 && rows_of(&body) == vec![serde_json::json!({"n": 20_000_000})])
            || (st == 400 && code(&body) == "query_out_of_memory"),
        "{st} {text}"
    );
    // Over the time limit: 504 with its code, and the slot is free again.
    let (st, _, body) = sql_as(
        &c,
        &s.url,
        "t",
        "SELECT count(*) FROM range(100000000000)",
        "*/*",
        "?timeout=300ms",
    )
    .await;
    assert_eq!((st, code(&body).as_str()), (504, "query_timeout"));
    let (st, _, _) = sql_as(&c, &s.url, "t", "SELECT 1 AS one", "*/*", "").await;
    assert_eq!(st, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_that_hangs_up_stops_its_query() {
    let (w, table) = warehouse();
    // Many small row groups, so the scan reads the table a little at a time.
    neve_ok(&["create", &table, "--set", "row_group_rows=5000"]);
    let data = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(data.path(), rows(0, 200_000)).unwrap();
    neve_ok(&["insert", &table, data.path().to_str().unwrap()]);
    let table_bytes = info(&table)["bytes"].as_u64().unwrap();
    let s = limited_server(&w);
    let c = client();
    let mut r = c
        .post(format!("{}/v1/sql", s.url))
        .bearer_auth("t")
        .header("accept", "application/x-ndjson")
        // Each row many times over: far more output than the client will take.
        .body("SELECT e.*, r.value FROM range(200) r CROSS JOIN events e")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut taken = 0;
    while taken < 1 << 20 {
        taken += r.chunk().await.unwrap().unwrap().len();
    }
    drop(r);
    // The query stops: the slot (max 1) comes back, and it reads nothing more.
    let mut freed = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (st, _, _) = sql_as(&c, &s.url, "t", "SELECT 1 AS one", "*/*", "").await;
        if st == 200 {
            freed = true;
            break;
        }
    }
    assert!(freed, "the query's slot was given back");
    let m = metrics_text(&c, &s.url).await;
    assert_eq!(metric(&m, "neve_queries_cancelled_total"), 1.0, "{m}");
    let read = metric(&m, "neve_query_read_bytes_total");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let later = metric(
        &metrics_text(&c, &s.url).await,
        "neve_query_read_bytes_total",
    );
    assert_eq!(read, later, "nothing read after the hang-up");
    eprintln!("read {read} of {table_bytes} bytes before the hang-up");
    assert!(
        read > 0.0 && read < table_bytes as f64,
        "{read} of {table_bytes}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn queries_see_one_snapshot_while_inserts_and_merges_commit() {
    let (w, _) = warehouse();
    let s = merging_server(&w);
    let c = client();
    create(&c, &s.url, "t", "events").await;
    // The first insert gives the table its columns.
    let (st, v) = insert(&c, &s.url, "t", "events", rows(0, 90), None).await;
    assert_eq!(st, 200, "{v}");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (c, url, stop) = (c.clone(), s.url.clone(), stop.clone());
        tokio::spawn(async move {
            let mut r = 1;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let (st, v) = insert(&c, &url, "t", "events", rows(r * 90, 90), None).await;
                assert_eq!(st, 200, "{v}");
                r += 1;
            }
            r
        })
    };
    let mut seen = std::collections::BTreeSet::new();
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(8) {
        let (st, h, body) = sql_as(
            &c,
            &s.url,
            "t",
            "SELECT count(*) AS n, count(DISTINCT id) AS d, coalesce(max(id), -1) AS m FROM events",
            "*/*",
            "",
        )
        .await;
        assert_eq!(st, 200, "{}", String::from_utf8_lossy(&body));
        let row = &rows_of(&body)[0];
        let (n, d, m) = (
            row["n"].as_i64().unwrap(),
            row["d"].as_i64().unwrap(),
            row["m"].as_i64().unwrap(),
        );
        // Whole inserts only, each row once, and no gap: one consistent version.
        assert_eq!(n, d, "duplicates at {:?}", h["neve-snapshot"]);
        assert_eq!(n % 90, 0, "a partial insert at {:?}", h["neve-snapshot"]);
        assert_eq!(m, n - 1, "missing rows at {:?}", h["neve-snapshot"]);
        seen.insert(n);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let inserts = writer.await.unwrap();
    let m = metrics_text(&c, &s.url).await;
    assert!(seen.len() > 3, "queries saw the table grow: {seen:?}");
    assert!(
        metric(&m, "neve_merges_total") > 0.0,
        "merges ran meanwhile"
    );
    assert!(inserts > 5);
}
