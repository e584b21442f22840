//! What a job's Python main threads are doing, sampled from outside on a thread of its own:
//! each sample is the main thread's stack (read from outside, never stopping the job: by
//! gpulse's own reader for CPython 3.11 to 3.13, by py-spy for the rest), what the
//! kernel says of the thread (state, system call, wait channel), and who holds the GIL.
//!
//! The sampler finds the job's Python processes itself (the tree under the root, or under each
//! of the node's GPU processes, looked at every second), and paces itself: jittered intervals on the monotonic clock, stretched so
//! that its own CPU time stays within a budget. What a sample means is the diagnosis's to say.

mod intern;
mod pacing;
mod scope;
mod target;
mod walk;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gpulse_model::{ProcessRole, StackBatch};

use intern::Interner;
use pacing::{Jitter, Mean};
pub use scope::{NodeRoots, Scope, priority};
use target::{Outcome, Target};

/// How the sampler reads the job.
#[derive(Debug, Clone, PartialEq)]
pub struct StackOptions {
    /// Samples a second of each main process asked for (`--stacks-hz`); the budget may lower it.
    pub rate_hz: f64,
    /// The sampler's CPU time at most, as a share of one core (0.01: 1%).
    pub budget: f64,
    /// Whether DataLoader workers are sampled (at a fifth of the rate).
    pub workers: bool,
    /// What reads the stacks.
    pub reader: Reader,
}

impl Default for StackOptions {
    fn default() -> Self {
        Self { rate_hz: DEFAULT_RATE_HZ, budget: 0.01, workers: true, reader: Reader::default() }
    }
}

/// What reads a main thread's stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reader {
    /// gpulse's own reader where the interpreter is CPython 3.11, 3.12 or 3.13: the main thread
    /// alone (and the GIL holder's), each code object read once. py-spy reads other versions,
    /// a sample the reader could not read, and a process where it keeps failing.
    #[default]
    Direct,
    /// py-spy alone: every thread's whole stack at each sample (the measure to compare with).
    PySpy,
}

/// How many samples each reader read so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadCounts {
    pub direct: u64,
    pub py_spy: u64,
}

/// The rate asked for by default, and the range `--stacks-hz` takes.
pub const DEFAULT_RATE_HZ: f64 = 50.0;
pub const RATE_HZ: std::ops::RangeInclusive<f64> = 1.0..=200.0;

/// How often the process tree is looked at for new Python processes.
const DISCOVERY: Duration = Duration::from_secs(1);
/// A worker is read this many times less often than a main process: enough for the slow line
/// of a `__getitem__`, at a fifth of the cost.
const WORKER_SLOWER: f64 = 5.0;
/// Each interval is the period times a factor in 1 ± this.
const JITTER: f64 = 0.2;

/// A sampler running on its own thread until stopped (or dropped).
pub struct StackSampler {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// What the sampling thread hands over.
#[derive(Default)]
struct Shared {
    pending: Mutex<Pending>,
    stop: AtomicBool,
    direct: AtomicU64,
    py_spy: AtomicU64,
}

#[derive(Default)]
struct Pending {
    batch: StackBatch,
    /// Each sampled process's rate now.
    rates: HashMap<u32, f64>,
}

impl StackSampler {
    /// Starts sampling the Python processes in the tree under `root` (itself included). A
    /// thread that cannot be started means no samples, never an error.
    pub fn spawn(root: u32, options: StackOptions) -> StackSampler {
        Self::spawn_in(Scope::Tree(root), options)
    }

    /// Starts sampling the Python processes of the scope, within one budget for them all.
    pub fn spawn_in(scope: Scope, options: StackOptions) -> StackSampler {
        let shared = Arc::new(Shared::default());
        let theirs = shared.clone();
        let thread = std::thread::Builder::new()
            .name("gpulse-stacks".into())
            .spawn(move || Sampling::new(scope, options, theirs).run())
            .ok();
        StackSampler { shared, thread }
    }

    /// Everything sampled since the last drain: the frames and stacks first seen since, the
    /// processes first sampled, the samples, the rate of each process in them, the refusals.
    pub fn drain(&self) -> StackBatch {
        let mut pending = self.shared.pending.lock().unwrap_or_else(|e| e.into_inner());
        let mut batch = std::mem::take(&mut pending.batch);
        let mut pids: Vec<u32> = batch.samples.iter().map(|s| s.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        batch.rate_hz = pids.into_iter().filter_map(|p| pending.rates.get(&p).map(|r| (p, *r))).collect();
        batch
    }

    /// How many samples gpulse's own reader and py-spy read so far.
    pub fn read_counts(&self) -> ReadCounts {
        ReadCounts {
            direct: self.shared.direct.load(Ordering::Relaxed),
            py_spy: self.shared.py_spy.load(Ordering::Relaxed),
        }
    }

    /// Stops the sampler, and returns what it sampled since the last drain.
    pub fn stop(mut self) -> StackBatch {
        self.halt();
        self.drain()
    }

    fn halt(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

impl Drop for StackSampler {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Runs `f`, and says whether it returned: a panic in one process's reading (a reader meeting
/// memory that changed under it, in a case nobody foresaw) is caught there. Uncaught, it ended the
/// sampling thread, silently, and every process of the job went unsampled for the rest of the run.
fn guarded(f: impl FnOnce()) -> bool {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_ok()
}

/// The sampling thread's own state.
struct Sampling {
    scope: Scope,
    options: StackOptions,
    shared: Arc<Shared>,
    targets: Vec<Target>,
    interner: Interner,
    jitter: Jitter,
    /// The CPU a second spent outside samples (looking at the process tree, opening
    /// processes), averaged; what was spent since the last look, and when the next is due.
    overhead: Mean,
    overhead_since: Duration,
    discovery_at: Instant,
    /// What this round found, handed over at its end.
    out: StackBatch,
    /// The rates set this round.
    rates: HashMap<u32, f64>,
}

impl Sampling {
    fn new(scope: Scope, options: StackOptions, shared: Arc<Shared>) -> Self {
        let seed = u64::from(std::process::id()) ^ gpulse_base::clock::now_us().unsigned_abs();
        Self {
            scope,
            options,
            shared,
            targets: Vec::new(),
            interner: Interner::default(),
            jitter: Jitter::new(seed),
            overhead: Mean::default(),
            overhead_since: Duration::ZERO,
            discovery_at: Instant::now(),
            out: StackBatch::default(),
            rates: HashMap::new(),
        }
    }

    fn run(mut self) {
        while !self.shared.stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            let before = crate::profile::thread_cpu();
            let start = crate::profile::start();
            let looked = now >= self.discovery_at;
            if looked {
                self.discover(now);
                self.overhead.add(self.overhead_since.as_secs_f64() / DISCOVERY.as_secs_f64());
                self.overhead_since = Duration::ZERO;
                self.discovery_at = now + DISCOVERY;
            }
            let walk = self.options.reader == Reader::Direct;
            for t in &mut self.targets {
                let out = &mut self.out;
                if !guarded(|| t.open(now, looked, walk, out)) {
                    t.broke(now);
                }
            }
            if let Some(s) = start.filter(|_| looked) {
                s.finish("stacks: discovery and opening");
            }
            self.overhead_since += crate::profile::thread_cpu() - before;
            self.sample_due();
            self.hand_over();
            let next = self.targets.iter().filter_map(Target::wake_at).min();
            let wake = next.map_or(self.discovery_at, |n| n.min(self.discovery_at));
            let now = Instant::now();
            if wake > now {
                std::thread::park_timeout(wake - now);
            }
        }
    }

    /// Looks at the trees under the roots: new processes become targets, exited ones are
    /// forgotten, and each takes its root's share of the rate.
    fn discover(&mut self, now: Instant) {
        let mut tree = self.scope.roots();
        let mut i = 0;
        while i < tree.len() && tree.len() < 4096 {
            let (pid, priority) = tree[i];
            let kids = crate::proc_info::children(pid);
            tree.extend(kids.into_iter().map(|k| (k, priority)));
            i += 1;
        }
        let mut alive: HashMap<u32, (u64, u64, f64)> = HashMap::with_capacity(tree.len());
        for (pid, priority) in tree {
            if let Some((t, image)) = crate::proc_info::start_and_image(pid) {
                let e = alive.entry(pid).or_insert((t, image, priority));
                e.2 = e.2.max(priority);
            }
        }
        self.targets.retain(|t| alive.get(&t.pid).is_some_and(|a| a.0 == t.start_ticks));
        for t in &mut self.targets {
            let (_, image, priority) = alive[&t.pid];
            // A process that ran `exec` since it was opened is another program: told afresh.
            t.exec_seen(image, now);
            t.priority = priority;
        }
        for (pid, (ticks, image, priority)) in alive {
            if !self.targets.iter().any(|t| t.pid == pid) {
                let mut t = Target::new(pid, ticks, image, now);
                t.priority = priority;
                self.targets.push(t);
            }
        }
    }

    /// Samples each process whose time has come, and sets its next time.
    fn sample_due(&mut self) {
        let stretch = pacing::stretch(
            self.targets.iter().filter(|t| t.is_sampling()).map(|t| (t.cost.get(), self.period(t).as_secs_f64())),
            self.overhead.get(),
            self.options.budget,
        );
        let mut gone = Vec::new();
        for i in 0..self.targets.len() {
            let now = Instant::now();
            if !self.targets[i].is_sampling() || self.targets[i].next_at > now {
                continue;
            }
            let before = crate::profile::thread_cpu();
            let (t, interner, out) = (&mut self.targets[i], &mut self.interner, &mut self.out);
            let mut outcome = Outcome::Skipped;
            let workers = self.options.workers;
            if !crate::profile::timed("stacks: one sample", || guarded(|| outcome = t.sample(interner, workers, out))) {
                t.broke(now);
            }
            let cost = (crate::profile::thread_cpu() - before).as_secs_f64();
            let period = self.period(&self.targets[i]).mul_f64(stretch).min(pacing::SLOWEST);
            let t = &mut self.targets[i];
            match outcome {
                Outcome::Gone => gone.push(t.pid),
                Outcome::Sampled { walked } => {
                    let by = if walked { &self.shared.direct } else { &self.shared.py_spy };
                    by.fetch_add(1, Ordering::Relaxed);
                    let since = t.last_at.map_or(period, |at| now.saturating_duration_since(at));
                    t.cost.add_over(cost, since.as_secs_f64());
                    t.last_at = Some(now);
                    self.rates.insert(t.pid, 1.0 / period.as_secs_f64());
                }
                Outcome::Skipped => {}
            }
            t.next_at = Instant::now() + period.mul_f64(self.jitter.factor(JITTER));
        }
        self.targets.retain(|t| !gone.contains(&t.pid));
    }

    /// The period asked for a target: the rate's, or a fifth of it for a worker, at its share.
    fn period(&self, t: &Target) -> Duration {
        let hz = self.options.rate_hz.clamp(*RATE_HZ.start(), *RATE_HZ.end()) * t.priority.clamp(0.01, 1.0);
        let hz = if t.role == Some(ProcessRole::Worker) { hz / WORKER_SLOWER } else { hz };
        Duration::from_secs_f64(1.0 / hz)
    }

    /// Hands this round's findings to the drainer.
    fn hand_over(&mut self) {
        let mut out = std::mem::take(&mut self.out);
        self.interner.take_new(&mut out);
        if out == StackBatch::default() && self.rates.is_empty() {
            return;
        }
        let mut pending = self.shared.pending.lock().unwrap_or_else(|e| e.into_inner());
        let b = &mut pending.batch;
        b.frames.append(&mut out.frames);
        b.stacks.append(&mut out.stacks);
        b.processes.append(&mut out.processes);
        b.samples.append(&mut out.samples);
        b.refusals.append(&mut out.refusals);
        pending.rates.extend(self.rates.drain());
    }
}
