//! What every rule and the ledger ask of a run: which GPU the ledger reads, where the loop lies,
//! when the job's CUDA context began, and plain statistics. Answered from the run alone.

use gpulse_model::GpuProcessClass;

use crate::{GpuSeries, Run};

/// Windows shorter than this hold too few samples to judge a steady state.
pub(crate) const MIN_ACTIVE_S: f64 = 10.0;

/// Mean of a slice; `None` when empty.
pub(crate) fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Population standard deviation.
pub(crate) fn stdev(v: &[f64]) -> Option<f64> {
    let m = mean(v)?;
    Some((v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len() as f64).sqrt())
}

/// The last moment anything of the run was seen, seconds since its start.
pub(crate) fn end_s(run: &Run) -> f64 {
    let gpu = run.gpus.iter().filter_map(|g| g.t_s.last().copied());
    let host = run.host_cpu.last().map(|x| x.0).into_iter().chain(run.tree_cpu.last().map(|x| x.0));
    let marks = run.phases_s.iter().map(|p| p.1[1]).chain(run.data_waits_s.iter().map(|w| w[1]));
    let steps = run.steps.iter().map(|s| s.window_s[1]);
    gpu.chain(host).chain(marks).chain(steps).fold(0.0, f64::max)
}

/// The GPU the ledger reads: the job's busiest over the run (a data-parallel job's ranks are
/// alike); none where the job used no GPU, however busy another process kept one.
pub(crate) fn primary(run: &Run) -> Option<&GpuSeries> {
    let job = run.job_gpus();
    let busy = |g: &GpuSeries| {
        let v = g.active_values(&g.util_pct);
        if v.is_empty() { -1.0 } else { v.iter().sum::<f64>() / v.len() as f64 }
    };
    run.gpus
        .iter()
        .filter(|g| !g.t_s.is_empty() && job.as_ref().is_none_or(|j| j.contains(&g.gpu)))
        .max_by(|a, b| busy(a).total_cmp(&busy(b)))
}

/// The loop, `[first, last]` seconds: from its first step mark to its last (and `true`), else the
/// busiest GPU's active window, which cannot begin before the job's CUDA context (a GPU too idle
/// for an active window has the whole series as one, a loop only where a job runs on it).
pub(crate) fn loop_window(run: &Run) -> (Option<[f64; 2]>, bool) {
    let context_s = first_context_s(run);
    match (&run.steps, primary(run)) {
        (Some(s), _) => (Some(s.window_s), true),
        (None, Some(g)) if g.active.1 > g.active.0 && (g.busy() || has_a_job(run, g)) => {
            let (a, b) = (g.t_s[g.active.0], g.t_s[g.active.1 - 1]);
            let a = context_s.filter(|c| *c > a && *c < b).unwrap_or(a);
            // The main thread training outside the GPU's busy stretch as the polls found it:
            // the loop ran then (the context's own time is known to a poll, so a backward pass
            // before the listing that first showed it means the listing came late).
            let (a, b) = match super::training_s(run) {
                Some([first, last]) => (a.min(first).max(g.t_s[0]), b.max(last)),
                None => (a, b),
            };
            (Some([a, b]), false)
        }
        _ => (None, false),
    }
}

/// Whether a job runs on `g` though it barely works (a loader starved by storage): the watched
/// tree, or a process holding `g`. An idle GPU with neither runs no loop.
pub(crate) fn has_a_job(run: &Run, g: &GpuSeries) -> bool {
    run.tree_width > 0 || g.processes.iter().any(|p| !p.is_empty())
}

/// The copies `--instrument` timed inside the loop: one before it is start-up (the first
/// `.cuda()` creates the CUDA context, the model's weights move to the GPU).
pub(crate) fn loop_copies(run: &Run) -> Vec<[f64; 2]> {
    let Some([first, last]) = loop_window(run).0 else { return Vec::new() };
    // A step mark ends its step: the first step's copies began before it.
    let step_s = run.steps.as_ref().and_then(|s| s.step_s.first()).map_or(0.0, |s| s.1);
    run.copies_s.iter().filter(|c| c[0] >= first - step_s && c[0] <= last).copied().collect()
}

/// Memory this far above its first reading is a CUDA context and its first allocations, for
/// inputs without process listings.
const CONTEXT_BYTES: f64 = 256.0 * 1024.0 * 1024.0;

/// The job's CUDA context before the first step at `first_step_s`: the process list is read about
/// once a second, so a context first listed up to [`LISTING_LAG_S`] after the first step came
/// just before it, and start-up lies all before it.
pub(crate) fn context_before(run: &Run, first_step_s: f64) -> Option<f64> {
    first_context_s(run).filter(|c| *c <= first_step_s + LISTING_LAG_S).map(|c| c.min(first_step_s))
}

/// Where start-up before a loop that began at `first_s` splits: the job's CUDA context, inside
/// it. Without marks, the loop cannot have begun before the job's CUDA context (a GPU too idle
/// for an active window has the whole series as one).
pub(crate) fn startup_context_s(run: &Run, first_s: f64, marked: bool) -> Option<f64> {
    let context_s = match marked {
        true => context_before(run, first_s),
        false => first_context_s(run),
    };
    context_s.filter(|c| *c > 0.0 && *c <= first_s)
}

/// How late the process list can name a new process: two of its one-second reads.
const LISTING_LAG_S: f64 = 2.0;

/// Seconds from the run's start to the first sample in which the job held a CUDA context.
pub(crate) fn first_context_s(run: &Run) -> Option<f64> {
    let by_process = run.gpus.iter().filter_map(|g| {
        let i =
            g.processes.iter().position(|l| l.iter().any(|p| p.class.is_none_or(|c| c == GpuProcessClass::Tree)))?;
        Some(g.t_s[i])
    });
    let by_memory = run.gpus.iter().filter_map(|g| {
        let first = g.mem_used_bytes.iter().flatten().next()?;
        let i = g.mem_used_bytes.iter().position(|m| m.is_some_and(|m| m - first >= CONTEXT_BYTES))?;
        Some(g.t_s[i])
    });
    if run.has_processes { by_process.reduce(f64::min) } else { by_memory.reduce(f64::min) }
}

/// A job writing at this rate streams a file out (a checkpoint); a log writes kilobytes a second.
const BULK_WRITE_BYTES_PER_S: f64 = 50e6;
/// GPU-Util at or below this is idle, as the stall rule reads it.
const IDLE_UTIL_PCT: f64 = 10.0;

/// The tree samples' intervals in which the job wrote in bulk while `g` stood idle, and the bytes
/// written in each.
pub(crate) fn bulk_writes_gpu_idle(run: &Run, g: &GpuSeries) -> Vec<([f64; 2], f64)> {
    run.tree_io
        .iter()
        .filter(|x| x.seconds > 0.0 && x.written_bytes / x.seconds >= BULK_WRITE_BYTES_PER_S)
        .map(|x| ([x.start_s(), x.end_s], x.written_bytes))
        .filter(|(w, _)| {
            let u: Vec<f64> = (0..g.t_s.len())
                .filter(|&i| g.t_s[i] > w[0] && g.t_s[i] <= w[1])
                .filter_map(|i| g.util_pct[i])
                .collect();
            !u.is_empty() && u.iter().sum::<f64>() / u.len() as f64 <= IDLE_UTIL_PCT
        })
        .collect()
}
