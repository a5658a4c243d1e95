//! `neve serve` and `neve proxy` over TLS, the built binary with the test certificates of
//! `tests/tls`: every port speaks TLS only, a renewed certificate is served without a restart,
//! and files that cannot be used stop the start with the file named.

use std::path::{Path, PathBuf};

use super::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/tls")
        .join(name)
}

/// Puts test pair `n` at `dir/tls.crt` and `dir/tls.key`, each by a rename, as a renewal does.
fn install_pair(dir: &Path, n: u32) {
    for (from, to) in [("pem", "tls.crt"), ("key", "tls.key")] {
        let tmp = dir.join(format!("{to}.tmp"));
        std::fs::copy(fixture(&format!("server{n}.{from}")), &tmp).unwrap();
        std::fs::rename(&tmp, dir.join(to)).unwrap();
    }
}

/// A client trusting only test CA file `ca` and, given a name, presenting that test client
/// certificate (a new client per call: no connection kept from before).
fn tls_client(ca: &str, identity: Option<&str>) -> reqwest::Client {
    let ca = std::fs::read(fixture(ca)).unwrap();
    let mut b = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap());
    if let Some(name) = identity {
        let mut pem = std::fs::read(fixture(&format!("{name}.pem"))).unwrap();
        pem.extend(std::fs::read(fixture(&format!("{name}.key"))).unwrap());
        b = b.identity(reqwest::Identity::from_pem(&pem).unwrap());
    }
    b.build().unwrap()
}

/// A client trusting only test CA `n`.
fn trusting(n: u32) -> reqwest::Client {
    tls_client(&format!("ca{n}.pem"), None)
}

/// The server's lines on stdout (its ports), read on a thread that keeps reading, so the
/// server never writes into a closed pipe.
fn start(args: &[&str]) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let mut child = Command::new(neve_bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

fn url_after(rx: &std::sync::mpsc::Receiver<String>, prefix: &str) -> String {
    let line = rx.recv_timeout(Duration::from_secs(60)).unwrap();
    line.strip_prefix(prefix)
        .unwrap_or_else(|| panic!("expected '{prefix}…', got {line:?}"))
        .to_string()
}

/// `neve serve` over `warehouse` with token `t`, its S3 port, and `tls` (the TLS flags): the
/// process, and the HTTP and S3 ports' URLs.
fn start_tls(warehouse: &str, tls: &[&str]) -> (std::process::Child, String, String) {
    let mut args = vec![
        "serve",
        "--warehouse",
        warehouse,
        "--listen",
        "127.0.0.1:0",
        "--no-maintenance",
        "--flush-interval",
        "50ms",
        "--token",
        "t",
        "--s3-listen",
        "127.0.0.1:0",
        "--access-key-id",
        "AKIDTLS",
        "--secret-access-key",
        "secret-tls",
    ];
    args.extend_from_slice(tls);
    let (child, lines) = start(&args);
    let url = url_after(&lines, "neve serve listening on ");
    let s3 = url_after(&lines, "neve proxy listening on ");
    (child, url, s3)
}

#[tokio::test]
async fn https_only_and_a_renewed_certificate_served_without_a_restart() {
    let certs = tempfile::tempdir().unwrap();
    install_pair(certs.path(), 1);
    let (_dir, warehouse) = crate::common::local_table("lake");
    let (cert, key) = (
        certs.path().join("tls.crt").display().to_string(),
        certs.path().join("tls.key").display().to_string(),
    );
    let (mut child, url, s3) = start_tls(&warehouse, &["--tls-cert", &cert, "--tls-key", &key]);
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    assert!(s3.starts_with("https://127.0.0.1:"), "{s3}");

    let c = trusting(1);
    create(&c, &url, "t", "events").await;
    let (status, body) = insert(&c, &url, "t", "events", rows(0, 300), None).await;
    assert_eq!(status, 200, "{body}");
    let count = |c: reqwest::Client| {
        let url = url.clone();
        async move {
            let r = c
                .post(format!("{url}/v1/sql"))
                .bearer_auth("t")
                .header("accept", "application/x-ndjson")
                .body("SELECT count(*) AS n FROM events")
                .send()
                .await?;
            assert_eq!(r.status(), 200);
            let v: serde_json::Value = serde_json::from_slice(&r.bytes().await?).unwrap();
            Ok::<_, reqwest::Error>(v["n"].as_u64().unwrap())
        }
    };
    assert_eq!(count(trusting(1)).await.unwrap(), 300);
    // The S3 port answers over TLS with the same certificate.
    let health = trusting(1)
        .get(format!("{s3}/_neve/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);

    // Nothing in the clear: plain HTTP to either port gets no answer, and the token sent
    // with it reaches no handler.
    for port_url in [&url, &s3] {
        let plain = port_url.replacen("https://", "http://", 1);
        let r = client()
            .get(format!("{plain}/v1/tables/events"))
            .bearer_auth("t")
            .send()
            .await;
        assert!(
            r.is_err(),
            "plain HTTP answered: {:?}",
            r.map(|r| r.status())
        );
    }
    // A client that does not trust the certificate's CA refuses the server.
    assert!(count(trusting(2)).await.is_err());
    // Both refused handshakes counted on the HTTP port, the plain request on the S3 port.
    let text = metrics_text(&trusting(1), &url).await;
    assert!(
        metric(&text, "neve_tls_handshake_failures_total") >= 2.0,
        "{text}"
    );
    let text = metrics_text(&trusting(1), &format!("{s3}/_neve")).await;
    assert!(
        metric(&text, "neve_proxy_tls_handshake_failures_total") >= 1.0,
        "{text}"
    );
    // The S3 port's metrics end with the process's own figures, once.
    assert!(metric(&text, "process_threads") >= 1.0, "{text}");
    assert_eq!(text.matches("# EOF").count(), 1, "{text}");

    // A renewal by another CA: new connections get it, with no restart.
    install_pair(certs.path(), 2);
    assert_eq!(count(trusting(2)).await.unwrap(), 300);
    assert!(count(trusting(1)).await.is_err());
    let health = trusting(2)
        .get(format!("{s3}/_neve/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);

    // A renewal caught half-written (a certificate without its key): the one served stays.
    let tmp = certs.path().join("tls.crt.tmp");
    std::fs::copy(fixture("server1.pem"), &tmp).unwrap();
    std::fs::rename(&tmp, certs.path().join("tls.crt")).unwrap();
    let c2 = trusting(2);
    let (status, body) = insert(&c2, &url, "t", "events", rows(300, 200), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(count(trusting(2)).await.unwrap(), 500);
    let text = metrics_text(&trusting(2), &url).await;
    assert_eq!(metric(&text, "neve_tls_certificate_reloads_total"), 1.0);
    assert_eq!(
        metric(&text, "neve_tls_certificate_reload_failures_total"),
        1.0
    );
    // The served certificate's notAfter (`openssl x509 -enddate`: Nov 11 13:46:49 2126 GMT).
    assert_eq!(
        metric(&text, "neve_tls_certificate_expiry_timestamp_seconds"),
        4_950_078_409.0
    );

    let _ = child.kill();
    let _ = child.wait();
    // Every acknowledged row, read from the folder without the server.
    assert_eq!(counts(&format!("{warehouse}/events")).0, 500);
}

/// A client trusting test CA 1 and presenting the client certificate `name` (`client`, signed
/// by the CA the server is given; `other`, signed by another).
fn presenting(name: &str) -> reqwest::Client {
    tls_client("ca1.pem", Some(name))
}

/// Puts test CA file `name` at `path` by a rename, as a secret's update does.
fn install_ca(path: &Path, name: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::copy(fixture(name), &tmp).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// `--tls-client-ca`: on the HTTP port and the S3 port, a client without a certificate, or
/// with one another CA signed, fails its handshake and touches nothing; a client with the
/// right certificate still needs its token. A new client CA file is in force for the next
/// connections, with no restart; one that cannot be used keeps the CAs before.
#[tokio::test]
async fn mutual_tls_refuses_clients_without_a_certificate_the_ca_signed() {
    let (_dir, warehouse) = crate::common::local_table("lake");
    let cas = tempfile::tempdir().unwrap();
    let ca_file = cas.path().join("clients.pem");
    install_ca(&ca_file, "client-ca.pem");
    let (cert, key, client_ca) = (
        fixture("server1.pem").display().to_string(),
        fixture("server1.key").display().to_string(),
        ca_file.display().to_string(),
    );
    let (mut child, url, s3) = start_tls(
        &warehouse,
        &[
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--tls-client-ca",
            &client_ca,
        ],
    );

    let c = presenting("client");
    create(&c, &url, "t", "events").await;
    let (status, body) = insert(&c, &url, "t", "events", rows(0, 30), None).await;
    assert_eq!(status, 200, "{body}");
    // The certificate is not a token.
    let r = c.get(format!("{url}/v1/tables")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let health = c.get(format!("{s3}/_neve/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);

    for (what, client) in [
        ("no certificate", trusting(1)),
        ("another CA's", presenting("other")),
    ] {
        for port in [&url, &s3] {
            let e = client
                .post(format!("{port}/v1/tables/events/insert"))
                .bearer_auth("t")
                .body(rows(100, 110))
                .send()
                .await;
            assert!(e.is_err(), "{what} on {port}: {e:?}");
        }
    }
    let text = metrics_text(&c, &url).await;
    assert!(
        metric(&text, "neve_tls_handshake_failures_total") >= 2.0,
        "{text}"
    );

    // The client CA rotated: the other CA's clients are let in, the first CA's no longer.
    install_ca(&ca_file, "other-ca.pem");
    let other = presenting("other");
    let (status, body) = insert(&other, &url, "t", "events", rows(30, 5), None).await;
    assert_eq!(status, 200, "{body}");
    assert!(presenting("client")
        .get(format!("{url}/healthz"))
        .send()
        .await
        .is_err());
    // A file that cannot be used: the CAs before stay.
    std::fs::write(&ca_file, "not a certificate").unwrap();
    let (status, body) = insert(&presenting("other"), &url, "t", "events", rows(35, 5), None).await;
    assert_eq!(status, 200, "{body}");
    let text = metrics_text(&presenting("other"), &url).await;
    assert_eq!(metric(&text, "neve_tls_certificate_reloads_total"), 1.0);
    assert_eq!(
        metric(&text, "neve_tls_certificate_reload_failures_total"),
        1.0
    );
    let _ = child.kill();
    let _ = child.wait();
    // Only the presenting clients' rows.
    assert_eq!(counts(&format!("{warehouse}/events")).0, 40);
}

#[test]
fn certificates_that_cannot_be_used_stop_the_start_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let warehouse = dir.path().display().to_string();
    let (server1_pem, server2_key) = (
        fixture("server1.pem").display().to_string(),
        fixture("server2.key").display().to_string(),
    );
    let missing = dir.path().join("nope.pem").display().to_string();
    let server1_key = fixture("server1.key").display().to_string();
    let not_a_ca = fixture("client.key").display().to_string();
    let cases: [(&[&str], &str); 4] = [
        (
            &[
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--tls-cert",
                &server1_pem,
                "--tls-key",
                &server1_key,
                "--tls-client-ca",
                &not_a_ca,
            ],
            "client.key",
        ),
        (
            &[
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--tls-cert",
                &server1_pem,
                "--tls-key",
                &server2_key,
            ],
            "cannot be used with the certificate",
        ),
        (
            &[
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--tls-cert",
                &missing,
                "--tls-key",
                &server1_key,
            ],
            "nope.pem",
        ),
        (
            &[
                "proxy",
                "--listen",
                "127.0.0.1:0",
                "--access-key-id",
                "AKIDTLS",
                "--secret-access-key",
                "secret-of-the-test",
                "--tls-cert",
                &server1_pem,
                "--tls-key",
                &server2_key,
            ],
            "cannot be used with the certificate",
        ),
    ];
    for (args, says) in cases {
        let out = Command::new(neve_bin())
            .args(args)
            .args(["--warehouse", &warehouse])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?} started listening");
    }
    // One file without the other is a usage error.
    let out = Command::new(neve_bin())
        .args([
            "serve",
            "--warehouse",
            &warehouse,
            "--tls-cert",
            &server1_pem,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tls-key"));
}
