//! Synthetic runs for the rules' tests: series built sample by sample, active over all of it.

use std::sync::Arc;

use gpulse_model::ProcessSample;

use crate::{Finding, GpuSeries, Run, Steps};

/// GPU `index` sampled every `dt_s` with `util` as GPU-Util; every other reading absent.
pub fn gpu(index: u32, dt_s: f64, util: &[f64]) -> GpuSeries {
    let n = util.len();
    GpuSeries {
        gpu: index,
        t_s: (0..n).map(|i| i as f64 * dt_s).collect(),
        util_pct: util.iter().map(|u| Some(*u)).collect(),
        sm_pct: vec![None; n],
        mem_used_bytes: vec![None; n],
        power_w: vec![None; n],
        temp_c: vec![None; n],
        sm_clock_mhz: vec![None; n],
        reasons: vec![None; n],
        pcie_rx_bytes_per_s: vec![None; n],
        pcie_tx_bytes_per_s: vec![None; n],
        tensor_pct: vec![None; n],
        fp32_pct: vec![None; n],
        hmma_pct: vec![None; n],
        imma_pct: vec![None; n],
        dfma_pct: vec![None; n],
        fp64_pct: vec![None; n],
        fp16_pct: vec![None; n],
        dram_pct: vec![None; n],
        energy_mj: vec![None; n],
        nvlink_bytes_per_s: vec![None; n],
        processes: (0..n).map(|_| Arc::new(Vec::new())).collect(),
        active: (0, n),
        ..GpuSeries::default()
    }
}

/// `n` samples of a constant GPU-Util, one a second.
pub fn steady(index: u32, util: f64, n: usize) -> GpuSeries {
    gpu(index, 1.0, &vec![util; n])
}

/// The same listing of processes at every sample of `g`.
pub fn with_processes(mut g: GpuSeries, listing: Vec<ProcessSample>) -> GpuSeries {
    let l = Arc::new(listing);
    g.processes = vec![l; g.t_s.len()];
    g
}

/// A process holding `gib` GiB, rounded up to whole bytes (a threshold in GiB is then met).
pub fn holder(pid: u32, gib: f64) -> ProcessSample {
    ProcessSample { pid, used_memory_bytes: Some((gib * super::GIB).ceil() as u64), ..ProcessSample::default() }
}

pub fn run(gpus: Vec<GpuSeries>) -> Run {
    let has_processes = gpus.iter().any(|g| g.processes.iter().any(|p| !p.is_empty()));
    Run { gpus, has_processes, ..Run::default() }
}

/// One process's loop that marked `timed` steps after its first mark, over `window_s`, with no
/// step times or waits of its own: a test sets those it reads.
pub fn steps(pid: u32, timed: usize, window_s: [f64; 2]) -> Steps {
    Steps {
        pid,
        ranks: 1,
        marked: timed + 1,
        timed,
        window_s,
        step_s: Vec::new(),
        data_wait_s: Vec::new(),
        waited_s: None,
    }
}

/// One 1 s step a second from `from` to `to` seconds, each marked at its end; step `i` (by the
/// second it ends) waited `wait(i)` seconds for data, or the waits were not timed (`None`).
pub fn each_second(from: usize, to: usize, wait: Option<&dyn Fn(usize) -> f64>) -> Steps {
    let ends = from + 1..=to;
    Steps {
        step_s: ends.clone().map(|i| (i as f64, 1.0)).collect(),
        data_wait_s: wait.map_or_else(Vec::new, |w| ends.clone().map(|i| (i as f64, w(i))).collect()),
        waited_s: wait.map(|w| ends.map(w).sum()),
        ..steps(1, to - from, [from as f64, to as f64])
    }
}

pub fn ids(findings: &[Finding]) -> Vec<&'static str> {
    findings.iter().map(|f| f.id.as_str()).collect()
}
