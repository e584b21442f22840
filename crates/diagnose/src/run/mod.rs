//! The samples a rule reads: per-GPU series in seconds, cut to the window the job was active.

mod build;
mod facts;
mod memo;
mod spans;
mod threads;

use gpulse_model::ProcessSample;
use gpulse_model::RunData;

pub use build::RunBuilder;
pub(crate) use facts::{
    MIN_ACTIVE_S, bulk_writes_gpu_idle, context_before, end_s, has_a_job, loop_copies, loop_window, mean, primary,
    startup_context_s, stdev,
};
pub use memo::Memo;
pub(crate) use spans::{Spans, covers, merged, minus, total};
pub(crate) use threads::{loop_entry, loop_key, main_pid, ranked, ranked_in, samples_of, settled, training_s};

/// One GPU over the run.
#[derive(Debug, Clone, Default)]
pub struct GpuSeries {
    pub gpu: u32,
    /// Seconds since the first sample of the run.
    pub t_s: Vec<f64>,
    pub util_pct: Vec<Option<f64>>,
    /// The driver's own GPU-Util samples (`nvmlDeviceGetSamples`), each over the time since the
    /// one before: (its end in seconds since the first sample, percent). A poll's GPU-Util is
    /// only the latest of them, a sixth of a second of a one-second poll on an H100.
    pub util_fine: Vec<(f64, f64)>,
    pub sm_pct: Vec<Option<f64>>,
    pub mem_used_bytes: Vec<Option<f64>>,
    pub mem_total_bytes: Option<f64>,
    pub power_w: Vec<Option<f64>>,
    /// Core temperature, °C.
    pub temp_c: Vec<Option<f64>>,
    pub sm_clock_mhz: Vec<Option<f64>>,
    pub max_sm_clock_mhz: Option<f64>,
    pub reasons: Vec<Option<u64>>,
    /// PCIe bytes a second received (host to device) and sent, from GPM or NVML.
    pub pcie_rx_bytes_per_s: Vec<Option<f64>>,
    pub pcie_tx_bytes_per_s: Vec<Option<f64>>,
    /// The fastest PCIe link seen: generation and lanes (links slow down when idle).
    pub pcie_link_max: Option<(u32, u32)>,
    /// GPM's tensor-pipe and FP32-pipe activity, percent.
    pub tensor_pct: Vec<Option<f64>>,
    pub fp32_pct: Vec<Option<f64>>,
    /// GPM's per-unit math pipes (HMMA, IMMA, DFMA tensor cores; FP64, FP16 pipes) and DRAM
    /// activity, percent: what the roofline estimate reads.
    pub hmma_pct: Vec<Option<f64>>,
    pub imma_pct: Vec<Option<f64>>,
    pub dfma_pct: Vec<Option<f64>>,
    pub fp64_pct: Vec<Option<f64>>,
    pub fp16_pct: Vec<Option<f64>>,
    pub dram_pct: Vec<Option<f64>>,
    /// The energy counter as last read, millijoules (read every 30 s and held between).
    pub energy_mj: Vec<Option<f64>>,
    /// The first sample's energy was held from a read before the series began (a live window
    /// that dropped its oldest samples): the first change of the counter is its first read.
    pub energy_first_held: bool,
    /// The device's name as NVML gives it: which roof applies.
    pub name: Option<String>,
    /// The longest GPM window seen, seconds: how far back a sample's GPM figures may reach.
    pub gpm_window_s: Option<f64>,
    /// The process listing at each sample, shared while it does not change.
    pub processes: Vec<std::sync::Arc<Vec<ProcessSample>>>,
    /// Indices `[start, end)` of the active window: from the first to the last sample in which
    /// the GPU did any work.
    pub active: (usize, usize),
    /// Seconds since the run started of the first sample that found the GPU lost (fallen off
    /// the bus); `None` while it answered.
    pub lost_at_s: Option<f64>,
    /// GPM's NVLink traffic, both directions summed, bytes a second.
    pub nvlink_bytes_per_s: Vec<Option<f64>>,
    /// The most NVLink links seen up at once (the samples' links, or the recording's `nvlink`
    /// events); `None` when never read.
    pub nvlink_active_links: Option<u32>,
    /// When a row remap (`remapped_rows_pending`) or a page retirement (`retired_pages_pending`)
    /// was first seen waiting for a reset, seconds since the start, with the table key.
    pub reset_pending: Option<(f64, &'static str)>,
}

/// The longest gap between two of the driver's GPU-Util samples that the later one still covers;
/// beyond it the polls say.
const FINE_GAP_S: f64 = 1.0;

impl GpuSeries {
    /// The span the driver's GPU-Util sample `k` covers, (start, end] in seconds since the first
    /// sample; `None` for the first, or after a gap longer than [`FINE_GAP_S`].
    pub(crate) fn fine_span(&self, k: usize) -> Option<[f64; 2]> {
        let (s0, s1) = (self.util_fine.get(k.checked_sub(1)?)?.0, self.util_fine.get(k)?.0);
        (s1 - s0 <= FINE_GAP_S).then_some([s0, s1])
    }

    /// Values of `v` inside the active window that are present.
    pub fn active_values(&self, v: &[Option<f64>]) -> Vec<f64> {
        v.get(self.active.0..self.active.1).unwrap_or_default().iter().flatten().copied().collect()
    }

    /// Whether the GPU worked at all: some 5 s of its active window average above an idle
    /// GPU's level, as the window itself is found. A GPU that never did has the whole run as
    /// its window, which is no loop.
    pub fn busy(&self) -> bool {
        first_busy(self, self.active.0, self.active.1).is_some()
    }

    /// Seconds the active window lasts.
    pub fn active_s(&self) -> f64 {
        match self.active {
            (a, b) if b > a => self.t_s[b - 1] - self.t_s[a],
            _ => 0.0,
        }
    }

    /// `[start, end]` of the active window in seconds since the run started.
    pub fn window(&self) -> [f64; 2] {
        match self.active {
            (a, b) if b > a => [crate::round(self.t_s[a], 1), crate::round(self.t_s[b - 1], 1)],
            _ => [0.0, 0.0],
        }
    }
}

/// Whether the job's processes sat blocked on I/O at one tree sample.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct IoBlocked {
    pub t_s: f64,
    /// A process of the job holding the GPU (else the root) was in D state.
    pub main: bool,
    /// The share of the DataLoader workers that were; `None` without workers.
    pub workers_share: Option<f64>,
}

/// The tree's storage I/O over one interval between tree samples.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TreeIo {
    /// The interval's end, seconds since the start.
    pub end_s: f64,
    pub seconds: f64,
    pub read_bytes: f64,
    pub written_bytes: f64,
    /// Of `read_bytes`, what the DataLoader workers read.
    pub workers_read_bytes: f64,
}

impl TreeIo {
    pub fn start_s(&self) -> f64 {
        self.end_s - self.seconds
    }
}

/// The job's memory at one tree sample: what the DataLoader workers' copy-on-access growth is
/// read from.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TreePss {
    pub t_s: f64,
    /// The GPU processes' proportional set size (else the root's), summed.
    pub main_bytes: f64,
    /// The DataLoader workers' proportional set size, summed.
    pub workers_bytes: f64,
    pub workers: usize,
    /// The GPU processes' resident memory: what each worker could copy at most.
    pub main_rss_bytes: f64,
}

/// Everything the rules read.
#[derive(Debug, Clone, Default)]
pub struct Run {
    pub gpus: Vec<GpuSeries>,
    /// Unix time of the first sample, microseconds.
    pub start_us: i64,
    /// Whether the input had GPM (SM activity).
    pub has_gpm: bool,
    /// Whether processes were listed.
    pub has_processes: bool,
    /// Whether the GPUs' process listings were read (gpulse's own recording, which reads the host
    /// with them), so that an empty one means no process; a log may have no listing at all.
    pub processes_read: bool,
    /// The watched tree's CPU, percent of one core, over time (seconds, value).
    pub tree_cpu: Vec<(f64, f64)>,
    /// Each sampled main process's own CPU (all its threads), percent of one core over time
    /// (seconds, value): beside its main thread's samples, what its other threads did.
    pub main_cpu: std::collections::HashMap<u32, Vec<(f64, f64)>>,
    /// Most processes the tree had at once.
    pub tree_width: usize,
    /// Mean CPU of each process under the root (DataLoader workers, ranks), percent of one core,
    /// over the samples in which the tree had any.
    pub worker_cpu_mean: Option<f64>,
    /// Most DataLoader workers seen at once.
    pub worker_count: usize,
    /// When a new set of DataLoader workers replaced the last (none of its PIDs left): a fresh
    /// iterator forking its workers again, seconds since the start.
    pub worker_restarts_s: Vec<f64>,
    /// Most threads one DataLoader worker had, and the whole tree at once.
    pub worker_threads_max: Option<u32>,
    pub tree_threads_max: Option<u32>,
    /// At each tree sample, which of the job's processes sat in D state, blocked in the kernel
    /// on I/O.
    pub io_blocked: Vec<IoBlocked>,
    /// Whole-machine CPU time waiting for I/O, percent, over time.
    pub host_iowait: Vec<(f64, f64)>,
    /// When `torch.compile`'s worker processes were first and last seen in the tree (seconds).
    pub compile_workers_s: Option<[f64; 2]>,
    /// The tree's storage I/O between consecutive tree samples, from the processes present at
    /// both.
    pub tree_io: Vec<TreeIo>,
    /// Proportional set size at each tree sample, each process's latest reading carried.
    pub tree_pss: Vec<TreePss>,
    /// The host's total memory, bytes.
    pub host_mem_total_bytes: Option<f64>,
    /// Whole-machine CPU busy, percent, and the core count.
    pub host_cpu: Vec<(f64, f64)>,
    pub cores: usize,
    /// Host memory in use (total less what the kernel can still reclaim), percent of the total,
    /// over time (seconds, value).
    pub host_mem_used_pct: Vec<(f64, f64)>,
    /// Events by kind and time (seconds since the start).
    pub events: Vec<(gpulse_model::EventKind, f64, serde_json::Value)>,
    /// Steps and data wait measured inside the training loop, when it sent marks.
    pub steps: Option<crate::Steps>,
    /// Each process's own steps, where several marked them (a distributed job's ranks).
    pub steps_by_pid: Vec<crate::Steps>,
    /// Every timed wait for data, `[start, end]` in seconds, from any process (see
    /// [`crate::steps::spans`]).
    pub data_waits_s: Vec<[f64; 2]>,
    /// Every other named phase (`eval`, `checkpoint`) and its `[start, end]`.
    pub phases_s: Vec<(String, [f64; 2])>,
    /// Every host-to-device copy `--instrument` timed because it held the loop up.
    pub copies_s: Vec<[f64; 2]>,
    /// The waits of [`Run::data_waits_s`] that stand for a fast loop's several: placed as one
    /// stretch, so they may overlap the copies between them.
    pub folded_waits_s: Vec<[f64; 2]>,
    /// The job's Python threads sampled from outside (shared: the rules' copies of a run keep
    /// them whole).
    pub stacks: std::sync::Arc<gpulse_model::Stacks>,
    /// The ranks of [`Run::stacks`], worked out on first use (see [`crate::ranks`]); public so
    /// that a run can be built with `..Run::default()`.
    pub ranks: std::sync::OnceLock<Vec<(gpulse_model::Rank, u32)>>,
    /// What the rules work out once from [`Run::stacks`], shared with every copy of the run.
    pub memo: std::sync::Arc<Memo>,
}

impl Run {
    /// The GPUs the watched job's processes were listed on, where the listings tell the job's
    /// processes from others (`run`, `attach`, `record --pid`); `None` where they cannot. Empty
    /// for a job that never used a GPU, whoever else did.
    pub fn job_gpus(&self) -> Option<Vec<u32>> {
        // Processes `/proc` cannot see (another PID namespace: `Gone`) tell nothing of whose
        // they are.
        use gpulse_model::GpuProcessClass::{Foreign, Tree};
        let classed =
            |g: &GpuSeries| g.processes.iter().any(|l| l.iter().any(|p| matches!(p.class, Some(Tree | Foreign))));
        if !self.gpus.iter().any(classed) {
            return None;
        }
        let job = |g: &&GpuSeries| {
            g.processes.iter().any(|l| l.iter().any(|p| p.class == Some(gpulse_model::GpuProcessClass::Tree)))
        };
        Some(self.gpus.iter().filter(job).map(|g| g.gpu).collect())
    }

    /// Mean CPU of the watched tree, percent of one core.
    pub fn tree_cpu_mean(&self) -> Option<f64> {
        mean(&self.tree_cpu.iter().map(|x| x.1).collect::<Vec<_>>())
    }

    /// Mean whole-machine CPU busy, percent.
    pub fn host_cpu_mean(&self) -> Option<f64> {
        mean(&self.host_cpu.iter().map(|x| x.1).collect::<Vec<_>>())
    }

    /// The run without its samples inside the loop's marked phases (data waits aside): what the
    /// rules that read the GPU's idle time see, so time the loop spent in a phase on purpose is
    /// never blamed on anything else. `None` when no sample lies in a phase.
    pub fn outside_phases(&self) -> Option<Run> {
        let merged = merged(self.phases_s.iter().map(|p| p.1).collect(), f64::MIN, f64::MAX);
        let inside = |t: f64| covers(&merged, t);
        if !self.gpus.iter().any(|g| g.t_s.iter().any(|t| inside(*t))) {
            return None;
        }
        let mut run = self.clone();
        for g in &mut run.gpus {
            let keep: Vec<bool> = g.t_s.iter().map(|t| !inside(*t)).collect();
            fn kept<T: Clone>(v: &mut Vec<T>, keep: &[bool]) {
                let mut k = keep.iter();
                v.retain(|_| *k.next().unwrap_or(&true));
            }
            kept(&mut g.t_s, &keep);
            kept(&mut g.util_pct, &keep);
            kept(&mut g.sm_pct, &keep);
            kept(&mut g.mem_used_bytes, &keep);
            kept(&mut g.power_w, &keep);
            kept(&mut g.temp_c, &keep);
            kept(&mut g.sm_clock_mhz, &keep);
            kept(&mut g.reasons, &keep);
            kept(&mut g.pcie_rx_bytes_per_s, &keep);
            kept(&mut g.pcie_tx_bytes_per_s, &keep);
            kept(&mut g.tensor_pct, &keep);
            kept(&mut g.fp32_pct, &keep);
            for v in
                [&mut g.hmma_pct, &mut g.imma_pct, &mut g.dfma_pct, &mut g.fp64_pct, &mut g.fp16_pct, &mut g.dram_pct]
            {
                kept(v, &keep);
            }
            kept(&mut g.energy_mj, &keep);
            kept(&mut g.nvlink_bytes_per_s, &keep);
            kept(&mut g.processes, &keep);
            g.active = active_window(g);
        }
        run.tree_cpu.retain(|x| !inside(x.0));
        run.host_cpu.retain(|x| !inside(x.0));
        Some(run)
    }

    /// The run of a recording held whole.
    pub fn from_recording(rec: &RunData) -> Self {
        let mut b = RunBuilder::default();
        for snap in &rec.snapshots {
            b.push(snap);
        }
        b.finish(rec)
    }
}

/// Mean utilization (or SM activity) above which a stretch of samples is work: NVML's
/// utilization reads a few percent on an idle GPU now and then (a monitor's own context).
const BUSY_PCT: f64 = 2.0;

/// Seconds over which the level is averaged to tell work from a blip.
const SPAN_S: f64 = 5.0;

/// The first sample in `[from, to)` whose next 5 s (within the range) average more than
/// [`BUSY_PCT`], itself above 0.
fn first_busy(s: &GpuSeries, from: usize, to: usize) -> Option<usize> {
    let avg = |lo: usize, hi: usize| (lo..hi).map(|i| level(s, i)).sum::<f64>() / (hi - lo).max(1) as f64;
    let mut j = from;
    (from..to).find(|&i| {
        j = j.max(i + 1);
        while j < to && s.t_s[j] < s.t_s[i] + SPAN_S {
            j += 1;
        }
        avg(i, j) > BUSY_PCT && level(s, i) > 0.0
    })
}

/// A sample's level of work: utilization, else SM activity, else none.
fn level(s: &GpuSeries, i: usize) -> f64 {
    s.util_pct[i].or(s.sm_pct[i]).unwrap_or(0.0)
}

/// The stretch in which the job ran: from the first sample whose next 5 s average more than 2 %
/// GPU-Util (or SM activity) to the last sample whose previous 5 s do. Averaging over seconds
/// keeps a lone blip (a CUDA context starting, a probe) from stretching the window, while a
/// starved loop's bursts still count. The whole series when nothing qualifies.
pub(crate) fn active_window(s: &GpuSeries) -> (usize, usize) {
    let n = s.t_s.len();
    let level = |i: usize| level(s, i);
    let avg = |lo: usize, hi: usize| (lo..hi).map(level).sum::<f64>() / (hi - lo).max(1) as f64;
    let start = first_busy(s, 0, n);
    let mut end = None;
    let mut k = n;
    for i in (0..n).rev() {
        k = k.min(i);
        while k > 0 && s.t_s[k - 1] > s.t_s[i] - SPAN_S {
            k -= 1;
        }
        if avg(k, i + 1) > BUSY_PCT && level(i) > 0.0 {
            end = Some(i + 1);
            break;
        }
    }
    match (start, end) {
        (Some(a), Some(b)) if b > a => (a, b),
        _ => (0, n),
    }
}
