//! Memory near its limit, memory that keeps growing (with a forecast of the OOM), and OOMs.

use super::GIB;
use crate::{Finding, FindingId, GpuSeries, Run, Severity, round};

/// Above this share of the usable memory, PyTorch's caching allocator runs out of headroom for
/// fragmentation and new block sizes.
const PRESSURE: f64 = 0.90;
/// Memory within this share of the total is at the limit: the caching allocator fails a request
/// only when the free memory is smaller than it, and the samples come up to an interval before
/// the failing request, while the job still allocates.
const AT_LIMIT: f64 = 0.95;
/// A fall of this share of total memory from near the limit within a few seconds is a process
/// dying and its memory being freed.
const OOM_DROP: f64 = 0.20;

/// Segments between sudden drops (a process ending frees its memory at once).
fn segments(t: &[f64], m: &[Option<f64>], total: f64) -> Vec<(Vec<f64>, Vec<f64>)> {
    let mut out = vec![(Vec::new(), Vec::new())];
    let mut last: Option<f64> = None;
    for (ti, mi) in t.iter().zip(m) {
        let Some(v) = *mi else { continue };
        if last.is_some_and(|l| l - v > 0.05 * total) {
            out.push((Vec::new(), Vec::new()));
        }
        let seg = out.last_mut().expect("one segment");
        seg.0.push(*ti);
        seg.1.push(v);
        last = Some(v);
    }
    out
}

/// Sustained growth: each third of the segment higher than the one before, by a fifth of the
/// total rise at least, and still rising in its last quarter by a tenth of it. A model loading
/// (a climb, then flat) is not growth, however the thirds fall.
fn sustained(y: &[f64]) -> bool {
    let n = y.len();
    if n < 9 {
        return false;
    }
    let last_quarter = &y[n - n / 4 - 1..];
    let still_rising = last_quarter[last_quarter.len() - 1] - last_quarter[0];
    let third = |k: usize| {
        let s = &y[k * n / 3..(k + 1) * n / 3];
        s.iter().sum::<f64>() / s.len() as f64
    };
    let (a, b, c) = (third(0), third(1), third(2));
    let rise = y[n - 1] - y[0];
    rise > 0.0 && b - a >= 0.2 * rise && c - b >= 0.2 * rise && still_rising >= 0.1 * rise
}

/// What to do after an out-of-memory error, whatever its evidence.
const OOM_ADVICE: [&str; 2] = [
    "find what grows before the crash (the memory_growth finding) or lower the peak: smaller batch, bf16 autocast, activation checkpointing",
    "torch.cuda.memory_summary() at the failing step shows what holds the memory",
];

/// How the job ended, from the recording's `stop` event: a job that exited by itself with status 0
/// did not run out of memory, whatever its memory did.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Exit {
    /// Ended by itself with status 0, or by something that is no OOM error.
    Clean,
    /// Ended by a signal or a non-zero status, at this time.
    Failed(f64),
    /// No exit status: a log, a recording of the machine, an attached process.
    Unknown,
}

impl Exit {
    /// A CUDA out-of-memory error ends a Python job with a non-zero status, or aborts it
    /// (SIGABRT from a native library). A stop by the user or a scheduler (SIGINT, SIGTERM,
    /// SIGHUP), and the kernel's OOM killer (`host_oom` names it), are not one, whatever the
    /// memory.
    fn of(run: &Run) -> Self {
        let Some((_, end, stop)) = run.events.iter().rev().find(|e| e.0 == gpulse_model::EventKind::Stop) else {
            return Self::Unknown;
        };
        if stop.get("oom_kills").and_then(serde_json::Value::as_u64).is_some_and(|n| n > 0) {
            return Self::Clean;
        }
        match (stop.get("exit_status").and_then(serde_json::Value::as_u64), stop.get("signal").and_then(|s| s.as_str()))
        {
            (Some(0), None) => Self::Clean,
            (_, Some("SIGABRT")) | (Some(_), None) => Self::Failed(*end),
            (_, Some(_)) => Self::Clean,
            (None, None) => Self::Unknown,
        }
    }
}

pub fn findings(run: &Run) -> Vec<Finding> {
    let mut out = Vec::new();
    for g in &run.gpus {
        out.extend(for_gpu(run, g));
    }
    // No GPU reading to place it on (no driver, or memory that could not be read): the error
    // message itself is the evidence that the job ran out of memory.
    if !out.iter().any(|f| f.id == FindingId::Oom)
        && let Some((_, at, message)) = run.events.iter().find(|e| e.0.is_oom())
    {
        let gpu = message.get("gpu").and_then(serde_json::Value::as_u64).and_then(|g| u32::try_from(g).ok());
        let title = match gpu {
            Some(gpu) => format!("GPU {gpu}: ran out of memory {at:.0} s into the run"),
            None => format!("Ran out of GPU memory {at:.0} s into the run"),
        };
        let mut f = Finding::new(FindingId::Oom, Severity::Critical, title);
        if let Some(gpu) = gpu {
            f = f.on_gpu(gpu);
        }
        out.push(
            with_message(f.with("at_s", round(*at, 1)), message)
                .advise(&OOM_ADVICE)
                .limit("no GPU memory readings: the peak and what grew before the error are unknown (record where the driver answers)"),
        );
    }
    out
}

/// The OOM message as evidence, saying so where the recording cut it (recordings before
/// `"cut"` was kept cut at 600 characters, mid-URL, without a word).
fn with_message(f: Finding, payload: &serde_json::Value) -> Finding {
    let mut message = payload.clone();
    let Some((text, true)) = gpulse_model::run::event_text(payload) else { return f.with("message", message) };
    if let Some(o) = message.as_object_mut() {
        o.insert("text".into(), text.into());
        o.insert("cut".into(), true.into());
    }
    f.with("message", message).limit("the message was cut when recorded: the job's stderr has it whole")
}

fn for_gpu(run: &Run, g: &GpuSeries) -> Vec<Finding> {
    let mut out = Vec::new();
    let used: Vec<f64> = g.mem_used_bytes.iter().flatten().copied().collect();
    let Some(peak) = used.iter().copied().reduce(f64::max) else { return out };
    let total = g.mem_total_bytes;
    // `oom` from a trace's own log; `cuda_oom` from the job's stderr under `gpulse run`, which
    // names the GPU when PyTorch does.
    let oom_event = run.events.iter().find(|e| {
        e.0.is_oom() && e.2.get("gpu").and_then(serde_json::Value::as_u64).is_none_or(|gpu| gpu == u64::from(g.gpu))
    });
    let mut oom_at: Option<f64> = oom_event.map(|e| e.1);
    let exit = Exit::of(run);
    if let Some(total) = total
        && oom_at.is_none()
        && exit != Exit::Clean
    {
        // A fall from near the limit: memory freed by a process that died.
        for w in g.t_s.iter().zip(&g.mem_used_bytes).collect::<Vec<_>>().windows(6) {
            let (Some(first), Some(last)) = (w[0].1, w[w.len() - 1].1) else { continue };
            if oom_at.is_none() && *first >= AT_LIMIT * total && first - last >= OOM_DROP * total {
                // At the fall itself: the last sample before the steepest drop in the window, not
                // the window's start up to five samples earlier.
                let fall = w
                    .windows(2)
                    .filter_map(|p| Some((*p[0].0, (*p[0].1)? - (*p[1].1)?)))
                    .reduce(|a, b| if b.1 > a.1 { b } else { a });
                oom_at = Some(fall.map_or(*w[0].0, |f| f.0));
            }
        }
        // A failed job's memory falls when it dies: a fall long before its end was something
        // else (the allocator's cache emptied).
        if let (Some(at), Exit::Failed(end)) = (oom_at, exit)
            && at < end - super::ended::BEFORE_END_S - g.t_s.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max)
        {
            oom_at = None;
        }
        // A job that failed with its memory at the limit, read before the memory was freed.
        if let (None, Exit::Failed(end)) = (oom_at, exit) {
            let last = g.t_s.iter().zip(&g.mem_used_bytes).rev().find(|(t, m)| **t <= end && m.is_some());
            if let Some((t, Some(m))) = last
                && end - t <= super::ended::BEFORE_END_S
                && *m >= AT_LIMIT * total
            {
                oom_at = Some(*t);
            }
        }
    }
    if let Some(total) = total
        && peak >= PRESSURE * total
        && oom_at.is_none()
    {
        out.push(
            Finding::new(
                FindingId::MemoryPressure,
                Severity::Warning,
                format!("GPU {}: memory peaked at {:.0}% of {:.0} GiB", g.gpu, 100.0 * peak / total, total / GIB),
            )
            .on_gpu(g.gpu)
            .with("peak_gib", round(peak / GIB, 2))
            .with("total_gib", round(total / GIB, 2))
            .advise(&[
                "lower the batch size and keep the effective batch with gradient accumulation",
                "train in bf16 with torch.autocast; enable activation checkpointing for the largest blocks",
                "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to reduce fragmentation",
            ]),
        );
    }
    // Growth: the segment with the largest sustained rise.
    let scale = total.unwrap_or(peak.max(GIB));
    // A leak grows across steps: where the loop marked them, what grew before its first step
    // (the model and the optimizer's state loading) is not growth.
    let from_s = run.steps.as_ref().map_or(f64::MIN, |s| s.window_s[0]);
    let segs: Vec<(Vec<f64>, Vec<f64>)> = segments(&g.t_s, &g.mem_used_bytes, scale)
        .into_iter()
        .map(|(t, y)| {
            let k = t.partition_point(|x| *x < from_s);
            (t[k..].to_vec(), y[k..].to_vec())
        })
        .collect();
    let last_seg = segs.len() - 1;
    let best = segs
        .iter()
        .enumerate()
        .filter(|(_, s)| s.1.len() >= 9 && sustained(&s.1))
        .max_by(|a, b| (a.1.1.last().unwrap() - a.1.1[0]).total_cmp(&(b.1.1.last().unwrap() - b.1.1[0])));
    if let Some((k, (t, y))) = best {
        // The growth starts at the last sample still at the segment's first level (within 1 % of
        // the rise): a flat stretch before it is not part of the rate or the window.
        let whole = y[y.len() - 1] - y[0];
        let start = y.iter().position(|v| *v > y[0] + 0.01 * whole).map_or(0, |i| i.saturating_sub(1));
        let (t, y) = (&t[start..], &y[start..]);
        let rise = y[y.len() - 1] - y[0];
        let span = t[t.len() - 1] - t[0];
        // Growth that ends in a sudden fall: a process ended and freed it. Without an error or
        // memory at the limit that is no OOM, only where the growth stopped.
        let fell_at = segs.get(k + 1).and_then(|next| next.0.first()).copied();
        // Growth worth a finding: 5 % of the GPU, over 10 s at least.
        if rise >= 0.05 * scale && span >= 10.0 {
            let limit = total.unwrap_or(f64::INFINITY);
            let mut f = Finding::new(
                FindingId::MemoryGrowth,
                Severity::Warning,
                format!("GPU {}: memory grew {:.1} GiB in {span:.0} s ({:.2} GiB/min)", g.gpu, rise / GIB, rise / span * 60.0 / GIB),
            )
            .on_gpu(g.gpu)
            .over([t[0], t[t.len() - 1]])
            .with("growth_gib_per_min", round(rise / span * 60.0 / GIB, 3))
            .advise(&[
                "accumulate the loss as a number: total += loss.item() (or loss.detach()), not total += loss, which keeps every step's graph alive",
                "do not keep tensors that require grad in lists across steps; detach what you log",
                "if memory is needed: smaller batch with gradient accumulation, torch.autocast(bf16), activation checkpointing",
            ]);
            if let Some(at) = fell_at {
                f = f.with("fell_at_s", round(at, 1));
            }
            // Fit the ramp itself, not the flat stretch (or model load) before it.
            let from = y.iter().rposition(|v| *v <= y[0] + 0.1 * rise).unwrap_or(0).min(y.len().saturating_sub(3));
            if let (Some(total), Some(_), None) = (total, fell_at, oom_at)
                && let Some(fc) = crate::time_to_full(&t[from..], &y[from..], total)
            {
                // It stopped short of the limit: what it had left, at the rate it grew.
                f.title += &format!(
                    "; it stopped {:.0} GiB short of the limit, about {:.0} s from it at that rate",
                    (total - y[y.len() - 1]) / GIB,
                    fc.seconds
                );
                f = f
                    .with("headroom_left_gib", round((total - y[y.len() - 1]) / GIB, 2))
                    .with("would_fill_in_s", round(fc.seconds, 1));
            }
            if k == last_seg && oom_at.is_none() {
                match (total, crate::time_to_full(&t[from..], &y[from..], limit)) {
                    (Some(_), Some(fc)) => {
                        f.title += &format!("; out of memory in about {:.0} s", fc.seconds);
                        f = f
                            .forecast(round(fc.seconds, 1))
                            .with("time_to_oom_range_s", vec![Some(round(fc.low_s, 1)), fc.high_s.map(|h| round(h, 1))])
                            .with("fit_r2", round(fc.r2, 3));
                        if fc.seconds < 600.0 {
                            f.severity = Severity::Critical;
                        }
                    }
                    (None, _) => {
                        f = f.limit("memory.total is not in the input: no time-to-OOM forecast; log memory.total too")
                    }
                    _ => {}
                }
            }
            out.push(f);
        }
    }
    if let Some(at) = oom_at {
        let mut f = Finding::new(
            FindingId::Oom,
            Severity::Critical,
            format!("GPU {}: ran out of memory {at:.0} s into the run", g.gpu),
        )
        .on_gpu(g.gpu)
        .with("at_s", round(at, 1))
        .with("peak_gib", round(peak / GIB, 2))
        .advise(&OOM_ADVICE);
        if let Some(e) = oom_event {
            f = with_message(f, &e.2);
        } else {
            f = f.limit(if exit == Exit::Unknown {
                "inferred from memory falling from its limit, with no exit status to confirm it; `gpulse run` catches the CUDA out-of-memory message itself"
            } else {
                "inferred from the job failing with its memory at the limit; `gpulse run` catches the CUDA out-of-memory message itself"
            });
        }
        out.push(f);
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::*;
    use super::*;

    /// GPU 0 of `total_gib` sampled every second with `used_gib` in use.
    fn mem(total_gib: f64, used_gib: &[f64]) -> Run {
        let mut g = gpu(0, 1.0, &vec![50.0; used_gib.len()]);
        g.mem_used_bytes = used_gib.iter().map(|u| Some(u * GIB)).collect();
        g.mem_total_bytes = Some(total_gib * GIB);
        run(vec![g])
    }

    fn found(run: &Run) -> Vec<&'static str> {
        ids(&findings(run))
    }

    #[test]
    fn pressure_starts_at_90_percent_of_the_total() {
        assert!(found(&mem(100.0, &[89.9; 5])).is_empty());
        assert_eq!(found(&mem(100.0, &[90.0; 5])), ["memory_pressure"]);
    }

    #[test]
    fn a_fall_of_20_percent_from_95_within_6_samples_is_an_oom() {
        let at_edge = [95.0, 95.0, 95.0, 91.0, 87.0, 83.0, 79.0, 75.0, 75.0];
        let f = findings(&mem(100.0, &at_edge));
        assert_eq!(ids(&f), ["oom"], "95 → 75 over 6 samples");
        assert_eq!(f[0].evidence["at_s"], 2.0);
        assert!(f[0].limits.iter().any(|l| l.contains("inferred")), "no message: said so");
        let slower = [95.0, 95.0, 95.0, 91.0, 87.0, 83.0, 79.0, 76.0, 75.0];
        assert_eq!(found(&mem(100.0, &slower)), ["memory_pressure"], "19 points within 6 samples");
        let lower = [94.9, 94.9, 94.9, 90.0, 80.0, 70.0, 70.0];
        assert_eq!(found(&mem(100.0, &lower)), ["memory_pressure"], "from below 95 %");
        // A sudden fall is placed where it happened, not at the start of the first window
        // that holds it.
        let sudden = [96.0, 96.0, 96.0, 96.0, 96.0, 96.0, 70.0, 70.0];
        assert_eq!(findings(&mem(100.0, &sudden))[0].evidence["at_s"], 5.0);
    }

    /// Memory climbing linearly by `rise_gib` over `span_s` seconds (one sample a second).
    fn ramp(total_gib: f64, rise_gib: f64, span_s: usize) -> Run {
        let used: Vec<f64> = (0..=span_s).map(|i| 10.0 + rise_gib * i as f64 / span_s as f64).collect();
        mem(total_gib, &used)
    }

    #[test]
    fn growth_needs_5_percent_of_the_gpu_over_10_s() {
        assert!(found(&ramp(100.0, 4.99, 20)).is_empty(), "under 5 % of the GPU");
        assert_eq!(found(&ramp(100.0, 5.01, 20)), ["memory_growth"]);
        assert!(found(&ramp(100.0, 20.0, 9)).is_empty(), "9 s");
        assert_eq!(found(&ramp(100.0, 20.0, 10)), ["memory_growth"], "10 s");
        // A model loading: a climb, then flat, is not growth.
        let mut load: Vec<f64> = (0..10).map(|i| 10.0 + 3.0 * f64::from(i)).collect();
        load.extend([37.0; 20]);
        assert!(found(&mem(100.0, &load)).is_empty());
    }

    /// A model loading for 20 s before its first step, then training on flat memory, is no leak;
    /// the same climb after the first step is.
    #[test]
    fn loading_before_the_first_step_is_not_growth() {
        let mut r = ramp(100.0, 40.0, 20);
        let steps = |first_s: f64| crate::rules::testing::steps(1, 10, [first_s, 20.0]);
        r.steps = Some(steps(19.0));
        assert!(found(&r).is_empty(), "loading, then one step");
        r.steps = Some(steps(0.0));
        assert_eq!(found(&r), ["memory_growth"], "growing across the steps");
    }

    /// 30 s flat, then 6 GiB over 60 s: the rate and the window are the climb's, not the run's.
    #[test]
    fn the_growth_window_starts_where_memory_starts_to_grow() {
        let mut used = vec![10.0; 31];
        used.extend((1..=60).map(|k| 10.0 + 0.1 * f64::from(k)));
        let f = findings(&mem(80.0, &used));
        let growth = f.iter().find(|f| f.id == FindingId::MemoryGrowth).expect("growth found");
        assert_eq!(growth.window_s, Some([30.0, 90.0]));
        assert_eq!(growth.evidence["growth_gib_per_min"], 6.0);
        assert!(growth.title.contains("grew 6.0 GiB in 60 s (6.00 GiB/min)"), "{}", growth.title);
    }

    #[test]
    fn growth_is_critical_when_the_forecast_is_under_10_minutes() {
        // 1/3 GiB/s from 10 to 30 GiB over 60 s: full in 3 × (total - 30) s.
        let f = findings(&ramp(30.0 + 599.0 / 3.0, 20.0, 60));
        assert_eq!((f[0].id, f[0].severity), (FindingId::MemoryGrowth, Severity::Critical));
        assert!((f[0].time_to_oom_s.unwrap() - 599.0).abs() < 0.5, "{:?}", f[0].evidence);
        let f = findings(&ramp(30.0 + 601.0 / 3.0, 20.0, 60));
        assert_eq!((f[0].id, f[0].severity), (FindingId::MemoryGrowth, Severity::Warning));
    }

    #[test]
    fn an_oom_message_without_gpu_readings_is_an_oom() {
        let ev = |payload: serde_json::Value| vec![(gpulse_model::EventKind::CudaOom, 12.0, payload)];
        let r = Run {
            events: ev(json!({"text": "torch.OutOfMemoryError: CUDA out of memory.", "gpu": 1})),
            ..run(Vec::new())
        };
        let f = findings(&r);
        assert_eq!(ids(&f), ["oom"]);
        assert_eq!((f[0].gpu, &f[0].evidence["at_s"]), (Some(1), &json!(12.0)));
        assert!(f[0].evidence.get("peak_gib").is_none(), "no reading, no peak");
        // A GPU whose memory was never read is no better placed.
        let r = Run { events: ev(json!({"text": "CUDA out of memory"})), ..run(vec![steady(0, 50.0, 5)]) };
        let f = findings(&r);
        assert_eq!(ids(&f), ["oom"]);
        assert!(f[0].title.starts_with("Ran out of GPU memory 12 s"), "{}", f[0].title);
        // With readings, the GPU's own finding carries the message, once.
        let mut r = mem(100.0, &[50.0; 5]);
        r.events = ev(json!({"text": "CUDA out of memory", "gpu": 0}));
        let f = findings(&r);
        assert_eq!(ids(&f), ["oom"]);
        assert_eq!(f[0].evidence["peak_gib"], 50.0);
    }

    /// The job's `stop` event at `end_s`.
    fn stopped(mut r: Run, end_s: f64, stop: serde_json::Value) -> Run {
        r.events.push((gpulse_model::EventKind::Stop, end_s, stop));
        r
    }

    /// Memory that grew to 41 of 140 GiB and fell to nothing when the job ended: growth that
    /// stopped short of the limit, whatever the exit, and never an OOM.
    #[test]
    fn growth_that_falls_below_the_limit_is_no_oom() {
        let mut used: Vec<f64> = (0..=50).map(|i| 5.0 + 36.0 * f64::from(i) / 50.0).collect();
        used.extend([0.5; 5]);
        for stop in [None, Some(json!({"exit_status": 0})), Some(json!({"exit_status": 1}))] {
            let r = match &stop {
                Some(s) => stopped(mem(140.0, &used), 55.0, s.clone()),
                None => mem(140.0, &used),
            };
            let f = findings(&r);
            assert_eq!(ids(&f), ["memory_growth"], "{stop:?}");
            assert!(f[0].title.contains("stopped 99 GiB short of the limit"), "{}", f[0].title);
            assert_eq!(f[0].evidence["fell_at_s"], 51.0);
            // 99 GiB at 0.72 GiB/s.
            let fill = f[0].evidence["would_fill_in_s"].as_f64().unwrap();
            assert!((fill - 99.0 / 0.72).abs() < 2.0, "{fill}");
            assert_eq!(f[0].time_to_oom_s, None, "nothing left to forecast");
        }
    }

    /// At the limit, then freed: an OOM when the job failed or its exit is unknown, and no OOM
    /// when it exited with status 0.
    #[test]
    fn a_fall_from_the_limit_is_an_oom_unless_the_job_exited_cleanly() {
        let edge = [96.0, 96.0, 96.0, 96.0, 96.0, 96.0, 10.0, 10.0];
        assert_eq!(found(&mem(100.0, &edge)), ["oom"], "no exit status");
        let failed = findings(&stopped(mem(100.0, &edge), 8.0, json!({"exit_status": 1})));
        assert_eq!(ids(&failed), ["oom"]);
        assert!(failed[0].limits[0].contains("failing with its memory at the limit"), "{:?}", failed[0].limits);
        let clean = stopped(mem(100.0, &edge), 8.0, json!({"exit_status": 0}));
        assert_eq!(found(&clean), ["memory_pressure"], "a clean exit frees its memory");
    }

    /// A job killed with its memory at the limit, before a sample saw it freed: an OOM at its last
    /// reading; the same memory with a clean exit is pressure only.
    #[test]
    fn a_failed_exit_at_the_limit_is_an_oom() {
        let at_limit = [50.0, 80.0, 96.0, 97.0];
        let f = findings(&stopped(mem(100.0, &at_limit), 4.0, json!({"signal": "SIGABRT", "exit_status": 134})));
        assert_eq!((ids(&f), &f[0].evidence["at_s"]), (vec!["oom"], &json!(3.0)));
        assert_eq!(found(&stopped(mem(100.0, &at_limit), 4.0, json!({"exit_status": 0}))), ["memory_pressure"]);
        let below = [50.0, 80.0, 90.0, 94.0];
        assert_eq!(found(&stopped(mem(100.0, &below), 4.0, json!({"exit_status": 1}))), ["memory_pressure"]);
    }

    /// A stop by the user or a scheduler, the kernel's OOM killer, and a fall long before the
    /// failure are no GPU OOM, at the limit or not.
    #[test]
    fn only_an_error_exit_near_the_fall_reads_as_an_oom() {
        let edge = [96.0, 96.0, 96.0, 96.0, 96.0, 96.0, 10.0, 10.0];
        for stop in [
            json!({"signal": "SIGINT", "exit_status": 130}),
            json!({"signal": "SIGTERM", "exit_status": 143}),
            json!({"exit_status": 1, "oom_kills": 1}),
        ] {
            assert_eq!(found(&stopped(mem(100.0, &edge), 8.0, stop.clone())), ["memory_pressure"], "{stop}");
        }
        assert_eq!(found(&stopped(mem(100.0, &edge), 8.0, json!({"signal": "SIGABRT", "exit_status": 134}))), ["oom"]);
        // The fall at 5 s, the failure at 60 s: the allocator's cache emptied, then something else.
        let mut late = edge.to_vec();
        late.extend([10.0; 53]);
        assert_eq!(found(&stopped(mem(100.0, &late), 60.0, json!({"exit_status": 1}))), ["memory_pressure"]);
    }
}
