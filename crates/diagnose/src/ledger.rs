//! The ledger: every second of a run's wall time in exactly one account, with what it rests on.
//!
//! Accounts claim time in order of how directly they are known: the loop's marked phases first
//! (what a phase covers is never blamed on anything else), then its timed waits for data (those
//! before its first step are start-up's, as the loop's own figures count them), then start-up
//! before the first step and the time after the last, then a stall's pauses. What is
//! left of the loop is split by the GPU's own reading: the share in which a kernel ran is GPU
//! work, the rest goes to the inferred finding that explains it, or stays unexplained.

use serde::Serialize;

use crate::{Basis, Finding, FindingId, Run, round};

/// One account of the wall time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Account {
    /// What kind of time: `phase`, `data_wait`, `startup_data_wait`, `startup_before_cuda`,
    /// `startup_to_first_step`, `startup`, `stall`, `gpu_work`, `gpu_others`, `no_gpu`, `host_side`, `input_inferred`,
    /// `transfer`, `after_loop_data_wait`, `after_loop`, `unexplained`.
    pub account: &'static str,
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
    pub fn seconds(&self, account: &str) -> f64 {
        self.accounts.iter().filter(|a| a.account == account).map(|a| a.seconds).sum()
    }

    /// The share of the wall time in the accounts of one kind, 0 to 1.
    pub fn share(&self, account: &str) -> f64 {
        self.seconds(account) / self.wall_s.max(1e-9)
    }
}

/// Sorted, disjoint `[start, end]` stretches.
type Spans = Vec<[f64; 2]>;

/// Sorts and merges overlapping stretches, each clipped to `[lo, hi]`.
pub(crate) fn merged(mut spans: Vec<[f64; 2]>, lo: f64, hi: f64) -> Spans {
    spans.retain_mut(|s| {
        *s = [s[0].max(lo), s[1].min(hi)];
        s[1] > s[0]
    });
    spans.sort_by(|a, b| a[0].total_cmp(&b[0]));
    let mut out: Spans = Vec::with_capacity(spans.len());
    for s in spans {
        match out.last_mut() {
            Some(last) if s[0] <= last[1] => last[1] = last[1].max(s[1]),
            _ => out.push(s),
        }
    }
    out
}

/// Whether `t` lies in one of `spans` (sorted, disjoint).
pub(crate) fn covers(spans: &[[f64; 2]], t: f64) -> bool {
    let i = spans.partition_point(|s| s[1] <= t);
    spans.get(i).is_some_and(|s| t >= s[0])
}

/// `spans` less `taken`, both sorted and disjoint.
fn minus(spans: &[[f64; 2]], taken: &[[f64; 2]]) -> Spans {
    let mut out = Vec::new();
    let mut j = 0;
    for s in spans {
        let mut start = s[0];
        while j < taken.len() && taken[j][1] <= start {
            j += 1;
        }
        let mut k = j;
        while k < taken.len() && taken[k][0] < s[1] {
            if taken[k][0] > start {
                out.push([start, taken[k][0]]);
            }
            start = start.max(taken[k][1]);
            k += 1;
        }
        if start < s[1] {
            out.push([start, s[1]]);
        }
    }
    out
}

pub(crate) fn total(spans: &[[f64; 2]]) -> f64 {
    spans.iter().map(|s| s[1] - s[0]).sum()
}

/// Claims time for accounts, first come first served.
struct Book {
    wall: [f64; 2],
    taken: Spans,
    accounts: Vec<Account>,
}

impl Book {
    /// Gives `account` what of `spans` is not yet claimed; returns those stretches.
    fn claim(
        &mut self,
        account: &'static str,
        label: &str,
        basis: Basis,
        evidence: &str,
        spans: Vec<[f64; 2]>,
    ) -> Spans {
        let free = minus(&merged(spans, self.wall[0], self.wall[1]), &self.taken);
        let seconds = total(&free);
        if seconds > 0.0 {
            self.add(account, label, basis, evidence, seconds);
            let mut all = std::mem::take(&mut self.taken);
            all.extend_from_slice(&free);
            self.taken = merged(all, self.wall[0], self.wall[1]);
        }
        free
    }

    /// Adds seconds that were split off claimed time (no new time is claimed).
    fn add(&mut self, account: &'static str, label: &str, basis: Basis, evidence: &str, seconds: f64) {
        if seconds > 0.0 {
            match self.accounts.iter_mut().find(|a| a.account == account && a.label == label) {
                Some(a) => a.seconds += seconds,
                None => self.accounts.push(Account {
                    account,
                    label: label.to_owned(),
                    seconds,
                    share: 0.0,
                    basis,
                    evidence: evidence.to_owned(),
                    finding: None,
                    finding_gpu: None,
                }),
            }
        }
    }
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

/// The GPU's kernel time over some stretches: the job's own, and other processes'.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Busy {
    /// Seconds in which the job's kernels ran.
    pub job_s: f64,
    /// Seconds in which another process's kernels ran, by its SM share.
    pub others_s: f64,
    /// Whether another process was listed computing beside the job where per-process SM use was
    /// not given: its kernels are counted as the job's.
    pub others_untold: bool,
}

/// How the GPU's time in `spans` (sorted, disjoint) went, by GPU-Util: a sample covers the
/// interval since the one before it. Where a process outside the job shares the GPU, the job's
/// part is its processes' SM share (NVML's per-process utilization). Time no sample covers goes
/// at the mean rate.
pub(crate) fn busy_seconds(g: &crate::GpuSeries, spans: &[[f64; 2]]) -> Option<Busy> {
    use gpulse_model::GpuProcessClass::{Foreign, Tree};
    let (mut b, mut known) = (Busy::default(), 0.0);
    let mut j = 0;
    for i in 1..g.t_s.len() {
        let Some(u) = g.util_pct[i] else { continue };
        let (a, e) = (g.t_s[i - 1], g.t_s[i]);
        while j < spans.len() && spans[j][1] <= a {
            j += 1;
        }
        let overlap: f64 =
            spans[j..].iter().take_while(|s| s[0] < e).map(|s| (s[1].min(e) - s[0].max(a)).max(0.0)).sum();
        let listing = g.processes.get(i).map_or(&[][..], |l| l.as_slice());
        let mut job = u;
        if listing.iter().any(|p| p.class == Some(Foreign)) {
            if listing.iter().all(|p| p.sm_util_pct.is_some()) {
                let sm = |class| listing.iter().filter(move |p| p.class == Some(class)).filter_map(|p| p.sm_util_pct);
                // GPU-Util split by the processes' SM figures: those read tiny kernels as 0–1 %,
                // so only their ratio says whose the time was; another process at that floor
                // took none of it.
                let (mine, theirs) = (sm(Tree).sum::<u32>() as f64, sm(Foreign).sum::<u32>() as f64);
                if theirs > 1.0 {
                    job = u * mine / (mine + theirs);
                    b.others_s += overlap * (u - job) / 100.0;
                }
            } else {
                b.others_untold = true;
            }
        }
        b.job_s += overlap * job / 100.0;
        known += overlap;
    }
    (known > 0.0).then(|| {
        let scale = total(spans) / known;
        Busy { job_s: b.job_s * scale, others_s: b.others_s * scale, ..b }
    })
}

impl FindingId {
    /// The account and its label for the GPU's idle time inside the loop that this finding, when
    /// inferred, explains; `None` for a finding that explains no idle time.
    fn idle_account(self) -> Option<(&'static str, &'static str)> {
        use FindingId::*;
        match self {
            InputBound => Some(("input_inferred", "waiting for data, by the GPU's pattern")),
            TransferBound => Some(("transfer", "copies between the host and the GPU")),
            HostSaturated => Some(("host_saturated", "the GPU idle while the host's CPU was saturated")),
            ProcessBound => Some(("host_side", "the training process on the host (data loading or Python)")),
            HostBound => Some(("host_side", "host-side work in each step (launches, Python, synchronizations)")),
            UtilMisleading | GpuImbalance | Healthy | TensorIdle | Oom | MemoryPressure | MemoryGrowth
            | MarkedPhase | CheckpointWrites | UnexplainedTime | Startup | EpochRestart | PeriodicStall
            | Throttling | IdleHolder | ForeignProcess | GpuShared | CpuOversubscribed | DataParallel
            | DeviceMisbinding | WorkerMemory | GpuLost | HostOom | NcclTimeout | NcclError | DataloaderKilled
            | Xid | GpuResetPending | NvlinkUnused | HostPython | GilContention | SleepInLoop | NetworkWait
            | DiskWait | IpcWait | LockWait | MainThreadBlocked => None,
        }
    }

    /// The account that holds what this finding, on `basis`, costs: the time it measured, or a
    /// stall's pauses. `None` where its cost is not an account of its own.
    pub(crate) fn own_account(self, basis: Basis) -> Option<&'static str> {
        use FindingId::*;
        let measured = basis == Basis::Measured;
        match self {
            InputBound => measured.then_some("data_wait"),
            TransferBound => measured.then_some("transfer"),
            PeriodicStall => Some("stall"),
            GpuShared => Some("gpu_others"),
            ProcessBound | HostBound | HostSaturated | UtilMisleading | GpuImbalance | Healthy | TensorIdle | Oom
            | MemoryPressure | MemoryGrowth | MarkedPhase | CheckpointWrites | UnexplainedTime | Startup
            | EpochRestart | Throttling | IdleHolder | ForeignProcess | CpuOversubscribed | DataParallel
            | DeviceMisbinding | WorkerMemory | GpuLost | HostOom | NcclTimeout | NcclError | DataloaderKilled
            | Xid | GpuResetPending | NvlinkUnused | HostPython | GilContention | SleepInLoop | NetworkWait
            | DiskWait | IpcWait | LockWait | MainThreadBlocked => None,
        }
    }
}

/// What the GPU's idle time inside the loop goes to: the inferred finding that explains it, and
/// the share of the time it says the GPU lost.
fn idle_account(findings: &[Finding], gpu: u32) -> Option<(&'static str, &'static str, String, f64, FindingId)> {
    let (f, (account, label)) = findings
        .iter()
        .filter(|f| f.gpu == Some(gpu) && f.basis == Basis::Inferred)
        .find_map(|f| Some((f, f.id.idle_account()?)))?;
    let how = format!(
        "the GPU's idle time inside the loop, explained by {} ({})",
        f.id,
        f.lost_share_basis.unwrap_or("GPU-Util")
    );
    Some((account, label, how, f.lost_share.unwrap_or(0.0), f.id))
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
            (Some([context_s.filter(|c| *c > a && *c < b).unwrap_or(a), b]), false)
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
/// inferred causes of idle time come from them).
pub fn ledger(run: &Run, findings: &[Finding]) -> Ledger {
    let end = end_s(run);
    let mut book = Book { wall: [0.0, end], taken: Vec::new(), accounts: Vec::new() };
    // The loop's own phases: each name on its own, the longest first.
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
        book.claim("phase", name, Basis::Measured, "the loop's own phase marks", spans);
    }
    // The loop: from its first step to its last, else the GPU's active window. Its waits are
    // the ones the loop's own figures count (the share the steps line gives); a wait before it
    // (the first batch, workers starting) is start-up, one after it is the loop's end.
    let (loop_s, marked) = loop_window(run);
    let [lo, hi] = loop_s.unwrap_or([0.0, end]);
    let outside = if marked {
        "the loop's timed waits, before its first step mark"
    } else {
        "the loop's timed waits, before the GPU's first busy stretch"
    };
    book.claim(
        "startup_data_wait",
        "start-up: waiting for the first batch",
        Basis::Measured,
        outside,
        merged(run.data_waits_s.clone(), 0.0, lo),
    );
    let outside = if marked {
        "the loop's timed waits, after its last step mark"
    } else {
        "the loop's timed waits, after the GPU's last busy stretch"
    };
    book.claim(
        "after_loop_data_wait",
        "after the loop: waiting for data",
        Basis::Measured,
        outside,
        merged(run.data_waits_s.clone(), hi, end),
    );
    // Exact stretches first; a fast loop's folded waits are placed only roughly, so what of them
    // falls on the copies between them is still theirs, taken from the loop's own time instead.
    let folded = merged(run.folded_waits_s.clone(), lo, hi);
    let exact = minus(&merged(run.data_waits_s.clone(), lo, hi), &folded);
    const WAITS: &str = "the loop's timed waits for each batch between its first step mark and its last";
    book.claim("data_wait", "waiting for data", Basis::Measured, WAITS, exact.clone());
    let copies = book.claim(
        "transfer",
        "host-to-device copies",
        Basis::Measured,
        "the loop's timed copies to the GPU (--instrument)",
        loop_copies(run),
    );
    book.claim("data_wait", "waiting for data", Basis::Measured, WAITS, folded.clone());
    let mut interleaved = copies;
    interleaved.extend(exact);
    let displaced_s = total(&minus(&folded, &minus(&folded, &merged(interleaved, 0.0, end))));
    book.add("data_wait", "waiting for data", Basis::Measured, WAITS, displaced_s);
    let g = primary(run);
    // Without marks, the loop cannot have begun before the job's CUDA context (a GPU too idle
    // for an active window has the whole series as one).
    let context_s = crate::rules::startup::first_context_s(run);
    let basis = if marked { Basis::Measured } else { Basis::Inferred };
    if let Some([first, last]) = loop_s {
        let evidence = if marked { "before the loop's first step mark" } else { "before the GPU's first busy stretch" };
        let context_s = if marked { crate::rules::startup::context_before(run, first) } else { context_s };
        match context_s.filter(|c| *c > 0.0 && *c <= first) {
            Some(c) => {
                book.claim(
                    "startup_before_cuda",
                    "start-up before the CUDA context (imports, data set-up)",
                    basis,
                    evidence,
                    vec![[0.0, c]],
                );
                book.claim(
                    "startup_to_first_step",
                    "start-up from the CUDA context to the first step",
                    basis,
                    evidence,
                    vec![[c, first]],
                );
            }
            None => {
                book.claim("startup", "start-up", basis, evidence, vec![[0.0, first]]);
            }
        }
        let after = if marked { "after the loop's last step mark" } else { "after the GPU's last busy stretch" };
        book.claim("after_loop", "after the loop (saving, shutdown)", basis, after, vec![[last, end]]);
        // The stalls of the GPU the ledger reads (a data-parallel job's ranks stall together).
        for f in findings
            .iter()
            .filter(|f| f.id == FindingId::PeriodicStall && (f.gpu.is_none() || f.gpu == g.map(|g| g.gpu)))
        {
            let label = stall_label(&f.title);
            book.claim("stall", &label, f.basis, "the GPU's idle pauses the stall rule found", f.pauses_s.clone());
        }
        // The GPU idle while the job writes in bulk: saving a checkpoint, by its I/O counters.
        if let Some(g) = g {
            let writes = bulk_writes_gpu_idle(run, g).into_iter().map(|w| w.0).collect();
            book.claim(
                "storage_write",
                "writing to storage with the GPU idle (checkpoints)",
                Basis::Inferred,
                "the job's storage writes (/proc/PID/io) at 50 MB/s or more while GPU-Util stayed at 10 % or less",
                writes,
            );
        }
        // What is left of the loop: the GPU's work, and its idle time. Kernels run while the
        // loop waits for its next batch, so the GPU's busy time is counted over the loop's waits
        // as well, and fills what is left first.
        let waits = merged(run.data_waits_s.clone(), first, last);
        let rest = book.claim("loop", "", basis, "", vec![[first, last]]);
        book.accounts.retain(|a| a.account != "loop");
        let rest_s = (total(&rest) - displaced_s).max(0.0);
        let mut working = rest.clone();
        working.extend(waits);
        let working = merged(working, first, last);
        let busy = g.and_then(|g| busy_seconds(g, &working)).unwrap_or_default();
        let busy_s = busy.job_s.min(rest_s);
        // A finding that explains the idle time measures it its own way (the SMs' idle time under
        // copies): the larger estimate stands.
        let explained = g.and_then(|g| idle_account(findings, g.gpu));
        let idle_s = match &explained {
            Some(e) => (rest_s - busy_s).max(e.3 * rest_s).min(rest_s),
            None => rest_s - busy_s,
        };
        let evidence = if busy.others_untold {
            "GPU-Util over the loop's steps and waits, up to the steps' own time; it counts another process's kernels too, as NVML gave no per-process SM use"
        } else if busy.others_s > 0.0 {
            "the job's processes' SM share (NVML per-process utilization) over the loop's steps and waits"
        } else {
            "GPU-Util over the loop's steps and waits, up to the steps' own time"
        };
        book.add("gpu_work", "the loop's steps, the GPU running kernels", Basis::Measured, evidence, rest_s - idle_s);
        // Another process's kernels on the job's GPU: the job's own time lost to sharing it.
        let others_s = busy.others_s.min(idle_s);
        book.add(
            "gpu_others",
            "the GPU running another process's kernels",
            Basis::Measured,
            "the SM share of processes outside the job (NVML per-process utilization), inside the loop",
            others_s,
        );
        let idle_s = idle_s - others_s;
        match explained {
            Some((account, label, evidence, _, id)) => {
                book.add(account, label, Basis::Inferred, &evidence, idle_s);
                if let Some(a) = book.accounts.iter_mut().find(|a| a.account == account && a.label == label) {
                    a.finding = Some(id);
                    a.finding_gpu = g.map(|g| g.gpu);
                }
            }
            // Steps and their waits both timed: the rest of a step with the GPU idle is the
            // loop's own work on the host, by elimination.
            None if g.is_some() && run.steps.as_ref().is_some_and(|s| s.waited_s.is_some()) => book.add(
                "host_side",
                "host-side work in each step (launches, Python, synchronizations)",
                Basis::Inferred,
                "the loop's timed steps less their timed waits, with the GPU idle: host-side by elimination",
                idle_s,
            ),
            None if g.is_some() => book.add(
                "unexplained",
                "unexplained: the GPU idle inside the loop",
                Basis::Inferred,
                "no mark or finding explains it",
                idle_s,
            ),
            None => book.add(
                "unexplained",
                "unexplained: the loop's own work (no GPU was read)",
                Basis::Inferred,
                "no mark or GPU sample explains it",
                idle_s,
            ),
        }
    }
    let left = total(&minus(&[[0.0, end]], &book.taken));
    // Without a loop (a recording of the machine, a job that marks nothing) there is no
    // "outside" of it.
    match (loop_s, run.job_gpus()) {
        (None, Some(j)) if j.is_empty() => book.add(
            "no_gpu",
            "the job used no GPU",
            Basis::Measured,
            "no process of the job in any GPU's process listing",
            left,
        ),
        (Some(_), _) => book.add(
            "unexplained",
            "unexplained: outside the loop",
            Basis::Inferred,
            "no mark or sample places it",
            left,
        ),
        (None, _) => book.add(
            "unexplained",
            "unexplained: no training loop seen",
            Basis::Inferred,
            "no mark or sample places it",
            left,
        ),
    }
    let accounts = book
        .accounts
        .into_iter()
        .map(|mut a| {
            a.share = round(a.seconds / end.max(1e-9), 4);
            a.seconds = round(a.seconds, 3);
            a
        })
        .collect();
    Ledger { wall_s: round(end, 3), accounts }
}

/// A stall's cause as its title states it.
fn stall_label(title: &str) -> String {
    match title.split_once("): ") {
        Some((_, why)) => format!("stalls: {why}"),
        None => "stalls, cause unknown".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 100 s sampled each second: the context at 5 s, the first step at 10 s, the last at 90 s;
    /// evaluation from 30 to 50 s (the GPU idle in it), 1 s of data wait in each 10 s of steps
    /// outside it, GPU-Util 80 % elsewhere in the loop.
    fn marked() -> Run {
        let util: Vec<f64> = (0..=100).map(|t| if (31..=50).contains(&t) { 0.0 } else { 80.0 }).collect();
        let mut g = crate::rules::testing::gpu(0, 1.0, &util);
        g.processes = (0..=100)
            .map(|t| std::sync::Arc::new(if t >= 5 { vec![crate::rules::testing::holder(7, 1.0)] } else { Vec::new() }))
            .collect();
        let mut r = crate::rules::testing::run(vec![g]);
        r.phases_s = vec![("eval".into(), [30.0, 50.0])];
        r.data_waits_s = [10.0, 20.0, 50.0, 60.0, 70.0, 80.0].iter().map(|t| [*t, t + 1.0]).collect();
        r.steps = Some(crate::Steps {
            pid: 7,
            ranks: 1,
            marked: 81,
            timed: 80,
            window_s: [10.0, 90.0],
            step_s: Vec::new(),
            data_wait_s: Vec::new(),
            waited_s: Some(6.0),
        });
        r
    }

    #[test]
    fn an_idle_gpu_has_no_loop_to_be_idle_in() {
        // 60 s of an idle GPU: its active window falls back to the whole series, which is no
        // loop (it said "the GPU idle inside the loop").
        let l = ledger(&crate::rules::testing::run(vec![crate::rules::testing::steady(0, 0.0, 61)]), &[]);
        let labels: Vec<&str> = l.accounts.iter().map(|a| a.label.as_str()).collect();
        assert_eq!(labels, ["unexplained: no training loop seen"], "{l:#?}");
        // A job holding the idle GPU (a loader starved by its storage) runs a loop on it.
        let held = crate::rules::testing::with_processes(
            crate::rules::testing::steady(0, 0.0, 61),
            vec![crate::rules::testing::holder(7, 1.0)],
        );
        let l = ledger(&crate::rules::testing::run(vec![held]), &[]);
        assert!(l.accounts.iter().all(|a| !a.label.contains("no training loop")), "{l:#?}");
        // An idle machine with no job has no loop to mark: no unexplained_time finding, where
        // the held GPU's idle loop has one.
        let ids = |r: &Run| crate::diagnose_run(r).iter().map(|f| f.id).collect::<Vec<_>>();
        let idle = crate::rules::testing::run(vec![crate::rules::testing::steady(0, 0.0, 61)]);
        assert!(!ids(&idle).contains(&FindingId::UnexplainedTime), "{:?}", ids(&idle));
        let held = crate::rules::testing::with_processes(
            crate::rules::testing::steady(0, 0.0, 61),
            vec![crate::rules::testing::holder(7, 1.0)],
        );
        assert!(ids(&crate::rules::testing::run(vec![held])).contains(&FindingId::UnexplainedTime));
        // At 30 % busy, the same series is a loop.
        let l = ledger(&crate::rules::testing::run(vec![crate::rules::testing::steady(0, 30.0, 61)]), &[]);
        assert!(l.accounts.iter().all(|a| !a.label.contains("no training loop")), "{l:#?}");
    }

    #[test]
    fn every_second_is_in_one_account() {
        let l = ledger(&marked(), &[]);
        assert_eq!(l.wall_s, 100.0);
        let sum: f64 = l.accounts.iter().map(|a| a.seconds).sum();
        assert!((sum - 100.0).abs() < 1e-6, "{l:#?}");
        let secs = |a: &str| l.seconds(a);
        assert_eq!((secs("phase"), secs("data_wait")), (20.0, 6.0));
        assert_eq!((secs("startup_before_cuda"), secs("startup_to_first_step"), secs("after_loop")), (5.0, 5.0, 10.0));
        // The loop's other 54 s: GPU-Util 80 % over its 60 s of steps and waits is 48 s of
        // kernels; with steps and waits timed, the rest is the loop's host-side work.
        assert!((secs("gpu_work") - 48.0).abs() < 1e-6, "{l:#?}");
        assert!((secs("host_side") - 6.0).abs() < 1e-6, "{l:#?}");
        // Waits not timed: nothing places the rest.
        let mut untimed = marked();
        untimed.steps.as_mut().unwrap().waited_s = None;
        let l = ledger(&untimed, &[]);
        assert!((l.seconds("unexplained") - 6.0).abs() < 1e-6 && l.seconds("host_side") == 0.0, "{l:#?}");
        assert_eq!(l.accounts.iter().find(|a| a.account == "phase").map(|a| a.label.as_str()), Some("eval"));
    }

    #[test]
    fn a_marked_phase_is_never_blamed_on_anything_else() {
        let r = marked();
        let (findings, l) = crate::diagnose_with_ledger(&r);
        let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
        let share = |id: FindingId| findings.iter().find(|f| f.id == id).and_then(|f| f.lost_share);
        assert_eq!(share(FindingId::MarkedPhase), Some(0.2), "{ids:?}");
        // The evaluation's idle GPU is no stall and no starved loop: the rules read the run
        // without it. The 6 s of host-side time inside the steps, by elimination, are named, and
        // cost only their own account.
        assert!(!ids.iter().any(|i| matches!(*i, "periodic_stall" | "input_bound")), "{ids:?}");
        assert_eq!(share(FindingId::HostBound), Some(0.06), "{ids:?}");
        assert_eq!(l.seconds("stall"), 0.0);
    }

    #[test]
    fn minus_and_merged_are_interval_arithmetic() {
        assert_eq!(
            merged(vec![[3.0, 5.0], [0.0, 1.0], [0.5, 2.0], [9.0, 12.0]], 0.0, 10.0),
            vec![[0.0, 2.0], [3.0, 5.0], [9.0, 10.0]]
        );
        assert_eq!(minus(&[[0.0, 10.0]], &[[1.0, 2.0], [4.0, 5.0]]), vec![[0.0, 1.0], [2.0, 4.0], [5.0, 10.0]]);
        assert_eq!(minus(&[[0.0, 1.0], [2.0, 3.0]], &[[0.5, 2.5]]), vec![[0.0, 0.5], [2.5, 3.0]]);
        assert!(minus(&[[1.0, 2.0]], &[[0.0, 5.0]]).is_empty());
    }

    /// Only the job's own causes take the GPU's idle time or an account of their own, and which
    /// ones is pinned here: a new finding that claims time must say so.
    #[test]
    fn the_findings_that_claim_an_account() {
        let claiming = |claims: &dyn Fn(FindingId) -> bool| {
            FindingId::ALL.iter().copied().filter(|id| claims(*id)).map(FindingId::as_str).collect::<Vec<_>>()
        };
        let idle = claiming(&|id| id.idle_account().is_some());
        assert_eq!(idle, ["input_bound", "process_bound", "host_bound", "transfer_bound", "host_saturated"]);
        assert_eq!(
            claiming(&|id| id.own_account(Basis::Measured).is_some()),
            ["input_bound", "transfer_bound", "periodic_stall", "gpu_shared"]
        );
        assert_eq!(claiming(&|id| id.own_account(Basis::Inferred).is_some()), ["periodic_stall", "gpu_shared"]);
        let all = claiming(&|id| id.idle_account().is_some() || id.own_account(Basis::Measured).is_some());
        assert!(all.iter().all(|n| n.parse::<FindingId>().is_ok_and(FindingId::is_trouble)), "{all:?}");
    }
}
