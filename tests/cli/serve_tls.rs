//! `gpulse serve --web-config` with exporter-toolkit's file: curl and a real Prometheus scrape
//! `/metrics` over TLS with basic auth, and nothing less is answered. The certificates and the
//! password's hash are made when the test runs, in its own folder.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};

use super::serve::{TOKEN, free_port, have_prometheus, prometheus, prometheus_query, serve_started};
use super::support::{fresh_dir, skipped, wait_until};

pub(super) const USER: &str = "prometheus";
pub(super) const PASSWORD: &str = "correct horse battery staple";

/// Writes `text` to `dir/name`, readable by its owner only.
pub(super) fn private(dir: &Path, name: &str, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// A CA made for the test, its certificate in `ca.pem`.
pub(super) struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    pub(super) file: PathBuf,
}

impl TestCa {
    pub(super) fn new(dir: &Path) -> Self {
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, "gpulse test CA");
        let issuer = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let file = private(dir, "ca.pem", &issuer.pem());
        Self { issuer, file }
    }

    /// A new server certificate for 127.0.0.1 and its key, written over `server.pem` and
    /// `server-key.pem` as a renewal writes them; returns the certificate (DER).
    pub(super) fn issue(&self, dir: &Path) -> Vec<u8> {
        let mut server = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().unwrap();
        let cert = server.signed_by(&key, &self.issuer).unwrap();
        private(dir, "server.pem", &cert.pem());
        private(dir, "server-key.pem", &key.serialize_pem());
        cert.der().to_vec()
    }
}

/// `web.yml` in `dir`: TLS from `server.pem` and `server-key.pem`, a header, and one user whose
/// password has the bcrypt `hash`.
pub(super) fn write_web_yml(dir: &Path, hash: &str) -> PathBuf {
    let yaml = format!(
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server-key.pem\nhttp_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\nbasic_auth_users:\n  {USER}: {hash}\n"
    );
    private(dir, "web.yml", &yaml)
}

/// A CA and a server certificate for 127.0.0.1 that it signed; a web config naming them, with one
/// user whose hash is htpasswd's kind (`$2y$`, cost 10). Returns the web config and the CA file.
pub(super) fn web_config(dir: &Path) -> (PathBuf, PathBuf) {
    let ca = TestCa::new(dir);
    ca.issue(dir);
    let hash = bcrypt::hash_with_result(PASSWORD, 10).unwrap().format_for_version(bcrypt::Version::TwoY);
    (write_web_yml(dir, &hash), ca.file)
}

/// A TLS client's `GET path` to `addr`, trusting `ca` alone, with basic auth as `user:password`
/// when given: the status (0 when no HTTP answer came), the body, and the certificate the
/// server presented (DER).
pub(super) fn tls_get(addr: &str, ca: &Path, path: &str, basic: Option<&str>) -> (u16, String, Option<Vec<u8>>) {
    use std::io::{Read, Write};

    use base64::Engine as _;
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;

    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = "127.0.0.1".try_into().unwrap();
    let conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    let socket = std::net::TcpStream::connect(addr).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, socket);
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(pair) = basic {
        request += &format!("Authorization: Basic {}\r\n", base64::engine::general_purpose::STANDARD.encode(pair));
    }
    if tls.write_all(format!("{request}\r\n").as_bytes()).is_err() {
        return (0, String::new(), None);
    }
    let (mut out, mut buf) = (Vec::new(), [0u8; 4096]);
    // The server may close without TLS's close_notify: what came before it is the answer.
    while let Ok(n @ 1..) = tls.read(&mut buf) {
        out.extend_from_slice(&buf[..n]);
    }
    let cert = tls.conn.peer_certificates().and_then(|c| c.first()).map(|c| c.to_vec());
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.strip_prefix("HTTP/1.1 ").and_then(|t| t.get(..3)?.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body, cert)
}

/// curl's answer, head and body: its status, 0 when there was no HTTP answer.
fn curl(args: &[&str]) -> (u16, String) {
    let out = Command::new("curl").args(["-sS", "-i", "--max-time", "20"]).args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let status = text.strip_prefix("HTTP/1.1 ").and_then(|t| t.get(..3)?.parse().ok()).unwrap_or(0);
    (status, text)
}

#[test]
fn curl_scrapes_over_tls_with_the_password_and_nothing_less_is_answered() {
    if Command::new("curl").arg("--version").output().is_err() {
        assert!(std::env::var_os("GPULSE_REQUIRE_CURL").is_none(), "curl is required");
        skipped("curl scraping gpulse serve over TLS (no curl; CI installs it)");
        return;
    }
    let dir = fresh_dir("serve-tls", "curl");
    let (web, ca) = web_config(&dir);
    let s = serve_started(&["--web-config", web.to_str().unwrap()]);
    assert!(s.stderr.contains(&format!("serving on https://{}/", s.addr)), "{}", s.stderr);
    assert!(!s.stderr.contains("warning"), "{}", s.stderr);
    // The password travels in curl's config files, not on its command line.
    let right = private(&dir, "right.curlrc", &format!("user = \"{USER}:{PASSWORD}\"\n"));
    let wrong = private(&dir, "wrong.curlrc", &format!("user = \"{USER}:{}\"\n", &PASSWORD[1..]));
    let (ca, right, wrong) = (ca.to_str().unwrap(), right.to_str().unwrap(), wrong.to_str().unwrap());
    let url = |path: &str| format!("https://{}{path}", s.addr);
    wait_until(30, "the first sample, over TLS", || curl(&["--cacert", ca, "-K", right, &url("/ready")]).0 == 200);
    let (code, answer) = curl(&["--cacert", ca, &url("/metrics")]);
    assert_eq!(code, 401, "{answer}");
    assert!(answer.to_lowercase().contains("www-authenticate: basic"), "{answer}");
    assert!(answer.to_lowercase().contains("x-content-type-options: nosniff"), "{answer}");
    assert_eq!(curl(&["--cacert", ca, "-K", wrong, &url("/metrics")]).0, 401);
    let (code, answer) = curl(&["-K", right, &format!("http://{}/metrics", s.addr)]);
    assert_eq!(code, 400, "plain HTTP is refused: {answer}");
    assert!(answer.contains("Client sent an HTTP request to an HTTPS server."), "{answer}");
    let (code, metrics) = curl(&["--cacert", ca, "-K", right, &url("/metrics")]);
    assert_eq!(code, 200, "{metrics}");
    assert!(metrics.contains("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\""), "{metrics}");
    assert_eq!(curl(&["--cacert", ca, &url("/healthz")]).0, 200, "a liveness probe needs no password");
    // The dashboard and the API need the token on top of the password; the cookie is Secure.
    assert_eq!(curl(&["--cacert", ca, "-K", right, &url("/api/v1/snapshot")]).0, 401);
    let (code, answer) = curl(&["--cacert", ca, "-K", right, &url(&format!("/?token={TOKEN}"))]);
    assert_eq!(code, 303, "{answer}");
    let cookie = answer.lines().find(|l| l.to_lowercase().starts_with("set-cookie:")).unwrap_or_default();
    assert!(cookie.trim_end().ends_with("; Secure"), "{cookie}");
    let session = cookie.split(['=', ';']).nth(1).unwrap().trim();
    let signed_in = format!("gpulse_session={session}");
    assert_eq!(curl(&["--cacert", ca, "-K", right, "-b", &signed_in, &url("/api/v1/snapshot")]).0, 200);
    assert_eq!(curl(&["--cacert", ca, "-b", &signed_in, &url("/api/v1/snapshot")]).0, 401);
}

/// Prometheus with the settings it scrapes node_exporter with: `scheme: https`, the CA in
/// `tls_config`, `basic_auth` with a password file. The same target with a wrong password, and
/// over plain HTTP, is down.
#[test]
fn prometheus_scrapes_over_tls_with_basic_auth() {
    if !have_prometheus("Prometheus scraping gpulse serve over TLS") {
        return;
    }
    let dir = fresh_dir("serve-tls", "prometheus");
    let (web, ca) = web_config(&dir);
    let s = serve_started(&["--web-config", web.to_str().unwrap()]);
    let password = private(&dir, "password", PASSWORD);
    let job = |name: &str, scheme: &str, auth: &str| {
        format!(
            "  - job_name: {name}\n    scheme: {scheme}\n    tls_config:\n      ca_file: {}\n    basic_auth:\n      username: {USER}\n{auth}    static_configs:\n      - targets: ['{}']\n",
            ca.display(),
            s.addr
        )
    };
    let right = format!("      password_file: {}\n", password.display());
    let config = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n{}{}{}",
        job("gpulse", "https", &right),
        job("wrong-password", "https", "      password: not-the-password\n"),
        job("plain-http", "http", &right)
    );
    std::fs::write(dir.join("prometheus.yml"), config).unwrap();
    let port = free_port();
    let _prom = prometheus(&dir, port);
    let deadline = Instant::now() + Duration::from_secs(60);
    let util = loop {
        let scraped = std::panic::catch_unwind(|| {
            (prometheus_query(port, "up").len(), prometheus_query(port, "DCGM_FI_DEV_GPU_UTIL"))
        });
        if let Ok((3, util)) = scraped
            && util.len() == 2
        {
            break util;
        }
        assert!(Instant::now() < deadline, "Prometheus never scraped gpulse over TLS");
        std::thread::sleep(Duration::from_millis(300));
    };
    let mut up: Vec<(String, f64)> =
        prometheus_query(port, "up").into_iter().map(|(labels, v)| (labels["job"].clone(), v)).collect();
    up.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(up, [("gpulse".into(), 1.0), ("plain-http".into(), 0.0), ("wrong-password".into(), 0.0)]);
    let mut by_gpu: Vec<(String, String, f64)> =
        util.into_iter().map(|(l, v)| (l["job"].clone(), l["gpu"].clone(), v)).collect();
    by_gpu.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(by_gpu, [("gpulse".into(), "0".into(), 87.0), ("gpulse".into(), "1".into(), 12.0)]);
}
