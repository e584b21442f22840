//! TLS in the accept loop, against real sockets and a rustls client: https is served, plain HTTP
//! is told to use https, a client that opens and sends nothing (or half a handshake) is closed
//! after the head timeout, and client certificates are verified when the file says so.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::tests::{closed_within, get, limits};
use crate::web_config::tests::{Pki, fresh_dir, pki};
use crate::{Auth, Config, Server, SharedWebConfig, WebConfig};

const TOKEN: &str = "0123456789abcdef0123456789abcdef";
const TLS: &str = "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n";

/// A server with `yaml` as its web configuration, beside a fresh PKI in a directory of its own
/// (removed when the last value is dropped).
fn start(name: &str, yaml: &str) -> (SocketAddr, Pki, tempfile::TempDir) {
    let (addr, pki, _, dir) = start_shared(name, yaml);
    (addr, pki, dir)
}

/// `web.yml` in `dir`, holding `yaml`, loaded.
fn load(dir: &std::path::Path, yaml: &str) -> WebConfig {
    std::fs::write(dir.join("web.yml"), yaml).unwrap();
    WebConfig::load(&dir.join("web.yml")).unwrap().0
}

/// As [`start`], with the configuration the server reads, to replace.
fn start_shared(name: &str, yaml: &str) -> (SocketAddr, Pki, Arc<SharedWebConfig>, tempfile::TempDir) {
    let dir = fresh_dir(name);
    let pki = pki(dir.path());
    let web = Arc::new(SharedWebConfig::new(load(dir.path(), yaml)));
    let config = Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        auth: Arc::new(Auth::new(Some(TOKEN.into()), false)),
        hosts: Vec::new(),
        max_subscribers: 4,
        report: None,
        limits: limits(500),
        web: web.clone(),
    };
    let server = Server::start(config).unwrap();
    let addr = server.local_addr();
    // The server lives on its thread for the rest of the test process.
    std::mem::forget(server);
    (addr, pki, web, dir)
}

/// The whole answer to `GET path` over TLS trusting the test CA, presenting the client
/// certificate when `client`; `None` if the server refused or closed first.
fn tls_get(addr: SocketAddr, pki: &Pki, client: bool, path: &str) -> Option<String> {
    tls_get_cert(addr, pki, client, path).map(|(answer, _)| answer)
}

/// As [`tls_get`], with the certificate the server presented.
fn tls_get_cert(addr: SocketAddr, pki: &Pki, client: bool, path: &str) -> Option<(String, CertificateDer<'static>)> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_file_iter(&pki.ca).unwrap() {
        roots.add(ca.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = if client {
        let chain = CertificateDer::pem_file_iter(&pki.client_cert).unwrap().map(Result::unwrap).collect();
        builder.with_client_auth_cert(chain, PrivateKeyDer::from_pem_file(&pki.client_key).unwrap()).unwrap()
    } else {
        builder.with_no_client_auth()
    };
    let conn = rustls::ClientConnection::new(Arc::new(config), "localhost".try_into().unwrap()).unwrap();
    let socket = TcpStream::connect(addr).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, socket);
    write!(tls, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").ok()?;
    let (mut out, mut buf) = (Vec::new(), [0u8; 4096]);
    while let Ok(n @ 1..) = tls.read(&mut buf) {
        out.extend_from_slice(&buf[..n]);
    }
    let cert = tls.conn.peer_certificates()?.first()?.clone().into_owned();
    (!out.is_empty()).then(|| (String::from_utf8_lossy(&out).into_owned(), cert))
}

#[test]
fn https_is_served_plain_http_is_told_and_the_cookie_is_secure() {
    let (addr, pki, _dir) = start("https", TLS);
    let health = tls_get(addr, &pki, false, "/healthz").unwrap_or_default();
    assert!(health.starts_with("HTTP/1.1 200") && health.ends_with("ok\n"), "{health:?}");
    let plain = get(addr, "/healthz").unwrap_or_default();
    assert!(plain.starts_with("HTTP/1.1 400") && plain.ends_with("an HTTPS server.\n"), "{plain:?}");
    let signed_in = tls_get(addr, &pki, false, &format!("/?token={TOKEN}")).unwrap_or_default();
    let cookie = signed_in.lines().find(|l| l.to_ascii_lowercase().starts_with("set-cookie:")).unwrap_or_default();
    assert!(cookie.contains("HttpOnly") && cookie.trim_end().ends_with("; Secure"), "{signed_in:?}");
}

#[test]
fn a_client_that_opens_and_sends_nothing_or_half_a_handshake_is_closed() {
    let (addr, pki, _dir) = start("idle", TLS);
    let mut idle = TcpStream::connect(addr).unwrap();
    // A TLS record's header announcing a ClientHello that never comes.
    let mut half = TcpStream::connect(addr).unwrap();
    half.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00]).unwrap();
    assert!(tls_get(addr, &pki, false, "/healthz").is_some(), "answers beside them");
    assert!(closed_within(&mut idle, Duration::from_secs(10)), "an idle client outlived the head timeout");
    assert!(closed_within(&mut half, Duration::from_secs(10)), "a stalled handshake outlived the head timeout");
}

#[test]
fn client_certificates_are_verified_when_the_file_requires_them() {
    let yaml = format!("{TLS}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n");
    let (addr, pki, _dir) = start("client-auth", &yaml);
    let with = tls_get(addr, &pki, true, "/healthz").unwrap_or_default();
    assert!(with.starts_with("HTTP/1.1 200"), "{with:?}");
    assert_eq!(tls_get(addr, &pki, false, "/healthz"), None, "no client certificate, no answer");
}

#[test]
fn a_replaced_certificate_is_presented_from_the_next_connection() {
    let (addr, old, web, _dir) = start_shared("rotate", TLS);
    let cert = |p: &std::path::Path| CertificateDer::from_pem_file(p.with_file_name("cert.pem")).unwrap();
    let (health, presented) = tls_get_cert(addr, &old, false, "/healthz").unwrap();
    assert!(health.starts_with("HTTP/1.1 200"), "{health:?}");
    assert_eq!(presented, cert(&old.ca));
    // A new CA and certificate, as a renewal brings.
    let dir = fresh_dir("rotate-new");
    let new = pki(dir.path());
    web.replace(load(dir.path(), TLS)).unwrap();
    let (health, presented) = tls_get_cert(addr, &new, false, "/healthz").unwrap();
    assert!(health.starts_with("HTTP/1.1 200"), "{health:?}");
    assert_eq!(presented, cert(&new.ca));
    assert_ne!(cert(&new.ca), cert(&old.ca));
    assert_eq!(tls_get(addr, &old, false, "/healthz"), None, "the old CA does not vouch for the new certificate");
}
