//! `gpulse run -- CMD`: starts a training command and watches it to the end; exits with its
//! status.

use std::ffi::OsString;
use std::process::ExitCode;

use crate::cli::{GlobalArgs, RunArgs};
use crate::cmd::Exit;
use crate::job::bootstrap::Bootstrap;
use crate::job::cgroup::OomCounter;
use crate::job::child::{self, exit_code};
use crate::job::marks::{MarkReceiver, SOCKET_ENV};
use crate::job::session::{JobEnd, Session, claim_output};
use crate::job::{pump, terminal::StatusStyle};
use crate::recorder::{Recorder, open_source};
use crate::signals;

pub fn run(global: &GlobalArgs, args: &RunArgs) -> anyhow::Result<ExitCode> {
    let program = args.command.first().cloned().unwrap_or_default();
    let name = std::path::Path::new(&program).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // A Python job is named after its script: `python train.py` → train.
    let script = args
        .command
        .iter()
        .skip(1)
        .find(|a| a.to_str().is_some_and(|s| s.ends_with(".py")))
        .and_then(|a| std::path::Path::new(a).file_stem().map(|s| s.to_string_lossy().into_owned()));
    let claim = claim_output(args.job.output.as_deref(), script.as_deref().unwrap_or(&name))?;
    let command_line = args.command.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ");
    let source = open_source(global, true)?;
    let extra = [("runner", "gpulse run".to_owned()), ("instrumented", args.instrument.to_string())];
    let (output, recorder) = match claim {
        Ok(c) => {
            let path = c.path().to_path_buf();
            let created = Recorder::create(c, source, args.job.interval, None, Some(command_line), &extra);
            (
                path,
                created
                    .map_err(|e| eprintln!("gpulse: not recording ({}); the job runs anyway", crate::cmd::describe(&e)))
                    .ok(),
            )
        }
        Err((path, e)) => {
            eprintln!("gpulse: not recording ({}); the job runs anyway", crate::cmd::describe(&e));
            (path, None)
        }
    };
    let marks =
        MarkReceiver::bind().map_err(|e| eprintln!("gpulse: no marks from the job (cannot open a socket: {e})")).ok();
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    let mut _bootstrap = None;
    if let Some(m) = &marks {
        env.push((SOCKET_ENV.into(), m.path().into()));
        if args.instrument {
            let dir = m.path().parent().unwrap_or(m.path());
            match Bootstrap::write(dir) {
                Ok(b) => {
                    env.push(("PYTHONPATH".into(), b.python_path()));
                    _bootstrap = Some(b);
                }
                Err(e) => eprintln!("gpulse: --instrument is off (cannot write its files: {e})"),
            }
        }
    }
    let mut session = Session::new(recorder, output.clone(), &args.job, marks, args.instrument);
    signals::catch_stop_signals();
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
    session.follow(child.id());
    let oom = OomCounter::start(child.id());
    let pump = pump::spawn(stderr, session.term.clone(), session.events());
    let end = session.watch(Some(&mut child));
    // The job's last words (a traceback) may still be in flight; wait briefly for them.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while !pump.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // How it ended goes into the stop event, for the summary and the host_oom rule.
    let mut fields = serde_json::Map::new();
    let (code, reason) = match end {
        JobEnd::Exited(status) => {
            let code = exit_code(status);
            fields.insert("exit_status".into(), code.into());
            match child::killed_by(status) {
                Some(sig) => {
                    let reason = format!("command killed by {sig}");
                    fields.insert("signal".into(), sig.into());
                    (code, reason)
                }
                None => (code, format!("command exited with status {code}")),
            }
        }
        JobEnd::RootGone | JobEnd::Signal(_) => (1, "stopped".to_owned()),
    };
    if let Some(oom) = &oom
        && let Some(kills) = oom.since_start()
    {
        fields.insert("oom_kills".into(), kills.into());
        fields.insert("memory_events".into(), oom.path().display().to_string().into());
    }
    session.finish(&reason, fields, !args.job.no_report);
    Ok(ExitCode::from(code))
}
