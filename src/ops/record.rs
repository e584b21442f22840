//! Recording every GPU, the host and a process tree into a crash-safe file (`gpulse record`).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use gpulse_live::{Collector, Pipeline, StackInput, Until};
use gpulse_sample::stacks::{Scope, StackOptions};

use super::NvmlAccess;
use super::recorder::{self, Ended};

/// What to record, and until when.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    pub output: PathBuf,
    pub interval: Duration,
    /// Stop after this long; else at the followed process's end, or a stop signal.
    pub duration: Option<Duration>,
    /// The process tree to follow.
    pub pid: Option<u32>,
    /// Samples a second of each Python main thread; `None` samples none.
    pub stacks_hz: Option<f64>,
}

/// Records until the duration, the followed process's end or a stop signal, then says what was
/// recorded in one line. A recording that cannot be finished is an error.
pub fn record(nvml: &NvmlAccess, o: &RecordOptions) -> anyhow::Result<ExitCode> {
    if let Some(pid) = o.pid {
        anyhow::ensure!(gpulse_sample::proc_info::is_running(pid), "no process {pid}");
    }
    // Claimed first, so that a refusal comes before any warning about the driver.
    let claim = gpulse_record::claim(&o.output)?;
    let poller =
        recorder::poller(recorder::open_source(nvml, "recording", false, &gpulse_model::GPM_RECORDED, &[])?, o.pid);
    let recording = recorder::create(claim, &poller, o.interval, o.pid, None, &[])?;
    let gpus = poller.devices().len();
    let mut pipeline = Pipeline::new(Some(recorder::store(recording)), None);
    let span = Span::default();
    pipeline.add_sink(Box::new(span.clone()));
    gpulse_base::signal::catch_stop_signals();
    let _ = writeln!(std::io::stderr(), "{}", starting_line(o, gpus));
    let collector = Collector::spawn_for(poller, o.interval, o.duration);
    // The followed process's end is looked for between polls, so that the recording stops
    // within a tick of it (with a closing poll), not at the next poll an interval later.
    let stop = || {
        recorder::stop_on_signal().or_else(|| {
            let pid = o.pid?;
            (!gpulse_sample::proc_info::is_running(pid)).then(|| format!("process {pid} exited"))
        })
    };
    let until = Until { stop, needs_recording: true, closing_poll: true };
    // The followed tree's Python main threads, as `run` samples a job's; without a tree, the
    // node's GPU processes'.
    let stacks = match (o.stacks_hz, o.pid) {
        (None, _) => StackInput::new(None),
        (Some(rate_hz), Some(pid)) => {
            StackInput::new(Some((Scope::Tree(pid), StackOptions { rate_hz, ..Default::default() })))
        }
        (Some(rate_hz), None) => {
            let (stacks, roots) = StackInput::on_node(rate_hz);
            pipeline.add_sink(roots);
            stacks
        }
    };
    let Ended { reason, failed } = recorder::run_to_end(collector, &mut pipeline, until, stacks, o.pid);
    let polls = pipeline.polls();
    if let Some(lost) = pipeline.finish(&reason, serde_json::Map::new()) {
        anyhow::bail!("cannot finish {}: {}", o.output.display(), lost.error);
    }
    // After SIGHUP the terminal may be gone: a failed write must not turn a clean stop into a panic.
    let _ = writeln!(
        std::io::stderr(),
        "recorded {polls} sample{} of {gpus} GPU{} over {:.1} s to {}; {reason}",
        if polls == 1 { "" } else { "s" },
        if gpus == 1 { "" } else { "s" },
        span.seconds(),
        o.output.display()
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
fn starting_line(o: &RecordOptions, gpus: usize) -> String {
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let what = match (gpus, o.pid) {
        (0, None) => "the host".to_string(),
        (0, Some(pid)) => format!("the host and process {pid}'s tree"),
        (n, None) if o.stacks_hz.is_none() => format!("{n} GPU{} and the host", plural(n)),
        (n, None) => format!("{n} GPU{}, their processes' Python main threads and the host", plural(n)),
        (n, Some(pid)) => format!("{n} GPU{}, the host and process {pid}'s tree", plural(n)),
    };
    let until = match (o.duration, o.pid) {
        (Some(d), _) => format!("for {}; Ctrl-C stops it sooner", crate::duration::show(d)),
        (None, Some(pid)) => format!("until process {pid} exits; Ctrl-C stops it sooner"),
        (None, None) => "until Ctrl-C (or SIGTERM)".to_string(),
    };
    format!("gpulse: recording {what} every {} to {}, {until}", crate::duration::show(o.interval), o.output.display())
}
