//! `--log-format json` (or `NEVE_LOG_FORMAT=json`): every line on stderr one JSON object, a
//! request's events carrying its id, method and route.

use super::*;

#[tokio::test]
async fn json_logs_carry_each_request_its_id_status_and_time() {
    let dir = tempfile::tempdir().unwrap();
    let warehouse = dir.path().join("w");
    let mut child = Command::new(neve_bin())
        .args(["serve", "--warehouse", warehouse.to_str().unwrap()])
        .args([
            "--listen",
            "127.0.0.1:0",
            "--no-maintenance",
            "--token",
            "log-token",
        ])
        .env("NEVE_LOG_FORMAT", "json")
        .env("NEVE_LOG", "warn,neve_server=debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let url = listening_url(&mut child, "neve serve listening on ");
    let c = client();
    for (id, token, want) in [
        ("log-test-ok", "log-token", 200),
        ("log-test-401", "nope", 401),
    ] {
        let r = c
            .get(format!("{url}/v1/tables"))
            .bearer_auth(token)
            .header("x-request-id", id)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), want);
    }
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(child.wait().unwrap().success());

    let events: Vec<serde_json::Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    for (id, status) in [("log-test-ok", 200), ("log-test-401", 401)] {
        let answered = events
            .iter()
            .find(|e| {
                e["message"] == "answered"
                    && e["spans"]
                        .as_array()
                        .is_some_and(|s| s.iter().any(|s| s["request_id"] == id))
            })
            .unwrap_or_else(|| panic!("no `answered` event of {id}:\n{stderr}"));
        assert_eq!(answered["status"], status, "{answered}");
        assert_eq!(answered["level"], "DEBUG");
        assert!(
            answered["ms"].as_f64().is_some_and(|ms| ms >= 0.0),
            "{answered}"
        );
        assert!(answered["timestamp"].is_string(), "{answered}");
        let span = &answered["spans"][0];
        assert_eq!(span["method"], "GET", "{answered}");
        assert_eq!(span["route"], "/v1/tables", "{answered}");
        // Whose request it was, once its token is known.
        let tenant = if status == 200 {
            serde_json::json!("default")
        } else {
            serde_json::Value::Null
        };
        assert_eq!(span["tenant"], tenant, "{answered}");
    }
}

/// The proxy's access log: each request's method, path, status and time, never its query
/// (a presigned URL's signature).
#[tokio::test]
async fn the_proxy_logs_each_answer_without_the_query() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(neve_bin())
        .args(["proxy", "--warehouse", dir.path().to_str().unwrap()])
        .args(["--listen", "127.0.0.1:0", "--access-key-id", "AKIDLOGS"])
        .args(["--secret-access-key", "secret-of-the-log-test"])
        .env("NEVE_LOG_FORMAT", "json")
        .env("NEVE_LOG", "warn,neve_proxy=debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let url = listening_url(&mut child, "neve proxy listening on ");
    let forged = format!(
        "{url}/events/d%3D1/part-1.parquet?X-Amz-Algorithm=AWS4-HMAC-SHA256\
         &X-Amz-Credential=AKIDLOGS%2F20261205%2Fus-east-1%2Fs3%2Faws4_request\
         &X-Amz-Date=20261205T000000Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host\
         &X-Amz-Signature=0badc0ffee0badc0ffee"
    );
    let r = client().get(&forged).send().await.unwrap();
    let status = r.status().as_u16();
    assert!(r.status().is_client_error(), "{status}");
    let r = client()
        .get(format!("{url}/_neve/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(child.wait().unwrap().success());
    assert!(!stderr.contains("0badc0ffee"), "{stderr}");
    let answered: Vec<serde_json::Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .filter(|e: &serde_json::Value| e["message"] == "answered")
        .collect();
    let find = |path: &str| {
        answered
            .iter()
            .find(|e| e["path"] == path)
            .unwrap_or_else(|| panic!("no answer logged for {path}:\n{stderr}"))
    };
    let refused = find("/events/d%3D1/part-1.parquet");
    assert_eq!(refused["status"], status);
    assert_eq!(refused["method"], "GET");
    assert!(refused["ms"].as_f64().is_some_and(|ms| ms >= 0.0));
    assert_eq!(find("/_neve/healthz")["status"], 200);
}

/// A bad value names the choices (a usage error, 64), not a silent fallback to text.
#[test]
fn an_unknown_log_format_is_a_usage_error() {
    let out = Command::new(neve_bin())
        .args(["--log-format", "yaml", "info", "."])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("yaml") && err.contains("json"), "{err}");
}
