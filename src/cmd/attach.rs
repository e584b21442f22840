//! `gpulse attach PID`: watches a job that is already running, until it exits or Ctrl-C.

use std::process::ExitCode;

use gpulse_job::JobEnd;
use gpulse_model::MetaKey;

use crate::cli::AttachArgs;
use crate::cmd::Exit;
use crate::ops::job::{self, claim_output};
use crate::ops::{NvmlAccess, recorder};

pub fn run(nvml: &NvmlAccess, args: &AttachArgs) -> anyhow::Result<ExitCode> {
    let o = super::job_options(&args.job);
    let web = job::web_config(&o)?;
    let pid = args.pid;
    let Some(cmdline) = gpulse_sample::proc_info::cmdline(pid).filter(|_| gpulse_sample::proc_info::is_running(pid))
    else {
        return Err(Exit { code: 1, message: format!("no process {pid}"), to_stdout: false }.into());
    };
    let name = gpulse_sample::proc_info::comm(pid).unwrap_or_else(|| pid.to_string());
    // Attaching is all about the recording: one that cannot be made is an error.
    let claim = claim_output(o.output.as_deref(), &format!("{name}-{pid}"))?.map_err(|(_, e)| e)?;
    let output = claim.path().to_path_buf();
    let poller =
        recorder::poller(recorder::open_source(nvml, "recording", false, &gpulse_model::GPM_RECORDED, &[])?, Some(pid));
    let extra = [(MetaKey::Runner, "gpulse attach".to_owned())];
    let recording = recorder::create(claim, &poller, o.interval, Some(pid), Some(cmdline.clone()), &extra)?;
    let mut session = job::session(Some(recording), poller, output.clone(), &o, web, None, false);
    session.follow(pid, cmdline);
    gpulse_base::signal::catch_stop_signals();
    eprintln!("gpulse: watching PID {pid} ({name}); Ctrl-C stops watching, not the job");
    let reason = match session.run(None) {
        JobEnd::RootGone => format!("process {pid} exited"),
        JobEnd::Signal(s) => {
            let reason = gpulse_base::signal::stopped_by(s);
            eprintln!("gpulse: {reason}; process {pid} goes on");
            reason
        }
        JobEnd::Exited(_) => "exited".to_owned(),
    };
    job::finish(session, &output, &reason, serde_json::Map::new(), o.report);
    Ok(ExitCode::SUCCESS)
}
