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
        while j < pts.len() && j - i < BLOCK && intervals[j].is_some() {
            j += 1;
        }
        block(&samples[i..j], &pts[i..j], &intervals[i..j], &mut out);
        i = j;
    }
    // Kept for the whole diagnosis, once per process: without the slack of its growth.
    out.shrink_to_fit();
    out
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
    for (p, s) in pts.iter().zip(samples) {
        // Where the samples caught only one side, the other side's time has no reason to take:
        // the samples keep theirs, less what the clocks say was a wait for a core.
        let (dur_s, core_s) = match (ran(s), in_r_s > 0.0 && off_snap_s > 0.0) {
            (true, true) => {
                let d = p.dur_s * runnable * total_s / in_r_s;
                (d * (1.0 - wait_of_runnable), d * wait_of_runnable)
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
