//! Findings from the loop's own marks: the measured wait for data.

use crate::{Finding, Run, Severity, round};

/// A loop that waits for data a fifth of its wall time would run at least 1.25× faster with the
/// wait hidden behind compute; below that, other gaps usually matter more.
pub const DATA_WAIT_SHARE: f64 = 0.2;
/// Half the time waiting: the input pipeline, not the model, sets the speed.
const DATA_WAIT_CRITICAL: f64 = 0.5;

/// `input_bound` resting on the data wait measured inside the loop.
pub fn input_bound(run: &Run) -> Vec<Finding> {
    let Some(steps) = &run.steps else { return Vec::new() };
    let Some(share) = steps.data_wait_share() else { return Vec::new() };
    if share < DATA_WAIT_SHARE {
        return Vec::new();
    }
    let severity = if share >= DATA_WAIT_CRITICAL { Severity::Critical } else { Severity::Warning };
    let wait_ms = 1000.0 * steps.mean_wait_s().unwrap_or(0.0);
    let mut f = Finding::new(
        "input_bound",
        severity,
        format!(
            "The loop waits for data {:.0}% of the time: {:.0} ms of each {:.0} ms step (measured in the loop)",
            100.0 * share,
            wait_ms,
            1000.0 * steps.mean_step_s()
        ),
    )
    .with("pid", steps.pid)
    .over(steps.window_s)
    .with("steps", steps.count as u64)
    .with("steps_per_s", round(steps.per_s(), 2))
    .with("data_wait_share_pct", round(100.0 * share, 1))
    .with("data_wait_mean_ms", round(wait_ms, 1))
    .with("step_mean_ms", round(1000.0 * steps.mean_step_s(), 1))
    .with("speedup_if_hidden", round(1.0 / (1.0 - share).max(0.01), 1))
    .costs(share, "measured_data_wait: the loop's own timing of each wait for a batch");
    if run.worker_count > 0 {
        f = f.with("dataloader_workers", run.worker_count as u64);
        if let Some(w) = run.worker_cpu_mean {
            f = f.with("worker_cpu_mean_pct", round(w, 0));
        }
    }
    f.advice.push(super::host::workers_advice(run));
    // Storage is the evidenced cause: the rest would be guesses.
    if let Some(blocked) = super::host::storage_blocked(run) {
        f.title += &format!("; its data loading waits on storage, blocked in I/O {:.0}% of the time", 100.0 * blocked);
        f = f.with("io_blocked_pct", round(100.0 * blocked, 0));
        if let Some(w) = super::mean(&run.host_iowait.iter().map(|x| x.1).collect::<Vec<_>>()) {
            f = f.with("host_iowait_mean_pct", round(w, 1));
        }
        return vec![f.limit("the bytes read are not sampled: the read rate is unknown")];
    }
    vec![f.advise(&super::utilization::INPUT_ADVICE)]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten 1 s steps that waited `share` of the time for data.
    fn waited(share: f64) -> Run {
        let steps = crate::Steps {
            pid: 1,
            ranks: 1,
            count: 10,
            window_s: [0.0, 10.0],
            step_s: (1..=10).map(|i| (f64::from(i), 1.0)).collect(),
            data_wait_s: (1..=10).map(|i| (f64::from(i), share)).collect(),
            waited_s: Some(10.0 * share),
        };
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
        storage.io_blocked = (0..10).map(|i| (f64::from(i), false, Some(if i < 7 { 1.0 } else { 0.5 }))).collect();
        let f = &input_bound(&storage)[0];
        assert!(f.title.contains("waits on storage, blocked in I/O 85%"), "{}", f.title);
        assert_eq!(f.advice.len(), 1, "{:?}", f.advice);
        assert!(f.advice[0].contains("local NVMe"), "{:?}", f.advice);
        storage.io_blocked = (0..10).map(|i| (f64::from(i), false, Some(0.4))).collect();
        assert!(!input_bound(&storage)[0].title.contains("storage"));
        let mut unmeasured = waited(0.9);
        unmeasured.steps.as_mut().unwrap().waited_s = None;
        assert!(input_bound(&unmeasured).is_empty(), "no wait timed: nothing measured");
    }
}
