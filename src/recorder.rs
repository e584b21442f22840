//! The sampling loop's body, shared by `record`, `run` and `attach`: one poll of every GPU, the
//! host and a process tree, written to a recording.

use std::time::Duration;

use anyhow::Context;
use gpulse_model::{DeviceInfo, Poll};
use gpulse_record::{Claim, Event, Marker, RunMeta, Writer};
use gpulse_sample::{NvmlOptions, NvmlSource, Poller, SampleError};

use crate::cli::GlobalArgs;
use crate::cmd::open_nvml;

/// How often the recorder reads NVML's costly calls (energy, the utilization buffer).
const COSTLY_EVERY: Duration = Duration::from_secs(5);

/// Samples through a [`Poller`] and writes each poll to one recording.
pub struct Recorder {
    writer: Writer,
    poller: Poller,
    polls: u64,
}

/// Opens NVML for recording. With no driver, warns in one line and returns `None`: the host is
/// still worth recording. With `any_error`, any failure to open NVML does the same (a job that
/// gpulse starts runs whatever gpulse can see).
pub fn open_source(global: &GlobalArgs, any_error: bool) -> anyhow::Result<Option<NvmlSource>> {
    let options = NvmlOptions { process_util: true, costly_every: Some(COSTLY_EVERY), ..NvmlOptions::default() };
    match open_nvml(global, options, false) {
        Ok(s) => Ok(Some(s)),
        Err(e) if any_error || matches!(e.downcast_ref::<SampleError>(), Some(SampleError::NoDriver { .. })) => {
            eprintln!("gpulse: {}; recording the host only", crate::cmd::describe(&e));
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

impl Recorder {
    /// Fills the claimed file. `root` is the tree to follow, if any; `command` and `extra` go into
    /// the run's metadata.
    pub fn create(
        output: Claim,
        source: Option<NvmlSource>,
        interval: Duration,
        root: Option<u32>,
        command: Option<String>,
        extra: &[(&str, String)],
    ) -> anyhow::Result<Self> {
        let gpus = source.map(|s| Box::new(s) as Box<dyn gpulse_sample::Source + Send>);
        let poller = Poller::new(gpus, root);
        let devices = poller.devices().to_vec();
        let mut extra_meta: std::collections::BTreeMap<String, String> =
            extra.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect();
        if let Some(p) = root {
            extra_meta.insert("root_pid".into(), p.to_string());
        }
        let meta = RunMeta {
            host: std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|h| h.trim().to_owned()),
            gpulse_version: env!("CARGO_PKG_VERSION").to_owned(),
            command: command.or_else(|| root.and_then(gpulse_sample::proc_info::cmdline)),
            started_at_us: gpulse_sample::now_us(),
            source: if poller.has_gpus() { "nvml".into() } else { "host only".into() },
            interval_ms: Some(interval.as_millis() as u64),
            extra: extra_meta,
        };
        let shown = output.path().display().to_string();
        let writer =
            Writer::create_claimed(output, &meta, &devices).with_context(|| format!("cannot create {shown}"))?;
        Ok(Self { writer, poller, polls: 0 })
    }

    /// Follows the tree under `pid` from now on (a job started after the recording was created).
    pub fn follow(&mut self, pid: u32) -> anyhow::Result<()> {
        self.poller.follow(pid);
        self.writer.set_meta("root_pid", &pid.to_string())?;
        Ok(())
    }

    pub fn devices(&self) -> &[DeviceInfo] {
        self.poller.devices()
    }

    pub fn polls(&self) -> u64 {
        self.polls
    }

    /// Samples everything once and writes it. When the watched root is gone, the GPUs and the
    /// host are still sampled (what the job left behind), with `root_gone` set.
    pub fn poll(&mut self) -> anyhow::Result<Poll> {
        let poll = self.poller.poll()?;
        if let Some(snap) = &poll.snapshot {
            for &gpu in &poll.newly_lost {
                self.event(snap.timestamp_us / 1000, "gpu_lost", serde_json::json!({ "gpu": gpu }))?;
            }
            self.writer.snapshot(snap)?;
        }
        self.writer.host(&poll.host)?;
        if let Some(t) = &poll.tree {
            self.writer.tree(t)?;
        }
        self.polls += 1;
        Ok(poll)
    }

    /// Records an event (committed at once).
    pub fn event(&mut self, t_ms: i64, kind: &str, payload: serde_json::Value) -> anyhow::Result<()> {
        Ok(self.writer.event(&Event { t_ms, kind: kind.into(), payload })?)
    }

    /// Records marks from the training loop.
    pub fn markers(&mut self, marks: &[Marker]) -> anyhow::Result<()> {
        Ok(self.writer.markers(marks)?)
    }

    /// Writes the stop event and closes the file.
    pub fn finish(self, reason: &str) -> anyhow::Result<()> {
        self.finish_with(reason, serde_json::Map::new())
    }

    /// Writes the stop event, with `fields` beside its reason (how a job ended), and closes the file.
    pub fn finish_with(
        mut self,
        reason: &str,
        mut fields: serde_json::Map<String, serde_json::Value>,
    ) -> anyhow::Result<()> {
        fields.insert("reason".into(), reason.into());
        self.event(gpulse_sample::now_us() / 1000, "stop", serde_json::Value::Object(fields))?;
        self.writer.finish()?;
        Ok(())
    }
}
