//! Folds a fast loop's marks so the recording grows with time, not with steps: at most one step
//! row (and one row of the waits for data in those steps) per process every [`FOLD_US`], standing
//! for every step in between. A loop at 1000 steps/s costs about 20 rows a second instead of
//! 2000; a loop slower than 10 steps/s is kept mark by mark. Waits that no step closes (a loop
//! with no optimizer) fold within one window each, and a wait of a window or more is kept whole.
//! Other phases pass unchanged.

use std::collections::HashMap;

use gpulse_model::{Marker, MarkerKind};

/// The most one folded row spans.
const FOLD_US: i64 = 100_000;

#[derive(Default)]
pub struct Folder {
    by_pid: HashMap<u32, Pending>,
}

/// Waits for data: the first one's start, their total and how many.
#[derive(Default, Clone)]
struct Waits {
    first: Option<Marker>,
    total_us: i64,
    count: u32,
}

impl Waits {
    fn add(&mut self, m: Marker) {
        self.total_us += m.dur_us.unwrap_or(0).max(0);
        self.count += m.count.max(1);
        self.first.get_or_insert(m);
    }

    fn take(&mut self, out: &mut Vec<Marker>) {
        if let Some(first) = self.first.take() {
            out.push(Marker { dur_us: Some(self.total_us), count: self.count, ..first });
        }
        *self = Self::default();
    }
}

#[derive(Default)]
struct Pending {
    /// When the last row written ended.
    written_us: Option<i64>,
    /// Steps held, the last one's end, and the waits that began within them.
    steps: u32,
    last_step_us: i64,
    waits: Waits,
    /// Waits since the last step: they belong to the next one.
    open: Waits,
}

impl Pending {
    fn flush(&mut self, pid: u32, out: &mut Vec<Marker>) {
        self.waits.take(out);
        if self.steps > 0 {
            out.push(Marker { count: self.steps, ..Marker::one(self.last_step_us, pid, MarkerKind::Step, None, None) });
            self.written_us = Some(self.last_step_us);
            self.steps = 0;
        }
    }
}

fn is_wait(m: &Marker) -> bool {
    m.kind == MarkerKind::DataWait || (m.kind == MarkerKind::Phase && m.name.as_deref() == Some("data"))
}

impl Folder {
    /// Takes one mark (each process's in the order it sent them); what is due goes to `out`.
    pub fn push(&mut self, m: Marker, out: &mut Vec<Marker>) {
        let pid = m.pid;
        let p = self.by_pid.entry(pid).or_default();
        if is_wait(&m) {
            // Waits with no step to close them (a loop with no optimizer) fold only within one
            // window: each window's waits stay where they were, however long the loop runs.
            if p.open.first.as_ref().is_some_and(|f| m.t_us - f.t_us >= FOLD_US) {
                p.open.take(out);
            }
            // A wait as long as a window (a fresh iterator's workers starting) is kept whole, where
            // it was.
            if m.dur_us.is_some_and(|d| d >= FOLD_US) {
                p.open.take(out);
                out.push(m);
            } else {
                p.open.add(m);
            }
        } else if m.kind == MarkerKind::Step {
            // After a pause, what was held ends where it ended, not with this step.
            if p.steps > 0 && m.t_us - p.last_step_us >= FOLD_US {
                p.flush(pid, out);
            }
            p.steps += m.count.max(1);
            p.last_step_us = m.t_us;
            let open = std::mem::take(&mut p.open);
            if let Some(first) = open.first.clone() {
                p.waits.add(Marker { dur_us: Some(open.total_us), count: open.count, ..first });
            }
            if p.written_us.is_none_or(|w| m.t_us - w >= FOLD_US) {
                p.flush(pid, out);
            }
        } else {
            out.push(m);
        }
    }

    /// Everything still held: the job has ended.
    pub fn finish(&mut self, out: &mut Vec<Marker>) {
        let mut pids: Vec<u32> = self.by_pid.keys().copied().collect();
        pids.sort_unstable();
        for pid in pids {
            if let Some(p) = self.by_pid.get_mut(&pid) {
                p.flush(pid, out);
                p.open.take(out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(marks: Vec<Marker>) -> Vec<Marker> {
        let mut f = Folder::default();
        let mut out = Vec::new();
        for m in marks {
            f.push(m, &mut out);
        }
        f.finish(&mut out);
        out
    }

    fn loop_marks(steps: i64, step_us: i64, wait_us: i64) -> Vec<Marker> {
        let mut m = Vec::new();
        for i in 0..steps {
            m.push(Marker::one(i * step_us + 1, 9, MarkerKind::DataWait, None, Some(wait_us)));
            m.push(Marker::one((i + 1) * step_us, 9, MarkerKind::Step, None, None));
        }
        m
    }

    #[test]
    fn a_slow_loop_is_kept_mark_by_mark() {
        let marks = loop_marks(20, 200_000, 50_000);
        assert_eq!(feed(marks.clone()), marks);
    }

    #[test]
    fn a_fast_loop_folds_to_ten_rows_a_second_and_loses_nothing() {
        // 2000 steps of 1 ms (2 s), each waiting 0.4 ms.
        let marks = loop_marks(2000, 1000, 400);
        let out = feed(marks.clone());
        let steps: Vec<&Marker> = out.iter().filter(|m| m.kind == MarkerKind::Step).collect();
        assert!(steps.len() <= 22, "{} step rows", steps.len());
        assert_eq!(steps.iter().map(|m| m.count).sum::<u32>(), 2000);
        let waits: Vec<&Marker> = out.iter().filter(|m| m.kind == MarkerKind::DataWait).collect();
        assert_eq!(waits.iter().map(|m| m.count).sum::<u32>(), 2000);
        assert_eq!(waits.iter().map(|m| m.dur_us.unwrap()).sum::<i64>(), 2000 * 400);
        // The diagnosis reads the same loop either way.
        let whole = gpulse_diagnose::Steps::from_markers(&marks, 0, true).unwrap();
        let folded = gpulse_diagnose::Steps::from_markers(&out, 0, true).unwrap();
        assert_eq!((folded.marked, folded.timed), (whole.marked, whole.timed));
        assert!((folded.per_s() - whole.per_s()).abs() < 1e-6);
        assert!((folded.data_wait_share().unwrap() - whole.data_wait_share().unwrap()).abs() < 1e-3);
    }

    #[test]
    fn a_pause_ends_the_held_steps_where_they_ended() {
        // 50 fast steps, a 5 s pause (evaluation), then one more step.
        let mut marks = loop_marks(50, 1000, 0);
        marks.push(Marker::one(5_050_000, 9, MarkerKind::Step, None, None));
        let out = feed(marks);
        let steps: Vec<(i64, u32)> =
            out.iter().filter(|m| m.kind == MarkerKind::Step).map(|m| (m.t_us, m.count)).collect();
        assert_eq!(steps.last(), Some(&(5_050_000, 1)), "the step after the pause stands alone: {steps:?}");
        assert_eq!(steps.iter().map(|s| s.1).sum::<u32>(), 51);
        assert!(steps.iter().any(|s| s.0 == 50_000), "the held steps end at the last one: {steps:?}");
    }

    #[test]
    fn waits_with_no_steps_fold_window_by_window() {
        // No optimizer: 1000 waits of 1 ms every 5 ms, and a 3 s wait for a fresh iterator at 2 s.
        let mut marks: Vec<Marker> =
            (0..1000).map(|i| Marker::one(i * 5_000, 4, MarkerKind::DataWait, None, Some(1_000))).collect();
        marks.insert(400, Marker::one(1_999_000, 4, MarkerKind::DataWait, None, Some(3_000_000)));
        let out = feed(marks);
        assert!(out.len() <= 60, "{} rows for 5 s", out.len());
        assert_eq!(out.iter().map(|m| m.count).sum::<u32>(), 1001);
        assert_eq!(out.iter().map(|m| m.dur_us.unwrap()).sum::<i64>(), 1000 * 1_000 + 3_000_000);
        // Each row begins where its first wait began, within 100 ms of its last.
        assert!(out.windows(2).all(|w| w[1].t_us - w[0].t_us <= FOLD_US + 5_000), "{out:?}");
        let long = out.iter().find(|m| m.dur_us.unwrap() >= 3_000_000).unwrap();
        assert_eq!((long.t_us, long.count), (1_999_000, 1), "the fresh iterator's wait stays whole at its place");
    }

    #[test]
    fn phases_other_than_data_pass_unchanged() {
        let eval = Marker::one(5, 1, MarkerKind::Phase, Some("eval".into()), Some(3));
        assert_eq!(feed(vec![eval.clone()]), vec![eval]);
    }
}
