//! The words and the advice for a cause of the main thread's idle time, from its mechanism.

use super::{Domain, ThreadState};

pub(super) fn upper(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

/// The account's name for people: the state, its library, its site.
pub(super) fn label(state: ThreadState, domain: Option<Domain>, recompile: bool, site: Option<&str>) -> String {
    let what = match (state, domain) {
        (_, Some(Domain::Compile)) if recompile => "the main thread recompiling (torch.compile)".to_owned(),
        (ThreadState::Python, Some(d)) => format!("the main thread in {}", d.words()),
        // A collective is what the state already says.
        (ThreadState::PeerWait, Some(Domain::Collective)) => format!("the main thread {}", state.words()),
        (s, Some(d)) => format!("the main thread {} in {}", s.words(), d.words()),
        (s, None) => format!("the main thread {}", s.words()),
    };
    match site {
        Some(site) => format!("{what} at {site}"),
        None => what,
    }
}

pub(super) const OPTIMIZER_ADVICE: [&str; 2] = [
    "a fused or foreach optimizer steps on the GPU in a few kernels: torch.optim.AdamW(params, fused=True) (or foreach=True)",
    "keep the parameters and the optimizer's state on the GPU",
];

/// What a cause's advice is made from: its mechanism, and what else the run said of it.
pub(super) struct Situation<'a> {
    pub state: ThreadState,
    pub domain: Option<Domain>,
    pub recompile: bool,
    pub on_gpu: bool,
    /// Torch's own Python leads its samples: the line launches the GPU's work.
    pub launches: bool,
    /// A CPU op with the other threads busy: the cores they kept.
    pub cpu_cores: Option<f64>,
    pub site: Option<&'a gpulse_model::PyFrame>,
    /// Where the GPU's queue drains, and whether by an explicit synchronize.
    pub drain: Option<(&'a str, bool)>,
    /// The GIL's or the lock's holder's site.
    pub holder: Option<&'a str>,
    /// Values read back one small op at a time.
    pub read_back: bool,
    /// Torch's ops on the CPU (no GPU used), and whether they are the step's own.
    pub cpu_torch: bool,
    pub cpu_step: bool,
    /// The GPUs read; none where no driver answered.
    pub gpus: usize,
    /// Waiting for a thread pool whose threads run Python.
    pub pool_threads: bool,
    /// Another package's function the line calls, and " at SITE".
    pub call: Option<&'a str>,
    /// The call is the job's own function beside the training step (an `evaluate()`).
    pub own_call: bool,
    pub at_site: &'a str,
    /// A quarter or more of the launching is the optimizer's.
    pub optimizer: bool,
    /// Running Python on a saturated host without the thread's clocks to tell the wait apart.
    pub saturated_python: bool,
    /// Waiting for the DataLoader: its settings' advice, and its workers' slowest line's.
    pub loader_wait: Option<String>,
    pub workers: Option<String>,
}

/// What to do: the mechanism's advice, where a more particular one does not replace it, then what
/// the run adds to it.
pub(super) fn advise(s: &Situation) -> Vec<String> {
    let at = s.site.map(|f| format!(" ({})", f.site())).unwrap_or_default();
    let mut out = if let (Some(c), true, true) = (s.call, s.on_gpu, s.own_call) {
        vec![
            format!(
                "the loop calls {c}{} beside its training step, and it runs GPU work of its own and waits for it: call it every N steps, or on fewer batches",
                s.at_site
            ),
            format!(
                "inside {c}, keep its results on the GPU (correct += (pred == y).sum()) and read them back once after its last batch, under torch.inference_mode(), rather than with an .item() per batch"
            ),
        ]
    } else if let (Some(c), true) = (s.call, s.on_gpu) {
        vec![
            format!(
                "the loop calls {c}{}, which launches GPU work of its own one op after another while the GPU waits: call it every N steps, on fewer items, or on more items per call",
                s.at_site
            ),
            "its launches are the host's work: torch.compile(mode=\"reduce-overhead\") or CUDA graphs over what it runs cut them".to_owned(),
        ]
    } else if s.pool_threads {
        vec![format!(
            "the main thread waits for a thread pool{at} whose threads run Python at {}: Python runs one thread at a time under the GIL, so the pool only queues it; compute it with torch ops on the GPU, or in processes (a ProcessPoolExecutor, submitted a step ahead and collected a step later)",
            s.holder.unwrap_or_default()
        )]
    } else if s.cpu_torch && !s.cpu_step {
        vec![format!(
            "torch's ops{at} run on the CPU beside the step's forward, backward and optimizer (no GPU was used): run them every N steps or on less data, or on a GPU with the model"
        )]
    } else if s.cpu_step {
        vec![match s.gpus {
            0 => "no GPU was read (no NVIDIA driver answered): the step is the CPU's work; torch.set_num_threads(cores) and a larger batch use more of it, and on a machine with a GPU, model.to(\"cuda\") and each batch's .to(\"cuda\", non_blocking=True) move it there".to_owned(),
            n => format!(
                "the job used none of the machine's {n} GPU(s): move the model to one (model.to(\"cuda\")) and each batch with it (x.to(\"cuda\", non_blocking=True))"
            ),
        }]
    } else if s.read_back {
        vec![format!(
            "each value read back{at} waits for the GPU, one small op at a time: compute them on the GPU into one tensor (torch.stack, torch._foreach_norm) and read it back once, every N steps"
        )]
    } else {
        advice((s.state, s.domain), s.recompile, (s.on_gpu, s.launches, s.cpu_cores), s.site, s.drain, s.holder)
    };
    if s.optimizer {
        out.insert(1, OPTIMIZER_ADVICE[0].to_owned());
    }
    if s.saturated_python {
        out.push(
            "free cores for the job (host_saturated): the same Python runs faster on a core of its own".to_owned(),
        );
    }
    out.splice(0..0, s.workers.iter().chain(&s.loader_wait).cloned());
    out
}

/// What to do, for the mechanism the samples name.
fn advice(
    (state, domain): (ThreadState, Option<Domain>),
    recompile: bool,
    (on_gpu, launches, cpu_cores): (bool, bool, Option<f64>),
    site: Option<&gpulse_model::PyFrame>,
    drain: Option<(&str, bool)>,
    holder: Option<&str>,
) -> Vec<String> {
    let at = site.map(|s| format!(" ({})", s.site())).unwrap_or_default();
    let code = site.and_then(|s| s.code.as_deref()).unwrap_or("");
    let mut out: Vec<String> = match (state, domain) {
        (_, Some(Domain::Compile)) if recompile => vec![
            "torch.compile recompiles inside the loop: pad inputs to a few bucket sizes, or torch._dynamo.mark_dynamic(x, dim) on the dimension that varies".into(),
            "TORCH_LOGS=recompiles names the guard that fails each time".into(),
        ],
        (ThreadState::Python, Some(Domain::Optimizer)) => OPTIMIZER_ADVICE.iter().map(|a| (*a).to_owned()).collect(),
        // numpy on the main thread: preparing the batch or scoring it, the same CPU work in
        // the step, with a fix for each.
        (ThreadState::Python | ThreadState::Native, Some(Domain::HostMath)) => vec![
            format!("numpy{at} runs on the main thread, in the step, while the GPU waits: where it prepares the batch (augmentation, features), move it into the Dataset's __getitem__ or a collate_fn, so the DataLoader's workers (num_workers > 0) run it ahead of the step, or do it on the GPU as torch ops (torch.fft, torchvision.transforms.v2 on CUDA tensors)"),
            "where it scores the step's output, compute the metric on the GPU (torch ops, torchmetrics), or every N steps".to_owned(),
        ],
        (ThreadState::Python | ThreadState::Native, Some(Domain::Tokenize)) => vec![
            "tokenize in the DataLoader's workers, or ahead of time (datasets.map(tokenize, batched=True)), with a fast tokenizer".into(),
        ],
        (ThreadState::Python | ThreadState::Native, Some(Domain::Logging)) => {
            vec![format!(
                "log less often, and keep printing and formatting out of the step{at}: a CUDA tensor printed or formatted is copied to the host each time, once the GPU's queue has drained"
            )]
        }
        (ThreadState::Python | ThreadState::Native | ThreadState::Disk, Some(Domain::Serialize)) => vec![format!(
            "serializing{at} runs in the step: write every N steps or from a background thread, and append each step's record (one JSON line) instead of rewriting what grows"
        )],
        (ThreadState::Python | ThreadState::Native, Some(Domain::Allocator)) => {
            vec![format!("take torch.cuda.empty_cache() out of the loop{at}: the caching allocator reuses the memory")]
        }
        (ThreadState::Python | ThreadState::Native, Some(Domain::Gc)) => vec![format!(
            "gc.collect(){at} runs a full collection each time: call it every N steps, or gc.freeze() once after start-up so the collector skips what lives for the whole run"
        )],
        (_, Some(Domain::Import)) => vec![format!(
            "an import runs inside the loop{at}: import once, at the top of the module, before the loop"
        )],
        (ThreadState::Python | ThreadState::Native, Some(Domain::DataLoader)) => vec![
            "the DataLoader builds batches in the training process: num_workers > 0 moves it to worker processes".into(),
        ],
        (_, Some(Domain::Checkpoint)) => vec![
            "save asynchronously (torch.distributed.checkpoint.async_save, or a thread writing a CPU copy of the state_dict), or less often".into(),
        ],
        (_, Some(Domain::Subprocess)) => vec![format!(
            "the loop starts a process and waits for it{at}: run it every N steps or from a background thread; what such a tool reports is often readable in-process (GPU memory: torch.cuda.mem_get_info(), torch.cuda.memory_allocated())"
        )],
        (_, Some(Domain::Pool)) => vec![format!(
            "the loop waits for a multiprocessing pool's result{at}: submit it with map_async or apply_async and collect it a step later, so the pool works while the GPU does, or compute it on the GPU with torch ops"
        )],
        // Launches are the mechanism only where the time is in torch's own Python.
        (ThreadState::Python, _) if launches => vec![
            format!("launching the GPU's work{at} is the step's critical path: do more work per launch, with a larger batch or gradient accumulation"),
            "cut launch overhead with torch.compile(mode=\"reduce-overhead\") or CUDA graphs".into(),
        ],
        (ThreadState::Python, _) => vec![format!(
            "the job's own Python{at} is the step's critical path: make it tensor operations, run it every N steps, or move it to the DataLoader's workers"
        )],
        // The process's other threads busy meanwhile: torch's intra-op pool runs the op, which
        // a launch never uses.
        (ThreadState::Native, _) if cpu_cores.is_some() && (launches || on_gpu) => vec![format!(
            "the op{at} runs on CPU tensors: besides the main thread, the process's other threads (torch's intra-op pool) kept {:.1} cores busy. Move it to the GPU (the tensors on CUDA), or into the DataLoader's workers, where it overlaps the GPU's work",
            cpu_cores.unwrap_or_default()
        )],
        // torch lets the GIL go for each op: on CUDA tensors the time is the launches, on CPU
        // tensors the op itself, and the samples cannot tell the two apart.
        (ThreadState::Native, _) if launches => vec![
            format!("torch's ops{at} hold the main thread with the GIL released: on CUDA tensors that is launching the GPU's work, the step's critical path: do more work per launch (a larger batch, gradient accumulation), or cut launch overhead with torch.compile(mode=\"reduce-overhead\") or CUDA graphs"),
            "on CPU tensors it is the ops themselves: move them to the GPU, or to the DataLoader's workers".into(),
        ],
        (ThreadState::Native, _) if on_gpu => vec![
            format!("native code{at} runs on the main thread with the GIL released: a torch op on CPU tensors, numpy or PIL is CPU work, to run on the GPU as tensor ops or in the DataLoader's workers, where it overlaps the GPU's work"),
            "a torch op on CUDA tensors is launching the GPU's work: do more per launch (a larger batch), or cut launch overhead with torch.compile(mode=\"reduce-overhead\") or CUDA graphs".into(),
        ],
        (ThreadState::Native, _) => vec![format!(
            "native CPU code{at} runs on the main thread with the GIL released (a torch CPU op, numpy, PIL): run it on the GPU as tensor ops on CUDA tensors, or in the DataLoader's workers, where it overlaps the GPU's work"
        )],
        (ThreadState::CoreWait, _) => vec![
            "the main thread is ready to run but every core is taken: free cores for the job (fewer DataLoader workers, torch.set_num_threads, OMP_NUM_THREADS=1 in workers, or fewer jobs on the node)".into(),
        ],
        (ThreadState::GilWait, _) => vec![format!(
            "another thread holds the GIL{}: move its pure-Python work to a process (multiprocessing, a DataLoader worker), or make it release the GIL",
            holder.map(|h| format!(" at {h}")).unwrap_or_default()
        )],
        (ThreadState::Sleep, _) => vec![format!("take the sleep out of the loop{at}")],
        (ThreadState::Network, _) => vec![format!(
            "overlap the network fetch with compute{at}: fetch in the DataLoader's workers or a background thread, a batch ahead, or cache the data locally"
        )],
        // The line says which way the data goes: a sync to storage, a write, or a read.
        (ThreadState::Disk, _) if super::classify::syncs_a_file(code) => vec![format!(
            "the main thread waits for storage to confirm a write{at}: an fsync in the step costs a round trip to the device each time; sync every N steps or at the end, or write and sync from a background thread"
        )],
        (ThreadState::Disk, _) if super::classify::writes_to_a_file(code) => {
            vec![format!(
                "the main thread waits on a write{at}: buffer it and write every N steps, or hand it to a background thread with a queue"
            )]
        }
        (ThreadState::Disk, _) => vec![format!(
            "the main thread waits on storage{at}: read in the DataLoader's workers, keep the data on local disk or in memory, and write checkpoints asynchronously"
        )],
        // What the loader can change depends on what it already does: the split adds it from
        // the loader's settings (`rules::workers_wait_advice`).
        (ThreadState::Ipc, Some(Domain::DataLoader)) => Vec::new(),
        (ThreadState::Ipc, _) => vec![format!("the main thread waits for another process{at}: let that work run ahead, a batch in advance")],
        (ThreadState::Lock, _) => vec![format!(
            "the main thread waits for a lock or queue of its own threads{at}{}: hold a lock only around what it guards (a copy of the state), not around slow work such as saving or I/O, or hand the work over through a queue a step ahead",
            holder.map(|h| format!(", while another thread ran Python at {h}")).unwrap_or_default()
        )],
        (ThreadState::PeerWait, _) => vec![format!(
            "the main thread waits for the other ranks{at}: the slowest rank sets every rank's pace; `gpulse run` over the whole launcher (torchrun ...) samples every rank and names the one they wait for"
        )],
        (ThreadState::GpuSync | ThreadState::Other, _) => vec![format!(
            "py-spy dump --pid PID --native while it happens shows the native call{at}"
        )],
    };
    match drain.filter(|_| matches!(state, ThreadState::Python | ThreadState::Native)) {
        Some((d, true)) => out.push(format!(
            "the GPU's queue drains at {d}, an explicit synchronize: take it out of the step (time the GPU with torch.cuda.Event(enable_timing=True) instead), so the host's next launches overlap the GPU's work"
        )),
        Some((d, false)) => out.push(format!(
            "the GPU's queue drains at {d}: accumulate on the device (total += loss.detach()) and call .item() every N steps, so the host's next launches overlap the GPU's work"
        )),
        None => {}
    }
    out
}
