//! What `record`, `run` and `attach` share before their pipeline starts: the NVML source and the
//! recording's header.

use std::time::Duration;

use anyhow::Context;
use gpulse_live::{Store, StoreError};
use gpulse_model::MetaKey;
use gpulse_record::{Claim, RunMeta, Writer};
use gpulse_sample::{Cadence, NvmlOptions, NvmlSource, Poller, SampleError};

use crate::ops::{NvmlAccess, open_nvml};

/// Opens NVML for recording. With no driver, warns in one line and returns `None`: the host is
/// still worth recording. With `any_error`, any failure to open NVML does the same (a job that
/// gpulse starts runs whatever gpulse can see). `gpm` names the GPM metrics to ask for (NVML
/// ids); slow and costly fields are read on the recorder's cadence (docs/recording-format.md).
/// `probes` are NVML reads beyond the sampled metrics, taken every poll (what `serve` exports).
pub fn open_source(
    nvml: &NvmlAccess,
    verb: &str,
    any_error: bool,
    gpm: &[u32],
    probes: &[gpulse_model::Probe],
) -> anyhow::Result<Option<NvmlSource>> {
    let options = NvmlOptions {
        process_util: true,
        cadence: Cadence::RECORDER,
        gpm_metrics: Some(gpm.to_vec()),
        probes: probes.to_vec(),
        xid_events: true,
        ..NvmlOptions::default()
    };
    match open_nvml(nvml, options, false) {
        Ok(s) => Ok(Some(s)),
        Err(e) if any_error || matches!(e.downcast_ref::<SampleError>(), Some(SampleError::NoDriver { .. })) => {
            eprintln!("gpulse: {}; {verb} the host only", crate::ops::describe(&e));
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// A poller over `source` (if any), following `root` (if any). On a Kubernetes node it names
/// pods through the runtime's and the kubelet's sockets (`GPULSE_CRI_SOCKET`,
/// `GPULSE_POD_RESOURCES_SOCKET`, else their default paths when they exist).
pub fn poller(source: Option<NvmlSource>, root: Option<u32>) -> Poller {
    let p = Poller::new(source.map(|s| Box::new(s) as Box<dyn gpulse_sample::Source + Send>), root);
    match gpulse_cluster::Cluster::start(gpulse_cluster::Sockets::from_env()) {
        Some(cluster) => p.with_directory(cluster),
        None => p,
    }
}

/// Fills the claimed file with the run's header. `root` is the tree followed, if any; `command`
/// and `extra` go into the run's metadata.
pub fn create(
    output: Claim,
    poller: &Poller,
    interval: Duration,
    root: Option<u32>,
    command: Option<String>,
    extra: &[(MetaKey, String)],
) -> anyhow::Result<Writer> {
    let mut extra_meta: std::collections::BTreeMap<String, String> =
        extra.iter().map(|(k, v)| (k.as_str().to_owned(), v.clone())).collect();
    if let Some(p) = root {
        extra_meta.insert(MetaKey::RootPid.as_str().into(), p.to_string());
    }
    let meta = RunMeta {
        host: gpulse_sample::host::hostname(),
        gpulse_version: env!("CARGO_PKG_VERSION").to_owned(),
        command: command.or_else(|| root.and_then(gpulse_sample::proc_info::cmdline)),
        started_at_us: gpulse_base::clock::now_us(),
        source: if poller.has_gpus() { "nvml".into() } else { "host only".into() },
        interval_ms: Some(interval.as_millis() as u64),
        extra: extra_meta,
    };
    let shown = output.path().display().to_string();
    Writer::create_claimed(output, &meta, poller.devices()).with_context(|| format!("cannot create {shown}"))
}

/// Asks to stop on a stop signal, saying which: `stopped by Ctrl-C (SIGINT)`.
pub fn stop_on_signal() -> Option<String> {
    gpulse_base::signal::received().map(gpulse_base::signal::stopped_by)
}

/// How a loop without a job (`record`, `serve`) ended: why, in words, and whether it failed.
pub struct Ended {
    pub reason: String,
    pub failed: bool,
}

/// Runs the one loop of every view over `collector` until `until` ends it, with the stack
/// sampler's samples (its last ones too) drained into the pipeline, and says why it ended.
/// `root` is the followed process, if any. The pipeline is left to finish: what to do when its
/// end is lost is the caller's.
pub fn run_to_end<F: FnMut() -> Option<String>>(
    collector: gpulse_live::Collector,
    pipeline: &mut gpulse_live::Pipeline,
    mut until: gpulse_live::Until<F>,
    mut stacks: gpulse_live::StackInput,
    root: Option<u32>,
) -> Ended {
    use gpulse_live::Stopped;
    let end = gpulse_live::drive(collector, pipeline, &mut until, &mut [&mut stacks]);
    let (reason, failed) = match end {
        Stopped::Asked(r) => (r, false),
        Stopped::DurationReached => ("duration reached".to_owned(), false),
        Stopped::RootGone => (root.map_or_else(|| "exited".to_owned(), |p| format!("process {p} exited")), false),
        // What was recorded is closed cleanly, with why it stopped.
        Stopped::SamplingFailed(e) => (format!("sampling failed: {e}"), true),
        Stopped::WriteFailed(l) => (format!("writing failed: {}", l.error), true),
    };
    Ended { reason, failed }
}

/// The recording as the pipeline keeps a run: the pipeline decides what, the writer writes.
pub struct SqliteStore(Writer);

/// `writer` as the pipeline's store.
pub fn store(writer: Writer) -> Box<dyn Store> {
    Box::new(SqliteStore(writer))
}

impl Store for SqliteStore {
    fn poll(&mut self, poll: &gpulse_model::Poll) -> Result<(), StoreError> {
        Ok(self.0.poll(poll)?)
    }

    fn markers(&mut self, marks: &[gpulse_model::Marker]) -> Result<(), StoreError> {
        Ok(self.0.markers(marks)?)
    }

    fn event(&mut self, event: &gpulse_model::Event) -> Result<(), StoreError> {
        Ok(self.0.event(event)?)
    }

    fn stacks(&mut self, batch: &gpulse_model::StackBatch) -> Result<(), StoreError> {
        Ok(self.0.stacks(batch)?)
    }

    fn set_meta(&mut self, key: gpulse_model::MetaKey, value: &str) -> Result<(), StoreError> {
        Ok(self.0.set_meta(key, value)?)
    }

    fn finish(self: Box<Self>) -> Result<(), StoreError> {
        Ok(self.0.finish()?)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use gpulse_diagnose::RollingDiagnosis;
    use gpulse_live::{Frame, Pipeline, Sink};
    use gpulse_model::{HostSample, Poll};
    use gpulse_record::Writer;

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
            s.with_live += usize::from(frame.rolling.is_some());
            s.findings.extend(frame.findings.iter().map(|f| f.id.as_str().to_owned()));
        }
    }

    /// A real `gpulse run` recording, replayed poll by poll through a pipeline that records it
    /// again: every poll is written, every finding the sinks were shown is written, and the copy
    /// diagnoses as the original does.
    #[test]
    fn a_replayed_run_is_recorded_diagnosed_and_shown() {
        let fixture =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/h200-gpulse-run/dl_bound.db");
        let rec = gpulse_record::read(&fixture).unwrap();
        let dir = std::env::temp_dir().join(format!("gpulse-recorder-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let copy = dir.join("copy.db");
        let _ = std::fs::remove_file(&copy);
        let instrumented = rec.instrumented();
        let meta = gpulse_record::RunMeta {
            gpulse_version: "test".into(),
            source: "nvml".into(),
            extra: [(gpulse_model::MetaKey::Instrumented.as_str().to_owned(), instrumented.to_string())].into(),
            ..Default::default()
        };
        let writer = Writer::create(&copy, &meta, &rec.devices).unwrap();
        let mut p = Pipeline::new(Some(super::store(writer)), Some(RollingDiagnosis::new(&rec.devices, instrumented)));
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
        let written: Vec<&str> = again
            .events
            .iter()
            .filter(|e| e.kind == gpulse_model::EventKind::Finding)
            .filter_map(|e| e.payload["id"].as_str())
            .collect();
        assert_eq!(written, seen.findings, "the sinks saw what was written");
        assert!(written.contains(&"input_bound"), "the live view found the DataLoader: {written:?}");
        let ids = |r: &gpulse_model::RunData| gpulse_diagnose::diagnose(r).first().map(|f| f.id);
        assert_eq!(ids(&again), ids(&rec), "the copy diagnoses as the original");
    }
}
