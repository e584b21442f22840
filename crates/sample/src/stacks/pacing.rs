//! When the next sample is due. Intervals are jittered, so a loop whose period is a multiple of
//! the sampler's is not always seen at the same phase, and stretched so that the sampler's own
//! CPU time stays within its budget however deep the stacks are.

use std::time::Duration;

/// The calling thread's CPU time so far: what one round of sampling cost, not counting the
/// time the kernel spent elsewhere.
pub(super) fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into `ts`, a live local; the clock id is a
    // constant every Linux since 2.6.12 knows, and a failure is told by its return value.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(u64::try_from(ts.tv_sec).unwrap_or(0), u32::try_from(ts.tv_nsec).unwrap_or(0))
}

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

/// A moving mean (exponential, about the last 16 values): the cost of a sample drifts as a
/// stack grows or a thread starts, and one slow read must not halve the rate.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Mean(Option<f64>);

impl Mean {
    pub(super) fn add(&mut self, value: f64) {
        self.0 = Some(match self.0 {
            None => value,
            Some(m) => m + (value - m) / 16.0,
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

    #[test]
    fn the_thread_clock_counts_this_threads_work() {
        let before = thread_cpu();
        let mut x = 0u64;
        while thread_cpu() - before < Duration::from_millis(5) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(thread_cpu() > before);
        let mut m = Mean::default();
        m.add(2.0);
        m.add(18.0);
        assert_eq!(m.get(), 3.0);
    }
}
