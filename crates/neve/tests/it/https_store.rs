//! A store behind HTTPS whose certificate a private CA signed, as an on-premises MinIO often
//! is: neve trusts the CA `SSL_CERT_FILE` names, and without it refuses the store, changing
//! nothing. A MinIO of its own (the binary `make test` installed) with the test certificates.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Instant;

use crate::common::neve_bin;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/tls")
        .join(name)
}

struct TlsMinio {
    child: Child,
    _dir: tempfile::TempDir,
    endpoint: String,
}

impl Drop for TlsMinio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn var(name: &str) -> String {
    std::env::var(name)
        .unwrap_or_else(|_| panic!("{name} is not set: run the tests with `make test`"))
}

impl TlsMinio {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let certs = dir.path().join("certs");
        std::fs::create_dir_all(&certs).unwrap();
        std::fs::copy(fixture("server1.pem"), certs.join("public.crt")).unwrap();
        std::fs::copy(fixture("server1.key"), certs.join("private.key")).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(var("NEVE_MINIO_BIN"))
            .args(["server", "--quiet", "--certs-dir"])
            .arg(&certs)
            .args(["--address", &format!("127.0.0.1:{port}")])
            .args(["--console-address", "127.0.0.1:0"])
            .arg(dir.path().join("data"))
            .env("MINIO_ROOT_USER", var("AWS_ACCESS_KEY_ID"))
            .env("MINIO_ROOT_PASSWORD", var("AWS_SECRET_ACCESS_KEY"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let endpoint = format!("https://127.0.0.1:{port}");
        // The bucket, made by boto3 trusting the CA (also the wait for MinIO to listen).
        let made = format!(
            "import boto3, time\n\
             for i in range(300):\n\
             \x20   try:\n\
             \x20       boto3.client('s3', endpoint_url='{endpoint}', verify='{ca}').create_bucket(Bucket='private'); break\n\
             \x20   except Exception as e:\n\
             \x20       err = e; time.sleep(0.1)\n\
             else:\n\
             \x20   raise err\n",
            ca = fixture("ca1.pem").display()
        );
        let started = Instant::now();
        let out = Command::new(var("NEVE_TEST_PYTHON"))
            .args(["-c", &made])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "no bucket after {:?}: {}",
            started.elapsed(),
            String::from_utf8_lossy(&out.stderr)
        );
        Self {
            child,
            _dir: dir,
            endpoint,
        }
    }

    /// neve against this MinIO, trusting the CA file `ca` (`None`: the system's CAs only).
    fn neve(&self, ca: Option<&str>, args: &[&str]) -> Output {
        let mut c = Command::new(neve_bin());
        c.args(args).env("AWS_ENDPOINT_URL", &self.endpoint);
        match ca {
            Some(ca) => c.env("SSL_CERT_FILE", fixture(ca)),
            None => c.env_remove("SSL_CERT_FILE"),
        };
        c.output().unwrap()
    }
}

#[test]
fn a_store_signed_by_a_private_ca_is_trusted_only_through_ssl_cert_file() {
    let minio = TlsMinio::start();
    let table = "s3://private/events";
    let rows = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(rows.path(), "{\"id\": 1}\n{\"id\": 2}\n").unwrap();
    let rows = rows.path().to_str().unwrap();

    // Not trusted: refused as a storage error naming the certificate, and nothing written.
    for ca in [None, Some("ca2.pem")] {
        let out = minio.neve(ca, &["create", table]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(74), "{ca:?}: {stderr}");
        assert!(stderr.contains("certificate"), "{ca:?}: {stderr}");
    }
    let out = minio.neve(Some("ca1.pem"), &["info", "--json", table]);
    assert!(
        !out.status.success(),
        "a table exists after refused creates"
    );

    let ok = |out: Output| {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    ok(minio.neve(Some("ca1.pem"), &["create", table]));
    ok(minio.neve(Some("ca1.pem"), &["insert", table, rows]));
    // An insert that does not trust the store fails and adds nothing.
    let out = minio.neve(Some("ca2.pem"), &["insert", table, rows]);
    assert_eq!(out.status.code(), Some(74));
    let count = ok(minio.neve(
        Some("ca1.pem"),
        &[
            "sql",
            "SELECT count(*) AS n, sum(id) AS s FROM t",
            "--table",
            &format!("t={table}"),
            "--format",
            "ndjson",
        ],
    ));
    let v: serde_json::Value = serde_json::from_str(count.lines().next().unwrap()).unwrap();
    assert_eq!(
        (v["n"].as_u64(), v["s"].as_u64()),
        (Some(2), Some(3)),
        "{count}"
    );
    // The client settings of the environment apply, as in the AWS SDKs: with no CA, the
    // store is read only when AWS_ALLOW_INVALID_CERTIFICATES says so.
    let info = |allow: &str| {
        Command::new(neve_bin())
            .args(["info", "--json", table])
            .env("AWS_ENDPOINT_URL", &minio.endpoint)
            .env_remove("SSL_CERT_FILE")
            .env("AWS_ALLOW_INVALID_CERTIFICATES", allow)
            .output()
            .unwrap()
    };
    assert_eq!(info("false").status.code(), Some(74));
    let text = ok(info("true"));
    assert!(text.contains("\"version\""), "{text}");
}
