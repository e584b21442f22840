//! `gpulse record`: every GPU, the host and a process tree, into a crash-safe recording.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Instant;

use crate::cli::{GlobalArgs, RecordArgs};
use crate::recorder::{Recorder, open_source};
use crate::signals;

pub fn run(global: &GlobalArgs, args: &RecordArgs) -> anyhow::Result<ExitCode> {
    if let Some(pid) = args.pid {
        anyhow::ensure!(gpulse_sample::proc_info::is_running(pid), "no process {pid}");
    }
    // Claimed first, so that a refusal comes before any warning about the driver.
    let claim = gpulse_record::claim(&args.output)?;
    let source = open_source(global, false)?;
    let mut rec = Recorder::create(claim, source, args.interval, args.pid, None, &[])?;
    signals::catch_stop_signals();
    let start = Instant::now();
    let mut failed = false;
    let reason = loop {
        if let Some(sig) = signals::received() {
            break format!("signal {sig}");
        }
        if args.duration.is_some_and(|d| start.elapsed() >= d) {
            break "duration reached".to_owned();
        }
        match rec.poll() {
            Ok(p) if p.root_gone => break format!("process {} exited", args.pid.unwrap_or(0)),
            Ok(_) => {}
            // What was recorded is closed cleanly, with why it stopped.
            Err(e) => {
                failed = true;
                break format!("sampling failed: {}", crate::cmd::describe(&e));
            }
        }
        // The duration ends the recording on time, however long the interval.
        let next = start + args.interval.saturating_mul(rec.polls() as u32);
        signals::sleep_until(args.duration.map_or(next, |d| next.min(start + d)));
    };
    let (polls, gpus) = (rec.polls(), rec.devices().len());
    rec.finish(&reason)?;
    // After SIGHUP the terminal may be gone: a failed write must not turn a clean stop into a panic.
    let _ = writeln!(
        std::io::stderr(),
        "recorded {polls} sample{} of {gpus} GPU{} over {:.1} s to {} ({reason})",
        if polls == 1 { "" } else { "s" },
        if gpus == 1 { "" } else { "s" },
        start.elapsed().as_secs_f64(),
        args.output.display()
    );
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
