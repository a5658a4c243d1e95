//! Tokens revoked and added without a restart: `neve serve` reads its config file's tokens
//! again on SIGHUP; a file it cannot use leaves the tokens in force as they were.

use super::*;

async fn status(c: &reqwest::Client, url: &str, token: &str) -> u16 {
    c.get(format!("{url}/v1/tables"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

fn hangup(s: &ServerProc) {
    let ok = Command::new("kill")
        .args(["-HUP", &s.child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

/// Waits until the server's metric `name` reaches `value`.
async fn metric_reaches(c: &reqwest::Client, url: &str, name: &str, value: f64) {
    let until = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let now = metric(&metrics_text(c, url).await, name);
        if now == value {
            return;
        }
        assert!(
            std::time::Instant::now() < until,
            "{name} is {now}, not {value}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn sighup_puts_the_files_tokens_in_force_and_a_bad_file_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (_lake, warehouse) = crate::common::local_table("lake");
    let tenant = |token: &str, role: &str| {
        format!("[[tenants]]\nname = \"a\"\ntokens = [{{ sha256 = \"{{token:{token}}}\", role = \"{role}\" }}]\n")
    };
    let config = config_file(&dir, &tenant("token-old", "admin"));
    let s = ServerProc::start(&warehouse, &["--config", &config]);
    let c = client();
    assert_eq!(status(&c, &s.url, "token-old").await, 200);
    assert_eq!(status(&c, &s.url, "token-new").await, 401);

    // The old token revoked, a new one (a reader) in its place.
    config_file(&dir, &tenant("token-new", "read"));
    hangup(&s);
    metric_reaches(&c, &s.url, "neve_token_reloads_total", 1.0).await;
    assert_eq!(status(&c, &s.url, "token-new").await, 200);
    assert_eq!(status(&c, &s.url, "token-old").await, 401);
    // Its role is the file's: a reader may not create a table.
    let r = c
        .put(format!("{}/v1/tables/events", s.url))
        .bearer_auth("token-new")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    // A file that renames the tenant, and one that does not parse: refused, nothing changes.
    config_file(
        &dir,
        "[[tenants]]\nname = \"a2\"\ntokens = [{ sha256 = \"{token:token-other}\", role = \"admin\" }]\n",
    );
    hangup(&s);
    metric_reaches(&c, &s.url, "neve_token_reload_failures_total", 1.0).await;
    std::fs::write(&config, "[[tenants]\nname =").unwrap();
    hangup(&s);
    metric_reaches(&c, &s.url, "neve_token_reload_failures_total", 2.0).await;
    assert_eq!(status(&c, &s.url, "token-new").await, 200);
    assert_eq!(status(&c, &s.url, "token-other").await, 401);
    assert_eq!(status(&c, &s.url, "token-old").await, 401);
    assert_eq!(
        metric(&metrics_text(&c, &s.url).await, "neve_token_reloads_total"),
        1.0
    );
}

#[tokio::test]
async fn without_tenants_the_admin_token_stays_what_the_flag_gave() {
    let dir = tempfile::tempdir().unwrap();
    let (_lake, warehouse) = crate::common::local_table("lake");
    let config = config_file(&dir, "[ingest]\nflush_interval = \"100ms\"\n");
    let s = ServerProc::start(&warehouse, &["--config", &config, "--token", "flag-token"]);
    let c = client();
    assert_eq!(status(&c, &s.url, "flag-token").await, 200);
    hangup(&s);
    metric_reaches(&c, &s.url, "neve_token_reload_failures_total", 1.0).await;
    assert_eq!(status(&c, &s.url, "flag-token").await, 200);
    assert_eq!(status(&c, &s.url, "other").await, 401);
}
