//! What a process's main thread did while its own GPU waited: the node's other GPU processes
//! (`serve --record`, `record` without `--pid`), each read against its GPU as the ledger reads
//! the job's main thread against the GPU it splits.

use serde::Serialize;

use super::{Point, StateShare, ThreadState, state_shares};
use crate::{GpuSeries, Run, round};

/// A GPU's idle time while one process held it, split by that process's main thread's states.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IdleSplit {
    pub gpu: u32,
    /// The GPU's idle seconds over the process's sampled span (1 − GPU-Util of each poll, over
    /// the time each sample stands for).
    pub idle_s: f64,
    /// Each state's share of `idle_s`.
    pub states: Vec<StateShare>,
}

/// The idle share of the GPU poll that `t` falls in; `None` where no poll covers it.
pub(crate) fn idle_share(g: &GpuSeries, t: f64) -> Option<f64> {
    let i = g.t_s.partition_point(|x| *x < t);
    if i == 0 || i >= g.t_s.len() {
        return None;
    }
    g.util_pct[i].map(|u| (1.0 - u / 100.0).clamp(0.0, 1.0))
}

/// The GPU `pid` held in the most polls, and what its main thread did while that GPU idled;
/// `None` where it held none, or the GPU never idled while it was sampled.
pub(super) fn while_idle(run: &Run, pid: u32, pts: &[Point]) -> Option<IdleSplit> {
    let held = |g: &GpuSeries| g.processes.iter().filter(|l| l.iter().any(|p| p.pid == pid)).count();
    let g = run.gpus.iter().filter(|g| held(g) > 0).max_by_key(|g| (held(g), std::cmp::Reverse(g.gpu)))?;
    let weighted: Vec<(ThreadState, u32, f64)> =
        pts.iter().filter_map(|x| Some((x.class.state, x.stack, x.dur_s * idle_share(g, x.t_s)?))).collect();
    let idle_s: f64 = weighted.iter().map(|w| w.2).sum();
    (idle_s >= 0.05).then(|| IdleSplit {
        gpu: g.gpu,
        idle_s: round(idle_s, 2),
        states: state_shares(&run.stacks, weighted.into_iter(), idle_s),
    })
}
