//! Serving every GPU and the host live, diagnosed as it goes (`gpulse serve`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use gpulse_diagnose::RollingDiagnosis;
use gpulse_live::{Collector, Pipeline, StackInput, Until};
use gpulse_serve::{Auth, Config, SharedWebConfig};

use super::NvmlAccess;
use super::recorder::{self, Ended};
use super::serving::{self, TokenFrom};

/// How to serve, what to record beside it, and until when.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub listen: SocketAddr,
    pub interval: Duration,
    pub duration: Option<Duration>,
    pub token: TokenFrom,
    /// `/metrics` asks for the token too.
    pub metrics_auth: bool,
    /// Also record, into this new file; the dashboard's report reads it.
    pub record: Option<PathBuf>,
    /// TLS and basic auth, from a Prometheus exporter web config; read again on SIGHUP.
    pub web_config: Option<PathBuf>,
    /// The label the metrics name the host by (`Hostname`, or dcgm-exporter's lower case).
    pub host_label: &'static str,
    /// Names the server answers to besides this machine's.
    pub allow_hosts: Vec<String>,
    /// Samples a second of each GPU process's Python main thread; `None` samples none.
    pub stacks_hz: Option<f64>,
}

/// Serves until the duration or a stop signal; SIGHUP reads the token file and the web
/// configuration again and ends every session.
pub fn serve(nvml: &NvmlAccess, o: &ServeOptions) -> anyhow::Result<ExitCode> {
    let (token, generated) = serving::token(&o.token)?;
    anyhow::ensure!(
        token.is_some() || o.listen.ip().is_loopback(),
        "--no-auth serves loopback addresses only; {} would show every process to anyone who reaches it",
        o.listen
    );
    // Before anything is claimed or opened: a mistake in the file costs nothing.
    let web = std::sync::Arc::new(SharedWebConfig::new(serving::web_config(o.web_config.as_deref())?));
    let claim = o.record.as_deref().map(gpulse_record::claim).transpose()?;
    let source =
        recorder::open_source(nvml, "serving", false, &gpulse_model::GPM_SERVED, gpulse_report::prometheus::PROBES)?;
    let poller = recorder::poller(source, None);
    let recording = claim.map(|c| recorder::create(c, &poller, o.interval, None, None, &[])).transpose()?;
    let report = o.record.clone().map(|path| -> gpulse_serve::ReportFn {
        Box::new(move || {
            let analysis = super::analyze::analyze(&path).map_err(|e| super::describe(&e))?;
            Ok(gpulse_report::html::render(&path.display().to_string(), &analysis))
        })
    });
    let auth = std::sync::Arc::new(Auth::new(token.clone(), o.metrics_auth));
    let config = Config {
        listen: o.listen,
        auth: auth.clone(),
        hosts: serving::host_names(&o.allow_hosts),
        max_subscribers: 64,
        report,
        limits: Default::default(),
        web: web.clone(),
    };
    // The token is printed once, and only when gpulse made it up: a given one is the user's secret.
    let shown = serving::TokenShown::of(token.as_deref(), generated, o.token.file());
    let sink = serving::start(config, poller.devices(), o.host_label, shown)?;
    let mut pipeline = Pipeline::new(
        recording.map(recorder::store),
        Some(RollingDiagnosis::new(poller.devices(), false).following_workloads()),
    );
    pipeline.add_sink(Box::new(sink));
    gpulse_base::signal::catch_stop_signals();
    gpulse_base::signal::catch_reload();
    let stop = || {
        if gpulse_base::signal::take_reload() {
            reload(o, &auth, &web);
        }
        recorder::stop_on_signal()
    };
    // The node's GPU processes' Python main threads, within one budget for them all.
    let until = Until { stop, needs_recording: false, closing_poll: true };
    let stacks = match o.stacks_hz {
        None => StackInput::new(None),
        Some(rate_hz) => {
            let (stacks, roots) = StackInput::on_node(rate_hz);
            pipeline.add_sink(roots);
            stacks
        }
    };
    let collector = Collector::spawn_for(poller, o.interval, o.duration);
    let Ended { reason, failed } = recorder::run_to_end(collector, &mut pipeline, until, stacks, None);
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
fn reload(o: &ServeOptions, auth: &Auth, web: &SharedWebConfig) {
    let token = match o.token.file() {
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
    if let Some(path) = &o.web_config {
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
