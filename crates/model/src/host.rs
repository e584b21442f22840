//! The host side of a training run: whole-machine CPU and memory, and the training's process tree.

use serde::{Deserialize, Serialize};

/// One reading of the whole machine (`/proc/stat`, `/proc/meminfo`, `/proc/loadavg`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostSample {
    /// When it was read, microseconds since the Unix epoch.
    pub timestamp_us: i64,
    /// Busy share of all CPUs since the previous reading, percent of the whole machine (0–100).
    pub cpu_busy_pct: Option<f32>,
    /// Share of CPU time spent waiting for I/O, percent of the whole machine.
    pub cpu_iowait_pct: Option<f32>,
    /// Share of CPU time stolen by the hypervisor, percent of the whole machine.
    pub cpu_steal_pct: Option<f32>,
    /// Busy share of each core since the previous reading, percent (0–100); `None` for a core
    /// on which no ticks passed (offline, or an interval too short to tell).
    pub cpu_core_busy_pct: Vec<Option<f32>>,
    /// Memory in use (total − available), bytes.
    pub memory_used_bytes: Option<u64>,
    /// Total memory, bytes.
    pub memory_total_bytes: Option<u64>,
    /// One-minute load average.
    pub load_1m: Option<f32>,
    /// Swap in use (total − free), bytes: a host that swaps stalls its DataLoader.
    pub swap_used_bytes: Option<u64>,
    /// Total swap, bytes (0 on a machine without swap).
    pub swap_total_bytes: Option<u64>,
}

gpulse_base::words! {
    /// Where a GPU process stands against the watched process tree.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum GpuProcessClass {
        /// In the watched tree.
        Tree => "tree",
        /// Alive, holds GPU memory, and is outside the tree.
        Foreign => "foreign",
        /// NVML lists it, but `/proc` has no such process (another PID namespace, or already dead).
        Gone => "gone",
    }
}

/// One process of the watched tree at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TreeProcess {
    pub pid: u32,
    pub ppid: u32,
    /// CPU used since the previous reading, percent of one core (100 = one core busy).
    pub cpu_pct: Option<f32>,
    /// Resident memory, bytes.
    pub rss_bytes: Option<u64>,
    pub threads: Option<u32>,
    /// Scheduler state letter from `/proc/PID/stat` (`R`, `S`, `D`, `Z`, …).
    pub state: Option<char>,
    /// Command line, arguments joined by spaces.
    pub cmdline: Option<String>,
    /// Bytes the process has made storage read and write since it started (`/proc/PID/io`:
    /// `read_bytes`, `write_bytes`; the page cache's hits are not in them).
    #[serde(default)]
    pub read_bytes: Option<u64>,
    #[serde(default)]
    pub write_bytes: Option<u64>,
    /// Proportional set size (`/proc/PID/smaps_rollup`): its private pages plus its share of those
    /// it shares. Read every few seconds, so absent in most readings.
    #[serde(default)]
    pub pss_bytes: Option<u64>,
}

/// The watched process tree at one moment, with its totals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TreeSample {
    pub timestamp_us: i64,
    /// The root PID the tree hangs from.
    pub root_pid: u32,
    /// Every live process of the tree, root first.
    pub processes: Vec<TreeProcess>,
    /// Sum of the processes' CPU, percent of one core.
    pub cpu_pct: Option<f32>,
    /// Sum of the processes' resident memory, bytes.
    pub rss_bytes: Option<u64>,
}
