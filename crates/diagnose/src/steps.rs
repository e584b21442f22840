//! Training steps and the wait for data, from the loop's own marks (`gpulse.step()`, or
//! `gpulse run --instrument`).

use std::collections::BTreeMap;

use gpulse_record::{Marker, MarkerKind};

/// Fewer step intervals than this say nothing steady about a loop.
const MIN_STEPS: usize = 3;

/// The steps of the process that marked the most of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Steps {
    pub pid: u32,
    /// Processes that marked steps (torchrun's ranks each do).
    pub ranks: usize,
    /// Step intervals measured: one less than the step marks.
    pub count: usize,
    /// From the first to the last step mark, seconds since the run started.
    pub window_s: [f64; 2],
    /// Each step: when it ended (seconds since the run started) and how long it took.
    pub step_s: Vec<(f64, f64)>,
    /// Each step: when it ended and how long it waited for data; empty when no wait was timed.
    pub data_wait_s: Vec<(f64, f64)>,
}

impl Steps {
    /// From marks in any order; `start_us` is the run's start. `loader_timed`: every DataLoader
    /// wait would have been marked (`gpulse run --instrument`), so a loop with none waited for
    /// none. `None` below [`MIN_STEPS`].
    pub fn from_markers(markers: &[Marker], start_us: i64, loader_timed: bool) -> Option<Self> {
        let mut by_pid: BTreeMap<u32, Vec<i64>> = BTreeMap::new();
        for m in markers.iter().filter(|m| m.kind == MarkerKind::Step) {
            by_pid.entry(m.pid).or_default().push(m.t_us);
        }
        let ranks = by_pid.len();
        let (pid, mut ends) = by_pid.into_iter().max_by_key(|(pid, v)| (v.len(), std::cmp::Reverse(*pid)))?;
        ends.sort_unstable();
        if ends.len() <= MIN_STEPS {
            return None;
        }
        let t = |us: i64| (us - start_us) as f64 / 1e6;
        let step_s: Vec<(f64, f64)> = ends.windows(2).map(|w| (t(w[1]), (w[1] - w[0]) as f64 / 1e6)).collect();
        // A wait belongs to the step in which it began; a phase named "data" is a wait too.
        let mut waits: Vec<(i64, i64)> = markers
            .iter()
            .filter(|m| m.pid == pid)
            .filter(|m| {
                m.kind == MarkerKind::DataWait || (m.kind == MarkerKind::Phase && m.name.as_deref() == Some("data"))
            })
            .filter_map(|m| Some((m.t_us, m.dur_us?.max(0))))
            .collect();
        waits.sort_unstable();
        let data_wait_s = if waits.is_empty() {
            if loader_timed { step_s.iter().map(|s| (s.0, 0.0)).collect() } else { Vec::new() }
        } else {
            let mut per_step = vec![0i64; ends.len() - 1];
            for (begin, dur) in waits {
                // Step i spans (ends[i], ends[i + 1]].
                let i = ends.partition_point(|&e| e < begin);
                if i >= 1 && i < ends.len() {
                    per_step[i - 1] += dur;
                }
            }
            step_s.iter().zip(per_step).map(|(s, w)| (s.0, w as f64 / 1e6)).collect()
        };
        Some(Self {
            pid,
            ranks,
            count: step_s.len(),
            window_s: [t(ends[0]), t(ends[ends.len() - 1])],
            step_s,
            data_wait_s,
        })
    }

    /// Seconds from the first step mark to the last.
    pub fn span_s(&self) -> f64 {
        self.window_s[1] - self.window_s[0]
    }

    /// Steps a second over the measured span.
    pub fn per_s(&self) -> f64 {
        self.count as f64 / self.span_s().max(1e-9)
    }

    /// Mean seconds a step takes.
    pub fn mean_step_s(&self) -> f64 {
        self.span_s() / self.count.max(1) as f64
    }

    /// The share of wall time between the first and the last step spent waiting for data, 0 to
    /// 1; `None` when no wait was timed.
    pub fn data_wait_share(&self) -> Option<f64> {
        if self.data_wait_s.is_empty() {
            return None;
        }
        let waited: f64 = self.data_wait_s.iter().map(|w| w.1).sum();
        Some((waited / self.span_s().max(1e-9)).clamp(0.0, 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(t_ms: i64, pid: u32, kind: MarkerKind, dur_ms: Option<i64>) -> Marker {
        Marker { t_us: t_ms * 1000, pid, kind, name: None, dur_us: dur_ms.map(|d| d * 1000) }
    }

    #[test]
    fn share_counts_waits_inside_the_measured_steps_only() {
        // Steps end every 100 ms from t = 1000; each waits 60 ms for data at its start. The wait
        // before the first step mark (warm-up) is outside the window.
        let mut m = vec![mark(900, 7, MarkerKind::DataWait, Some(500))];
        for i in 0..=10 {
            let end = 1000 + 100 * i;
            m.push(mark(end, 7, MarkerKind::Step, None));
            if i < 10 {
                m.push(mark(end + 1, 7, MarkerKind::DataWait, Some(60)));
            }
        }
        let s = Steps::from_markers(&m, 0, false).unwrap();
        assert_eq!(s.count, 10);
        assert!((s.per_s() - 10.0).abs() < 1e-9);
        assert!((s.data_wait_share().unwrap() - 0.6).abs() < 1e-9);
        assert_eq!(s.data_wait_s.len(), 10);
        assert!((s.window_s[0] - 1.0).abs() < 1e-9);
    }

    #[test]
    fn the_busiest_process_is_measured_and_ranks_are_counted() {
        let mut m = Vec::new();
        for i in 0..20 {
            m.push(mark(i * 50, 1, MarkerKind::Step, None));
        }
        for i in 0..5 {
            m.push(mark(i * 200, 2, MarkerKind::Step, None));
        }
        let s = Steps::from_markers(&m, 0, false).unwrap();
        assert_eq!((s.pid, s.ranks, s.count), (1, 2, 19));
        assert_eq!(s.data_wait_share(), None, "no wait was timed");
        // Under --instrument every DataLoader wait is timed: none means the loop used none.
        let s = Steps::from_markers(&m, 0, true).unwrap();
        assert_eq!(s.data_wait_share(), Some(0.0));
    }

    #[test]
    fn too_few_steps_say_nothing() {
        let m: Vec<Marker> = (0..3).map(|i| mark(i * 10, 1, MarkerKind::Step, None)).collect();
        assert_eq!(Steps::from_markers(&m, 0, true), None);
    }
}
