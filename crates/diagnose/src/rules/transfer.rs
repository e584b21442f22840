//! `transfer_bound`: host-to-device copies hold the loop up while the SMs idle.
//!
//! Measured where `--instrument` timed each copy that blocked the loop. Otherwise from the
//! mechanism: a copy moving the loop's bytes at rate `r` takes `rx / r` of the time, where `rx`
//! is the link's mean traffic. Pinned memory is copied by DMA near the link's line rate; pageable
//! memory first goes through the host's memcpy into a pinned staging buffer, one chunk at a
//! time, at a few GB/s. So the same bytes take the time of either, and the SMs' idle time says
//! which the loop can be paying.

use crate::run::mean;
use crate::{Finding, FindingId, GpuSeries, Run, Severity, round};

/// Pageable copies: the staging memcpy sets their pace, from about 2 GB/s (fresh pages faulted in
/// as they are read) to about 16 GB/s (a warm buffer on a fast host), whatever the link.
const PAGEABLE_SLOW_BYTES_PER_S: f64 = 2e9;
const PAGEABLE_FAST_BYTES_PER_S: f64 = 16e9;
/// The copies explain the idle time when, at a pageable rate the evidence allows, they fill at
/// least half of it: the other half would need a second cause.
const EXPLAINS: f64 = 0.5;
/// Copies that hold the loop up three quarters of its time leave the SMs (or, without GPM, the
/// GPU's kernels) busy a quarter of it at most. Above that the same traffic fits a loop that
/// computes and copies from pinned memory beside it, and the counters cannot tell them apart.
const BUSY_AT_MOST_PCT: f64 = 25.0;
/// Measured copies from a fifth of the loop's time: hidden, the loop would run 1.25× faster.
const MEASURED_SHARE: f64 = 0.2;

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

/// The mean traffic each way over the active window, bytes a second.
fn traffic(g: &GpuSeries) -> Option<(f64, f64)> {
    Some((mean(&g.active_values(&g.pcie_rx_bytes_per_s))?, mean(&g.active_values(&g.pcie_tx_bytes_per_s))?))
}

/// Whether `g` is transfer-bound by its pattern; the utilization rules leave such a GPU to this
/// one.
pub(super) fn is_transfer_bound(g: &GpuSeries) -> bool {
    verdict(g).is_some()
}

/// What the pattern shows: the busier direction's traffic, which way, the SMs' (or GPU-Util's)
/// busy share and whether it is SM activity.
struct Verdict {
    bytes_per_s: f64,
    to_device: bool,
    busy_pct: f64,
    by_sm: bool,
}

fn verdict(g: &GpuSeries) -> Option<Verdict> {
    if g.active_s() < super::MIN_ACTIVE_S {
        return None;
    }
    let (rx, tx) = traffic(g)?;
    let (busy_pct, by_sm) = match mean(&g.active_values(&g.sm_pct)) {
        Some(sm) => (sm, true),
        None => (mean(&g.active_values(&g.util_pct))?, false),
    };
    let idle = 1.0 - busy_pct / 100.0;
    let hidden = busy_pct > BUSY_AT_MOST_PCT;
    let bytes_per_s = rx.max(tx);
    // At the slowest pageable rate, the copies would fill at least half the idle time.
    let fills = bytes_per_s / PAGEABLE_SLOW_BYTES_PER_S >= EXPLAINS * idle;
    (!hidden && fills).then_some(Verdict { bytes_per_s, to_device: rx >= tx, busy_pct, by_sm })
}

/// The loop's measured copies, when they are a fifth of its time or more.
fn measured(run: &Run) -> Option<Finding> {
    let copies = crate::run::loop_copies(run);
    let copied: f64 = copies.iter().map(|c| c[1] - c[0]).sum();
    // The loop: its steps, else from its first copy to its last.
    let span = match (&run.steps, copies.first(), copies.last()) {
        (Some(s), _, _) => s.window_s[1] - s.window_s[0],
        (None, Some(a), Some(b)) => b[1] - a[0],
        _ => return None,
    };
    let share = (copied / span.max(1e-9)).min(1.0);
    if share < MEASURED_SHARE {
        return None;
    }
    let mean_ms = 1000.0 * copied / copies.len() as f64;
    let mut f = Finding::new(
        FindingId::TransferBound,
        if share >= 0.5 { Severity::Critical } else { Severity::Warning },
        format!(
            "Copies to the GPU hold the loop up {{loop}} of its time: {} copies of {mean_ms:.0} ms on average (measured in the loop)",
            copies.len()
        ),
    )
    .with("copies", copies.len() as u64)
    .with("copy_mean_ms", round(mean_ms, 1))
    .with("copy_share_pct", round(100.0 * share, 1))
    .costs_of_loop(share, "measured_copies: the loop's own timing of each copy to the GPU that blocked it");
    if let Some(g) = run.gpus.iter().find(|g| traffic(g).is_some_and(|t| t.0 > 0.0)) {
        let (rx, _) = traffic(g).unwrap_or_default();
        // The rate the blocking copies ran at: the link's bytes over the time spent copying.
        f = f.with("pcie_rx_gb_per_s", round(rx / 1e9, 2)).with("copy_rate_gb_per_s", round(rx / share / 1e9, 2));
    }
    Some(f.advise(&ADVICE))
}

const ADVICE: [&str; 4] = [
    "copy from pinned memory: DataLoader(pin_memory=True), or tensor.pin_memory() once for a buffer you reuse; pageable copies go through a staging buffer at host-memcpy speed",
    "tensor.to(device, non_blocking=True) from pinned memory, issued a step ahead on a side stream (torch.cuda.Stream) so the copy overlaps compute",
    "keep data that every step reuses resident on the GPU instead of copying it each step",
    "fewer .cpu(), .item() and .numpy() calls in the loop: each copies back and waits",
];

pub fn findings(run: &Run) -> Vec<Finding> {
    if let Some(f) = measured(run) {
        return vec![f];
    }
    let mut out = Vec::new();
    for g in &run.gpus {
        let Some(v) = verdict(g) else { continue };
        let dir = if v.to_device { "host to device" } else { "device to host" };
        let what = if v.by_sm { "SM activity" } else { "GPU-Util" };
        let rate = v.bytes_per_s;
        // The share of the time the same bytes take at each plausible rate.
        let pageable = [rate / PAGEABLE_FAST_BYTES_PER_S, (rate / PAGEABLE_SLOW_BYTES_PER_S).min(1.0)];
        let pinned = line_rate(g).map(|l| rate / l);
        let gb = |b: f64| round(b / 1e9, 2);
        let mut title = format!(
            "GPU {}: copies {dir} hold the GPU up: PCIe moves {:.1} GB/s while {what} is {:.0}%; from pageable memory these bytes take {:.0}–{:.0}% of the time",
            g.gpu,
            rate / 1e9,
            v.busy_pct,
            100.0 * pageable[0],
            100.0 * pageable[1]
        );
        if let Some(p) = pinned {
            title += &format!(", from pinned memory {:.0}%", 100.0 * p);
        }
        let mut f = Finding::new(FindingId::TransferBound, Severity::Warning, title)
            .on_gpu(g.gpu)
            .over(g.window())
            .with("pcie_gb_per_s", gb(rate))
            .with("pageable_share_pct", vec![round(100.0 * pageable[0], 1), round(100.0 * pageable[1], 1)])
            .with(if v.by_sm { "sm_active_mean_pct" } else { "util_gpu_mean_pct" }, round(v.busy_pct, 1));
        if let Some(p) = pinned {
            f = f
                .with("pinned_share_pct", round(100.0 * p, 1))
                .with("link_line_rate_gb_per_s", gb(line_rate(g).unwrap_or(0.0)));
        }
        if let Some(s) = &run.steps {
            f = f.with("bytes_per_step_mb", round(rate / s.per_s().max(1e-9) / 1e6, 1));
        }
        // The copies are what the SMs wait for: their idle time is what the copies cost.
        f = f
            .costs(1.0 - v.busy_pct / 100.0, "sm_idle_time: the share of time the SMs idle (100 - SM activity, or GPU-Util without GPM) while the copies run")
            .advise(&ADVICE)
            .inferred();
        // Pinned copies at the line rate would leave most of the idle time unexplained: the
        // evidence then points at pageable memory.
        if pinned.is_some_and(|p| p < EXPLAINS * (1.0 - v.busy_pct / 100.0)) {
            f = f.with("evidence_supports", "pageable");
        }
        if !v.by_sm {
            f = f.limit("no GPM: judged by GPU-Util, which says whether any kernel ran, not how many SMs worked");
        }
        if run.gpus.len() > 1 {
            f = f.limit("with several GPUs and no NVLink, NCCL's traffic between them crosses PCIe too: check whether it is collectives rather than host copies");
        }
        if pinned.is_none() {
            f = f.limit(
                "the PCIe link's generation and width are unknown: the time at pinned-memory rates is not given",
            );
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
    fn copies_that_fill_half_the_idle_time_at_the_slowest_pageable_rate() {
        // SMs 10 % busy: 90 % idle. 0.9 GB/s at 2 GB/s is 45 % of the time: half the idle time.
        let rate = line_rate(&{
            let mut g = steady(0, 0.0, 1);
            g.pcie_link_max = Some((5, 16));
            g
        })
        .unwrap();
        let share = |gb: f64| gb * 1e9 / rate;
        assert!(findings(&copying(share(0.89), Some(10.0))).is_empty());
        let f = findings(&copying(share(0.91), Some(10.0)));
        assert_eq!(ids(&f), ["transfer_bound"]);
        assert_eq!(f[0].own_share(), Some(0.9), "the SMs' idle time");
        assert_eq!(f[0].basis, crate::Basis::Inferred);
        assert_eq!(f[0].evidence["evidence_supports"], "pageable", "pinned: 1.4 % of the time");
        assert!(f[0].advice[0].contains("pinned"), "{:?}", f[0].advice);
        // 2.7 GB/s with the SMs at 1 %: far below a tenth of the line rate, still the copies.
        assert_eq!(ids(&findings(&copying(share(2.7), Some(1.0)))), ["transfer_bound"]);
        // A fifth of the line rate beside SMs 41 % busy: pinned copies beside compute fit as well.
        assert!(findings(&copying(0.2, Some(25.1))).is_empty(), "the counters cannot tell");
        assert_eq!(ids(&findings(&copying(0.2, Some(25.0)))), ["transfer_bound"]);
        // Without GPM, GPU-Util stands in, and says so.
        let mut r = copying(0.5, None);
        r.gpus[0].util_pct = vec![Some(20.0); 21];
        let f = findings(&r);
        assert!(f[0].limits.iter().any(|l| l.contains("no GPM")), "{:?}", f[0].limits);
    }

    #[test]
    fn measured_copies_from_a_fifth_of_the_loop() {
        let mut r = copying(0.01, Some(90.0));
        r.steps = Some(crate::rules::testing::steps(1, 20, [0.0, 20.0]));
        r.copies_s = (0..20).map(|i| [f64::from(i), f64::from(i) + 0.19]).collect();
        assert!(findings(&r).is_empty(), "19 %");
        r.copies_s = (0..20).map(|i| [f64::from(i), f64::from(i) + 0.21]).collect();
        let f = findings(&r);
        assert_eq!(
            (ids(&f), f[0].basis, f[0].cost.as_ref().and_then(|c| c.loop_share)),
            (vec!["transfer_bound"], crate::Basis::Measured, Some(0.21))
        );
    }
}
