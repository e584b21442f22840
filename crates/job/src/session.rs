//! One watched job from start to end: the sampling loop with the job's stderr events, its marks
//! and the live status, then the recording closed with how the job ended.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::Child;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

use gpulse_diagnose::RollingDiagnosis;
use gpulse_live::{Collector, Frame, Lost, Pipeline, Sink, StackInput, Store, jobs};
use gpulse_model::{Event, EventKind, MetaKey};
use gpulse_sample::Poller;
use gpulse_sample::stacks::Scope;
use gpulse_sample::stacks::StackOptions;

use crate::marks::{MarkReceiver, Received};
use crate::terminal::{StatusStyle, Terminal};
use gpulse_base::signal;

/// How a job is watched.
pub struct Options {
    /// How often to sample.
    pub interval: Duration,
    /// How the live status shows on gpulse's stderr.
    pub status: StatusStyle,
    /// How often a status line is printed (a row on a terminal redraws every second).
    pub status_every: Duration,
    /// The job runs under `--instrument`.
    pub instrumented: bool,
    /// How the job's Python main threads are sampled; `None` with `--no-stacks`.
    pub stacks: Option<StackOptions>,
}

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
    stacks: Option<StackOptions>,
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
        if let Some(live) = frame.rolling
            && Instant::now() >= self.next
        {
            self.next = Instant::now() + self.every;
            self.term.status(&gpulse_report::row::status_row(live));
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

impl Session {
    /// `recording` is `None` when it could not be created: the job is watched anyway. `views`
    /// are shown each frame besides the status (a server, say).
    pub fn new(
        recording: Option<Box<dyn Store>>,
        poller: Poller,
        output: PathBuf,
        options: &Options,
        marks: Option<MarkReceiver>,
        views: Vec<Box<dyn Sink + Send>>,
    ) -> Self {
        let term = Arc::new(Terminal::new(options.status));
        let every = if options.status == StatusStyle::Row { Duration::from_secs(1) } else { options.status_every };
        let live = RollingDiagnosis::new(poller.devices(), options.instrumented);
        let mut pipeline = Pipeline::new(recording, Some(live));
        for v in views {
            pipeline.add_sink(v);
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
            interval: options.interval,
            events_tx,
            events_rx,
            marks,
            instrumented: options.instrumented,
            stacks: options.stacks.clone(),
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
        self.pipeline.set_meta(MetaKey::RootPid, &pid.to_string());
    }

    /// Where the job's stderr events go.
    pub fn events(&self) -> Sender<Event> {
        self.events_tx.clone()
    }

    /// Samples until the job ends.
    pub fn run(&mut self, child: Option<&mut Child>) -> JobEnd {
        let Some(poller) = self.poller.take() else { return JobEnd::RootGone };
        let collector = Collector::spawn(poller, self.interval);
        let mut job = JobInput {
            marks: self.marks.as_ref(),
            events: &self.events_rx,
            stopped: child.as_deref().map(|c| StopCheck::new(c.id(), &self.term)),
        };
        let mut control = JobControl {
            child,
            root: self.root,
            sampling: true,
            sampling_failed: &mut self.sampling_failed,
            term: &self.term,
        };
        // The job's Python processes are read from the root down, on a thread of their own; a
        // refusal clears the status row before it is said.
        let term = self.term.clone();
        let mut stacks = StackInput::new(self.root.map(Scope::Tree).zip(self.stacks.clone())).telling(move |why| {
            term.clear();
            let _ = writeln!(std::io::stderr(), "gpulse: {why}");
        });
        let end = gpulse_live::drive(collector, &mut self.pipeline, &mut control, &mut [&mut stacks, &mut job]);
        self.pipeline.watch_ended();
        end
    }

    /// Closes the recording with `reason` and `fields` (how the job ended, in its stop event).
    /// Returns what the recording lost, if it stopped early ("everything after 10:02:03 (…)").
    pub fn finish(mut self, reason: &str, mut fields: serde_json::Map<String, serde_json::Value>) -> Option<String> {
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
                    t_ms: gpulse_base::clock::now_us() / 1000,
                    kind: EventKind::MarksRefused,
                    payload: serde_json::json!({ "foreign": stats.foreign, "over_rate": stats.over_rate, "text": text }),
                });
            }
            let dropped: u64 = stats.dropped.values().sum();
            if dropped > 0 {
                self.pipeline.event(Event {
                    t_ms: gpulse_base::clock::now_us() / 1000,
                    kind: EventKind::MarksDropped,
                    payload: serde_json::json!({ "dropped": dropped, "text": format!("{dropped} marks dropped while the recorder was behind") }),
                });
            }
        }
        if let Some(e) = self.sampling_failed.take() {
            fields.insert("sampling_failed".into(), e.into());
        }
        self.pipeline.finish(reason, fields).map(|l| {
            let at = gpulse_base::clock::format_local(l.at_us);
            format!("everything after {} ({})", &at[11..19], l.error)
        })
    }
}

/// What ends the watch of a job: its signals forwarded, its end. A failed poll ends sampling,
/// never the job.
struct JobControl<'a> {
    /// The job gpulse started; `None` when attached to a process it did not start.
    child: Option<&'a mut Child>,
    root: Option<u32>,
    sampling: bool,
    sampling_failed: &'a mut Option<String>,
    term: &'a Terminal,
}

impl gpulse_live::Control for JobControl<'_> {
    type End = JobEnd;

    fn between(&mut self) -> Option<JobEnd> {
        match self.child.as_deref_mut() {
            Some(c) => {
                for sig in signal::take_to_forward() {
                    // SAFETY: kill(2) on the job's own PID, which this process has not reaped.
                    unsafe { libc::kill(c.id() as libc::pid_t, sig) };
                }
                match c.try_wait() {
                    Ok(Some(status)) => Some(JobEnd::Exited(status)),
                    _ => None,
                }
            }
            None => match signal::received() {
                Some(sig) => Some(JobEnd::Signal(sig)),
                // Without samples, the root is looked up directly.
                None if !self.sampling && self.root.is_some_and(|p| !gpulse_sample::proc_info::is_running(p)) => {
                    Some(JobEnd::RootGone)
                }
                None => None,
            },
        }
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

    /// The loop's marks and the job's exit are taken every 20 ms: a fast loop's marks never
    /// pile up, and the summary follows the job's end at once.
    fn tick(&self) -> Duration {
        Duration::from_millis(20)
    }

    /// What the job left on the GPUs, and an Xid its last kernel raised, are in the recording.
    fn closing_poll(&self) -> bool {
        true
    }
}

/// What the job sends besides its samples: its marks, its stderr events, and (for a job gpulse
/// started) when it stops and resumes.
struct JobInput<'a> {
    marks: Option<&'a MarkReceiver>,
    events: &'a Receiver<Event>,
    stopped: Option<StopCheck<'a>>,
}

impl gpulse_live::Input for JobInput<'_> {
    /// Live: whatever has arrived, whatever poll comes next. Whether the job is stopped is
    /// looked at between polls only, right after the control found it alive.
    fn drain(&mut self, pipeline: &mut Pipeline, until_us: Option<i64>) {
        if let Some(s) = self.stopped.as_mut().filter(|_| until_us.is_none()) {
            s.check(pipeline);
        }
        drain(self.marks, self.events, pipeline);
    }

    fn finish(&mut self, pipeline: &mut Pipeline) {
        drain(self.marks, self.events, pipeline);
    }
}

/// Whether the job gpulse started is stopped (SIGSTOP, Ctrl-Z of the job alone), looked at
/// every 250 ms: gpulse would otherwise wait in silence.
struct StopCheck<'a> {
    pid: u32,
    term: &'a Terminal,
    /// Whether the job was stopped at the last look, and when to look again.
    stopped: bool,
    check_at: Instant,
}

impl<'a> StopCheck<'a> {
    fn new(pid: u32, term: &'a Terminal) -> Self {
        Self { pid, term, stopped: false, check_at: Instant::now() }
    }

    /// Says when the job stops and when it resumes, on the terminal and in the recording.
    fn check(&mut self, pipeline: &mut Pipeline) {
        let now = Instant::now();
        if now < self.check_at {
            return;
        }
        self.check_at = now + Duration::from_millis(250);
        let pid = self.pid;
        let stopped = gpulse_sample::proc_info::state(pid).is_some_and(|s| s == 'T');
        if stopped == self.stopped {
            return;
        }
        self.stopped = stopped;
        let (kind, text) = if stopped {
            (
                EventKind::JobStopped,
                format!(
                    "the job (PID {pid}) is stopped; gpulse waits for it: `kill -CONT {pid}` (or to gpulse) resumes it"
                ),
            )
        } else {
            (EventKind::JobResumed, format!("the job (PID {pid}) resumed"))
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
            t_ms: gpulse_base::clock::now_us() / 1000,
            kind,
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
