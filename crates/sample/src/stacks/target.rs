//! One process of the job as the sampler knows it: not yet readable, sampled, refused, or not
//! Python at all; and one sample of its main thread.

use std::time::{Duration, Instant};

use gpulse_model::{Gil, KernelState, ProcessRole, SampledProcess, StackBatch, ThreadSample};
use py_spy::config::LockingStrategy;
use py_spy::{PythonSpy, StackTrace};

use super::intern::{FileView, Interner};
use super::walk::{WalkedGil, Walker};
use crate::proc_info;

/// Consecutive failed samples after which the reader is opened afresh: a starting interpreter
/// moves its structures during its first second.
const REOPEN_AFTER: u32 = 5;
/// Consecutive failed walks after which a process is read by py-spy alone.
const WALKER_GIVE_UP: u32 = 5;
/// Consecutive empty walks, before a process's first stack, after which py-spy reads it: about a
/// second at 50 Hz, longer than an interpreter takes to reach its script.
const EMPTY_GIVE_UP: u32 = 50;
/// A process that did not open as Python this many times is looked at again only rarely.
const TRIES: u32 = 3;
/// ... but one named python, every this long: on a saturated host an interpreter may take
/// longer than its first tries to start, and a job of seconds would never be read.
const PYTHON_RETRY: Duration = Duration::from_secs(2);
/// ... more times where its program is named python: it may be still loading.
const TRIES_PYTHON: u32 = 10;
/// Refusals of a process's memory after which it is said and left: a process caught in its
/// `exec` (its memory changing hands) refuses for a moment too.
const REFUSALS: u32 = 3;
/// Panics in a process's reading after which it is left (see [`Target::broke`]).
const BROKEN_GIVE_UP: u32 = 4;
/// How long a process that is not Python waits before it is looked at again (it may `exec`).
const NOT_PYTHON_RETRY: Duration = Duration::from_secs(30);

/// What the sampler knows of one process of the tree.
pub(super) struct Target {
    pub pid: u32,
    /// With the PID, names the process: a reused PID is another one.
    pub start_ticks: u64,
    /// The program image it was seen running (see [`proc_info::start_and_image`]): another one
    /// later means it ran `exec`, and is opened and told afresh.
    image: u64,
    pub phase: Phase,
    /// Opening attempts so far.
    tries: u32,
    view: FileView,
    /// Its main thread's state, call, wait channel and clocks, kept open.
    task: proc_info::TaskFiles,
    /// The process's role, once its first stack said it.
    pub role: Option<ProcessRole>,
    /// Seconds of the sampler's CPU per sample, averaged.
    pub cost: super::pacing::Mean,
    /// When the next sample is due.
    pub next_at: Instant,
    /// When the last one was taken: the time its cost stands for.
    pub last_at: Option<Instant>,
    /// The share of the rate it is read at (its root's, see [`super::priority`]).
    pub priority: f64,
    /// Whether the line that py-spy reads it has been said.
    told_fallback: bool,
    /// Refusals of its memory so far.
    refused: u32,
    /// Panics in its reading so far (see [`Target::broke`]).
    broken: u32,
}

pub(super) enum Phase {
    /// To be opened at the next look (after `at`).
    Opening { at: Instant },
    Sampling {
        spy: Box<PythonSpy>,
        failures: u32,
        /// The direct reader of the main thread, where the version is one it reads and it has
        /// not failed `WALKER_GIVE_UP` times in a row; else py-spy reads every sample.
        walker: Option<Box<Walker>>,
        walker_failures: u32,
    },
    /// Not Python, as far as could be seen: looked at again after `at`, or when its program
    /// changes.
    NotPython { at: Instant, exe: Option<std::path::PathBuf> },
    /// A launcher, judged by this command line: looked at again only if it changes (a child
    /// seen between its launcher's fork and its `exec` has the launcher's).
    Launcher { command: String },
    /// Never sampled: refused (and said so), a helper, or a worker when workers are off.
    Done,
}

/// What one sample did.
pub(super) enum Outcome {
    /// `walked`: read by the walker, not py-spy.
    Sampled { walked: bool },
    /// Nothing this time (a starting interpreter, no thread yet).
    Skipped,
    /// The process has exited.
    Gone,
}

impl Target {
    pub(super) fn new(pid: u32, start_ticks: u64, image: u64, now: Instant) -> Self {
        Self {
            pid,
            start_ticks,
            image,
            phase: Phase::Opening { at: now },
            tries: 0,
            view: FileView::of(pid),
            task: proc_info::TaskFiles::of(pid, pid),
            role: None,
            cost: Default::default(),
            next_at: now,
            last_at: None,
            priority: 1.0,
            told_fallback: false,
            refused: 0,
            broken: 0,
        }
    }

    /// Takes the image the process runs now. Another image than the one it was opened and told
    /// in means it ran `exec` since: a child first seen between its parent's fork and its own
    /// exec was read with its parent's command line, environment (no rank, or the parent's) and
    /// stacks. It is opened afresh, and its role, rank and command told again from the new
    /// program (whatever was decided of the old one: sampled, a launcher, a helper, not Python).
    /// Whether it had.
    pub(super) fn exec_seen(&mut self, image: u64, now: Instant) -> bool {
        // 0: the kernel hid the addresses; nothing can be said.
        if image == 0 || image == self.image {
            return false;
        }
        let changed = self.image != 0;
        self.image = image;
        if changed {
            let priority = self.priority;
            *self = Self::new(self.pid, self.start_ticks, image, now);
            self.priority = priority;
        }
        changed
    }

    /// After a panic in its reading: the process is opened afresh in a moment, read by py-spy
    /// alone after the second time (gpulse's own reader is the likelier to meet memory it does not
    /// expect), and left after the fourth (its samples, and the sampler's time, go to the others).
    pub(super) fn broke(&mut self, now: Instant) {
        self.broken += 1;
        self.phase = if self.broken >= BROKEN_GIVE_UP {
            Phase::Done
        } else {
            Phase::Opening { at: now + Duration::from_millis(200) }
        };
    }

    pub(super) fn is_sampling(&self) -> bool {
        matches!(self.phase, Phase::Sampling { .. })
    }

    /// When the sampler has something to do for this process: sample it, or try to open it.
    pub(super) fn wake_at(&self) -> Option<Instant> {
        match self.phase {
            Phase::Sampling { .. } => Some(self.next_at),
            Phase::Opening { at } => Some(at),
            _ => None,
        }
    }

    /// Opens the process's interpreter if it is time to; a refusal is added to `out` once.
    /// `looked`: the tree was looked at this round, the time to ask whether a process that was
    /// not Python has become so (`exec`).
    /// `walk`: whether the walker reads the versions it can (else py-spy reads all).
    pub(super) fn open(&mut self, now: Instant, looked: bool, walk: bool, out: &mut StackBatch) {
        match &self.phase {
            Phase::Opening { at } if *at <= now => {}
            Phase::NotPython { at, exe } if looked && (*at <= now || proc_info::exe(self.pid) != *exe) => {}
            Phase::Launcher { command } if looked && proc_info::cmdline(self.pid).is_some_and(|c| c != *command) => {
                self.role = None;
            }
            _ => return,
        }
        let config = py_spy::Config {
            blocking: LockingStrategy::NonBlocking,
            native: false,
            // The sampler reads whole file names, and asks no thread names where 3.11+ gives
            // each thread's OS id (see below).
            full_filenames: true,
            ..Default::default()
        };
        self.tries += 1;
        match PythonSpy::new(self.pid as py_spy::Pid, &config) {
            Ok(mut spy) => {
                // 3.11+ names each thread's OS id, so the main thread is known without names.
                if (spy.version.major, spy.version.minor) >= (3, 11) {
                    spy.config.collect_thread_names = false;
                }
                let walk = walk && self.broken < 2;
                let walker = if walk { Walker::new(&spy).map(Box::new) } else { None };
                if walk && !Walker::knows(&spy) && !self.told_fallback {
                    self.told_fallback = true;
                    // Said once, so that a slower read is never a silent one.
                    out.refusals.push((self.pid, fallback_note(self.pid, &spy.version.to_string())));
                }
                self.phase = Phase::Sampling { spy: Box::new(spy), failures: 0, walker, walker_failures: 0 };
                self.next_at = now;
            }
            Err(e) => {
                if let Some(why) = refusal(self.pid, &e) {
                    self.refused += 1;
                    self.phase = if self.refused < REFUSALS {
                        Phase::Opening { at: now + Duration::from_millis(300) }
                    } else {
                        out.refusals.push((self.pid, why));
                        Phase::Done
                    };
                    return;
                }
                let exe = proc_info::exe(self.pid);
                let named_python =
                    exe.as_ref().and_then(|e| e.file_name()).is_some_and(|n| n.to_string_lossy().starts_with("python"))
                        || proc_info::cmdline(self.pid).is_some_and(|c| c.contains("python"));
                let tries = if named_python { TRIES_PYTHON } else { TRIES };
                // A starting interpreter is tried again soon, then less and less often.
                let wait = if named_python { Duration::from_millis(100) * self.tries } else { Duration::from_secs(1) };
                self.phase = if self.tries < tries {
                    Phase::Opening { at: now + wait.min(Duration::from_secs(1)) }
                } else {
                    self.tries = 0;
                    Phase::NotPython { at: now + if named_python { PYTHON_RETRY } else { NOT_PYTHON_RETRY }, exe }
                };
            }
        }
    }

    /// Samples the main thread into `out` (with, the first time, the process itself), interning
    /// its stack. `workers`: whether DataLoader workers are sampled at all.
    pub(super) fn sample(&mut self, interner: &mut Interner, workers: bool, out: &mut StackBatch) -> Outcome {
        let Phase::Sampling { spy, failures, walker, walker_failures } = &mut self.phase else {
            return Outcome::Skipped;
        };
        let pid = self.pid;
        let t_us = gpulse_base::clock::now_us();
        let before = kernel_state(&mut self.task);
        if let Some(w) = walker {
            match w.sample() {
                Ok(walked) if self.role.is_none() && walked.frames.is_empty() => {
                    // No stack yet: a starting interpreter, or a reader that keeps finding none.
                    // The latter would never sample the process: py-spy reads it after a few.
                    *walker_failures += 1;
                    if *walker_failures >= EMPTY_GIVE_UP {
                        *walker = None;
                    }
                    return Outcome::Skipped;
                }
                Ok(walked) => {
                    *walker_failures = 0;
                    *failures = 0;
                    let after = self.task.state();
                    let kernel =
                        straddled(before, after, walked.gil == WalkedGil::Held, |s| blocked_in(&mut self.task, s));
                    if self.role.is_none() {
                        let names: Vec<(&str, &str)> = walked.frames.iter().map(|f| w.names(f)).collect();
                        let python = spy.version.to_string();
                        let gil_read = spy.addresses.threadstate_address != 0;
                        match first_role(pid, names.into_iter(), python, gil_read, workers, out) {
                            Ok(r) => self.role = Some(r),
                            Err(next) => {
                                self.phase = next;
                                return Outcome::Skipped;
                            }
                        }
                    }
                    let gil = match walked.gil {
                        WalkedGil::Held => Gil::Held,
                        WalkedGil::Free => Gil::Free,
                        WalkedGil::Other(frames) => Gil::Other { stack: w.intern(&frames, interner, &self.view) },
                    };
                    let stack = w.intern(&walked.frames, interner, &self.view);
                    let clock = self.task.clock();
                    out.samples.push(ThreadSample { t_us, pid, stack, kernel, gil, clock });
                    return Outcome::Sampled { walked: true };
                }
                Err(_) => {
                    // A torn read, a thread that moved: py-spy reads this sample; a walker
                    // that keeps failing gives the process to py-spy.
                    *walker_failures += 1;
                    if *walker_failures >= WALKER_GIVE_UP {
                        *walker = None;
                    }
                }
            }
        }
        let traces = match spy.get_stack_traces() {
            Ok(t) => t,
            Err(e) => {
                if !proc_info::is_running(pid) || proc_info::start_ticks(pid) != Some(self.start_ticks) {
                    return Outcome::Gone;
                }
                if let Some(why) = refusal(pid, &e) {
                    out.refusals.push((pid, why));
                    self.phase = Phase::Done;
                    return Outcome::Skipped;
                }
                // `Bad address` and torn copies while the interpreter starts, or a stack
                // that changed under the read: quiet, and a fresh reader after a few.
                *failures += 1;
                if *failures >= REOPEN_AFTER {
                    self.phase = Phase::Opening { at: Instant::now() + Duration::from_millis(200) };
                }
                return Outcome::Skipped;
            }
        };
        *failures = 0;
        let after = self.task.state();
        let Some(main) = main_thread(&traces, pid, || proc_info::parent(pid)) else { return Outcome::Skipped };
        let kernel = straddled(before, after, traces[main].owns_gil, |s| blocked_in(&mut self.task, s));
        if self.role.is_none() {
            if traces[main].frames.is_empty() {
                return Outcome::Skipped;
            }
            let names = traces[main].frames.iter().map(|f| (f.filename.as_str(), f.name.as_str()));
            let gil_read = spy.addresses.threadstate_address != 0;
            match first_role(pid, names, spy.version.to_string(), gil_read, workers, out) {
                Ok(r) => self.role = Some(r),
                Err(next) => {
                    self.phase = next;
                    return Outcome::Skipped;
                }
            }
        }
        let owns_gil = traces[main].owns_gil;
        let holder = traces.iter().position(|t| t.owns_gil);
        let mut traces = traces;
        let gil = match holder {
            _ if owns_gil => Gil::Held,
            Some(h) => Gil::Other { stack: interner.stack(std::mem::take(&mut traces[h].frames), &self.view) },
            None => Gil::Free,
        };
        let stack = interner.stack(std::mem::take(&mut traces[main].frames), &self.view);
        let clock = self.task.clock();
        out.samples.push(ThreadSample { t_us, pid, stack, kernel, gil, clock });
        Outcome::Sampled { walked: false }
    }
}

/// The kernel's side of the main thread, read right before its stack.
fn kernel_state(task: &mut proc_info::TaskFiles) -> KernelState {
    let state = task.state().unwrap_or('?');
    blocked_in(task, state)
}

/// `state` with the call and wait channel it is blocked in, read only where it is blocked: a
/// running thread has neither, and each is a `/proc` read of its own. Read between the state and
/// the stack, they put the two further apart, and the thread's short bursts on a CPU inside a
/// blocking call (an fsync's own work) were read as the block that followed.
fn blocked_in(task: &mut proc_info::TaskFiles, state: char) -> KernelState {
    if state == 'R' {
        return KernelState { state, syscall: None, wchan: None, across: false };
    }
    KernelState { state, syscall: task.syscall(), wchan: task.wchan().map(std::sync::Arc::from), across: false }
}

/// The kernel's side of a sample whose stack was read between `before` and a second read of the
/// thread's state letter, `after`. Where the two differ, the stack is of one side of a
/// transition. Read while the thread held the GIL, it is of the side running Python. Read while
/// the GIL was free, it is of the call that released it, and whether the thread was on its CPU
/// in that call or blocked is not for one read to say (`across`): the stack is read midway
/// between the letters, and the thread's clocks over the block say how much of such samples' time
/// it ran. Taking the blocked side put the short bursts on a CPU inside an fsync under its block,
/// and a loop's own share of its fsyncs on a CPU read half of what it was; taking the side before
/// put the Python before an fsync on the fsync, 5 points of such a loop. `blocked` reads the
/// call the thread went into.
fn straddled(
    before: KernelState,
    after: Option<char>,
    holds_gil: bool,
    blocked: impl FnOnce(char) -> KernelState,
) -> KernelState {
    let Some(after) = after.filter(|a| *a != before.state) else { return before };
    match (holds_gil, before.state == 'R', after == 'R') {
        (true, false, true) => KernelState { state: 'R', syscall: None, wchan: None, across: false },
        // Into the call, or out of it with the GIL not yet taken again: the call, its blocked side.
        (false, true, false) => KernelState { across: true, ..blocked(after) },
        (false, false, true) => KernelState { across: true, ..before },
        _ => before,
    }
}

/// The role of a process from its first stack (`(file, function)` of each frame), said in `out`
/// once with whether the reader sees the GIL (`gil_read`); else the phase of a process not to be sampled (a launcher, a helper, or a worker when
/// workers are off).
fn first_role<'a>(
    pid: u32,
    frames: impl Iterator<Item = (&'a str, &'a str)> + Clone,
    python: String,
    gil_read: bool,
    workers: bool,
    out: &mut StackBatch,
) -> Result<ProcessRole, Phase> {
    let command = proc_info::cmdline(pid).unwrap_or_default();
    // A launcher is told by its command line too: its first stack may be still importing.
    if launcher(&command) {
        return Err(Phase::Launcher { command });
    }
    match gpulse_model::role_of(frames) {
        Some(ProcessRole::Worker) if !workers => Err(Phase::Done),
        Some(r) => {
            // A rank says so in its environment, readable wherever its memory is.
            let rank = match r {
                ProcessRole::Main => proc_info::environ(pid).and_then(|e| gpulse_model::Rank::from_environ(&e)),
                ProcessRole::Worker => None,
            };
            out.processes.push(SampledProcess { pid, role: r, python, command, rank, gil_read: Some(gil_read) });
            Ok(r)
        }
        None => Err(Phase::Done),
    }
}

/// Whether a command line starts a distributed job's launcher rather than a process that trains:
/// `torchrun`, `python -m torch.distributed.run` (or `.launch`), `accelerate launch`, `deepspeed`.
fn launcher(command: &str) -> bool {
    let words: Vec<&str> =
        command.split(' ').filter(|w| !w.is_empty()).map(|a| a.rsplit('/').next().unwrap_or(a)).collect();
    // The program, or the script an interpreter runs (its flags skipped), then what follows it.
    let mut at = 0;
    if words.first().is_some_and(|w| w.starts_with("python")) {
        at = 1;
        while words.get(at).is_some_and(|w| w.starts_with('-') && *w != "-m") {
            at += 1;
        }
        if words.get(at) == Some(&"-m") {
            return matches!(words.get(at + 1), Some(&"torch.distributed.run" | &"torch.distributed.launch"));
        }
    }
    match words.get(at) {
        Some(&"torchrun" | &"deepspeed") => true,
        Some(&"accelerate") => words.get(at + 1) == Some(&"launch"),
        _ => false,
    }
}

/// Which of `traces` is the main thread: the one whose OS id is the PID (3.11+), else the one
/// `threading` calls `MainThread`, else the last (py-spy lists the main thread last). `None`
/// where the threads' OS ids name the `parent`'s main thread and none is the PID's: the parent's
/// interpreter, read through a child that has not run `exec` yet (a `vfork` shares its memory,
/// a `fork` copies it), which runs no Python of its own.
fn main_thread(traces: &[StackTrace], pid: u32, parent: impl FnOnce() -> Option<u32>) -> Option<usize> {
    if let Some(main) = traces.iter().position(|t| t.os_thread_id == Some(u64::from(pid))) {
        return Some(main);
    }
    if traces.iter().any(|t| t.os_thread_id.is_some())
        && parent().is_some_and(|p| traces.iter().any(|t| t.os_thread_id == Some(u64::from(p))))
    {
        return None;
    }
    traces.iter().position(|t| t.thread_name.as_deref() == Some("MainThread")).or_else(|| traces.len().checked_sub(1))
}

/// The line that says why `pid` cannot be sampled and what to change, for an error that will
/// not pass by itself (a refused read, an unsupported Python); `None` for any other.
fn refusal(pid: u32, e: &anyhow::Error) -> Option<String> {
    if permission_denied(e) {
        return Some(format!("cannot read the Python stacks of PID {pid}: the kernel refused ({})", ptrace_advice()));
    }
    let text = format!("{e:#}");
    let at = text.find("Unsupported version of Python: ")?;
    let version = text[at + "Unsupported version of Python: ".len()..].split([':', ' ', ',']).next().unwrap_or("");
    Some(format!(
        "cannot read the Python stacks of PID {pid}: Python {version} is not supported (py-spy 0.4.3 reads CPython 2.7 and 3.3 to 3.15); the rest of gpulse goes on"
    ))
}

/// The line that says a process is read by py-spy: gpulse's own reader does not know its
/// interpreter's layout (3.10 and older, 3.14 and newer, a free-threaded build).
fn fallback_note(pid: u32, version: &str) -> String {
    format!(
        "PID {pid} runs Python {version}, whose layout gpulse's own reader does not know (it reads 3.11 to 3.13): py-spy reads it instead, at several times the CPU a sample"
    )
}

/// Whether the kernel refused a read of the process (`EPERM`, `EACCES`), anywhere in the chain.
fn permission_denied(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::PermissionDenied) || {
            let text = cause.to_string();
            text.contains("(os error 1)") || text.contains("(os error 13)")
        }
    })
}

/// What to change so that the kernel allows the read, for this machine's Yama scope.
fn ptrace_advice() -> String {
    match proc_info::yama_ptrace_scope() {
        Some(1) => "Yama ptrace_scope=1 allows only gpulse's own descendants; run gpulse as the job's user with \
                    /proc/sys/kernel/yama/ptrace_scope set to 0, or give it CAP_SYS_PTRACE"
            .to_owned(),
        Some(2) => {
            "Yama ptrace_scope=2 allows only a process with CAP_SYS_PTRACE; give gpulse CAP_SYS_PTRACE".to_owned()
        }
        Some(s @ 3..) => format!("Yama ptrace_scope={s} allows no process to read another until reboot"),
        // No Yama, or scope 0: the classic rules.
        _ => "the job runs as another user or is not dumpable; run gpulse as the job's user, or give it \
              CAP_SYS_PTRACE"
            .to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use gpulse_model::KernelState;

    use super::straddled;

    /// A read that saw the thread hold the GIL is of its Python; one that saw it free is of the
    /// call that released it, its blocked side, and marked across; a state that held across the
    /// read is the state.
    #[test]
    fn a_read_across_a_transition_takes_the_side_its_stack_is_of() {
        let k = |state, syscall: Option<u32>| KernelState {
            state,
            syscall,
            wchan: syscall.map(|_| "w".into()),
            across: false,
        };
        let across = |k: KernelState| KernelState { across: true, ..k };
        let fsync = || k('D', Some(74));
        // The call the thread is blocked in once the stack is read: a futex wait.
        let futex = |s| k(s, Some(202));
        // Python, then into fsync: the stack (GIL held) is the Python's.
        assert_eq!(straddled(k('R', None), Some('D'), true, futex), k('R', None));
        // Into a lock wait without the GIL (the C code released it): the wait and its call.
        assert_eq!(straddled(k('R', None), Some('S'), false, futex), across(k('S', Some(202))));
        // Out of fsync with the GIL still free: the fsync.
        assert_eq!(straddled(fsync(), Some('R'), false, futex), across(fsync()));
        // Woken with the GIL taken again: running.
        assert_eq!(straddled(k('S', Some(202)), Some('R'), true, futex), k('R', None));
        // No change, or no second read: the first.
        assert_eq!(straddled(fsync(), Some('D'), true, futex), fsync());
        assert_eq!(straddled(k('S', Some(202)), None, false, futex), k('S', Some(202)));
        assert_eq!(straddled(k('S', Some(202)), Some('D'), false, futex), k('S', Some(202)));
    }

    /// Launchers by their command lines, whatever their first stack; the processes they start
    /// are not launchers.
    #[test]
    fn launchers_are_told_by_their_command_line() {
        for c in [
            "/usr/bin/python3 /usr/local/bin/torchrun --standalone --nproc_per_node=8 train.py",
            "/venv/bin/torchrun --nproc_per_node=2 train.py",
            "python -m torch.distributed.run --nproc_per_node=2 train.py",
            "python3 -m torch.distributed.launch train.py",
            "/venv/bin/python /venv/bin/accelerate launch train.py",
            "/venv/bin/python /venv/bin/deepspeed train.py",
        ] {
            assert!(launcher(c), "{c}");
        }
        for c in [
            "/usr/bin/python3 -u train.py --local-rank=0",
            "python3 train.py torchrun",
            "python train.py --launcher deepspeed",
            "python -m torch.utils.bottleneck train.py",
        ] {
            assert!(!launcher(c), "{c}");
        }
    }

    use super::*;

    fn thread(os: Option<u64>, name: Option<&str>) -> StackTrace {
        StackTrace {
            pid: 0,
            thread_id: 0,
            thread_name: name.map(str::to_owned),
            os_thread_id: os,
            active: true,
            owns_gil: false,
            frames: Vec::new(),
            process_info: None,
        }
    }

    /// The main thread is the PID's; a child read before its `exec` holds only its parent's
    /// threads, and has none; without OS ids, the name or the last.
    #[test]
    fn a_child_before_its_exec_has_no_main_thread_of_its_own() {
        let ts = [thread(Some(11), None), thread(Some(10), None)];
        assert_eq!(main_thread(&ts, 10, || Some(1)), Some(1));
        // PID 12 is the fork of 10 (vfork shares its memory): 10's threads are no thread of 12's.
        assert_eq!(main_thread(&ts, 12, || Some(10)), None);
        // A PID the threads do not name, whose parent they do not name either (another PID
        // namespace): the last, as before.
        assert_eq!(main_thread(&ts, 4, || Some(1)), Some(1));
        let named = [thread(None, Some("MainThread")), thread(None, Some("Thread-1"))];
        assert_eq!(main_thread(&named, 12, || Some(10)), Some(0));
        assert_eq!(main_thread(&[], 12, || Some(10)), None);
    }

    /// A process that ran `exec` since it was told is opened and told again; the same image, or
    /// one the kernel hides, changes nothing.
    #[test]
    fn an_exec_opens_and_tells_the_process_again() {
        let now = Instant::now();
        let mut t = Target::new(7, 100, 0xabc, now);
        t.role = Some(ProcessRole::Main);
        t.phase = Phase::Done;
        t.priority = 0.5;
        assert!(!t.exec_seen(0xabc, now));
        assert!(!t.exec_seen(0, now));
        assert!(t.role.is_some());
        let later = now + Duration::from_secs(1);
        assert!(t.exec_seen(0xdef, later));
        assert_eq!(t.role, None, "its role is told again");
        assert!(matches!(t.phase, Phase::Opening { at } if at == later));
        assert_eq!((t.pid, t.start_ticks, t.priority), (7, 100, 0.5));
        // First seen with the addresses hidden: the first image read is its own.
        let mut t = Target::new(8, 100, 0, now);
        t.role = Some(ProcessRole::Main);
        assert!(!t.exec_seen(0xabc, now));
        assert!(t.role.is_some());
    }

    /// A panic in a process's reading is caught where it happens: the process is opened again,
    /// by py-spy alone after the second, and left after the fourth; the sampler goes on.
    #[test]
    fn a_panic_in_one_processs_reading_leaves_the_sampler_running() {
        assert!(super::super::guarded(|| {}));
        let quiet = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let caught = super::super::guarded(|| panic!("a torn read"));
        std::panic::set_hook(quiet);
        assert!(!caught);
        let now = Instant::now();
        let mut t = Target::new(9, 100, 0xabc, now);
        for _ in 0..3 {
            t.broke(now);
            assert!(matches!(t.phase, Phase::Opening { at } if at > now));
        }
        assert_eq!(t.broken, 3);
        t.broke(now);
        assert!(matches!(t.phase, Phase::Done));
    }

    #[test]
    fn a_refusal_says_why_and_what_to_change() {
        let io = std::io::Error::from_raw_os_error(libc::EPERM);
        let e = anyhow::Error::new(io).context("Failed to copy PyThreadState");
        let why = refusal(42, &e).unwrap();
        assert!(why.starts_with("cannot read the Python stacks of PID 42: the kernel refused ("), "{why}");
        assert!(why.contains("CAP_SYS_PTRACE"), "{why}");
        let e = anyhow::anyhow!("Unsupported version of Python: 3.99.1");
        let why = refusal(7, &e).unwrap();
        assert!(why.contains("Python 3.99.1 is not supported"), "{why}");
        assert!(refusal(7, &anyhow::anyhow!("Failed to copy memory: Bad address (os error 14)")).is_none());
    }
}
