//! Clocks held down: power cap, thermal or hardware slowdown.

use gpulse_model::ClocksEventReasons;
use gpulse_model::clocks::{
    HW_POWER_BRAKE_SLOWDOWN, HW_SLOWDOWN, HW_THERMAL_SLOWDOWN, SW_POWER_CAP, SW_THERMAL_SLOWDOWN,
};

use crate::{Finding, FindingId, Run, Severity, round};

/// Clocks-event reasons that are not the GPU's choice: thermal and hardware slowdowns.
const THERMAL_OR_HW: u64 = HW_SLOWDOWN | SW_THERMAL_SLOWDOWN | HW_THERMAL_SLOWDOWN | HW_POWER_BRAKE_SLOWDOWN;
/// The power cap holds clocks down in many well-fed runs; it matters when clocks lose this much.
const POWER_CAP_CLOCK_LOSS: f64 = 0.10;
/// Reasons present in less than this share of the active samples are transients.
const MIN_SHARE: f64 = 0.10;

/// Compute-bound work runs at the SM clock's pace: the time throttled, times the clock it lost.
const THROTTLED: &str =
    "throttled_clock: the share of the active time throttled, times the share of the SM clock lost in it";

pub fn findings(run: &Run) -> Vec<Finding> {
    let mut out = Vec::new();
    for g in &run.gpus {
        let (a, b) = g.active;
        let idx: Vec<usize> = (a..b).filter(|&i| g.reasons[i].is_some()).collect();
        if idx.is_empty() {
            continue;
        }
        let share = |mask: u64| {
            idx.iter().filter(|&&i| g.reasons[i].is_some_and(|r| r & mask != 0)).count() as f64 / idx.len() as f64
        };
        let (hw, cap) = (share(THERMAL_OR_HW), share(SW_POWER_CAP));
        let clocks_under = |mask: u64| -> Option<f64> {
            let v: Vec<f64> = idx
                .iter()
                .filter(|&&i| g.reasons[i].is_some_and(|r| r & mask != 0))
                .filter_map(|&i| g.sm_clock_mhz[i])
                .collect();
            crate::run::mean(&v)
        };
        let max_clock = g.max_sm_clock_mhz.or_else(|| g.sm_clock_mhz.iter().flatten().copied().reduce(f64::max));
        let names: Vec<&str> = {
            let all = idx.iter().fold(0u64, |acc, &i| acc | g.reasons[i].unwrap_or(0));
            ClocksEventReasons(all).names().into_iter().filter(|n| *n != "gpu_idle").collect()
        };
        if hw >= MIN_SHARE {
            let mut f = Finding::new(FindingId::Throttling, Severity::Warning, format!("GPU {}: thermal or hardware slowdown in {:.0}% of the run", g.gpu, hw * 100.0))
                .on_gpu(g.gpu)
                .with("share", round(hw, 3))
                .with("reasons", names.clone())
                .advise(&["check cooling and airflow, and the GPU temperature against its slowdown threshold (nvidia-smi -q -d TEMPERATURE)", "a hardware slowdown can also mean a failing power supply: report it to the cluster admins"]);
            if let (Some(c), Some(m)) = (clocks_under(THERMAL_OR_HW), max_clock) {
                f = f
                    .with("sm_clock_mean_mhz", round(c, 0))
                    .with("sm_clock_max_mhz", m)
                    .with("clock_lost_share", round(1.0 - c / m, 3))
                    .costs(hw * (1.0 - c / m), THROTTLED);
            }
            out.push(f);
        } else if cap >= MIN_SHARE
            && let (Some(c), Some(m)) = (clocks_under(SW_POWER_CAP), max_clock)
            && 1.0 - c / m >= POWER_CAP_CLOCK_LOSS
        {
            out.push(
                Finding::new(FindingId::Throttling, Severity::Info, format!("GPU {}: at its power limit {:.0}% of the time, SM clock {:.0}% below maximum", g.gpu, cap * 100.0, 100.0 * (1.0 - c / m)))
                    .on_gpu(g.gpu)
                    .with("share", round(cap, 3))
                    .with("reasons", names)
                    .with("sm_clock_mean_mhz", round(c, 0))
                    .with("sm_clock_max_mhz", m)
                    .with("clock_lost_share", round(1.0 - c / m, 3))
                    .costs(cap * (1.0 - c / m), THROTTLED)
                    .advise(&["the GPU uses its whole power budget: expected for dense bf16 matmuls; a higher power limit (nvidia-smi -pl) or lower precision work would raise clocks"]),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    /// `n` busy samples at SM clock 1980 MHz (its maximum), the first `k` with `reason` at `clock`.
    fn clocked(n: usize, k: usize, reason: u64, clock: f64) -> Run {
        let mut g = steady(0, 95.0, n);
        g.max_sm_clock_mhz = Some(2000.0);
        g.reasons = (0..n).map(|i| Some(if i < k { reason } else { 0 })).collect();
        g.sm_clock_mhz = (0..n).map(|i| Some(if i < k { clock } else { 1980.0 })).collect();
        run(vec![g])
    }

    #[test]
    fn thermal_or_hardware_slowdown_in_a_tenth_of_the_samples() {
        let f = findings(&clocked(10, 1, 0x20, 1500.0));
        assert_eq!((ids(&f), f[0].severity), (vec!["throttling"], Severity::Warning), "1 of 10");
        // A tenth of the time at 1500 of 2000 MHz: 2.5 % of the run.
        assert_eq!(f[0].own_share(), Some(0.025));
        assert!(findings(&clocked(11, 1, 0x20, 1500.0)).is_empty(), "1 of 11");
    }

    #[test]
    fn the_power_cap_counts_when_it_costs_a_tenth_of_the_clock() {
        // Clock 1799 of 2000: 10.05 % lost; 1801: 9.95 %.
        let f = findings(&clocked(10, 5, 0x4, 1799.0));
        assert_eq!((ids(&f), f[0].severity), (vec!["throttling"], Severity::Info));
        assert_eq!(f[0].own_share(), Some(0.05), "half the time, a tenth of the clock");
        assert!(findings(&clocked(10, 5, 0x4, 1801.0)).is_empty(), "the cap, at little cost");
        assert!(findings(&clocked(11, 1, 0x4, 1000.0)).is_empty(), "1 of 11 samples");
        assert_eq!(ids(&findings(&clocked(10, 1, 0x4, 1000.0))), ["throttling"], "1 of 10");
    }
}
