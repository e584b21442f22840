//! What `serve` and `run --serve` share: the token, and starting the server with one line saying
//! where it is.

use anyhow::Context;
use gpulse_serve::{Config, Server, random_token};

use crate::cli::ServeArgs;

/// Starts the server and says where it is, with the token in the URL only when gpulse made it up
/// (`shown`): a token the user gave is their secret. Returns the sink that feeds it.
pub fn start(
    config: Config,
    devices: &[gpulse_model::DeviceInfo],
    host_label: &'static str,
    shown: Option<&str>,
) -> anyhow::Result<gpulse_serve::ServeSink> {
    let listen = config.listen;
    let server = Server::start(config).with_context(|| format!("cannot listen on {listen}"))?;
    let hostname =
        std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_owned()).unwrap_or_default();
    let addr = server.local_addr();
    match shown {
        Some(t) => eprintln!("gpulse: serving on http://{addr}/?token={t}"),
        None => eprintln!("gpulse: serving on http://{addr}/"),
    }
    eprintln!("gpulse: Prometheus scrapes http://{addr}/metrics");
    if !addr.ip().is_loopback() {
        eprintln!("gpulse: warning: plain HTTP on {addr}; put TLS in front of it (a reverse proxy or an SSH tunnel)");
    }
    Ok(server.sink(devices.to_vec(), hostname, host_label))
}

/// The token, and whether gpulse generated it: `--token-file`, else `GPULSE_TOKEN`, else a new
/// one; none with `--no-auth`.
pub fn token(args: &ServeArgs) -> anyhow::Result<(Option<String>, bool)> {
    if args.no_auth {
        return Ok((None, false));
    }
    if let Some(path) = &args.token_file {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        let t = text.lines().next().unwrap_or("").trim().to_owned();
        anyhow::ensure!(t.len() >= 16, "the token in {} is shorter than 16 characters", path.display());
        return Ok((Some(t), false));
    }
    env_token().map(|(t, g)| (Some(t), g))
}

/// `GPULSE_TOKEN`, else a new token; and whether it is new.
pub fn env_token() -> anyhow::Result<(String, bool)> {
    match std::env::var("GPULSE_TOKEN") {
        Ok(t) if !t.trim().is_empty() => {
            anyhow::ensure!(t.trim().len() >= 16, "GPULSE_TOKEN is shorter than 16 characters");
            Ok((t.trim().to_owned(), false))
        }
        _ => Ok((random_token(), true)),
    }
}
