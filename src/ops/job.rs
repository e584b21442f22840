//! Running a watched job, the use case `run` and `attach` share: where its recording goes, the
//! session with its status and its server, and what is said at its end.

use std::path::{Path, PathBuf};
use std::time::Duration;

use gpulse_job::marks::MarkReceiver;
use gpulse_job::terminal::StatusStyle;
use gpulse_job::{Options, Session};
use gpulse_record::{Claim, Writer};
use gpulse_sample::Poller;
use gpulse_serve::WebConfig;

/// How a job is watched: what `run` and `attach` share.
#[derive(Debug, Clone)]
pub struct JobOptions {
    /// The recording to create; else a timestamped file in `./gpulse-runs/`.
    pub output: Option<PathBuf>,
    pub interval: Duration,
    /// The live status on gpulse's stderr.
    pub status: StatusStyle,
    /// Time between status lines, where they are lines.
    pub status_every: Duration,
    /// Write the HTML report at the end.
    pub report: bool,
    /// Serve the job live on this address, as `serve` does.
    pub serve: Option<std::net::SocketAddr>,
    /// TLS and basic auth for the server.
    pub web_config: Option<PathBuf>,
    /// Samples a second of each Python main thread of the job; `None` samples none.
    pub stacks_hz: Option<f64>,
}

/// The web configuration, read and checked as `serve` reads it, before anything is claimed or
/// started: a mistake in it is an error, where a server that cannot start is not.
pub fn web_config(o: &JobOptions) -> anyhow::Result<WebConfig> {
    super::serving::web_config(o.web_config.as_deref())
}

/// The session of a job watched with `o`: its status on gpulse's stderr, and the server it
/// starts beside it with `web` (from [`web_config`]). `recording` is `None` when it could not be
/// created.
pub fn session(
    recording: Option<Writer>,
    poller: Poller,
    output: PathBuf,
    o: &JobOptions,
    web: WebConfig,
    marks: Option<MarkReceiver>,
    instrumented: bool,
) -> Session {
    let stacks = o.stacks_hz.map(|rate_hz| gpulse_sample::stacks::StackOptions { rate_hz, ..Default::default() });
    let options =
        Options { interval: o.interval, status: o.status, status_every: o.status_every, instrumented, stacks };
    let mut views: Vec<Box<dyn gpulse_live::Sink + Send>> = Vec::new();
    if let Some(listen) = o.serve {
        // Serving is a view of the job: one that cannot start never keeps the job from running.
        match serve_sink(listen, web, poller.devices()) {
            Ok(sink) => views.push(Box::new(sink)),
            Err(e) => eprintln!("gpulse: not serving ({}); the job runs anyway", super::describe(&e)),
        }
    }
    Session::new(recording.map(super::recorder::store), poller, output, &options, marks, views)
}

/// Closes the session with `reason` and `fields` (how the job ended); then prints the diagnosis,
/// the report's path (unless `report` is off) and the GPUs each process of the job held.
pub fn finish(
    session: Session,
    output: &Path,
    reason: &str,
    fields: serde_json::Map<String, serde_json::Value>,
    report: bool,
) {
    let lost = session.finish(reason, fields);
    // What was written is still worth a diagnosis, whatever was lost after it.
    if output.metadata().is_ok_and(|m| m.len() > 0) {
        super::summary::print(output, report, lost.as_deref());
    }
}

/// Claims `-o`, or `./gpulse-runs/<local time>-<name>.db` (the folder created on demand). An
/// existing `-o` is refused; any other failure only means the job runs unrecorded, since gpulse's
/// bookkeeping must never keep a job from starting.
pub fn claim_output(output: Option<&Path>, name: &str) -> anyhow::Result<Result<Claim, (PathBuf, anyhow::Error)>> {
    match output {
        Some(o) => match gpulse_record::claim(o) {
            Ok(c) => Ok(Ok(c)),
            Err(e @ gpulse_record::RecordError::Exists(_)) => Err(e.into()),
            Err(e) => Ok(Err((o.to_path_buf(), e.into()))),
        },
        None => Ok(claim_default(name).map_err(|e| (PathBuf::from("gpulse-runs"), e))),
    }
}

/// The server `--serve` starts beside the job, locked by `GPULSE_TOKEN` or a generated token.
/// Its web configuration is never read again: SIGHUP is the job's under `run`, and ends
/// `attach`.
fn serve_sink(
    listen: std::net::SocketAddr,
    web: WebConfig,
    devices: &[gpulse_model::DeviceInfo],
) -> anyhow::Result<gpulse_serve::ServeSink> {
    let (token, generated) = super::serving::env_token()?;
    let config = gpulse_serve::Config {
        listen,
        auth: std::sync::Arc::new(gpulse_serve::Auth::new(Some(token.clone()), false)),
        hosts: super::serving::host_names(&[]),
        max_subscribers: 64,
        report: None,
        limits: Default::default(),
        web: std::sync::Arc::new(gpulse_serve::SharedWebConfig::new(web)),
    };
    super::serving::start(config, devices, "Hostname", super::serving::TokenShown::of(Some(&token), generated, None))
}

/// Names, claims and creates the recording of a job. Failing that, the job runs unrecorded, with
/// one line saying why; the path is where it would have been. An existing `-o` is an error.
pub fn open_recording(
    output: Option<&Path>,
    name: &str,
    poller: &Poller,
    interval: Duration,
    root: Option<u32>,
    command: String,
    extra: &[(gpulse_model::MetaKey, String)],
) -> anyhow::Result<(PathBuf, Option<Writer>)> {
    let created = match claim_output(output, name)? {
        Ok(c) => {
            let path = c.path().to_path_buf();
            (path, super::recorder::create(c, poller, interval, root, Some(command), extra))
        }
        Err((path, e)) => (path, Err(e)),
    };
    Ok(match created {
        (path, Ok(w)) => (path, Some(w)),
        (path, Err(e)) => {
            eprintln!("gpulse: not recording ({}); the job runs anyway", super::describe(&e));
            (path, None)
        }
    })
}

/// The first free `./gpulse-runs/<local time>-<name>[-N].db`, claimed atomically: two jobs
/// started in the same second get two files.
fn claim_default(name: &str) -> anyhow::Result<Claim> {
    let dir = Path::new("gpulse-runs");
    std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    let stamp = gpulse_base::clock::format_local(gpulse_base::clock::now_us());
    // "2026/11/30 08:00:00.123" → "20261130-080000"
    let digits: String = stamp.chars().filter(char::is_ascii_digit).collect();
    let stamp = format!("{}-{}", &digits[..8], &digits[8..14]);
    let safe: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .take(40)
        .collect();
    for n in 0..1000 {
        let suffix = if n == 0 { String::new() } else { format!("-{n}") };
        match gpulse_record::claim(&dir.join(format!("{stamp}-{safe}{suffix}.db"))) {
            Err(gpulse_record::RecordError::Exists(_)) => continue,
            claimed => return Ok(claimed?),
        }
    }
    anyhow::bail!("too many recordings named {safe} in {}", dir.display())
}
