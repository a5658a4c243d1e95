//! TLS for the processes' listeners (`neve serve`'s HTTP, Flight SQL and S3 ports, `neve
//! proxy`): a PEM certificate chain and key, read at start and again whenever either file
//! changes, so a renewed certificate (cert-manager, certbot) is served to new connections
//! without a restart. A renewal caught half-written keeps the certificate served before.
//! With `client_ca`, every client must present a certificate a CA in that file signed (mutual
//! TLS); that file too is read again when it changes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::RootCertStore;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The `[tls]` section of the shared config file, or `--tls-cert` and `--tls-key`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    /// The server's certificate, then any intermediates, in PEM.
    pub cert: PathBuf,
    /// Its private key in PEM (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// With it, mutual TLS: a client must present a certificate chaining to one of the CA
    /// certificates in this PEM file, or its handshake fails. Tokens and keys are still asked
    /// for: the certificate says which machine connects, not what it may touch. Read again
    /// when it changes, as the certificate is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_ca: Option<PathBuf>,
}

/// What a file looked like when it was last read: a rewrite, a rename over it or a swapped
/// symlink (a Kubernetes secret's update) changes one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<std::time::SystemTime>,
    len: u64,
    #[cfg(unix)]
    inode: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp {
        modified: m.modified().ok(),
        len: m.len(),
        #[cfg(unix)]
        inode: std::os::unix::fs::MetadataExt::ino(&m),
    })
}

/// What TLS counts, for the process's Prometheus registry.
#[derive(Debug, Clone, Default)]
pub struct TlsMetrics {
    /// Certificates read again after their files changed.
    pub reloads: Counter,
    /// Changed files that could not be used (the certificate served before stays): the one to
    /// alert on, or the old certificate is served until it expires.
    pub reload_failures: Counter,
    /// Connections closed in their handshake: plain HTTP, an untrusting client, a timeout.
    pub handshake_failures: Counter,
    /// When the certificate served stops being valid (its `notAfter`, Unix seconds): alert
    /// when it nears, as a renewal that never came shows nowhere else until clients refuse.
    pub expiry: Gauge,
}

impl TlsMetrics {
    /// Registers the counters as `<prefix>_tls_…`.
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("tls");
        r.register(
            "certificate_reloads",
            "TLS certificates read again after their files changed",
            self.reloads.clone(),
        );
        r.register(
            "certificate_reload_failures",
            "Changed TLS certificate files that could not be used (the certificate before is still served)",
            self.reload_failures.clone(),
        );
        r.register(
            "handshake_failures",
            "Connections closed during their TLS handshake",
            self.handshake_failures.clone(),
        );
        r.register(
            "certificate_expiry_timestamp_seconds",
            "When the TLS certificate served expires (its notAfter), in Unix seconds",
            self.expiry.clone(),
        );
    }

    /// Records the expiry of the certificate now served, warning when it has passed.
    fn served(&self, files: &TlsFiles, key: &CertifiedKey) {
        match key
            .end_entity_cert()
            .ok()
            .and_then(|c| not_after(c.as_ref()))
        {
            Some(t) => {
                self.expiry.set(t);
                if t < chrono::Utc::now().timestamp() {
                    tracing::warn!(
                        cert = %files.cert.display(),
                        expired = %chrono::DateTime::from_timestamp(t, 0).unwrap_or_default(),
                        "the TLS certificate served has expired: clients will refuse it"
                    );
                }
            }
            None => tracing::warn!(
                cert = %files.cert.display(),
                "the TLS certificate's expiry could not be read: not exported"
            ),
        }
    }
}

/// A DER certificate's `notAfter`, in Unix seconds: the validity that follows the version,
/// serial number, signature algorithm and issuer of its `TBSCertificate` (RFC 5280, 4.1).
/// rustls has checked the certificate's form; this reads one date of it.
fn not_after(der: &[u8]) -> Option<i64> {
    /// The tag, content and the bytes after one TLV.
    fn tlv(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
        let (&tag, rest) = b.split_first()?;
        let (&first, rest) = rest.split_first()?;
        let (len, rest) = if first < 0x80 {
            (usize::from(first), rest)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            let len = rest[..n]
                .iter()
                .fold(0usize, |l, &b| l << 8 | usize::from(b));
            (len, &rest[n..])
        };
        (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
    }
    const SEQUENCE: u8 = 0x30;
    let (SEQUENCE, cert, _) = tlv(der)? else {
        return None;
    };
    let (SEQUENCE, tbs, _) = tlv(cert)? else {
        return None;
    };
    let mut rest = tbs;
    // `[0] EXPLICIT Version`, absent for v1.
    if rest.first() == Some(&0xa0) {
        rest = tlv(rest)?.2;
    }
    for _ in 0..3 {
        // serialNumber, signature, issuer.
        rest = tlv(rest)?.2;
    }
    let (SEQUENCE, validity, _) = tlv(rest)? else {
        return None;
    };
    let (_, _, after) = tlv(validity)?; // past notBefore
    let (tag, time, _) = tlv(after)?;
    asn1_time(tag, std::str::from_utf8(time).ok()?)
}

/// An X.509 time: `UTCTime` (tag 0x17, `YYMMDDHHMMSSZ`, years 1950–2049) or `GeneralizedTime`
/// (0x18, `YYYYMMDDHHMMSSZ`), in Unix seconds.
fn asn1_time(tag: u8, text: &str) -> Option<i64> {
    let full = match tag {
        0x17 => {
            let yy: u32 = text.get(..2)?.parse().ok()?;
            format!("{}{text}", if yy >= 50 { "19" } else { "20" })
        }
        0x18 => text.to_string(),
        _ => return None,
    };
    // chrono takes one-digit fields; DER's are all two (RFC 5280, 4.1.2.5).
    let digits = full.strip_suffix('Z')?;
    if digits.len() != 14 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let t = chrono::NaiveDateTime::parse_from_str(&full, "%Y%m%d%H%M%SZ").ok()?;
    Some(t.and_utc().timestamp())
}

/// The certificate served, and the files' stamps it was read at.
#[derive(Debug)]
struct Loaded {
    stamps: (Option<Stamp>, Option<Stamp>),
    key: Arc<CertifiedKey>,
}

/// Serves the certificate of [`TlsFiles`], reading the files again when they change.
#[derive(Debug)]
pub struct Certificates {
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
    loaded: Mutex<Loaded>,
    metrics: TlsMetrics,
    /// The CAs clients' certificates must chain to, with `client_ca`.
    client: Option<Mutex<ClientRoots>>,
}

/// A `client_ca` file as last read; `generation` counts the reads that changed it, so each
/// acceptor rebuilds its configuration once per change.
#[derive(Debug)]
struct ClientRoots {
    stamp: Option<Stamp>,
    roots: Arc<RootCertStore>,
    generation: u64,
}

/// rustls's ring provider, its AES-128-GCM suites first (the server's order decides, see
/// `acceptor`): TLS 1.3's mandatory suite, as Go's servers prefer it, and cheaper per byte than
/// AES-256, which rustls's clients ask for first (BENCHMARKS.md, "TLS").
fn provider() -> Arc<CryptoProvider> {
    use rustls::CipherSuite as C;
    let mut p = rustls::crypto::ring::default_provider();
    let rank = |s: &rustls::SupportedCipherSuite| {
        let version = match s.version().version {
            rustls::ProtocolVersion::TLSv1_3 => 0,
            _ => 1,
        };
        let aes128 = matches!(
            s.suite(),
            C::TLS13_AES_128_GCM_SHA256
                | C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
                | C::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
        );
        (version, !aes128)
    };
    // Stable: the provider's order otherwise (AES-256, then ChaCha20).
    p.cipher_suites.sort_by_key(rank);
    Arc::new(p)
}

impl Certificates {
    /// Reads the certificate and key; an error names the file and what is wrong with it.
    pub fn load(files: TlsFiles, metrics: TlsMetrics) -> Result<Arc<Self>> {
        let provider = provider();
        let stamps = (stamp(&files.cert), stamp(&files.key));
        let key = Arc::new(read(&files, &provider)?);
        let client = match &files.client_ca {
            Some(path) => Some(Mutex::new(ClientRoots {
                stamp: stamp(path),
                roots: read_roots(path)?,
                generation: 0,
            })),
            None => None,
        };
        metrics.served(&files, &key);
        Ok(Arc::new(Self {
            files,
            provider,
            loaded: Mutex::new(Loaded { stamps, key }),
            metrics,
            client,
        }))
    }

    /// The client CAs in force, and their generation: read again first if the file changed.
    /// A file that cannot be used keeps the CAs read before, as a half renewal does.
    fn client_roots(&self) -> Option<(u64, Arc<RootCertStore>)> {
        let (client, path) = (self.client.as_ref()?, self.files.client_ca.as_ref()?);
        let now = stamp(path);
        let mut c = client.lock().expect("tls state");
        if now != c.stamp {
            c.stamp = now;
            match read_roots(path) {
                Ok(roots) => {
                    tracing::info!(client_ca = %path.display(), "TLS client CAs read again: new connections are checked against them");
                    self.metrics.reloads.inc();
                    c.roots = roots;
                    c.generation += 1;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "TLS client CA file changed but cannot be used; the CAs read before stay");
                    self.metrics.reload_failures.inc();
                }
            }
        }
        Some((c.generation, c.roots.clone()))
    }

    /// The certificate to serve now: read again first if a file changed since. A read that
    /// fails (a renewal half-written, a key that does not match yet) is logged once and the
    /// certificate served before stays, until the files change again.
    pub fn current(&self) -> Arc<CertifiedKey> {
        let stamps = (stamp(&self.files.cert), stamp(&self.files.key));
        let mut loaded = self.loaded.lock().expect("tls state");
        if stamps != loaded.stamps {
            loaded.stamps = stamps;
            match read(&self.files, &self.provider) {
                Ok(key) => {
                    tracing::info!(cert = %self.files.cert.display(), "TLS certificate read again: new connections get it");
                    self.metrics.reloads.inc();
                    self.metrics.served(&self.files, &key);
                    loaded.key = Arc::new(key);
                }
                Err(e) => {
                    tracing::warn!(
                        error = %e,
                        "TLS certificate files changed but cannot be used; serving the one read before"
                    );
                    self.metrics.reload_failures.inc();
                }
            }
        }
        loaded.key.clone()
    }

    /// An acceptor offering `alpn` (e.g. `h2` for gRPC, `http/1.1`).
    pub fn acceptor(self: &Arc<Self>, alpn: &[&[u8]]) -> Result<Acceptor> {
        let alpn: Vec<Vec<u8>> = alpn.iter().map(|p| p.to_vec()).collect();
        let (generation, roots) = self.client_roots().unzip();
        let config = self.config(&alpn, roots)?;
        Ok(Acceptor {
            certs: self.clone(),
            alpn,
            current: Arc::new(Mutex::new((generation.unwrap_or(0), config))),
            failures: self.metrics.handshake_failures.clone(),
        })
    }

    fn config(
        self: &Arc<Self>,
        alpn: &[Vec<u8>],
        client_roots: Option<Arc<RootCertStore>>,
    ) -> Result<tokio_rustls::TlsAcceptor> {
        let bad = |path: &Path, e: &dyn std::fmt::Display| Error::Tls {
            path: path.to_path_buf(),
            reason: e.to_string(),
        };
        let builder = rustls::ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(&self.files.cert, &e))?;
        let builder = match (client_roots, &self.files.client_ca) {
            (Some(roots), Some(path)) => {
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(roots, self.provider.clone())
                        .build()
                        .map_err(|e| bad(path, &e))?;
                builder.with_client_cert_verifier(verifier)
            }
            _ => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(Arc::new(Resolver(self.clone())));
        config.alpn_protocols = alpn.to_vec();
        config.ignore_client_order = true;
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }
}

/// Completes accepted connections' TLS handshakes, counting those that fail.
#[derive(Clone)]
pub struct Acceptor {
    certs: Arc<Certificates>,
    alpn: Vec<Vec<u8>>,
    /// The configuration in force, built for this generation of the client CAs.
    current: Arc<Mutex<(u64, tokio_rustls::TlsAcceptor)>>,
    failures: Counter,
}

impl Acceptor {
    /// The configuration for a new connection: built again when the client CAs changed.
    fn now(&self) -> tokio_rustls::TlsAcceptor {
        let mut current = self.current.lock().expect("tls state");
        if let Some((generation, roots)) = self.certs.client_roots() {
            if generation != current.0 {
                match self.certs.config(&self.alpn, Some(roots)) {
                    Ok(config) => *current = (generation, config),
                    Err(e) => {
                        tracing::warn!(error = %e, "TLS client CAs cannot be used; the ones before stay")
                    }
                }
            }
        }
        current.1.clone()
    }

    /// The TLS handshake of an accepted connection, within `timeout`; `None` (logged at
    /// debug, counted) when it fails: a plain-HTTP client, an untrusting one, a scanner, a
    /// client without the certificate mutual TLS asks for.
    pub async fn handshake(
        &self,
        tcp: tokio::net::TcpStream,
        timeout: Duration,
    ) -> Option<tokio_rustls::server::TlsStream<tokio::net::TcpStream>> {
        let accept = self.now().accept(tcp);
        let failed = match tokio::time::timeout(timeout, accept).await {
            Ok(Ok(tls)) => return Some(tls),
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("not done within {}", humantime::format_duration(timeout)),
        };
        tracing::debug!(error = %failed, "TLS handshake failed");
        self.failures.inc();
        None
    }
}

#[derive(Debug)]
struct Resolver(Arc<Certificates>);

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.current())
    }
}

fn read(files: &TlsFiles, provider: &CryptoProvider) -> Result<CertifiedKey> {
    let bad = |path: &Path, reason: String| Error::Tls {
        path: path.to_path_buf(),
        reason,
    };
    let text = |path: &Path| std::fs::read(path).map_err(|e| bad(path, e.to_string()));
    let cert_pem = text(&files.cert)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(&files.cert, format!("not a PEM certificate: {e}")))?;
    if chain.is_empty() {
        return Err(bad(&files.cert, "holds no PEM certificate".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(&text(&files.key)?)
        .map_err(|e| bad(&files.key, format!("not a PEM private key: {e}")))?;
    CertifiedKey::from_der(chain, key, provider).map_err(|e| {
        bad(
            &files.key,
            format!(
                "cannot be used with the certificate {}: {e}",
                files.cert.display()
            ),
        )
    })
}

/// The CA certificates of a `client_ca` file; an error names the file and what is wrong.
fn read_roots(path: &Path) -> Result<Arc<RootCertStore>> {
    let bad = |reason: String| Error::Tls {
        path: path.to_path_buf(),
        reason,
    };
    let pem = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| bad(format!("not a PEM certificate: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| bad(format!("not a usable CA certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(bad("holds no PEM certificate".into()));
    }
    Ok(Arc::new(roots))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test certificates of `tests/tls` (gen.sh).
    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/tls")
            .join(name)
    }

    fn copy_pair(dir: &Path, n: u32) -> TlsFiles {
        let files = TlsFiles {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
            client_ca: None,
        };
        // A rename over each file, as a renewal writes it: never a half-copied file.
        for (from, to) in [
            (format!("server{n}.pem"), &files.cert),
            (format!("server{n}.key"), &files.key),
        ] {
            let tmp = to.with_extension("tmp");
            std::fs::copy(fixture(&from), &tmp).unwrap();
            std::fs::rename(&tmp, to).unwrap();
        }
        files
    }

    fn served(c: &Certificates) -> Vec<u8> {
        c.current().cert[0].as_ref().to_vec()
    }

    fn der(name: &str) -> Vec<u8> {
        CertificateDer::from_pem_file(fixture(name))
            .unwrap()
            .as_ref()
            .to_vec()
    }

    #[test]
    fn a_client_ca_file_is_checked_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let with = |ca: PathBuf| TlsFiles {
            cert: fixture("server1.pem"),
            key: fixture("server1.key"),
            client_ca: Some(ca),
        };
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "hello").unwrap();
        for (ca, says) in [
            (dir.path().join("nope.pem"), "No such file"),
            (garbage, "holds no PEM certificate"),
            (fixture("client.key"), "holds no PEM certificate"),
        ] {
            let e = Certificates::load(with(ca.clone()), TlsMetrics::default())
                .unwrap_err()
                .to_string();
            let name = ca.file_name().unwrap().to_string_lossy().to_string();
            assert!(e.contains(&name) && e.contains(says), "{e}");
        }
        let c = Certificates::load(with(fixture("client-ca.pem")), TlsMetrics::default()).unwrap();
        assert_eq!(c.client_roots().map(|(g, r)| (g, r.len())), Some((0, 1)));
        c.acceptor(&[b"h2"]).unwrap();
    }

    #[test]
    fn bad_files_are_refused_with_the_file_and_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let missing = TlsFiles {
            cert: dir.path().join("nope.pem"),
            key: fixture("server1.key"),
            client_ca: None,
        };
        let e = Certificates::load(missing, TlsMetrics::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("nope.pem") && e.contains("No such file"), "{e}");

        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "hello").unwrap();
        let e = Certificates::load(
            TlsFiles {
                cert: garbage.clone(),
                key: fixture("server1.key"),
                client_ca: None,
            },
            TlsMetrics::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("garbage.pem") && e.contains("no PEM certificate"),
            "{e}"
        );

        let e = Certificates::load(
            TlsFiles {
                cert: fixture("server1.pem"),
                key: garbage,
                client_ca: None,
            },
            TlsMetrics::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("garbage.pem") && e.contains("not a PEM private key"),
            "{e}"
        );

        // Server 2's key with server 1's certificate.
        let e = Certificates::load(
            TlsFiles {
                cert: fixture("server1.pem"),
                key: fixture("server2.key"),
                client_ca: None,
            },
            TlsMetrics::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("server2.key") && e.contains("cannot be used with the certificate"),
            "{e}"
        );
    }

    #[test]
    fn a_renewed_certificate_is_served_and_a_broken_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let files = copy_pair(dir.path(), 1);
        let metrics = TlsMetrics::default();
        let certs = Certificates::load(files.clone(), metrics.clone()).unwrap();
        assert_eq!(served(&certs), der("server1.pem"));
        assert_eq!(served(&certs), der("server1.pem"));
        // `openssl x509 -enddate`: Nov 11 13:46:49 2126 GMT.
        assert_eq!(metrics.expiry.get(), 4_950_078_409);

        copy_pair(dir.path(), 2);
        assert_eq!(served(&certs), der("server2.pem"));

        // Half of a renewal: server 1's certificate beside server 2's key. The one served
        // before stays, and stays when asked again.
        let tmp = files.cert.with_extension("tmp");
        std::fs::copy(fixture("server1.pem"), &tmp).unwrap();
        std::fs::rename(&tmp, &files.cert).unwrap();
        assert_eq!(served(&certs), der("server2.pem"));
        assert_eq!(served(&certs), der("server2.pem"));
        // Its other half arrives.
        let tmp = files.key.with_extension("tmp");
        std::fs::copy(fixture("server1.key"), &tmp).unwrap();
        std::fs::rename(&tmp, &files.key).unwrap();
        assert_eq!(served(&certs), der("server1.pem"));

        // Files gone: the certificate served stays.
        std::fs::remove_file(&files.cert).unwrap();
        assert_eq!(served(&certs), der("server1.pem"));
        // Read again twice; two changes that could not be used, each counted once.
        assert_eq!(metrics.reloads.get(), 2);
        assert_eq!(metrics.reload_failures.get(), 2);
    }

    #[test]
    fn expiry_is_read_from_either_form_of_time() {
        // UTCTime's two-digit years are 1950–2049.
        assert_eq!(asn1_time(0x17, "491231235959Z"), Some(2_524_607_999));
        assert_eq!(asn1_time(0x17, "500101000000Z"), Some(-631_152_000));
        assert_eq!(asn1_time(0x18, "21261111134649Z"), Some(4_950_078_409));
        assert_eq!(asn1_time(0x18, "2126111113464Z"), None);
        assert_eq!(asn1_time(0x04, "21261111134649Z"), None);
        // A cut or bent certificate gives no date rather than a wrong one.
        let cert = der("server1.pem");
        assert_eq!(not_after(&cert), Some(4_950_078_409));
        for n in [0, 1, 2, 10, 100, 200] {
            assert_eq!(not_after(&cert[..n]), None, "{n} bytes");
        }
        let mut bent = cert.clone();
        bent[0] = 0x31;
        assert_eq!(not_after(&bent), None);
    }

    #[test]
    fn a_chain_is_served_whole() {
        let dir = tempfile::tempdir().unwrap();
        let chain = dir.path().join("chain.pem");
        let mut pem = std::fs::read(fixture("server1.pem")).unwrap();
        pem.extend(std::fs::read(fixture("ca1.pem")).unwrap());
        std::fs::write(&chain, pem).unwrap();
        let certs = Certificates::load(
            TlsFiles {
                cert: chain,
                key: fixture("server1.key"),
                client_ca: None,
            },
            TlsMetrics::default(),
        )
        .unwrap();
        let served = certs.current();
        assert_eq!(served.cert.len(), 2);
        assert_eq!(served.cert[1].as_ref(), der("ca1.pem"));
    }
}
