//! Low utilization (input- or host-bound), GPU-Util that misleads, imbalance, and health.

use super::MIN_ACTIVE_S;
use super::feeding::{DATA_WAIT_SHARE, LOW_UTIL_PCT, WORKERS_BUSY_PCT, input_advice, workers_advice};
use crate::run::{mean, stdev};
use crate::{Finding, FindingId, Run, Severity, round};

/// An on/off duty cycle `d` has a coefficient of variation `sqrt((1 - d) / d)`: at or above 0.8
/// the GPU is busy at most ~60 % of the time in bursts, which is how a loop that waits for each
/// batch looks. A launch-bound loop trickles small kernels continuously and varies far less.
const BURSTY_CV: f64 = 0.8;
/// What the GPU's idle time costs: the share of the window outside any stall in which no kernel
/// ran.
const GPU_IDLE: &str = "gpu_idle_time: the share of time no kernel ran (100 - GPU-Util), outside any stall's pauses";

/// Low utilization read from GPU-Util and the host, for GPUs no measured finding explains:
/// `input_bound` (inferred), `process_bound` and `host_bound`. A stall's pauses are left out,
/// since `periodic_stall` carries them.
pub fn findings(run: &Run, stalls: &[Finding]) -> Vec<Finding> {
    let mut out = Vec::new();
    let tree_cpu = run.tree_cpu_mean();
    for g in &run.gpus {
        let (a, b) = g.active;
        let paused = stalls.iter().filter(|f| f.gpu == Some(g.gpu)).flat_map(|f| f.pauses_s.iter()).collect::<Vec<_>>();
        let util: Vec<f64> = (a..b)
            .filter(|&i| !paused.iter().any(|p| g.t_s[i] >= p[0] && g.t_s[i] < p[1]))
            .filter_map(|i| g.util_pct[i])
            .collect();
        let (Some(mu), Some(sd)) = (mean(&util), stdev(&util)) else { continue };
        if g.active_s() < MIN_ACTIVE_S || mu <= 0.0 {
            continue;
        }
        let sm = mean(&g.active_values(&g.sm_pct));
        out.extend(misleading(g));
        // No job to advise: gpulse's own recording (its listings read) with no tree, no step
        // marks and no process on the GPU. What the GPU did is in the ledger.
        if run.processes_read && run.tree_width == 0 && run.steps.is_none() && g.processes.iter().all(|l| l.is_empty())
        {
            continue;
        }
        // Copies that fill the link, and a saturated host, have findings of their own.
        if mu >= LOW_UTIL_PCT || super::transfer::is_transfer_bound(g) || super::host::saturated(run, g) {
            continue;
        }
        let cv = sd / mu;
        // The loop's own timing outranks any reading of GPU-Util: `steps::input_bound` reports a
        // measured wait; a loop that barely waits is not input-bound, whatever the pattern.
        let measured_wait = super::steps::measured_wait_share(run);
        if measured_wait.is_some_and(|w| w >= DATA_WAIT_SHARE) {
            continue;
        }
        let window = g.window();
        let one_core_loader = run.tree_width == 1 && tree_cpu.is_some_and(|c| c >= 80.0);
        let bursty = cv >= BURSTY_CV;
        // Workers that each keep most of a core busy produce batches as fast as they can.
        let workers_saturated = run.worker_cpu_mean.is_some_and(|c| c >= WORKERS_BUSY_PCT);
        let unmeasured = measured_wait.is_none();
        let mut f = if unmeasured && (workers_saturated || (bursty && !one_core_loader)) {
            let why = match run.worker_cpu_mean.filter(|_| workers_saturated) {
                Some(w) => {
                    format!("{} DataLoader workers busy {w:.0}% of a core each", run.tree_width.saturating_sub(1))
                }
                None => "busy in bursts".to_owned(),
            };
            let mut f = Finding::new(
                FindingId::InputBound,
                Severity::Warning,
                format!("GPU {}: waits for data; GPU-Util {mu:.0}%, {why}", g.gpu),
            );
            f.advice.push(workers_advice(run));
            f.advice.extend(input_advice(run));
            f
        } else if unmeasured && one_core_loader {
            // One busy core loads data or runs Python: utilization cannot tell which.
            let mut f = Finding::new(
                FindingId::ProcessBound,
                Severity::Warning,
                format!("GPU {}: the GPU is starved by the training process: data loading or Python overhead; GPU-Util {mu:.0}%, one process busy {:.0}% of a core", g.gpu, tree_cpu.unwrap_or(0.0)),
            )
            .advise(&["to tell them apart, measure the wait for each batch: gpulse run --instrument, or gpulse.LightningCallback / gpulse.HFCallback; a large wait is data loading, a small one Python overhead"]);
            f.advice.push(format!("if it is data loading: {}", workers_advice(run)));
            f.advise(&["if it is Python overhead: larger batches, torch.compile(mode=\"reduce-overhead\") or CUDA graphs, and no .item(), .cpu() or print(loss) on every step"])
        } else {
            let title = match measured_wait {
                Some(w) => format!(
                    "GPU {}: the host cannot feed the GPU fast enough; GPU-Util {mu:.0}%, and the loop waits for data only {:.0}% of the time",
                    g.gpu,
                    100.0 * w
                ),
                None => format!("GPU {}: the host cannot feed the GPU fast enough; GPU-Util {mu:.0}%, steady", g.gpu),
            };
            Finding::new(FindingId::HostBound, Severity::Warning, title).advise(&[
                "do more work per launch: a larger batch, or gradient accumulation over larger micro-batches",
                "cut launch overhead with torch.compile(mode=\"reduce-overhead\") or CUDA graphs",
                "remove per-step synchronizations: .item(), .cpu(), print(loss) and torch.cuda.synchronize() inside the loop",
            ])
        };
        // No watched tree and no step marks: a training loop is a guess from the GPU's pattern,
        // and the per-step advice says so.
        if run.tree_width == 0 && run.steps.is_none() {
            for a in &mut f.advice {
                if !a.starts_with("if ") {
                    *a = format!("if a training loop runs on this GPU: {a}");
                }
            }
            f = f.limit("no process tree was watched and no steps were marked: whether a training loop ran is inferred from the GPU's pattern alone");
        }
        let paused_s: f64 = paused.iter().map(|p| p[1] - p[0]).sum();
        let outside = (1.0 - paused_s / g.active_s().max(1e-9)).max(0.0);
        f = f
            .on_gpu(g.gpu)
            .over(window)
            .with("util_gpu_mean_pct", round(mu, 1))
            .with("util_gpu_cv", round(cv, 2))
            .costs(outside * (1.0 - mu / 100.0), GPU_IDLE)
            .inferred();
        if let Some(sm) = sm {
            f = f.with("sm_active_mean_pct", round(sm, 1));
        }
        if run.tree_width > 0 {
            f = f.with("tree_processes", run.tree_width as u64);
            // A tree watched whose CPU could not be read: the count stands, the CPU stays absent.
            match tree_cpu {
                Some(c) => f = f.with("tree_cpu_mean_pct", round(c, 0)),
                None => {
                    f = f.limit("the training tree's CPU could not be read: whether it loads data itself is unknown")
                }
            }
            if let Some(w) = run.worker_cpu_mean {
                f = f.with("worker_cpu_mean_pct", round(w, 0));
            }
        } else if run.host_cpu.is_empty() {
            f = f.limit(
                "no host data: record with `gpulse record --pid PID` to see the training's CPU and DataLoader workers",
            );
        } else {
            f = f.limit(
                "the training's process tree was not watched (the host's CPU was): record with `gpulse record --pid PID`, or `gpulse run`, to see its CPU and DataLoader workers",
            );
        }
        match measured_wait {
            Some(w) => f = f.with("data_wait_share_pct", round(100.0 * w, 1)),
            None if run.steps.is_some() => {
                f = f.limit(
                    "the loop marked its steps but not its waits for data: the share of each step spent waiting was not measured (gpulse run --instrument times each DataLoader wait; by hand, gpulse.phase(\"data\") around the fetch)",
                )
            }
            None => {
                f = f.limit(
                    "no step markers: the share of each step spent waiting for data was not measured (gpulse run --instrument, or the Lightning and Hugging Face callbacks, measure it)",
                )
            }
        }
        out.push(f);
    }
    out
}

/// A sample where GPU-Util says busy (≥ 50 %) and at most half as many SMs work: time counted as
/// busy while most of the GPU idles.
fn is_misleading(util: f64, sm: f64) -> bool {
    util >= 50.0 && sm <= util / 2.0
}

/// GPU-Util that misleads for a material share of the run: a fifth of the active samples.
fn misleading(g: &crate::GpuSeries) -> Option<Finding> {
    let (a, b) = g.active;
    let both: Vec<(usize, f64, f64)> = (a..b).filter_map(|i| Some((i, g.util_pct[i]?, g.sm_pct[i]?))).collect();
    // A sample's GPM figures cover a window that closed up to one window before it: across an
    // idle-to-busy edge they still count the idle stretch. A sample counts once GPU-Util has been
    // busy for two windows.
    let back_s = 2.0 * g.gpm_window_s.unwrap_or(1.0);
    let settled = |i: usize| {
        (a..=i).rev().take_while(|&j| g.t_s[j] >= g.t_s[i] - back_s).all(|j| g.util_pct[j].is_some_and(|u| u >= 50.0))
    };
    let bad: Vec<&(usize, f64, f64)> = both.iter().filter(|x| is_misleading(x.1, x.2) && settled(x.0)).collect();
    if bad.len() < 5 || (bad.len() as f64) < 0.2 * both.len() as f64 {
        return None;
    }
    let mu = mean(&bad.iter().map(|x| x.1).collect::<Vec<_>>())?;
    let sm = mean(&bad.iter().map(|x| x.2).collect::<Vec<_>>())?;
    let (first, last) = (bad.first()?.0, bad.last()?.0);
    Some(
        Finding::new(
            FindingId::UtilMisleading,
            Severity::Warning,
            format!("GPU {}: GPU-Util reads {mu:.0}% but only {sm:.1}% of the SMs are busy", g.gpu),
        )
        .on_gpu(g.gpu)
        .over([g.t_s[first], g.t_s[last]])
        .with("share_of_run", round(bad.len() as f64 / both.len() as f64, 3))
        .with("util_gpu_mean_pct", round(mu, 1))
        .with("sm_active_mean_pct", round(sm, 1))
        .advise(&[
            "GPU-Util counts time in which any kernel runs, however few SMs it uses: the work is too small or too serial to fill the GPU",
            "raise the batch size, or fuse small kernels with torch.compile",
            "look for single-block kernels (custom CUDA, tiny matmuls, busy-wait kernels) with the PyTorch profiler",
        ]),
    )
}

/// GPUs loaded unevenly. Data-parallel ranks do the same work each step, so a GPU doing less than
/// three quarters of the busiest one's work waits a quarter of its time for the others. Work is SM
/// activity where GPM has it: GPU-Util counts NCCL kernels that wait for a peer as busy.
pub fn imbalance(run: &Run) -> Vec<Finding> {
    let gpus = job_gpus(run);
    let by_sm = gpus.iter().all(|g| mean(&g.active_values(&g.sm_pct)).is_some());
    let work: Vec<(u32, f64)> = gpus
        .iter()
        .filter_map(|g| Some((g.gpu, mean(&g.active_values(if by_sm { &g.sm_pct } else { &g.util_pct }))?)))
        .collect();
    if work.len() < 2 {
        return Vec::new();
    }
    let (lo, hi) = work.iter().fold((f64::MAX, f64::MIN), |(lo, hi), m| (lo.min(m.1), hi.max(m.1)));
    if hi < 30.0 || lo > 0.75 * hi {
        return Vec::new();
    }
    let basis = if by_sm { "SM activity" } else { "GPU-Util" };
    let mut f = Finding::new(FindingId::GpuImbalance, Severity::Warning, format!("GPUs loaded unevenly: {basis} {lo:.0}% to {hi:.0}%"))
        .with(if by_sm { "sm_active_mean_pct" } else { "util_gpu_mean_pct" }, work.iter().map(|m| serde_json::json!({ "gpu": m.0, "mean": round(m.1, 1) })).collect::<Vec<_>>())
        .with("least_to_most", round(lo / hi, 2))
        // Ranks wait for the busiest each step: evened out, each does the mean.
        .costs(1.0 - work.iter().map(|m| m.1).sum::<f64>() / work.len() as f64 / hi, "imbalance: the busiest GPU's work above the mean, over its work")
        .with(
            "util_gpu_spread_pct",
            gpus.iter()
                .filter_map(|g| Some(serde_json::json!({ "gpu": g.gpu, "mean": round(mean(&g.active_values(&g.util_pct))?, 1) })))
                .collect::<Vec<_>>(),
        )
        .with(
            "memory_peak_gib",
            gpus.iter()
                .map(|g| {
                    let peak = g.mem_used_bytes.iter().flatten().copied().fold(0.0, f64::max);
                    serde_json::json!({ "gpu": g.gpu, "peak": round(gpulse_model::to_gib(peak), 2) })
                })
                .collect::<Vec<_>>(),
        )
        .advise(&[
            "give each rank the same amount of work: DistributedSampler with drop_last=True, equal per-rank batch sizes",
            "nn.DataParallel drives all GPUs from one process and gathers on GPU 0: use DistributedDataParallel with torchrun",
            "call torch.cuda.set_device(local_rank) before creating the model",
        ]);
    if !by_sm {
        f = f.limit(
            "no GPM: judged by GPU-Util, which counts ranks waiting in NCCL as busy and so understates imbalance",
        );
    }
    vec![f]
}

/// The GPUs the job used: those its own processes held memory on when the process tree was
/// watched; else those any process held memory on; else those that did any work. A GPU nobody
/// touched is not a rank left idle.
fn job_gpus(run: &Run) -> Vec<&crate::GpuSeries> {
    use gpulse_model::GpuProcessClass;
    let holds = |g: &crate::GpuSeries, tree_only: bool| {
        g.processes.iter().any(|l| {
            l.iter()
                .any(|p| p.used_memory_bytes.unwrap_or(1) > 0 && (!tree_only || p.class == Some(GpuProcessClass::Tree)))
        })
    };
    let classified = run.gpus.iter().any(|g| g.processes.iter().any(|l| l.iter().any(|p| p.class.is_some())));
    if run.has_processes {
        return run.gpus.iter().filter(|g| holds(g, classified)).collect();
    }
    run.gpus.iter().filter(|g| g.util_pct.iter().chain(&g.sm_pct).any(|v| v.is_some_and(|v| v > 0.0))).collect()
}

/// Nothing wrong, and the GPU is busy, for as long as the other rules need to judge a steady
/// state: a busy second in a run of idle ones is no evidence that nothing is wrong.
pub fn healthy(run: &Run) -> Vec<Finding> {
    // Another process keeping a GPU busy says nothing of the job: a job that used no GPU is
    // never healthy.
    let job = run.job_gpus();
    let on_job = |g: &&crate::GpuSeries| job.as_ref().is_none_or(|j| j.contains(&g.gpu));
    let judged = run.gpus.iter().filter(on_job).filter(|g| g.active_s() >= super::MIN_ACTIVE_S);
    let best = judged.filter_map(|g| mean(&g.active_values(&g.util_pct))).fold(f64::MIN, f64::max);
    if best < 80.0 {
        return Vec::new();
    }
    let mut f = Finding::new(FindingId::Healthy, Severity::Info, format!("No bottleneck found; GPU-Util {best:.0}%"));
    f = f.with("util_gpu_mean_pct", round(best, 1));
    if let Some(sm) = run.gpus.iter().filter(on_job).filter_map(|g| mean(&g.active_values(&g.sm_pct))).reduce(f64::max)
    {
        f = f.with("sm_active_mean_pct", round(sm, 1));
    } else {
        f = f.limit("no GPM data: SM activity unknown; record on Hopper or newer with gpulse to see it");
    }
    vec![f]
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    /// `n` samples a second alternating between `hi` and `lo`: mean (hi+lo)/2, CV (hi-lo)/(hi+lo).
    fn alternating(hi: f64, lo: f64, n: usize) -> crate::GpuSeries {
        gpu(0, 1.0, &(0..n).map(|i| if i % 2 == 0 { hi } else { lo }).collect::<Vec<_>>())
    }

    fn found(run: &Run) -> Vec<&'static str> {
        ids(&findings(run, &[]))
    }

    /// What the input lacked is said as it was: host data without a tree, steps without waits.
    #[test]
    fn the_limits_name_what_is_missing() {
        let limits = |r: &Run| findings(r, &[]).into_iter().flat_map(|f| f.limits).collect::<Vec<_>>().join(" | ");
        let bare = run(vec![steady(0, 40.0, 20)]);
        assert!(
            limits(&bare).contains("no host data") && limits(&bare).contains("no step markers"),
            "{}",
            limits(&bare)
        );
        let mut host = run(vec![steady(0, 40.0, 20)]);
        host.host_cpu = vec![(0.0, 30.0), (10.0, 30.0)];
        assert!(limits(&host).contains("process tree was not watched") && !limits(&host).contains("no host data"));
        let mut stepped = run(vec![steady(0, 40.0, 20)]);
        stepped.steps = Some(crate::rules::testing::steps(1, 19, [0.0, 19.0]));
        assert!(
            limits(&stepped).contains("marked its steps but not its waits")
                && !limits(&stepped).contains("no step markers")
        );
    }

    /// A recording of the machine with no job (no tree, no marks, no process on the GPU) gets no
    /// per-step advice: there is no loop to give it to.
    #[test]
    fn no_job_no_loop_advice() {
        let mut r = run(vec![steady(0, 40.0, 20)]);
        r.host_cpu = (0..20).map(|t| (f64::from(t), 10.0)).collect();
        assert_eq!(found(&r), ["host_bound"], "a log that cannot list processes");
        r.processes_read = true;
        assert!(found(&r).is_empty(), "listings read, none on the GPU");
        r.gpus[0] = with_processes(steady(0, 40.0, 20), vec![holder(7, 2.0)]);
        assert_eq!(found(&r), ["host_bound"], "a process on the GPU");
        // No tree and no marks: the loop is a guess, and its advice says so.
        let f = findings(&r, &[]);
        assert!(f[0].advice.iter().all(|a| a.starts_with("if ")), "{:?}", f[0].advice);
        r.tree_width = 1;
        let f = findings(&r, &[]);
        assert!(f[0].advice[0].starts_with("do more work per launch"), "{:?}", f[0].advice);
    }

    #[test]
    fn low_utilization_starts_below_60_percent() {
        assert_eq!(found(&run(vec![steady(0, 59.9, 20)])), ["host_bound"]);
        assert!(found(&run(vec![steady(0, 60.0, 20)])).is_empty());
    }

    #[test]
    fn a_window_under_10_s_is_not_judged() {
        assert!(found(&run(vec![gpu(0, 0.5, &[30.0; 20])])).is_empty(), "9.5 s");
        assert_eq!(found(&run(vec![gpu(0, 0.5, &[30.0; 21])])), ["host_bound"], "10 s");
    }

    #[test]
    fn bursts_read_as_input_bound_from_a_cv_of_0_8() {
        // 44.9/5.1: CV 0.796; 45/5: CV 0.8 exactly; both mean 25 %.
        assert_eq!(found(&run(vec![alternating(44.9, 5.1, 20)])), ["host_bound"]);
        let f = findings(&run(vec![alternating(45.0, 5.0, 20)]), &[]);
        assert_eq!(ids(&f), ["input_bound"]);
        assert_eq!(f[0].evidence["util_gpu_cv"], 0.8);
    }

    #[test]
    fn one_process_at_80_percent_of_a_core_is_the_loader_in_the_training_process() {
        let with_tree =
            |cpu: f64| Run { tree_cpu: vec![(0.0, cpu), (10.0, cpu)], tree_width: 1, ..run(vec![steady(0, 30.0, 20)]) };
        assert_eq!(found(&with_tree(79.9)), ["host_bound"]);
        // Data loading or Python overhead: utilization cannot tell, and says both.
        let f = findings(&with_tree(80.0), &[]);
        assert_eq!(ids(&f), ["process_bound"]);
        assert_eq!(f[0].basis, crate::Basis::Inferred);
        assert!(f[0].title.contains("data loading or Python overhead"), "{}", f[0].title);
        assert!(f[0].advice[0].contains("--instrument") && f[0].advice[0].contains("HFCallback"), "{:?}", f[0].advice);
        // Two processes at that CPU are not one loading in-process.
        assert_eq!(found(&Run { tree_width: 2, ..with_tree(95.0) }), ["host_bound"]);
    }

    #[test]
    fn a_host_90_percent_busy_is_left_to_host_saturated() {
        let with_host = |cpu: f64| Run { host_cpu: vec![(0.0, cpu), (10.0, cpu)], ..run(vec![steady(0, 30.0, 20)]) };
        assert_eq!(found(&with_host(89.9)), ["host_bound"]);
        assert!(found(&with_host(90.0)).is_empty());
    }

    #[test]
    fn a_stalls_pauses_are_not_low_utilization() {
        // 90 % busy with two 4 s pauses: 70 % over the window, 90 % outside the pauses.
        let mut g = steady(0, 90.0, 21);
        for i in [4, 5, 6, 7, 12, 13, 14, 15] {
            g.util_pct[i] = Some(0.0);
        }
        let r = run(vec![g]);
        let stall = Finding::new(FindingId::PeriodicStall, Severity::Warning, String::new())
            .on_gpu(0)
            .pauses(vec![[4.0, 8.0], [12.0, 16.0]]);
        assert!(ids(&findings(&r, &[stall])).is_empty());
    }

    #[test]
    fn an_inferred_finding_costs_the_gpus_idle_time() {
        let f = findings(&run(vec![steady(0, 30.0, 20)]), &[]);
        assert_eq!((f[0].own_share(), f[0].basis), (Some(0.7), crate::Basis::Inferred));
    }

    #[test]
    fn workers_at_70_percent_of_a_core_are_the_limit() {
        let with_workers = |cpu: f64| Run {
            tree_cpu: vec![(0.0, 4.0 * cpu)],
            tree_width: 5,
            worker_cpu_mean: Some(cpu),
            worker_count: 4,
            ..run(vec![steady(0, 30.0, 20)])
        };
        assert_eq!(found(&with_workers(69.9)), ["host_bound"]);
        let f = findings(&with_workers(70.0), &[]);
        assert_eq!(ids(&f), ["input_bound"]);
        assert!(f[0].title.contains("4 DataLoader workers busy 70% of a core each"), "{}", f[0].title);
    }

    #[test]
    fn a_measured_wait_of_20_percent_hands_over_to_the_measured_finding() {
        // The total as the loop's counter holds it at the threshold: 10 × share, not a sum of ten.
        let steps = |share: f64| crate::Steps { waited_s: Some(10.0 * share), ..each_second(0, 10, Some(&|_| share)) };
        let bursty = |share: f64| Run { steps: Some(steps(share)), ..run(vec![alternating(45.0, 5.0, 20)]) };
        // Bursty, but the loop measured a small wait: not input-bound.
        assert_eq!(found(&bursty(0.19)), ["host_bound"]);
        assert!(found(&bursty(0.2)).is_empty(), "steps::input_bound reports it");
    }

    #[test]
    fn a_watched_tree_whose_cpu_was_not_read_keeps_its_width_and_no_invented_cpu() {
        let r = Run { tree_width: 5, ..run(vec![alternating(45.0, 5.0, 20)]) };
        let f = &findings(&r, &[])[0];
        assert_eq!(f.evidence["tree_processes"], 5);
        assert!(f.evidence.get("tree_cpu_mean_pct").is_none(), "{:?}", f.evidence);
        assert!(f.limits.iter().all(|l| !l.contains("no host data")), "the tree was watched: {:?}", f.limits);
        assert!(f.limits.iter().any(|l| l.contains("CPU could not be read")), "{:?}", f.limits);
    }

    /// `n` samples at GPU-Util 90 % with SM 85 %, and `bad` more at GPU-Util `util`, SM `sm`.
    fn mixed(n: usize, bad: usize, util: f64, sm: f64) -> Run {
        let mut g = gpu(0, 1.0, &vec![90.0; n + bad]);
        g.sm_pct = (0..n + bad).map(|i| Some(if i < n { 85.0 } else { sm })).collect();
        for u in &mut g.util_pct[n..] {
            *u = Some(util);
        }
        run(vec![g])
    }

    #[test]
    fn misleading_util_needs_util_50_sm_at_most_half_in_a_fifth_of_five_samples_or_more() {
        let m = |r: &Run| misleading(&r.gpus[0]).is_some();
        assert!(m(&mixed(20, 5, 50.0, 25.0)), "5 of 25 = 20 %, at both edges");
        assert!(!m(&mixed(21, 5, 50.0, 25.0)), "5 of 26 < 20 %");
        assert!(!m(&mixed(20, 5, 49.9, 10.0)), "GPU-Util below 50 %");
        assert!(!m(&mixed(20, 5, 50.0, 25.1)), "SM above half");
        assert!(!m(&mixed(12, 4, 90.0, 10.0)), "4 samples are too few");
    }

    #[test]
    fn imbalance_starts_at_three_quarters_of_a_busiest_gpu_at_30_percent() {
        let two = |hi: f64, lo: f64| ids(&imbalance(&run(vec![steady(0, hi, 20), steady(1, lo, 20)])));
        assert_eq!(two(40.0, 30.0), ["gpu_imbalance"], "exactly 3/4");
        assert!(two(40.0, 30.1).is_empty());
        assert_eq!(two(30.0, 10.0), ["gpu_imbalance"]);
        assert!(two(29.9, 10.0).is_empty(), "too idle to judge");
        assert!(ids(&imbalance(&run(vec![steady(0, 90.0, 20)]))).is_empty(), "one GPU");
        // 80 and 40: evened out at 60, each step is a quarter shorter.
        let f = imbalance(&run(vec![steady(0, 80.0, 20), steady(1, 40.0, 20)]));
        assert_eq!(f[0].own_share(), Some(0.25));
    }

    #[test]
    fn healthy_needs_80_percent() {
        assert!(healthy(&run(vec![steady(0, 79.9, 20)])).is_empty());
        let h = healthy(&run(vec![steady(0, 80.0, 20)]));
        assert_eq!(ids(&h), ["healthy"]);
        assert!(h[0].limits.iter().any(|l| l.contains("no GPM")), "SM activity unknown, said so");
        // Busy for 5 s: too short to say nothing is wrong.
        assert!(healthy(&run(vec![steady(0, 99.0, 6)])).is_empty());
    }
}
