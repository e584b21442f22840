//! How processes map to GPUs. DDP ranks bound to the wrong device: one process working on one GPU
//! while also holding a small context on another (typically cuda:0), because
//! `torch.cuda.set_device(local_rank)` was never called. And nn.DataParallel: one process working
//! on several GPUs.

use std::collections::BTreeMap;

use super::GIB;
use crate::{Finding, FindingId, Run, Severity, round};

/// A CUDA context with the caching allocator's first blocks takes a few hundred MiB; less than
/// this is not a context at all.
const MIN_CONTEXT_GIB: f64 = 0.1;
/// An extra context this small next to the process's real work is overhead, not work: larger
/// shares (DataParallel replicas) are the parallelism itself.
const MAX_EXTRA_SHARE: f64 = 0.25;
const MAX_EXTRA_GIB: f64 = 2.0;

pub fn findings(run: &Run) -> Vec<Finding> {
    // pid → gpu → most memory held there.
    let mut held: BTreeMap<u32, BTreeMap<u32, f64>> = BTreeMap::new();
    for g in &run.gpus {
        for listing in &g.processes {
            for p in listing.iter() {
                let m = p.used_memory_bytes.map_or(0.0, |b| b as f64);
                let e = held.entry(p.pid).or_default().entry(g.gpu).or_insert(0.0);
                *e = e.max(m);
            }
        }
    }
    // gpu → [(pid, extra bytes, home gpu)]
    let mut strays: BTreeMap<u32, Vec<(u32, f64, u32)>> = BTreeMap::new();
    for (pid, per_gpu) in &held {
        if per_gpu.len() < 2 {
            continue;
        }
        let Some((&home, &home_bytes)) = per_gpu.iter().max_by(|a, b| a.1.total_cmp(b.1)) else { continue };
        for (&gpu, &bytes) in per_gpu {
            if gpu != home
                && bytes >= MIN_CONTEXT_GIB * GIB
                && bytes <= MAX_EXTRA_SHARE * home_bytes
                && bytes <= MAX_EXTRA_GIB * GIB
            {
                strays.entry(gpu).or_default().push((*pid, bytes, home));
            }
        }
    }
    let mut out: Vec<Finding> = Vec::new();
    // One process holding real work (≥ 1 GiB and a quarter of its largest footprint) on several
    // GPUs: nn.DataParallel, which scatters every batch from GPU 0 and gathers back to it.
    for (pid, per_gpu) in &held {
        let most = per_gpu.values().copied().fold(0.0, f64::max);
        let working: Vec<u32> =
            per_gpu.iter().filter(|(_, b)| **b >= GIB && **b >= 0.25 * most).map(|(g, _)| *g).collect();
        if working.len() >= 2 {
            out.push(
                Finding::new(FindingId::DataParallel, Severity::Warning, format!("process {pid} drives {} GPUs alone (nn.DataParallel)", working.len()))
                    .of_pid(*pid)
                    .with("gpus", working.clone())
                    .with("memory_gib", per_gpu.values().map(|b| round(b / GIB, 2)).collect::<Vec<_>>())
                    .advise(&[
                        "nn.DataParallel runs one Python thread per GPU and scatters and gathers every batch through GPU 0: use DistributedDataParallel with one process per GPU (torchrun --nproc_per_node=N)",
                        "with DDP, call torch.cuda.set_device(local_rank) and use a DistributedSampler",
                    ]),
            );
        }
    }
    out.extend(strays
        .into_iter()
        .map(|(gpu, list)| {
            let total: f64 = list.iter().map(|x| x.1).sum();
            Finding::new(
                FindingId::DeviceMisbinding,
                Severity::Warning,
                format!("GPU {gpu}: {} process{} working on other GPUs also hold{} {:.1} GiB here", list.len(), if list.len() == 1 { "" } else { "es" }, if list.len() == 1 { "s" } else { "" }, total / GIB),
            )
            .on_gpu(gpu)
            .with("pids", list.iter().map(|x| x.0).collect::<Vec<_>>())
            .with("home_gpus", list.iter().map(|x| x.2).collect::<Vec<_>>())
            .with("extra_gib", round(total / GIB, 2))
            .advise(&[
                "call torch.cuda.set_device(local_rank) (or use torch.device(f\"cuda:{local_rank}\") everywhere) before the first CUDA call in each rank",
                "with torchrun, read LOCAL_RANK from the environment; do not create tensors on \"cuda\" without an index",
                "or start each rank with CUDA_VISIBLE_DEVICES set to its own GPU",
            ])
        }));
    out
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    /// Process 7 holding `home` GiB on GPU 0 and `extra` GiB on GPU 1.
    fn two_gpus(home: f64, extra: f64) -> Vec<&'static str> {
        let g0 = with_processes(steady(0, 90.0, 5), vec![holder(7, home)]);
        let g1 = with_processes(steady(1, 90.0, 5), vec![holder(7, extra), holder(8, 20.0)]);
        ids(&findings(&run(vec![g0, g1])))
    }

    #[test]
    fn a_stray_context_is_0_1_to_2_gib_and_a_quarter_of_the_main_footprint_at_most() {
        assert_eq!(two_gpus(20.0, 0.1), ["device_misbinding"], "0.1 GiB");
        assert!(two_gpus(20.0, 0.099).is_empty(), "too small for a context");
        assert_eq!(two_gpus(20.0, 2.0), ["device_misbinding"], "2 GiB");
        assert!(two_gpus(20.0, 2.01).is_empty(), "a replica, not a context");
        assert_eq!(two_gpus(2.0, 0.5), ["device_misbinding"], "a quarter");
        assert!(two_gpus(2.0, 0.51).is_empty(), "more than a quarter");
    }

    #[test]
    fn data_parallel_holds_1_gib_and_a_quarter_of_its_largest_on_two_gpus() {
        assert_eq!(two_gpus(4.0, 1.0), ["data_parallel", "device_misbinding"], "1 GiB, a quarter: both readings");
        assert_eq!(two_gpus(4.0, 0.99), ["device_misbinding"], "under 1 GiB");
        assert_eq!(two_gpus(8.0, 3.0), ["data_parallel"], "a replica");
        assert!(two_gpus(13.0, 3.0).is_empty(), "under a quarter, over 2 GiB: neither");
    }
}
