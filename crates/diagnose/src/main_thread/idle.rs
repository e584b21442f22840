//! What a process's main thread did while its own GPU waited: the node's other GPU processes
//! (`serve --record`, `record` without `--pid`), each read against its GPU as the ledger reads
//! the job's main thread against the GPU it splits.

use std::collections::HashMap;

use serde::Serialize;

use super::{Domain, Point, StateShare, ThreadState, state_shares};
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

/// The stretch of GPU-Util that `t` falls in: one of the driver's own samples where they cover
/// it, else a poll; `None` where neither does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Stretch {
    Fine(usize),
    Poll(usize),
}

pub(crate) fn stretch(g: &GpuSeries, t: f64) -> Option<Stretch> {
    let i = g.util_fine.partition_point(|x| x.0 < t);
    if g.fine_span(i).is_some() {
        return Some(Stretch::Fine(i));
    }
    let i = g.t_s.partition_point(|x| *x < t);
    (i > 0 && i < g.t_s.len() && g.util_pct[i].is_some()).then_some(Stretch::Poll(i))
}

/// The GPU's idle share over a stretch.
fn idle_of(g: &GpuSeries, s: Stretch) -> Option<f64> {
    let u = match s {
        Stretch::Fine(i) => g.util_fine[i].1,
        Stretch::Poll(i) => g.util_pct[i]?,
    };
    Some((1.0 - u / 100.0).clamp(0.0, 1.0))
}

/// The idle share of the GPU around `t`; `None` where nothing covers it.
pub(crate) fn idle_share(g: &GpuSeries, t: f64) -> Option<f64> {
    idle_of(g, stretch(g, t)?)
}

/// Where a sample stands for the GPU's busy time first: waiting on it (or on a collective its
/// kernel runs), then launching to it (inside torch's own code, or native code that may be an
/// op on CUDA tensors), then the rest, and last the host's work after a wait on the GPU with no
/// launch since (a checkpoint or a `gc.collect()` after the step's `.item()`): the queue is
/// empty then, so the GPU idles unless the poll's timing smeared its work over it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Tier {
    Sync,
    Launch,
    Rest,
    Drained,
}

impl Tier {
    /// Each sample's tier from its own (`tiers`, in time order): the rest after a wait on the
    /// GPU (`drains`) with no launch since is [`Tier::Drained`].
    pub(crate) fn with_drains(tiers: impl Iterator<Item = (Tier, bool)>) -> Vec<Tier> {
        let mut drained = false;
        tiers
            .map(|(tier, drains)| match tier {
                Tier::Launch => {
                    drained = false;
                    tier
                }
                Tier::Rest if drained => Tier::Drained,
                _ => {
                    drained |= drains;
                    tier
                }
            })
            .collect()
    }
}

/// Each sample's weight in the GPU's idle time (`None` where nothing covers it), by its tier
/// (`tiers`, one per sample): its share of its own stretch that the GPU idled. A stretch says
/// only how much of it the GPU worked; that work goes to the samples most likely beside it
/// first (the main thread waiting on the GPU, then launching to it, then the rest, then the
/// host's work after a drain). A step's own host-side work after its `.item()` (a tokenizer, a
/// checkpoint) is then idle time whole: weighing every sample by its poll's idle share had
/// spread it over the launches beside it (a tokenizer read at a third of its own time on a real
/// H100). A tier the run's work never reaches takes none of a stretch's: a 0.2 s stretch that
/// happened to catch few launches had spilled its work onto the checkpoint after them.
pub(crate) fn idle_weights(g: &GpuSeries, pts: &[&Point], tiers: &[Tier]) -> Vec<Option<f64>> {
    // Per stretch: the time its samples stand for, by tier.
    let at: Vec<Option<Stretch>> = pts.iter().map(|p| stretch(g, p.t_s)).collect();
    let mut sums: HashMap<Stretch, [f64; 4]> = HashMap::new();
    for ((p, t), s) in pts.iter().zip(tiers).zip(&at) {
        if let Some(s) = s {
            sums.entry(*s).or_default()[*t as usize] += p.dur_s;
        }
    }
    let busy_of = |s: Stretch, lens: &[f64; 4]| Some((1.0 - idle_of(g, s)?) * lens.iter().sum::<f64>());
    // Over the run: each tier's busy seconds, by the tiers' order.
    let (mut lens, mut busy) = ([0.0; 4], 0.0);
    for (s, l) in &sums {
        let Some(b) = busy_of(*s, l) else { continue };
        busy += b;
        lens.iter_mut().zip(l).for_each(|(a, x)| *a += x);
    }
    let run_busy = in_order(busy, &lens);
    // Per stretch and tier: the idle share of the tier's time once the stretch's work is placed.
    let idle: HashMap<Stretch, [f64; 4]> = sums
        .iter()
        .filter_map(|(&s, l)| {
            let placed = in_order_where(busy_of(s, l)?, l, &run_busy);
            Some((s, std::array::from_fn(|k| if l[k] > 0.0 { 1.0 - placed[k] / l[k] } else { 1.0 })))
        })
        .collect();
    tiers.iter().zip(&at).map(|(t, s)| Some(idle.get(&(*s)?)?[*t as usize])).collect()
}

/// `busy` seconds over tiers of `lens` seconds, the first tiers filled first.
fn in_order(mut busy: f64, lens: &[f64; 4]) -> [f64; 4] {
    std::array::from_fn(|k| {
        let here = busy.min(lens[k]);
        busy -= here;
        here
    })
}

/// [`in_order`] over the tiers busy at all over the run (`run_busy` above 0):
/// what a stretch's samples of those tiers cannot hold is their sampling's error.
fn in_order_where(busy: f64, lens: &[f64; 4], run_busy: &[f64; 4]) -> [f64; 4] {
    in_order(busy, &std::array::from_fn(|k| if run_busy[k] > 0.0 { lens[k] } else { 0.0 }))
}

/// The GPU `pid` held in the most polls, and what its main thread did while that GPU idled;
/// `None` where it held none, or the GPU never idled while it was sampled.
pub(super) fn while_idle(run: &Run, pid: u32, pts: &[Point]) -> Option<IdleSplit> {
    let held = |g: &GpuSeries| g.processes.iter().filter(|l| l.iter().any(|p| p.pid == pid)).count();
    let g = run.gpus.iter().filter(|g| held(g) > 0).max_by_key(|g| (held(g), std::cmp::Reverse(g.gpu)))?;
    let weighted: Vec<(ThreadState, u32, f64, Option<Domain>)> = pts
        .iter()
        .filter_map(|x| Some((x.class.state, x.stack, x.dur_s * idle_share(g, x.t_s)?, x.class.domain)))
        .collect();
    let idle_s: f64 = weighted.iter().map(|w| w.2).sum();
    (idle_s >= 0.05).then(|| IdleSplit {
        gpu: g.gpu,
        idle_s: round(idle_s, 2),
        states: state_shares(&run.stacks, weighted.into_iter(), idle_s),
    })
}

#[cfg(test)]
#[path = "idle_tests.rs"]
mod tests;
