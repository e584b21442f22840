//! `gpulse record`: every GPU, the host and a process tree, into a crash-safe recording.

use std::process::ExitCode;
use std::time::Instant;

use crate::cli::{GlobalArgs, RecordArgs};
use crate::recorder::{Polled, Recorder, open_source};
use crate::signals;

pub fn run(global: &GlobalArgs, args: &RecordArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(!args.output.exists(), "{} already exists; record to a new file", args.output.display());
    if let Some(pid) = args.pid {
        anyhow::ensure!(gpulse_sample::proc_info::is_running(pid), "no process {pid}");
    }
    let source = open_source(global, false)?;
    let mut rec = Recorder::create(&args.output, source, args.interval, args.pid, None, &[])?;
    signals::catch_stop_signals();
    let start = Instant::now();
    let reason = loop {
        if let Some(sig) = signals::received() {
            break format!("signal {sig}");
        }
        if args.duration.is_some_and(|d| start.elapsed() >= d) {
            break "duration reached".to_owned();
        }
        if let Polled::RootExited = rec.poll()? {
            break format!("process {} exited", args.pid.unwrap_or(0));
        }
        signals::sleep_until(start + args.interval.saturating_mul(rec.polls() as u32));
    };
    let (polls, gpus) = (rec.polls(), rec.devices().len());
    rec.finish(&reason)?;
    eprintln!(
        "recorded {polls} samples of {gpus} GPU{} over {:.1} s to {} ({reason})",
        if gpus == 1 { "" } else { "s" },
        start.elapsed().as_secs_f64(),
        args.output.display()
    );
    Ok(ExitCode::SUCCESS)
}
