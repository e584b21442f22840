//! What kind of thing an [`Event`](crate::Event) is: the words a recording's `events.kind`
//! column holds. A kind this build does not know (a newer recording's) is kept as it was read.

gpulse_base::words! {
    /// The kind of an event, written as its snake_case name.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub enum EventKind {
        /// The recording ended; its payload says how the job exited.
        Stop => "stop",
        /// A finding the live diagnosis raised.
        Finding => "finding",
        /// A mark from inside the training loop (`gpulse.mark(...)`).
        Mark => "mark",
        /// NVML said the GPU fell off the bus.
        GpuLost => "gpu_lost",
        /// An NVLink's state changed.
        Nvlink => "nvlink",
        /// The kernel logged an Xid.
        Xid => "xid",
        /// An out-of-memory line in a trace's own log.
        Oom => "oom",
        /// PyTorch's CUDA out-of-memory error on the job's stderr.
        CudaOom => "cuda_oom",
        /// NCCL's watchdog timed a collective out.
        NcclTimeout => "nccl_timeout",
        /// NCCL reported an error.
        NcclError => "nccl_error",
        /// A DataLoader worker was killed or exited unexpectedly.
        DataloaderKilled => "dataloader_killed",
        /// The loop's marks could not be received.
        MarksRefused => "marks_refused",
        /// Marks arrived faster than they could be kept.
        MarksDropped => "marks_dropped",
        /// The job was stopped (SIGSTOP, Ctrl-Z).
        JobStopped => "job_stopped",
        /// The stopped job resumed.
        JobResumed => "job_resumed",
    } else {
        /// A kind this build does not know, as it was read.
        Other(String),
    }
    impl Display;
}

impl EventKind {
    /// Its name as recordings and JSON hold it.
    pub fn as_str(&self) -> &str {
        match self.known_str() {
            Ok(name) => name,
            Err(read) => read,
        }
    }

    /// The kind a name stands for; an unknown name is kept as [`EventKind::Other`].
    pub fn parse(name: &str) -> Self {
        Self::parse_known(name).unwrap_or_else(|| Self::Other(name.to_owned()))
    }

    /// An out-of-memory error: a trace's own `oom`, or `cuda_oom` from the job's stderr.
    pub fn is_oom(&self) -> bool {
        matches!(self, Self::Oom | Self::CudaOom)
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
        assert_eq!(EventKind::KNOWN.len(), 15);
        for k in &EventKind::KNOWN {
            assert_eq!(&EventKind::parse(k.as_str()), k);
            let json = serde_json::to_string(k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.as_str()));
            assert_eq!(&serde_json::from_str::<EventKind>(&json).unwrap(), k);
        }
        let newer = EventKind::parse("checkpoint_saved");
        assert_eq!((newer.as_str(), &newer), ("checkpoint_saved", &EventKind::Other("checkpoint_saved".into())));
    }
}
