//! What `serve` and `run --serve` share: the token, the web configuration, and starting the
//! server with one line saying where it is.

use std::io::Read as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;

use anyhow::Context;
use gpulse_serve::{Config, Server, SharedWebConfig, WebConfig, check_token, random_token};

/// The dashboard's token, as the line that says where gpulse serves names it.
pub enum TokenShown<'a> {
    /// gpulse made it up: printed once, in the URL.
    Generated(&'a str),
    /// The user's, from where they keep it (`--token-file`'s path, or GPULSE_TOKEN): named, never
    /// printed, so that the line says how to open the dashboard without giving the secret away.
    Given(String),
    /// No token (`--no-auth`).
    Open,
}

impl TokenShown<'_> {
    /// From `serve`'s or the job's token: `generated` by gpulse, else given by `--token-file`
    /// (when `file` is set) or GPULSE_TOKEN; none with `--no-auth`.
    pub fn of<'a>(token: Option<&'a str>, generated: bool, file: Option<&Path>) -> TokenShown<'a> {
        match (token, generated, file) {
            (None, _, _) => TokenShown::Open,
            (Some(t), true, _) => TokenShown::Generated(t),
            (Some(_), false, Some(f)) => TokenShown::Given(format!("the token in {}", f.display())),
            (Some(_), false, None) => TokenShown::Given("the token in GPULSE_TOKEN".to_owned()),
        }
    }
}

/// Starts the server and says where it is, with the token in the URL only when gpulse made it up:
/// a token the user gave is their secret, so the line says where it is instead. Returns the sink
/// that feeds the server.
pub fn start(
    config: Config,
    devices: &[gpulse_model::DeviceInfo],
    host_label: &'static str,
    shown: TokenShown,
) -> anyhow::Result<gpulse_serve::ServeSink> {
    let listen = config.listen;
    let scheme = if config.web.is_tls() { "https" } else { "http" };
    let server = Server::start(config).with_context(|| format!("cannot listen on {listen}"))?;
    let hostname = hostname();
    let addr = server.local_addr();
    match shown {
        TokenShown::Generated(t) => eprintln!("gpulse: serving on {scheme}://{addr}/?token={t}"),
        TokenShown::Given(which) => {
            eprintln!(
                "gpulse: serving on {scheme}://{addr}/; the dashboard opens as {scheme}://{addr}/?token=TOKEN with {which}"
            )
        }
        TokenShown::Open => eprintln!("gpulse: serving on {scheme}://{addr}/"),
    }
    eprintln!("gpulse: Prometheus scrapes {scheme}://{addr}/metrics");
    if scheme == "http" && !addr.ip().is_loopback() {
        eprintln!("gpulse: warning: plain HTTP on {addr}; use --web-config with TLS, or put TLS in front of it");
    }
    Ok(server.sink(devices.to_vec(), hostname, host_label))
}

/// `--web-config`'s file, read and checked whole now, its warnings said; plain HTTP without one.
pub fn web_config(path: Option<&Path>) -> anyhow::Result<WebConfig> {
    let Some(path) = path else { return Ok(WebConfig::default()) };
    let (web, warnings) = WebConfig::load(path)?;
    say_warnings(&warnings);
    Ok(web)
}

/// `--web-config`'s file read again into `web`, with the same checks as at the start; its
/// warnings said once it is taken. The message says why the old one stays.
pub fn reload_web_config(path: &Path, web: &SharedWebConfig) -> Result<(), String> {
    let (new, warnings) = WebConfig::load(path).map_err(|e| crate::ops::describe(&e.into()))?;
    let opened = web.replace(new).map_err(|why| format!("{}: {why}", path.display()))?;
    say_warnings(&warnings);
    say_warnings(&opened);
    Ok(())
}

fn say_warnings(warnings: &[String]) {
    for w in warnings {
        eprintln!("gpulse: warning: {w}");
    }
}

/// Where the dashboard's token comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenFrom {
    /// None: the server is open (`--no-auth`).
    Nothing,
    /// The first line of a private file (`--token-file`), read again on SIGHUP.
    File(std::path::PathBuf),
    /// `GPULSE_TOKEN`, else one gpulse makes up.
    EnvOrNew,
}

impl TokenFrom {
    /// The file it is read from, where it is.
    pub fn file(&self) -> Option<&Path> {
        match self {
            TokenFrom::File(p) => Some(p),
            _ => None,
        }
    }
}

/// The token, and whether gpulse generated it.
pub fn token(from: &TokenFrom) -> anyhow::Result<(Option<String>, bool)> {
    match from {
        TokenFrom::Nothing => Ok((None, false)),
        TokenFrom::File(path) => Ok((Some(token_from_file(path)?), false)),
        TokenFrom::EnvOrNew => env_token().map(|(t, g)| (Some(t), g)),
    }
}

/// The most of a token file read: a token is a line, and `/dev/zero` must not fill memory.
const TOKEN_FILE_MAX_BYTES: u64 = 4096;

/// The first line of `path`, which must be a regular file that other users cannot read (as ssh
/// asks of a key), holding a strong token.
pub fn token_from_file(path: &std::path::Path) -> anyhow::Result<String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).with_context(|| format!("cannot read {shown}"))?;
    anyhow::ensure!(meta.is_file(), "{shown} is not a regular file; the token must be in one");
    anyhow::ensure!(
        meta.mode() & 0o004 == 0,
        "{shown} can be read by every user (mode {:o}); make it private: chmod 600 {shown}",
        meta.mode() & 0o777
    );
    let mut text = Vec::new();
    std::fs::OpenOptions::new()
        .read(true)
        // A file swapped for a FIFO after the check must not block the start.
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .and_then(|f| f.take(TOKEN_FILE_MAX_BYTES).read_to_end(&mut text))
        .with_context(|| format!("cannot read {shown}"))?;
    let text = String::from_utf8_lossy(&text);
    let t = text.lines().next().unwrap_or("").trim();
    check_token(t).map_err(|why| anyhow::anyhow!("the token in {shown} {why}"))?;
    Ok(t.to_owned())
}

/// `GPULSE_TOKEN`, else a new token; and whether it is new.
pub fn env_token() -> anyhow::Result<(String, bool)> {
    match std::env::var("GPULSE_TOKEN") {
        Ok(t) if !t.trim().is_empty() => {
            check_token(t.trim()).map_err(|why| anyhow::anyhow!("GPULSE_TOKEN {why}"))?;
            Ok((t.trim().to_owned(), false))
        }
        _ => Ok((random_token(), true)),
    }
}

/// The names the server answers to: this machine's (short and full) and the ones allowed.
pub fn host_names(allowed: &[String]) -> Vec<String> {
    let full = hostname();
    let short = full.split('.').next().unwrap_or_default().to_owned();
    [full, short].into_iter().filter(|n| !n.is_empty()).chain(allowed.iter().cloned()).collect()
}

/// This machine's name, as the kernel holds it; empty where it cannot be read.
fn hostname() -> String {
    gpulse_sample::host::hostname().unwrap_or_default()
}
