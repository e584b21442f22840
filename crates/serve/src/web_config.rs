//! `--web-config FILE`: the Prometheus exporter-toolkit's web configuration, read as its exporters
//! read it, so the TLS settings and credentials a Prometheus already scrapes node_exporter with
//! work for gpulse too. A key gpulse cannot honour is an error, never silently ignored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use axum::http::{HeaderName, HeaderValue};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use serde::Deserialize;

use crate::basic::BasicAuth;

/// Why the web configuration cannot be used; each names the file it is about.
#[derive(Debug, thiserror::Error)]
pub enum WebConfigError {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

fn invalid(path: &Path, message: impl Into<String>) -> WebConfigError {
    WebConfigError::Invalid { path: path.to_owned(), message: message.into() }
}

/// The file as written; the names are exporter-toolkit's.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<TlsFile>,
    http_server_config: Option<HttpFile>,
    basic_auth_users: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    client_auth_type: Option<String>,
    client_ca_file: Option<PathBuf>,
    min_version: Option<String>,
    max_version: Option<String>,
    /// Go has ignored it since 1.18; so does gpulse.
    #[allow(dead_code)]
    prefer_server_cipher_suites: Option<bool>,
    // exporter-toolkit's keys that gpulse refuses rather than ignores.
    cipher_suites: Option<serde_norway::Value>,
    curve_preferences: Option<serde_norway::Value>,
    client_allowed_sans: Option<serde_norway::Value>,
    cert: Option<serde_norway::Value>,
    key: Option<serde_norway::Value>,
    client_ca: Option<serde_norway::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpFile {
    headers: Option<BTreeMap<String, String>>,
    /// gpulse speaks HTTP/1.1 only, which every Prometheus scrapes with.
    #[allow(dead_code)]
    http2: Option<bool>,
}

/// The headers exporter-toolkit lets a web configuration set.
const ALLOWED_HEADERS: [&str; 5] = [
    "strict-transport-security",
    "x-content-type-options",
    "x-frame-options",
    "x-xss-protection",
    "content-security-policy",
];

/// What the server does with a web configuration; the default is plain HTTP, no basic auth.
#[derive(Default)]
pub struct WebConfig {
    pub(crate) tls: Option<Arc<ServerConfig>>,
    pub(crate) basic: Option<BasicAuth>,
    pub(crate) headers: Vec<(HeaderName, HeaderValue)>,
}

impl WebConfig {
    /// Reads and checks `path` and every file it names; returns the configuration and warnings
    /// (one line each) about what works but should not be so.
    ///
    /// # Errors
    /// A file that cannot be read, YAML that does not parse, an unknown or unsupported key, a
    /// hash that is not bcrypt, a certificate and key that do not match, a key every user may
    /// read.
    pub fn load(path: &Path) -> Result<(Self, Vec<String>), WebConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| WebConfigError::Read { path: path.to_owned(), source })?;
        // An empty file is a valid configuration: plain HTTP, as exporter-toolkit reads it.
        let file: File = if text.trim().is_empty() {
            File::default()
        } else {
            serde_norway::from_str(&text).map_err(|e| invalid(path, e.to_string()))?
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut warnings = Vec::new();
        let tls = file.tls_server_config.map(|t| tls(path, dir, t)).transpose()?;
        // No users is no basic auth, as exporter-toolkit reads it.
        let users = file.basic_auth_users.filter(|u| !u.is_empty());
        let basic = users.map(|users| BasicAuth::new(users).map_err(|m| invalid(path, m))).transpose()?;
        if basic.is_some() && tls.is_none() {
            warnings.push(format!(
                "{}: basic_auth_users without TLS: passwords cross the network in the clear",
                path.display()
            ));
        }
        let headers = file.http_server_config.and_then(|h| h.headers).unwrap_or_default();
        let headers = headers.into_iter().map(|(k, v)| header(path, &k, &v)).collect::<Result<_, _>>()?;
        Ok((Self { tls: tls.map(Arc::new), basic, headers }, warnings))
    }

    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }
}

/// The web configuration in force, shared with the caller, which may replace it (a certificate
/// renewed in place, a new password): each new connection takes its TLS settings from it, each
/// request its users and headers. A connection already open keeps the certificate it shook
/// hands with.
#[derive(Default)]
pub struct SharedWebConfig {
    current: RwLock<Arc<WebConfig>>,
}

impl SharedWebConfig {
    pub fn new(web: WebConfig) -> Self {
        Self { current: RwLock::new(Arc::new(web)) }
    }

    pub fn is_tls(&self) -> bool {
        self.current().is_tls()
    }

    pub(crate) fn current(&self) -> Arc<WebConfig> {
        self.current.read().map(|c| c.clone()).unwrap_or_else(|p| p.into_inner().clone())
    }

    /// Takes `new` from the next connection and request on. TLS is never turned on or off in
    /// place: the scheme is in every client's URL, and a server that dropped TLS on a reload would
    /// send passwords in the clear.
    ///
    /// Returns what the change opens, one line each: a file without the basic-auth users the
    /// old one had is taken (the admin wrote it), and said.
    ///
    /// # Errors
    /// `new` turns TLS on or off; the old configuration stays.
    pub fn replace(&self, new: WebConfig) -> Result<Vec<String>, String> {
        let mut current = self.current.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        match (current.is_tls(), new.is_tls()) {
            (true, false) => Err("it has no TLS, and TLS is not turned off without a restart".into()),
            (false, true) => Err("it has TLS, and TLS is not turned on without a restart".into()),
            _ => {
                let mut opened = Vec::new();
                if current.basic.is_some() && new.basic.is_none() {
                    opened.push("the web configuration names no basic_auth_users any more: basic auth is off".into());
                }
                *current = Arc::new(new);
                Ok(opened)
            }
        }
    }
}

fn header(path: &Path, name: &str, value: &str) -> Result<(HeaderName, HeaderValue), WebConfigError> {
    let lower = name.to_ascii_lowercase();
    if !ALLOWED_HEADERS.contains(&lower.as_str()) {
        return Err(invalid(path, format!("http_server_config.headers: {name} is not one a web config may set")));
    }
    let value = HeaderValue::from_str(value)
        .map_err(|_| invalid(path, format!("http_server_config.headers.{name}: not a header value")))?;
    Ok((HeaderName::from_bytes(lower.as_bytes()).expect("an allowed name"), value))
}

/// A TLS version as exporter-toolkit spells it, as rustls's, or `None` for 1.0 and 1.1.
fn version(
    path: &Path,
    key: &str,
    v: &str,
) -> Result<Option<&'static rustls::SupportedProtocolVersion>, WebConfigError> {
    match v {
        "TLS10" | "TLS11" => Ok(None),
        "TLS12" => Ok(Some(&rustls::version::TLS12)),
        "TLS13" => Ok(Some(&rustls::version::TLS13)),
        _ => Err(invalid(path, format!("tls_server_config.{key}: {v:?} is not TLS10, TLS11, TLS12 or TLS13"))),
    }
}

/// The rustls configuration `t` describes, its files resolved against `dir` as exporter-toolkit
/// resolves them.
fn tls(path: &Path, dir: &Path, t: TlsFile) -> Result<ServerConfig, WebConfigError> {
    let refused = [
        ("cipher_suites", t.cipher_suites.is_some()),
        ("curve_preferences", t.curve_preferences.is_some()),
        ("client_allowed_sans", t.client_allowed_sans.is_some()),
        ("cert", t.cert.is_some()),
        ("key", t.key.is_some()),
        ("client_ca", t.client_ca.is_some()),
    ];
    if let Some((key, _)) = refused.iter().find(|r| r.1) {
        return Err(invalid(path, format!("tls_server_config.{key} is not supported by gpulse")));
    }
    let (Some(cert_file), Some(key_file)) = (t.cert_file, t.key_file) else {
        return Err(invalid(path, "tls_server_config needs both cert_file and key_file"));
    };
    let (cert_file, key_file) = (dir.join(cert_file), dir.join(key_file));
    let certs = read_pem(&cert_file, |p| CertificateDer::pem_file_iter(p)?.collect::<Result<Vec<_>, _>>())?;
    if certs.is_empty() {
        return Err(invalid(&cert_file, "no PEM certificate in it"));
    }
    // Refused as `--token-file` is, and as ssh refuses a key: a secret every user can read is no
    // secret.
    if let Some(mode) = mode_if_others_may_read(&key_file) {
        let m = format!("can be read by every user (mode {mode:o}); make it private: chmod 600 {}", key_file.display());
        return Err(invalid(&key_file, m));
    }
    let key = read_pem(&key_file, |p| PrivateKeyDer::from_pem_file(p))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let min = t.min_version.as_deref().map(|v| version(path, "min_version", v)).transpose()?.flatten();
    let max = match t.max_version.as_deref() {
        Some(v) => Some(
            version(path, "max_version", v)?
                .ok_or_else(|| invalid(path, "tls_server_config.max_version: gpulse speaks TLS 1.2 and 1.3 only"))?,
        ),
        None => None,
    };
    let versions: Vec<_> = [&rustls::version::TLS12, &rustls::version::TLS13]
        .into_iter()
        .filter(|v| {
            let n = u16::from(v.version);
            min.is_none_or(|m| n >= u16::from(m.version)) && max.is_none_or(|m| n <= u16::from(m.version))
        })
        .collect();
    if versions.is_empty() {
        return Err(invalid(path, "tls_server_config: min_version is above max_version"));
    }
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| invalid(path, e.to_string()))?;
    let needs_ca = match t.client_auth_type.as_deref().unwrap_or("NoClientCert") {
        "NoClientCert" => None,
        "VerifyClientCertIfGiven" => Some(false),
        "RequireAndVerifyClientCert" => Some(true),
        other @ ("RequestClientCert" | "RequireAnyClientCert") => {
            let m = format!(
                "tls_server_config.client_auth_type: {other} (unverified certificates) is not supported by gpulse; use VerifyClientCertIfGiven or RequireAndVerifyClientCert"
            );
            return Err(invalid(path, m));
        }
        other => {
            return Err(invalid(
                path,
                format!("tls_server_config.client_auth_type: {other:?} is not a client auth type"),
            ));
        }
    };
    let builder = match (needs_ca, t.client_ca_file) {
        (None, None) => builder.with_no_client_auth(),
        (None, Some(_)) => {
            return Err(invalid(path, "tls_server_config: client_ca_file without a client_auth_type that verifies"));
        }
        (Some(_), None) => return Err(invalid(path, "tls_server_config: this client_auth_type needs client_ca_file")),
        (Some(required), Some(ca_file)) => {
            let ca_file = dir.join(ca_file);
            let mut roots = RootCertStore::empty();
            for ca in read_pem(&ca_file, |p| CertificateDer::pem_file_iter(p)?.collect::<Result<Vec<_>, _>>())? {
                roots.add(ca).map_err(|e| invalid(&ca_file, e.to_string()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if required { verifier } else { verifier.allow_unauthenticated() };
            builder.with_client_cert_verifier(verifier.build().map_err(|e| invalid(&ca_file, e.to_string()))?)
        }
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => invalid(&key_file, format!("not the key of {}", cert_file.display())),
        e => invalid(&key_file, e.to_string()),
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Reads a PEM file, naming it in the error; a missing file is a read error.
fn read_pem<T>(
    file: &Path,
    read: impl FnOnce(&Path) -> Result<T, rustls::pki_types::pem::Error>,
) -> Result<T, WebConfigError> {
    use rustls::pki_types::pem::Error;
    read(file).map_err(|e| match e {
        Error::Io(source) => WebConfigError::Read { path: file.to_owned(), source },
        Error::NoItemsFound => invalid(file, "no PEM item of the expected kind in it"),
        e => invalid(file, format!("not PEM: {e}")),
    })
}

/// The file's permission bits when every user may read it.
fn mode_if_others_may_read(file: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(file).ok()?.permissions().mode() & 0o777;
    (mode & 0o004 != 0).then_some(mode)
}

#[cfg(test)]
#[path = "web_config_tests.rs"]
pub(crate) mod tests;
