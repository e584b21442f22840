//! Memory near its limit, memory that keeps growing (with a forecast of the OOM), and OOMs.

use super::GIB;
use crate::{Finding, GpuSeries, Run, Severity, round};

/// Above this share of the usable memory, PyTorch's caching allocator runs out of headroom for
/// fragmentation and new block sizes.
const PRESSURE: f64 = 0.90;
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

/// An `oom` event from a trace's own log, or `cuda_oom` from the job's stderr under `gpulse run`.
fn is_oom_event(kind: &str) -> bool {
    matches!(kind, "oom" | "cuda_oom")
}

pub fn findings(run: &Run) -> Vec<Finding> {
    let mut out = Vec::new();
    for g in &run.gpus {
        out.extend(for_gpu(run, g));
    }
    // No GPU reading to place it on (no driver, or memory that could not be read): the error
    // message itself is the evidence that the job ran out of memory.
    if !out.iter().any(|f| f.id == "oom")
        && let Some((_, at, message)) = run.events.iter().find(|e| is_oom_event(&e.0))
    {
        let gpu = message.get("gpu").and_then(serde_json::Value::as_u64);
        let title = match gpu {
            Some(gpu) => format!("GPU {gpu}: ran out of memory {at:.0} s into the run"),
            None => format!("Ran out of GPU memory {at:.0} s into the run"),
        };
        let mut f = Finding::new("oom", Severity::Critical, title);
        if let Some(gpu) = gpu {
            f = f.with("gpu", gpu);
        }
        out.push(
            f.with("at_s", round(*at, 1))
                .with("message", message.clone())
                .advise(&OOM_ADVICE)
                .limit("no GPU memory readings: the peak and what grew before the error are unknown (record where the driver answers)"),
        );
    }
    out
}

fn for_gpu(run: &Run, g: &GpuSeries) -> Vec<Finding> {
    let mut out = Vec::new();
    let used: Vec<f64> = g.mem_used_bytes.iter().flatten().copied().collect();
    let Some(peak) = used.iter().copied().reduce(f64::max) else { return out };
    let total = g.mem_total_bytes;
    // `oom` from a trace's own log; `cuda_oom` from the job's stderr under `gpulse run`, which
    // names the GPU when PyTorch does.
    let oom_event = run.events.iter().find(|e| {
        is_oom_event(&e.0)
            && e.2.get("gpu").and_then(serde_json::Value::as_u64).is_none_or(|gpu| gpu == u64::from(g.gpu))
    });
    let mut oom_at: Option<f64> = oom_event.map(|e| e.1);
    if let Some(total) = total {
        // A fall from near the limit: memory freed by a process that died.
        for w in g.t_s.iter().zip(&g.mem_used_bytes).collect::<Vec<_>>().windows(6) {
            let (Some(first), Some(last)) = (w[0].1, w[w.len() - 1].1) else { continue };
            if oom_at.is_none() && *first >= 0.95 * total && first - last >= OOM_DROP * total {
                oom_at = Some(*w[0].0);
            }
        }
        if peak >= PRESSURE * total && oom_at.is_none() {
            out.push(
                Finding::new(
                    "memory_pressure",
                    Severity::Warning,
                    format!("GPU {}: memory peaked at {:.0}% of {:.0} GiB", g.gpu, 100.0 * peak / total, total / GIB),
                )
                .with("gpu", g.gpu)
                .with("peak_gib", round(peak / GIB, 2))
                .with("total_gib", round(total / GIB, 2))
                .advise(&[
                    "lower the batch size and keep the effective batch with gradient accumulation",
                    "train in bf16 with torch.autocast; enable activation checkpointing for the largest blocks",
                    "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to reduce fragmentation",
                ]),
            );
        }
    }
    // Growth: the segment with the largest sustained rise.
    let scale = total.unwrap_or(peak.max(GIB));
    let segs = segments(&g.t_s, &g.mem_used_bytes, scale);
    let last_seg = segs.len() - 1;
    let best = segs
        .iter()
        .enumerate()
        .filter(|(_, s)| s.1.len() >= 9 && sustained(&s.1))
        .max_by(|a, b| (a.1.1.last().unwrap() - a.1.1[0]).total_cmp(&(b.1.1.last().unwrap() - b.1.1[0])));
    if let Some((k, (t, y))) = best {
        let rise = y[y.len() - 1] - y[0];
        let span = t[t.len() - 1] - t[0];
        // Growth that ends in a sudden fall of most of what it gained: the process died, most
        // likely out of memory, even when the log has no memory.total to compare with.
        if oom_at.is_none()
            && let Some((_, next)) = segs.get(k + 1)
            && next.first().is_some_and(|first| y[y.len() - 1] - first >= 0.5 * rise)
        {
            oom_at = Some(t[t.len() - 1]);
        }
        // Growth worth a finding: 5 % of the GPU, over 10 s at least.
        if rise >= 0.05 * scale && span >= 10.0 {
            let limit = total.unwrap_or(f64::INFINITY);
            let mut f = Finding::new(
                "memory_growth",
                Severity::Warning,
                format!("GPU {}: memory grew {:.1} GiB in {span:.0} s ({:.2} GiB/min)", g.gpu, rise / GIB, rise / span * 60.0 / GIB),
            )
            .with("gpu", g.gpu)
            .with("window_s", vec![round(t[0], 1), round(t[t.len() - 1], 1)])
            .with("growth_gib_per_min", round(rise / span * 60.0 / GIB, 3))
            .advise(&[
                "accumulate the loss as a number: total += loss.item() (or loss.detach()), not total += loss, which keeps every step's graph alive",
                "do not keep tensors that require grad in lists across steps; detach what you log",
                "if memory is needed: smaller batch with gradient accumulation, torch.autocast(bf16), activation checkpointing",
            ]);
            if k == last_seg && oom_at.is_none() {
                // Fit the ramp itself, not the flat stretch (or model load) before it.
                let from = y.iter().rposition(|v| *v <= y[0] + 0.1 * rise).unwrap_or(0).min(y.len().saturating_sub(3));
                match (total, crate::time_to_full(&t[from..], &y[from..], limit)) {
                    (Some(_), Some(fc)) => {
                        f.title += &format!("; out of memory in about {:.0} s", fc.seconds);
                        f = f
                            .with("time_to_oom_s", round(fc.seconds, 1))
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
        let mut f =
            Finding::new("oom", Severity::Critical, format!("GPU {}: ran out of memory {at:.0} s into the run", g.gpu))
                .with("gpu", g.gpu)
                .with("at_s", round(at, 1))
                .with("peak_gib", round(peak / GIB, 2))
                .advise(&OOM_ADVICE);
        if let Some(e) = oom_event {
            f = f.with("message", e.2.clone());
        } else {
            f = f.limit("inferred from memory falling from the limit; `gpulse run` catches the CUDA out-of-memory message itself");
        }
        out.push(f);
    }
    out
}
