//! From polls, marks and events to a recording, a rolling diagnosis and frames for the sinks.

use gpulse_diagnose::{Finding, RollingDiagnosis};
use gpulse_model::{Event, EventKind, Marker, Poll};
use gpulse_sample::profile;

use crate::fold::Folder;

/// What a sink is shown after each poll.
pub struct Frame<'a> {
    pub poll: &'a Poll,
    /// The rolling diagnosis, when the pipeline runs one.
    pub rolling: Option<&'a RollingDiagnosis>,
    /// Findings new with this poll (each also written to the recording).
    pub findings: &'a [Finding],
}

/// Something that shows the run as it happens: a status row, a terminal UI, a server.
pub trait Sink {
    fn frame(&mut self, frame: &Frame);
    /// The recording stopped being written; the watch goes on.
    fn recording_stopped(&mut self, _lost: &Lost) {}
    /// The watched job ended: what follows is the summary, not the job.
    fn watch_ended(&mut self) {}
}

/// A failed write, in the store's own words.
pub type StoreError = Box<dyn std::error::Error + Send + Sync>;

/// Where the run is kept as it happens (the binary's SQLite recording), fed in order: the
/// pipeline decides what is kept and when; a store only writes. Behind a trait, so that a view
/// without a recording (`top`) links no storage.
pub trait Store: Send {
    /// The GPUs' snapshot, the host and the watched tree of one poll.
    fn poll(&mut self, poll: &Poll) -> Result<(), StoreError>;
    fn markers(&mut self, marks: &[Marker]) -> Result<(), StoreError>;
    fn event(&mut self, event: &Event) -> Result<(), StoreError>;
    /// The job's Python threads as sampled since the last batch.
    fn stacks(&mut self, batch: &gpulse_model::StackBatch) -> Result<(), StoreError>;
    /// A fact about the run (the followed root, say).
    fn set_meta(&mut self, key: gpulse_model::MetaKey, value: &str) -> Result<(), StoreError>;
    /// Everything written is durable and the store is closed.
    fn finish(self: Box<Self>) -> Result<(), StoreError>;
}

/// Why and when the recording stopped being written.
#[derive(Debug, Clone)]
pub struct Lost {
    pub at_us: i64,
    pub error: String,
}

pub struct Pipeline {
    recording: Option<Box<dyn Store>>,
    rolling: Option<RollingDiagnosis>,
    folder: Folder,
    /// Called on the loop's thread only, so a sink may hold what cannot cross threads (a
    /// locked standard output).
    sinks: Vec<Box<dyn Sink>>,
    polls: u64,
    lost: Option<Lost>,
    /// Per GPU, how many NVLink links were up when last written as an `nvlink` event.
    nvlinks_up: std::collections::HashMap<u32, usize>,
}

impl Pipeline {
    /// `recording`: where to write, if anywhere; `rolling`: the rolling diagnosis, if one is wanted.
    pub fn new(recording: Option<Box<dyn Store>>, rolling: Option<RollingDiagnosis>) -> Self {
        Self {
            recording,
            rolling,
            folder: Folder::default(),
            sinks: Vec::new(),
            polls: 0,
            lost: None,
            nvlinks_up: std::collections::HashMap::new(),
        }
    }

    pub fn add_sink(&mut self, sink: Box<dyn Sink>) {
        self.sinks.push(sink);
    }

    /// Tells the sinks the watched job ended.
    pub fn watch_ended(&mut self) {
        self.sinks.iter_mut().for_each(|s| s.watch_ended());
    }

    pub fn is_recording(&self) -> bool {
        self.recording.is_some()
    }

    pub fn polls(&self) -> u64 {
        self.polls
    }

    pub fn rolling(&self) -> Option<&RollingDiagnosis> {
        self.rolling.as_ref()
    }

    /// What the recording lost, if it stopped early.
    pub fn lost(&self) -> Option<&Lost> {
        self.lost.as_ref()
    }

    /// Records a run fact (the followed root, say).
    pub fn set_meta(&mut self, key: gpulse_model::MetaKey, value: &str) {
        self.write(|w| w.set_meta(key, value));
    }

    /// One poll: written, diagnosed, then shown. A poll taken after the root is gone is written
    /// (what the job left behind) but not diagnosed.
    pub fn poll(&mut self, poll: Poll) {
        profile::timed("total pipeline poll (main thread)", || self.poll_inner(poll));
    }

    fn poll_inner(&mut self, poll: Poll) {
        self.polls += 1;
        let started = profile::start();
        let mut xids = xid_events(&poll);
        xids.extend(self.nvlink_events(&poll));
        self.write(|w| {
            if let Some(snap) = &poll.snapshot {
                for &gpu in &poll.newly_lost {
                    let payload = serde_json::json!({ "gpu": gpu });
                    w.event(&Event { t_ms: snap.timestamp_us / 1000, kind: EventKind::GpuLost, payload })?;
                }
            }
            xids.iter().try_for_each(|e| w.event(e))?;
            w.poll(&poll)
        });
        if let Some(live) = self.rolling.as_mut() {
            xids.iter().for_each(|e| live.push_event(e));
        }
        if let Some(t) = started.filter(|_| self.recording.is_some()) {
            t.finish("sqlite write poll");
        }
        let mut findings = Vec::new();
        if let Some(live) = self.rolling.as_mut() {
            findings = profile::timed("live diagnosis", || {
                if !poll.root_gone {
                    live.push_poll(poll.clone());
                }
                live.update()
            });
        }
        let t_ms = poll.host.timestamp_us / 1000;
        for f in &findings {
            let payload = serde_json::to_value(f).unwrap_or_default();
            self.write(|w| w.event(&Event { t_ms, kind: EventKind::Finding, payload }));
        }
        let frame = Frame { poll: &poll, rolling: self.rolling.as_ref(), findings: &findings };
        if !self.sinks.is_empty() {
            profile::timed("sinks", || self.sinks.iter_mut().for_each(|s| s.frame(&frame)));
        }
    }

    /// An `nvlink` event for each GPU whose count of links up changed (the first reading too):
    /// the recording keeps which GPUs had NVLink, which the diagnosis needs, without a column.
    fn nvlink_events(&mut self, poll: &Poll) -> Vec<Event> {
        let Some(snap) = &poll.snapshot else { return Vec::new() };
        let mut out = Vec::new();
        for g in snap.gpus.iter().filter(|g| !g.nvlinks.is_empty()) {
            let up = g.nvlinks.iter().filter(|l| l.active).count();
            if self.nvlinks_up.insert(g.gpu_index, up) == Some(up) {
                continue;
            }
            let links: Vec<serde_json::Value> = g
                .nvlinks
                .iter()
                .filter(|l| l.active)
                .map(|l| serde_json::json!({"link": l.link, "version": l.version, "remote_pci_bus_id": l.remote_pci_bus_id}))
                .collect();
            let payload = serde_json::json!({"gpu": g.gpu_index, "active_links": up, "links": links});
            out.push(Event { t_ms: snap.timestamp_us / 1000, kind: EventKind::Nvlink, payload });
        }
        out
    }

    /// Marks from the training loop, folded before they are written.
    pub fn marks(&mut self, marks: impl IntoIterator<Item = Marker>) {
        let mut due = Vec::new();
        for m in marks {
            self.folder.push(m, &mut due);
        }
        profile::timed("marks (fold, diagnosis, sqlite)", || self.write_marks(&due));
    }

    /// An event from the job (its stderr, its marks socket) or about it.
    pub fn event(&mut self, e: Event) {
        if let Some(live) = self.rolling.as_mut() {
            live.push_event(&e);
        }
        self.write(|w| w.event(&e));
    }

    /// Samples of the job's Python threads: written as they come, as polls are.
    pub fn stacks(&mut self, batch: gpulse_model::StackBatch) {
        if batch == gpulse_model::StackBatch::default() {
            return;
        }
        self.write(|w| w.stacks(&batch));
        if let Some(live) = self.rolling.as_mut() {
            live.push_stacks(batch);
        }
    }

    /// Ends the watch: writes the marks still held and `stop` event with `reason` and `fields`,
    /// and closes the recording. Returns what the recording lost, if anything.
    pub fn finish(mut self, reason: &str, mut fields: serde_json::Map<String, serde_json::Value>) -> Option<Lost> {
        let mut held = Vec::new();
        self.folder.finish(&mut held);
        self.write_marks(&held);
        fields.insert("reason".into(), reason.into());
        let stop = Event { t_ms: gpulse_base::clock::now_us() / 1000, kind: EventKind::Stop, payload: fields.into() };
        self.write(|w| w.event(&stop));
        if let Some(w) = self.recording.take()
            && let Err(e) = w.finish()
        {
            self.lost.get_or_insert(Lost { at_us: gpulse_base::clock::now_us(), error: e.to_string() });
        }
        self.lost
    }

    fn write_marks(&mut self, marks: &[Marker]) {
        if marks.is_empty() {
            return;
        }
        if let Some(live) = self.rolling.as_mut() {
            live.push_markers(marks);
        }
        self.write(|w| w.markers(marks));
    }

    /// Writes with `f`; the first failure stops the recording and tells the sinks.
    fn write(&mut self, f: impl FnOnce(&mut dyn Store) -> Result<(), StoreError>) {
        let Some(w) = self.recording.as_mut() else { return };
        if let Err(e) = f(w.as_mut()) {
            self.recording = None;
            let lost = Lost { at_us: gpulse_base::clock::now_us(), error: e.to_string() };
            for s in &mut self.sinks {
                s.recording_stopped(&lost);
            }
            self.lost = Some(lost);
        }
    }
}

/// The Xids the driver raised since the last poll, as `xid` events: the kind the job's stderr
/// gives an NVRM line too, so the diagnosis reads both alike (`source` says which).
fn xid_events(poll: &Poll) -> Vec<Event> {
    let Some(snap) = &poll.snapshot else { return Vec::new() };
    snap.gpus
        .iter()
        .flat_map(|g| &g.xids)
        .map(|x| {
            let mut payload = serde_json::json!({ "xid": x.xid, "gpu": x.gpu, "source": "nvml", "pids": x.pids });
            payload["text"] =
                x.text.clone().unwrap_or_else(|| format!("Xid {} on GPU {} (NVML event)", x.xid, x.gpu)).into();
            Event { t_ms: x.timestamp_us / 1000, kind: EventKind::Xid, payload }
        })
        .collect()
}
