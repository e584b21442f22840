//! Periodic stalls: the GPU idles for seconds at a regular period inside a busy run.

use crate::run::mean;
use crate::{Finding, FindingId, Run, Severity, round};

/// GPU-Util at or below this is idle: the driver's reading of a truly paused GPU, with noise.
const IDLE_PCT: f64 = 10.0;
/// A pause shorter than this is a DataLoader hiccup; checkpointing, evaluation and logging take
/// seconds.
const MIN_PAUSE_S: f64 = 2.0;
/// Between pauses the job must be busy, or the "stalls" are just an idle job.
const BUSY_PCT: f64 = 50.0;
/// Intervals between pauses vary by at most this share of their mean to count as periodic.
const REGULAR_CV: f64 = 0.25;

/// A pause is explained by what covers at least this share of it.
const COVERED: f64 = 0.5;
/// Written through a pause, this is a bulk save: a checkpoint (a log writes kilobytes).
const BULK_WRITE_BYTES: f64 = 64.0 * 1024.0 * 1024.0;
/// The training tree at this much of a core through a pause is busy on the host.
const HOST_WORK_CPU_PCT: f64 = 80.0;

/// What a pause coincides with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Cause {
    /// Measured data waits at an epoch's start (a fresh DataLoader iterator).
    EpochRestart,
    /// Measured data waits.
    DataWait,
    /// An evaluation or checkpoint, by the loop's own phases or marks.
    Named(&'static str),
    /// No mark explains it, and the job wrote in bulk through it: a checkpoint by evidence.
    Write,
    /// No mark explains it, and the training process sat blocked on I/O (D state) through it.
    Disk,
    /// No mark explains it, and the training tree's CPU was busy.
    HostWork,
    Unknown,
}

impl Cause {
    /// Its name in the finding's `cause` fact, which other rules read back.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Cause::EpochRestart => "epoch_restart",
            Cause::DataWait => "data_wait",
            Cause::Named(n) => match n.as_bytes() {
                b"evaluation" => "evaluation",
                _ => "checkpoint",
            },
            Cause::Write => "checkpoint_write",
            Cause::Disk => "disk",
            Cause::HostWork => "host_work",
            Cause::Unknown => "unknown",
        }
    }
}

/// Seconds of `spans` inside `[t0, t1]`.
fn covered(spans: impl Iterator<Item = [f64; 2]>, t0: f64, t1: f64) -> f64 {
    spans.map(|w| (w[1].min(t1) - w[0].max(t0)).max(0.0)).sum()
}

/// The name an evaluation or checkpoint goes by, from a phase or a mark.
fn named(name: &str) -> Option<&'static str> {
    match name {
        "eval" | "evaluate" | "validation" | "val" => Some("evaluation"),
        "checkpoint" | "save" => Some("checkpoint saving"),
        _ => None,
    }
}

/// Bytes the job wrote to storage in the tree samples' intervals that overlap `p`.
fn written_in(run: &Run, p: (f64, f64)) -> f64 {
    run.tree_io.iter().filter(|x| x.end_s > p.0 && x.start_s() < p.1).map(|x| x.written_bytes).sum()
}

fn explain(run: &Run, p: (f64, f64), slack_s: f64) -> Cause {
    let (t0, t1) = (p.0 - slack_s, p.1 + slack_s);
    let len = p.1 - p.0;
    let marks_in = |pred: &dyn Fn(&str) -> bool| {
        run.events.iter().any(|e| {
            e.0 == gpulse_model::EventKind::Mark
                && e.1 >= t0
                && e.1 <= t1
                && e.2.get("name").and_then(|n| n.as_str()).is_some_and(pred)
        })
    };
    // A fresh DataLoader iterator as the pause begins: its first batch is what the loop waits for.
    let fresh = marks_in(&|n| matches!(n, "epoch_start" | "loader_start"));
    // Without marks, the tree shows it: a new set of workers replacing the last in the pause
    // (after the loop's own names: an evaluation's loader forks workers too).
    let replaced = run.worker_restarts_s.iter().any(|t| *t >= t0 && *t <= t1);
    if covered(run.data_waits_s.iter().copied(), t0, t1) >= COVERED * len {
        return if fresh || replaced { Cause::EpochRestart } else { Cause::DataWait };
    }
    if fresh {
        return Cause::EpochRestart;
    }
    for (name, span) in &run.phases_s {
        if let Some(n) = named(name)
            && covered(std::iter::once(*span), t0, t1) >= COVERED * len
        {
            return Cause::Named(n);
        }
    }
    for e in run.events.iter().filter(|e| e.0 == gpulse_model::EventKind::Mark && e.1 >= t0 && e.1 <= t1) {
        if let Some(n) = e.2.get("name").and_then(|n| n.as_str()).and_then(named) {
            return Cause::Named(n);
        }
    }
    if replaced {
        return Cause::EpochRestart;
    }
    // A checkpoint writes the model's state, hundreds of MiB at least; logs and metrics write
    // kilobytes. Bulk writes in the pause are a save, by the job's own counters.
    if written_in(run, p) >= BULK_WRITE_BYTES {
        return Cause::Write;
    }
    // A process in D state waits in the kernel for I/O: through most of a pause, the loop is
    // writing (a checkpoint, a log) or reading a file, not computing.
    let states: Vec<bool> = run.io_blocked.iter().filter(|x| x.t_s >= p.0 && x.t_s < p.1).map(|x| x.main).collect();
    if !states.is_empty() && states.iter().filter(|d| **d).count() as f64 >= COVERED * states.len() as f64 {
        return Cause::Disk;
    }
    let cpu: Vec<f64> = run.tree_cpu.iter().filter(|x| x.0 >= p.0 && x.0 < p.1).map(|x| x.1).collect();
    if mean(&cpu).is_some_and(|c| c >= HOST_WORK_CPU_PCT) { Cause::HostWork } else { Cause::Unknown }
}

/// The regular pauses of `g` inside its active window, when it has them.
pub(super) fn periodic(g: &crate::GpuSeries) -> Option<Vec<(f64, f64)>> {
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
        return None;
    }
    let busy: Vec<f64> = (a..b)
        .filter(|&k| !pauses.iter().any(|p| g.t_s[k] >= p.0 && g.t_s[k] < p.1))
        .filter_map(|k| g.util_pct[k])
        .collect();
    if mean(&busy).is_none_or(|m| m < BUSY_PCT) {
        return None;
    }
    let starts: Vec<f64> = pauses.iter().map(|p| p.0).collect();
    let gaps: Vec<f64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    let period = mean(&gaps).unwrap_or(0.0);
    let regular = gaps.len() < 2 || crate::run::stdev(&gaps).is_some_and(|sd| sd <= REGULAR_CV * period);
    regular.then_some(pauses)
}

pub fn findings(run: &Run) -> Vec<Finding> {
    let mut out = Vec::new();
    for g in &run.gpus {
        let Some(pauses) = periodic(g) else { continue };
        let starts: Vec<f64> = pauses.iter().map(|p| p.0).collect();
        let gaps: Vec<f64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
        let period = mean(&gaps).unwrap_or(0.0);
        let pause = mean(&pauses.iter().map(|p| p.1 - p.0).collect::<Vec<_>>()).unwrap_or(0.0);
        let lost: f64 = pauses.iter().map(|p| p.1 - p.0).sum::<f64>() / g.active_s().max(1e-9);
        let severity = if lost >= 0.10 { Severity::Warning } else { Severity::Info };
        // A sample interval either side: a pause is seen only to the nearest sample.
        let slack_s = mean(&g.t_s.windows(2).map(|w| w[1] - w[0]).collect::<Vec<_>>()).unwrap_or(1.0);
        let causes: Vec<Cause> = pauses.iter().map(|p| explain(run, *p, slack_s)).collect();
        // The cause of most pauses; ties go to the better evidenced (the enum's order).
        let cause = causes
            .iter()
            .copied()
            .max_by_key(|c| (causes.iter().filter(|x| *x == c).count(), std::cmp::Reverse(*c)))
            .unwrap_or(Cause::Unknown);
        let why = match cause {
            Cause::EpochRestart => {
                ": the loop waits for data at each epoch start (the DataLoader starts its workers again)".to_owned()
            }
            Cause::DataWait => ": the loop waits for data through them".to_owned(),
            Cause::Named(n) => format!(": {n}, by the loop's marks"),
            Cause::Write => {
                let written = pauses.iter().map(|p| written_in(run, *p)).sum::<f64>() / pauses.len() as f64;
                format!(": the job writes {:.1} GB to storage in each, a checkpoint by its I/O counters", written / 1e9)
            }
            Cause::Disk => {
                ": the training process waits on the disk through them (D state): writing a checkpoint or a log, or reading".to_owned()
            }
            Cause::HostWork => ": the training process is busy on the host, and no mark says with what".to_owned(),
            Cause::Unknown => String::new(),
        };
        let mut f = Finding::new(
            FindingId::PeriodicStall,
            severity,
            format!("GPU {}: idles {pause:.1} s every {period:.1} s, losing {{lost}}{why}", g.gpu),
        )
        .on_gpu(g.gpu)
        .over(g.window())
        .with("period_s", round(period, 1))
        .with("pause_s", round(pause, 1))
        .pauses(pauses.iter().map(|p| [round(p.0, 1), round(p.1, 1)]).collect())
        .costs(lost, "pauses: the seconds the GPU stood idle in them over the active window")
        .own_share_of("its active time")
        .with("explained_pauses", causes.iter().filter(|c| **c == cause && cause != Cause::Unknown).count() as u64)
        .stall_cause(cause.as_str());
        let waited: f64 = run.data_waits_s.iter().map(|w| w[1] - w[0]).sum();
        if waited > 0.0 {
            let inside: f64 =
                pauses.iter().map(|p| covered(run.data_waits_s.iter().copied(), p.0 - slack_s, p.1 + slack_s)).sum();
            f.facts.data_wait_in_pauses_share = Some(round((inside / waited).min(1.0), 3));
        }
        f = match cause {
            Cause::EpochRestart | Cause::DataWait => f.advise(&[
                "persistent_workers=True keeps the DataLoader's workers alive between epochs, so each epoch does not start them again",
                "make worker start cheap: a light Dataset to pickle into each worker, and little work in worker_init_fn (open files lazily, in __getitem__)",
                "prefetch_factor and enough workers to fill the queue before the first step of each epoch",
            ]),
            Cause::Named("evaluation") => f.advise(&[
                "evaluate less often, on fewer batches (limit_val_batches, eval_steps), or in a separate process on its own GPU",
                "evaluate under torch.no_grad() / torch.inference_mode() with a larger batch",
            ]),
            Cause::Named(_) => f.advise(&[
                "save checkpoints asynchronously (torch.distributed.checkpoint.async_save, or a background thread writing a CPU copy of the state_dict)",
                "save less often, or only the model's weights between full checkpoints; write to fast local disk",
            ]),
            Cause::Write => f
                .advise(&[
                    "save asynchronously (torch.distributed.checkpoint.async_save, or a background thread writing a CPU copy of the state_dict)",
                    "save less often, or only the model's weights between full checkpoints; write to fast local disk",
                    "gpulse run --instrument times each torch.save, so the pauses are named for certain",
                ])
                .inferred(),
            Cause::Disk => f
                .advise(&[
                    "if it is a checkpoint: save asynchronously (torch.distributed.checkpoint.async_save, or a background thread writing a CPU copy of the state_dict), less often, or to fast local disk",
                    "if it is reading: keep the data on local NVMe or in the page cache, and read it in DataLoader workers, never in the training process",
                    "gpulse run --instrument times each torch.save, so the pauses are named for certain",
                ])
                .inferred(),
            Cause::HostWork => f
                .advise(&[
                    "find what the training process does in the pauses: py-spy dump --pid PID during one, or the PyTorch profiler",
                    "move periodic host work (logging, metrics, checkpoint serialization) off the training thread, or do it less often",
                ])
                .inferred(),
            Cause::Unknown => f
                .advise(&[
                    "something on the host runs every period while the GPU waits: checkpoint saving, evaluation, logging or a synchronizing metric",
                    "save checkpoints asynchronously (torch.distributed.checkpoint.async_save, or a background thread copying a CPU state_dict)",
                    "evaluate less often or on a separate process; log asynchronously and avoid .item() on every step",
                ])
                .limit("no mark explains the pauses: gpulse run --instrument, or the Lightning and Hugging Face callbacks, mark data waits, evaluation and checkpoints")
                .inferred(),
        };
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
    use crate::run::{IoBlocked, TreeIo};

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
    fn a_process_blocked_on_io_through_the_pauses_names_the_disk() {
        let two = [(10.0, 13.0), (25.0, 28.0)];
        let mut r = paused(40.0, 90.0, 0.0, &two);
        let blocked = |t: f64| two.iter().any(|p| t >= p.0 && t < p.1);
        r.io_blocked = (0..40)
            .map(|i| IoBlocked { t_s: f64::from(i), main: blocked(f64::from(i)), workers_share: None })
            .collect();
        let f = stall(&r).unwrap();
        assert!(f.title.contains("waits on the disk"), "{}", f.title);
        assert!(f.advice[0].contains("checkpoint"), "{:?}", f.advice);
        // Blocked only outside the pauses: nothing said of the disk.
        r.io_blocked = (0..40)
            .map(|i| IoBlocked { t_s: f64::from(i), main: !blocked(f64::from(i)), workers_share: None })
            .collect();
        assert!(!stall(&r).unwrap().title.contains("disk"));
    }

    #[test]
    fn gigabytes_written_through_the_pauses_are_a_checkpoint() {
        let two = [(10.0, 13.0), (25.0, 28.0)];
        let mut r = paused(40.0, 90.0, 0.0, &two);
        let inside = |t: f64| two.iter().any(|p| t > p.0 && t - 1.0 < p.1);
        // 1 s tree intervals: 1 GB a second written in the 3 s pauses, 1 MB elsewhere (logs).
        let written = |i: i32, bytes: f64| TreeIo {
            end_s: f64::from(i),
            seconds: 1.0,
            written_bytes: bytes,
            ..TreeIo::default()
        };
        r.tree_io = (1..40).map(|i| written(i, if inside(f64::from(i)) { 1e9 } else { 1e6 })).collect();
        let f = stall(&r).unwrap();
        assert!(f.title.contains("writes 3.0 GB to storage in each"), "{}", f.title);
        assert_eq!(f.all_evidence()["cause"], "checkpoint_write");
        // A log's megabytes say nothing.
        r.tree_io = (1..40).map(|i| written(i, 1e6)).collect();
        assert_eq!(stall(&r).unwrap().all_evidence()["cause"], "unknown");
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
        assert_eq!((f.severity, f.own_share()), (Severity::Warning, Some(0.1)));
        assert_eq!(stall(&paused(40.5, 90.0, 0.0, &two)).unwrap().severity, Severity::Info);
    }

    /// Two 2 s pauses at 10 and 25 s (samples every 0.5 s).
    fn two_pauses() -> Run {
        paused(40.0, 90.0, 0.0, &[(10.0, 12.0), (25.0, 27.0)])
    }

    fn mark(name: &str, t: f64) -> (gpulse_model::EventKind, f64, serde_json::Value) {
        (gpulse_model::EventKind::Mark, t, serde_json::json!({ "name": name }))
    }

    #[test]
    fn a_pause_half_covered_by_data_waits_is_the_wait_and_at_an_epoch_start_a_restart() {
        // Each pause lasts 2 s: waits of 1 s cover half of it.
        let mut r = two_pauses();
        r.data_waits_s = vec![[10.0, 10.9], [25.0, 25.9]];
        assert_eq!(stall(&r).unwrap().basis, crate::Basis::Inferred, "under half: unexplained");
        r.data_waits_s = vec![[10.0, 11.0], [25.0, 26.0]];
        let f = stall(&r).unwrap();
        assert!(f.title.contains("waits for data through them"), "{}", f.title);
        assert_eq!(
            (f.basis, &f.all_evidence()["data_wait_in_pauses_share"]),
            (crate::Basis::Measured, &serde_json::json!(1.0))
        );
        r.events = vec![mark("loader_start", 10.0), mark("epoch_start", 25.1)];
        let f = stall(&r).unwrap();
        assert!(f.title.contains("each epoch start") && f.advice[0].contains("persistent_workers=True"), "{f:?}");
    }

    /// No marks: the tree's DataLoader workers replaced by new PIDs in each pause name it.
    #[test]
    fn workers_replaced_in_each_pause_are_an_epoch_restart() {
        let mut r = two_pauses();
        assert!(!stall(&r).unwrap().title.contains("each epoch start"));
        r.worker_restarts_s = vec![10.5, 25.5];
        let f = stall(&r).unwrap();
        assert!(f.title.contains("each epoch start") && f.advice[0].contains("persistent_workers=True"), "{f:?}");
        assert_eq!(f.all_evidence()["cause"], "epoch_restart");
        // Workers replaced between the pauses say nothing of them.
        r.worker_restarts_s = vec![17.0];
        assert!(!stall(&r).unwrap().title.contains("each epoch start"));
        // In an evaluation's pauses, the evaluation's name comes first.
        r.worker_restarts_s = vec![10.5, 25.5];
        r.phases_s = vec![("eval".into(), [10.0, 11.5]), ("eval".into(), [25.0, 26.5])];
        assert!(stall(&r).unwrap().title.contains("evaluation"), "{}", stall(&r).unwrap().title);
    }

    #[test]
    fn checkpoint_and_evaluation_marks_name_the_pause() {
        let mut r = two_pauses();
        r.events = vec![mark("checkpoint", 10.5), mark("checkpoint", 25.5)];
        let f = stall(&r).unwrap();
        assert!(f.title.contains("checkpoint saving") && f.advice[0].contains("async_save"), "{}", f.title);
        let mut r = two_pauses();
        r.phases_s = vec![("eval".into(), [10.0, 11.5]), ("eval".into(), [25.0, 26.5])];
        assert!(stall(&r).unwrap().title.contains("evaluation"));
    }

    #[test]
    fn unmarked_pauses_with_the_tree_busy_are_host_side_work() {
        let mut r = two_pauses();
        r.tree_cpu = (0..=40)
            .map(|t| (f64::from(t), if (10..12).contains(&t) || (25..27).contains(&t) { 80.0 } else { 20.0 }))
            .collect();
        assert!(stall(&r).unwrap().title.contains("busy on the host"));
        for c in &mut r.tree_cpu {
            c.1 = c.1.min(79.9);
        }
        assert!(stall(&r).unwrap().limits.iter().any(|l| l.contains("no mark explains")));
    }
}
