//! Reading exporter-toolkit's file: what it accepts, and one line naming the file for each thing
//! it refuses.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};

use super::*;

/// A CA, a server certificate for `localhost` and 127.0.0.1 that it signed (`cert.pem`,
/// `key.pem`), and a client one; all as PEM files in `dir`.
pub(crate) struct Pki {
    pub ca: PathBuf,
    pub key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

pub(crate) fn pki(dir: &Path) -> Pki {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "gpulse test CA");
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let leaf = |names: Vec<String>, usage| {
        let mut p = CertificateParams::new(names).unwrap();
        p.extended_key_usages = vec![usage];
        let key = KeyPair::generate().unwrap();
        (p.signed_by(&key, &ca).unwrap().pem(), key.serialize_pem())
    };
    let (cert, key) = leaf(vec!["localhost".into(), "127.0.0.1".into()], ExtendedKeyUsagePurpose::ServerAuth);
    let (client_cert, client_key) = leaf(vec!["scraper".into()], ExtendedKeyUsagePurpose::ClientAuth);
    let write = |name: &str, pem: &str| {
        let p = dir.join(name);
        std::fs::write(&p, pem).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        p
    };
    write("cert.pem", &cert);
    Pki {
        ca: write("ca.pem", &ca.pem()),
        key: write("key.pem", &key),
        client_cert: write("client.pem", &client_cert),
        client_key: write("client-key.pem", &client_key),
    }
}

/// A directory of the test's own, removed with what is in it when dropped.
pub(crate) fn fresh_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("gpulse-web-config-{name}-")).tempdir().unwrap()
}

/// Writes `yaml` as `web.yml` beside the PKI and loads it.
fn load(dir: &Path, yaml: &str) -> Result<(WebConfig, Vec<String>), WebConfigError> {
    let path = dir.join("web.yml");
    std::fs::write(&path, yaml).unwrap();
    WebConfig::load(&path)
}

/// The error's one line, which must name `file`.
fn refused(dir: &Path, yaml: &str, file: &str) -> String {
    let e = load(dir, yaml).err().unwrap_or_else(|| panic!("accepted: {yaml}")).to_string();
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains(&dir.join(file).display().to_string()), "names {file}: {e}");
    e
}

const TLS: &str = "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n";

/// The test's working directory is the crate's: the relative paths resolve against the file's.
#[test]
fn exporter_toolkits_example_is_read_with_paths_beside_the_file() {
    let dir_tmp = fresh_dir("example");
    let dir = dir_tmp.path();
    pki(dir);
    let hash = bcrypt::hash("pw", 4).unwrap();
    let yaml = format!(
        "{TLS}  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.pem\n  min_version: TLS12\n  max_version: TLS13\n  prefer_server_cipher_suites: true\nhttp_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n    Strict-Transport-Security: max-age=31536000\nbasic_auth_users:\n  prometheus: {hash}\n"
    );
    let (web, warnings) = load(dir, &yaml).unwrap();
    assert!(web.is_tls() && web.basic.is_some());
    assert_eq!(web.tls.as_ref().unwrap().alpn_protocols, [b"http/1.1".to_vec()]);
    let names: Vec<_> = web.headers.iter().map(|h| h.0.as_str()).collect();
    assert_eq!(names, ["strict-transport-security", "x-frame-options"]);
    assert_eq!(warnings, Vec::<String>::new());
}

#[test]
fn an_empty_file_is_plain_http_and_users_without_tls_are_warned_of() {
    let dir_tmp = fresh_dir("empty");
    let dir = dir_tmp.path();
    for empty in ["\n", "# nothing yet\n", "basic_auth_users: {}\n"] {
        let (web, warnings) = load(dir, empty).unwrap();
        assert!(!web.is_tls() && web.basic.is_none() && warnings.is_empty(), "{empty:?}");
    }
    let (web, warnings) = load(dir, &format!("basic_auth_users:\n  p: {}\n", bcrypt::hash("x", 4).unwrap())).unwrap();
    assert!(!web.is_tls() && web.basic.is_some());
    assert!(warnings.len() == 1 && warnings[0].contains("in the clear"), "{warnings:?}");
}

#[test]
fn a_key_every_user_may_read_is_refused_in_one_line() {
    let dir_tmp = fresh_dir("key-mode");
    let dir = dir_tmp.path();
    let p = pki(dir);
    std::fs::set_permissions(&p.key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = refused(dir, TLS, "key.pem");
    assert!(e.contains("can be read by every user (mode 644)") && e.contains("chmod 600"), "{e}");
    std::fs::set_permissions(&p.key, std::fs::Permissions::from_mode(0o640)).unwrap();
    assert!(load(dir, TLS).is_ok(), "its group may read it, as the ssl-cert group does");
}

#[test]
fn mistakes_are_one_line_naming_the_file() {
    let dir_tmp = fresh_dir("mistakes");
    let dir = dir_tmp.path();
    pki(dir);
    let web = "web.yml";
    let e = refused(dir, "tls_server_config:\n  cert_file: nope.pem\n  key_file: key.pem\n", "nope.pem");
    assert!(e.starts_with("cannot read"), "{e}");
    assert!(refused(dir, "tls_server_config: [\n", web).contains("line"));
    assert!(refused(dir, "tls_config:\n  cert_file: a\n", web).contains("unknown field `tls_config`"));
    assert!(refused(dir, &format!("{TLS}  certfile: x\n"), web).contains("unknown field `certfile`"));
    assert!(refused(dir, "tls_server_config:\n  cert_file: cert.pem\n", web).contains("both cert_file and key_file"));
    let e = refused(dir, "basic_auth_users:\n  prometheus: hunter2\n", web);
    assert!(e.contains("basic_auth_users.prometheus: not a bcrypt hash") && !e.contains("hunter2"), "{e}");
    assert!(refused(dir, &format!("{TLS}  cipher_suites: [TLS_AES_128_GCM_SHA256]\n"), web).contains("not supported"));
    assert!(refused(dir, &format!("{TLS}  min_version: TLS9\n"), web).contains("min_version"));
    assert!(refused(dir, &format!("{TLS}  max_version: TLS11\n"), web).contains("1.2 and 1.3 only"));
    assert!(refused(dir, &format!("{TLS}  min_version: TLS13\n  max_version: TLS12\n"), web).contains("above"));
    let e = refused(dir, &format!("{TLS}  client_auth_type: RequireAndVerifyClientCert\n"), web);
    assert!(e.contains("needs client_ca_file"), "{e}");
    assert!(refused(dir, &format!("{TLS}  client_ca_file: ca.pem\n"), web).contains("client_auth_type"));
    assert!(
        refused(dir, &format!("{TLS}  client_auth_type: RequireAnyClientCert\n  client_ca_file: ca.pem\n"), web)
            .contains("not supported")
    );
    let e = refused(dir, "http_server_config:\n  headers:\n    Set-Cookie: x=1\n", web);
    assert!(e.contains("Set-Cookie is not one a web config may set"), "{e}");
    // A key that is not the certificate's.
    let e = refused(dir, "tls_server_config:\n  cert_file: cert.pem\n  key_file: client-key.pem\n", "client-key.pem");
    assert!(e.contains("not the key of"), "{e}");
    // The files swapped: no certificate where one is wanted.
    let e = refused(dir, "tls_server_config:\n  cert_file: key.pem\n  key_file: cert.pem\n", "key.pem");
    assert!(e.contains("no PEM certificate"), "{e}");
    std::fs::write(dir.join("junk.pem"), "not pem at all").unwrap();
    refused(dir, "tls_server_config:\n  cert_file: cert.pem\n  key_file: junk.pem\n", "junk.pem");
}

#[test]
fn a_replacement_never_turns_tls_on_or_off() {
    let dir_tmp = fresh_dir("replace");
    let dir = dir_tmp.path();
    pki(dir);
    let shared = SharedWebConfig::new(load(dir, TLS).unwrap().0);
    let e = shared.replace(load(dir, "\n").unwrap().0).unwrap_err();
    assert!(e.contains("TLS is not turned off without a restart"), "{e}");
    assert!(shared.is_tls(), "the old configuration stays");
    let users = format!("{TLS}basic_auth_users:\n  p: {}\n", bcrypt::hash("x", 4).unwrap());
    assert_eq!(shared.replace(load(dir, &users).unwrap().0).unwrap(), Vec::<String>::new());
    assert!(shared.is_tls() && shared.current().basic.is_some());
    // Users dropped: taken, and said.
    let said = shared.replace(load(dir, TLS).unwrap().0).unwrap();
    assert!(said.len() == 1 && said[0].contains("basic auth is off"), "{said:?}");
    assert!(shared.is_tls() && shared.current().basic.is_none());
    let plain = SharedWebConfig::default();
    let e = plain.replace(load(dir, TLS).unwrap().0).unwrap_err();
    assert!(e.contains("TLS is not turned on without a restart") && !plain.is_tls(), "{e}");
}
