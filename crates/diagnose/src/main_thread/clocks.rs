//! A main thread's samples corrected by its own clocks.
//!
//! One snapshot says `R` for a thread on a CPU and for one waiting for a core, and samples of a
//! loaded host catch a thread in `R` out of proportion to its time there. The kernel's clocks
//! (`schedstat`) say exactly how long the thread ran, waited for a core, and was off the CPU
//! between two samples. Over each block of samples, the time of the samples taken in `R` is made
//! the thread's measured running and core-waiting time, split between their states by the
//! samples, and the time of the samples taken off the CPU is made its measured off-CPU time: the
//! clocks give each total, the snapshots give its reasons and lines.

use gpulse_model::ThreadSample;

use super::{Class, Point, ThreadState};
use crate::Basis;

/// Samples per block: about half a second at 50 Hz, short enough that a block's states are one
/// phase of the loop, long enough that its totals are not one interval's.
const BLOCK: usize = 25;

/// The most blocks one block may grow to when its samples caught only one side of the thread (on
/// a CPU, or off it) while its clocks say it spent time on both: a loaded host wakes the sampler
/// as the thread leaves its core, so a thread that runs a fifth of the time can go a block
/// without a sample in `R`, and its running time would be told as the reason it was off the CPU.
pub(crate) const GROW: usize = 16;

/// `pts[i]` is the point of `samples[i]`; returns the points with each sample's time rescaled
/// by its block's clocks, and the time it waited for a core as a point of its own after it.
pub(crate) fn apply(samples: &[&ThreadSample], pts: Vec<Point>) -> Vec<Point> {
    // Each interval's (s on a CPU, s waiting for one, s of wall time) to the next sample.
    let intervals: Vec<Option<(f64, f64, f64)>> = (0..pts.len())
        .map(|i| {
            let (a, b) = (samples[i].clock?, samples.get(i + 1)?.clock?);
            let wall_s = (samples[i + 1].t_us - samples[i].t_us) as f64 / 1e6;
            let (cpu, wait) = (b.cpu_us.checked_sub(a.cpu_us)?, b.wait_us.checked_sub(a.wait_us)?);
            (wall_s > 0.0).then(|| (cpu as f64 / 1e6, wait as f64 / 1e6, wall_s))
        })
        .collect();
    let mut out = Vec::with_capacity(pts.len() + pts.len() / 4);
    let mut i = 0;
    while i < pts.len() {
        // A block: up to BLOCK consecutive points whose intervals have clocks.
        if intervals[i].is_none() {
            out.push(pts[i]);
            i += 1;
            continue;
        }
        let mut j = i;
        let mut ran = 0;
        while j < pts.len()
            && intervals[j].is_some()
            && (j - i < BLOCK || (j - i < BLOCK * GROW && one_sided(samples[i], samples[j], j - i, ran)))
        {
            ran += usize::from(running(samples[j], &pts[j].class));
            j += 1;
        }
        block(&samples[i..j], &pts[i..j], &intervals[i..j], &mut out);
        i = j;
    }
    // Kept for the whole diagnosis, once per process: without the slack of its growth.
    out.shrink_to_fit();
    out
}

/// Whether a sample caught its thread running: runnable, and not at a line that sleeps (there
/// it was woken and waits for a core to return from the sleep).
pub(crate) fn running(s: &ThreadSample, class: &Class) -> bool {
    s.kernel.state == 'R' && class.state != ThreadState::Sleep
}

/// Whether the samples from `first` to `last`, `ran` of the `n` before `last` caught running,
/// caught the thread only running or only off the CPU, where its clocks between the two say the
/// other side held more than one sample's share of the time: a block to grow before it is
/// counted.
pub(crate) fn one_sided(first: &ThreadSample, last: &ThreadSample, n: usize, ran: usize) -> bool {
    let (Some(a), Some(b)) = (first.clock, last.clock) else { return false };
    let wall_us = last.t_us - first.t_us;
    let (Some(cpu), Some(wait)) = (b.cpu_us.checked_sub(a.cpu_us), b.wait_us.checked_sub(a.wait_us)) else {
        return false;
    };
    if wall_us <= 0 || n == 0 {
        return false;
    }
    let runnable = ((cpu + wait) as f64 / wall_us as f64).clamp(0.0, 1.0);
    let one = 1.0 / n as f64;
    (ran == 0 && runnable > one) || (ran == n && 1.0 - runnable > one)
}

fn block(samples: &[&ThreadSample], pts: &[Point], intervals: &[Option<(f64, f64, f64)>], out: &mut Vec<Point>) {
    let total_s: f64 = pts.iter().map(|p| p.dur_s).sum();
    // The clocks' shares of the block's wall time, applied to the time its samples stand for.
    let wall_s: f64 = intervals.iter().flatten().map(|x| x.2).sum::<f64>().max(1e-9);
    let on_s = intervals.iter().flatten().map(|x| x.0).sum::<f64>() / wall_s * total_s;
    let wait_s = intervals.iter().flatten().map(|x| x.1).sum::<f64>() / wall_s * total_s;
    let ran = |s: &ThreadSample| s.kernel.state == 'R';
    let in_r_s: f64 = pts.iter().zip(samples).filter(|(_, s)| ran(s)).map(|(p, _)| p.dur_s).sum();
    let off_snap_s = total_s - in_r_s;
    if total_s <= 0.0 {
        out.extend_from_slice(pts);
        return;
    }
    // The share of the block the thread was runnable (on a CPU or waiting for one), by its clocks.
    let runnable = ((on_s + wait_s) / total_s).clamp(0.0, 1.0);
    let wait_of_runnable = if on_s + wait_s > 0.0 { wait_s / (on_s + wait_s) } else { 0.0 };
    // Samples woken at a sleep take the wait for a core first, and the lines that ran the rest;
    // where none ran, every sample in R shares both.
    let woke = |p: &Point, s: &ThreadSample| ran(s) && !running(s, &p.class);
    let in_woke_s: f64 = pts.iter().zip(samples).filter(|(p, s)| woke(p, s)).map(|(p, _)| p.dur_s).sum();
    let woken_first = in_woke_s < in_r_s;
    let (runnable_s, wait_in_s) = (runnable * total_s, runnable * total_s * wait_of_runnable);
    let woke_wait_s = if woken_first { wait_in_s.min(runnable_s * in_woke_s / in_r_s) } else { 0.0 };
    let (rest_s, in_rest_s) =
        if woken_first { (runnable_s - woke_wait_s, in_r_s - in_woke_s) } else { (runnable_s, in_r_s) };
    let wait_of_rest = if rest_s > 0.0 { ((wait_in_s - woke_wait_s) / rest_s).clamp(0.0, 1.0) } else { 0.0 };
    for (p, s) in pts.iter().zip(samples) {
        // Where the samples caught only one side, the other side's time has no reason to take:
        // the samples keep theirs, less what the clocks say was a wait for a core.
        let (dur_s, core_s) = match (ran(s), in_r_s > 0.0 && off_snap_s > 0.0) {
            (true, true) if woken_first && woke(p, s) => (0.0, p.dur_s * woke_wait_s / in_woke_s),
            (true, true) => {
                let d = p.dur_s * rest_s / in_rest_s;
                (d * (1.0 - wait_of_rest), d * wait_of_rest)
            }
            (false, true) => (p.dur_s * (1.0 - runnable) * total_s / off_snap_s, 0.0),
            (_, false) => (p.dur_s * (1.0 - wait_s / total_s).max(0.0), p.dur_s * (wait_s / total_s).min(1.0)),
        };
        // Caught ready to take the GIL: the time it then ran, it ran Python.
        let class = match p.class.state {
            ThreadState::GilWait if ran(s) && core_s + dur_s > 0.0 && in_r_s > 0.0 && off_snap_s > 0.0 => {
                Class { state: ThreadState::Python, ..p.class }
            }
            _ => p.class,
        };
        out.push(Point { dur_s, class, ..*p });
        if core_s > 0.0 {
            out.push(Point {
                dur_s: core_s,
                split: true,
                class: Class { state: ThreadState::CoreWait, domain: p.class.domain, basis: Basis::Measured },
                ..*p
            });
        }
    }
}
