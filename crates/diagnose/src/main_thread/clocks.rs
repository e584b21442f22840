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

/// The samples read across a change of letter (`KernelState::across`) of one thread so far, and
/// the time the clocks of their blocks left runnable once the samples caught in `R` had theirs.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Across {
    across_s: f64,
    left_s: f64,
}

impl Across {
    /// The share of an across sample's time the thread was runnable. Pooled over the thread's
    /// blocks: one block's few such samples would take all of its sampling error. At most half:
    /// the stack is read between the two letters, so a read into a call caught the thread still
    /// on its CPU only where the change came after the stack, and a read out of it only where the
    /// change came before, and a call is gone into as often as it is come out of. More than half
    /// is the sampler's own error (on a loaded host it runs as the thread leaves its core, and
    /// catches it off the CPU more often than it is), not the call's.
    fn ran_share(self) -> f64 {
        if self.across_s > 0.0 { (self.left_s / self.across_s).clamp(0.0, 0.5) } else { 0.0 }
    }
}

/// `pts[i]` is the point of `samples[i]`; returns the points with each sample's time rescaled
/// by its block's clocks, and the time it waited for a core as a point of its own after it.
/// `across` pools the thread's samples read across a change of letter, this call's and earlier.
pub(crate) fn apply(samples: &[&ThreadSample], pts: Vec<Point>, across: &mut Across) -> Vec<Point> {
    // Each interval's (s on a CPU, s waiting for one, s of wall time) to the next sample.
    let intervals: Vec<Option<(f64, f64, f64)>> = (0..pts.len())
        .map(|i| {
            let (a, b) = (samples[i].clock?, samples.get(i + 1)?.clock?);
            let wall_s = (samples[i + 1].t_us - samples[i].t_us) as f64 / 1e6;
            let (cpu, wait) = (b.cpu_us.checked_sub(a.cpu_us)?, b.wait_us.checked_sub(a.wait_us)?);
            (wall_s > 0.0).then(|| (cpu as f64 / 1e6, wait as f64 / 1e6, wall_s))
        })
        .collect();
    // Blocks: up to BLOCK consecutive points whose intervals have clocks, or one point without.
    let mut blocks: Vec<(std::ops::Range<usize>, Option<Clocked>)> = Vec::new();
    let mut i = 0;
    while i < pts.len() {
        if intervals[i].is_none() {
            blocks.push((i..i + 1, None));
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
        let clocked = Clocked::of(&samples[i..j], &pts[i..j], &intervals[i..j]);
        if clocked.across_s > 0.0 {
            across.across_s += clocked.across_s;
            across.left_s += clocked.runnable_s - clocked.letter_r_s;
        }
        blocks.push((i..j, Some(clocked)));
        i = j;
    }
    let ran_of_across = across.ran_share();
    let mut out = Vec::with_capacity(pts.len() + pts.len() / 4);
    for (range, clocked) in blocks {
        match clocked {
            Some(c) => block(&samples[range.clone()], &pts[range], &c, ran_of_across, &mut out),
            None => out.extend_from_slice(&pts[range]),
        }
    }
    // Kept for the whole diagnosis, once per process: without the slack of its growth.
    out.shrink_to_fit();
    out
}

/// How a sample in `R` (or read across a change of letter) was woken from a call that blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Woken {
    FromSleep,
    FromCall,
}

/// Whether a sample caught runnable with the GIL free is in a call that blocks: a sleep, or file,
/// socket, pipe or lock I/O.
fn woken(p: &Point, s: &ThreadSample) -> Option<Woken> {
    if s.gil == gpulse_model::Gil::Held {
        return None;
    }
    match p.class.state {
        ThreadState::Sleep => Some(Woken::FromSleep),
        ThreadState::Disk | ThreadState::Network | ThreadState::Ipc | ThreadState::Lock => Some(Woken::FromCall),
        _ => None,
    }
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

/// A block's clocks, scaled to the time its samples stand for.
struct Clocked {
    total_s: f64,
    on_s: f64,
    wait_s: f64,
    /// Runnable (on a CPU or waiting for one), by its clocks.
    runnable_s: f64,
    /// The time of the samples caught in `R`, and of those read across a change of letter.
    letter_r_s: f64,
    across_s: f64,
}

impl Clocked {
    fn of(samples: &[&ThreadSample], pts: &[Point], intervals: &[Option<(f64, f64, f64)>]) -> Self {
        let total_s: f64 = pts.iter().map(|p| p.dur_s).sum();
        // The clocks' shares of the block's wall time, applied to the time its samples stand for.
        let wall_s: f64 = intervals.iter().flatten().map(|x| x.2).sum::<f64>().max(1e-9);
        let on_s = intervals.iter().flatten().map(|x| x.0).sum::<f64>() / wall_s * total_s;
        let wait_s = intervals.iter().flatten().map(|x| x.1).sum::<f64>() / wall_s * total_s;
        let of = |f: fn(&ThreadSample) -> bool| -> f64 {
            pts.iter().zip(samples).filter(|(_, s)| f(s)).map(|(p, _)| p.dur_s).sum()
        };
        Self {
            total_s,
            on_s,
            wait_s,
            runnable_s: (on_s + wait_s).clamp(0.0, total_s.max(0.0)),
            letter_r_s: of(|s| s.kernel.state == 'R'),
            across_s: of(|s| s.kernel.across),
        }
    }
}

/// Rescales one block's points by its clocks. `ran_of_across`: the share of the time of a sample
/// read across a change of letter that the thread was runnable.
fn block(samples: &[&ThreadSample], pts: &[Point], c: &Clocked, ran_of_across: f64, out: &mut Vec<Point>) {
    let Clocked { total_s, on_s, wait_s, runnable_s, .. } = *c;
    if total_s <= 0.0 {
        out.extend_from_slice(pts);
        return;
    }
    let runnable = runnable_s / total_s;
    // Each sample's time in `R` and off the CPU, by its letter (and the clocks, for one across).
    let split = |p: &Point, s: &ThreadSample| match (s.kernel.state == 'R', s.kernel.across) {
        (true, _) => (p.dur_s, 0.0),
        (false, true) => (p.dur_s * ran_of_across, p.dur_s * (1.0 - ran_of_across)),
        (false, false) => (0.0, p.dur_s),
    };
    let in_r_s: f64 = pts.iter().zip(samples).map(|(p, s)| split(p, s).0).sum();
    let off_snap_s = total_s - in_r_s;
    let wait_of_runnable = if on_s + wait_s > 0.0 { wait_s / (on_s + wait_s) } else { 0.0 };
    // Samples caught runnable in a call that blocks, with the GIL free, were woken from it (or
    // are on their CPU in it): they take the wait for a core first, up to their share of the
    // runnable time. A sleep does no work of its own, so the lines that ran take the rest of a
    // sleep's share; a call's own time on its CPU keeps the rest of its share. Where only such
    // samples ran, every sample in R shares both.
    let (mut in_sleeps_s, mut in_calls_s) = (0.0, 0.0);
    for (p, s) in pts.iter().zip(samples) {
        match woken(p, s) {
            Some(Woken::FromSleep) => in_sleeps_s += split(p, s).0,
            Some(Woken::FromCall) => in_calls_s += split(p, s).0,
            None => {}
        }
    }
    let in_woke_s = in_sleeps_s + in_calls_s;
    let woken_first = in_woke_s < in_r_s;
    let share_of_r = if in_r_s > 0.0 { runnable_s / in_r_s } else { 0.0 };
    let wait_in_s = runnable_s * wait_of_runnable;
    let woke_wait_s = if woken_first { wait_in_s.min(in_woke_s * share_of_r) } else { 0.0 };
    let wait_of_woke = if in_woke_s > 0.0 { woke_wait_s / in_woke_s } else { 0.0 };
    // What the calls woken from keep of their share, on their CPU.
    let calls_ran_s = if woken_first { in_calls_s * (share_of_r - wait_of_woke).max(0.0) } else { 0.0 };
    let (rest_s, in_rest_s) =
        if woken_first { (runnable_s - woke_wait_s - calls_ran_s, in_r_s - in_woke_s) } else { (runnable_s, in_r_s) };
    let wait_of_rest = if rest_s > 0.0 { ((wait_in_s - woke_wait_s) / rest_s).clamp(0.0, 1.0) } else { 0.0 };
    let both_sides = in_r_s > 0.0 && off_snap_s > 0.0;
    for (p, s) in pts.iter().zip(samples) {
        let (in_r, off) = split(p, s);
        let off_s = off * (1.0 - runnable) * total_s / off_snap_s.max(1e-12);
        // Where the samples caught only one side, the other side's time has no reason to take:
        // the samples keep theirs, less what the clocks say was a wait for a core.
        let (ran_s, core_s, off_s) = match (both_sides, woken_first, woken(p, s)) {
            (false, ..) => (p.dur_s * (1.0 - wait_s / total_s).max(0.0), p.dur_s * (wait_s / total_s).min(1.0), 0.0),
            (true, true, Some(Woken::FromSleep)) => (0.0, in_r * wait_of_woke, off_s),
            (true, true, Some(Woken::FromCall)) => {
                (in_r * (share_of_r - wait_of_woke).max(0.0), in_r * wait_of_woke, off_s)
            }
            _ => {
                let d = if in_rest_s > 0.0 { in_r * rest_s / in_rest_s } else { 0.0 };
                (d * (1.0 - wait_of_rest), d * wait_of_rest, off_s)
            }
        };
        // Caught ready to take the GIL: the time it then ran, it ran Python.
        let ran_class = match p.class.state {
            ThreadState::GilWait if both_sides && in_r > 0.0 => Class { state: ThreadState::Python, ..p.class },
            _ => p.class,
        };
        // One point for what the sample stands for, in the class of its letter's side.
        let (dur_s, class) = match (in_r > 0.0, off > 0.0) {
            (true, true) => (off_s, p.class),
            (true, false) => (ran_s, ran_class),
            _ => (off_s + ran_s, p.class),
        };
        out.push(Point { dur_s, class, ..*p });
        // An across sample's time on the CPU, and a wait for a core, as points of their own.
        for (extra_s, class) in [
            (if in_r > 0.0 && off > 0.0 { ran_s } else { 0.0 }, ran_class),
            (core_s, Class { state: ThreadState::CoreWait, domain: p.class.domain, basis: Basis::Measured }),
        ] {
            if extra_s > 0.0 {
                out.push(Point { dur_s: extra_s, split: true, class, ..*p });
            }
        }
    }
}
