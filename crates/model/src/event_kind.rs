//! What kind of thing an [`Event`](crate::Event) is: the words a recording's `events.kind`
//! column holds. A kind this build does not know (a newer recording's) is kept as it was read.

use std::fmt;

/// The kind of an event, written as its snake_case name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// The recording ended; its payload says how the job exited.
    Stop,
    /// A finding the live diagnosis raised.
    Finding,
    /// A mark from inside the training loop (`gpulse.mark(...)`).
    Mark,
    /// NVML said the GPU fell off the bus.
    GpuLost,
    /// An NVLink's state changed.
    Nvlink,
    /// The kernel logged an Xid.
    Xid,
    /// An out-of-memory line in a trace's own log.
    Oom,
    /// PyTorch's CUDA out-of-memory error on the job's stderr.
    CudaOom,
    /// NCCL's watchdog timed a collective out.
    NcclTimeout,
    /// NCCL reported an error.
    NcclError,
    /// A DataLoader worker was killed or exited unexpectedly.
    DataloaderKilled,
    /// The loop's marks could not be received.
    MarksRefused,
    /// Marks arrived faster than they could be kept.
    MarksDropped,
    /// The job was stopped (SIGSTOP, Ctrl-Z).
    JobStopped,
    /// The stopped job resumed.
    JobResumed,
    /// A kind this build does not know, as it was read.
    Other(String),
}

impl EventKind {
    /// Every kind this build knows, in declaration order.
    pub const KNOWN: [EventKind; 15] = [
        Self::Stop,
        Self::Finding,
        Self::Mark,
        Self::GpuLost,
        Self::Nvlink,
        Self::Xid,
        Self::Oom,
        Self::CudaOom,
        Self::NcclTimeout,
        Self::NcclError,
        Self::DataloaderKilled,
        Self::MarksRefused,
        Self::MarksDropped,
        Self::JobStopped,
        Self::JobResumed,
    ];

    /// Its name as recordings and JSON hold it.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Stop => "stop",
            Self::Finding => "finding",
            Self::Mark => "mark",
            Self::GpuLost => "gpu_lost",
            Self::Nvlink => "nvlink",
            Self::Xid => "xid",
            Self::Oom => "oom",
            Self::CudaOom => "cuda_oom",
            Self::NcclTimeout => "nccl_timeout",
            Self::NcclError => "nccl_error",
            Self::DataloaderKilled => "dataloader_killed",
            Self::MarksRefused => "marks_refused",
            Self::MarksDropped => "marks_dropped",
            Self::JobStopped => "job_stopped",
            Self::JobResumed => "job_resumed",
            Self::Other(s) => s,
        }
    }

    /// The kind a name stands for; an unknown name is kept as [`EventKind::Other`].
    pub fn parse(name: &str) -> Self {
        Self::KNOWN.into_iter().find(|k| k.as_str() == name).unwrap_or_else(|| Self::Other(name.to_owned()))
    }

    /// An out-of-memory error: a trace's own `oom`, or `cuda_oom` from the job's stderr.
    pub fn is_oom(&self) -> bool {
        matches!(self, Self::Oom | Self::CudaOom)
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for EventKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for EventKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ok(Self::parse(&name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_reads_back_as_itself() {
        for k in EventKind::KNOWN {
            assert_eq!(EventKind::parse(k.as_str()), k);
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.as_str()));
            assert_eq!(serde_json::from_str::<EventKind>(&json).unwrap(), k);
        }
        let newer = EventKind::parse("checkpoint_saved");
        assert_eq!((newer.as_str(), &newer), ("checkpoint_saved", &EventKind::Other("checkpoint_saved".into())));
    }
}
