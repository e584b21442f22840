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

use crate::cli::{JobArgs, StatusMode};

/// `--web-config`, read and checked as `serve` reads it, before anything is claimed or started:
/// a mistake in it is an error, where a server that cannot start is not.
pub fn web_config(args: &JobArgs) -> anyhow::Result<WebConfig> {
    crate::serving::web_config(args.web_config.as_deref())
}

/// The session of a job watched with `args`: its status on gpulse's stderr, and the server
/// `--serve` starts beside it with `web` (from [`web_config`]). `recording` is `None` when it
/// could not be created.
pub fn session(
    recording: Option<Writer>,
    poller: Poller,
    output: PathBuf,
    args: &JobArgs,
    web: WebConfig,
    marks: Option<MarkReceiver>,
    instrumented: bool,
) -> Session {
    let is_tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let status = match args.status {
        StatusMode::Off => StatusStyle::Off,
        StatusMode::Line => StatusStyle::Lines,
        StatusMode::Auto if is_tty => StatusStyle::Row,
        StatusMode::Auto => StatusStyle::Lines,
    };
    let stacks = (!args.no_stacks)
        .then(|| gpulse_sample::stacks::StackOptions { rate_hz: args.stacks_hz, ..Default::default() });
    let options = Options { interval: args.interval, status, status_every: args.status_every, instrumented, stacks };
    let mut views: Vec<Box<dyn gpulse_live::Sink + Send>> = Vec::new();
    if let Some(listen) = args.serve {
        // Serving is a view of the job: one that cannot start never keeps the job from running.
        match serve_sink(listen, web, poller.devices()) {
            Ok(sink) => views.push(Box::new(sink)),
            Err(e) => eprintln!("gpulse: not serving ({}); the job runs anyway", super::describe(&e)),
        }
    }
    Session::new(recording.map(crate::recorder::store), poller, output, &options, marks, views)
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
    let (token, generated) = crate::serving::env_token()?;
    let config = gpulse_serve::Config {
        listen,
        auth: std::sync::Arc::new(gpulse_serve::Auth::new(Some(token.clone()), false)),
        hosts: crate::serving::host_names(&[]),
        max_subscribers: 64,
        report: None,
        limits: Default::default(),
        web: std::sync::Arc::new(gpulse_serve::SharedWebConfig::new(web)),
    };
    crate::serving::start(config, devices, "Hostname", crate::serving::TokenShown::of(Some(&token), generated, None))
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
            (path, crate::recorder::create(c, poller, interval, root, Some(command), extra))
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
