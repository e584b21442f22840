//! The ledger: every second of a run's wall time in exactly one account, with what it rests on.
//!
//! Accounts claim time in order of how directly they are known: the loop's marked phases first
//! (what a phase covers is never blamed on anything else), then its timed waits for data (those
//! before its first step are start-up's, as the loop's own figures count them), then start-up
//! before the first step and the time after the last, then a stall's pauses. What is
//! left of the loop is split by the GPU's own reading: the share in which a kernel ran is GPU
//! work, the rest goes to the inferred finding that explains it, or stays unexplained.

mod account;
mod busy;
mod families;
mod spans;

use serde::Serialize;

pub use account::AccountKind;
pub(crate) use families::{GPU_IDLE_IN_LOOP, LOOP_WITHOUT_GPU, NO_LOOP};
pub(crate) use spans::{covers, merged, total};

use crate::{Basis, Finding, FindingId, Run};

/// One account of the wall time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Account {
    /// What kind of time.
    pub account: AccountKind,
    /// Its name for people: a phase's own name, a stall's cause.
    pub label: String,
    pub seconds: f64,
    /// Its seconds over the wall time, 0 to 1.
    pub share: f64,
    pub basis: Basis,
    /// How its seconds were counted.
    pub evidence: String,
    /// The inferred finding whose cause the account is, and its GPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finding: Option<FindingId>,
    #[serde(skip)]
    pub finding_gpu: Option<u32>,
}

/// The run's wall time in accounts that sum to it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Ledger {
    pub wall_s: f64,
    pub accounts: Vec<Account>,
}

impl Ledger {
    /// Seconds in the accounts of one kind.
    pub fn seconds(&self, account: AccountKind) -> f64 {
        self.accounts.iter().filter(|a| a.account == account).map(|a| a.seconds).sum()
    }

    /// The share of the wall time in the accounts of one kind, 0 to 1.
    pub fn share(&self, account: AccountKind) -> f64 {
        self.seconds(account) / self.wall_s.max(1e-9)
    }
}

/// The label of the start-up from the job's CUDA context to its first step.
pub(crate) const TO_FIRST_STEP: &str = "start-up from the CUDA context to the first step";

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
pub(crate) fn primary(run: &Run) -> Option<&crate::GpuSeries> {
    let job = run.job_gpus();
    let busy = |g: &crate::GpuSeries| {
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
    let context_s = crate::rules::startup::first_context_s(run);
    match (&run.steps, primary(run)) {
        (Some(s), _) => (Some(s.window_s), true),
        (None, Some(g)) if g.active.1 > g.active.0 && (g.busy() || has_a_job(run, g)) => {
            let (a, b) = (g.t_s[g.active.0], g.t_s[g.active.1 - 1]);
            let a = context_s.filter(|c| *c > a && *c < b).unwrap_or(a);
            // The main thread training outside the GPU's busy stretch as the polls found it:
            // the loop ran then (the context's own time is known to a poll, so a backward pass
            // before the listing that first showed it means the listing came late).
            let (a, b) = match crate::main_thread::training_s(run) {
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
pub(crate) fn has_a_job(run: &Run, g: &crate::GpuSeries) -> bool {
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

/// A job writing at this rate streams a file out (a checkpoint); a log writes kilobytes a second.
const BULK_WRITE_BYTES_PER_S: f64 = 50e6;
/// GPU-Util at or below this is idle, as the stall rule reads it.
const IDLE_UTIL_PCT: f64 = 10.0;

/// The tree samples' intervals in which the job wrote in bulk while `g` stood idle, and the bytes
/// written in each.
pub(crate) fn bulk_writes_gpu_idle(run: &Run, g: &crate::GpuSeries) -> Vec<([f64; 2], f64)> {
    run.tree_io
        .iter()
        .filter(|x| x.1 > 0.0 && x.3 / x.1 >= BULK_WRITE_BYTES_PER_S)
        .map(|x| ([x.0 - x.1, x.0], x.3))
        .filter(|(w, _)| {
            let u: Vec<f64> = (0..g.t_s.len())
                .filter(|&i| g.t_s[i] > w[0] && g.t_s[i] <= w[1])
                .filter_map(|i| g.util_pct[i])
                .collect();
            !u.is_empty() && u.iter().sum::<f64>() / u.len() as f64 <= IDLE_UTIL_PCT
        })
        .collect()
}

/// Every second of the run in one account. `findings` are the rules' (stall pauses and the
/// inferred causes of idle time come from them). Each family of accounts claims in turn.
pub fn ledger(run: &Run, findings: &[Finding]) -> Ledger {
    let end_s = end_s(run);
    let mut book = spans::Book::new(end_s);
    // The loop: from its first step to its last, else the GPU's active window.
    let (window_s, marked) = loop_window(run);
    let at = families::Loop { window_s, marked, end_s };
    families::phases(&mut book, run);
    let displaced_s = families::waits(&mut book, run, &at);
    let g = primary(run);
    if let Some([first, last]) = window_s {
        families::startup(&mut book, run, &at, first);
        families::after_loop(&mut book, &at, last);
        families::stalls(&mut book, findings, g);
        if let Some(g) = g {
            families::storage_writes(&mut book, run, g);
        }
        families::loop_rest(&mut book, run, findings, g, [first, last], displaced_s);
    }
    families::unexplained(&mut book, run, &at);
    book.into_ledger()
}

#[cfg(test)]
mod tests;
