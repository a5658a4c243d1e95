//! The memory budget of queued requests (`ingest.max_pending_bytes`): what is over it now is
//! refused with 429 and a time to come back; what could never fit with 413; what fits, however
//! its batches share their buffers, is taken.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_held_by_queued_requests_is_bounded() {
    let (w, table) = warehouse();
    let s = ServerProc::start(
        &w,
        &[
            "--token",
            "t",
            "--flush-interval",
            "2s",
            "--max-pending-bytes",
            "256KiB",
            "--max-body-bytes",
            "128KiB",
        ],
    );
    let c = client();
    create(&c, &s.url, "t", "events").await;
    // 16 requests of ~50 KB at once, queued for 2 s: the budget holds only a few.
    let mut tasks = Vec::new();
    for k in 0..16u64 {
        let (c, url) = (c.clone(), s.url.clone());
        tasks.push(tokio::spawn(async move {
            let r = c
                .post(format!("{url}/v1/tables/events/insert"))
                .bearer_auth("t")
                .body(rows(k * 1000, 1000))
                .send()
                .await
                .unwrap();
            let retry = r.headers().get("retry-after").is_some();
            (k, r.status().as_u16(), retry)
        }));
    }
    let mut ok = Vec::new();
    let mut refused = 0;
    for t in tasks {
        let (k, status, retry) = t.await.unwrap();
        match status {
            200 => ok.push(k),
            429 => {
                assert!(retry, "429 says when to retry");
                refused += 1;
            }
            other => panic!("unexpected {other}"),
        }
    }
    assert!(
        !ok.is_empty() && refused > 0,
        "{} accepted, {refused} refused",
        ok.len()
    );
    let present = rows_per_request(&table, 1000);
    let mut got: Vec<u64> = present.keys().copied().collect();
    got.sort();
    ok.sort();
    assert_eq!(got, ok, "exactly the accepted requests are stored");
}

/// Twenty Int64 columns and two string ones (`id`, `region`), `rows` rows, as one Arrow IPC stream of one batch:
/// every column of the decoded batch points into the one message.
fn wide_arrow(rows: i64) -> Vec<u8> {
    use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    let mut fields = vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("region", DataType::Utf8, false),
    ];
    let mut arrays: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(
            (0..rows).map(|i| format!("e{i}")),
        )),
        Arc::new(StringArray::from_iter_values((0..rows).map(|i| {
            if i % 2 == 0 {
                "eu"
            } else {
                "us"
            }
        }))),
    ];
    for c in 0..20 {
        fields.push(Field::new(format!("n{c}"), DataType::Int64, false));
        arrays.push(Arc::new(Int64Array::from_iter_values(
            (0..rows).map(|i| i * 31 + c),
        )));
    }
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).unwrap();
    let mut body = Vec::new();
    let mut w = arrow::ipc::writer::StreamWriter::try_new(&mut body, &batch.schema()).unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
    drop(w);
    body
}

/// A server with a budget of `pending` for queued requests and `body` for one body, a table
/// `events` on it (the client, the server and the table's address).
async fn server_with_budget(pending: &str, body: &str) -> (reqwest::Client, ServerProc, String) {
    let (w, table) = warehouse();
    let s = ServerProc::start(
        &w,
        &[
            "--token",
            "t",
            "--max-pending-bytes",
            pending,
            "--max-body-bytes",
            body,
        ],
    );
    let c = client();
    create(&c, &s.url, "t", "events").await;
    (c, s, table)
}

/// POSTs `body` to `events`: the status, whether it said when to retry, and the answer.
async fn insert_body(
    c: &reqwest::Client,
    s: &ServerProc,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, bool, serde_json::Value) {
    let r = c
        .post(format!("{}/v1/tables/events/insert", s.url))
        .bearer_auth("t")
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    let (status, retry) = (r.status().as_u16(), r.headers().contains_key("retry-after"));
    (status, retry, json(r).await)
}

/// An Arrow request is counted at the memory it holds: its 22 columns share one message, which
/// counting each column's buffers as its own made over 20 times the body, so a request of a tenth of
/// the budget was refused with 429 on an idle server, and every retry with it.
#[tokio::test]
async fn an_arrow_request_is_counted_once_however_many_columns_share_its_message() {
    let (c, s, table) = server_with_budget("16MiB", "8MiB").await;
    let body = wide_arrow(10_000);
    assert!(
        body.len() > 1 << 20 && body.len() < 2 << 20,
        "about a tenth of the budget: {}",
        body.len()
    );
    let (status, _, v) = insert_body(&c, &s, "application/vnd.apache.arrow.stream", body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["rows"], 10_000);
    assert_eq!(counts(&table).0, 10_000);
}

/// A request larger once decoded than the whole budget can never be queued: 413 naming the
/// setting, not a 429 its client would retry forever; nothing is written.
#[tokio::test]
async fn a_request_the_whole_budget_could_not_hold_is_413_not_429() {
    let (c, s, table) = server_with_budget("1MiB", "1MiB").await;
    // About 600 KB of CSV (an id, a region and twenty columns of `1`): as Arrow, 20 columns of
    // 8 bytes a row and the strings, over 1 MiB.
    let mut csv = String::from("id,region");
    for c in 0..20 {
        csv.push_str(&format!(",n{c}"));
    }
    csv.push('\n');
    for i in 0..12_000 {
        csv.push_str(&format!("e{i},eu"));
        for _ in 0..20 {
            csv.push_str(",1");
        }
        csv.push('\n');
    }
    assert!(csv.len() < 1 << 20, "the body fits: {}", csv.len());
    let (status, retry, v) = insert_body(&c, &s, "text/csv", csv.into_bytes()).await;
    assert!(!retry, "no Retry-After: {v}");
    assert_eq!(status, 413, "{v}");
    assert_eq!(v["error"]["code"], "request_too_large", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("max_pending_bytes (1048576)") && message.contains("smaller requests"),
        "{message}"
    );
    assert_eq!(info(&table)["version"], 0, "nothing written");
}
