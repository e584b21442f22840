//! What the job's main thread did, sampled from outside, and what of the GPU's idle time it
//! explains.
//!
//! Each sample is classified by mechanism (`classify.rs`). A process's profile is its states'
//! shares of its sampled time, with their sites. The ledger's host-side time inside the loop
//! (what `host_bound`, `host_saturated` or elimination put there, and the loop's unexplained
//! idle) is split by what the main thread did while the GPU idled: each poll's busy time goes
//! beside the samples that waited on the GPU, then those that launched to it, and the rest take
//! its idle time (`idle.rs`). A thread waiting on the device coincides with the GPU working, so
//! it takes no idle time: it says where the GPU's queue drains.

mod advice;
mod begin;
mod cause;
pub(crate) mod classifier;
pub(crate) mod classify;
mod clocks;
mod findings;
mod idle;
mod live;
mod loader;
mod own;
mod phase;
pub mod startup;

pub use live::Totals;

use std::collections::HashMap;

use gpulse_model::{ProcessRole, Stacks};
use serde::Serialize;

pub use classifier::Classifier;
pub use classify::{Class, Domain, ThreadState, classify, own_code, site_frame};

use crate::run::main_pid;
use crate::{Run, round};

/// One sample of a main thread, classified, at seconds since the run's start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Point {
    pub t_s: f64,
    /// How long it stands for: its stretch's time between samples, shared evenly.
    pub dur_s: f64,
    pub stack: u32,
    /// The stack of the thread that held the GIL, when another did.
    pub gil_stack: Option<u32>,
    pub class: Class,
    /// Part of the sample before it (its wait for a core, by the thread's clocks), not a sample.
    pub split: bool,
}

/// Samples whose gaps are checked against one median for pauses: a third of a second at 50 Hz.
const WEIGHT_RUN: usize = 16;
/// Gaps on each side of a sample that it shares its time with.
const WEIGHT_HALF: usize = 8;

/// A process's samples, classified, in time order: worked out once per run.
pub(crate) fn points(run: &Run, pid: u32) -> std::sync::Arc<Vec<Point>> {
    run.memo.get(&run.stacks, u64::from(pid), || points_of(run, pid))
}

fn points_of(run: &Run, pid: u32) -> Vec<Point> {
    let st = &run.stacks;
    let all: Vec<&gpulse_model::ThreadSample> =
        crate::run::samples_of(run, pid).iter().map(|i| &st.samples[*i as usize]).collect();
    let t = |us: i64| us.saturating_sub(run.start_us) as f64 / 1e6;
    let times: Vec<f64> = all.iter().map(|s| t(s.t_us)).collect();
    let (mut all_weights, capped) = weights(&times);
    witnessed_pauses(&all, &times, &capped, &mut all_weights);
    // A stack read with no frame, between reads with frames, is a read that failed (the thread
    // ran Python before and after it): no evidence of a state, so its time goes to the sample
    // before it. Deep, fast-changing stacks fail most (`generate` under a loop), and counting
    // each as a frameless state took their time from them.
    let framed = |s: &gpulse_model::ThreadSample| st.stacks.get(s.stack as usize).is_some_and(|f| !f.is_empty());
    let span = all.iter().position(|s| framed(s)).zip(all.iter().rposition(|s| framed(s)));
    let mut mine = Vec::with_capacity(all.len());
    let mut weights: Vec<f64> = Vec::with_capacity(all.len());
    for (i, s) in all.iter().enumerate() {
        let failed = span.is_some_and(|(a, b)| a < i && i < b) && !framed(s);
        match weights.last_mut() {
            Some(w) if failed => *w += all_weights[i],
            _ => {
                mine.push(*s);
                weights.push(all_weights[i]);
            }
        }
    }
    // Stacks are the run's, not a process's: one classifier serves every process.
    let shared = classifier::shared(run);
    let mut classifier = shared.lock().unwrap_or_else(|e| e.into_inner());
    let mut votes = NativeVotes::of(st.process(pid));
    mine.iter().for_each(|s| votes.add(s));
    // Without a GPU, `.item()` or `.cpu()` reads a CPU tensor: the job's own call on the CPU,
    // no wait on a device, in the split and the thread's states alike.
    let no_gpu = crate::run::primary(run).is_none();
    let pts = mine
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let next = weights[i];
            let gil_stack = match s.gil {
                gpulse_model::Gil::Other { stack } => Some(stack),
                _ => None,
            };
            let mut class = classifier.classify(st, s);
            votes.refine(s, &mut class);
            if no_gpu && class.state == ThreadState::GpuSync {
                class.state = ThreadState::Python;
            }
            // Waiting in `loss.backward()` while the thread on the GIL runs the backward itself (a
            // compiled backward on the autograd engine's thread): the step's backward, as any
            // wait for the engine is, not another thread's Python in the way.
            // Where that thread compiles (a backward that `torch.compile` builds at its first
            // call), the wait is the compile's.
            if let (ThreadState::GilWait, Some(Domain::Backward), Some(h)) = (class.state, class.domain, gil_stack) {
                let holder = classifier.domain(st, h);
                if matches!(holder, Some(Domain::Backward | Domain::Compile))
                    || st.frames_of(h).any(|f| f.file.contains("/torch/_functorch/_aot_autograd/"))
                {
                    class.state = ThreadState::Python;
                }
                if holder == Some(Domain::Compile) {
                    class.domain = Some(Domain::Compile);
                }
            }
            Point { t_s: t(s.t_us), dur_s: next, stack: s.stack, gil_stack, class, split: false }
        })
        .collect();
    clocks::apply(&mine, compiled_backwards(pts), &mut clocks::Across::default())
}

/// A backward being compiled is one call: the samples around one whose GIL holder compiled, at
/// the same line with no other sample between, wait for the same compile, whether the compiling
/// thread held the GIL when they were read or ran its C++ (LLVM, `ptxas`) without it.
fn compiled_backwards(mut pts: Vec<Point>) -> Vec<Point> {
    let in_backward = |p: &Point| matches!(p.class.domain, Some(Domain::Backward | Domain::Compile));
    for run in pts.chunk_by_mut(|a, b| a.stack == b.stack && in_backward(b)) {
        if run.iter().all(in_backward) && run.iter().any(|p| p.class.domain == Some(Domain::Compile)) {
            for p in run {
                p.class.domain = Some(Domain::Compile);
                p.class.state = ThreadState::Python;
            }
        }
    }
    pts
}

/// The time each sample at `t_s` stands for. Not the gap after it: the sampler's next read
/// comes later after some states than others (a running thread's stack is slower to copy), and
/// weighing a sample by the gap after it would weigh its state by that. Each sample takes the
/// mean of the gaps around it, so samples of states that alternate faster than that stand for
/// the same time, while a rate that changes over seconds (the sampler starting slower, a budget
/// that tightens) is followed: evenly shared over a whole stretch, a start-up's import read at
/// 4 Hz and its next phase at 14 Hz moved 0.6 s from one to the other. A pause in sampling is
/// not time in a state: a gap counts up to twice the largest median of its stretch and the two
/// beside it (the whole run's where a stretch is too short to say). The weights sum to the time
/// sampled.
fn weights(t_s: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let gaps: Vec<f64> = t_s.windows(2).map(|w| w[1] - w[0]).collect();
    let mut sorted: Vec<f64> = gaps.iter().copied().filter(|g| *g > 0.0).collect();
    sorted.sort_by(f64::total_cmp);
    let cap = sorted.get(sorted.len() / 2).map_or(0.05, |m| 2.0 * m);
    // Each stretch's median, and a gap's cap from its own stretch and the two beside it: a
    // stretch where the rate changes keeps its slower gaps.
    let medians: Vec<f64> = gaps
        .chunks(WEIGHT_RUN)
        .map(|run| {
            let mut sorted = run.to_vec();
            sorted.sort_by(f64::total_cmp);
            if sorted.len() >= 8 { sorted[sorted.len() / 2] } else { cap / 2.0 }
        })
        .collect();
    let capped: Vec<f64> = gaps
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let k = i / WEIGHT_RUN;
            let near = medians[k.saturating_sub(1)..(k + 2).min(medians.len())].iter().copied().fold(0.0, f64::max);
            g.clamp(0.0, 2.0 * near)
        })
        .collect();
    if capped.is_empty() {
        return (vec![cap / 2.0; t_s.len()], capped);
    }
    let mut prefix = Vec::with_capacity(capped.len() + 1);
    prefix.push(0.0);
    for g in &capped {
        prefix.push(prefix.last().copied().unwrap_or(0.0) + g);
    }
    let raw: Vec<f64> = (0..t_s.len())
        .map(|i| {
            let (lo, hi) = (i.saturating_sub(WEIGHT_HALF), (i + WEIGHT_HALF).min(capped.len()));
            (prefix[hi] - prefix[lo]) / (hi - lo) as f64
        })
        .collect();
    // The last sample of all stands for a typical gap: none follows it.
    let want = prefix[capped.len()] + raw[raw.len() - 1];
    let got: f64 = raw.iter().sum();
    let scale = if got > 0.0 { want / got } else { 1.0 };
    (raw.into_iter().map(|w| w * scale).collect(), capped)
}

/// A thread that ran this share of a pause or less, by its own clocks, stayed off the CPU.
const OFF_CPU_SHARE: f64 = 0.05;

/// A pause in sampling is no time in a state, unless the thread's own clocks witness it: blocked
/// on the same line at both ends, and off the CPU in between, the thread waited there through it.
/// The sampler misses a core exactly while the job's other processes compute, which is when a
/// rank waits for them: capped, that wait's time went to the thread's other states. The pause's
/// time past its cap goes to the sample before it.
fn witnessed_pauses(samples: &[&gpulse_model::ThreadSample], t_s: &[f64], capped: &[f64], weights: &mut [f64]) {
    for (i, cap) in capped.iter().enumerate() {
        let (a, b) = (samples[i], samples[i + 1]);
        let pause = t_s[i + 1] - t_s[i];
        if pause <= *cap || a.kernel.state == 'R' || b.kernel.state == 'R' || a.stack != b.stack {
            continue;
        }
        let ran_us = match (a.clock, b.clock) {
            (Some(x), Some(y)) => y.cpu_us.saturating_sub(x.cpu_us) + y.wait_us.saturating_sub(x.wait_us),
            _ => continue,
        };
        if (ran_us as f64 / 1e6) <= OFF_CPU_SHARE * pause {
            weights[i] += pause - cap;
        }
    }
}

/// Where the reader tells who holds the GIL, a thread running with the GIL free runs native code
/// that let it go: a torch CPU op, numpy, a CUDA launch. One sample's GIL and frames are read
/// moments apart, so a pure-Python line is now and then read with the GIL free: a stack is
/// native only where most of its running samples say so. One process's votes; the diagnosis and
/// the live totals refine a class the same way.
#[derive(Debug, Default, Clone)]
pub(crate) struct NativeVotes {
    /// Whether a free GIL is free: the sampler says whether its reader sees the GIL. A recording
    /// from before it said so is trusted once a sample shows the thread holding the GIL; a loop
    /// blocked in its CUDA launches almost never does, and was read native or Python by luck.
    gil_read: Option<bool>,
    gil_told: bool,
    /// Stack → its running samples with the GIL held, and free (a map: one is made per process
    /// per diagnosis, and a vector would span every stack id of a long run).
    running: HashMap<u32, (usize, usize)>,
}

impl NativeVotes {
    /// The votes of `process`'s main thread.
    pub(crate) fn of(process: Option<&gpulse_model::SampledProcess>) -> Self {
        Self { gil_read: process.and_then(|p| p.gil_read), ..Self::default() }
    }

    pub(crate) fn add(&mut self, s: &gpulse_model::ThreadSample) {
        self.gil_told |= s.gil == gpulse_model::Gil::Held;
        if s.kernel.state != 'R' {
            return;
        }
        let e = self.running.entry(s.stack).or_default();
        match s.gil {
            gpulse_model::Gil::Held => e.0 += 1,
            gpulse_model::Gil::Free => e.1 += 1,
            gpulse_model::Gil::Other { .. } => {}
        }
    }

    /// `python` becomes `native` where the votes say the stack runs without the GIL.
    pub(crate) fn refine(&self, s: &gpulse_model::ThreadSample, class: &mut Class) {
        let native_stack = self.running.get(&s.stack).is_some_and(|(held, free)| free > held);
        if self.gil_read.unwrap_or(self.gil_told)
            && native_stack
            && class.state == ThreadState::Python
            && s.gil == gpulse_model::Gil::Free
            && s.kernel.state == 'R'
        {
            class.state = ThreadState::Native;
        }
    }
}

/// Of each span in `spans`, the parts where the ledger's main thread was writing, as its samples
/// say: at a line that writes, flushes, syncs or saves a file, or in a checkpoint's code. A span
/// the thread was not sampled in stays whole, for its I/O counters to speak for it.
pub(crate) fn writing_within(run: &Run, spans: Vec<[f64; 2]>) -> Vec<[f64; 2]> {
    // Most runs write no checkpoint: no span, no points to build.
    if spans.is_empty() {
        return spans;
    }
    let Some(pid) = main_pid(run) else { return spans };
    let pts = points(run, pid);
    let writes = |p: &Point| {
        p.class.domain == Some(Domain::Checkpoint)
            || (p.class.state == ThreadState::Disk
                && run.stacks.frames_of(p.stack).last().is_some_and(classify::writes_a_file))
    };
    let mut out = Vec::new();
    for [lo, hi] in spans {
        let within: Vec<&Point> = pts.iter().filter(|p| p.t_s >= lo && p.t_s < hi && !p.split).collect();
        if within.is_empty() {
            out.push([lo, hi]);
            continue;
        }
        out.extend(within.into_iter().filter(|p| writes(p)).map(|p| [p.t_s, (p.t_s + p.dur_s).min(hi)]));
    }
    out
}

/// A site's share of a process's sampled time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SiteShare {
    /// `path/file.py:LINE function`.
    pub site: String,
    pub share: f64,
    /// What most of its time was, where the state alone does not say: "importing
    /// torch._dynamo", "compiling with torch.compile" (a line running Python for seconds at start-up
    /// is mostly the import system or the compiler, not the job's own Python).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub doing: Option<String>,
}

/// A state's share of a process's sampled time, and where it was spent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StateShare {
    pub state: ThreadState,
    pub share: f64,
    pub seconds: f64,
    /// The most sampled, at most five.
    pub sites: Vec<SiteShare>,
}

/// Seconds at the steady rate that end a slow first stretch.
const HELD_S: usize = 3;

/// A first stretch of a process's samples at a lower rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SlowStart {
    pub seconds: f64,
    pub rate_hz: f64,
}

/// The first stretch of whole seconds, two or more, before the sampler first holds at least half
/// the run's steady rate (its upper quartile of seconds: a start-up read slowly for half the run
/// holds the median down) for three seconds running, where the stretch's own rate is under half
/// the steady one (a start-up's bursts of a fast second do not end it); `times_s` in order.
fn slow_start(times_s: &[f64]) -> Option<SlowStart> {
    let (first, last) = (*times_s.first()?, *times_s.last()?);
    let seconds = (last - first).floor() as usize;
    if seconds < 4 {
        return None;
    }
    let mut per = vec![0usize; seconds];
    for t in times_s {
        if let Some(n) = per.get_mut((t - first) as usize) {
            *n += 1;
        }
    }
    let mut sorted = per.clone();
    sorted.sort_unstable();
    let steady = sorted[sorted.len() * 3 / 4];
    let slow = per.windows(HELD_S).position(|w| w.iter().all(|n| 2 * n >= steady))?;
    let before: usize = per[..slow].iter().sum();
    (slow >= 2 && 2 * before < steady * slow).then(|| SlowStart {
        seconds: slow as f64,
        rate_hz: round(per[..slow].iter().sum::<usize>() as f64 / slow as f64, 1),
    })
}

/// What one sampled process's main thread did over the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Profile {
    pub pid: u32,
    pub role: ProcessRole,
    /// Its place in a distributed job, where its environment gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<gpulse_model::Rank>,
    pub samples: usize,
    /// The rate achieved: samples over the span from the first to the last.
    pub rate_hz: f64,
    /// From the first sample to the last.
    pub span_s: f64,
    /// A first stretch sampled at under half the rate that followed (the sampler finding its
    /// budget, or a busy machine), said as such rather than folded into one rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_start: Option<SlowStart>,
    pub states: Vec<StateShare>,
    /// Of a main process beside the one the ledger reads: what it did while its own GPU idled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub while_gpu_idle: Option<idle::IdleSplit>,
    /// Why it could not be sampled, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// Each state's share of `total` from (state, stack, seconds), with its five most weighed sites,
/// largest first; a state left no time (a wait for a core of microseconds) is not one.
pub(crate) fn state_shares(
    st: &Stacks,
    weighted: impl Iterator<Item = (ThreadState, u32, f64, Option<Domain>)>,
    total: f64,
) -> Vec<StateShare> {
    // By stack first: a site's text is made once per stack, not once per sample.
    let mut by_stack: HashMap<(ThreadState, u32, Option<Domain>), f64> = HashMap::new();
    for (state, stack, secs, domain) in weighted {
        *by_stack.entry((state, stack, domain)).or_default() += secs;
    }
    type Sites = HashMap<String, (f64, HashMap<String, f64>)>;
    let mut by: HashMap<ThreadState, (f64, Sites)> = HashMap::new();
    for ((state, stack, domain), secs) in by_stack {
        let e = by.entry(state).or_default();
        e.0 += secs;
        if let Some(site) = site_text(st, stack) {
            let site = e.1.entry(site).or_default();
            site.0 += secs;
            if let Some(doing) = doing(st, stack, domain) {
                *site.1.entry(doing).or_default() += secs;
            }
        }
    }
    let mut states: Vec<StateShare> = by
        .into_iter()
        .map(|(state, (secs, sites))| {
            let mut sites: Vec<SiteShare> = sites
                .into_iter()
                .map(|(site, (s, doings))| SiteShare {
                    site,
                    share: round(s / total.max(1e-9), 3),
                    // Named where it was most of the site's time.
                    doing: doings.into_iter().filter(|d| 2.0 * d.1 > s).max_by(|a, b| a.1.total_cmp(&b.1)).map(|d| d.0),
                })
                .collect();
            sites.sort_by(|a, b| b.share.total_cmp(&a.share).then_with(|| a.site.cmp(&b.site)));
            sites.truncate(5);
            StateShare { state, share: round(secs / total.max(1e-9), 3), seconds: round(secs, 2), sites }
        })
        .collect();
    states.retain(|s| s.seconds > 0.0);
    states.sort_by(|a, b| b.seconds.total_cmp(&a.seconds).then(a.state.cmp(&b.state)));
    states
}

/// What a stack of `domain` was doing where its thread state does not say: an import (with the
/// module imported) or a compile.
fn doing(st: &Stacks, stack: u32, domain: Option<Domain>) -> Option<String> {
    match domain? {
        Domain::Import => {
            let frames: Vec<&gpulse_model::PyFrame> = st.frames_of(stack).collect();
            Some(
                startup::imported(&frames).map_or_else(|| "importing modules".to_owned(), |m| format!("importing {m}")),
            )
        }
        Domain::Compile => Some("compiling with torch.compile".to_owned()),
        _ => None,
    }
}

/// A site for people: the job's own line, and where it led when that is elsewhere.
pub(crate) fn site_text(st: &Stacks, stack: u32) -> Option<String> {
    let frame = st.frames.get(site_frame(st, stack)? as usize)?;
    Some(frame.site())
}

/// Every sampled process's profile, the main process the ledger reads first, then the other
/// main processes, then the workers; processes that refused are listed with why.
pub fn profiles(run: &Run) -> Vec<Profile> {
    let st = &run.stacks;
    let first = main_pid(run);
    let ranks: HashMap<u32, gpulse_model::Rank> = crate::run::ranked(run).into_iter().map(|(r, p)| (p, r)).collect();
    let mut procs: Vec<&gpulse_model::SampledProcess> = st.processes.iter().collect();
    procs
        .sort_by_key(|p| (Some(p.pid) != first, p.role != ProcessRole::Main, ranks.get(&p.pid).map(|r| r.rank), p.pid));
    let mut out: Vec<Profile> = procs
        .into_iter()
        .map(|p| {
            let pts = points(run, p.pid);
            let total: f64 = pts.iter().map(|x| x.dur_s).sum();
            let states = state_shares(st, pts.iter().map(|x| (x.class.state, x.stack, x.dur_s, x.class.domain)), total);
            let times: Vec<f64> = pts.iter().filter(|x| !x.split).map(|x| x.t_s).collect();
            let samples = times.len();
            let span = times.last().zip(times.first()).map_or(0.0, |(l, f)| l - f);
            // What happened, not what the sampler aimed at.
            let rate = if span > 0.0 { (samples - 1) as f64 / span } else { 0.0 };
            Profile {
                pid: p.pid,
                role: p.role,
                rank: ranks.get(&p.pid).copied(),
                samples,
                rate_hz: round(rate, 1),
                span_s: round(span, 1),
                slow_start: slow_start(&times),
                states,
                // The ledger splits its own process's GPU idle time; each other one is read
                // against its own GPU.
                while_gpu_idle: (Some(p.pid) != first && p.role == ProcessRole::Main)
                    .then(|| idle::while_idle(run, p.pid, &pts))
                    .flatten(),
                refused: None,
            }
        })
        .collect();
    for (pid, why) in &st.refusals {
        if !out.iter().any(|p| p.pid == *pid) {
            out.push(Profile {
                pid: *pid,
                role: ProcessRole::Main,
                rank: None,
                samples: 0,
                rate_hz: 0.0,
                span_s: 0.0,
                slow_start: None,
                states: Vec::new(),
                while_gpu_idle: None,
                refused: Some(why.clone()),
            });
        }
    }
    out
}

pub(crate) use findings::{severity, split};
pub(crate) use loader::loader_site;

#[cfg(test)]
mod call_tests;
#[cfg(test)]
mod clocks_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod wait_tests;

#[cfg(test)]
mod slow_start_tests {
    use super::*;

    /// 4 s at 5 Hz, then 8 s at 50 Hz: the first stretch is said; a steady 50 Hz has none.
    #[test]
    fn a_first_stretch_at_a_lower_rate_is_said() {
        let mut t: Vec<f64> = (0..20).map(|i| f64::from(i) * 0.2).collect();
        t.extend((0..400).map(|i| 4.0 + f64::from(i) * 0.02));
        let s = slow_start(&t).expect("a slow start");
        assert_eq!(s.seconds, 4.0);
        assert!((s.rate_hz - 5.0).abs() < 0.01, "{s:?}");
        let steady: Vec<f64> = (0..600).map(|i| f64::from(i) * 0.02).collect();
        assert_eq!(slow_start(&steady), None);
    }

    /// Sample times with `per[s]` samples spread evenly over each second `s`.
    fn spread(per: &[u32]) -> Vec<f64> {
        per.iter()
            .enumerate()
            .flat_map(|(s, n)| (0..*n).map(move |i| s as f64 + f64::from(i) / f64::from(*n)))
            .collect()
    }

    /// A real start-up's shape (an H100 run's per-second counts): 13 s at 4–12 Hz while torch and
    /// the compiler's modules were imported, then 12 s at 46 Hz. The slow half is said whole.
    #[test]
    fn a_slow_start_of_half_the_run_is_said() {
        let per = [11, 12, 5, 6, 8, 10, 7, 8, 7, 9, 9, 4, 8, 18, 35, 44, 44, 47, 46, 49, 47, 47, 49, 47, 46, 1];
        let s = slow_start(&spread(&per)).expect("a slow start");
        assert_eq!(s.seconds, 14.0, "{s:?}");
        assert!((s.rate_hz - 8.7).abs() < 0.1, "{s:?}");
        // Another H100 run's: fast seconds among the slow ones (a burst between imports), then
        // the steady rate, then a second slow stretch later, which is not the start.
        let per =
            [6, 26, 17, 8, 10, 11, 28, 49, 50, 50, 16, 7, 8, 12, 8, 8, 29, 50, 50, 48, 50, 50, 50, 50, 49, 49, 50, 28];
        let s = slow_start(&spread(&per)).expect("a slow start");
        assert_eq!(s.seconds, 6.0, "{s:?}");
        assert!((s.rate_hz - 13.0).abs() < 0.1, "{s:?}");
    }
}
