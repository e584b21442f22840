//! The live source: NVML, loaded at run time through nvml-wrapper.
//!
//! Each NVML call's failure is mapped once, in [`Reader::get`]: `NotSupported` and friends become
//! `None` with an [`Absence`], `GpuLost` marks the device lost, and nothing panics. The library
//! path can point at the workspace's stand-in `libnvidia-ml.so`, so tests run this exact code.

mod absence;
mod cadence;
mod events;
mod gpm;
mod nvlink;
mod probe;
mod profile;
mod read;
mod table;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use gpulse_model::{DeviceInfo, GpuSample, Metric, Snapshot};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use crate::{SampleError, Source};
use gpulse_base::clock::now_us;

pub use cadence::Cadence;

/// How the live source reads.
#[derive(Debug, Clone)]
pub struct NvmlOptions {
    /// Path of the NVML library; `None` loads `libnvidia-ml.so.1` from the system.
    pub lib_path: Option<PathBuf>,
    /// Read GPM performance counters where the device has them.
    pub gpm: bool,
    /// How long each GPM window lasts (at least 100 ms). Closing a window cost 2.6–3.3 ms of CPU
    /// on an H200 (BENCHMARKS.md), so polls in between report the latest completed window.
    pub gpm_every: Duration,
    /// List compute processes and their memory.
    pub processes: bool,
    /// Read per-process SM utilization (about 2.5 ms per GPU on an H200).
    pub process_util: bool,
    /// The GPM metrics to ask for, as NVML ids; `None` asks for the model's whole table. A
    /// metric not asked for is `None` in every window.
    pub gpm_metrics: Option<Vec<u32>>,
    /// A one-shot view: the first GPM window opens when NVML does, and a sample waits for it to
    /// close (`gpm_every` after opening) rather than showing none.
    pub gpm_wait_first: bool,
    /// How often to read NVML's PCIe counters when GPM cannot give PCIe traffic. Each read blocks
    /// for about 20 ms, so `None` (never) is the default.
    pub pcie_every: Option<Duration>,
    /// Read only these metrics; `None` reads everything. One-shot queries ask for what they print.
    pub metrics: Option<Vec<Metric>>,
    /// How often slow or costly fields are re-read; between reads a sample carries the last.
    pub cadence: Cadence,
    /// Read the static facts that cost milliseconds on first access (maximum clocks, ECC mode,
    /// power limit, persistence and compute modes). Identity (index, UUID, name, bus id) is
    /// always read.
    pub device_facts: bool,
    /// Extra NVML reads for query fields (`Probe`), in the query's order; each poll reads them.
    pub probes: Vec<gpulse_model::Probe>,
    /// Watch NVML's critical Xid events on a thread of their own (the watching faces: `serve`,
    /// `record`, `run`, `attach`, `top`); one-shot views do not.
    pub xid_events: bool,
}

impl Default for NvmlOptions {
    fn default() -> Self {
        Self {
            lib_path: None,
            gpm: true,
            gpm_every: Duration::from_secs(1),
            processes: true,
            process_util: false,
            gpm_metrics: None,
            gpm_wait_first: false,
            pcie_every: None,
            metrics: None,
            device_facts: true,
            cadence: Cadence::VIEW,
            probes: Vec::new(),
            xid_events: false,
        }
    }
}

/// Per-device state kept between polls.
struct Tracked {
    device: Option<Device<'static>>,
    gpm: gpm::GpmPair,
    /// The newest reading of the utilization buffer taken so far; at first, when the source
    /// opened: the buffer holds about 14 s of readings from before, another job's among them,
    /// which are no part of what is recorded now.
    last_util_sample_us: u64,
    last_proc_util_us: u64,
    last_pcie: Option<Instant>,
    /// NVLink's data counters at their last read, for the rate (`read::nvlink_rate`).
    last_nvlink_kib: Option<(Instant, i64)>,
    /// The fields read on their own cadence, as last read.
    held: cadence::Held,
    lost: bool,
}

/// Reads every GPU through NVML.
pub struct NvmlSource {
    // Dropped by hand in `Drop`, after everything that borrows it.
    nvml: &'static Nvml,
    infos: Vec<DeviceInfo>,
    tracked: Vec<Tracked>,
    options: NvmlOptions,
    /// Name, command line and owner of each PID holding a context, read when it first appears.
    identities: HashMap<u32, read::Identity>,
    /// The Xid events' thread, when asked for and some GPU supports them.
    xids: Option<events::XidWatcher>,
    /// Per GPU: the last Xid seen (0 for none yet).
    xid_last: Vec<u64>,
}

/// The innermost reason a library failed to load (the dynamic loader's own words).
fn loader_reason(e: &NvmlError) -> String {
    let mut reason = e.to_string();
    let mut cause: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(c) = cause {
        reason = c.to_string();
        cause = c.source();
    }
    reason
}

impl NvmlSource {
    /// Loads NVML and reads every device's static facts.
    ///
    /// # Errors
    /// [`SampleError::NoDriver`] when the library cannot be loaded or the driver is not running;
    /// [`SampleError::Nvml`] when NVML loads but cannot count devices.
    pub fn open(options: NvmlOptions) -> Result<Self, SampleError> {
        let mut builder = Nvml::builder();
        if let Some(p) = &options.lib_path {
            builder.lib_path(OsStr::new(p));
        }
        let nvml = profile::timed("nvmlInit", || builder.init()).map_err(|e| match e {
            // The library loaded: which one is not the problem.
            NvmlError::DriverNotLoaded => SampleError::NoDriver { library: None, detail: String::new() },
            NvmlError::LibloadingError(_) | NvmlError::FailedToLoadSymbol(_) | NvmlError::LibraryNotFound => {
                SampleError::NoDriver {
                    library: options.lib_path.as_ref().map(|p| p.display().to_string()),
                    detail: loader_reason(&e),
                }
            }
            other => SampleError::Nvml(other.to_string()),
        })?;
        let nvml: &'static Nvml = Box::leak(Box::new(nvml));
        let mut source = Self {
            nvml,
            infos: Vec::new(),
            tracked: Vec::new(),
            options,
            identities: HashMap::new(),
            xids: None,
            xid_last: Vec::new(),
        };
        let count =
            profile::timed("device_count", || nvml.device_count()).map_err(|e| SampleError::Nvml(e.to_string()))?;
        let driver = profile::timed("sys_driver_version", || nvml.sys_driver_version()).ok();
        // NVML asks the CUDA driver for this, which costs ~10 ms: only for views that show it.
        let cuda = if source.options.device_facts {
            profile::timed("sys_cuda_driver_version", || nvml.sys_cuda_driver_version())
                .ok()
                .map(|v| format!("{}.{}", v / 1000, v % 1000 / 10))
        } else {
            None
        };
        let opened_us = u64::try_from(gpulse_base::clock::now_us()).unwrap_or(0);
        let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
        let wants_gpm = source.options.gpm && source.options.metrics.as_ref().is_none_or(|m| m.contains(&Metric::Gpm));
        for index in 0..count {
            let device = nvml.device_by_index(index).ok();
            let gpm_supported = match (&device, source.options.gpm) {
                (Some(d), true) => profile::timed("gpm_support", || d.gpm_support()).ok(),
                _ => None,
            };
            let mut gpm = gpm::GpmPair::new(source.options.gpm_metrics.as_deref());
            // The window opens first, so that the facts below are read while it runs.
            if let Some(d) =
                device.as_ref().filter(|_| wants_gpm && source.options.gpm_wait_first && gpm_supported == Some(true))
            {
                gpm.prime(d);
            }
            let mut info = device.as_ref().map_or_else(
                || DeviceInfo { index, ..DeviceInfo::default() },
                |d| read::device_info(d, index, source.options.device_facts),
            );
            info.driver_version = driver.clone();
            info.cuda_version = cuda.clone();
            info.gpm_supported = gpm_supported;
            source.infos.push(info);
            source.tracked.push(Tracked {
                lost: device.is_none(),
                device,
                gpm,
                last_util_sample_us: opened_us,
                last_proc_util_us: 0,
                last_pcie: None,
                last_nvlink_kib: None,
                held: cadence::Held::default(),
            });
        }
        let ids: Vec<(u32, String)> = source.infos.iter().map(|i| (i.index, i.uuid.clone())).collect();
        for (info, cuda_index) in source.infos.iter_mut().zip(cuda_indices(visible.as_deref(), &ids)) {
            info.cuda_index = cuda_index;
        }
        if source.options.xid_events {
            let gpus: Vec<(u32, Option<String>)> =
                source.infos.iter().map(|i| (i.index, i.pci_bus_id.clone())).collect();
            source.xids = events::XidWatcher::start(nvml, &gpus);
            source.xid_last = vec![0; gpus.len()];
        }
        Ok(source)
    }

    /// The loaded library's NVML version string, for diagnostics.
    pub fn nvml_version(&self) -> Option<String> {
        self.nvml.sys_nvml_version().ok()
    }
}

impl Source for NvmlSource {
    fn devices(&self) -> &[DeviceInfo] {
        &self.infos
    }

    fn sample(&mut self) -> Result<Snapshot, SampleError> {
        let timestamp_us = now_us();
        let mut gpus = Vec::with_capacity(self.tracked.len());
        for (info, t) in self.infos.iter().zip(self.tracked.iter_mut()) {
            gpus.push(read::sample_device(self.nvml, info, t, &self.options, &mut self.identities));
        }
        if let Some(w) = &self.xids {
            for x in w.take() {
                let Some(pos) = self.infos.iter().position(|i| i.index == x.gpu) else { continue };
                self.xid_last[pos] = x.xid;
                gpus[pos].xids.push(x);
            }
            for ((g, last), watched) in gpus.iter_mut().zip(&self.xid_last).zip(&w.watched) {
                g.xid_last = watched.then_some(*last);
            }
        }
        // Forget processes that left, so a reused PID is read afresh.
        if self.options.processes {
            self.identities.retain(|pid, _| gpus.iter().any(|g: &GpuSample| g.processes.iter().any(|p| p.pid == *pid)));
        }
        Ok(Snapshot { timestamp_us, gpus })
    }

    fn reread_counters(&mut self) {
        for t in &mut self.tracked {
            t.held.expire_counters();
        }
    }
}

impl Drop for NvmlSource {
    fn drop(&mut self) {
        // GPM samples, device handles and the event thread borrow the library: release them first.
        self.xids = None;
        self.tracked.clear();
        // SAFETY: `nvml` came from `Box::leak` in `open`, and nothing borrows it any more.
        let nvml = unsafe { Box::from_raw(self.nvml as *const Nvml as *mut Nvml) };
        profile::timed("nvmlShutdown", || drop(nvml));
    }
}

/// Maps NVML devices to the `cuda:N` index PyTorch uses, following `CUDA_VISIBLE_DEVICES`
/// (indices or UUID prefixes). Unset means every device, in NVML (PCI bus) order.
pub fn cuda_indices(visible: Option<&str>, devices: &[(u32, String)]) -> Vec<Option<u32>> {
    let Some(visible) = visible else {
        return devices.iter().map(|d| Some(d.0)).collect();
    };
    let mut out = vec![None; devices.len()];
    for (cuda, entry) in visible.split(',').map(str::trim).enumerate() {
        if entry.is_empty() {
            break;
        }
        let hit = if let Ok(n) = entry.parse::<u32>() {
            devices.iter().position(|d| d.0 == n)
        } else {
            devices.iter().position(|d| d.1.starts_with(entry))
        };
        // CUDA stops at the first entry it cannot resolve.
        let Some(pos) = hit else { break };
        out[pos] = Some(cuda as u32);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_index_follows_visible_devices() {
        let devs = vec![(0, "GPU-aaa".to_owned()), (1, "GPU-bbb".to_owned()), (2, "GPU-ccc".to_owned())];
        assert_eq!(cuda_indices(None, &devs), [Some(0), Some(1), Some(2)]);
        assert_eq!(cuda_indices(Some("2,0"), &devs), [Some(1), None, Some(0)]);
        assert_eq!(cuda_indices(Some("GPU-bbb"), &devs), [None, Some(0), None]);
        assert_eq!(cuda_indices(Some("1,7,2"), &devs), [None, Some(0), None]);
        assert_eq!(cuda_indices(Some(""), &devs), [None, None, None]);
    }
}
