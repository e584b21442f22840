//! Before and after a change: the same figures side by side, the findings that came and went,
//! and a one-line verdict.

use serde::Serialize;

use crate::rules::mean;
use crate::{Finding, Run};

/// The figures compared, for one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Figures {
    /// Mean GPU-Util over the active window, averaged across GPUs, percent.
    pub util_gpu_pct: Option<f64>,
    /// Mean GPM SM activity, percent.
    pub sm_active_pct: Option<f64>,
    /// Highest memory used on any GPU, GiB.
    pub memory_peak_gib: Option<f64>,
    /// Mean board power over the active window, watts, averaged across GPUs.
    pub power_w: Option<f64>,
    /// Mean CPU of the watched process tree, percent of one core.
    pub tree_cpu_pct: Option<f64>,
    /// Seconds of activity.
    pub active_s: f64,
    /// Training steps a second, from the loop's marks.
    pub steps_per_s: Option<f64>,
    /// Share of wall time the loop waited for data, percent, from the loop's marks.
    pub data_wait_pct: Option<f64>,
}

impl Figures {
    pub fn of(run: &Run) -> Self {
        let per_gpu =
            |f: &dyn Fn(&crate::GpuSeries) -> Option<f64>| mean(&run.gpus.iter().filter_map(f).collect::<Vec<_>>());
        Self {
            util_gpu_pct: per_gpu(&|g| mean(&g.active_values(&g.util_pct))),
            sm_active_pct: per_gpu(&|g| mean(&g.active_values(&g.sm_pct))),
            memory_peak_gib: run
                .gpus
                .iter()
                .flat_map(|g| g.mem_used_bytes.iter().flatten())
                .copied()
                .reduce(f64::max)
                .map(|b| b / (1u64 << 30) as f64),
            power_w: per_gpu(&|g| mean(&g.active_values(&g.power_w))),
            tree_cpu_pct: run.tree_cpu_mean(),
            active_s: run.gpus.iter().map(crate::GpuSeries::active_s).fold(0.0, f64::max),
            steps_per_s: run.steps.as_ref().map(crate::Steps::per_s),
            data_wait_pct: run.steps.as_ref().and_then(crate::Steps::data_wait_share).map(|s| 100.0 * s),
        }
    }
}

/// A before/after comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub before: Figures,
    pub after: Figures,
    /// How much faster the second run goes: the ratio of steps per second when both runs marked
    /// steps; otherwise of mean SM activity, or of GPU-Util without GPM, which for the same model
    /// and batch stands in for it.
    pub gpu_work_ratio: Option<f64>,
    /// Which figure the ratio rests on.
    pub gpu_work_basis: &'static str,
    pub gone: Vec<&'static str>,
    pub new: Vec<&'static str>,
    pub verdict: String,
}

/// Compares two runs and their findings.
pub fn compare(before: &Run, fb: &[Finding], after: &Run, fa: &[Finding]) -> Comparison {
    let (b, a) = (Figures::of(before), Figures::of(after));
    let ratio = |x: Option<f64>, y: Option<f64>| x.zip(y).filter(|(x, _)| *x > 0.5).map(|(x, y)| y / x);
    let steps_ratio = b.steps_per_s.zip(a.steps_per_s).filter(|(x, _)| *x > 0.0).map(|(x, y)| y / x);
    let (gpu_work_ratio, gpu_work_basis) = match (steps_ratio, ratio(b.sm_active_pct, a.sm_active_pct)) {
        (Some(r), _) => (Some(r), "steps/s"),
        (None, Some(r)) => (Some(r), "SM activity"),
        (None, None) => (ratio(b.util_gpu_pct, a.util_gpu_pct), "GPU-Util"),
    };
    let ids = |f: &[Finding]| f.iter().map(|f| f.id).collect::<Vec<_>>();
    let (ib, ia) = (ids(fb), ids(fa));
    let mut gone: Vec<&'static str> = ib.iter().copied().filter(|i| !ia.contains(i)).collect();
    let mut new: Vec<&'static str> = ia.iter().copied().filter(|i| !ib.contains(i)).collect();
    gone.dedup();
    new.dedup();
    let mut parts = Vec::new();
    for id in &gone {
        parts.push(match *id {
            "input_bound" => "input bottleneck removed".to_owned(),
            "host_bound" => "host overhead removed".to_owned(),
            "memory_growth" | "oom" => "memory leak gone".to_owned(),
            "periodic_stall" => "periodic stalls gone".to_owned(),
            other => format!("{other} gone"),
        });
    }
    if let (Some(u0), Some(u1)) = (b.util_gpu_pct, a.util_gpu_pct) {
        parts.push(format!("util {u0:.0}% → {u1:.0}%"));
    }
    if let (Some(w0), Some(w1)) = (b.data_wait_pct, a.data_wait_pct) {
        parts.push(format!("data wait {w0:.0}% → {w1:.0}%"));
    }
    if let (Some(r), "steps/s") = (gpu_work_ratio, gpu_work_basis) {
        let (n, what) = if r >= 1.0 { (r, "more") } else { (1.0 / r, "fewer") };
        parts.push(format!("{}× {what} steps/s", fmt_ratio(n)));
    } else if let Some(r) = gpu_work_ratio {
        let what = if r >= 1.0 { "up" } else { "down" };
        parts.push(format!(
            "throughput {what} ~{}× (by {gpu_work_basis})",
            fmt_ratio(if r >= 1.0 { r } else { 1.0 / r })
        ));
    }
    let remaining: Vec<&str> = ia
        .iter()
        .filter_map(|id| match *id {
            "host_bound" => Some("host overhead"),
            "input_bound" => Some("input pipeline"),
            "periodic_stall" => Some("periodic stalls"),
            "util_misleading" => Some("small kernels"),
            "memory_growth" => Some("memory growth"),
            "gpu_imbalance" => Some("GPU imbalance"),
            _ => None,
        })
        .collect();
    if !remaining.is_empty() {
        parts.push(format!("remaining gap: {}", remaining.join(", ")));
    }
    for id in &new {
        if !matches!(*id, "healthy" | "host_bound" | "input_bound") {
            parts.push(format!("new: {id}"));
        }
    }
    let verdict = if parts.is_empty() { "no material change".to_owned() } else { parts.join("; ") };
    Comparison { before: b, after: a, gpu_work_ratio, gpu_work_basis, gone, new, verdict }
}

fn fmt_ratio(r: f64) -> String {
    if r >= 10.0 { format!("{r:.0}") } else { format!("{r:.1}") }
}
