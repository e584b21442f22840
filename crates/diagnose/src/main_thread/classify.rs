//! What a sampled thread was doing, from mechanism: the kernel's state and system call, the
//! wait channel, who held the GIL, and the frames (the line a C call was made from says what it
//! calls). No threshold here: each rule is what the kernel or the interpreter shows for one
//! mechanism.

pub(crate) use super::own::torch_source;
pub use super::own::{own_code, timed_by_gpulse};
use gpulse_model::{Gil, PyFrame, Stacks, ThreadSample};
use serde::Serialize;

use crate::Basis;

/// Declares the states once, each with its name and its words (its ledger account's name is
/// `main_thread_` and its name): the set of names is a [`gpulse_base::words!`] set, and each row
/// adds its words.
macro_rules! thread_states {
    ($($(#[doc = $doc:literal])* $variant:ident => $name:literal, $words:literal;)*) => {
        gpulse_base::words! {
            /// What a thread was doing at a sample.
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
            #[serde(rename_all = "snake_case")]
            pub enum ThreadState {
                $($(#[doc = $doc])* $variant => $name,)*
            }
        }

        impl ThreadState {
            /// Its ledger account's name: the GPU idle while the main thread was in this state.
            pub const fn account_name(self) -> &'static str {
                match self {
                    $(ThreadState::$variant => concat!("main_thread_", $name),)*
                }
            }

            /// In words, after "the main thread ...".
            pub const fn words(self) -> &'static str {
                match self {
                    $(ThreadState::$variant => $words,)*
                }
            }
        }
    };
}

thread_states! {
    /// Running code on a CPU: Python, or native code called from Python that kept the GIL.
    Python => "python", "running Python on the host";
    /// Running native code that let the GIL go: a torch CPU op, numpy, PIL, a codec.
    Native => "native", "running native code with the GIL released";
    /// Ready to run, waiting for a core: the host's other threads and processes hold them all
    /// (measured by the thread's clocks).
    CoreWait => "core_wait", "waiting for a core";
    /// Blocked on the device: `.item()`, `.cpu()`, `synchronize`, a blocking copy.
    GpuSync => "gpu_sync", "waiting for the GPU to finish";
    /// Ready to run Python, waiting for another thread to let the GIL go.
    GilWait => "gil_wait", "waiting for the GIL";
    Sleep => "sleep", "sleeping";
    /// A socket.
    Network => "network", "waiting on a socket";
    /// File I/O, or uninterruptible sleep in the kernel.
    Disk => "disk", "waiting on file I/O";
    /// Another process: a pipe, a queue, a DataLoader's result queue, a child.
    Ipc => "ipc", "waiting on another process";
    /// A lock or a queue of its own threads.
    Lock => "lock", "waiting on a lock of its own threads";
    /// In a collective of `torch.distributed` (a barrier, an all-reduce, an all-gather): waiting
    /// for the other ranks to reach it.
    PeerWait => "peer_wait", "waiting for the other ranks in a collective";
    Other => "other", "blocked in the kernel";
}

gpulse_base::words! {
    /// The library a sample's frames are in, where it says what the time is for.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Domain {
        /// `torch.compile` (Dynamo, Inductor): the first compile before the loop, a recompile in it.
        Compile => "compile",
        Optimizer => "optimizer",
        Backward => "backward",
        DataLoader => "dataloader",
        Checkpoint => "checkpoint",
        /// The CUDA caching allocator's Python side (`empty_cache`, `memory_stats`).
        Allocator => "allocator",
        Tokenize => "tokenize",
        /// numpy, pandas, scikit-learn, SciPy.
        HostMath => "host_math",
        /// logging, print, progress bars, experiment trackers.
        Logging => "logging",
        /// json, pickle, csv or yaml turning objects into text or bytes (a history file, a metrics
        /// dump), outside a checkpoint's save.
        Serialize => "serialize",
        Collective => "collective",
        /// `gc.collect()`: a full collection, called from the job's code.
        Gc => "gc",
        /// The import system: an import run inside the loop.
        Import => "import",
        /// A child process the job starts and waits for (`subprocess.run`, `check_output`).
        Subprocess => "subprocess",
        /// A `multiprocessing` pool's map or apply, whose workers do the step's work.
        Pool => "pool",
    }
}

impl Domain {
    pub const fn words(self) -> &'static str {
        match self {
            Domain::Compile => "torch.compile",
            Domain::Optimizer => "the optimizer step",
            Domain::Backward => "the backward pass",
            Domain::DataLoader => "the DataLoader",
            Domain::Checkpoint => "writing a checkpoint",
            Domain::Allocator => "the CUDA caching allocator",
            Domain::Tokenize => "tokenization",
            Domain::HostMath => "numpy, pandas or scikit-learn",
            Domain::Logging => "logging and printing",
            Domain::Serialize => "serialization (json, pickle, csv, yaml)",
            Domain::Collective => "a collective (torch.distributed)",
            Domain::Gc => "the garbage collector (gc.collect)",
            Domain::Import => "the import system",
            Domain::Subprocess => "a child process it starts (subprocess)",
            Domain::Pool => "a multiprocessing pool's map",
        }
    }
}

/// One sample, classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Class {
    pub state: ThreadState,
    pub domain: Option<Domain>,
    /// Measured where the kernel or the interpreter says it outright; inferred where a frame's
    /// source line or file had to say it.
    pub basis: Basis,
}

/// x86-64 system call numbers (`/proc/PID/task/TID/syscall` gives the number).
mod nr {
    pub const READ: u32 = 0;
    pub const WRITE: u32 = 1;
    pub const POLL: u32 = 7;
    pub const IOCTL: u32 = 16;
    pub const PREAD64: u32 = 17;
    pub const PWRITE64: u32 = 18;
    pub const READV: u32 = 19;
    pub const WRITEV: u32 = 20;
    pub const SELECT: u32 = 23;
    pub const NANOSLEEP: u32 = 35;
    pub const CONNECT: u32 = 42;
    pub const ACCEPT: u32 = 43;
    pub const SENDTO: u32 = 44;
    pub const RECVFROM: u32 = 45;
    pub const SENDMSG: u32 = 46;
    pub const RECVMSG: u32 = 47;
    pub const WAIT4: u32 = 61;
    pub const FSYNC: u32 = 74;
    pub const FDATASYNC: u32 = 75;
    pub const FUTEX: u32 = 202;
    pub const CLOCK_NANOSLEEP: u32 = 230;
    pub const EPOLL_WAIT: u32 = 232;
    pub const WAITID: u32 = 247;
    pub const OPENAT: u32 = 257;
    pub const PSELECT6: u32 = 270;
    pub const PPOLL: u32 = 271;
    pub const EPOLL_PWAIT: u32 = 281;
    pub const ACCEPT4: u32 = 288;
    pub const RECVMMSG: u32 = 299;
    pub const SENDMMSG: u32 = 307;
    pub const EPOLL_PWAIT2: u32 = 441;
}

/// Whether a file path lies in a package or module, by its path components.
fn in_module(file: &str, module: &str) -> bool {
    // After each `/`, not a substring search: a searcher built per call was most of a
    // diagnosis's classifying.
    file.starts_with(module) || file.match_indices('/').any(|(i, _)| file[i + 1..].starts_with(module))
}

/// Whether a file is torch's or safetensors' saving and loading.
fn checkpoint(file: &str) -> bool {
    in_module(file, "torch/serialization.py")
        || in_module(file, "safetensors/")
        || in_module(file, "torch/distributed/checkpoint/")
}

/// Whether a frame is where a backward pass begins: `Tensor.backward`, `torch.autograd.backward`
/// or the engine's entry (not any autograd frame: a custom `autograd.Function` runs in forwards).
pub(super) fn backward_entry(f: &PyFrame) -> bool {
    (in_module(&f.file, "torch/autograd/graph.py") && f.function == "_engine_run_backward")
        || (in_module(&f.file, "torch/autograd/__init__.py") && f.function == "backward")
        || (in_module(&f.file, "torch/_tensor.py") && f.function.ends_with("backward"))
}

/// Whether a frame drives a `torch.compile` build: Dynamo's frame conversion or Inductor's
/// `compile_fx`, through which every build passes (a backward's too).
fn compile_driver(f: &PyFrame) -> bool {
    in_module(&f.file, "torch/_dynamo/convert_frame.py") || in_module(&f.file, "torch/_inductor/compile_fx.py")
}

/// Whether a stack runs a step's backward pass: a backward entry that no build drives (AOT
/// autograd traces the backward through the same entry while it compiles a forward).
pub(super) fn step_backward<'a>(frames: impl IntoIterator<Item = &'a PyFrame>) -> bool {
    for f in frames {
        if compile_driver(f) {
            return false;
        }
        if backward_entry(f) {
            return true;
        }
    }
    false
}

/// Whether a frame runs what `torch.compile` built rather than builds it: the generated graph,
/// the kernels' launchers, CUDA graphs' replays, and the wrappers around a call of the compiled
/// model. A kernel's first compile and autotuning, under the launchers' own module, build.
fn compiled_runtime(f: &PyFrame) -> bool {
    let p = f.file.as_str();
    let builds = ["precompile", "autotune", "benchmark", "compile"].iter().any(|w| f.function.contains(w));
    super::own::compiled_code(p)
        || (in_module(p, "torch/_inductor/runtime/") && !builds)
        || (in_module(p, "torch/_inductor/cudagraph_trees.py") && !f.function.contains("record"))
        || in_module(p, "torch/_inductor/output_code.py")
        || in_module(p, "torch/_dynamo/eval_frame.py")
        || in_module(p, "torch/_dynamo/external_utils.py")
        || (in_module(p, "torch/_inductor/utils.py") && f.function.starts_with("align_inputs_from_check_idxs"))
}

/// The frames' library, innermost first: the deepest frame in a known library names it.
pub fn domain(frames: &[&PyFrame]) -> Option<Domain> {
    // An import runs the imported module's code: whatever library that is, the time is the
    // import's. One that `torch.compile` makes while it builds (its backends load lazily) is
    // the compile's: every build passes through Dynamo's frame conversion or Inductor's
    // `compile_fx` (a backward's, on the autograd engine's call).
    if let Some(i) = frames.iter().position(|f| f.file.starts_with("<frozen importlib")) {
        return Some(if frames[..i].iter().any(|f| compile_driver(f)) { Domain::Compile } else { Domain::Import });
    }
    // Under what `torch.compile` built (its graph, its kernels' launchers, the wrappers that call
    // them) the compiled model runs: launching, as its forward would, not compiling.
    let mut compiled = false;
    for f in frames.iter().rev() {
        let p = f.file.as_str();
        if compiled_runtime(f) {
            compiled = true;
            continue;
        }
        let d = if in_module(p, "torch/_dynamo/") || in_module(p, "torch/_inductor/") {
            if compiled {
                continue;
            }
            Domain::Compile
        } else if in_module(p, "torch/optim/") {
            Domain::Optimizer
        } else if in_module(p, "torch/autograd/") || in_module(p, "torch/_tensor.py") && f.function == "backward" {
            Domain::Backward
        } else if in_module(p, "torch/utils/data/") {
            Domain::DataLoader
        } else if checkpoint(p) {
            Domain::Checkpoint
        } else if in_module(p, "torch/cuda/memory.py") {
            Domain::Allocator
        } else if in_module(p, "tokenizers/") || p.contains("/tokenization_") || in_module(p, "sentencepiece/") {
            Domain::Tokenize
        } else if in_module(p, "numpy/")
            || in_module(p, "pandas/")
            || in_module(p, "sklearn/")
            || in_module(p, "scipy/")
        {
            Domain::HostMath
        } else if in_module(p, "logging/__init__.py")
            // Formatting a tensor to print it: its repr runs ops on it and reads it back.
            || in_module(p, "torch/_tensor_str.py")
            || in_module(p, "tqdm/")
            || in_module(p, "wandb/")
            || in_module(p, "torch/utils/tensorboard/")
        {
            Domain::Logging
        } else if in_module(p, "json/") || in_module(p, "pickle.py") || in_module(p, "csv.py") || in_module(p, "yaml/")
        {
            // torch.save pickles: a serializer under a checkpoint's frames is the checkpoint's.
            match frames.iter().any(|f| checkpoint(&f.file)) {
                true => Domain::Checkpoint,
                false => Domain::Serialize,
            }
        } else if p.ends_with("/subprocess.py") || in_module(p, "concurrent/futures/process.py") {
            // Compiling starts and waits for its workers: the compile's time.
            let compiling = |f: &PyFrame| {
                (in_module(&f.file, "torch/_inductor/") || in_module(&f.file, "torch/_dynamo/")) && !compiled_runtime(f)
            };
            if frames.iter().any(|f| compiling(f)) { Domain::Compile } else { Domain::Subprocess }
        } else if in_module(p, "multiprocessing/pool.py") {
            Domain::Pool
        } else if in_module(p, "torch/distributed/distributed_c10d.py")
            || in_module(p, "torch/nn/parallel/distributed.py")
        {
            Domain::Collective
        } else {
            continue;
        };
        return Some(d);
    }
    // A print() or a call into the allocator is a C call: its line says so. A print's line may
    // sit under a tensor's `__format__` (an f-string of a CUDA tensor reads it back).
    if frames.iter().rev().take(3).any(|f| f.code.as_deref().is_some_and(|c| c.starts_with("print("))) {
        return Some(Domain::Logging);
    }
    let code = frames.last().and_then(|f| f.code.as_deref()).unwrap_or("");
    if code.contains("empty_cache(") {
        return Some(Domain::Allocator);
    }
    if code.contains("gc.collect(") {
        return Some(Domain::Gc);
    }
    if code.contains("pickle.dump") {
        return Some(Domain::Serialize);
    }
    None
}

/// Whether a frame's own line waits for the device: a C call that copies to the host or
/// synchronizes. Matched on the call as written, so `loss.item()` is one and `items()` is not.
pub fn syncs(frame: &PyFrame) -> bool {
    const CALLS: [&str; 9] = [
        ".item()",
        ".cpu()",
        ".tolist()",
        ".numpy()",
        "synchronize(",
        ".to(\"cpu\"",
        ".to('cpu'",
        ".nonzero(",
        "torch.equal(",
    ];
    torch_sync(frame) || frame.code.as_deref().is_some_and(|c| CALLS.iter().any(|call| c.contains(call)))
}

/// Whether a frame is one of torch's own calls that read a tensor back or synchronize, which the
/// job's line called as such (`torch.cuda.synchronize()`, `.tolist()`, a tensor in an f-string,
/// whose repr reads its values back in `torch/_tensor_str.py`).
pub fn torch_sync(frame: &PyFrame) -> bool {
    (in_module(&frame.file, "torch/cuda/") && frame.function == "synchronize")
        || (in_module(&frame.file, "torch/_tensor.py") && matches!(frame.function.as_str(), "tolist" | "__format__"))
        || (in_module(&frame.file, "torch/_tensor_str.py")
            && frame.code.as_deref().is_some_and(|c| c.contains(".item()") || c.contains(".tolist()")))
}

/// Whether a frame is a wait of the threading module or a queue between threads.
fn thread_lock_frame(f: &PyFrame) -> bool {
    let p = f.file.as_str();
    (p.ends_with("/threading.py")
        && matches!(f.function.as_str(), "wait" | "acquire" | "join" | "_wait_for_tstate_lock"))
        || (p.ends_with("/queue.py") && matches!(f.function.as_str(), "get" | "put" | "join"))
        || in_module(p, "concurrent/futures/")
        || f.code.as_deref().is_some_and(|c| c.contains(".acquire(") || c.contains(".wait("))
}

/// Whether a frame's line acquires a thread lock: `threading`'s `waiter.acquire()` under a
/// `Condition`, an `Event`, a queue and a future, `lock.acquire(block, timeout)` under a `join`,
/// or the job's own.
fn acquires_a_lock(f: &PyFrame) -> bool {
    f.code.as_deref().is_some_and(|c| c.contains(".acquire("))
}

/// Calls that make the storage keep what was written.
const SYNC_CALLS: [&str; 2] = ["fsync(", "fdatasync("];
/// Calls that write a file.
const WRITE_CALLS: [&str; 4] = [".write(", ".flush()", "os.pwrite(", ".tofile("];
/// Calls that read a file.
const READ_CALLS: [&str; 8] =
    ["os.read(", ".read(", ".readinto(", ".readline(", "os.pread(", ".fromfile(", "np.load(", "torch.load("];
/// Calls that save an object to a file, with the write inside them.
const SAVE_CALLS: [&str; 2] = ["torch.save(", ".save("];

fn calls_any(code: &str, calls: &[&str]) -> bool {
    calls.iter().any(|call| code.contains(call))
}

/// Whether a line syncs a file to storage.
pub(crate) fn syncs_a_file(code: &str) -> bool {
    calls_any(code, &SYNC_CALLS)
}

/// Whether a line writes a file (a sync aside).
pub(crate) fn writes_to_a_file(code: &str) -> bool {
    calls_any(code, &WRITE_CALLS)
}

/// Whether a frame's line writes a file, or makes the storage keep it.
pub(crate) fn writes_a_file(f: &PyFrame) -> bool {
    f.code.as_deref().is_some_and(|c| syncs_a_file(c) || writes_to_a_file(c) || calls_any(c, &SAVE_CALLS))
}

/// Whether a frame's line reads or writes a file: the calls that release the GIL around the I/O.
fn reads_a_file(f: &PyFrame) -> bool {
    f.code.as_deref().is_some_and(|c| calls_any(c, &READ_CALLS) || syncs_a_file(c) || writes_to_a_file(c))
}

fn ipc_frame(f: &PyFrame) -> bool {
    let p = f.file.as_str();
    in_module(p, "multiprocessing/")
        || (in_module(p, "torch/utils/data/dataloader.py") && f.function.contains("data"))
        || p.ends_with("/subprocess.py")
}

fn network_frame(f: &PyFrame) -> bool {
    let p = f.file.as_str();
    p.ends_with("/socket.py")
        || p.ends_with("/ssl.py")
        || in_module(p, "http/")
        || in_module(p, "urllib3/")
        || in_module(p, "requests/")
        || in_module(p, "grpc/")
        || in_module(p, "botocore/")
        || f.code
            .as_deref()
            .is_some_and(|c| c.contains(".recv(") || c.contains(".recv_into(") || c.contains("urlopen("))
}

/// Classifies one sample of a thread whose stack is `stacks.stacks[sample.stack]`.
pub fn classify(stacks: &Stacks, sample: &ThreadSample) -> Class {
    let frames: Vec<&PyFrame> = stacks.frames_of(sample.stack).collect();
    classify_frames(&frames, sample)
}

/// [`classify`] on frames already looked up, outermost first.
pub fn classify_frames(frames: &[&PyFrame], sample: &ThreadSample) -> Class {
    let (state, basis) = state_of(frames, sample);
    Class { state, domain: domain(frames), basis }
}

/// A sample's state, and whether it was read or deduced.
pub(super) fn state_of(frames: &[&PyFrame], sample: &ThreadSample) -> (ThreadState, Basis) {
    use ThreadState::*;
    let k = &sample.kernel;
    let leaf = frames.last().copied();
    let any = |f: fn(&PyFrame) -> bool| frames.iter().rev().take(4).any(|fr| f(fr));
    let wchan = k.wchan.as_deref().unwrap_or("");
    let measured = |state| (state, Basis::Measured);
    let inferred = |state| (state, Basis::Inferred);
    let (state, basis) = if k.state == 'D' || (k.state == 'R' && matches!(k.syscall, Some(nr::FSYNC | nr::FDATASYNC))) {
        measured(Disk)
    } else if any(collective_frame) {
        // Inside a collective the rank waits for its peers, whether the backend blocks on a
        // socket (gloo), spins, or waits on the device (NCCL's barrier synchronizes).
        inferred(PeerWait)
    } else if leaf.is_some_and(syncs)
        && k.state != 'D'
        && !frames.iter().any(|f| in_module(&f.file, "torch/utils/data/"))
    {
        // The line is a copy to the host or a synchronize: spinning (R) or blocked, the thread
        // waits for the device. Not in a DataLoader's fetch, whose tensors are the host's (a
        // transform's `.numpy()`).
        inferred(GpuSync)
    } else if k.state == 'R'
        && sample.gil != Gil::Held
        && leaf.is_some_and(reads_a_file)
        && !any(ipc_frame)
        && !any(network_frame)
    {
        // A read releases the GIL for its system call: running without it on a line that reads
        // a file, the thread is in the kernel copying the file's pages.
        inferred(Disk)
    } else if k.state == 'R' && sample.gil != Gil::Held && leaf.is_some_and(sleeps) {
        // A sleep releases the GIL and takes it back once the thread runs again: runnable
        // without it on a line that sleeps, the thread was woken and waits for a core, time the
        // loop's own clock counts as the sleep's.
        inferred(Sleep)
    } else if k.state == 'R' && sample.gil == Gil::Free && leaf.is_some_and(acquires_a_lock) && !any(ipc_frame) {
        // A lock's acquire releases the GIL too: runnable without it on a line that does nothing
        // else (a future's result, a queue and a `Condition` all end in one), the thread was
        // woken as the lock was let go and waits for a core, time the loop's own clock counts as
        // the wait's.
        inferred(Lock)
    } else if k.state == 'R' && matches!(sample.gil, Gil::Other { .. }) && !leaf.is_some_and(releases_the_gil) {
        // Ready to run Python while another thread holds the GIL: it runs once the holder lets
        // go (its clocks say how much of the time it waited for a core meanwhile).
        measured(GilWait)
    } else if matches!(k.state, 'R') {
        measured(Python)
    } else {
        match k.syscall {
            Some(nr::NANOSLEEP | nr::CLOCK_NANOSLEEP) => measured(Sleep),
            _ if wchan.contains("nanosleep") => measured(Sleep),
            Some(nr::FUTEX) => match sample.gil {
                // Waiting for a multiprocessing pool, or the DataLoader's pin-memory thread: the
                // work is another process's.
                _ if any(ipc_frame) => inferred(Ipc),
                // Waiting for its own threads: a lock, a queue, a future, or a `with lock:`
                // block (the lock's C code has no frame of its own).
                _ if any(thread_lock_frame) || leaf.is_some_and(with_block) => inferred(Lock),
                Gil::Other { .. } => measured(GilWait),
                // The autograd engine's threads run the backward pass while the main thread
                // waits for them: host-side work of the step, native code called from Python.
                _ if frames.iter().any(|f| in_module(&f.file, "torch/autograd/")) => inferred(Python),
                _ => inferred(Other),
            },
            Some(nr::RECVFROM | nr::RECVMSG | nr::RECVMMSG | nr::SENDTO | nr::SENDMSG | nr::SENDMMSG) => {
                if any(ipc_frame) || wchan.contains("unix") { inferred(Ipc) } else { measured(Network) }
            }
            Some(nr::ACCEPT | nr::ACCEPT4 | nr::CONNECT) => measured(Network),
            Some(nr::WAIT4 | nr::WAITID) => measured(Ipc),
            Some(nr::READ | nr::READV | nr::WRITE | nr::WRITEV) if wchan.contains("pipe") => measured(Ipc),
            Some(nr::READ | nr::READV | nr::WRITE | nr::WRITEV)
                if wchan.contains("sk_wait") || wchan.contains("wait_woken") || wchan.contains("sock") =>
            {
                if any(ipc_frame) || wchan.contains("unix") { inferred(Ipc) } else { measured(Network) }
            }
            Some(
                nr::READ
                | nr::READV
                | nr::WRITE
                | nr::WRITEV
                | nr::PREAD64
                | nr::PWRITE64
                | nr::FSYNC
                | nr::FDATASYNC
                | nr::OPENAT,
            ) if !any(ipc_frame) && !any(network_frame) => inferred(Disk),
            Some(
                nr::POLL | nr::PPOLL | nr::SELECT | nr::PSELECT6 | nr::EPOLL_WAIT | nr::EPOLL_PWAIT | nr::EPOLL_PWAIT2,
            )
            | Some(nr::READ | nr::READV | nr::WRITE | nr::WRITEV)
            | None => {
                if any(ipc_frame) {
                    inferred(Ipc)
                } else if any(network_frame) {
                    inferred(Network)
                } else if any(thread_lock_frame) {
                    inferred(Lock)
                } else if leaf.is_some_and(sleeps) {
                    inferred(Sleep)
                } else {
                    inferred(Other)
                }
            }
            // A driver call (ioctl) from a line that does not sync: the CUDA runtime's own work.
            Some(nr::IOCTL) => inferred(Python),
            Some(_) => inferred(Other),
        }
    };
    (state, basis)
}

/// Whether a frame is a collective of `torch.distributed`: c10d's functions (`barrier`,
/// `all_reduce`, `all_gather`, `broadcast`, `init_process_group`'s rendezvous...), the
/// functional collectives, a work handle's `wait`, or FSDP's gathers and reductions.
fn collective_frame(f: &PyFrame) -> bool {
    let p = f.file.as_str();
    let name = f.function.as_str();
    in_module(p, "torch/distributed/distributed_c10d.py")
        || in_module(p, "torch/distributed/_functional_collectives.py")
        || in_module(p, "torch/distributed/rendezvous.py")
        || (in_module(p, "torch/distributed/fsdp/")
            && (name.contains("all_gather") || name.contains("reduce_scatter") || name.contains("wait")))
        || f.code.as_deref().is_some_and(|c| {
            ["dist.barrier(", "dist.all_reduce(", "dist.all_gather(", "dist.broadcast(", "dist.reduce_scatter("]
                .iter()
                .any(|call| c.contains(call))
        })
}

/// Whether a frame's line is a `with` statement: entering it may take a lock.
fn with_block(f: &PyFrame) -> bool {
    f.code.as_deref().is_some_and(|c| c.trim_start().starts_with("with "))
}

/// Whether a frame's line calls what releases the GIL while it runs or blocks: a running thread
/// there need not hold it, whoever does.
fn releases_the_gil(f: &PyFrame) -> bool {
    reads_a_file(f) || sleeps(f) || syncs(f)
}

/// Whether the frame's line calls a sleep (`time.sleep(…)`, `asyncio.sleep(…)`).
fn sleeps(f: &PyFrame) -> bool {
    f.code.as_deref().is_some_and(|c| c.contains("sleep("))
}

/// The frame a sample is charged to: the innermost of the job's own code (the line to change),
/// else the innermost frame.
pub fn site_frame(stacks: &Stacks, stack: u32) -> Option<u32> {
    let ids = stacks.stacks.get(stack as usize)?;
    ids.iter()
        .rev()
        .find(|id| stacks.frames.get(**id as usize).is_some_and(|f| own_code(&f.file)))
        .or(ids.last())
        .copied()
}

#[cfg(test)]
#[path = "classify_tests.rs"]
mod tests;
