//! Whole-machine CPU (total, per core, iowait, steal), memory and load.

use gpulse_model::HostSample;
use procfs::{CpuTime, Current, CurrentSI, KernelStats, LoadAverage, Meminfo};

use gpulse_base::clock::now_us;

/// Busy and total ticks of one CPU line of `/proc/stat`.
#[derive(Debug, Clone, Copy, Default)]
struct Ticks {
    busy: u64,
    iowait: u64,
    steal: u64,
    total: u64,
}

impl From<&CpuTime> for Ticks {
    fn from(c: &CpuTime) -> Self {
        let iowait = c.iowait.unwrap_or(0);
        let steal = c.steal.unwrap_or(0);
        let idle = c.idle + iowait;
        // guest time is already counted in user time.
        let total = c.user + c.nice + c.system + idle + c.irq.unwrap_or(0) + c.softirq.unwrap_or(0) + steal;
        Self { busy: total - idle - steal, iowait, steal, total }
    }
}

/// Percent of `part` over the interval between two readings.
fn share(now: u64, before: u64, total_now: u64, total_before: u64) -> Option<f32> {
    let dt = total_now.checked_sub(total_before).filter(|d| *d > 0)?;
    Some((now.saturating_sub(before) as f64 * 100.0 / dt as f64) as f32)
}

/// Reads the machine; CPU shares cover the time since the previous call.
#[derive(Debug, Default)]
pub struct HostSampler {
    prev: Option<(Ticks, Vec<Ticks>)>,
}

impl HostSampler {
    pub fn new() -> Self {
        Self::default()
    }

    /// One reading. CPU fields are `None` on the first call (there is no interval yet).
    pub fn sample(&mut self) -> HostSample {
        let mut s = HostSample { timestamp_us: now_us(), ..HostSample::default() };
        if let Ok(stats) = KernelStats::current() {
            let total = Ticks::from(&stats.total);
            let cores: Vec<Ticks> = stats.cpu_time.iter().map(Ticks::from).collect();
            if let Some((pt, pc)) = &self.prev {
                s.cpu_busy_pct = share(total.busy, pt.busy, total.total, pt.total);
                s.cpu_iowait_pct = share(total.iowait, pt.iowait, total.total, pt.total);
                s.cpu_steal_pct = share(total.steal, pt.steal, total.total, pt.total);
                s.cpu_core_busy_pct =
                    cores.iter().zip(pc).map(|(c, p)| share(c.busy, p.busy, c.total, p.total)).collect();
            }
            self.prev = Some((total, cores));
        }
        if let Ok(m) = Meminfo::current() {
            s.memory_total_bytes = Some(m.mem_total);
            s.memory_used_bytes = m.mem_available.map(|a| m.mem_total.saturating_sub(a));
            s.swap_total_bytes = Some(m.swap_total);
            s.swap_used_bytes = Some(m.swap_total.saturating_sub(m.swap_free));
        }
        s.load_1m = LoadAverage::current().ok().map(|l| l.one);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_core_without_ticks_is_unknown_not_idle() {
        assert_eq!(share(500, 500, 1000, 1000), None, "no ticks passed: nothing to tell");
        assert_eq!(share(500, 400, 1100, 900), Some(50.0));
        assert_eq!(share(5, 4, 90, 100), None, "a counter that went back");
    }

    #[test]
    fn second_reading_has_cpu_shares() {
        let mut h = HostSampler::new();
        let first = h.sample();
        assert_eq!(first.cpu_busy_pct, None);
        assert!(first.memory_total_bytes.unwrap() > first.memory_used_bytes.unwrap());
        // Swap as /proc/meminfo has it, read here on our own.
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
        let kib = |key: &str| -> u64 {
            let line = meminfo.lines().find(|l| l.starts_with(key)).unwrap();
            line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
        };
        assert_eq!(first.swap_total_bytes, Some(kib("SwapTotal:")));
        let used = kib("SwapTotal:") - kib("SwapFree:");
        let got = first.swap_used_bytes.unwrap();
        assert!(got.abs_diff(used) <= 64 << 20, "swap in use {got} against {used} a moment later");
        // Burn a little CPU so the interval has ticks in it.
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(60) {
            std::hint::black_box(0u64.wrapping_add(1));
        }
        let second = h.sample();
        let busy = second.cpu_busy_pct.expect("an interval");
        assert!((0.0..=100.0).contains(&busy));
        assert_eq!(
            second.cpu_core_busy_pct.len(),
            std::thread::available_parallelism().map_or(0, |n| n.get()).max(second.cpu_core_busy_pct.len())
        );
    }
}
