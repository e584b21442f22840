//! The kinds of account the ledger keeps: what the finding table says each finding explains, so
//! they stand on the run's floor, below the ledger that fills them.

use crate::main_thread::ThreadState;

gpulse_base::words! {
    /// What kind of time an account holds, written as its snake_case name (`data_wait`,
    /// `main_thread_python`); the main thread's take theirs from [`ThreadState`].
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum AccountKind {
        /// One of the loop's marked phases.
        Phase => "phase",
        /// The loop's timed waits for its next batch.
        DataWait => "data_wait",
        /// Timed waits before the loop's first step.
        StartupDataWait => "startup_data_wait",
        StartupBeforeCuda => "startup_before_cuda",
        StartupToFirstStep => "startup_to_first_step",
        /// Start-up, where no CUDA context splits it.
        Startup => "startup",
        /// A stall's pauses.
        Stall => "stall",
        GpuWork => "gpu_work",
        /// The GPU running another process's kernels inside the loop.
        GpuOthers => "gpu_others",
        /// The job used no GPU.
        NoGpu => "no_gpu",
        HostSide => "host_side",
        /// Waiting for data, by the GPU's pattern.
        InputInferred => "input_inferred",
        Transfer => "transfer",
        HostSaturated => "host_saturated",
        StorageWrite => "storage_write",
        AfterLoopDataWait => "after_loop_data_wait",
        AfterLoop => "after_loop",
        Unexplained => "unexplained",
    } else {
        /// The GPU idle while the job's main thread was in this state.
        MainThread(ThreadState),
    }
    impl Display;
}

/// How many kinds there are: the plain ones, then one per main-thread state.
const KINDS: usize = AccountKind::KNOWN.len() + ThreadState::ALL.len();

impl AccountKind {
    /// Its name in JSON, the report and the metrics' `account` label.
    pub const fn as_str(self) -> &'static str {
        match self.known_str() {
            Ok(name) => name,
            Err(state) => state.account_name(),
        }
    }

    /// Every kind, in declaration order, the main thread's last.
    pub const ALL: [AccountKind; KINDS] = {
        let mut all = [AccountKind::Phase; KINDS];
        let mut i = 0;
        while i < Self::KNOWN.len() {
            all[i] = Self::KNOWN[i];
            i += 1;
        }
        let mut j = 0;
        while j < ThreadState::ALL.len() {
            all[i + j] = AccountKind::MainThread(ThreadState::ALL[j]);
            j += 1;
        }
        all
    };

    /// The kind a name stands for; `None` for a name no ledger writes.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Time before the loop's first step: the `startup*` accounts, which together are start-up.
    pub const fn is_startup(self) -> bool {
        matches!(self, Self::StartupDataWait | Self::StartupBeforeCuda | Self::StartupToFirstStep | Self::Startup)
    }
}

impl serde::Serialize for AccountKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_reads_back_as_itself() {
        for k in AccountKind::ALL {
            assert_eq!(AccountKind::parse(k.as_str()), Some(k));
            assert_eq!(serde_json::to_string(&k).unwrap(), format!("\"{}\"", k.as_str()));
            assert_eq!(k.is_startup(), k.as_str().starts_with("startup"), "{k}");
        }
        for s in ThreadState::ALL {
            assert_eq!(AccountKind::MainThread(s).as_str(), format!("main_thread_{}", s.as_str()));
        }
        assert_eq!(AccountKind::parse("loop"), None);
    }
}
