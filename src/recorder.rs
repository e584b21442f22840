//! What `record`, `run` and `attach` share before their pipeline starts: the NVML source and the
//! recording's header.

use std::time::Duration;

use anyhow::Context;
use gpulse_record::{Claim, RunMeta, Writer};
use gpulse_sample::{Cadence, NvmlOptions, NvmlSource, Poller, SampleError};

use crate::app::open_nvml;
use crate::cli::GlobalArgs;

/// Opens NVML for recording. With no driver, warns in one line and returns `None`: the host is
/// still worth recording. With `any_error`, any failure to open NVML does the same (a job that
/// gpulse starts runs whatever gpulse can see). `gpm` names the GPM metrics to ask for (NVML
/// ids); slow and costly fields are read on the recorder's cadence (docs/recording-format.md).
/// `probes` are NVML reads beyond the sampled metrics, taken every poll (what `serve` exports).
pub fn open_source(
    global: &GlobalArgs,
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
        ..NvmlOptions::default()
    };
    match open_nvml(global, options, false) {
        Ok(s) => Ok(Some(s)),
        Err(e) if any_error || matches!(e.downcast_ref::<SampleError>(), Some(SampleError::NoDriver { .. })) => {
            eprintln!("gpulse: {}; {verb} the host only", crate::app::describe(&e));
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// A poller over `source` (if any), following `root` (if any).
pub fn poller(source: Option<NvmlSource>, root: Option<u32>) -> Poller {
    Poller::new(source.map(|s| Box::new(s) as Box<dyn gpulse_sample::Source + Send>), root)
}

/// Fills the claimed file with the run's header. `root` is the tree followed, if any; `command`
/// and `extra` go into the run's metadata.
pub fn create(
    output: Claim,
    poller: &Poller,
    interval: Duration,
    root: Option<u32>,
    command: Option<String>,
    extra: &[(&str, String)],
) -> anyhow::Result<Writer> {
    let mut extra_meta: std::collections::BTreeMap<String, String> =
        extra.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect();
    if let Some(p) = root {
        extra_meta.insert("root_pid".into(), p.to_string());
    }
    let meta = RunMeta {
        host: gpulse_sample::host::hostname(),
        gpulse_version: env!("CARGO_PKG_VERSION").to_owned(),
        command: command.or_else(|| root.and_then(gpulse_sample::proc_info::cmdline)),
        started_at_us: gpulse_sample::now_us(),
        source: if poller.has_gpus() { "nvml".into() } else { "host only".into() },
        interval_ms: Some(interval.as_millis() as u64),
        extra: extra_meta,
    };
    let shown = output.path().display().to_string();
    Writer::create_claimed(output, &meta, poller.devices()).with_context(|| format!("cannot create {shown}"))
}

/// Asks to stop on a stop signal, or once `duration` has passed since `start`.
pub fn stop_when(duration: Option<Duration>, start: std::time::Instant) -> impl FnMut() -> Option<String> {
    move || {
        if let Some(sig) = crate::signals::received() {
            return Some(format!("signal {sig}"));
        }
        duration.is_some_and(|d| start.elapsed() >= d).then(|| "duration reached".to_owned())
    }
}
