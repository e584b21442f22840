//! Training steps and the wait for data, from the loop's own marks (`gpulse.step()`, or
//! `gpulse run --instrument`).

use std::collections::BTreeMap;

use gpulse_model::{Marker, MarkerKind};

/// Fewer step intervals than this say nothing steady about a loop.
const MIN_STEPS: usize = 3;

/// The steps of the process that marked the most of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Steps {
    pub pid: u32,
    /// Processes that marked steps (torchrun's ranks each do).
    pub ranks: usize,
    /// Steps the loop marked, the first mark's included: what its `gpulse.step()` calls counted.
    pub marked: usize,
    /// Steps timed: those that ended after the first step mark, the intervals the rate is over
    /// (the first mark opens the window, so one fewer than `marked` where marks are not folded).
    pub timed: usize,
    /// From the first to the last step mark, seconds since the run started.
    pub window_s: [f64; 2],
    /// Each step mark (a fast loop's marks stand for several steps): when it ended (seconds
    /// since the run started) and the mean time of the steps it stands for.
    pub step_s: Vec<(f64, f64)>,
    /// Each step mark: when it ended and the mean wait for data of its steps; empty when no wait
    /// was timed.
    pub data_wait_s: Vec<(f64, f64)>,
    /// Seconds waited for data over the window; `None` when no wait was timed.
    pub waited_s: Option<f64>,
}

impl Steps {
    /// From marks in any order; `start_us` is the run's start. `loader_timed`: every DataLoader
    /// wait would have been marked (`gpulse run --instrument`), so a loop with none waited for
    /// none. `None` below [`MIN_STEPS`].
    pub fn from_markers(markers: &[Marker], start_us: i64, loader_timed: bool) -> Option<Self> {
        let mut by_pid: BTreeMap<u32, Vec<(i64, u32)>> = BTreeMap::new();
        for m in markers.iter().filter(|m| m.kind == MarkerKind::Step) {
            by_pid.entry(m.pid).or_default().push((m.t_us, m.count.max(1)));
        }
        let ranks = by_pid.len();
        let total = |v: &Vec<(i64, u32)>| v.iter().map(|m| u64::from(m.1)).sum::<u64>();
        let (pid, mut ends) = by_pid.into_iter().max_by_key(|(pid, v)| (total(v), std::cmp::Reverse(*pid)))?;
        ends.sort_unstable();
        // The first mark opens the window: the steps it stands for ended before it.
        let timed: usize = ends[1..].iter().map(|e| e.1 as usize).sum();
        if timed < MIN_STEPS {
            return None;
        }
        let t = |us: i64| (us - start_us) as f64 / 1e6;
        let step_s: Vec<(f64, f64)> =
            ends.windows(2).map(|w| (t(w[1].0), (w[1].0 - w[0].0) as f64 / 1e6 / f64::from(w[1].1))).collect();
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
        let (data_wait_s, waited_s) = if waits.is_empty() {
            match loader_timed {
                true => (step_s.iter().map(|s| (s.0, 0.0)).collect(), Some(0.0)),
                false => (Vec::new(), None),
            }
        } else {
            let mut per_mark = vec![0i64; ends.len() - 1];
            for (begin, dur) in waits {
                // Mark i spans (ends[i], ends[i + 1]].
                let i = ends.partition_point(|e| e.0 < begin);
                if i >= 1 && i < ends.len() {
                    per_mark[i - 1] += dur;
                }
            }
            let waited = per_mark.iter().sum::<i64>() as f64 / 1e6;
            let means =
                ends[1..].iter().zip(&per_mark).map(|(e, w)| (t(e.0), *w as f64 / 1e6 / f64::from(e.1))).collect();
            (means, Some(waited))
        };
        Some(Self {
            pid,
            ranks,
            marked: timed + ends[0].1 as usize,
            timed,
            window_s: [t(ends[0].0), t(ends[ends.len() - 1].0)],
            step_s,
            data_wait_s,
            waited_s,
        })
    }

    /// Each process's own steps, where more than one process marked steps (each rank of a
    /// distributed job marks its own); empty otherwise.
    pub fn per_process(markers: &[Marker], start_us: i64, loader_timed: bool) -> Vec<Self> {
        let pids: std::collections::BTreeSet<u32> =
            markers.iter().filter(|m| m.kind == MarkerKind::Step).map(|m| m.pid).collect();
        if pids.len() < 2 {
            return Vec::new();
        }
        pids.into_iter()
            .filter_map(|pid| {
                let mine: Vec<Marker> = markers.iter().filter(|m| m.pid == pid).cloned().collect();
                Self::from_markers(&mine, start_us, loader_timed)
            })
            .collect()
    }

    /// Seconds from the first step mark to the last.
    pub fn span_s(&self) -> f64 {
        self.window_s[1] - self.window_s[0]
    }

    /// Steps a second over the measured span.
    pub fn per_s(&self) -> f64 {
        self.timed as f64 / self.span_s().max(1e-9)
    }

    /// Mean seconds a step takes.
    pub fn mean_step_s(&self) -> f64 {
        self.span_s() / self.timed.max(1) as f64
    }

    /// Mean seconds a step waited for data.
    pub fn mean_wait_s(&self) -> Option<f64> {
        Some(self.waited_s? / self.timed.max(1) as f64)
    }

    /// The share of wall time between the first and the last step spent waiting for data, 0 to
    /// 1; `None` when no wait was timed.
    pub fn data_wait_share(&self) -> Option<f64> {
        Some((self.waited_s? / self.span_s().max(1e-9)).clamp(0.0, 1.0))
    }
}

/// One stretch of the loop at a level of its own: a loader that caches its items after the first
/// epoch, a warm-up, a setting changed mid-run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Regime {
    /// `[start, end]`, seconds since the run started.
    pub window_s: [f64; 2],
    pub steps: usize,
    pub step_mean_s: f64,
    pub wait_share: f64,
}

/// A side of a change holds at least this share of the marks: a few slow first steps are the
/// loop starting, not a level.
const MIN_REGIME_SHARE: f64 = 0.1;
/// A change of level explains at least this share of the waits' variance about one mean: a step
/// change does, spikes every epoch or noise do not.
const MIN_EXPLAINED: f64 = 0.5;

impl Steps {
    /// The loop's waits split where their level changed and stayed changed, when it did: the one
    /// split that leaves the least variance on either side, kept when each side lasts 10 s and a
    /// tenth of the marks, the split explains half the variance, and the two sides' wait shares
    /// differ twofold.
    pub fn regimes(&self) -> Option<[Regime; 2]> {
        let n = self.data_wait_s.len();
        if n != self.step_s.len() || n < 2 * MIN_STEPS {
            return None;
        }
        let w: Vec<f64> = self.data_wait_s.iter().map(|x| x.1).collect();
        let (mut sum, mut sq) = (vec![0.0; n + 1], vec![0.0; n + 1]);
        for i in 0..n {
            sum[i + 1] = sum[i] + w[i];
            sq[i + 1] = sq[i] + w[i] * w[i];
        }
        let sse = |a: usize, b: usize| {
            let k = (b - a) as f64;
            (sq[b] - sq[a]) - (sum[b] - sum[a]).powi(2) / k
        };
        let least = ((n as f64 * MIN_REGIME_SHARE).ceil() as usize).max(MIN_STEPS);
        let k = (least..=n - least).min_by(|&a, &b| (sse(0, a) + sse(a, n)).total_cmp(&(sse(0, b) + sse(b, n))))?;
        let total = sse(0, n);
        if total <= 0.0 || sse(0, k) + sse(k, n) > (1.0 - MIN_EXPLAINED) * total {
            return None;
        }
        let side = |a: usize, b: usize| {
            let from = if a == 0 { self.window_s[0] } else { self.step_s[a - 1].0 };
            let to = self.step_s[b - 1].0;
            let steps: f64 = self.step_s[a..b].iter().map(|x| x.1).sum();
            let waited: f64 = w[a..b].iter().sum();
            Regime {
                window_s: [from, to],
                steps: b - a,
                step_mean_s: steps / (b - a) as f64,
                wait_share: (waited / steps.max(1e-9)).clamp(0.0, 1.0),
            }
        };
        let (a, b) = (side(0, k), side(k, n));
        let lasting = |r: &Regime| r.window_s[1] - r.window_s[0] >= crate::run::MIN_ACTIVE_S;
        let twofold = a.wait_share.max(b.wait_share) >= 2.0 * a.wait_share.min(b.wait_share);
        (lasting(&a) && lasting(&b) && twofold).then_some([a, b])
    }
}

/// A named phase and its `[start, end]`, seconds since the run started.
pub type NamedSpan = (String, [f64; 2]);

/// The phase `gpulse run --instrument` marks around a host-to-device copy that blocked the loop.
pub const COPY_PHASE: &str = "h2d_copy";

/// A run's timed stretches, each `[start, end]` in seconds since the run started, from any
/// process: what the ledger accounts and a stall's pauses are checked against.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Spans {
    /// Each wait for data (a `data_wait` mark, or a phase named `data`).
    pub waits: Vec<[f64; 2]>,
    /// Those of [`Spans::waits`] that stand for several folded waits: their total is exact, but
    /// they are placed as one stretch from the first one's start.
    pub folded_waits: Vec<[f64; 2]>,
    /// Each other named phase (`eval`, `checkpoint`).
    pub phases: Vec<NamedSpan>,
    /// Each host-to-device copy that held the loop up ([`COPY_PHASE`]).
    pub copies: Vec<[f64; 2]>,
}

/// The timed stretches of `markers`; a folded mark's stretches count as one.
pub fn spans(markers: &[Marker], start_us: i64) -> Spans {
    let t = |us: i64| (us - start_us) as f64 / 1e6;
    let mut out = Spans::default();
    for m in markers {
        let Some(dur) = m.dur_us else { continue };
        let span = [t(m.t_us), t(m.t_us + dur.max(0))];
        match (m.kind, m.name.as_deref()) {
            (MarkerKind::DataWait, _) | (MarkerKind::Phase, Some("data")) => {
                out.waits.push(span);
                if m.count > 1 {
                    out.folded_waits.push(span);
                }
            }
            (MarkerKind::Phase, Some(COPY_PHASE)) => out.copies.push(span),
            (MarkerKind::Phase, Some(name)) => out.phases.push((name.to_owned(), span)),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(t_ms: i64, pid: u32, kind: MarkerKind, dur_ms: Option<i64>) -> Marker {
        Marker::one(t_ms * 1000, pid, kind, None, dur_ms.map(|d| d * 1000))
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
        assert_eq!((s.marked, s.timed), (11, 10), "11 marks, 10 steps between them");
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
        assert_eq!((s.pid, s.ranks, s.marked, s.timed), (1, 2, 20, 19));
        assert_eq!(s.data_wait_share(), None, "no wait was timed");
        // Under --instrument every DataLoader wait is timed: none means the loop used none.
        let s = Steps::from_markers(&m, 0, true).unwrap();
        assert_eq!(s.data_wait_share(), Some(0.0));
    }

    #[test]
    fn folded_marks_count_every_step_they_stand_for() {
        // 1000 steps of 1 ms, each waiting 0.5 ms, folded into one mark per 100 ms.
        let mut m = vec![mark(0, 3, MarkerKind::Step, None)];
        for k in 1..=10 {
            m.push(Marker { count: 100, ..mark(k * 100 - 99, 3, MarkerKind::DataWait, Some(50)) });
            m.push(Marker { count: 100, ..mark(k * 100, 3, MarkerKind::Step, None) });
        }
        let s = Steps::from_markers(&m, 0, false).unwrap();
        assert_eq!((s.marked, s.timed), (1001, 1000));
        assert!((s.per_s() - 1000.0).abs() < 1e-6);
        assert!((s.mean_step_s() - 0.001).abs() < 1e-12);
        assert!((s.data_wait_share().unwrap() - 0.5).abs() < 1e-9);
        assert!(s.step_s.iter().all(|x| (x.1 - 0.001).abs() < 1e-12), "per-step means: {:?}", s.step_s);
        assert!(s.data_wait_s.iter().all(|x| (x.1 - 0.0005).abs() < 1e-12));
    }

    /// 40 steps of 1 s: the first 15 wait 0.8 s each (the first epoch, reading from storage),
    /// the rest 0.05 s (cached): two stretches with their own shares. Spikes of the same size
    /// every tenth step are no change of level.
    #[test]
    fn a_loop_whose_wait_changes_level_has_two_regimes() {
        let steps = |wait: &dyn Fn(usize) -> f64| crate::rules::testing::each_second(0, 40, Some(wait));
        let [a, b] = steps(&|i| if i <= 15 { 0.8 } else { 0.05 }).regimes().expect("two regimes");
        assert_eq!((a.window_s, a.steps, b.window_s, b.steps), ([0.0, 15.0], 15, [15.0, 40.0], 25));
        assert!((a.wait_share - 0.8).abs() < 1e-9 && (b.wait_share - 0.05).abs() < 1e-9, "{a:?} {b:?}");
        assert!(steps(&|i| if i % 10 == 0 { 0.8 } else { 0.05 }).regimes().is_none(), "spikes");
        assert!(steps(&|i| if i <= 3 { 0.8 } else { 0.05 }).regimes().is_none(), "a slow start");
        assert!(steps(&|i| if i <= 15 { 0.3 } else { 0.2 }).regimes().is_none(), "under twofold");
    }

    #[test]
    fn too_few_steps_say_nothing() {
        let m: Vec<Marker> = (0..3).map(|i| mark(i * 10, 1, MarkerKind::Step, None)).collect();
        assert_eq!(Steps::from_markers(&m, 0, true), None);
    }
}
