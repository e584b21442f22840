//! A host CPU that cannot keep up: saturated while the GPU waits, split into what the job itself
//! uses and what other processes take.

use super::MIN_ACTIVE_S;
use super::feeding::{DATA_WAIT_SHARE, LOW_UTIL_PCT, workers_advice};
use crate::run::mean;
use crate::{Finding, FindingId, Run, Severity, round};

/// Whole-machine CPU at or above this is saturated: with at most one core in ten idle on average,
/// a runnable worker often finds no core free, and `/proc/stat`'s busy share never quite reaches
/// 100 % (idle ticks between tasks, kernel threads).
const SATURATED_PCT: f64 = 90.0;

/// Host CPU busy over `[t0, t1]` (percent of the machine) and the training tree's share of the
/// machine there, when read.
fn over(run: &Run, t0: f64, t1: f64) -> (Option<f64>, Option<f64>) {
    let inside = |v: &[(f64, f64)]| v.iter().filter(|x| x.0 >= t0 && x.0 <= t1).map(|x| x.1).collect::<Vec<_>>();
    let host = mean(&inside(&run.host_cpu));
    let tree = mean(&inside(&run.tree_cpu)).filter(|_| run.cores > 0).map(|c| c / run.cores as f64);
    (host, tree)
}

/// Whether the host's CPU is saturated over `g`'s active window.
pub(super) fn saturated(run: &Run, g: &crate::GpuSeries) -> bool {
    let [t0, t1] = g.window();
    over(run, t0, t1).0.is_some_and(|h| h >= SATURATED_PCT)
}

/// `host_saturated`: the machine's CPU at or near all of its cores while a GPU waits.
pub fn findings(run: &Run) -> Vec<Finding> {
    let mut out = Vec::new();
    for g in &run.gpus {
        let util = mean(&g.active_values(&g.util_pct));
        if g.active_s() < MIN_ACTIVE_S || util.is_none_or(|u| u >= LOW_UTIL_PCT) {
            continue;
        }
        let [t0, t1] = g.window();
        let (Some(host), tree) = over(run, t0, t1) else { continue };
        if !saturated(run, g) {
            continue;
        }
        let util = util.unwrap_or(0.0);
        let title = match tree {
            Some(inside) => {
                let outside = (host - inside).max(0.0);
                let who = if outside >= inside {
                    "other processes take most of it"
                } else {
                    "the job itself uses most of it"
                };
                format!(
                    "GPU {}: the host CPU is {host:.0}% busy while the GPU waits: {inside:.0}% inside the job, {outside:.0}% outside it; {who}",
                    g.gpu
                )
            }
            None => format!("GPU {}: the host CPU is {host:.0}% busy while the GPU waits (GPU-Util {util:.0}%)", g.gpu),
        };
        let measured = run.steps.as_ref().and_then(crate::Steps::data_wait_share).is_some_and(|w| w >= DATA_WAIT_SHARE);
        let mut f = Finding::new(FindingId::HostSaturated, Severity::Warning, title)
            .on_gpu(g.gpu)
            .over(g.window())
            .with("host_cpu_mean_pct", round(host, 1))
            .with("util_gpu_mean_pct", round(util, 1))
            .costs(1.0 - util / 100.0, "gpu_idle_time: the share of time no kernel ran (100 - GPU-Util)");
        if run.cores > 0 {
            f = f.with("cores", run.cores as u64);
        }
        let mut advice = Vec::new();
        match tree {
            Some(inside) => {
                let outside = (host - inside).max(0.0);
                f = f.with("job_cpu_share_pct", round(inside, 1)).with("outside_cpu_share_pct", round(outside, 1));
                if outside >= inside {
                    advice.push("other processes take the cores: stop or move them, or give the job cores of its own (a dedicated node, cgroup cpusets, taskset)".to_owned());
                } else {
                    advice.push("the job asks more of the CPU than the machine has: fewer DataLoader workers than cores, and torch.set_num_threads (or OMP_NUM_THREADS) so that workers × threads fits the cores".to_owned());
                }
            }
            None => {
                f = f.limit("the training tree was not watched: how much of the CPU is the job's own is unknown (gpulse run, or gpulse record --pid PID)");
            }
        }
        advice.push(workers_advice(run));
        advice.push("torch.set_num_threads(1) inside each worker (worker_init_fn) when __getitem__ uses torch ops, so workers do not fight over cores".to_owned());
        f.advice = advice;
        if !measured {
            f = f.inferred();
        }
        out.push(f);
    }
    out
}

/// `cpu_oversubscribed`: the job's DataLoader workers run more threads than the machine has
/// cores while the job fills it.
pub fn oversubscribed(run: &Run) -> Vec<Finding> {
    let Some(o) = super::feeding::oversubscribed(run) else { return Vec::new() };
    let mut f = Finding::new(
        FindingId::CpuOversubscribed,
        Severity::Warning,
        format!(
            "{} DataLoader workers run up to {} threads each on {} cores: the job keeps {:.0} cores busy, its threads taking turns",
            o.workers, o.threads_per_worker, o.cores, o.tree_cores
        ),
    )
    .with("workers", o.workers as u64)
    .with("threads_per_worker", o.threads_per_worker)
    .with("cores", o.cores as u64)
    .with("job_cpu_cores", round(o.tree_cores, 1))
    .advise(&super::feeding::THREADS_ADVICE);
    if let Some(t) = o.tree_threads {
        f = f.with("job_threads", t);
    }
    vec![f]
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    /// GPU-Util `util` for 20 s; the host `host` % busy on 16 cores, the tree at `tree` % of a core.
    fn busy(util: f64, host: f64, tree: Option<f64>) -> Run {
        let mut r = run(vec![steady(0, util, 21)]);
        r.host_cpu = (0..21).map(|t| (f64::from(t), host)).collect();
        r.cores = 16;
        if let Some(c) = tree {
            r.tree_cpu = (0..21).map(|t| (f64::from(t), c)).collect();
            r.tree_width = 5;
            r.worker_count = 4;
            r.worker_cpu_mean = Some(c / 4.0);
        }
        r
    }

    #[test]
    fn saturated_from_90_percent_while_the_gpu_is_under_60() {
        assert!(findings(&busy(30.0, 89.9, None)).is_empty());
        let f = findings(&busy(30.0, 90.0, None));
        assert_eq!(ids(&f), ["host_saturated"]);
        assert_eq!(f[0].basis, crate::Basis::Inferred);
        assert_eq!(f[0].own_share(), Some(0.7));
        assert!(f[0].limits.iter().any(|l| l.contains("not watched")), "{:?}", f[0].limits);
        assert!(findings(&busy(60.0, 100.0, None)).is_empty(), "a fed GPU: a busy host is no bottleneck");
        assert_eq!(ids(&findings(&busy(59.9, 100.0, None))), ["host_saturated"]);
    }

    #[test]
    fn inside_and_outside_the_job_are_told_apart() {
        // 16 cores at 100 %: the tree uses 4 cores (25 %), others 75 %.
        let f = &findings(&busy(20.0, 100.0, Some(400.0)))[0];
        assert_eq!(
            (&f.evidence["job_cpu_share_pct"], &f.evidence["outside_cpu_share_pct"]),
            (&serde_json::json!(25.0), &serde_json::json!(75.0))
        );
        assert!(f.title.contains("other processes"), "{}", f.title);
        let f = &findings(&busy(20.0, 100.0, Some(1400.0)))[0];
        assert!(f.title.contains("the job itself"), "{}", f.title);
        assert!(f.advice[0].contains("set_num_threads"), "{:?}", f.advice);
    }
}
