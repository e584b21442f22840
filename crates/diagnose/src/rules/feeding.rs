//! Feeding the GPU: the thresholds and advice that the rules saying why a GPU waits on its host
//! (`utilization`, `steps`, `host`) share, kept here so that no rule reaches into another for
//! them. What every rule shares (`MIN_ACTIVE_S`, `mean`) is in `rules/mod.rs`.

use crate::Run;
use crate::run::mean;

/// Below this mean GPU-Util the GPU waits on its host and a training job leaves most of it
/// unused: above it, the GPU is fed however busy the host, and the remaining gap is usually one
/// of the other findings (stalls, imbalance) rather than a steady bottleneck.
pub(crate) const LOW_UTIL_PCT: f64 = 60.0;
/// A loop that waits for data a fifth of its wall time would run at least 1.25× faster with the
/// wait hidden behind compute; below that, other gaps usually matter more.
pub(crate) const DATA_WAIT_SHARE: f64 = 0.2;
/// DataLoader workers at this share of a core each are busy all the time: the input pipeline is
/// the limit, even when the GPU-Util it leaves is steady.
pub(crate) const WORKERS_BUSY_PCT: f64 = 70.0;
/// The first thing to do for a loop that waits for data, where no DataLoader was seen: whether it
/// uses one is not known.
const ADD_WORKERS: &str = "if the loop reads a torch DataLoader, give it worker processes: num_workers = the cores you can spare (start near os.cpu_count() - 2)";

/// Whether the job was seen using a torch DataLoader: its worker processes in the tree, or its
/// frames in the sampled stacks.
pub(crate) fn dataloader_seen(run: &Run) -> bool {
    run.worker_count > 0
        || run.stacks.processes.iter().any(|p| p.role == gpulse_model::ProcessRole::Worker)
        || run.stacks.frames.iter().any(|f| f.file.contains("torch/utils/data/"))
}
/// What else helps any loop that waits for data, where its DataLoader's settings are not known.
pub(crate) const INPUT_ADVICE: [&str; 3] = [
    "pin_memory=True, and .to(device, non_blocking=True) in the loop",
    "persistent_workers=True so workers survive between epochs; prefetch_factor=4 to queue more batches",
    AUGMENT,
];
const AUGMENT: &str = "move heavy augmentation to the GPU (torchvision.transforms.v2 on tensors) or precompute it";

/// A DataLoader's settings, as `--instrument` hears them at its first fresh iterator (the
/// training loader's, in a loop that evaluates later); each `None` where it was not said.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LoaderSettings {
    pub num_workers: Option<u64>,
    pub pin_memory: Option<bool>,
    pub persistent_workers: Option<bool>,
    pub prefetch_factor: Option<u64>,
    pub batch_size: Option<u64>,
}

pub(crate) fn loader_settings(run: &Run) -> Option<LoaderSettings> {
    let e = run.events.iter().find(|e| {
        e.0 == gpulse_model::EventKind::Mark
            && e.2.get("name").and_then(|n| n.as_str()) == Some("loader_start")
            && e.2.get("num_workers").is_some()
    })?;
    let u = |k: &str| e.2.get(k).and_then(serde_json::Value::as_u64);
    let b = |k: &str| e.2.get(k).and_then(serde_json::Value::as_bool);
    Some(LoaderSettings {
        num_workers: u("num_workers"),
        pin_memory: b("pin_memory"),
        persistent_workers: b("persistent_workers"),
        prefetch_factor: u("prefetch_factor"),
        batch_size: u("batch_size"),
    })
}

/// What the recording shows of the DataLoader's settings without `--instrument`: its workers
/// (processes of the tree), and whether it pins memory, from where the main thread waits for a
/// batch. A pinning loader's batches come from its pin-memory thread through a `queue.Queue`;
/// without one, straight from the workers through `multiprocessing`'s queue.
fn seen_settings(run: &Run) -> Option<LoaderSettings> {
    let workers = run.stacks.processes.iter().filter(|p| p.role == gpulse_model::ProcessRole::Worker).count();
    let workers = workers.max(run.worker_count);
    let st = &run.stacks;
    let mut pin_memory = None;
    for stack in &st.stacks {
        let frames: Vec<&gpulse_model::PyFrame> = stack.iter().filter_map(|i| st.frames.get(*i as usize)).collect();
        let Some(at) = frames
            .iter()
            .position(|f| f.file.ends_with("torch/utils/data/dataloader.py") && f.function.ends_with("_try_get_data"))
        else {
            continue;
        };
        match frames.get(at + 1).map(|f| f.file.as_str()) {
            Some(f) if f.ends_with("multiprocessing/queues.py") => pin_memory = pin_memory.or(Some(false)),
            Some(f) if f.ends_with("/queue.py") => pin_memory = Some(true),
            _ => {}
        }
    }
    (workers > 0 || pin_memory.is_some()).then(|| LoaderSettings {
        num_workers: (workers > 0).then_some(workers as u64),
        pin_memory,
        ..LoaderSettings::default()
    })
}

/// [`INPUT_ADVICE`] less what the loop's DataLoader already does, by its settings: as
/// `--instrument` heard them, else as the recording shows them.
pub(crate) fn input_advice(run: &Run) -> Vec<String> {
    let Some(s) = loader_settings(run).or_else(|| seen_settings(run)) else {
        return INPUT_ADVICE.iter().map(|a| (*a).to_owned()).collect();
    };
    let mut out = Vec::new();
    match s.pin_memory {
        Some(true) => {}
        _ => out.push("pin_memory=True, and .to(device, non_blocking=True) in the loop".to_owned()),
    }
    // Workers' settings mean nothing without workers: the advice to add them comes first.
    if s.num_workers.is_some_and(|n| n > 0) {
        let mut parts = Vec::new();
        if s.persistent_workers != Some(true) {
            parts.push("persistent_workers=True so workers survive between epochs");
        }
        if s.prefetch_factor.is_none_or(|p| p < 4) {
            parts.push("prefetch_factor=4 to queue more batches");
        }
        if !parts.is_empty() {
            out.push(parts.join("; "));
        }
    }
    out.push(AUGMENT.to_owned());
    out
}

/// What a loop waiting on its DataLoader's workers can change, less what its loader already does
/// by the settings `--instrument` heard: never `persistent_workers=True` to a loader that keeps
/// its workers.
pub(crate) fn workers_wait_advice(run: &Run) -> String {
    let s = loader_settings(run).or_else(|| seen_settings(run)).unwrap_or_default();
    let mut parts = vec![match s.num_workers {
        Some(n) if n > 0 => format!("more workers than its {n} (num_workers)"),
        _ => "more workers (num_workers)".to_owned(),
    }];
    match s.prefetch_factor {
        Some(p) if p >= 4 => {}
        Some(p) => parts.push(format!("prefetch_factor=4 (it is {p})")),
        None => parts.push("prefetch_factor".to_owned()),
    }
    if s.persistent_workers != Some(true) {
        parts.push("persistent_workers=True".to_owned());
    }
    format!("the loop waits for its DataLoader's workers: {}, or a faster __getitem__", parts.join(", "))
}

/// Whether the loop's DataLoader already keeps its workers between epochs, as `--instrument`
/// heard it.
pub(crate) fn persistent(run: &Run) -> bool {
    loader_settings(run).is_some_and(|s| s.persistent_workers == Some(true))
}

/// The settings as evidence: what the advice was read against.
pub(crate) fn settings_evidence(s: &LoaderSettings) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    let mut put = |k: &str, v: Option<serde_json::Value>| {
        if let Some(v) = v {
            m.insert(k.to_owned(), v);
        }
    };
    put("num_workers", s.num_workers.map(Into::into));
    put("pin_memory", s.pin_memory.map(Into::into));
    put("persistent_workers", s.persistent_workers.map(Into::into));
    put("prefetch_factor", s.prefetch_factor.map(Into::into));
    put("batch_size", s.batch_size.map(Into::into));
    m.into()
}

/// Cores the job could give DataLoader workers: those idle, by the machine's CPU (the job's own
/// busy cores are not free). `None` without the host's CPU and core count.
pub(crate) fn free_cores(run: &Run) -> Option<f64> {
    if run.cores == 0 {
        return None;
    }
    let host = run.host_cpu_mean()?;
    Some((run.cores as f64 * (100.0 - host) / 100.0).max(0.0))
}

/// The job's DataLoader workers running more threads than the machine has cores, while the job
/// itself keeps the machine busy: each worker's extra threads (BLAS, OpenMP) want a core of their
/// own, and they time-slice instead.
pub(crate) struct Oversubscribed {
    pub workers: usize,
    pub threads_per_worker: u32,
    pub tree_threads: Option<u32>,
    /// The tree's CPU, in cores.
    pub tree_cores: f64,
    pub cores: usize,
}

/// A worker above this share of a core runs more than one thread at once.
const MULTITHREADED_WORKER_PCT: f64 = 100.0;
/// The job's CPU at this share of the machine's cores fills it: nothing is left for a thread
/// that wakes.
const JOB_FILLS_PCT: f64 = 90.0;

/// Whether the workers' threads oversubscribe the cores: more worker threads than cores, each
/// worker busy above one core, and the tree's CPU filling the machine.
pub(crate) fn oversubscribed(run: &Run) -> Option<Oversubscribed> {
    let threads = run.worker_threads_max?;
    let tree_cores = run.tree_cpu_mean()? / 100.0;
    let fills = run.cores > 0 && tree_cores >= JOB_FILLS_PCT / 100.0 * run.cores as f64;
    let multi = run.worker_cpu_mean.is_some_and(|w| w > MULTITHREADED_WORKER_PCT);
    (run.worker_count > 0 && run.worker_count * threads as usize > run.cores && fills && multi).then_some(
        Oversubscribed {
            workers: run.worker_count,
            threads_per_worker: threads,
            tree_threads: run.tree_threads_max,
            tree_cores,
            cores: run.cores,
        },
    )
}

/// The advice for oversubscribed workers: fewer threads each, never more workers.
pub(crate) const THREADS_ADVICE: [&str; 2] = [
    "one thread per worker: torch.set_num_threads(1) in the DataLoader's worker_init_fn, or OMP_NUM_THREADS=1 (and MKL_NUM_THREADS=1, OPENBLAS_NUM_THREADS=1) in the job's environment",
    "do not add workers: each brings more threads to the same cores",
];

/// `num_workers` advice sized to the free cores, and fitted to what the workers do now.
pub(crate) fn workers_advice(run: &Run) -> String {
    let free = free_cores(run).map(|f| f.floor() as u64);
    let busy = run.worker_cpu_mean.is_some_and(|w| w >= WORKERS_BUSY_PCT);
    if let Some(blocked) = storage_blocked(run) {
        let who = if run.worker_count > 0 { "the DataLoader workers" } else { "the training process" };
        return format!(
            "{who} wait on storage, not on the CPU ({:.0}% of the time blocked in I/O, D state): read from faster storage (local NVMe, or the dataset copied to local disk or /dev/shm first) and in larger sequential reads (a sharded format such as WebDataset, or fewer, larger files); more workers overlap more reads only where the storage serves them in parallel",
            100.0 * blocked
        );
    }
    if let Some(o) = oversubscribed(run) {
        return format!(
            "the {} DataLoader workers run up to {} threads each on {} cores: {}",
            o.workers, o.threads_per_worker, o.cores, THREADS_ADVICE[0]
        );
    }
    match (run.tree_width > 0, run.worker_count, free) {
        (true, 0, Some(n)) if n > 0 && !dataloader_seen(run) => format!(
            "if the loop reads a torch DataLoader, it loads every batch in the training process (no worker seen): num_workers={n} uses the {n} free core{} of {}",
            if n == 1 { "" } else { "s" },
            run.cores
        ),
        (true, 0, _) if !dataloader_seen(run) => ADD_WORKERS.to_owned(),
        (true, 0, Some(0)) => format!(
            "num_workers=0: the DataLoader loads every batch in the training process, and none of the {} cores is free: workers would only compete with it; free cores first (other processes take them), or make __getitem__ cheaper",
            run.cores
        ),
        (true, 0, Some(n)) => format!(
            "num_workers=0: the DataLoader loads every batch in the training process; num_workers={} uses the {n} free core{} of {}",
            n.max(1),
            if n == 1 { "" } else { "s" },
            run.cores
        ),
        (true, 0, None) => ADD_WORKERS.to_owned(),
        (true, k, Some(n)) if busy && n > 0 => format!(
            "the {k} DataLoader workers are each busy most of a core: raise num_workers toward {} ({n} core{} still free) or make __getitem__ cheaper",
            k + n as usize,
            if n == 1 { " is" } else { "s are" }
        ),
        (true, k, _) if busy => format!(
            "the {k} DataLoader workers are each busy most of a core and no core is free: make __getitem__ cheaper (precompute, decode once, augment on the GPU) rather than adding workers"
        ),
        (true, k, _) => format!(
            "the {k} DataLoader workers are not busy: more workers will not help; the wait is elsewhere (reading storage, collate or pin_memory in the training process, or the workers restarting at each epoch)"
        ),
        (false, _, _) => ADD_WORKERS.to_owned(),
    }
}

/// A process blocked in I/O (D state) half the time or more waits on storage more than it does
/// anything else.
const IO_BLOCKED: f64 = 0.5;

/// The share of the time the processes that load data sat blocked in I/O, when that is half or
/// more: the DataLoader workers where there are any, else the training process itself.
pub(crate) fn storage_blocked(run: &Run) -> Option<f64> {
    let shares: Vec<f64> = if run.worker_count > 0 {
        run.io_blocked.iter().filter_map(|x| x.workers_share).collect()
    } else {
        run.io_blocked.iter().map(|x| if x.main { 1.0 } else { 0.0 }).collect()
    };
    mean(&shares).filter(|s| *s >= IO_BLOCKED)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The advice read against the settings `--instrument` heard: nothing the loader already does.
    #[test]
    fn input_advice_leaves_out_what_the_loader_already_does() {
        let mut r = Run::default();
        assert_eq!(input_advice(&r).len(), INPUT_ADVICE.len(), "no settings heard: all of it");
        let settings = serde_json::json!({"name": "loader_start", "num_workers": 4, "pin_memory": true,
            "persistent_workers": true, "prefetch_factor": 2, "batch_size": 64});
        r.events.push((gpulse_model::EventKind::Mark, 1.0, settings));
        let advice = input_advice(&r);
        assert!(!advice.iter().any(|a| a.contains("pin_memory") || a.contains("persistent_workers")), "{advice:?}");
        assert!(advice.iter().any(|a| a.contains("prefetch_factor=4")), "2 is torch's default: {advice:?}");
        assert_eq!(loader_settings(&r).unwrap().batch_size, Some(64));
        // Without workers, their settings mean nothing: only pinning and augmentation are left.
        r.events[0].2 = serde_json::json!({"name": "loader_start", "num_workers": 0, "pin_memory": false});
        let advice = input_advice(&r);
        assert!(advice[0].starts_with("pin_memory=True"), "{advice:?}");
        assert!(
            !advice.iter().any(|a| a.contains("prefetch_factor") || a.contains("persistent_workers")),
            "{advice:?}"
        );
    }

    /// Without `--instrument`, what the recording shows: a loop waiting in the pin-memory
    /// thread's `queue.Queue` pins memory already (no advice to), one waiting in the workers'
    /// `multiprocessing` queue does not.
    #[test]
    fn input_advice_reads_pinning_from_where_the_loop_waits() {
        let wait_in = |queue_file: &str| {
            let mut r = Run::default();
            let mut st = gpulse_model::Stacks::default();
            let f = |file: &str, function: &str| gpulse_model::PyFrame {
                file: file.into(),
                line: 1,
                function: function.into(),
                code: None,
            };
            st.frames = vec![
                f("/w/train.py", "main"),
                f("/v/site-packages/torch/utils/data/dataloader.py", "_MultiProcessingDataLoaderIter._try_get_data"),
                f(queue_file, "get"),
            ];
            st.stacks = vec![vec![0, 1, 2]];
            r.stacks = std::sync::Arc::new(st);
            r.worker_count = 3;
            input_advice(&r)
        };
        let pinned = wait_in("/usr/lib/python3.12/queue.py");
        assert!(!pinned.iter().any(|a| a.contains("pin_memory")), "{pinned:?}");
        assert!(pinned.iter().any(|a| a.contains("persistent_workers=True")), "not seen, still advised: {pinned:?}");
        let unpinned = wait_in("/usr/lib/python3.12/multiprocessing/queues.py");
        assert!(unpinned[0].starts_with("pin_memory=True"), "{unpinned:?}");
        assert!(workers_wait_advice(&Run { worker_count: 3, ..Run::default() }).contains("more workers than its 3"));
    }

    /// Waiting on the workers: more of them, and of the rest only what the loader does not do.
    #[test]
    fn the_workers_wait_advice_leaves_out_what_the_loader_already_does() {
        let mut r = Run::default();
        let a = workers_wait_advice(&r);
        assert!(a.contains("more workers (num_workers)") && a.contains("persistent_workers=True"), "{a}");
        let settings = serde_json::json!({"name": "loader_start", "num_workers": 3,
            "persistent_workers": true, "prefetch_factor": 4});
        r.events.push((gpulse_model::EventKind::Mark, 1.0, settings));
        let a = workers_wait_advice(&r);
        assert!(a.contains("more workers than its 3") && !a.contains("persistent") && !a.contains("prefetch"), "{a}");
    }

    /// 16 cores `host` % busy; the training tree, a process and four workers, at `tree` % of a
    /// core.
    fn loading(host: f64, tree: f64) -> Run {
        Run {
            host_cpu: (0..21).map(|t| (f64::from(t), host)).collect(),
            cores: 16,
            tree_cpu: (0..21).map(|t| (f64::from(t), tree)).collect(),
            tree_width: 5,
            worker_count: 4,
            worker_cpu_mean: Some(tree / 4.0),
            ..Run::default()
        }
    }

    #[test]
    fn workers_advice_is_sized_to_the_free_cores() {
        // 16 cores, 50 % busy: 8 idle, whoever keeps the others busy.
        let mut r = loading(50.0, 100.0);
        r.worker_count = 0;
        r.tree_width = 1;
        assert_eq!(free_cores(&r), Some(8.0));
        // No DataLoader seen: whether the loop has one is not known.
        assert!(workers_advice(&r).starts_with("if the loop reads a torch DataLoader"), "{}", workers_advice(&r));
        // Its frames in the sampled stacks: it loads in the training process.
        let frame = gpulse_model::PyFrame {
            file: "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py".into(),
            line: 733,
            function: "__next__".into(),
            code: None,
        };
        r.stacks = std::sync::Arc::new(gpulse_model::Stacks { frames: vec![frame], ..Default::default() });
        assert!(workers_advice(&r).contains("num_workers=8 uses the 8 free cores of 16"), "{}", workers_advice(&r));
        // Four workers at 20 % of a core each keep up: no more workers.
        let r = loading(50.0, 80.0);
        assert!(workers_advice(&r).contains("more workers will not help"), "{}", workers_advice(&r));
        // Four workers at 75 % each, cores free: raise toward what is free.
        let r = loading(50.0, 300.0);
        assert!(workers_advice(&r).contains("raise num_workers toward"), "{}", workers_advice(&r));
    }

    /// 8 workers of 16 threads each, the job at 1,600 % on 16 cores: oversubscribed, and the
    /// advice is fewer threads, never more workers; the job's own busy cores are not free.
    #[test]
    fn workers_running_many_threads_on_a_full_machine_are_oversubscribed() {
        let mut r = loading(100.0, 1600.0);
        r.worker_count = 8;
        r.worker_cpu_mean = Some(190.0);
        r.worker_threads_max = Some(16);
        assert_eq!(free_cores(&r), Some(0.0));
        let o = oversubscribed(&r).expect("oversubscribed");
        assert_eq!((o.workers, o.threads_per_worker, o.cores, o.tree_cores), (8, 16, 16, 16.0));
        let advice = workers_advice(&r);
        assert!(advice.contains("torch.set_num_threads(1)") && !advice.contains("raise num_workers"), "{advice}");
        // One thread a worker: each worker has its core.
        r.worker_threads_max = Some(2);
        assert!(oversubscribed(&r).is_none(), "16 threads on 16 cores");
        // Workers at one core each run one thread at a time, however many they have.
        r.worker_threads_max = Some(16);
        r.worker_cpu_mean = Some(100.0);
        assert!(oversubscribed(&r).is_none());
        // The job at half the machine leaves cores for its threads.
        let mut r = loading(50.0, 800.0);
        (r.worker_count, r.worker_cpu_mean, r.worker_threads_max) = (4, Some(190.0), Some(16));
        assert!(oversubscribed(&r).is_none());
        // An idle 2-core machine has 2 free cores.
        let mut idle = loading(0.0, 0.0);
        idle.cores = 2;
        assert_eq!(free_cores(&idle), Some(2.0));
    }
}
