//! One function per family of accounts, called in the order they claim time (see the module's
//! doc): what one claims, a later one cannot.

use super::AccountKind::{self as K};
use super::book::Book;
use super::busy::busy_seconds;
use crate::main_thread::startup::labelled;
use crate::run::bulk_writes_gpu_idle;
use crate::run::loop_copies;
use crate::run::{merged, minus, total};
use crate::{Basis, Finding, FindingId, GpuSeries, Run};

/// The loop as the ledger places it.
pub(super) struct Loop {
    /// `[first, last]` seconds; `None` where no loop was seen.
    pub window_s: Option<[f64; 2]>,
    /// Whether step marks place it (else the GPU's active window does).
    pub marked: bool,
    /// The wall time's end, seconds.
    pub end_s: f64,
}

impl Loop {
    /// Measured where step marks place the loop, inferred where the GPU's activity does.
    fn basis(&self) -> Basis {
        if self.marked { Basis::Measured } else { Basis::Inferred }
    }
}

/// The loop's own phases: each name on its own, the longest first.
pub(super) fn phases(book: &mut Book, run: &Run) {
    let mut names: Vec<(&str, f64)> = Vec::new();
    for (name, span) in &run.phases_s {
        match names.iter_mut().find(|n| n.0 == name) {
            Some(n) => n.1 += span[1] - span[0],
            None => names.push((name, span[1] - span[0])),
        }
    }
    names.sort_by(|a, b| b.1.total_cmp(&a.1));
    for (name, _) in names {
        let spans = run.phases_s.iter().filter(|p| p.0 == name).map(|p| p.1).collect();
        book.claim(K::Phase, name, Basis::Measured, "the loop's own phase marks", spans);
    }
}

/// The unexplained accounts' labels that the main thread's samples can name: the loop's own idle
/// time, and the whole run's where no loop was seen.
pub(crate) const GPU_IDLE_IN_LOOP: &str = "unexplained: the GPU idle inside the loop";
pub(crate) const LOOP_WITHOUT_GPU: &str = "unexplained: the loop's own work (no GPU was read)";
pub(crate) const NO_LOOP: &str = "unexplained: no training loop seen";

const WAITS: &str = "the loop's timed waits for each batch between its first step mark and its last";
const WAITING: &str = "waiting for data";

/// The loop's timed waits, and its timed copies among them. The waits the loop's own figures
/// count (the share the steps line gives) are its; one before it (the first batch, workers
/// starting) is start-up, one after it is the loop's end. Returns the seconds of folded waits
/// that fell on copies: still waits, taken from the loop's own time.
pub(super) fn waits(book: &mut Book, run: &Run, at: &Loop) -> f64 {
    let [lo, hi] = at.window_s.unwrap_or([0.0, at.end_s]);
    let outside = if at.marked {
        "the loop's timed waits, before its first step mark"
    } else {
        "the loop's timed waits, before the GPU's first busy stretch"
    };
    let before = merged(run.data_waits_s.clone(), 0.0, lo);
    book.claim(K::StartupDataWait, "start-up: waiting for the first batch", Basis::Measured, outside, before);
    let outside = if at.marked {
        "the loop's timed waits, after its last step mark"
    } else {
        "the loop's timed waits, after the GPU's last busy stretch"
    };
    let after = merged(run.data_waits_s.clone(), hi, at.end_s);
    book.claim(K::AfterLoopDataWait, "after the loop: waiting for data", Basis::Measured, outside, after);
    // Exact stretches first; a fast loop's folded waits are placed only roughly, so what of them
    // falls on the copies between them is still theirs, taken from the loop's own time instead.
    let folded = merged(run.folded_waits_s.clone(), lo, hi);
    let exact = minus(&merged(run.data_waits_s.clone(), lo, hi), &folded);
    book.claim(K::DataWait, WAITING, Basis::Measured, WAITS, exact.clone());
    let copies = book.claim(
        K::Transfer,
        "host-to-device copies",
        Basis::Measured,
        "the loop's timed copies to the GPU (--instrument)",
        loop_copies(run),
    );
    book.claim(K::DataWait, WAITING, Basis::Measured, WAITS, folded.clone());
    let mut interleaved = copies;
    interleaved.extend(exact);
    let displaced_s = total(&minus(&folded, &minus(&folded, &merged(interleaved, 0.0, at.end_s))));
    book.add(K::DataWait, WAITING, Basis::Measured, WAITS, displaced_s);
    displaced_s
}

/// Start-up before the loop's first step, split at the job's CUDA context where it came first.
pub(super) fn startup(book: &mut Book, run: &Run, at: &Loop, first: f64) {
    let (basis, evidence) = match at.marked {
        true => (Basis::Measured, "before the loop's first step mark"),
        false => (Basis::Inferred, "before the GPU's first busy stretch"),
    };
    match crate::run::startup_context_s(run, first, at.marked) {
        Some(c) => {
            let label = labelled(run, "start-up before the CUDA context (imports, data set-up)", [0.0, c]);
            book.claim(K::StartupBeforeCuda, &label, basis, evidence, vec![[0.0, c]]);
            let label = labelled(run, super::TO_FIRST_STEP, [c, first]);
            book.claim(K::StartupToFirstStep, &label, basis, evidence, vec![[c, first]]);
        }
        None => {
            book.claim(K::Startup, &labelled(run, "start-up", [0.0, first]), basis, evidence, vec![[0.0, first]]);
        }
    }
}

/// The time after the loop's last step: saving, shutdown.
pub(super) fn after_loop(book: &mut Book, at: &Loop, last: f64) {
    let evidence = if at.marked { "after the loop's last step mark" } else { "after the GPU's last busy stretch" };
    book.claim(K::AfterLoop, "after the loop (saving, shutdown)", at.basis(), evidence, vec![[last, at.end_s]]);
}

/// The stalls of the GPU the ledger reads (a data-parallel job's ranks stall together).
pub(super) fn stalls(book: &mut Book, findings: &[Finding], g: Option<&GpuSeries>) {
    for f in
        findings.iter().filter(|f| f.id == FindingId::PeriodicStall && (f.gpu.is_none() || f.gpu == g.map(|g| g.gpu)))
    {
        let label = stall_label(&f.title);
        book.claim(K::Stall, &label, f.basis, "the GPU's idle pauses the stall rule found", f.pauses_s.clone());
    }
}

/// The GPU idle while the job writes in bulk: saving a checkpoint, by its I/O counters.
pub(super) fn storage_writes(book: &mut Book, run: &Run, g: &GpuSeries) {
    // The counters say how much a second wrote, not when in it: where the main thread was
    // sampled, its samples say (a read right after a write in the same second is the read's).
    let writes =
        crate::main_thread::writing_within(run, bulk_writes_gpu_idle(run, g).into_iter().map(|w| w.0).collect());
    book.claim(
        K::StorageWrite,
        "writing to storage with the GPU idle (checkpoints)",
        Basis::Inferred,
        "the job's storage writes (/proc/PID/io) at 50 MB/s or more while GPU-Util stayed at 10 % or less",
        writes,
    );
}

/// What is left of the loop: the GPU's work, another process's kernels, and its idle time, which
/// goes to the inferred finding that explains it, to host-side work by elimination, or stays
/// unexplained. Kernels run while the loop waits for its next batch, so the GPU's busy time is
/// counted over the loop's waits as well, and fills what is left first.
pub(super) fn loop_rest(
    book: &mut Book,
    run: &Run,
    findings: &[Finding],
    g: Option<&GpuSeries>,
    [first, last]: [f64; 2],
    displaced_s: f64,
) {
    let waits = merged(run.data_waits_s.clone(), first, last);
    let rest = book.take(vec![[first, last]]);
    let rest_s = (total(&rest) - displaced_s).max(0.0);
    let mut working = rest;
    working.extend(waits);
    let working = merged(working, first, last);
    let busy = g.and_then(|g| busy_seconds(g, &working)).unwrap_or_default();
    let busy_s = busy.job_s.min(rest_s);
    // A finding that explains the idle time measures it its own way (the SMs' idle time under
    // copies): the larger estimate stands.
    let explained = g.and_then(|g| explaining(findings, g.gpu));
    let idle_s = match &explained {
        Some(e) => (rest_s - busy_s).max(e.share * rest_s).min(rest_s),
        None => rest_s - busy_s,
    };
    let evidence = if busy.others_untold {
        "GPU-Util over the loop's steps and waits, up to the steps' own time; it counts another process's kernels too, as NVML gave no per-process SM use"
    } else if busy.others_s > 0.0 {
        "the job's processes' SM share (NVML per-process utilization) over the loop's steps and waits"
    } else {
        "GPU-Util over the loop's steps and waits, up to the steps' own time"
    };
    book.add(K::GpuWork, "the loop's steps, the GPU running kernels", Basis::Measured, evidence, rest_s - idle_s);
    // Another process's kernels on the job's GPU: the job's own time lost to sharing it.
    let others_s = busy.others_s.min(idle_s);
    book.add(
        K::GpuOthers,
        "the GPU running another process's kernels",
        Basis::Measured,
        "the SM share of processes outside the job (NVML per-process utilization), inside the loop",
        others_s,
    );
    idle(book, run, g, explained, idle_s - others_s);
}

/// The GPU's idle time inside the loop, `idle_s`: the inferred cause's account where a finding
/// explains it, else host-side work or unexplained time.
fn idle(book: &mut Book, run: &Run, g: Option<&GpuSeries>, explained: Option<Explained>, idle_s: f64) {
    match explained {
        Some(e) => {
            book.add(e.account, e.label, Basis::Inferred, &e.evidence, idle_s);
            if let Some(a) = book.accounts.iter_mut().find(|a| a.account == e.account && a.label == e.label) {
                a.finding = Some(e.id);
                a.finding_gpu = g.map(|g| g.gpu);
            }
        }
        // Steps and their waits both timed: the rest of a step with the GPU idle is the
        // loop's own work on the host, by elimination.
        None if g.is_some() && run.steps.as_ref().is_some_and(|s| s.waited_s.is_some()) => book.add(
            K::HostSide,
            "host-side work in each step (launches, Python, synchronizations)",
            Basis::Inferred,
            "the loop's timed steps less their timed waits, with the GPU idle: host-side by elimination",
            idle_s,
        ),
        None if g.is_some() => {
            book.add(K::Unexplained, GPU_IDLE_IN_LOOP, Basis::Inferred, "no mark or finding explains it", idle_s)
        }
        None => {
            book.add(K::Unexplained, LOOP_WITHOUT_GPU, Basis::Inferred, "no mark or GPU sample explains it", idle_s)
        }
    }
}

/// What no other account took. Without a loop (a recording of the machine, a job that marks
/// nothing) there is no "outside" of it.
pub(super) fn unexplained(book: &mut Book, run: &Run, at: &Loop) {
    let left = book.left_s();
    match (at.window_s, run.job_gpus()) {
        (None, Some(j)) if j.is_empty() => book.add(
            K::NoGpu,
            "the job used no GPU",
            Basis::Measured,
            "no process of the job in any GPU's process listing",
            left,
        ),
        (Some(_), _) => book.add(
            K::Unexplained,
            "unexplained: outside the loop",
            Basis::Inferred,
            "no mark or sample places it",
            left,
        ),
        (None, _) => book.add(K::Unexplained, NO_LOOP, Basis::Inferred, "no mark or sample places it", left),
    }
}

/// The inferred finding that explains the GPU's idle time inside the loop.
struct Explained {
    account: super::AccountKind,
    label: &'static str,
    evidence: String,
    /// The share of the time it says the GPU lost.
    share: f64,
    id: FindingId,
}

/// What the GPU's idle time inside the loop goes to: the inferred finding that explains it.
fn explaining(findings: &[Finding], gpu: u32) -> Option<Explained> {
    let (f, (account, label)) = findings
        .iter()
        .filter(|f| f.gpu == Some(gpu) && f.basis == Basis::Inferred)
        .find_map(|f| Some((f, f.id.idle_account()?)))?;
    let evidence = format!(
        "the GPU's idle time inside the loop, explained by {} ({})",
        f.id,
        f.cost.as_ref().map_or("GPU-Util", |c| c.basis)
    );
    let share = f.cost.as_ref().and_then(|c| c.own_share).unwrap_or(0.0);
    Some(Explained { account, label, evidence, share, id: f.id })
}

/// A stall's cause as its title states it.
fn stall_label(title: &str) -> String {
    match title.split_once("): ") {
        Some((_, why)) => format!("stalls: {why}"),
        None => "stalls, cause unknown".to_owned(),
    }
}
