//! `gpulse serve`: samples every GPU and the host, diagnoses as it goes, and serves it all.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use gpulse_diagnose::LiveDiagnosis;
use gpulse_live::{Collector, Pipeline, Stopped};
use gpulse_serve::{Auth, Config, Server, random_token};

use crate::cli::{GlobalArgs, ServeArgs};
use crate::{recorder, signals};

pub fn run(global: &GlobalArgs, args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let (token, generated) = token(args)?;
    anyhow::ensure!(
        token.is_some() || args.listen.ip().is_loopback(),
        "--no-auth serves loopback addresses only; {} would show every process to anyone who reaches it",
        args.listen
    );
    let claim = args.record.as_deref().map(gpulse_record::claim).transpose()?;
    let poller = recorder::poller(recorder::open_source(global, false, &gpulse_model::GPM_SERVED)?, None);
    let recording = claim.map(|c| recorder::create(c, &poller, args.interval, None, None, &[])).transpose()?;
    let report = args.record.clone().map(|path| -> gpulse_serve::ReportFn {
        Box::new(move || {
            let analysis = crate::cmd::diagnose::analyze(&path).map_err(|e| crate::cmd::describe(&e))?;
            Ok(gpulse_report::html::render(&path.display().to_string(), &analysis))
        })
    });
    let auth = Auth::new(token.clone(), args.metrics_auth);
    let config = Config { listen: args.listen, auth, max_subscribers: 64, report };
    let server = Server::start(config).with_context(|| format!("cannot listen on {}", args.listen))?;
    let hostname =
        std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_owned()).unwrap_or_default();
    let host_label = if args.lowercase_hostname { "hostname" } else { "Hostname" };
    let mut pipeline = Pipeline::new(recording, Some(LiveDiagnosis::new(poller.devices(), false)));
    pipeline.add_sink(Box::new(server.sink(poller.devices().to_vec(), hostname, host_label)));
    let addr = server.local_addr();
    // The token is printed once, and only when gpulse made it up: a given one is the user's secret.
    match generated.then_some(token.as_deref()).flatten() {
        Some(t) => eprintln!("gpulse: serving on http://{addr}/?token={t}"),
        None => eprintln!("gpulse: serving on http://{addr}/"),
    }
    eprintln!("gpulse: Prometheus scrapes http://{addr}/metrics");
    if !addr.ip().is_loopback() {
        eprintln!("gpulse: warning: plain HTTP on {addr}; put TLS in front of it (a reverse proxy or an SSH tunnel)");
    }
    signals::catch_stop_signals();
    let stop = recorder::stop_when(args.duration, Instant::now());
    let stopped = gpulse_live::drive(Collector::spawn(poller, args.interval), &mut pipeline, stop, None, false);
    let (reason, failed) = match stopped {
        Stopped::Asked(r) => (r, false),
        Stopped::RootGone => ("exited".to_owned(), false),
        Stopped::SamplingFailed(e) => (format!("sampling failed: {e}"), true),
        Stopped::WriteFailed(l) => (format!("writing failed: {}", l.error), true),
    };
    if let Some(lost) = pipeline.finish(&reason, serde_json::Map::new()) {
        eprintln!("gpulse: the recording lost its end: {}", lost.error);
    }
    if failed {
        eprintln!("gpulse: stopped: {reason}");
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// The token, and whether gpulse generated it: `--token-file`, else `GPULSE_TOKEN`, else a new
/// one; none with `--no-auth`.
fn token(args: &ServeArgs) -> anyhow::Result<(Option<String>, bool)> {
    if args.no_auth {
        return Ok((None, false));
    }
    if let Some(path) = &args.token_file {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        let t = text.lines().next().unwrap_or("").trim().to_owned();
        anyhow::ensure!(t.len() >= 16, "the token in {} is shorter than 16 characters", path.display());
        return Ok((Some(t), false));
    }
    match std::env::var("GPULSE_TOKEN") {
        Ok(t) if !t.trim().is_empty() => Ok((Some(t.trim().to_owned()), false)),
        _ => Ok((Some(random_token()), true)),
    }
}
