//! Where gpulse's samples come from.
//!
//! Every source implements [`Source`]: the devices it knows, and one snapshot of all of them.
//! Consumers never know which source they read, so a replayed trace and the stand-in NVML library
//! exercise the same code paths as a live GPU. The source stamps each snapshot with its own time.

pub mod host;
pub mod kernel_log;
pub mod nvml;
mod poller;
pub mod proc_info;
pub mod profile;
pub mod replay;
pub mod stacks;
pub mod workload;

use gpulse_model::{DeviceInfo, Snapshot};

pub use nvml::{Cadence, NvmlOptions, NvmlSource};
pub use poller::Poller;
pub use replay::TraceReplay;

/// Something that can be polled for GPU samples.
pub trait Source {
    /// Static facts about every device, in NVML index order.
    fn devices(&self) -> &[DeviceInfo];
    /// One reading of every device. Fields a device cannot give are `None`; a lost device is a
    /// status, not an error. An error means the source itself is gone.
    fn sample(&mut self) -> Result<Snapshot, SampleError>;
    /// The next sample reads afresh the counters held between reads (the energy counter, the
    /// utilization buffer), so a run's closing poll ends its energy and its utilization readings
    /// where the run ended. A source that holds none has nothing to do.
    fn reread_counters(&mut self) {}
}

/// A source that cannot be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    /// The NVML library is missing, or the driver is not loaded. `library` is the path asked
    /// for (`--nvml-lib`), if any: then the loader's reason is what the user needs.
    #[error("{}", match library {
        Some(lib) => format!("cannot load the NVML library {lib}: {detail}"),
        None if detail.is_empty() => "no NVIDIA driver found (the NVML library loaded, but no driver is running)".to_owned(),
        None => "no NVIDIA driver found (libnvidia-ml.so.1 could not be loaded)".to_owned(),
    })]
    NoDriver { library: Option<String>, detail: String },
    /// NVML loaded but failed for another reason.
    #[error("NVML failed: {0}")]
    Nvml(String),
    /// A replayed trace is malformed.
    #[error("{0}")]
    Replay(String),
    /// A replayed trace has no more samples: its end, not a failure.
    #[error("the trace has ended")]
    Ended,
}

/// A sample, `None` at a replay's end, or the error: the one way every loop over a source tells
/// an end from a failure.
pub fn until_ended(sample: Result<Snapshot, SampleError>) -> Result<Option<Snapshot>, SampleError> {
    match sample {
        Ok(s) => Ok(Some(s)),
        Err(SampleError::Ended) => Ok(None),
        Err(e) => Err(e),
    }
}
