//! When the next sample is due. Intervals are jittered, so a loop whose period is a multiple of
//! the sampler's is not always seen at the same phase, and stretched so that the sampler's own
//! CPU time stays within its budget however deep the stacks are.

use std::time::Duration;

/// xorshift64*: a cheap stream of numbers, good enough that no phase is preferred.
#[derive(Debug, Clone)]
pub(super) struct Jitter(u64);

impl Jitter {
    pub(super) fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// A factor in `[1 - spread, 1 + spread]`, uniform.
    pub(super) fn factor(&mut self, spread: f64) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let unit = (x >> 11) as f64 / (1u64 << 53) as f64;
        1.0 + spread * (2.0 * unit - 1.0)
    }
}

/// How long a sample's cost weighs in its mean (the time constant): dear samples (the imports'
/// new code, each object read once) slow the rate about as long as they last. Counted in
/// samples, a start-up read at 5 Hz held the rate down for 2 s into the loop.
const COST_SPAN_S: f64 = 0.5;

/// A moving mean (exponential): the cost of a sample drifts as a stack grows or a thread
/// starts, and one slow read must not halve the rate.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Mean(Option<f64>);

impl Mean {
    /// About the last 16 values.
    pub(super) fn add(&mut self, value: f64) {
        self.add_weighted(value, 1.0 / 16.0);
    }

    /// A value that stood for `dt_s` seconds: about the last [`COST_SPAN_S`] of them, however
    /// many samples that is, but never less than the last 2 or more than the last 64.
    pub(super) fn add_over(&mut self, value: f64, dt_s: f64) {
        self.add_weighted(value, (1.0 - (-dt_s.max(0.0) / COST_SPAN_S).exp()).clamp(1.0 / 64.0, 0.5));
    }

    fn add_weighted(&mut self, value: f64, weight: f64) {
        self.0 = Some(match self.0 {
            None => value,
            Some(m) => m + (value - m) * weight,
        });
    }

    pub(super) fn get(self) -> f64 {
        self.0.unwrap_or(0.0)
    }
}

/// How much the requested periods must be stretched so that the sampling costs at most
/// `budget` (a share of one core): `loads` are each process's (seconds of CPU a sample, seconds
/// between samples asked for), `overhead` the CPU a second spent outside samples (finding the
/// processes). At least 1: the sampler never goes faster than asked.
pub(super) fn stretch(loads: impl Iterator<Item = (f64, f64)>, overhead: f64, budget: f64) -> f64 {
    let asked: f64 = loads.map(|(cost, period)| cost / period.max(1e-6)).sum();
    // The search for processes is paid first, but never leaves samples less than half.
    let left = (budget - overhead).max(budget / 2.0).max(1e-9);
    (asked / left).max(1.0)
}

/// The slowest a sampled process is read: one sample a second, whatever the budget says, so
/// that a deep stack on a slow machine still has a profile.
pub(super) const SLOWEST: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_its_spread_and_covers_it() {
        let mut j = Jitter::new(7);
        let xs: Vec<f64> = (0..10_000).map(|_| j.factor(0.2)).collect();
        assert!(xs.iter().all(|x| (0.8..=1.2).contains(x)));
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((mean - 1.0).abs() < 0.01, "{mean}");
        assert!(xs.iter().any(|x| *x < 0.82) && xs.iter().any(|x| *x > 1.18));
    }

    #[test]
    fn the_budget_stretches_the_periods_and_never_shrinks_them() {
        // 1 ms a sample at 50 Hz is 5% of a core: five times a 1% budget.
        let s = stretch([(0.001, 0.02)].into_iter(), 0.0, 0.01);
        assert!((s - 5.0).abs() < 1e-9, "{s}");
        assert_eq!(stretch([(0.000_01, 0.02)].into_iter(), 0.0, 0.01), 1.0);
        // Two processes share it; the search takes what it costs, down to half.
        let s = stretch([(0.001, 0.02), (0.001, 0.1)].into_iter(), 0.005, 0.01);
        assert!((s - 0.06 / 0.005).abs() < 1e-9, "{s}");
        let s = stretch([(0.001, 0.02)].into_iter(), 0.02, 0.01);
        assert!((s - 10.0).abs() < 1e-9, "{s}");
    }

    /// (The thread clock it is fed from is `crate::profile::thread_cpu`, tested there.)
    #[test]
    fn a_costs_mean_weighs_each_cost() {
        let mut m = Mean::default();
        m.add(2.0);
        m.add(18.0);
        assert_eq!(m.get(), 3.0);
    }

    #[test]
    fn a_costs_mean_forgets_in_time_not_in_samples() {
        // Start-up's dear reads (2 ms at 5 Hz, the budget's pace), then the loop's 0.1 ms ones
        // at whatever rate the mean allows under 1 % of a core: within about 1.5 s the mean
        // allows 50 Hz (0.2 ms), where counting the last 16 samples took over 6 s.
        let mut m = Mean::default();
        (0..20).for_each(|_| m.add_over(0.002, 0.2));
        let (mut t, mut last) = (0.0, 0.2);
        while m.get() > 0.0002 {
            m.add_over(0.0001, last);
            last = (m.get() / 0.01).max(0.02);
            t += last;
            assert!(t < 1.5, "{t} s");
        }
        // At 50 Hz one dear sample moves the mean by a twenty-fifth of its excess, not half.
        let mut m = Mean::default();
        (0..100).for_each(|_| m.add_over(0.0001, 0.02));
        m.add_over(0.0051, 0.02);
        assert!((m.get() - 0.0003).abs() < 0.00003, "{}", m.get());
    }
}
