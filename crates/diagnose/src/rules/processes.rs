//! Processes that hold GPU memory and do nothing, and processes outside the job.

use std::collections::BTreeMap;

use gpulse_model::GpuProcessClass;

use super::GIB;
use crate::{Finding, FindingId, Run, Severity, round};

/// Memory worth reclaiming: smaller contexts are CUDA's own overhead.
const MIN_HELD_GIB: f64 = 1.0;

/// A process alone on a GPU, or beside the job, that did nothing for this long: the diagnosis's
/// shortest window to judge a steady state.
const IDLE_MIN_S: f64 = super::MIN_ACTIVE_S;
/// SM use at or below this is no work: NVML's per-process figure reads 0–1 % for a context
/// that launches nothing.
const IDLE_SM_PCT: u32 = 1;

/// One process on one GPU, listing by listing: (sample index, memory, SM use).
#[derive(Default)]
struct Seen {
    at: Vec<(usize, Option<f64>, Option<u32>)>,
    class: Option<GpuProcessClass>,
    name: Option<String>,
}

impl Seen {
    fn hi(&self) -> f64 {
        self.at.iter().filter_map(|x| x.1).fold(0.0, f64::max)
    }

    /// Its memory stayed within 2 % of its most.
    fn flat(&self) -> bool {
        let lo = self.at.iter().filter_map(|x| x.1).fold(f64::MAX, f64::min);
        self.hi() - lo <= 0.02 * self.hi()
    }
}

/// How a process ended its time on a GPU doing nothing: from when, holding how much.
struct IdleTail {
    since_s: f64,
    until_s: f64,
    held: f64,
    /// The most SM use NVML gave it over the stretch, where it gave any.
    sm_max: Option<u32>,
    /// How idleness was told: `sm` (its own SM use), `gpu` (the GPU did nothing), `beside`
    /// (another process's memory moved with the GPU's work while this one's stayed).
    how: &'static str,
}

pub fn findings(run: &Run) -> Vec<Finding> {
    let mut out = Vec::new();
    if !run.has_processes {
        return out;
    }
    for g in &run.gpus {
        // By PID, so the findings come out in the same order every time.
        let mut seen: BTreeMap<u32, Seen> = BTreeMap::new();
        for (i, l) in g.processes.iter().enumerate() {
            for p in l.iter() {
                let e = seen.entry(p.pid).or_insert_with(|| Seen { name: p.name.clone(), ..Seen::default() });
                // A listing that cannot tell the memory says nothing of it.
                e.at.push((i, p.used_memory_bytes.map(|b| b as f64), p.sm_util_pct));
                e.class = e.class.or(p.class);
            }
        }
        // A worker is listed through much of the run, its memory moving: a short probe's context
        // growing from nothing is not the GPU's work (a small training's may be under a GiB).
        let n = g.processes.len() as f64;
        let moving: Vec<u32> =
            seen.iter().filter(|(_, h)| !h.flat() && h.at.len() as f64 >= 0.5 * n).map(|(p, _)| *p).collect();
        let job_here = seen.values().any(|h| h.class == Some(GpuProcessClass::Tree));
        for (&pid, h) in &seen {
            if h.hi() < MIN_HELD_GIB * GIB {
                continue;
            }
            let foreign = h.class == Some(GpuProcessClass::Foreign);
            let tail = idle_tail(g, pid, h, &moving);
            if foreign
                && job_here
                && let Some(f) = shared(g, pid, h)
            {
                out.push(f);
                continue;
            }
            // What it holds now, not what it held once, is what it keeps from others.
            // A stretch of 10 s at least. Where the listings cannot tell whose a process is, it must
            // also be half of its time: a training's closing checkpoint is no forgotten process.
            // The job's own, or another's beside it, are known for what they are.
            let span = g.t_s[h.at[h.at.len() - 1].0] - g.t_s[h.at[0].0];
            let long = |t: &IdleTail| {
                let idle_s = t.until_s - t.since_s;
                idle_s >= IDLE_MIN_S && (h.class.is_some() || idle_s >= 0.5 * span)
            };
            let Some(tail) = tail.filter(|t| t.held >= MIN_HELD_GIB * GIB).filter(long) else {
                if foreign {
                    out.push(busy_foreign(g, pid, h));
                }
                continue;
            };
            let mut f = idle(g, pid, h, &tail, foreign);
            // The job's own process whose main thread went on through its code all the while
            // is no idle holder: its GPU waits on the host, and the main thread's findings say
            // on what. Freeing the memory would fix nothing.
            if h.class == Some(GpuProcessClass::Tree) && works_through(run, pid, &tail) {
                f.severity = Severity::Info;
                f.advice = vec![
                    "its main thread kept running through its code while the GPU idled: the GPU waits on the host, and the main thread's findings say on what".to_owned(),
                ];
                out.push(f);
                continue;
            }
            // The job's own process holding memory through its last stretch slows nothing of the
            // job: said, at info, unless it idled most of its time on the GPU.
            if h.class == Some(GpuProcessClass::Tree) && tail.until_s - tail.since_s < 0.5 * span {
                f.severity = Severity::Info;
            }
            out.push(f);
        }
    }
    out
}

/// Samples of a main thread in a stretch that show it working: enough of them, and at several
/// stacks (a process that waits for nothing sits at one).
const WORKING_SAMPLES: usize = 20;
const WORKING_STACKS: usize = 3;

/// Whether `pid`'s main thread was sampled moving through its code over `tail`.
fn works_through(run: &Run, pid: u32, tail: &IdleTail) -> bool {
    let t = |us: i64| us.saturating_sub(run.start_us) as f64 / 1e6;
    let mut stacks: Vec<u32> = run
        .stacks
        .samples
        .iter()
        .filter(|s| s.pid == pid && (tail.since_s..=tail.until_s).contains(&t(s.t_us)))
        .map(|s| s.stack)
        .collect();
    let samples = stacks.len();
    stacks.sort_unstable();
    stacks.dedup();
    samples >= WORKING_SAMPLES && stacks.len() >= WORKING_STACKS
}

/// The stretch at the end of `h`'s listings in which it did nothing and its memory stayed at its
/// last level; `None` when its last listing already worked.
fn idle_tail(g: &crate::GpuSeries, pid: u32, h: &Seen, moving: &[u32]) -> Option<IdleTail> {
    // Beside another process whose memory moved with the GPU's work, one whose memory never did
    // is not the one working.
    // So is one with which, alone, the GPU did nothing for a while and never worked, beside any
    // other.
    let alone = |i: usize| matches!(g.processes[i].as_slice(), [p] if p.pid == pid);
    let alone_idle_s: f64 = h.at.iter().filter(|x| x.0 > 0 && alone(x.0)).map(|x| g.t_s[x.0] - g.t_s[x.0 - 1]).sum();
    let never_alone_busy =
        alone_idle_s >= IDLE_MIN_S && h.at.iter().all(|x| !alone(x.0) || g.util_pct[x.0].is_some_and(|u| u <= 1.0));
    // Whichever sample the GPU worked at: a listing may lag the work by its own interval.
    let other_moved = moving.iter().any(|&p| p != pid);
    let beside = |i: usize| {
        let mut others = g.processes[i].iter().filter(|p| p.pid != pid);
        h.flat() && (other_moved || others.any(|_| never_alone_busy))
    };
    let held = h.at.iter().rev().find_map(|x| x.1)?;
    let mut since: Option<(usize, &'static str)> = None;
    let mut how = "sm";
    for &(i, m, sm) in h.at.iter().rev() {
        let flat = m.is_none_or(|m| (m - held).abs() <= 0.02 * held);
        let idle = match sm {
            // NVML's per-process figure reads 0–1 % for tiny kernels too: a GPU that worked while
            // no other process claimed the SMs worked for this one.
            Some(s) => {
                let gpu_worked = g.util_pct[i].is_some_and(|u| u > 1.0);
                let other_claims =
                    g.processes[i].iter().any(|p| p.pid != pid && p.sm_util_pct.is_some_and(|s| s > IDLE_SM_PCT));
                Some(s <= IDLE_SM_PCT && (!gpu_worked || other_claims)).map(|i| (i, "sm"))
            }
            None => match g.util_pct[i] {
                Some(u) if u <= 1.0 => Some((true, "gpu")),
                // Another process's memory moved with the GPU's work while this one's stayed.
                Some(_) if beside(i) => Some((true, "beside")),
                Some(_) => Some((false, "gpu")),
                None => None,
            },
        };
        match idle {
            Some((true, by)) if flat => {
                since = Some((i, by));
                if how == "sm" || by == "beside" {
                    how = by;
                }
            }
            _ => break,
        }
    }
    let (first, _) = since?;
    let last = h.at[h.at.len() - 1].0;
    // A sample covers the interval since the one before: a stretch after work began there.
    let from = if first > h.at[0].0 { first - 1 } else { first };
    let sm_max = h.at.iter().filter(|x| x.0 >= first).filter_map(|x| x.2).max();
    Some(IdleTail { since_s: g.t_s[from], until_s: g.t_s[last], held, sm_max, how })
}

const FORGOTTEN: [&str; 2] = [
    "a forgotten notebook kernel or an old run holds this memory: end it, or in a notebook free it with del and torch.cuda.empty_cache()",
    "on a shared GPU, the memory it holds is memory your job cannot use",
];

/// `idle_holder` (or `foreign_process` outside the job): memory held while doing nothing, named
/// with its stretch.
fn idle(g: &crate::GpuSeries, pid: u32, h: &Seen, tail: &IdleTail, foreign: bool) -> Finding {
    let start = g.t_s[h.at[0].0];
    let ours = h.class == Some(GpuProcessClass::Tree);
    let (id, whose) = match (foreign, ours) {
        (true, _) => (FindingId::ForeignProcess, " (outside the job)"),
        (false, true) => (FindingId::IdleHolder, " (the job's)"),
        (false, false) => (FindingId::IdleHolder, ""),
    };
    let held_s = tail.until_s - tail.since_s;
    let since = if tail.since_s <= start {
        "idle from its first listing".to_owned()
    } else {
        format!("idle since {:.0} s after it appeared", tail.since_s - start)
    };
    let mut f = Finding::new(
        id,
        Severity::Warning,
        format!("GPU {}: process {pid}{whose} {since}, holding {:.1} GiB for {held_s:.0} s", g.gpu, tail.held / GIB),
    )
    .on_gpu(g.gpu)
    .over([round(tail.since_s, 1), round(tail.until_s, 1)])
    .of_pid(pid)
    .with("held_gib", round(tail.held / GIB, 2))
    .with("idle_s", round(held_s, 1));
    // The job's own process is no forgotten one: it holds what it no longer uses.
    f = if ours {
        f.advise(&[
            "free what it no longer needs before a long stretch without the GPU: del the tensors, then torch.cuda.empty_cache(); or end the process when its GPU work is done",
            "on a shared GPU, the memory it holds is memory other jobs cannot use",
        ])
    } else {
        f.advise(&FORGOTTEN)
    };
    if let Some(name) = &h.name {
        f = f.with("name", name.clone());
    }
    match tail.how {
        "sm" => {
            if let Some(m) = tail.sm_max {
                f = f.with("sm_util_max_pct", m);
            }
        }
        "gpu" => {
            f = f.limit("per-process SM use unknown: judged idle because its memory stayed put while the GPU did no work")
        }
        _ => {
            f = f.limit(
                "per-process SM use unknown: judged idle because its memory stayed put while another process's moved with the GPU's work",
            )
        }
    }
    if h.class.is_none() {
        f = f.limit("cannot tell whether it belongs to your job: record with `gpulse record --pid PID`");
    }
    f
}

/// `gpu_shared`: a process outside the job computing on the job's GPU, with its SM share while
/// both were listed. `None` where it did no work, or its SM use is unknown.
fn shared(g: &crate::GpuSeries, pid: u32, h: &Seen) -> Option<Finding> {
    let beside: Vec<(usize, u32)> =
        h.at.iter()
            .filter(|x| g.processes[x.0].iter().any(|p| p.class == Some(GpuProcessClass::Tree)))
            .filter_map(|x| Some((x.0, x.2?)))
            .collect();
    let sm = beside.iter().map(|x| f64::from(x.1)).sum::<f64>() / beside.len().max(1) as f64;
    if beside.is_empty() || sm <= f64::from(IDLE_SM_PCT) {
        return None;
    }
    let span = [g.t_s[beside[0].0], g.t_s[beside[beside.len() - 1].0]];
    let severity = if sm >= 100.0 * super::MATERIAL { Severity::Warning } else { Severity::Info };
    let mut f = Finding::new(
        FindingId::GpuShared,
        severity,
        format!("GPU {}: process {pid}, outside the job, computes beside it ({sm:.0}% of the SMs)", g.gpu),
    )
    .on_gpu(g.gpu)
    .over([round(span[0], 1), round(span[1], 1)])
    .of_pid(pid)
    .sharing_sms(round(sm, 1))
    .with("held_gib", round(h.hi() / GIB, 2))
    .advise(&[
        "the GPU time-slices between the two processes' kernels: the job's steps wait while the other's run",
        "run the job on a GPU of its own (CUDA_VISIBLE_DEVICES), or ask the other process's owner; `nvidia-smi pmon` shows who it is",
    ]);
    if let Some(name) = &h.name {
        f = f.with("name", name.clone());
    }
    Some(f)
}

/// `foreign_process` that is not idle: memory held outside the job, with its work where NVML
/// tells it. It does not share a GPU with the job (that is `gpu_shared`), so it costs the job
/// only the memory.
fn busy_foreign(g: &crate::GpuSeries, pid: u32, h: &Seen) -> Finding {
    let sm = h.at.iter().filter_map(|x| x.2).map(f64::from).collect::<Vec<_>>();
    let busy = crate::run::mean(&sm).filter(|m| *m > f64::from(IDLE_SM_PCT));
    let title = match busy {
        Some(m) => format!(
            "GPU {}: process {pid} computes outside the job ({m:.0}% of the SMs), holding {:.1} GiB",
            g.gpu,
            h.hi() / GIB
        ),
        None => format!("GPU {}: process {pid} holds {:.1} GiB outside the job", g.gpu, h.hi() / GIB),
    };
    let severity = if busy.is_some() { Severity::Info } else { Severity::Warning };
    let mut f = Finding::new(FindingId::ForeignProcess, severity, title)
        .on_gpu(g.gpu)
        .of_pid(pid)
        .with("held_gib", round(h.hi() / GIB, 2))
        .advise(&["on a shared GPU, the memory it holds is memory your job cannot use; `nvidia-smi pmon` shows whether it computes"]);
    if let Some(m) = busy {
        f = f.with("sm_mean_pct", round(m, 1));
    }
    if let Some(name) = &h.name {
        f = f.with("name", name.clone());
    }
    if sm.is_empty() {
        f = f.limit("per-process SM use unknown: whether it computes cannot be told");
    }
    f
}

#[cfg(test)]
#[path = "processes_tests.rs"]
mod tests;
