//! What one sample's time is charged to: its cause, read from its state, library and line; and
//! what each cause gathers of the samples charged to it (`Part`).

use std::collections::HashMap;

use super::{Domain, ThreadState};
use crate::Run;

/// What a sample's stack says, worked out once per stack.
#[derive(Clone, Copy)]
pub(super) struct Facts {
    /// The line it is charged to.
    pub site: Option<u32>,
    /// Inside torch's own code (a module's forward, autograd, an optimizer): launching.
    pub in_torch: bool,
    /// Inside a wait `--instrument` timed: measured, not inferred.
    pub timed: bool,
    pub caller: Option<u32>,
    /// The site's function, numbered.
    pub function: Option<u32>,
    /// A wait on the GPU here drains its queue where the job can move it.
    pub drains: bool,
    /// Another library's function that the site calls.
    pub call: Option<u32>,
    /// Inside a backward pass's entry or an optimizer step: the training step's own line.
    pub step: bool,
}

/// What a part of the loop's idle time is: one cause, one finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Cause {
    /// The main thread's own CPU work in one function of the job's code, in torch's forward,
    /// backward and optimizer or in numpy: the function's lines add up, and the state and
    /// library that took most of it name it. Launching (inside torch's own code, Python and
    /// native alike) is one cause; the job's own work is two, its Python and its native code
    /// with the GIL released (numpy, a torch CPU op): their fixes differ.
    Cpu { function: Option<u32>, launching: bool, native: bool },
    /// The one line of native code that the process's other threads work for: a CPU op on CPU
    /// tensors, its torch, PIL and Python frames alike.
    CpuOp,
    /// A line that calls another library's function which launches GPU work of its own
    /// (transformers' `generate`, a metric's `update`) and runs no backward pass or optimizer
    /// step: its own cause, apart from the step's launching in the same function.
    Call(u32),
    /// A line that launches small ops and reads each result back as written (`.item()` per
    /// parameter): its waits on the GPU wait for its own ops, the GPU idle between them.
    ReadBack(u32),
    /// A wait whose cause is elsewhere (another thread holds the GIL, every core is taken):
    /// one, whatever the main thread was doing when it came to it.
    Held(ThreadState),
    /// The main thread's CPU work in a library with a fix of its own (the DataLoader, a
    /// tokenizer, logging, an import, `gc.collect()`...), Python and native alike.
    Library(Domain),
    /// Any other state, with its library.
    State(ThreadState, Option<Domain>),
}

impl Cause {
    /// `native_line`: whether the sample's line runs native code in most of its samples (the
    /// bytecode between a line's native calls is that line's, not the function's Python).
    pub(super) fn of(
        state: ThreadState,
        domain: Option<Domain>,
        function: Option<u32>,
        launching: bool,
        native_line: bool,
    ) -> Cause {
        match (state, domain) {
            (ThreadState::GilWait | ThreadState::CoreWait, _) => Cause::Held(state),
            // A pool's map or a child process: the wait and the pickling or spawning around it
            // are one call of the job's, with one fix.
            (_, Some(d @ (Domain::Pool | Domain::Subprocess))) => Cause::Library(d),
            (
                ThreadState::Python | ThreadState::Native,
                None | Some(Domain::Backward | Domain::Optimizer | Domain::HostMath),
            ) => Cause::Cpu { function, launching, native: !launching && native_line },
            (ThreadState::Python | ThreadState::Native, Some(d)) => Cause::Library(d),
            // Saving writes what it serialized: one cause, whose advice covers the write.
            (ThreadState::Disk, Some(d @ (Domain::Checkpoint | Domain::Serialize))) => Cause::Library(d),
            // numpy's or pandas' write waits on the disk as the job's own does, with one fix:
            // a step's `np.save` and its log's fsync are one wait.
            (ThreadState::Disk, Some(Domain::HostMath)) => Cause::State(state, None),
            _ => Cause::State(state, domain),
        }
    }
}

/// Rekeys the samples of each line that both launches (torch's ops under it) and waits on the
/// GPU as written (`.item()`, `.cpu()`): one cause per such line, its waits counted as its
/// launching (they wait for its own small ops, not for the step's queued work).
pub(super) fn read_back_lines(
    run: &Run,
    window: &[&super::Point],
    keyed: Vec<(Facts, ThreadState, Cause)>,
    on_gpu: bool,
) -> Vec<(Facts, ThreadState, Cause)> {
    if !on_gpu {
        return keyed;
    }
    // Per line, its seconds launching and waiting on the GPU.
    let mut seen: HashMap<u32, [f64; 2]> = HashMap::new();
    for (p, (facts, _, cause)) in window.iter().zip(&keyed) {
        let Some(site) = facts.site else { continue };
        let e = seen.entry(site).or_default();
        if matches!(cause, Cause::Cpu { launching: true, .. }) {
            e[0] += p.dur_s;
        } else if p.class.state == ThreadState::GpuSync {
            e[1] += p.dur_s;
        }
    }
    // A wait after each small op is about as long as its launch; a wait longer than the line's
    // launching is for real work queued on the GPU, and a rare one is the step's own sync.
    let lines: std::collections::HashSet<u32> = seen
        .into_iter()
        .filter(|(site, [launches, waits])| {
            *waits <= *launches
                && *waits >= READ_BACK_WAITS * *launches
                && run.stacks.frames.get(*site as usize).is_some_and(super::classify::syncs)
        })
        .map(|(site, _)| site)
        .collect();
    keyed
        .into_iter()
        .zip(window)
        .map(|((facts, state, cause), p)| match facts.site.filter(|s| lines.contains(s)) {
            Some(site) if p.class.state == ThreadState::GpuSync => (facts, ThreadState::Python, Cause::ReadBack(site)),
            Some(site) if matches!(cause, Cause::Cpu { launching: true, .. }) => (facts, state, Cause::ReadBack(site)),
            _ => (facts, state, cause),
        })
        .collect()
}

/// The cores that a process's threads other than its main thread kept busy over `span`, where
/// they kept at least [`OTHER_THREADS_CORES`]: the process's own CPU (its tree samples) less
/// the time its main thread's samples could have been on a CPU. Native code of torch's with
/// the GIL released is CPU work on CPU tensors where they do (the intra-op pool works for it),
/// and may be launching where they do not.
pub(super) fn other_threads_cores(run: &Run, pid: u32, pts: &[super::Point], [lo, hi]: [f64; 2]) -> Option<f64> {
    let cpu: Vec<f64> = run.main_cpu.get(&pid)?.iter().filter(|c| c.0 > lo && c.0 <= hi).map(|c| c.1).collect();
    if cpu.len() < 3 {
        return None;
    }
    let in_span = || pts.iter().filter(|p| p.t_s >= lo && p.t_s <= hi);
    let sampled: f64 = in_span().map(|p| p.dur_s).sum();
    let on_cpu = |s: ThreadState| matches!(s, ThreadState::Python | ThreadState::Native | ThreadState::GpuSync);
    let main: f64 = in_span().filter(|p| on_cpu(p.class.state)).map(|p| p.dur_s).sum::<f64>() / sampled.max(1e-9);
    let cores = cpu.iter().sum::<f64>() / cpu.len() as f64 / 100.0 - main.min(1.0);
    (cores >= OTHER_THREADS_CORES).then_some(cores)
}

/// The share of the loop beyond its cost that a cause's own time must take before the finding
/// says what the loop's own clock around it would read.
pub(super) const THREAD_BEYOND_COST: f64 = 0.1;

/// The share of a lock wait's samples in which another thread held the GIL before that thread
/// is named: a sample or two is a thread passing through.
pub(super) const HOLDER_SHARE: f64 = 0.2;

/// The least share of a line's launching that its waits on the GPU take before the line reads
/// each small op back ([`Cause::ReadBack`]): a quarter.
const READ_BACK_WAITS: f64 = 0.25;

/// Why a cause's thread time outran its cost, by its mechanism: what the GPU did meanwhile.
pub(super) fn overlap_words(launching: bool, domain: Option<Domain>, waits: bool) -> &'static str {
    match (launching, domain) {
        (true, _) => "the launches ran ahead of the GPU, which worked through its queue meanwhile",
        (_, Some(Domain::Allocator)) => {
            "a call that waits for the GPU to finish its queue, as `torch.cuda.empty_cache()` does"
        }
        _ if waits => "its lines wait for the GPU to finish its queue, as reading a tensor back does",
        _ => "the GPU ran the work queued before it",
    }
}

/// Half a core: more than a pin-memory thread or a logger takes.
const OTHER_THREADS_CORES: f64 = 0.5;

/// What one cause took of the idle time.
#[derive(Default)]
pub(super) struct Part {
    pub(super) weight: f64,
    /// The samples' own time, the GPU idle or not.
    pub(super) thread_s: f64,
    /// Of `weight`, each (state, library): the largest names the cause.
    pub(super) modes: HashMap<(ThreadState, Option<Domain>), f64>,
    /// Of `weight`, the samples inside torch's own Python (a module's forward, say).
    pub(super) in_torch: f64,
    pub(super) samples: usize,
    pub(super) sites: HashMap<u32, f64>,
    /// (file, function) of each site: a cause is a function, its lines' time added up.
    pub(super) functions: HashMap<(String, String), f64>,
    /// The frame that called the site's function.
    pub(super) callers: HashMap<u32, f64>,
    /// Another library's function that the site calls.
    pub(super) calls: HashMap<u32, f64>,
    pub(super) holders: HashMap<u32, f64>,
}

impl Part {
    /// The state and library that took most of the part.
    pub(super) fn mode(&self) -> (ThreadState, Option<Domain>) {
        self.modes
            .iter()
            .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(a.0)))
            .map(|(m, _)| *m)
            .unwrap_or((ThreadState::Other, None))
    }

    /// Where launching went, by torch's phase: "backward 55%, forward and the rest 30%, optimizer 15%".
    pub(super) fn phases(&self) -> Option<String> {
        self.mix(|_, d| match d {
            Some(Domain::Backward) => "backward",
            Some(Domain::Optimizer) => "optimizer",
            _ => "forward and the rest",
        })
    }

    /// Where the part holds more than one state, each one's share of it: "native 77%, python 23%".
    pub(super) fn states(&self) -> Option<String> {
        self.mix(|s, _| s.as_str())
    }

    /// The part's weight by `name` of each (state, library), largest first, where it has two
    /// names or more.
    fn mix(&self, name: impl Fn(ThreadState, Option<Domain>) -> &'static str) -> Option<String> {
        let mut by: Vec<(&str, f64)> = Vec::new();
        for (&(s, d), w) in &self.modes {
            let n = name(s, d);
            match by.iter_mut().find(|b| b.0 == n) {
                Some(b) => b.1 += w,
                None => by.push((n, *w)),
            }
        }
        if by.len() < 2 {
            return None;
        }
        by.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        let total = self.weight.max(1e-12);
        Some(by.iter().map(|(n, w)| format!("{n} {}", crate::pct(w / total))).collect::<Vec<_>>().join(", "))
    }
}

/// The most weighed key of a map.
pub(super) fn top(map: &HashMap<u32, f64>) -> Option<u32> {
    map.iter().max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(a.0))).map(|(k, _)| *k)
}
