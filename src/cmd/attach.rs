//! `gpulse attach PID`: watches a job that is already running, until it exits or Ctrl-C.

use std::process::ExitCode;

use crate::cli::{AttachArgs, GlobalArgs};
use crate::cmd::Exit;
use crate::job::session::{JobEnd, Session, default_output};
use crate::recorder::{Recorder, open_source};
use crate::signals;

pub fn run(global: &GlobalArgs, args: &AttachArgs) -> anyhow::Result<ExitCode> {
    let pid = args.pid;
    let Some(cmdline) = gpulse_sample::proc_info::cmdline(pid).filter(|_| gpulse_sample::proc_info::is_running(pid))
    else {
        return Err(Exit { code: 1, message: format!("no process {pid}"), to_stdout: false }.into());
    };
    let name = gpulse_sample::proc_info::comm(pid).unwrap_or_else(|| pid.to_string());
    let output = match &args.job.output {
        Some(o) => o.clone(),
        None => default_output(&format!("{name}-{pid}"))?,
    };
    let source = open_source(global, false)?;
    let recorder = Recorder::create(
        &output,
        source,
        args.job.interval,
        Some(pid),
        Some(cmdline),
        &[("runner", "gpulse attach".to_owned())],
    )?;
    let mut session = Session::new(recorder, output, &args.job, None, false);
    signals::catch_stop_signals();
    eprintln!("gpulse: watching PID {pid} ({name}); Ctrl-C stops watching, not the job");
    let reason = match session.watch(None) {
        JobEnd::RootGone => format!("process {pid} exited"),
        JobEnd::Signal(s) => format!("signal {s}"),
        JobEnd::Exited(_) => "exited".to_owned(),
    };
    session.finish(&reason, serde_json::Map::new(), !args.job.no_report);
    Ok(ExitCode::SUCCESS)
}
