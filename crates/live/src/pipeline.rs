//! From polls, marks and events to a recording, a rolling diagnosis and frames for the sinks.

use gpulse_diagnose::{Finding, LiveDiagnosis};
use gpulse_model::{Event, Marker, Poll};
use gpulse_record::{RecordError, Writer};
use gpulse_sample::profile;

use crate::fold::Folder;

/// What a sink is shown after each poll.
pub struct Frame<'a> {
    pub poll: &'a Poll,
    /// The rolling diagnosis, when the pipeline runs one.
    pub live: Option<&'a LiveDiagnosis>,
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

/// Why and when the recording stopped being written.
#[derive(Debug, Clone)]
pub struct Lost {
    pub at_us: i64,
    pub error: String,
}

pub struct Pipeline {
    recording: Option<Writer>,
    live: Option<LiveDiagnosis>,
    folder: Folder,
    sinks: Vec<Box<dyn Sink + Send>>,
    polls: u64,
    lost: Option<Lost>,
}

impl Pipeline {
    /// `recording`: where to write, if anywhere; `live`: the rolling diagnosis, if one is wanted.
    pub fn new(recording: Option<Writer>, live: Option<LiveDiagnosis>) -> Self {
        Self { recording, live, folder: Folder::default(), sinks: Vec::new(), polls: 0, lost: None }
    }

    pub fn add_sink(&mut self, sink: Box<dyn Sink + Send>) {
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

    pub fn live(&self) -> Option<&LiveDiagnosis> {
        self.live.as_ref()
    }

    /// What the recording lost, if it stopped early.
    pub fn lost(&self) -> Option<&Lost> {
        self.lost.as_ref()
    }

    /// Records a run fact (the followed root, say).
    pub fn set_meta(&mut self, key: &str, value: &str) {
        self.write(|w| w.set_meta(key, value));
    }

    /// One poll: written, diagnosed, then shown. A poll taken after the root is gone is written
    /// (what the job left behind) but not diagnosed.
    pub fn poll(&mut self, poll: Poll) {
        profile::timed("total pipeline poll (main thread)", || self.poll_inner(poll));
    }

    fn poll_inner(&mut self, poll: Poll) {
        self.polls += 1;
        let started = profile::enabled().then(std::time::Instant::now);
        self.write(|w| {
            if let Some(snap) = &poll.snapshot {
                for &gpu in &poll.newly_lost {
                    let payload = serde_json::json!({ "gpu": gpu });
                    w.event(&Event { t_ms: snap.timestamp_us / 1000, kind: "gpu_lost".into(), payload })?;
                }
                w.snapshot(snap)?;
            }
            w.host(&poll.host)?;
            if let Some(t) = &poll.tree {
                w.tree(t)?;
            }
            Ok(())
        });
        if let Some(t) = started.filter(|_| self.recording.is_some()) {
            profile::add("sqlite write poll", t.elapsed());
        }
        let mut findings = Vec::new();
        if let Some(live) = self.live.as_mut() {
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
            self.write(|w| w.event(&Event { t_ms, kind: "finding".into(), payload }));
        }
        let frame = Frame { poll: &poll, live: self.live.as_ref(), findings: &findings };
        if !self.sinks.is_empty() {
            profile::timed("sinks", || self.sinks.iter_mut().for_each(|s| s.frame(&frame)));
        }
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
        if let Some(live) = self.live.as_mut() {
            live.push_event(&e);
        }
        self.write(|w| w.event(&e));
    }

    /// Ends the watch: writes the marks still held and `stop` event with `reason` and `fields`,
    /// and closes the recording. Returns what the recording lost, if anything.
    pub fn finish(mut self, reason: &str, mut fields: serde_json::Map<String, serde_json::Value>) -> Option<Lost> {
        let mut held = Vec::new();
        self.folder.finish(&mut held);
        self.write_marks(&held);
        fields.insert("reason".into(), reason.into());
        let stop = Event { t_ms: gpulse_sample::now_us() / 1000, kind: "stop".into(), payload: fields.into() };
        self.write(|w| w.event(&stop));
        if let Some(w) = self.recording.take()
            && let Err(e) = w.finish()
        {
            self.lost.get_or_insert(Lost { at_us: gpulse_sample::now_us(), error: e.to_string() });
        }
        self.lost
    }

    fn write_marks(&mut self, marks: &[Marker]) {
        if marks.is_empty() {
            return;
        }
        if let Some(live) = self.live.as_mut() {
            live.push_markers(marks);
        }
        self.write(|w| w.markers(marks));
    }

    /// Writes with `f`; the first failure stops the recording and tells the sinks.
    fn write(&mut self, f: impl FnOnce(&mut Writer) -> Result<(), RecordError>) {
        let Some(w) = self.recording.as_mut() else { return };
        if let Err(e) = f(w) {
            self.recording = None;
            let lost = Lost { at_us: gpulse_sample::now_us(), error: e.to_string() };
            for s in &mut self.sinks {
                s.recording_stopped(&lost);
            }
            self.lost = Some(lost);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use gpulse_model::HostSample;

    use super::*;

    /// Counts what a sink is shown.
    #[derive(Default)]
    struct Seen {
        frames: usize,
        findings: Vec<String>,
        with_live: usize,
    }

    struct Counting(Arc<Mutex<Seen>>);

    impl Sink for Counting {
        fn frame(&mut self, frame: &Frame) {
            let mut s = self.0.lock().unwrap();
            s.frames += 1;
            s.with_live += usize::from(frame.live.is_some());
            s.findings.extend(frame.findings.iter().map(|f| f.id.as_str().to_owned()));
        }
    }

    /// A real `gpulse run` recording, replayed poll by poll through a pipeline that records it
    /// again: every poll is written, every finding the sinks were shown is written, and the copy
    /// diagnoses as the original does.
    #[test]
    fn a_replayed_run_is_recorded_diagnosed_and_shown() {
        let fixture =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/h200-gpulse-run/dl_bound.db");
        let rec = gpulse_record::read(&fixture).unwrap();
        let dir = std::env::temp_dir().join(format!("gpulse-live-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let copy = dir.join("copy.db");
        let _ = std::fs::remove_file(&copy);
        let instrumented = rec.meta.get("instrumented").is_some_and(|v| v == "true");
        let meta = gpulse_record::RunMeta {
            gpulse_version: "test".into(),
            source: "nvml".into(),
            extra: [("instrumented".to_owned(), instrumented.to_string())].into(),
            ..Default::default()
        };
        let writer = Writer::create(&copy, &meta, &rec.devices).unwrap();
        let mut p = Pipeline::new(Some(writer), Some(LiveDiagnosis::new(&rec.devices, instrumented)));
        let seen = Arc::new(Mutex::new(Seen::default()));
        p.add_sink(Box::new(Counting(seen.clone())));
        let mut mk = 0;
        for snap in &rec.snapshots {
            let t = snap.timestamp_us;
            let host = rec.host.iter().min_by_key(|h| (h.timestamp_us - t).abs()).cloned().unwrap_or_default();
            let tree = rec.trees.iter().min_by_key(|x| (x.timestamp_us - t).abs()).cloned();
            let host = HostSample { timestamp_us: t, ..host };
            p.poll(Poll { snapshot: Some(snap.clone()), host, tree, ..Default::default() });
            let due = rec.markers[mk..].iter().take_while(|m| m.t_us <= t).count();
            p.marks(rec.markers[mk..mk + due].iter().cloned());
            mk += due;
        }
        p.marks(rec.markers[mk..].iter().cloned());
        assert!(p.finish("test", serde_json::Map::new()).is_none());
        let again = gpulse_record::read(&copy).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let seen = seen.lock().unwrap();
        assert_eq!((seen.frames, seen.with_live), (rec.snapshots.len(), rec.snapshots.len()));
        assert_eq!(again.snapshots.len(), rec.snapshots.len());
        let written: Vec<&str> =
            again.events.iter().filter(|e| e.kind == "finding").filter_map(|e| e.payload["id"].as_str()).collect();
        assert_eq!(written, seen.findings, "the sinks saw what was written");
        assert!(written.contains(&"input_bound"), "the live view found the DataLoader: {written:?}");
        let ids = |r: &gpulse_model::RunData| gpulse_diagnose::diagnose(r).first().map(|f| f.id);
        assert_eq!(ids(&again), ids(&rec), "the copy diagnoses as the original");
    }
}
