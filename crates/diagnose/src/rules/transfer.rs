//! `transfer_bound`: host↔device copies fill the PCIe link while the SMs idle.

use super::mean;
use crate::{Finding, GpuSeries, Run, Severity, round};

/// The link carrying this share of its line rate, averaged over the run, moves several times what
/// any input pipeline needs (a ResNet-50 fed at full speed with fp32 images moves about 2 % of a
/// PCIe 5 x16 link), and pageable copies move their bytes several times slower than the line
/// rate (the host's memcpy into a pinned staging buffer sets their pace), so at this share they
/// already take most of the wall time.
const LINK_SHARE: f64 = 0.10;
/// The SMs busy less than half the time: the copies are not hidden behind compute.
const SM_IDLE_PCT: f64 = 50.0;
/// Without GPM, GPU-Util under this (the low-utilization bound) stands in for idle SMs.
const UTIL_IDLE_PCT: f64 = 60.0;

/// Bytes a second one lane carries at generation `gen_`, after line encoding (8b/10b to PCIe 2,
/// 128b/130b from PCIe 3; PCIe 6's FLIT mode keeps 242 of 256 bytes).
fn lane_bytes_per_s(gen_: u32) -> Option<f64> {
    let gt = match gen_ {
        1 => 2.5e9 * 0.8,
        2 => 5e9 * 0.8,
        3 => 8e9 * 128.0 / 130.0,
        4 => 16e9 * 128.0 / 130.0,
        5 => 32e9 * 128.0 / 130.0,
        6 => 64e9 * 242.0 / 256.0,
        _ => return None,
    };
    Some(gt / 8.0)
}

/// The link's line rate each way, bytes a second, from the fastest generation and width seen.
pub(super) fn line_rate(g: &GpuSeries) -> Option<f64> {
    let (gen_, width) = g.pcie_link_max?;
    Some(lane_bytes_per_s(gen_)? * f64::from(width.max(1)))
}

/// The busier direction's mean share of the line rate over the active window.
fn link_share(g: &GpuSeries) -> Option<(f64, f64, f64)> {
    let rate = line_rate(g)?;
    let (rx, tx) = (mean(&g.active_values(&g.pcie_rx_bytes_per_s))?, mean(&g.active_values(&g.pcie_tx_bytes_per_s))?);
    Some((rx.max(tx) / rate, rx, tx))
}

/// Whether `g` is transfer-bound; the utilization rules leave such a GPU to this one.
pub(super) fn is_transfer_bound(g: &GpuSeries) -> bool {
    verdict(g).is_some()
}

/// (link share, rx, tx, SM or GPU-Util mean, whether it is SM activity).
fn verdict(g: &GpuSeries) -> Option<(f64, f64, f64, f64, bool)> {
    if g.active_s() < super::utilization::MIN_ACTIVE_S {
        return None;
    }
    let (share, rx, tx) = link_share(g)?;
    let (busy, by_sm) = match mean(&g.active_values(&g.sm_pct)) {
        Some(sm) => (sm, true),
        None => (mean(&g.active_values(&g.util_pct))?, false),
    };
    let idle = if by_sm { busy < SM_IDLE_PCT } else { busy < UTIL_IDLE_PCT };
    (share >= LINK_SHARE && idle).then_some((share, rx, tx, busy, by_sm))
}

pub fn findings(run: &Run) -> Vec<Finding> {
    let mut out = Vec::new();
    for g in &run.gpus {
        let Some((share, rx, tx, busy, by_sm)) = verdict(g) else { continue };
        let dir = if rx >= tx { "host to device" } else { "device to host" };
        let what = if by_sm { "SM activity" } else { "GPU-Util" };
        let gb = |b: f64| round(b / 1e9, 2);
        let mut f = Finding::new(
            "transfer_bound",
            Severity::Warning,
            format!(
                "GPU {}: copies {dir} dominate: PCIe moves {:.1} GB/s ({:.0}% of the link's line rate) while {what} is {busy:.0}%",
                g.gpu,
                rx.max(tx) / 1e9,
                100.0 * share
            ),
        )
        .on_gpu(g.gpu)
        .over(g.window())
        .with("pcie_rx_gb_per_s", gb(rx))
        .with("pcie_tx_gb_per_s", gb(tx))
        .with("link_line_rate_gb_per_s", gb(line_rate(g).unwrap_or(0.0)))
        .with("link_share_pct", round(100.0 * share, 1))
        .with(if by_sm { "sm_active_mean_pct" } else { "util_gpu_mean_pct" }, round(busy, 1))
        // The copies are what the SMs wait for: their idle time is what the copies cost. The
        // bytes at the line rate would be a floor far below it for pageable copies.
        .costs(1.0 - busy / 100.0, "sm_idle_time: the share of time the SMs idle (100 - SM activity, or GPU-Util without GPM) while the copies fill the link")
        .advise(&[
            "copy from pinned memory: DataLoader(pin_memory=True), or tensor.pin_memory() once for a buffer you reuse; pageable copies go through a staging buffer at host-memcpy speed",
            "tensor.to(device, non_blocking=True) from pinned memory, issued a step ahead on a side stream (torch.cuda.Stream) so the copy overlaps compute",
            "keep data that every step reuses resident on the GPU instead of copying it each step",
            "fewer .cpu(), .item() and .numpy() calls in the loop: each copies back and waits",
        ]);
        if !by_sm {
            f = f.limit("no GPM: judged by GPU-Util, which says whether any kernel ran, not how many SMs worked");
        }
        if run.gpus.len() > 1 {
            f = f.limit("with several GPUs and no NVLink, NCCL's traffic between them crosses PCIe too: check whether it is collectives rather than host copies");
        }
        out.push(f);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    /// 20 s on a PCIe 5 x16 link (63.0 GB/s line rate) receiving `rx_share` of it, SM at `sm`.
    fn copying(rx_share: f64, sm: Option<f64>) -> Run {
        let mut g = steady(0, 40.0, 21);
        g.pcie_link_max = Some((5, 16));
        let rate = line_rate(&g).unwrap();
        g.pcie_rx_bytes_per_s = vec![Some(rx_share * rate); 21];
        g.pcie_tx_bytes_per_s = vec![Some(0.01 * rate); 21];
        g.sm_pct = vec![sm; 21];
        run(vec![g])
    }

    #[test]
    fn the_line_rate_follows_generation_and_width() {
        let mut g = steady(0, 0.0, 1);
        g.pcie_link_max = Some((5, 16));
        assert!((line_rate(&g).unwrap() - 63.015e9).abs() < 1e7);
        g.pcie_link_max = Some((4, 8));
        assert!((line_rate(&g).unwrap() - 15.754e9).abs() < 1e7);
        g.pcie_link_max = None;
        assert_eq!(line_rate(&g), None, "no link, no rate: no finding, never a guessed one");
    }

    #[test]
    fn transfer_bound_from_a_tenth_of_the_line_rate_with_the_sms_under_half_busy() {
        assert!(findings(&copying(0.099, Some(10.0))).is_empty());
        let f = findings(&copying(0.10, Some(10.0)));
        assert_eq!(ids(&f), ["transfer_bound"]);
        assert_eq!(f[0].lost_share, Some(0.9), "the SMs' idle time");
        assert!(f[0].advice[0].contains("pinned"), "{:?}", f[0].advice);
        assert!(findings(&copying(0.9, Some(50.0))).is_empty(), "copies hidden behind compute");
        assert_eq!(ids(&findings(&copying(0.9, Some(49.9)))), ["transfer_bound"]);
        // Without GPM, GPU-Util 40 % < 60 % stands in, and says so.
        let f = findings(&copying(0.5, None));
        assert!(f[0].limits.iter().any(|l| l.contains("no GPM")), "{:?}", f[0].limits);
    }
}
