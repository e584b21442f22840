//! `gpulse serve`: samples every GPU and the host, diagnoses as it goes, and serves it all.

use std::process::ExitCode;

use gpulse_diagnose::RollingDiagnosis;
use gpulse_live::{Collector, Pipeline, Stopped, Until, WithStacks};
use gpulse_serve::{Auth, Config, SharedWebConfig};

use crate::cli::{GlobalArgs, ServeArgs};
use crate::{recorder, serving, signal};

pub fn run(global: &GlobalArgs, args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let (token, generated) = serving::token(args)?;
    anyhow::ensure!(
        token.is_some() || args.listen.ip().is_loopback(),
        "--no-auth serves loopback addresses only; {} would show every process to anyone who reaches it",
        args.listen
    );
    // Before anything is claimed or opened: a mistake in the file costs nothing.
    let web = std::sync::Arc::new(SharedWebConfig::new(serving::web_config(args.web_config.as_deref())?));
    let claim = args.record.as_deref().map(gpulse_record::claim).transpose()?;
    let source =
        recorder::open_source(global, "serving", false, &gpulse_model::GPM_SERVED, gpulse_report::prometheus::PROBES)?;
    let poller = recorder::poller(source, None);
    let recording = claim.map(|c| recorder::create(c, &poller, args.interval, None, None, &[])).transpose()?;
    let report = args.record.clone().map(|path| -> gpulse_serve::ReportFn {
        Box::new(move || {
            let analysis = crate::ops::analyze::analyze(&path).map_err(|e| crate::ops::describe(&e))?;
            Ok(gpulse_report::html::render(&path.display().to_string(), &analysis))
        })
    });
    let auth = std::sync::Arc::new(Auth::new(token.clone(), args.metrics_auth));
    let config = Config {
        listen: args.listen,
        auth: auth.clone(),
        hosts: serving::host_names(&args.allow_host),
        max_subscribers: 64,
        report,
        limits: Default::default(),
        web: web.clone(),
    };
    let label = if args.lowercase_hostname { "hostname" } else { "Hostname" };
    // The token is printed once, and only when gpulse made it up: a given one is the user's secret.
    let shown = serving::TokenShown::of(token.as_deref(), generated, args.token_file.as_deref());
    let sink = serving::start(config, poller.devices(), label, shown)?;
    let mut pipeline = Pipeline::new(
        recording.map(recorder::store),
        Some(RollingDiagnosis::new(poller.devices(), false).following_workloads()),
    );
    pipeline.add_sink(Box::new(sink));
    signal::catch_stop_signals();
    signal::catch_reload();
    let stop = || {
        if signal::take_reload() {
            reload(args, &auth, &web);
        }
        recorder::stop_on_signal()
    };
    // The node's GPU processes' Python main threads, within one budget for them all.
    let until = Until { stop, needs_recording: false, closing_poll: true };
    let mut watch = if args.no_stacks {
        WithStacks::new(until, None)
    } else {
        let (watch, roots) = WithStacks::on_node(until, args.stacks_hz);
        pipeline.add_sink(roots);
        watch
    };
    let collector = Collector::spawn_for(poller, args.interval, args.duration);
    let end = gpulse_live::drive(collector, &mut pipeline, &mut watch);
    watch.finish(&mut pipeline);
    let (reason, failed) = match end {
        Stopped::Asked(r) => (r, false),
        Stopped::DurationReached => ("duration reached".to_owned(), false),
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

/// SIGHUP: the token file and the web configuration read again (a bad one keeps the old, and
/// says why in one line), and every session ended.
fn reload(args: &ServeArgs, auth: &Auth, web: &SharedWebConfig) {
    let token = match &args.token_file {
        Some(path) => match serving::token_from_file(path) {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("gpulse: SIGHUP: {e:#}; the old token stays, sessions end");
                None
            }
        },
        None => None,
    };
    let mut read_again = Vec::new();
    if token.is_some() {
        read_again.push("the token");
    }
    match token {
        Some(t) => auth.reload(Some(t)),
        None => auth.end_sessions(),
    }
    if let Some(path) = &args.web_config {
        // A certificate renewed in place takes the next connection.
        match serving::reload_web_config(path, web) {
            Ok(()) => read_again.push("the web configuration"),
            Err(e) => eprintln!("gpulse: SIGHUP: {e}; the old web configuration stays"),
        }
    }
    let again = match read_again.len() {
        0 => String::new(),
        1 => format!("{} read again from its file, ", read_again[0]),
        _ => format!("{} read again from their files, ", read_again.join(" and ")),
    };
    eprintln!("gpulse: SIGHUP: {again}every session ended");
}
