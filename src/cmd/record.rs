//! `gpulse record`: every GPU, the host and a process tree, into a crash-safe recording.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use gpulse_live::{Collector, Pipeline};

use crate::cli::{GlobalArgs, RecordArgs};
use crate::{recorder, signals};

pub fn run(global: &GlobalArgs, args: &RecordArgs) -> anyhow::Result<ExitCode> {
    if let Some(pid) = args.pid {
        anyhow::ensure!(gpulse_sample::proc_info::is_running(pid), "no process {pid}");
    }
    // Claimed first, so that a refusal comes before any warning about the driver.
    let claim = gpulse_record::claim(&args.output)?;
    let poller = recorder::poller(recorder::open_source(global, false)?, args.pid);
    let recording = recorder::create(claim, &poller, args.interval, args.pid, None, &[])?;
    let gpus = poller.devices().len();
    let mut pipeline = Pipeline::new(Some(recording), None);
    signals::catch_stop_signals();
    let (start, start_us) = (Instant::now(), gpulse_sample::now_us());
    let collector = Collector::spawn(poller, args.interval);
    let mut failed = false;
    let reason = loop {
        if let Some(sig) = signals::received() {
            break format!("signal {sig}");
        }
        if args.duration.is_some_and(|d| start.elapsed() >= d) {
            break "duration reached".to_owned();
        }
        let wait = args
            .duration
            .map_or(Duration::from_millis(50), |d| d.saturating_sub(start.elapsed()).min(Duration::from_millis(50)));
        match collector.next(wait) {
            // What the job left behind on the GPUs is the last sample.
            Some(Ok(p)) if p.root_gone => {
                pipeline.poll(p);
                break format!("process {} exited", args.pid.unwrap_or(0));
            }
            Some(Ok(p)) => pipeline.poll(p),
            // What was recorded is closed cleanly, with why it stopped.
            Some(Err(e)) => {
                failed = true;
                break format!("sampling failed: {e}");
            }
            None => {}
        }
        if let Some(lost) = pipeline.lost() {
            failed = true;
            break format!("writing failed: {}", lost.error);
        }
    };
    // A poll taken as the recording stopped is kept, unless it came after the duration.
    let end_us = args.duration.map(|d| start_us + d.as_micros() as i64);
    for p in collector.stop().into_iter().flatten() {
        if !p.root_gone && end_us.is_none_or(|e| p.host.timestamp_us < e) {
            pipeline.poll(p);
        }
    }
    let polls = pipeline.polls();
    if let Some(lost) = pipeline.finish(&reason, serde_json::Map::new()) {
        anyhow::bail!("cannot finish {}: {}", args.output.display(), lost.error);
    }
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
