//! What a job's Python threads were doing, sampled from outside: interned frames and stacks, and
//! per sample the thread's stack with what the kernel and the interpreter said of it.
//!
//! The sampler interns as it goes, so a frame or a stack is sent (and stored) once, and a sample
//! is a few integers. What a sample *means* (running Python, waiting on the GPU, on a socket) is
//! the diagnosis's to say, from these facts: a recording keeps the facts, never the verdict.

use serde::{Deserialize, Serialize};

/// One frame of a Python stack: the line a function was at.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PyFrame {
    /// The code's file as the interpreter names it (`/home/me/train.py`, `<frozen runpy>`).
    pub file: String,
    /// 0 where the interpreter gave none.
    pub line: u32,
    pub function: String,
    /// The source line itself, stripped, where the sampler could read the file: what a frame
    /// that ends in a C call calls (`loss.item()`).
    pub code: Option<String>,
}

impl PyFrame {
    /// `file.py:LINE function`, the file's last two components: what people read.
    pub fn site(&self) -> String {
        format!("{}:{} {}", short_path(&self.file), self.line, self.function)
    }
}

/// A path's last two components: `torch/optim/adam.py` reads better than the whole
/// site-packages path, and `train.py` stays as it is.
pub fn short_path(path: &str) -> &str {
    let mut cut = path.len();
    for _ in 0..2 {
        match path[..cut].rfind('/') {
            Some(i) => cut = i,
            None => return path,
        }
    }
    &path[cut + 1..]
}

gpulse_base::words! {
    /// What a sampled Python process is to the job.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum ProcessRole {
        /// The job's training process (each rank of a multi-process job).
        Main => "main",
        /// A DataLoader worker.
        Worker => "worker",
    }
}

/// What a process is to the job, from its main thread's stack (`(file, function)` of each
/// frame); `None` for a process that only starts or serves others (a launcher,
/// multiprocessing's helpers, compile workers). The sampler asks it of a first stack; the
/// diagnosis of every sample, since a first stack may be still importing.
pub fn role_of<'a>(frames: impl Iterator<Item = (&'a str, &'a str)> + Clone) -> Option<ProcessRole> {
    let has = |pred: &dyn Fn(&str, &str) -> bool| frames.clone().any(|(file, name)| pred(file, name));
    if has(&|file, name| name == "_worker_loop" && file.ends_with("torch/utils/data/_utils/worker.py")) {
        return Some(ProcessRole::Worker);
    }
    // A multiprocessing pool's worker does the job's work, for the main process that waits on it.
    if has(&|file, name| name == "worker" && file.ends_with("multiprocessing/pool.py")) {
        return Some(ProcessRole::Worker);
    }
    // `torch.multiprocessing.spawn`'s parent waits for its processes (which run `_wrap`).
    let spawned = has(&|file, name| name == "_wrap" && file.ends_with("torch/multiprocessing/spawn.py"));
    let helper = |file: &str, name: &str| {
        (!spawned && file.ends_with("torch/multiprocessing/spawn.py") && matches!(name, "join" | "start_processes"))
            || file.contains("torch/distributed/elastic/")
            || file.ends_with("torch/distributed/run.py")
            || file.ends_with("multiprocessing/resource_tracker.py")
            || file.ends_with("multiprocessing/forkserver.py")
            || file.contains("torch/_inductor/compile_worker/")
    };
    if has(&helper) { None } else { Some(ProcessRole::Main) }
}

/// A Python process the sampler reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampledProcess {
    pub pid: u32,
    pub role: ProcessRole,
    /// The interpreter's version, `3.11.7`.
    pub python: String,
    /// The command line, for people.
    pub command: String,
    /// Its place in a distributed job, from its environment; `None` for a process that is no
    /// rank (or whose environment could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<Rank>,
    /// Whether the reader sees who holds the GIL, so that a sample with the GIL free is free:
    /// a thread in native code that let it go. `None` in recordings made before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gil_read: Option<bool>,
}

/// A process's place in a distributed job: what torchrun, accelerate and deepspeed put in each
/// rank's environment (`RANK`, `LOCAL_RANK`, `WORLD_SIZE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rank {
    pub rank: u32,
    pub world_size: u32,
    pub local_rank: Option<u32>,
    /// The GPU's index, from `LOCAL_RANK` through `CUDA_VISIBLE_DEVICES` where that lists
    /// indices; `None` where it names UUIDs or nothing could be said. CUDA's order, which is
    /// NVML's under `CUDA_DEVICE_ORDER=PCI_BUS_ID` (what multi-GPU nodes set): a guess where
    /// NVML's process list does not say.
    pub device: Option<u32>,
}

impl Rank {
    /// From a NUL-separated environment (`/proc/PID/environ`); `None` without `WORLD_SIZE`, or
    /// with a rank outside the world. Without `RANK`, `LOCAL_RANK` is the rank on the first
    /// node (`NODE_RANK` 0 or unset: Lightning starts its other processes so).
    pub fn from_environ(environ: &[u8]) -> Option<Self> {
        let var = |name: &str| {
            environ.split(|b| *b == 0).find_map(|kv| {
                let kv = std::str::from_utf8(kv).ok()?;
                kv.strip_prefix(name)?.strip_prefix('=').map(str::to_owned)
            })
        };
        let num = |name: &str| var(name).and_then(|v| v.trim().parse::<u32>().ok());
        let world_size = num("WORLD_SIZE")?;
        let local_rank = num("LOCAL_RANK");
        let rank = match num("RANK") {
            Some(r) => r,
            None if num("NODE_RANK").unwrap_or(0) == 0 => local_rank?,
            None => return None,
        };
        if rank >= world_size {
            return None;
        }
        let device = match (local_rank, var("CUDA_VISIBLE_DEVICES")) {
            (Some(l), None) => Some(l),
            (Some(l), Some(list)) => list.split(',').nth(l as usize).and_then(|d| d.trim().parse::<u32>().ok()),
            (None, _) => None,
        };
        Some(Rank { rank, world_size, local_rank, device })
    }
}

/// Who held the GIL when the thread was sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Gil {
    /// The sampled thread.
    Held,
    /// No thread.
    Free,
    /// Another thread of the process, at this stack (an id of [`StackBatch::stacks`]).
    Other { stack: u32 },
}

/// What the kernel said of a thread at a sample: `/proc/PID/task/TID/{stat,syscall,wchan}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KernelState {
    /// The state letter: `R` running, `S` sleeping, `D` uninterruptible (I/O), ...
    pub state: char,
    /// The system call it is blocked in (x86-64 numbers); `None` while running or unread.
    pub syscall: Option<u32>,
    /// The kernel function it waits in (`hrtimer_nanosleep`); `None` while running or unread.
    /// Shared: a handful of names stand for every sample of a day of ranks.
    pub wchan: Option<std::sync::Arc<str>>,
    /// The letter changed while the stack was read with the GIL free: the stack is of the call
    /// between the two sides, the letter and call are of its blocked side, and whether the thread
    /// was on its CPU in the call at the read is for its clocks to say.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub across: bool,
}

/// One sample of one process's main thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadSample {
    /// When, in microseconds since the Unix epoch, as every other sample.
    pub t_us: i64,
    pub pid: u32,
    /// The stack, outermost frame first (an id of [`StackBatch::stacks`]).
    pub stack: u32,
    pub kernel: KernelState,
    pub gil: Gil,
    /// The thread's clocks at the sample; `None` where the kernel keeps no schedstat, or in a
    /// recording made before gpulse read them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ThreadClock>,
}

/// A thread's own clocks, as the kernel keeps them (`/proc/PID/task/TID/schedstat`): time on a
/// CPU and time ready to run but waiting for one, in µs since the thread started. The difference
/// of two samples' clocks splits the time between them into running, waiting for a core, and off
/// the CPU, where one snapshot can only say `R`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadClock {
    pub cpu_us: u64,
    pub wait_us: u64,
}

/// What the sampler sends up the pipeline: the frames and stacks new since its last batch, under
/// the ids that every later sample uses, and the samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StackBatch {
    pub frames: Vec<(u32, PyFrame)>,
    /// Frame ids, outermost first.
    pub stacks: Vec<(u32, Vec<u32>)>,
    /// Processes first sampled since the last batch.
    pub processes: Vec<SampledProcess>,
    pub samples: Vec<ThreadSample>,
    /// The sampler's own rate when the batch was sent, per process.
    pub rate_hz: Vec<(u32, f64)>,
    /// Why a process could not be sampled, said once each (a refused ptrace, an unsupported
    /// Python).
    pub refusals: Vec<(u32, String)>,
}

/// A whole run's samples, the batches put together.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stacks {
    /// By id: frame `i` is `frames[i]`.
    pub frames: Vec<PyFrame>,
    /// By id, frame ids outermost first.
    pub stacks: Vec<Vec<u32>>,
    pub processes: Vec<SampledProcess>,
    /// In time order.
    pub samples: Vec<ThreadSample>,
    /// Each process's sampling rate, the last one heard.
    pub rate_hz: Vec<(u32, f64)>,
    pub refusals: Vec<(u32, String)>,
}

impl Stacks {
    /// Adds a batch; ids past the end are grown into (a batch names each id once).
    pub fn add(&mut self, batch: StackBatch) {
        for (id, f) in batch.frames {
            let id = id as usize;
            if self.frames.len() <= id {
                self.frames
                    .resize(id + 1, PyFrame { file: String::new(), line: 0, function: String::new(), code: None });
            }
            self.frames[id] = f;
        }
        for (id, s) in batch.stacks {
            let id = id as usize;
            if self.stacks.len() <= id {
                self.stacks.resize(id + 1, Vec::new());
            }
            self.stacks[id] = s;
        }
        // A process told again ran `exec` since (a child first seen as its parent's fork): the
        // later telling is the program sampled since, in the first one's place.
        for p in batch.processes {
            match self.processes.iter_mut().find(|q| q.pid == p.pid) {
                Some(q) => *q = p,
                None => self.processes.push(p),
            }
        }
        for (pid, hz) in batch.rate_hz {
            match self.rate_hz.iter_mut().find(|r| r.0 == pid) {
                Some(r) => r.1 = hz,
                None => self.rate_hz.push((pid, hz)),
            }
        }
        self.refusals.extend(batch.refusals);
        // A recording's samples come in one batch: taken whole, not copied beside themselves.
        if self.samples.is_empty() {
            self.samples = batch.samples;
        } else {
            self.samples.extend(batch.samples);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// A stack's frames, outermost first; empty for an unknown id.
    pub fn frames_of(&self, stack: u32) -> impl DoubleEndedIterator<Item = &PyFrame> {
        self.stacks.get(stack as usize).into_iter().flatten().filter_map(|f| self.frames.get(*f as usize))
    }

    /// The PIDs that have samples, in the order the sampler first described them (the job's main
    /// process first), then any it did not describe, in the order first sampled.
    pub fn sampled_pids(&self) -> Vec<u32> {
        let mut pids: Vec<u32> = Vec::new();
        for s in &self.samples {
            if !pids.contains(&s.pid) {
                pids.push(s.pid);
            }
        }
        pids.sort_by_key(|pid| self.processes.iter().position(|p| p.pid == *pid).unwrap_or(usize::MAX));
        pids
    }

    pub fn process(&self, pid: u32) -> Option<&SampledProcess> {
        self.processes.iter().find(|p| p.pid == pid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_site_names_the_file_by_its_last_two_components() {
        let f = |file: &str| PyFrame { file: file.into(), line: 88, function: "fetch".into(), code: None };
        assert_eq!(f("/usr/lib/python3/site-packages/torch/optim/adam.py").site(), "optim/adam.py:88 fetch");
        assert_eq!(f("train.py").site(), "train.py:88 fetch");
        assert_eq!(f("/train.py").site(), "/train.py:88 fetch");
        assert_eq!(f("/w/train.py").site(), "w/train.py:88 fetch");
    }

    #[test]
    fn batches_add_up_to_the_run() {
        let frame = |n: &str| PyFrame { file: "a.py".into(), line: 1, function: n.into(), code: None };
        let mut s = Stacks::default();
        s.add(StackBatch {
            frames: vec![(0, frame("main")), (1, frame("step"))],
            stacks: vec![(0, vec![0, 1])],
            ..Default::default()
        });
        s.add(StackBatch { frames: vec![(2, frame("sync"))], stacks: vec![(1, vec![0, 2])], ..Default::default() });
        let names: Vec<&str> = s.frames_of(1).map(|f| f.function.as_str()).collect();
        assert_eq!(names, ["main", "sync"]);
        assert_eq!(s.frames_of(7).count(), 0);
    }

    /// A process told again (it ran `exec`) is the later telling, in the first one's place.
    #[test]
    fn a_process_told_again_is_its_later_program() {
        let p = |pid, command: &str, rank| SampledProcess {
            pid,
            role: ProcessRole::Main,
            python: "3.11.7".into(),
            command: command.into(),
            rank,
            gil_read: Some(true),
        };
        let rank = Some(Rank { rank: 1, world_size: 2, local_rank: Some(1), device: Some(1) });
        let mut s = Stacks::default();
        s.add(StackBatch {
            processes: vec![p(10, "python3 train.py", None), p(11, "python3 train.py", None)],
            ..Default::default()
        });
        s.add(StackBatch { processes: vec![p(11, "/venv/bin/python3 train.py", rank)], ..Default::default() });
        assert_eq!(s.processes, [p(10, "python3 train.py", None), p(11, "/venv/bin/python3 train.py", rank)]);
    }
}

#[cfg(test)]
mod rank_tests {
    use super::Rank;

    fn env(vars: &[&str]) -> Vec<u8> {
        vars.join("\0").into_bytes()
    }

    /// torchrun's environment gives the rank; `CUDA_VISIBLE_DEVICES` maps the local rank to
    /// NVML's index, and a list of UUIDs maps to none.
    #[test]
    fn a_rank_is_read_from_its_environment() {
        let r = Rank::from_environ(&env(&["PATH=/bin", "RANK=3", "LOCAL_RANK=1", "WORLD_SIZE=4"])).unwrap();
        assert_eq!(r, Rank { rank: 3, world_size: 4, local_rank: Some(1), device: Some(1) });
        let r = Rank::from_environ(&env(&["RANK=1", "LOCAL_RANK=1", "WORLD_SIZE=2", "CUDA_VISIBLE_DEVICES=4,6"]));
        assert_eq!(r.unwrap().device, Some(6));
        let r = Rank::from_environ(&env(&["RANK=0", "LOCAL_RANK=0", "WORLD_SIZE=1", "CUDA_VISIBLE_DEVICES=GPU-9a1b"]));
        assert_eq!(r.unwrap().device, None);
        // Not a rank: no world, a rank outside it, a name that only ends in RANK.
        assert_eq!(Rank::from_environ(&env(&["RANK=0"])), None);
        assert_eq!(Rank::from_environ(&env(&["RANK=2", "WORLD_SIZE=2"])), None);
        assert_eq!(Rank::from_environ(&env(&["NODE_RANK=0", "WORLD_SIZE=2"])), None);
        // Lightning's other processes: LOCAL_RANK on the first node, nothing said on another.
        let r = Rank::from_environ(&env(&["LOCAL_RANK=1", "NODE_RANK=0", "WORLD_SIZE=2"])).unwrap();
        assert_eq!((r.rank, r.world_size), (1, 2));
        assert_eq!(Rank::from_environ(&env(&["LOCAL_RANK=1", "NODE_RANK=1", "WORLD_SIZE=4"])), None);
    }
}
