//! One watched job from start to end: the sampling loop with the job's stderr events, its marks
//! and the live status; then the diagnosis, the report and the ranks' GPUs at exit.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

use gpulse_record::{Claim, Event};

use super::fold::Folder;
use super::marks::{MarkReceiver, Received};
use super::terminal::{StatusStyle, Terminal};
use crate::cli::{JobArgs, StatusMode};
use crate::recorder::Recorder;
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
    recorder: Option<Recorder>,
    output: PathBuf,
    /// What the recording lost when it stopped early (a full disk), for the summary.
    lost: Option<String>,
    live: gpulse_diagnose::LiveDiagnosis,
    pub term: Arc<Terminal>,
    interval: Duration,
    status_every: Duration,
    events_tx: Sender<Event>,
    events_rx: Receiver<Event>,
    marks: Option<MarkReceiver>,
    folder: Folder,
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
    /// `recorder` is `None` when the recording could not be created: the job is watched anyway.
    /// `instrumented`: the job runs under `--instrument`.
    pub fn new(
        recorder: Option<Recorder>,
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
        let (events_tx, events_rx) = channel();
        Self {
            live: gpulse_diagnose::LiveDiagnosis::new(
                recorder.as_ref().map_or(&[][..], Recorder::devices),
                instrumented,
            ),
            recorder,
            output,
            lost: None,
            term: Arc::new(Terminal::new(style)),
            interval: args.interval,
            status_every: args.status_every,
            events_tx,
            events_rx,
            marks,
            folder: Folder::default(),
        }
    }

    /// Whether samples are still being written.
    pub fn is_recording(&self) -> bool {
        self.recorder.is_some()
    }

    /// Follows the process tree under `pid` (the job, once started).
    pub fn follow(&mut self, pid: u32) {
        if let Some(Err(e)) = self.recorder.as_mut().map(|r| r.follow(pid)) {
            self.stop_recording(&e);
        }
    }

    /// Where the job's stderr events go.
    pub fn events(&self) -> Sender<Event> {
        self.events_tx.clone()
    }

    /// Samples until the job ends.
    pub fn watch(&mut self, mut child: Option<&mut Child>) -> JobEnd {
        let start = Instant::now();
        let mut polls: u32 = 0;
        let status_every =
            if self.term.style() == StatusStyle::Row { Duration::from_secs(1) } else { self.status_every };
        let mut next_status = Instant::now() + status_every;
        let mut root_gone = false;
        loop {
            // Sample before looking at the job, so even a job that ends at once leaves a sample.
            if Instant::now() >= start + self.interval * polls {
                polls += 1;
                root_gone |= self.poll();
            }
            match child.as_deref_mut() {
                Some(c) => {
                    for sig in signals::take_to_forward() {
                        // SAFETY: kill(2) on the job's own PID, which this process has not reaped.
                        unsafe { libc::kill(c.id() as libc::pid_t, sig) };
                    }
                    if let Ok(Some(status)) = c.try_wait() {
                        self.drain();
                        return JobEnd::Exited(status);
                    }
                }
                None => {
                    if let Some(sig) = signals::received() {
                        self.drain();
                        return JobEnd::Signal(sig);
                    }
                    if root_gone {
                        self.drain();
                        return JobEnd::RootGone;
                    }
                }
            }
            self.drain();
            if Instant::now() >= next_status {
                next_status = Instant::now() + status_every;
                self.term.status(&gpulse_report::live::status_row(&self.live));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// One poll; true when the watched root is gone.
    fn poll(&mut self) -> bool {
        let Some(rec) = self.recorder.as_mut() else { return false };
        let result = rec.poll().and_then(|p| {
            let gone = p.root_gone;
            if !gone {
                self.live.push_poll(p);
            }
            for f in self.live.update() {
                rec.event(gpulse_sample::now_us() / 1000, "finding", serde_json::to_value(&f)?)?;
            }
            Ok(gone)
        });
        result.unwrap_or_else(|e| {
            self.stop_recording(&e);
            false
        })
    }

    /// Writes what arrived from the job's stderr and from its marks.
    fn drain(&mut self) {
        let events: Vec<Event> = self.events_rx.try_iter().collect();
        let received = self.marks.as_ref().map(MarkReceiver::drain).unwrap_or_default();
        let mut markers = Vec::new();
        let mut all_events = events;
        for r in received {
            match r {
                Received::Marker(m) => self.folder.push(m, &mut markers),
                Received::Event(e) => all_events.push(e),
            }
        }
        self.live.push_markers(&markers);
        for e in &all_events {
            self.live.push_event(e);
        }
        let Some(rec) = self.recorder.as_mut() else { return };
        let result = (|| {
            if !markers.is_empty() {
                rec.markers(&markers)?;
            }
            for e in all_events {
                rec.event(e.t_ms, &e.kind, e.payload)?;
            }
            anyhow::Ok(())
        })();
        if let Err(e) = result {
            self.stop_recording(&e);
        }
    }

    /// A recording that cannot be written stops; the job goes on untouched.
    fn stop_recording(&mut self, e: &anyhow::Error) {
        self.recorder = None;
        self.term.clear();
        let at = gpulse_smi::timestamp::format_local(gpulse_sample::now_us());
        let e = crate::cmd::describe(e);
        self.lost = Some(format!("everything after {} ({e})", &at[11..19]));
        let _ =
            writeln!(std::io::stderr(), "gpulse: stopped recording to {}: {e}; the job goes on", self.output.display());
    }

    /// Closes the recording with `reason` and `fields` (how the job ended, in its stop event);
    /// then prints the diagnosis, the report's path and the GPUs each process of the job held.
    pub fn finish(mut self, reason: &str, fields: serde_json::Map<String, serde_json::Value>, report: bool) {
        self.drain();
        let mut held = Vec::new();
        self.folder.finish(&mut held);
        if !held.is_empty()
            && let Some(Err(e)) = self.recorder.as_mut().map(|r| r.markers(&held))
        {
            self.stop_recording(&e);
        }
        self.term.clear();
        if let Some(marks) = &self.marks {
            let dropped: u64 = marks.stats().dropped.values().sum();
            if dropped > 0
                && let Some(rec) = self.recorder.as_mut()
            {
                let _ = rec.event(
                    gpulse_sample::now_us() / 1000,
                    "marks_dropped",
                    serde_json::json!({ "dropped": dropped, "text": format!("{dropped} marks dropped while the recorder was behind") }),
                );
            }
        }
        if let Some(rec) = self.recorder.take()
            && let Err(e) = rec.finish_with(reason, fields)
        {
            self.lost.get_or_insert(format!("its last second and the run's end ({})", crate::cmd::describe(&e)));
        }
        // What was written is still worth a diagnosis, whatever was lost after it.
        if self.output.metadata().is_ok_and(|m| m.len() > 0) {
            super::summary::print(&self.output, report, self.lost.as_deref());
        }
    }
}
