//! `gpulse run -- CMD`: starts a training command and watches it to the end; exits with its
//! status.

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use gpulse_job::bootstrap::Bootstrap;
use gpulse_job::cgroup::OomCounter;
use gpulse_job::marks::{MarkReceiver, SOCKET_ENV};
use gpulse_job::{JobEnd, child, pump, terminal::StatusStyle};
use gpulse_model::MetaKey;

use crate::cli::RunArgs;
use crate::cmd::Exit;
use crate::ops::job::{self, open_recording};
use crate::ops::{NvmlAccess, recorder};

pub fn run(nvml: &NvmlAccess, args: &RunArgs) -> anyhow::Result<ExitCode> {
    let o = super::job_options(&args.job);
    let web = job::web_config(&o)?;
    let poller =
        recorder::poller(recorder::open_source(nvml, "recording", true, &gpulse_model::GPM_RECORDED, &[])?, None);
    let command_line = args.command.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ");
    let extra = [(MetaKey::Runner, "gpulse run".to_owned()), (MetaKey::Instrumented, args.instrument.to_string())];
    let (output, recording) = open_recording(
        o.output.as_deref(),
        &job_name(&args.command),
        &poller,
        o.interval,
        None,
        command_line.clone(),
        &extra,
    )?;
    let marks =
        MarkReceiver::bind().map_err(|e| eprintln!("gpulse: no marks from the job (cannot open a socket: {e})")).ok();
    let job_folder = marks.as_ref().map(|m| m.folder().to_owned());
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    let mut _bootstrap = None;
    if let Some(m) = &marks {
        env.push((SOCKET_ENV.into(), m.path().into()));
        if args.instrument {
            match Bootstrap::write(m.path().parent().unwrap_or(m.path())) {
                Ok(b) => {
                    env.push(("PYTHONPATH".into(), b.python_path()));
                    _bootstrap = Some(b);
                }
                Err(e) => eprintln!("gpulse: --instrument is off (cannot write its files: {e})"),
            }
        }
    }
    let mut session = job::session(recording, poller, output.clone(), &o, web, marks, args.instrument);
    gpulse_base::signal::catch_stop_signals();
    gpulse_base::signal::catch_continue();
    let stderr_is_tty = session.term.style() == StatusStyle::Row;
    let child::Job { mut child, stderr } = match child::spawn(&args.command, &env, stderr_is_tty) {
        Ok(j) => j,
        Err(e) => {
            // Nothing ran: leave no recording behind.
            let recorded = session.is_recording();
            drop(session);
            if recorded {
                gpulse_record::remove_with_side_files(&output);
            }
            return Err(Exit { code: e.code, message: e.message, to_stdout: false }.into());
        }
    };
    // Whatever becomes of gpulse, the job's stderr stays open and reaches the terminal.
    let _guardian = gpulse_job::guardian::Guardian::start(&stderr, job_folder.as_deref())
        .map_err(|e| eprintln!("gpulse: the job's stderr depends on gpulse staying alive ({e})"))
        .ok();
    session.follow(child.id(), command_line);
    let oom = OomCounter::start(child.id());
    let pump = pump::spawn(stderr, session.term.clone(), session.events());
    let end = session.run(Some(&mut child));
    // The job's last words (a traceback) may still be in flight; wait briefly for them.
    let deadline = Instant::now() + Duration::from_secs(2);
    while !pump.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let (code, reason, fields) = match end {
        JobEnd::Exited(status) => child::ended(status, oom.as_ref()),
        JobEnd::RootGone | JobEnd::Signal(_) => (1, "stopped".to_owned(), serde_json::Map::new()),
    };
    job::finish(session, &output, &reason, fields, o.report);
    // Last, below the summary: a failed command is not what the diagnosis is about, but it is the
    // first thing to know.
    if code != 0 {
        eprintln!("gpulse: the {}", reason.replacen("command killed", "command was killed", 1));
    }
    Ok(ExitCode::from(code))
}

/// A Python job is named after its script (`python train.py` → train), any other after its
/// program.
fn job_name(command: &[OsString]) -> String {
    let stem = |a: &OsString| Path::new(a).file_stem().map(|s| s.to_string_lossy().into_owned());
    let script = command.iter().skip(1).find(|a| a.to_str().is_some_and(|s| s.ends_with(".py")));
    script
        .and_then(stem)
        .or_else(|| command.first().and_then(|p| Path::new(p).file_name()).map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default()
}
