//! How often the fields that change slowly, or cost milliseconds per call on a real driver, are
//! re-read. Between reads a sample carries the last reading and its absence: never a value NVML
//! did not give, and never a gap that would read as "not available".

use std::collections::HashMap;
use std::time::{Duration, Instant};

#[cfg(test)]
use gpulse_model::Absence;
use gpulse_model::{Absences, Metric};

/// Re-read periods; `Duration::ZERO` reads every poll. Costs per call on an H200 (driver 580,
/// BENCHMARKS.md) say why each exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cadence {
    /// The power-management limit (0.5 ms a call): a setting.
    pub power_limit: Duration,
    /// The other settings and slow counters: enforced power limit, PCIe link generation and
    /// width (~0.1 ms each), volatile ECC error counts.
    pub settings: Duration,
    /// The energy counter (3–5 ms a call, the costliest read): a counter, so a slower read
    /// loses only resolution. dcgm-exporter collects every 30 s by default.
    pub energy: Duration,
    /// NVML's utilization buffer (2.8 ms a call). It holds about 14 s of readings on an H200,
    /// so a period under that loses none.
    pub util_buffer: Duration,
    /// Per-process SM and memory utilization (about 2.5 ms a call per GPU).
    pub process_util: Duration,
    /// The compute-process list and each process's memory (0.15 ms a call at 1 s, 0.67 ms at
    /// 100 ms): processes start and end over seconds, and memory's trend is the GPU's.
    pub processes: Duration,
}

impl Cadence {
    /// Views that print every poll: only the power limit is held (2 s), as before.
    pub const VIEW: Self = Self {
        power_limit: Duration::from_secs(2),
        settings: Duration::ZERO,
        energy: Duration::ZERO,
        util_buffer: Duration::ZERO,
        process_util: Duration::ZERO,
        processes: Duration::ZERO,
    };

    /// The recorder (`record`, `run`, `attach`, `serve`): docs/recording-format.md says the same.
    pub const RECORDER: Self = Self {
        power_limit: Duration::from_secs(5),
        settings: Duration::from_secs(5),
        energy: Duration::from_secs(30),
        util_buffer: Duration::from_secs(10),
        process_util: Duration::from_secs(5),
        processes: Duration::from_secs(1),
    };
}

impl Default for Cadence {
    fn default() -> Self {
        Self::VIEW
    }
}

/// Which groups this poll reads.
#[derive(Debug, Clone, Copy)]
pub(super) struct Due {
    pub power_limit: bool,
    pub settings: bool,
    pub energy: bool,
    pub util_buffer: bool,
    pub process_util: bool,
    pub processes: bool,
}

/// A group is due a twentieth (5 %) of its period early, so polls on a fixed schedule that land
/// a little early still read it: at 1 s polls a 1 s group is read every poll, never every other.
const EARLY_PART: u32 = 20;

/// The last reading of each held field of one device, with the absences that came with it.
#[derive(Debug, Default)]
pub(super) struct Held {
    last: [Option<Instant>; 6],
    pub power_limit_mw: Option<u32>,
    pub enforced_power_limit_mw: Option<u32>,
    pub pcie_link_gen: Option<u32>,
    pub pcie_link_width: Option<u32>,
    pub ecc_uncorrected: Option<u64>,
    pub ecc_corrected: Option<u64>,
    pub energy_mj: Option<u64>,
    /// Per PID: SM and memory utilization, percent.
    pub process_util: HashMap<u32, (u32, u32)>,
    /// The process list of the last read.
    pub processes: Option<Vec<gpulse_model::ProcessSample>>,
    /// Every NVLink link as last read.
    pub nvlinks: Vec<gpulse_model::NvLink>,
    /// The metric table's readings as last read.
    pub table: gpulse_model::TableReadings,
    absent: Absences,
}

impl Held {
    /// Which groups are due at `now`, marking them read.
    pub(super) fn due(&mut self, c: &Cadence, now: Instant) -> Due {
        let periods = [c.power_limit, c.settings, c.energy, c.util_buffer, c.process_util, c.processes];
        let mut due = [false; 6];
        for ((last, every), d) in self.last.iter().zip(periods).zip(&mut due) {
            *d = last.is_none_or(|l| now.duration_since(l) + every / EARLY_PART >= every);
        }
        // Per-process utilization is read with the process list, so it waits for the list's turn.
        due[4] &= due[5];
        for (last, d) in self.last.iter_mut().zip(due) {
            if d {
                *last = Some(now);
            }
        }
        Due {
            power_limit: due[0],
            settings: due[1],
            energy: due[2],
            util_buffer: due[3],
            process_util: due[4],
            processes: due[5],
        }
    }

    /// Makes the counters that hold what passed since their last read due at the next poll: the
    /// energy counter, and the utilization buffer, whose readings since its last read (up to its
    /// period's) would otherwise be left out of a run's end.
    pub(super) fn expire_counters(&mut self) {
        self.last[2] = None;
        self.last[3] = None;
    }

    /// Keeps the absences of `metrics` just read, in place of the ones held.
    pub(super) fn keep_absences(&mut self, metrics: &[Metric], read: &Absences) {
        self.absent.retain(|a| !metrics.contains(&a.0));
        self.absent.extend(read.iter().filter(|a| metrics.contains(&a.0)).copied());
    }

    /// Adds the held absences of `metrics` to a sample's.
    pub(super) fn restore_absences(&self, metrics: &[Metric], out: &mut Absences) {
        for a in self.absent.iter().filter(|a| metrics.contains(&a.0)) {
            if !out.iter().any(|o| o.0 == a.0) {
                out.push(*a);
            }
        }
    }

    /// Why `metric` was absent at its last read, if it was.
    #[cfg(test)]
    pub(super) fn absence(&self, metric: Metric) -> Option<Absence> {
        self.absent.iter().find(|a| a.0 == metric).map(|a| a.1)
    }
}

/// The settings group's metrics.
pub(super) const SETTINGS: &[Metric] =
    &[Metric::EnforcedPowerLimit, Metric::PcieLink, Metric::EccErrors, Metric::NvLink];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_come_due_on_their_own_periods() {
        let mut h = Held::default();
        let c = Cadence::RECORDER;
        let t0 = Instant::now();
        let d = h.due(&c, t0);
        assert!(
            d.power_limit && d.settings && d.energy && d.util_buffer && d.process_util && d.processes,
            "the first poll reads all"
        );
        // Polls on a 1 s schedule, each a few ms early or late.
        let at = |s: u64| t0 + Duration::from_secs(s) - Duration::from_millis(3 * (s % 2));
        let flags = |d: Due| [d.power_limit, d.settings, d.energy, d.util_buffer, d.process_util, d.processes];
        let counts = (1..=60).fold([0; 6], |mut n, s| {
            for (k, on) in flags(h.due(&c, at(s))).into_iter().enumerate() {
                n[k] += usize::from(on);
            }
            n
        });
        assert_eq!(counts, [12, 12, 2, 6, 12, 60], "in 60 s of 1 s polls after the first");
        // At 100 ms, the process list is read once a second, and per-process utilization with
        // it every 5 s, not only when the two happen to fall on the same poll.
        let mut fast = Held::default();
        let polls: Vec<Due> = (0..200).map(|i| fast.due(&c, t0 + Duration::from_millis(100 * i + i % 3))).collect();
        assert_eq!(polls.iter().filter(|d| d.processes).count(), 20, "in 20 s of 100 ms polls");
        let util: Vec<usize> = (0..200).filter(|&i| polls[i].process_util).collect();
        assert!(util.iter().all(|&i| polls[i].processes), "read with the list: {util:?}");
        assert_eq!(util.len(), 4, "every 5 s: {util:?}");
        let mut every = Held::default();
        assert!((0..5).all(|s| every.due(&Cadence::VIEW, at(s)).energy), "a view reads energy every poll");
        // A closing poll 3 s after a read: the energy counter and the utilization buffer alone
        // are read afresh.
        let mut closing = Held::default();
        closing.due(&c, t0);
        closing.expire_counters();
        let d = closing.due(&c, t0 + Duration::from_secs(3));
        assert!(d.energy && d.util_buffer && !d.settings && !d.process_util, "{d:?}");
        let next = closing.due(&c, t0 + Duration::from_secs(4));
        assert!(!next.energy && !next.util_buffer, "then their periods again");
    }

    #[test]
    fn absences_are_held_per_group() {
        let mut h = Held::default();
        let read: Absences =
            [(Metric::PcieLink, Absence::NotSupported), (Metric::Energy, Absence::NoPermission)].into_iter().collect();
        h.keep_absences(SETTINGS, &read);
        assert_eq!(h.absence(Metric::PcieLink), Some(Absence::NotSupported));
        assert_eq!(h.absence(Metric::Energy), None, "not of this group");
        let mut out = Absences::new();
        h.restore_absences(SETTINGS, &mut out);
        h.restore_absences(SETTINGS, &mut out);
        assert_eq!(out.as_slice(), [(Metric::PcieLink, Absence::NotSupported)], "once");
        h.keep_absences(SETTINGS, &Absences::new());
        assert_eq!(h.absence(Metric::PcieLink), None, "a later read that succeeded clears it");
    }
}
