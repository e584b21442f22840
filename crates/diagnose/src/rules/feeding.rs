//! Feeding the GPU: the thresholds and advice that the rules saying why a GPU waits on its host
//! (`utilization`, `steps`, `host`) share, kept here so that no rule reaches into another for
//! them. What every rule shares (`MIN_ACTIVE_S`, `mean`) is in `rules/mod.rs`.

use super::mean;
use crate::Run;

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
/// The first thing to do for a loop that waits for data and has no DataLoader workers.
const ADD_WORKERS: &str =
    "give the DataLoader worker processes: num_workers = the cores you can spare (start near os.cpu_count() - 2)";
/// What else helps any loop that waits for data.
pub(crate) const INPUT_ADVICE: [&str; 3] = [
    "pin_memory=True, and .to(device, non_blocking=True) in the loop",
    "persistent_workers=True so workers survive between epochs; prefetch_factor=4 to queue more batches",
    "move heavy augmentation to the GPU (torchvision.transforms.v2 on tensors) or precompute it",
];

/// Cores the job could give DataLoader workers: those neither other processes nor the training
/// process itself use. `None` without the host's CPU and core count.
fn free_cores(run: &Run) -> Option<f64> {
    if run.cores == 0 {
        return None;
    }
    let cores = run.cores as f64;
    let host = run.host_cpu_mean()?;
    let tree = run.tree_cpu_mean().unwrap_or(0.0) / 100.0;
    let outside = (cores * host / 100.0 - tree).max(0.0);
    // The training process keeps one core whatever it does now.
    Some((cores - outside - 1.0).max(0.0))
}

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
    match (run.tree_width > 0, run.worker_count, free) {
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
        run.io_blocked.iter().filter_map(|x| x.2).collect()
    } else {
        run.io_blocked.iter().map(|x| if x.1 { 1.0 } else { 0.0 }).collect()
    };
    mean(&shares).filter(|s| *s >= IO_BLOCKED)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // 16 cores, 50 % busy, the training process alone at 100 % of a core: 7 used outside it,
        // 16 - 7 - 1 = 8 free.
        let mut r = loading(50.0, 100.0);
        r.worker_count = 0;
        r.tree_width = 1;
        assert_eq!(free_cores(&r), Some(8.0));
        assert!(workers_advice(&r).contains("num_workers=8 uses the 8 free cores of 16"), "{}", workers_advice(&r));
        // Four workers at 20 % of a core each keep up: no more workers.
        let r = loading(50.0, 80.0);
        assert!(workers_advice(&r).contains("more workers will not help"), "{}", workers_advice(&r));
        // Four workers at 75 % each, cores free: raise toward what is free.
        let r = loading(50.0, 300.0);
        assert!(workers_advice(&r).contains("raise num_workers toward"), "{}", workers_advice(&r));
    }
}
