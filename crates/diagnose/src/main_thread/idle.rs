//! What a process's main thread did while its own GPU waited: the node's other GPU processes
//! (`serve --record`, `record` without `--pid`), each read against its GPU as the ledger reads
//! the job's main thread against the GPU it splits.

use std::collections::HashMap;

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

/// Where a sample stands for the GPU's busy time first: waiting on it (or on a collective its
/// kernel runs), then launching to it (inside torch's own code, or native code that may be an
/// op on CUDA tensors), then the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Tier {
    Sync,
    Launch,
    Rest,
}

/// Each sample's weight in the GPU's idle time (`None` where no poll covers it), by its tier
/// (`tiers`, one per sample): its share of its own stretch that the GPU idled. A poll says only
/// how much of it the GPU worked; that work goes to the samples most likely beside it first
/// (the main thread waiting on the GPU, then launching to it), and the rest of the samples take
/// the poll's idle time. A step's own host-side work after its `.item()` (a tokenizer, a
/// DataLoader in the process) is then idle time whole; weighing every sample by its poll's idle
/// share had spread it over the launches beside it (a tokenizer read at a third of its own time
/// on a real H100).
pub(crate) fn idle_weights(g: &GpuSeries, pts: &[&Point], tiers: &[Tier]) -> Vec<Option<f64>> {
    let poll = |t: f64| {
        let i = g.t_s.partition_point(|x| *x < t);
        (i > 0 && i < g.t_s.len()).then_some(i)
    };
    // Per poll: the time its samples stand for, by tier.
    let mut sums: HashMap<usize, [f64; 3]> = HashMap::new();
    for (p, t) in pts.iter().zip(tiers) {
        if let Some(i) = poll(p.t_s) {
            sums.entry(i).or_default()[*t as usize] += p.dur_s;
        }
    }
    // Per poll and tier: the idle share of the tier's time once the GPU's work is placed.
    let idle_of: HashMap<usize, [f64; 3]> = sums
        .iter()
        .filter_map(|(&i, s)| {
            let u = idle_share(g, g.t_s[i])?;
            let mut busy = (1.0 - u) * s.iter().sum::<f64>();
            let mut out = [1.0; 3];
            for (k, &len) in s.iter().enumerate() {
                let here = busy.min(len);
                busy -= here;
                out[k] = if len > 0.0 { 1.0 - here / len } else { 1.0 };
            }
            Some((i, out))
        })
        .collect();
    pts.iter().zip(tiers).map(|(p, t)| Some(idle_of.get(&poll(p.t_s)?)?[*t as usize])).collect()
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
