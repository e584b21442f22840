//! A multi-GPU job whose collectives never reach NVLink: NCCL fell back to PCIe peer-to-peer or
//! to the host's shared memory, though the GPUs have links up.

use crate::{Finding, FindingId, Run, Severity, round};

/// Least active window judged, seconds.
const MIN_ACTIVE_S: f64 = 10.0;
/// Least mean PCIe traffic from each GPU, bytes a second. A fallback path moves about 10 GB/s
/// at best (PCIe through the host's shared memory copies every byte twice), so 0.5 GB/s of
/// collective traffic spends at least 5 % of the time in it, which NVLink (H100/H200: 450 GB/s
/// each way) would all but remove. A training GPU without collectives sends the host a loss
/// and metrics (kilobytes a step) and rank 0 alone writes checkpoints: traffic from every GPU
/// at this rate is gradients.
const MIN_PCIE_TX: f64 = 0.5e9;
/// NVLink traffic under this share of the PCIe traffic is none: an all-reduce over NVLink moves
/// as many bytes on the links as it would have on PCIe.
const NVLINK_NONE_SHARE: f64 = 0.01;

pub fn unused(run: &Run) -> Vec<Finding> {
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    // The job's GPUs: those that worked, with links up, and with both readings.
    let gpus: Vec<(u32, u32, f64, f64)> = run
        .gpus
        .iter()
        .filter(|g| g.active_s() >= MIN_ACTIVE_S)
        .filter_map(|g| {
            let links = g.nvlink_active_links.filter(|n| *n > 0)?;
            let tx = mean(&g.active_values(&g.pcie_tx_bytes_per_s))?;
            let nvl = mean(&g.active_values(&g.nvlink_bytes_per_s))?;
            Some((g.gpu, links, tx, nvl))
        })
        .collect();
    if gpus.len() < 2 || !gpus.iter().all(|g| g.2 >= MIN_PCIE_TX && g.3 < NVLINK_NONE_SHARE * g.2) {
        return Vec::new();
    }
    let min_tx = gpus.iter().map(|g| g.2).fold(f64::INFINITY, f64::min);
    let max_nvl = gpus.iter().map(|g| g.3).fold(0.0, f64::max);
    let names: Vec<String> = gpus.iter().map(|g| g.0.to_string()).collect();
    vec![
        Finding::new(
            FindingId::NvlinkUnused,
            Severity::Warning,
            format!(
                "GPUs {} send {:.1} GB/s or more each over PCIe while their NVLinks carry {:.0} MB/s: the collectives do not use NVLink",
                names.join(", "),
                min_tx / 1e9,
                max_nvl / 1e6
            ),
        )
        .inferred()
        .with("gpus", gpus.iter().map(|g| g.0).collect::<Vec<_>>())
        .with("nvlink_active_links", gpus.iter().map(|g| g.1).collect::<Vec<_>>())
        .with("pcie_tx_gb_per_s", gpus.iter().map(|g| round(g.2 / 1e9, 2)).collect::<Vec<_>>())
        .with("nvlink_mb_per_s", gpus.iter().map(|g| round(g.3 / 1e6, 1)).collect::<Vec<_>>())
        .advise(&[
            "NCCL picks its transport per pair of GPUs: NCCL_DEBUG=INFO prints it (`via P2P/IPC` or `NVLS` is NVLink, `via SHM` or `NET` is not)",
            "unset NCCL_P2P_DISABLE, and NCCL_P2P_LEVEL if it was set below NVL; in a container, give it the host's IPC namespace (--ipc=host) so peers can map each other's memory",
            "`nvidia-smi topo -m` should show NV# between the job's GPUs; `nvidia-smi nvlink -s` each link's state",
        ])
        .limit("NCCL is inferred from every GPU of the job sending gradients' worth of traffic to the host; GPM's NVLink counters need Hopper or newer"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::testing::steady;

    fn rank(gpu: u32, links: Option<u32>, pcie_tx: f64, nvlink: f64) -> crate::GpuSeries {
        let mut g = steady(gpu, 90.0, 30);
        g.nvlink_active_links = links;
        g.pcie_tx_bytes_per_s = vec![Some(pcie_tx); 30];
        g.nvlink_bytes_per_s = vec![Some(nvlink); 30];
        g
    }

    #[test]
    fn collectives_on_pcie_beside_idle_links_are_named() {
        let run = |gpus| Run { gpus, ..Run::default() };
        let f = unused(&run(vec![rank(0, Some(18), 6e9, 1e6), rank(1, Some(18), 6e9, 2e6)]));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].title.contains("GPUs 0, 1") && f[0].advice[1].contains("NCCL_P2P_DISABLE"), "{}", f[0].title);
        // Over NVLink: the links carry the traffic.
        assert!(unused(&run(vec![rank(0, Some(18), 6e9, 40e9), rank(1, Some(18), 6e9, 40e9)])).is_empty());
        // No link up (a lone H200 NVL, a PCIe board): nothing to fall back from.
        assert!(unused(&run(vec![rank(0, Some(0), 6e9, 0.0), rank(1, None, 6e9, 0.0)])).is_empty());
        // One rank sending (a checkpoint on rank 0), or a single GPU: no collective.
        assert!(unused(&run(vec![rank(0, Some(18), 6e9, 0.0), rank(1, Some(18), 1e6, 0.0)])).is_empty());
        assert!(unused(&run(vec![rank(0, Some(18), 6e9, 0.0)])).is_empty());
        // NVLink unread (no GPM): the rule cannot tell.
        let mut a = rank(0, Some(18), 6e9, 0.0);
        let mut b = rank(1, Some(18), 6e9, 0.0);
        a.nvlink_bytes_per_s = vec![None; 30];
        b.nvlink_bytes_per_s = vec![None; 30];
        assert!(unused(&run(vec![a, b])).is_empty());
    }
}
