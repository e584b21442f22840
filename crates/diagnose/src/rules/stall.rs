//! Periodic stalls: the GPU idles for seconds at a regular period inside a busy run.

use super::mean;
use crate::{Finding, Run, Severity, round};

/// GPU-Util at or below this is idle: the driver's reading of a truly paused GPU, with noise.
const IDLE_PCT: f64 = 10.0;
/// A pause shorter than this is a DataLoader hiccup; checkpointing, evaluation and logging take
/// seconds.
const MIN_PAUSE_S: f64 = 2.0;
/// Between pauses the job must be busy, or the "stalls" are just an idle job.
const BUSY_PCT: f64 = 50.0;
/// Intervals between pauses vary by at most this share of their mean to count as periodic.
const REGULAR_CV: f64 = 0.25;

pub fn findings(run: &Run) -> Vec<Finding> {
    let mut out = Vec::new();
    for g in &run.gpus {
        let (a, b) = g.active;
        let idle = |i: usize| g.util_pct[i].is_some_and(|u| u <= IDLE_PCT);
        let mut pauses: Vec<(f64, f64)> = Vec::new();
        let mut i = a;
        while i < b {
            if idle(i) {
                let s = i;
                while i < b && idle(i) {
                    i += 1;
                }
                // A pause touching either edge of the window is the start or end of the job.
                if s > a && i < b {
                    let (t0, t1) = (g.t_s[s], g.t_s[i]);
                    if t1 - t0 >= MIN_PAUSE_S {
                        pauses.push((t0, t1));
                    }
                }
            }
            i += 1;
        }
        if pauses.len() < 2 {
            continue;
        }
        let busy: Vec<f64> = (a..b)
            .filter(|&k| !pauses.iter().any(|p| g.t_s[k] >= p.0 && g.t_s[k] < p.1))
            .filter_map(|k| g.util_pct[k])
            .collect();
        if mean(&busy).is_none_or(|m| m < BUSY_PCT) {
            continue;
        }
        let starts: Vec<f64> = pauses.iter().map(|p| p.0).collect();
        let gaps: Vec<f64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
        let period = mean(&gaps).unwrap_or(0.0);
        let regular = gaps.len() < 2 || super::stdev(&gaps).is_some_and(|sd| sd <= REGULAR_CV * period);
        if !regular {
            continue;
        }
        let pause = mean(&pauses.iter().map(|p| p.1 - p.0).collect::<Vec<_>>()).unwrap_or(0.0);
        let lost: f64 = pauses.iter().map(|p| p.1 - p.0).sum::<f64>() / g.active_s().max(1e-9);
        let severity = if lost >= 0.10 { Severity::Warning } else { Severity::Info };
        let mut f = Finding::new(
            "periodic_stall",
            severity,
            format!("GPU {}: idles {pause:.1} s every {period:.1} s ({:.0}% of the run lost)", g.gpu, lost * 100.0),
        )
        .on_gpu(g.gpu)
        .over(g.window())
        .with("period_s", round(period, 1))
        .with("pause_s", round(pause, 1))
        .pauses(pauses.iter().map(|p| [round(p.0, 1), round(p.1, 1)]).collect())
        .with("lost_share", round(lost, 3))
        .advise(&[
            "something on the host runs every period while the GPU waits: checkpoint saving, evaluation, logging or a synchronizing metric",
            "save checkpoints asynchronously (torch.distributed.checkpoint.async_save, or a background thread copying a CPU state_dict)",
            "evaluate less often or on a separate process; log asynchronously and avoid .item() on every step",
        ]);
        if gaps.len() < 2 {
            f = f.limit("only two pauses: the period rests on one interval");
        }
        out.push(f);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    /// Every 0.5 s from 0 to `end_s`: `busy` GPU-Util, and `idle` inside each `[from, to)` pause.
    fn paused(end_s: f64, busy: f64, idle: f64, pauses: &[(f64, f64)]) -> Run {
        let n = (end_s / 0.5) as usize + 1;
        let util: Vec<f64> = (0..n)
            .map(|i| {
                let t = i as f64 * 0.5;
                if pauses.iter().any(|p| t >= p.0 && t < p.1) { idle } else { busy }
            })
            .collect();
        run(vec![gpu(0, 0.5, &util)])
    }

    fn stall(r: &Run) -> Option<Finding> {
        findings(r).into_iter().next()
    }

    #[test]
    fn a_pause_is_2_s_or_more_at_10_percent_or_less() {
        let two = [(10.0, 12.0), (25.0, 27.0)];
        assert!(stall(&paused(40.0, 90.0, 10.0, &two)).is_some(), "2 s at 10 %");
        assert!(stall(&paused(40.0, 90.0, 10.1, &two)).is_none(), "not idle");
        assert!(stall(&paused(40.0, 90.0, 0.0, &[(10.0, 11.5), (25.0, 26.5)])).is_none(), "1.5 s");
        assert!(stall(&paused(40.0, 90.0, 0.0, &[(10.0, 12.0)])).is_none(), "one pause");
    }

    #[test]
    fn between_pauses_the_gpu_is_busy_50_percent() {
        let two = [(10.0, 12.0), (25.0, 27.0)];
        assert!(stall(&paused(40.0, 50.0, 0.0, &two)).is_some());
        assert!(stall(&paused(40.0, 49.9, 0.0, &two)).is_none());
    }

    #[test]
    fn pauses_are_periodic_when_their_intervals_vary_by_a_quarter_at_most() {
        // Intervals 10 and 6 s: standard deviation 2, a quarter of their mean 8.
        assert!(stall(&paused(40.0, 90.0, 0.0, &[(5.0, 7.0), (15.0, 17.0), (21.0, 23.0)])).is_some());
        // 10.5 and 6: 2.25 against 2.06.
        assert!(stall(&paused(40.0, 90.0, 0.0, &[(5.0, 7.0), (15.5, 17.5), (21.5, 23.5)])).is_none());
    }

    #[test]
    fn a_stall_is_a_warning_from_a_tenth_of_the_run_lost() {
        let two = [(10.0, 12.0), (25.0, 27.0)];
        // 4 s of 40 s: 10 %; of 40.5 s: 9.9 %.
        let f = stall(&paused(40.0, 90.0, 0.0, &two)).unwrap();
        assert_eq!((f.severity, &f.evidence["lost_share"]), (Severity::Warning, &serde_json::json!(0.1)));
        assert_eq!(stall(&paused(40.5, 90.0, 0.0, &two)).unwrap().severity, Severity::Info);
    }
}
