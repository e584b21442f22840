//! One watched job from start to end: the sampling loop with the job's stderr events, its marks
//! and the live status; then the diagnosis, the report and the ranks' GPUs at exit.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

use gpulse_diagnose::LiveDiagnosis;
use gpulse_live::{Collector, Frame, Lost, Pipeline, Sink, jobs};
use gpulse_record::{Claim, Event, Writer};
use gpulse_sample::Poller;

use super::marks::{MarkReceiver, Received};
use super::terminal::{StatusStyle, Terminal};
use crate::cli::{JobArgs, StatusMode};
use crate::signals;

/// How the watch ended.
pub enum JobEnd {
    /// The job gpulse started exited.
    Exited(std::process::ExitStatus),
    /// The attached process is gone.
    RootGone,
    /// gpulse was asked to stop (attach only: a started job gets the signal instead).
    Signal(i32),
}

pub struct Session {
    pipeline: Pipeline,
    /// Until the watch starts; then the collector samples with it.
    poller: Option<Poller>,
    root: Option<u32>,
    /// Why sampling stopped early, if it did.
    sampling_failed: Option<String>,
    output: PathBuf,
    pub term: Arc<Terminal>,
    interval: Duration,
    events_tx: Sender<Event>,
    events_rx: Receiver<Event>,
    marks: Option<MarkReceiver>,
    instrumented: bool,
}

/// The live status on gpulse's stderr, and the notice when the recording stops.
struct StatusSink {
    term: Arc<Terminal>,
    output: PathBuf,
    every: Duration,
    next: Instant,
}

impl Sink for StatusSink {
    fn frame(&mut self, frame: &Frame) {
        if let Some(live) = frame.live
            && Instant::now() >= self.next
        {
            self.next = Instant::now() + self.every;
            self.term.status(&gpulse_report::live::status_row(live));
        }
    }

    fn recording_stopped(&mut self, lost: &Lost) {
        self.term.clear();
        let _ = writeln!(
            std::io::stderr(),
            "gpulse: stopped recording to {}: {}; the job goes on",
            self.output.display(),
            lost.error
        );
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
fn serve_sink(
    listen: std::net::SocketAddr,
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
        web: Default::default(),
    };
    crate::serving::start(config, devices, "Hostname", generated.then_some(token.as_str()))
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
    extra: &[(&str, String)],
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
            eprintln!("gpulse: not recording ({}); the job runs anyway", crate::app::describe(&e));
            (path, None)
        }
    })
}

/// The first free `./gpulse-runs/<local time>-<name>[-N].db`, claimed atomically: two jobs
/// started in the same second get two files.
fn claim_default(name: &str) -> anyhow::Result<Claim> {
    let dir = Path::new("gpulse-runs");
    std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    let stamp = gpulse_smi::timestamp::format_local(gpulse_sample::now_us());
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

impl Session {
    /// `recording` is `None` when it could not be created: the job is watched anyway.
    /// `instrumented`: the job runs under `--instrument`.
    pub fn new(
        recording: Option<Writer>,
        poller: Poller,
        output: PathBuf,
        args: &JobArgs,
        marks: Option<MarkReceiver>,
        instrumented: bool,
    ) -> Self {
        let is_tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let style = match args.status {
            StatusMode::Off => StatusStyle::Off,
            StatusMode::Line => StatusStyle::Lines,
            StatusMode::Auto if is_tty => StatusStyle::Row,
            StatusMode::Auto => StatusStyle::Lines,
        };
        let term = Arc::new(Terminal::new(style));
        let every = if term.style() == StatusStyle::Row { Duration::from_secs(1) } else { args.status_every };
        let live = LiveDiagnosis::new(poller.devices(), instrumented);
        let mut pipeline = Pipeline::new(recording.map(crate::recorder::store), Some(live));
        if let Some(listen) = args.serve {
            // Serving is a view of the job: one that cannot start never keeps the job from running.
            match serve_sink(listen, poller.devices()) {
                Ok(sink) => pipeline.add_sink(Box::new(sink)),
                Err(e) => eprintln!("gpulse: not serving ({}); the job runs anyway", crate::app::describe(&e)),
            }
        }
        let next = Instant::now() + every;
        pipeline.add_sink(Box::new(StatusSink { term: term.clone(), output: output.clone(), every, next }));
        let (events_tx, events_rx) = channel();
        Self {
            pipeline,
            poller: Some(poller),
            root: None,
            sampling_failed: None,
            output,
            term,
            interval: args.interval,
            events_tx,
            events_rx,
            marks,
            instrumented,
        }
    }

    /// Whether samples are still being written.
    pub fn is_recording(&self) -> bool {
        self.pipeline.is_recording()
    }

    /// Follows the process tree under `pid` (the job, once started), and lists the job where
    /// `gpulse top` finds it.
    pub fn follow(&mut self, pid: u32, command: String) {
        let recording = self.pipeline.is_recording().then(|| self.output.clone());
        match jobs::Registration::new(&jobs::dir(), pid, command, recording, self.instrumented) {
            Ok(r) => self.pipeline.add_sink(Box::new(jobs::JobSink::new(r))),
            Err(e) => eprintln!("gpulse: `gpulse top` will not list this job ({e})"),
        }
        self.root = Some(pid);
        if let Some(m) = self.marks.as_mut()
            && let Err(e) = m.start(pid)
        {
            eprintln!("gpulse: no marks from the job (cannot read its socket: {e})");
        }
        if let Some(p) = self.poller.as_mut() {
            p.follow(pid);
        }
        self.pipeline.set_meta("root_pid", &pid.to_string());
    }

    /// Where the job's stderr events go.
    pub fn events(&self) -> Sender<Event> {
        self.events_tx.clone()
    }

    /// Samples until the job ends.
    pub fn watch(&mut self, child: Option<&mut Child>) -> JobEnd {
        let Some(poller) = self.poller.take() else { return JobEnd::RootGone };
        let collector = Collector::spawn(poller, self.interval);
        let mut watch = JobWatch {
            child,
            root: self.root,
            sampling: true,
            sampling_failed: &mut self.sampling_failed,
            term: &self.term,
            marks: self.marks.as_ref(),
            events: &self.events_rx,
            job_stopped: false,
            stop_check_at: Instant::now(),
        };
        let end = gpulse_live::drive(collector, &mut self.pipeline, &mut watch);
        drain(self.marks.as_ref(), &self.events_rx, &mut self.pipeline);
        self.pipeline.watch_ended();
        end
    }

    /// Closes the recording with `reason` and `fields` (how the job ended, in its stop event);
    /// then prints the diagnosis, the report's path and the GPUs each process of the job held.
    pub fn finish(mut self, reason: &str, mut fields: serde_json::Map<String, serde_json::Value>, report: bool) {
        drain(self.marks.as_ref(), &self.events_rx, &mut self.pipeline);
        self.term.clear();
        if let Some(marks) = &self.marks {
            let stats = marks.stats();
            if stats.foreign + stats.over_rate > 0 {
                let text = format!(
                    "marks refused: {} datagrams from processes outside the job, {} lines over a sender's rate",
                    stats.foreign, stats.over_rate
                );
                eprintln!("gpulse: {text}");
                self.pipeline.event(Event {
                    t_ms: gpulse_sample::now_us() / 1000,
                    kind: "marks_refused".into(),
                    payload: serde_json::json!({ "foreign": stats.foreign, "over_rate": stats.over_rate, "text": text }),
                });
            }
            let dropped: u64 = stats.dropped.values().sum();
            if dropped > 0 {
                self.pipeline.event(Event {
                    t_ms: gpulse_sample::now_us() / 1000,
                    kind: "marks_dropped".into(),
                    payload: serde_json::json!({ "dropped": dropped, "text": format!("{dropped} marks dropped while the recorder was behind") }),
                });
            }
        }
        if let Some(e) = self.sampling_failed.take() {
            fields.insert("sampling_failed".into(), e.into());
        }
        let lost = self.pipeline.finish(reason, fields).map(|l| {
            let at = gpulse_smi::timestamp::format_local(l.at_us);
            format!("everything after {} ({})", &at[11..19], l.error)
        });
        // What was written is still worth a diagnosis, whatever was lost after it.
        if self.output.metadata().is_ok_and(|m| m.len() > 0) {
            super::summary::print(&self.output, report, lost.as_deref());
        }
    }
}

/// What the watch of a job looks after between polls: the job's signals, its end, whether it is
/// stopped, its marks and its stderr events. A failed poll ends sampling, never the job.
struct JobWatch<'a> {
    /// The job gpulse started; `None` when attached to a process it did not start.
    child: Option<&'a mut Child>,
    root: Option<u32>,
    sampling: bool,
    sampling_failed: &'a mut Option<String>,
    term: &'a Terminal,
    marks: Option<&'a MarkReceiver>,
    events: &'a Receiver<Event>,
    /// Whether the job was stopped at the last look, and when to look again.
    job_stopped: bool,
    stop_check_at: Instant,
}

impl gpulse_live::Watch for JobWatch<'_> {
    type End = JobEnd;

    fn between(&mut self, pipeline: &mut Pipeline) -> Option<JobEnd> {
        let end = match self.child.as_deref_mut() {
            Some(c) => {
                for sig in signals::take_to_forward() {
                    // SAFETY: kill(2) on the job's own PID, which this process has not reaped.
                    unsafe { libc::kill(c.id() as libc::pid_t, sig) };
                }
                match c.try_wait() {
                    Ok(Some(status)) => Some(JobEnd::Exited(status)),
                    _ => {
                        let pid = c.id();
                        self.check_stopped(pid, pipeline);
                        None
                    }
                }
            }
            None => match signals::received() {
                Some(sig) => Some(JobEnd::Signal(sig)),
                // Without samples, the root is looked up directly.
                None if !self.sampling && self.root.is_some_and(|p| !gpulse_sample::proc_info::is_running(p)) => {
                    Some(JobEnd::RootGone)
                }
                None => None,
            },
        };
        if end.is_none() {
            drain(self.marks, self.events, pipeline);
        }
        end
    }

    /// Attached, the root is the job; a started job ends when its process is reaped.
    fn root_gone(&mut self) -> Option<JobEnd> {
        self.child.is_none().then_some(JobEnd::RootGone)
    }

    /// Sampling stops, the job goes on, and the recording keeps what it has and says why it
    /// stopped.
    fn sampling_failed(&mut self, e: gpulse_sample::SampleError) -> Option<JobEnd> {
        self.sampling = false;
        self.term.clear();
        let _ = writeln!(std::io::stderr(), "gpulse: sampling stopped: {e}; the job goes on");
        *self.sampling_failed = Some(e.to_string());
        None
    }

    fn schedule_over(&mut self) -> Option<JobEnd> {
        self.sampling = false;
        None
    }
}

impl JobWatch<'_> {
    /// Says when the job stops (SIGSTOP, Ctrl-Z of the job alone) and when it resumes: gpulse
    /// would otherwise wait in silence.
    fn check_stopped(&mut self, pid: u32, pipeline: &mut Pipeline) {
        let now = Instant::now();
        if now < self.stop_check_at {
            return;
        }
        self.stop_check_at = now + Duration::from_millis(250);
        let stopped = gpulse_sample::proc_info::state(pid).is_some_and(|s| s == 'T');
        if stopped == self.job_stopped {
            return;
        }
        self.job_stopped = stopped;
        let (kind, text) = if stopped {
            (
                "job_stopped",
                format!(
                    "the job (PID {pid}) is stopped; gpulse waits for it: `kill -CONT {pid}` (or to gpulse) resumes it"
                ),
            )
        } else {
            ("job_resumed", format!("the job (PID {pid}) resumed"))
        };
        if stopped {
            self.term.notice(Some(&text));
        } else {
            self.term.notice(None);
            if self.term.style() != StatusStyle::Row {
                let _ = writeln!(std::io::stderr(), "gpulse: {text}");
            }
        }
        pipeline.event(Event {
            t_ms: gpulse_sample::now_us() / 1000,
            kind: kind.into(),
            payload: serde_json::json!({ "pid": pid, "text": text }),
        });
    }
}

/// Writes what arrived from the job's stderr and from its marks.
fn drain(marks: Option<&MarkReceiver>, events: &Receiver<Event>, pipeline: &mut Pipeline) {
    let received = marks.map(MarkReceiver::drain).unwrap_or_default();
    let mut folded = Vec::new();
    let mut events: Vec<Event> = events.try_iter().collect();
    for r in received {
        match r {
            Received::Marker(m) => folded.push(m),
            Received::Event(e) => events.push(e),
        }
    }
    pipeline.marks(folded);
    for e in events {
        pipeline.event(e);
    }
}
