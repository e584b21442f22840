//! Findings from the loop's own marks: the measured wait for data.

use super::feeding::{
    DATA_WAIT_SHARE, input_advice, loader_settings, settings_evidence, storage_blocked, workers_advice,
};
use crate::{Finding, FindingId, Run, Severity, round};

/// Half the time waiting: the input pipeline, not the model, sets the speed.
const DATA_WAIT_CRITICAL: f64 = 0.5;

/// The share of the loop spent waiting for data, from the loop's own timing: over its steps, or,
/// for a loop whose waits were timed but that marks no steps (no optimizer), over the loop's
/// window. `None` when no wait was timed.
pub(crate) fn measured_wait_share(run: &Run) -> Option<f64> {
    match &run.steps {
        Some(s) => s.data_wait_share(),
        None => unstepped(run).map(|u| u.0),
    }
}

/// (share, seconds waited, the loop's window) of a loop with timed waits and no step marks.
fn unstepped(run: &Run) -> Option<(f64, f64, [f64; 2])> {
    if run.steps.is_some() || run.data_waits_s.is_empty() {
        return None;
    }
    let [a, b] = crate::run::loop_window(run).0?;
    let waited = crate::run::total(&crate::run::merged(run.data_waits_s.clone(), a, b));
    (b > a).then(|| ((waited / (b - a)).min(1.0), waited, [a, b]))
}

/// `input_bound` of a loop that marks no steps but whose waits for data were timed.
fn input_bound_unstepped(run: &Run) -> Vec<Finding> {
    let Some((share, waited, window)) = unstepped(run) else { return Vec::new() };
    if share < DATA_WAIT_SHARE {
        return Vec::new();
    }
    let severity = if share >= DATA_WAIT_CRITICAL { Severity::Critical } else { Severity::Warning };
    let mut f = Finding::new(
        FindingId::InputBound,
        severity,
        "The loop waits for data {loop} of the loop's time (measured in the loop, which marks no steps)".to_owned(),
    )
    .over(window)
    .with("data_wait_s", round(waited, 1))
    .with("data_wait_share_pct", round(100.0 * share, 1))
    .with("speedup_if_hidden", round(1.0 / (1.0 - share).max(0.01), 1))
    .costs_of_loop(share, "measured_data_wait: the loop's own timing of each wait for a batch");
    if run.worker_count > 0 {
        f = f.with("dataloader_workers", run.worker_count as u64);
    }
    f.advice.push(workers_advice(run));
    if let Some(f) = storage(run, &mut f, window) {
        return vec![f];
    }
    vec![with_loader(run, f)]
}

/// The storage evidence for a loop that waits for data, when its loaders wait on storage: the
/// finding then advises storage alone.
fn storage(run: &Run, f: &mut Finding, [a, b]: [f64; 2]) -> Option<Finding> {
    let blocked = storage_blocked(run)?;
    f.title += &format!("; its data loading waits on storage, blocked in I/O {:.0}% of the time", 100.0 * blocked);
    let mut out = f.clone().with("io_blocked_pct", round(100.0 * blocked, 0));
    if let Some(w) = crate::run::mean(&run.host_iowait.iter().map(|x| x.1).collect::<Vec<_>>()) {
        out = out.with("host_iowait_mean_pct", round(w, 1));
    }
    // What the loaders read from storage over the loop, by their own counters.
    let io: Vec<&crate::run::TreeIo> = run.tree_io.iter().filter(|x| x.end_s > a && x.end_s <= b).collect();
    let secs: f64 = io.iter().map(|x| x.seconds).sum();
    let read: f64 = io.iter().map(|x| if run.worker_count > 0 { x.workers_read_bytes } else { x.read_bytes }).sum();
    Some(if secs > 0.0 {
        out.with("storage_read_mb_per_s", round(read / secs / 1e6, 1))
    } else {
        out.limit("the bytes read were not sampled: the read rate is unknown")
    })
}

/// A measured wait's mechanism and advice: the line the loader spends its time at (its workers',
/// or the main thread's own `__getitem__` and collate), and the advice its settings leave.
fn with_loader(run: &Run, mut f: Finding) -> Finding {
    if let Some(s) = loader_settings(run) {
        f = f.with("dataloader", settings_evidence(&s));
    }
    if let Some(l) = crate::main_thread::loader_site(run) {
        f = f.with(l.evidence_key(), l.site.as_str()).with("loader_state", l.state.as_str());
        f.advice.insert(0, l.advice());
    }
    f.advice.extend(input_advice(run));
    f
}

/// `input_bound` resting on the data wait measured inside the loop.
pub fn input_bound(run: &Run) -> Vec<Finding> {
    let Some(steps) = &run.steps else { return input_bound_unstepped(run) };
    let Some(share) = steps.data_wait_share() else { return Vec::new() };
    // Two levels: each stretch with its own figures, and a stretch that waits is worth naming
    // even where the average does not reach the threshold.
    let regimes = steps.regimes();
    let worst = regimes.map_or(share, |r| r[0].wait_share.max(r[1].wait_share));
    if worst < DATA_WAIT_SHARE {
        return Vec::new();
    }
    let severity = if share >= DATA_WAIT_CRITICAL { Severity::Critical } else { Severity::Warning };
    let wait_ms = 1000.0 * steps.mean_wait_s().unwrap_or(0.0);
    let mut f = Finding::new(
        FindingId::InputBound,
        severity,
        format!(
            "The loop waits for data {{loop}} of the loop's time: {:.0} ms of each {:.0} ms step (measured in the loop)",
            wait_ms,
            1000.0 * steps.mean_step_s()
        ),
    )
    .of_pid(steps.pid)
    .over(steps.window_s)
    .with("steps", steps.marked as u64)
    .with("steps_timed", steps.timed as u64)
    .with("steps_per_s", round(steps.per_s(), 2))
    .with("data_wait_share_pct", round(100.0 * share, 1))
    .with("data_wait_mean_ms", round(wait_ms, 1))
    .with("step_mean_ms", round(1000.0 * steps.mean_step_s(), 1))
    .with("speedup_if_hidden", round(1.0 / (1.0 - share).max(0.01), 1))
    .costs_of_loop(share, "measured_data_wait: the loop's own timing of each wait for a batch");
    if let Some(r) = regimes {
        f.title += &format!(
            "; {:.0}% up to {:.0} s, then {:.0}% ({:.0} ms steps, then {:.0} ms)",
            100.0 * r[0].wait_share,
            r[0].window_s[1],
            100.0 * r[1].wait_share,
            1000.0 * r[0].step_mean_s,
            1000.0 * r[1].step_mean_s
        );
        let each: Vec<serde_json::Value> = r
            .iter()
            .map(|r| {
                serde_json::json!({
                    "window_s": [round(r.window_s[0], 1), round(r.window_s[1], 1)],
                    "steps": r.steps,
                    "step_mean_ms": round(1000.0 * r.step_mean_s, 1),
                    "data_wait_share_pct": round(100.0 * r.wait_share, 1),
                })
            })
            .collect();
        f = f.with("regimes", each);
        if r[1].wait_share < DATA_WAIT_SHARE {
            f.severity = Severity::Warning;
            f = f.limit("the wait fell below a fifth of the steps after the first stretch: a loader that caches its items, or a warm-up, costs only that stretch");
        }
    }
    if run.worker_count > 0 {
        f = f.with("dataloader_workers", run.worker_count as u64);
        if let Some(w) = run.worker_cpu_mean {
            f = f.with("worker_cpu_mean_pct", round(w, 0));
        }
    }
    f.advice.push(workers_advice(run));
    // Storage is the evidenced cause: the rest would be guesses.
    if let Some(f) = storage(run, &mut f, steps.window_s) {
        return vec![f];
    }
    vec![with_loader(run, f)]
}

#[cfg(test)]
mod tests {
    use super::super::testing::each_second;
    use super::*;

    fn blocked(t_s: f64, main: bool, workers_share: Option<f64>) -> crate::run::IoBlocked {
        crate::run::IoBlocked { t_s, main, workers_share }
    }

    /// Ten 1 s steps that waited `share` of the time for data.
    fn waited(share: f64) -> Run {
        // The total at the threshold exactly: 10 × share, where a sum of ten falls just short.
        let steps = crate::Steps { waited_s: Some(10.0 * share), ..each_second(0, 10, Some(&|_| share)) };
        Run { steps: Some(steps), ..Run::default() }
    }

    #[test]
    fn a_measured_wait_is_input_bound_from_20_percent_and_critical_from_50() {
        assert!(input_bound(&waited(0.19)).is_empty());
        assert_eq!(input_bound(&waited(0.2))[0].severity, Severity::Warning);
        assert_eq!(input_bound(&waited(0.49))[0].severity, Severity::Warning);
        let f = &input_bound(&waited(0.5))[0];
        assert_eq!((f.severity, &f.evidence["speedup_if_hidden"]), (Severity::Critical, &serde_json::json!(2.0)));
        // Workers blocked in I/O most of the time: storage, and only storage, is advised.
        let mut storage = waited(0.9);
        storage.worker_count = 4;
        storage.tree_width = 5;
        storage.io_blocked =
            (0..10).map(|i| blocked(f64::from(i), false, Some(if i < 7 { 1.0 } else { 0.5 }))).collect();
        let f = &input_bound(&storage)[0];
        assert!(f.title.contains("waits on storage, blocked in I/O 85%"), "{}", f.title);
        assert_eq!(f.advice.len(), 1, "{:?}", f.advice);
        assert!(f.advice[0].contains("local NVMe"), "{:?}", f.advice);
        storage.io_blocked = (0..10).map(|i| blocked(f64::from(i), false, Some(0.4))).collect();
        assert!(!input_bound(&storage)[0].title.contains("storage"));
        let mut unmeasured = waited(0.9);
        unmeasured.steps.as_mut().unwrap().waited_s = None;
        assert!(input_bound(&unmeasured).is_empty(), "no wait timed: nothing measured");
    }

    /// A first epoch read from storage (0.8 s of each 1 s step for 15 s), then cached (0.05 s
    /// for 45 s): 23 % on average, said as the two stretches it was; the same first stretch
    /// over a longer cached run (under a fifth on average) is still named.
    #[test]
    fn a_wait_that_changes_level_is_said_by_stretch() {
        let steps = |n: usize| each_second(0, n, Some(&|i| if i <= 15 { 0.8 } else { 0.05 }));
        for n in [60, 100] {
            let r = crate::Run { steps: Some(steps(n)), ..crate::Run::default() };
            let f = input_bound(&r);
            assert_eq!(f.len(), 1, "{n} steps");
            assert_eq!(
                f[0].title.matches("; 80% up to 15 s, then 5% (1000 ms steps, then 1000 ms)").count(),
                1,
                "{}",
                f[0].title
            );
            assert_eq!(f[0].limits.len(), 1, "{:?}", f[0].limits);
            assert_eq!(f[0].evidence["regimes"][1]["data_wait_share_pct"], 5.0);
            assert_eq!(f[0].severity, Severity::Warning);
        }
    }
}
