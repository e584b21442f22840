//! A process holding a context on a GPU.

use serde::{Deserialize, Serialize};

/// One compute process on one GPU at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessSample {
    /// Process id as the host sees it.
    pub pid: u32,
    /// GPU memory the process's context holds, in bytes (`nvmlDeviceGetComputeRunningProcesses`;
    /// nvidia-smi `used_memory`). `None` where NVML cannot tell (some containers, WDDM).
    pub used_memory_bytes: Option<u64>,
    /// Process name as nvidia-smi prints it (`nvmlSystemGetProcessName`; nvidia-smi `process_name`).
    pub name: Option<String>,
    /// Full command line, from `/proc/PID/cmdline`, arguments joined by spaces.
    pub cmdline: Option<String>,
    /// Owner's user name, from `/proc/PID/status` and the user database.
    pub user: Option<String>,
    /// Share of SM time this process used over the last interval, in percent (`nvmlDeviceGetProcessUtilization`).
    pub sm_util_pct: Option<u32>,
    /// Share of memory-controller time this process used, in percent (`nvmlDeviceGetProcessUtilization`).
    pub mem_util_pct: Option<u32>,
    /// How the process relates to the watched process tree, when there is one.
    pub class: Option<crate::GpuProcessClass>,
    /// The pod or Slurm job the process runs in, from its cgroup (`/proc/PID/cgroup`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<crate::Workload>,
}

/// One process on one GPU at one poll, as one `--query-compute-apps` row has it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessRow {
    pub timestamp_us: i64,
    pub gpu: u32,
    pub process: ProcessSample,
}
