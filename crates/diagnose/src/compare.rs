//! Before and after a change: the same figures side by side, the findings that came and went,
//! and a one-line verdict.

use serde::Serialize;

use crate::run::mean;
use crate::{Diagnosis, Finding, FindingId, Run};

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
    /// The main thread's states (of the process the ledger reads), percent of its sampled time;
    /// empty where it was not sampled.
    pub main_thread_pct: Vec<(crate::main_thread::ThreadState, f64)>,
    /// A distributed job's ranks: each rank's time in collectives, percent of its sampled time.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rank_collective_pct: Vec<(u32, f64)>,
}

impl Figures {
    /// `d`: the run's diagnosis, for its main-thread profiles and ranks.
    pub fn of(run: &Run, d: &Diagnosis) -> Self {
        let stacks = &d.stacks;
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
                .map(gpulse_model::to_gib),
            power_w: per_gpu(&|g| mean(&g.active_values(&g.power_w))),
            tree_cpu_pct: run.tree_cpu_mean(),
            active_s: run.gpus.iter().map(crate::GpuSeries::active_s).fold(0.0, f64::max),
            steps_per_s: run.steps.as_ref().map(crate::Steps::per_s),
            data_wait_pct: run.steps.as_ref().and_then(crate::Steps::data_wait_share).map(|s| 100.0 * s),
            main_thread_pct: stacks
                .iter()
                .find(|p| p.samples > 0)
                .map(|p| p.states.iter().map(|s| (s.state, 100.0 * s.share)).collect())
                .unwrap_or_default(),
            rank_collective_pct: d.ranks.iter().map(|r| (r.rank, 100.0 * r.peer_wait_share)).collect(),
        }
    }
}

/// The figure a before/after ratio of the GPU's work rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum WorkBasis {
    #[serde(rename = "steps/s")]
    StepsPerS,
    #[serde(rename = "SM activity")]
    SmActivity,
    #[serde(rename = "GPU-Util")]
    GpuUtil,
}

impl std::fmt::Display for WorkBasis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WorkBasis::StepsPerS => "steps/s",
            WorkBasis::SmActivity => "SM activity",
            WorkBasis::GpuUtil => "GPU-Util",
        })
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
    pub gpu_work_basis: WorkBasis,
    /// Half-width of the ratio's noise band, as a share of 1: two standard errors of each run's
    /// mean (step time, or per-sample SM activity or GPU-Util), combined (see `relative_error`). A ratio within
    /// `1 ± gpu_work_noise` is no measurable change.
    pub gpu_work_noise: Option<f64>,
    pub gone: Vec<FindingId>,
    pub new: Vec<FindingId>,
    pub verdict: String,
}

/// Compares two runs and their findings.
pub fn compare(before: &Run, db: &Diagnosis, after: &Run, da: &Diagnosis) -> Comparison {
    let (b, a) = (Figures::of(before, db), Figures::of(after, da));
    let (fb, fa) = (&db.findings[..], &da.findings[..]);
    let ratio = |x: Option<f64>, y: Option<f64>| x.zip(y).filter(|(x, _)| *x > 0.5).map(|(x, y)| y / x);
    let steps_ratio = b.steps_per_s.zip(a.steps_per_s).filter(|(x, _)| *x > 0.0).map(|(x, y)| y / x);
    let (gpu_work_ratio, gpu_work_basis) = match (steps_ratio, ratio(b.sm_active_pct, a.sm_active_pct)) {
        (Some(r), _) => (Some(r), WorkBasis::StepsPerS),
        (None, Some(r)) => (Some(r), WorkBasis::SmActivity),
        (None, None) => (ratio(b.util_gpu_pct, a.util_gpu_pct), WorkBasis::GpuUtil),
    };
    let gpu_work_noise = gpu_work_ratio.and(
        relative_error(before, gpu_work_basis)
            .zip(relative_error(after, gpu_work_basis))
            .map(|(eb, ea)| 2.0 * eb.hypot(ea)),
    );
    // `healthy` says no other finding fired; it is not a problem that can go away or appear.
    // Neither a clean bill of health nor the time no account explains is a cause that comes or goes.
    let ids = |f: &[Finding]| f.iter().map(|f| f.id).filter(|id| id.names_something()).collect::<Vec<_>>();
    let (ib, ia) = (ids(fb), ids(fa));
    let mut gone: Vec<FindingId> = ib.iter().copied().filter(|i| !ia.contains(i)).collect();
    let mut new: Vec<FindingId> = ia.iter().copied().filter(|i| !ib.contains(i)).collect();
    gone.dedup();
    new.dedup();
    let mut parts: Vec<String> = Vec::new();
    // Findings of several GPUs, or two that mean the same (a leak and its OOM), say it once.
    let mut gone_phrases: Vec<String> = Vec::new();
    for id in &gone {
        gone_phrases.push(words(*id).gone.map_or_else(|| format!("{id} gone"), str::to_owned));
    }
    for p in gone_phrases {
        if !parts.contains(&p) {
            parts.push(p);
        }
    }
    if let (Some(u0), Some(u1)) = (b.util_gpu_pct, a.util_gpu_pct) {
        parts.push(format!("util {u0:.0}% → {u1:.0}%"));
    }
    if let (Some(w0), Some(w1)) = (b.data_wait_pct, a.data_wait_pct) {
        parts.push(format!("data wait {w0:.0}% → {w1:.0}%"));
    }
    if let (Some(r), Some(noise)) = (gpu_work_ratio, gpu_work_noise)
        && (r - 1.0).abs() <= noise
    {
        let steps = gpu_work_basis == WorkBasis::StepsPerS;
        let what = if steps { "steps/s" } else { "throughput" };
        let by = if steps { String::new() } else { format!(" by {gpu_work_basis}") };
        parts.push(format!("{what} unchanged{by} (within ±{:.1}%, the noise of the measurement)", 100.0 * noise));
    } else if let (Some(r), WorkBasis::StepsPerS) = (gpu_work_ratio, gpu_work_basis) {
        let (n, what) = if r >= 1.0 { (r, "more") } else { (1.0 / r, "fewer") };
        parts.push(format!("{}× {what} steps/s", fmt_ratio(n)));
    } else if let Some(r) = gpu_work_ratio {
        let what = if r >= 1.0 { "up" } else { "down" };
        parts.push(format!(
            "throughput {what} ~{}× (by {gpu_work_basis})",
            fmt_ratio(if r >= 1.0 { r } else { 1.0 / r })
        ));
    }
    let mut remaining: Vec<&str> = ia.iter().filter_map(|id| words(*id).gap).collect();
    let mut seen = std::collections::HashSet::new();
    remaining.retain(|r| seen.insert(*r));
    if !remaining.is_empty() {
        parts.push(format!("remaining gap: {}", remaining.join(", ")));
    }
    let mut named = std::collections::HashSet::new();
    for id in &new {
        if !words(*id).gap_says_new && named.insert(*id) {
            parts.push(format!("new: {id}"));
        }
    }
    let verdict = if parts.is_empty() { "no material change".to_owned() } else { parts.join("; ") };
    Comparison { before: b, after: a, gpu_work_ratio, gpu_work_basis, gpu_work_noise, gone, new, verdict }
}

/// How the verdict speaks of a finding.
struct Words {
    /// Said when it went; else "`id` gone".
    gone: Option<&'static str>,
    /// Its name in the gap that remains after the change, where it is part of that gap.
    gap: Option<&'static str>,
    /// Whether naming it in the remaining gap says already that it is new.
    gap_says_new: bool,
}

/// The verdict's words for `id`; findings of one cause (a leak and its OOM) share them.
fn words(id: FindingId) -> Words {
    use FindingId::*;
    const PLAIN: Words = Words { gone: None, gap: None, gap_says_new: false };
    match id {
        InputBound => Words { gone: Some("input bottleneck removed"), gap: Some("input pipeline"), gap_says_new: true },
        HostBound => Words { gone: Some("host overhead removed"), gap: Some("host overhead"), gap_says_new: true },
        PeriodicStall => Words { gone: Some("periodic stalls gone"), gap: Some("periodic stalls"), ..PLAIN },
        MemoryGrowth => Words { gone: Some("memory leak gone"), gap: Some("memory growth"), ..PLAIN },
        Oom => Words { gone: Some("memory leak gone"), ..PLAIN },
        UtilMisleading => Words { gap: Some("small kernels"), ..PLAIN },
        GpuImbalance => Words { gap: Some("GPU imbalance"), ..PLAIN },
        ProcessBound | TransferBound | HostSaturated | Healthy | TensorIdle | MemoryPressure | MarkedPhase
        | CheckpointWrites | UnexplainedTime | Startup | EpochRestart | Throttling | IdleHolder | ForeignProcess
        | GpuShared | CpuOversubscribed | DataParallel | DeviceMisbinding | WorkerMemory | GpuLost | HostOom
        | NcclTimeout | NcclError | DataloaderKilled | Xid | GpuResetPending | NvlinkUnused => PLAIN,
        HostPython => {
            Words { gone: Some("host-side Python removed"), gap: Some("host-side Python"), gap_says_new: true }
        }
        NativeCode => Words { gone: Some("native CPU code removed"), gap: Some("native CPU code"), ..PLAIN },
        CoreWait => Words { gone: Some("wait for a core gone"), gap: Some("waits for a core"), ..PLAIN },
        GilContention => Words { gone: Some("GIL contention gone"), gap: Some("GIL contention"), ..PLAIN },
        SleepInLoop => Words { gone: Some("sleep in the loop gone"), gap: Some("a sleep in the loop"), ..PLAIN },
        NetworkWait => Words { gone: Some("network wait gone"), gap: Some("network waits"), ..PLAIN },
        DiskWait => Words { gone: Some("disk wait gone"), gap: Some("disk waits"), ..PLAIN },
        IpcWait => Words { gone: Some("wait on another process gone"), gap: Some("waits on another process"), ..PLAIN },
        LockWait => Words { gone: Some("lock wait gone"), gap: Some("lock waits"), ..PLAIN },
        MainThreadBlocked => PLAIN,
        PeerWait => Words { gone: Some("wait for the other ranks gone"), gap: Some("waits for other ranks"), ..PLAIN },
        Straggler => Words { gone: Some("straggling rank gone"), gap: Some("a straggling rank"), ..PLAIN },
    }
}

/// The standard error of a run's mean on `basis`, as a share of that mean. The spread is taken
/// from one sample to the next (the mean squared successive difference, halved): the reading's
/// own jitter, not the run's slow changes (warm-up, phases, a stall's pauses), which are the job's
/// and not noise in its measurement. It does not cover the job's run-to-run variation, which only
/// repeated runs measure.
fn relative_error(run: &Run, basis: WorkBasis) -> Option<f64> {
    let series: Vec<Vec<f64>> = match basis {
        WorkBasis::StepsPerS => vec![run.steps.as_ref()?.step_s.iter().map(|s| s.1).collect()],
        WorkBasis::SmActivity => run.gpus.iter().map(|g| g.active_values(&g.sm_pct)).collect(),
        WorkBasis::GpuUtil => run.gpus.iter().map(|g| g.active_values(&g.util_pct)).collect(),
    };
    let all: Vec<f64> = series.iter().flatten().copied().collect();
    let m = mean(&all)?;
    let pairs: Vec<f64> = series.iter().flat_map(|s| s.windows(2).map(|w| (w[1] - w[0]).powi(2))).collect();
    let sigma = (mean(&pairs)? / 2.0).sqrt();
    (m > 0.0).then(|| sigma / m / (all.len() as f64).sqrt())
}

/// A ratio of 1 or more: whole from 10, two places below 2 (so a change just outside the noise
/// band does not read "1.0×").
fn fmt_ratio(r: f64) -> String {
    if r >= 10.0 {
        format!("{r:.0}")
    } else if r >= 2.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::testing::*;

    /// One GPU, 100 samples a second apart: `level` % SM activity jittering by ±`jitter` points.
    fn sm_run(level: f64, jitter: f64) -> Run {
        let mut g = steady(0, level, 100);
        g.sm_pct = (0..100).map(|i| Some(level + if i % 2 == 0 { jitter } else { -jitter })).collect();
        run(vec![g])
    }

    #[test]
    fn healthy_is_not_a_finding_that_comes_or_goes() {
        let r = sm_run(85.0, 1.0);
        let healthy = Diagnosis::of(&r);
        // 15 % of the time the GPU ran nothing, and no mark says why: said, and no cause.
        assert_eq!(ids(&healthy.findings), ["unexplained_time", "healthy"]);
        let slow = Diagnosis::of(&sm_run(30.0, 1.0));
        let c = compare(&r, &healthy, &r, &slow);
        assert!(!c.gone.contains(&FindingId::Healthy) && !c.verdict.contains("healthy"), "{c:?}");
        let c = compare(&r, &slow, &r, &healthy);
        assert!(!c.new.contains(&FindingId::Healthy) && !c.verdict.contains("healthy"), "{c:?}");
    }

    /// Two GPUs that both lost their host overhead, and a leak that lost its OOM too: each said
    /// once.
    #[test]
    fn each_change_is_said_once() {
        let f = |id: FindingId, gpu: Option<u32>| {
            let mut f = Finding::new(id, crate::Severity::Warning, String::new());
            f.gpu = gpu;
            f
        };
        use FindingId::{HostBound, MemoryGrowth, Oom};
        let before = [f(HostBound, Some(0)), f(MemoryGrowth, Some(0)), f(HostBound, Some(1)), f(Oom, Some(0))];
        let r = sm_run(50.0, 5.0);
        let before = Diagnosis { findings: before.to_vec(), ..Diagnosis::default() };
        let none = Diagnosis::default();
        let c = compare(&r, &before, &r, &none);
        assert_eq!(c.verdict.matches("host overhead removed").count(), 1, "{}", c.verdict);
        assert_eq!(c.verdict.matches("memory leak gone").count(), 1, "{}", c.verdict);
        let c = compare(&r, &none, &r, &before);
        assert_eq!(c.verdict.matches("host overhead").count(), 1, "{}", c.verdict);
        assert_eq!(c.verdict.matches("new: oom").count(), 1, "{}", c.verdict);
    }

    #[test]
    fn a_run_against_itself_is_unchanged_and_a_change_beyond_the_noise_is_not() {
        let r = sm_run(50.0, 5.0);
        let f = Diagnosis::of(&r);
        let c = compare(&r, &f, &r, &f);
        assert_eq!(c.gpu_work_ratio, Some(1.0));
        // Jitter ±5 on 50: successive differences of 10, σ = √(10²/2), a standard error of
        // σ/50/√100 ≈ 1.4 % a run; two standard errors of the two runs combined: 4 %.
        let noise = c.gpu_work_noise.unwrap();
        assert!((noise - 2.0 * (50f64.sqrt() / 500.0) * 2f64.sqrt()).abs() < 1e-9, "{noise}");
        assert!(c.verdict.contains("throughput unchanged by SM activity (within ±4.0%"), "{}", c.verdict);
        assert!(!c.verdict.contains('×'), "{}", c.verdict);
        // 2 % more work: inside the band. 10 %: outside it, and said with two places.
        let near = sm_run(51.0, 5.0);
        assert!(compare(&r, &f, &near, &f).verdict.contains("unchanged"));
        let beyond = sm_run(55.0, 5.0);
        let c = compare(&r, &f, &beyond, &f);
        assert!(c.verdict.contains("throughput up ~1.10× (by SM activity)"), "{}", c.verdict);
    }
}
