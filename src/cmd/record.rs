//! `gpulse record`: every GPU, the host and a process tree, into a crash-safe recording.

use std::io::Write as _;
use std::process::ExitCode;

use gpulse_live::{Collector, Pipeline, Stopped, Until, WithStacks};
use gpulse_sample::stacks::{Scope, StackOptions};

use crate::cli::{GlobalArgs, RecordArgs};
use crate::{recorder, signal};

pub fn run(global: &GlobalArgs, args: &RecordArgs) -> anyhow::Result<ExitCode> {
    if let Some(pid) = args.pid {
        anyhow::ensure!(gpulse_sample::proc_info::is_running(pid), "no process {pid}");
    }
    // Claimed first, so that a refusal comes before any warning about the driver.
    let claim = gpulse_record::claim(&args.output)?;
    let poller = recorder::poller(
        recorder::open_source(global, "recording", false, &gpulse_model::GPM_RECORDED, &[])?,
        args.pid,
    );
    let recording = recorder::create(claim, &poller, args.interval, args.pid, None, &[])?;
    let gpus = poller.devices().len();
    let mut pipeline = Pipeline::new(Some(recorder::store(recording)), None);
    let span = Span::default();
    pipeline.add_sink(Box::new(span.clone()));
    signal::catch_stop_signals();
    let _ = writeln!(std::io::stderr(), "{}", starting_line(args, gpus));
    let collector = Collector::spawn_for(poller, args.interval, args.duration);
    // The followed process's end is looked for between polls, so that the recording stops
    // within a tick of it (with a closing poll), not at the next poll an interval later.
    let stop = || {
        recorder::stop_on_signal().or_else(|| {
            let pid = args.pid?;
            (!gpulse_sample::proc_info::is_running(pid)).then(|| format!("process {pid} exited"))
        })
    };
    let until = Until { stop, needs_recording: true, closing_poll: true };
    // The followed tree's Python main threads, as `run` samples a job's; without a tree, the
    // node's GPU processes'.
    let mut watch = match (args.no_stacks, args.pid) {
        (true, _) => WithStacks::new(until, None),
        (false, Some(pid)) => WithStacks::new(
            until,
            Some((Scope::Tree(pid), StackOptions { rate_hz: args.stacks_hz, ..Default::default() })),
        ),
        (false, None) => {
            let (watch, roots) = WithStacks::on_node(until, args.stacks_hz);
            pipeline.add_sink(roots);
            watch
        }
    };
    let end = gpulse_live::drive(collector, &mut pipeline, &mut watch);
    watch.finish(&mut pipeline);
    let (reason, failed) = match end {
        Stopped::Asked(r) => (r, false),
        Stopped::DurationReached => ("duration reached".to_owned(), false),
        Stopped::RootGone => (format!("process {} exited", args.pid.unwrap_or(0)), false),
        // What was recorded is closed cleanly, with why it stopped.
        Stopped::SamplingFailed(e) => (format!("sampling failed: {e}"), true),
        Stopped::WriteFailed(l) => (format!("writing failed: {}", l.error), true),
    };
    let polls = pipeline.polls();
    if let Some(lost) = pipeline.finish(&reason, serde_json::Map::new()) {
        anyhow::bail!("cannot finish {}: {}", args.output.display(), lost.error);
    }
    // After SIGHUP the terminal may be gone: a failed write must not turn a clean stop into a panic.
    let _ = writeln!(
        std::io::stderr(),
        "recorded {polls} sample{} of {gpus} GPU{} over {:.1} s to {}; {reason}",
        if polls == 1 { "" } else { "s" },
        if gpus == 1 { "" } else { "s" },
        span.seconds(),
        args.output.display()
    );
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// The time the recording spans, from its first poll to its last: what `diagnose` of the file
/// accounts for, not the time gpulse took to start and to close it.
#[derive(Clone, Default)]
struct Span(std::sync::Arc<std::sync::Mutex<Option<(i64, i64)>>>);

impl Span {
    fn seconds(&self) -> f64 {
        self.0.lock().map_or(0.0, |s| s.map_or(0.0, |(first, last)| (last - first) as f64 / 1e6))
    }
}

impl gpulse_live::Sink for Span {
    fn frame(&mut self, frame: &gpulse_live::Frame) {
        let t = frame.poll.host.timestamp_us;
        if let Ok(mut s) = self.0.lock() {
            *s = Some(s.map_or((t, t), |(first, _)| (first, t)));
        }
    }
}

/// What is recorded, where, how often, and how it stops: the first thing a user sees.
fn starting_line(args: &RecordArgs, gpus: usize) -> String {
    let what = match (gpus, args.pid) {
        (0, None) => "the host".to_string(),
        (0, Some(pid)) => format!("the host and process {pid}'s tree"),
        (n, None) if args.no_stacks => format!("{n} GPU{} and the host", if n == 1 { "" } else { "s" }),
        (n, None) => {
            format!("{n} GPU{}, their processes' Python main threads and the host", if n == 1 { "" } else { "s" })
        }
        (n, Some(pid)) => format!("{n} GPU{}, the host and process {pid}'s tree", if n == 1 { "" } else { "s" }),
    };
    let until = match (args.duration, args.pid) {
        (Some(d), _) => format!("for {}; Ctrl-C stops it sooner", crate::duration::show(d)),
        (None, Some(pid)) => format!("until process {pid} exits; Ctrl-C stops it sooner"),
        (None, None) => "until Ctrl-C (or SIGTERM)".to_string(),
    };
    format!(
        "gpulse: recording {what} every {} to {}, {until}",
        crate::duration::show(args.interval),
        args.output.display()
    )
}
