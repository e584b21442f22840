//! `epoch_restart`: each fresh DataLoader iterator makes the loop wait for its first batch.
//!
//! With `persistent_workers=False` every epoch's `iter(loader)` forks `num_workers` new workers,
//! each unpickling the Dataset and running `worker_init_fn` before any batch exists: the loop's
//! first wait after each fresh iterator is that start-up, measured. The first iterator of a run
//! pays it whatever the setting, so only the later ones count.

use crate::{Finding, FindingId, Run, Severity, round};

/// A fresh iterator's first batch is asked for at once; a wait that begins later than this after
/// the mark belongs to the loop's ordinary steps.
const FIRST_WAIT_WITHIN_S: f64 = 1.0;
/// Restarts carry the loop's waits when they hold at least half of the waited time.
pub(super) const CARRIES: f64 = 0.5;
/// Worth a finding from a twentieth of the loop's time: below that it is one of several gaps.
const SHARE: f64 = 0.05;

/// The fresh iterators after the first (seconds), and the first wait that followed each.
fn restarts(run: &Run) -> Vec<(f64, [f64; 2])> {
    let mut marks: Vec<f64> = run
        .events
        .iter()
        .filter(|e| {
            e.0 == gpulse_model::EventKind::Mark
                && e.2.get("name").and_then(|n| n.as_str()).is_some_and(|n| n == "loader_start" || n == "epoch_start")
        })
        .map(|e| e.1)
        .collect();
    marks.sort_by(f64::total_cmp);
    // A loop can mark both for one epoch: marks within a wait's reach are one restart.
    marks.dedup_by(|b, a| *b - *a < FIRST_WAIT_WITHIN_S);
    marks
        .iter()
        .skip(1)
        .filter_map(|&m| {
            // The first wait still going at the mark (marks are kept to the millisecond, and a
            // fast loop's folded wait begins with the old iterator's last) or begun soon after.
            let w = run
                .data_waits_s
                .iter()
                .filter(|w| w[1] > m + 0.002 && w[0] <= m + FIRST_WAIT_WITHIN_S)
                .min_by(|a, b| a[0].total_cmp(&b[0]))?;
            Some((m, *w))
        })
        .collect()
}

/// Seconds the loop waited at fresh iterators after the first, and all it waited for data after
/// the first iterator's first batch (which every run waits for, however its workers live).
pub(super) fn restart_wait_s(run: &Run) -> (f64, f64) {
    let at_restarts = restarts(run).iter().map(|r| r.1[1] - r.1[0]).sum();
    let all: f64 = run.data_waits_s.iter().map(|w| w[1] - w[0]).sum();
    let first = run.data_waits_s.iter().min_by(|a, b| a[0].total_cmp(&b[0])).map_or(0.0, |w| w[1] - w[0]);
    (at_restarts, all - first)
}

pub fn findings(run: &Run) -> Vec<Finding> {
    let found = restarts(run);
    let (at, all) = restart_wait_s(run);
    let span = match &run.steps {
        Some(s) => s.window_s[1] - s.window_s[0],
        None => crate::run::end_s(run),
    };
    if found.is_empty() || at < CARRIES * all || at < SHARE * span.max(1e-9) {
        return Vec::new();
    }
    let mean_s = at / found.len() as f64;
    let share = at / span.max(1e-9);
    let severity = if share >= 0.2 { Severity::Warning } else { Severity::Info };
    let first = found[0].0;
    let last = found[found.len() - 1].1[1];
    vec![Finding::new(
        FindingId::EpochRestart,
        severity,
        format!(
            "Each new epoch waits {mean_s:.1} s for its first batch while the DataLoader starts its workers again ({} restarts, {{loop}} of the loop)",
            found.len()
        ),
    )
    .over([first, last])
    .pauses(found.iter().map(|r| [round(r.1[0], 1), round(r.1[1], 1)]).collect())
    .with("restarts", found.len() as u64)
    .with("first_batch_wait_mean_s", round(mean_s, 2))
    .with("share_of_data_wait", round(at / all.max(1e-9), 3))
    .costs_of_loop(share, "restart_waits: the loop's measured first wait after each fresh DataLoader iterator, over the loop")
    .advise(if super::feeding::persistent(run) {
        // Its workers already persist: what restarts is the iterator's first batch.
        &[
            "make worker start cheap: a light Dataset to pickle into each worker, and little work in worker_init_fn (open files lazily, in __getitem__)",
        ][..]
    } else {
        &[
            "persistent_workers=True keeps the DataLoader's workers alive between epochs, so each epoch does not start them again",
            "make worker start cheap: a light Dataset to pickle into each worker, and little work in worker_init_fn (open files lazily, in __getitem__)",
        ][..]
    })]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(name: &str, t: f64) -> (gpulse_model::EventKind, f64, serde_json::Value) {
        (gpulse_model::EventKind::Mark, t, serde_json::json!({ "name": name }))
    }

    /// Epochs every 10 s from 0; the first batch of each waits `first_s`, the others 10 ms.
    fn epochs(first_s: f64, n: usize) -> Run {
        let mut r = Run::default();
        for e in 0..n {
            let t0 = 10.0 * e as f64;
            r.events.push(mark("loader_start", t0));
            r.data_waits_s.push([t0, t0 + first_s]);
            for k in 1..20 {
                let t = t0 + first_s + 0.3 * f64::from(k);
                r.data_waits_s.push([t, t + 0.01]);
            }
        }
        r.gpus = vec![crate::rules::testing::steady(0, 90.0, 10 * n + 1)];
        r
    }

    #[test]
    fn restarts_after_the_first_are_named_even_two_of_them() {
        let f = findings(&epochs(3.0, 3));
        assert_eq!(f.len(), 1, "two restarts are enough: no period is needed");
        assert_eq!(f[0].evidence["restarts"], serde_json::json!(2));
        assert_eq!(f[0].evidence["first_batch_wait_mean_s"], serde_json::json!(3.0));
        assert!(f[0].advice[0].contains("persistent_workers=True"));
        // A loader that already keeps its workers is not told to.
        let mut r = epochs(3.0, 3);
        for e in r.events.iter_mut() {
            e.2 = serde_json::json!({"name": "loader_start", "num_workers": 4, "persistent_workers": true});
        }
        let f = findings(&r);
        assert_eq!(f.len(), 1);
        assert!(!f[0].advice.iter().any(|a| a.contains("persistent_workers")), "{:?}", f[0].advice);
    }

    #[test]
    fn persistent_workers_wait_once_and_are_not_named() {
        // The first epoch waits 3 s, the others as little as any batch.
        let mut r = epochs(0.01, 3);
        r.data_waits_s[0] = [0.0, 3.0];
        assert!(findings(&r).is_empty());
        // Restarts that are a small part of a loop that waits throughout carry nothing.
        let mut r = epochs(0.2, 3);
        for w in r.data_waits_s.iter_mut().filter(|w| w[1] - w[0] < 0.1) {
            w[1] = w[0] + 0.25;
        }
        assert!(findings(&r).is_empty());
    }
}
