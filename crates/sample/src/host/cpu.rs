//! A process's CPU share between two readings: what the job's tree and `top`'s view of the
//! processes around a GPU both need, counted one way.

use std::collections::HashMap;
use std::time::Instant;

use crate::proc_info;

/// Each process's CPU ticks at its last reading, named by its start time so that a reused PID
/// starts afresh.
pub struct CpuMeter {
    seen: HashMap<u32, Seen>,
    ticks_per_s: f64,
}

struct Seen {
    start_ticks: u64,
    ticks: u64,
    at: Instant,
}

impl Default for CpuMeter {
    fn default() -> Self {
        Self { seen: HashMap::new(), ticks_per_s: proc_info::ticks_per_s() }
    }
}

impl CpuMeter {
    /// Percent of one core since the process's previous reading (`ticks`: its user and system
    /// ticks now); `None` on its first reading, or where the PID names another process now.
    pub fn read(&mut self, pid: u32, start_ticks: u64, ticks: u64, now: Instant) -> Option<f32> {
        let before = self.seen.insert(pid, Seen { start_ticks, ticks, at: now })?;
        if before.start_ticks != start_ticks || now <= before.at {
            return None;
        }
        let dt = now.duration_since(before.at).as_secs_f64();
        Some((ticks.saturating_sub(before.ticks) as f64 / self.ticks_per_s / dt * 100.0) as f32)
    }

    /// When a process of the last readings started (`/proc/PID/stat`'s field 22).
    pub fn start_ticks(&self, pid: u32) -> Option<u64> {
        self.seen.get(&pid).map(|s| s.start_ticks)
    }

    /// Forgets every process but those `keep` holds.
    pub fn retain(&mut self, keep: impl Fn(u32) -> bool) {
        self.seen.retain(|pid, _| keep(*pid));
    }

    pub fn ticks_per_s(&self) -> f64 {
        self.ticks_per_s
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_share_needs_two_readings_of_the_same_process() {
        let mut m = CpuMeter { seen: HashMap::new(), ticks_per_s: 100.0 };
        let t0 = Instant::now();
        assert_eq!(m.read(7, 500, 1_000, t0), None);
        // 50 ticks in half a second at 100 ticks/s: one whole core.
        assert_eq!(m.read(7, 500, 1_050, t0 + Duration::from_millis(500)), Some(100.0));
        // The PID reused by a process started later: no share from the other's ticks.
        assert_eq!(m.read(7, 900, 10, t0 + Duration::from_secs(1)), None);
        assert_eq!(m.start_ticks(7), Some(900));
        m.retain(|pid| pid != 7);
        assert_eq!(m.start_ticks(7), None);
    }
}
