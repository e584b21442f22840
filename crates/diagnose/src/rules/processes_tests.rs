use super::super::testing::*;
use super::*;
use crate::AccountKind;

/// Listings of GPU 0 every 2 s; process 9 holds `gib[i]` in listing i (absent where `None`),
/// with SM use `sm` and class `class`.
fn held(gib: &[Option<f64>], sm: Option<u32>, class: Option<GpuProcessClass>) -> Run {
    let mut g = gpu(0, 2.0, &vec![90.0; gib.len()]);
    g.processes = gib
        .iter()
        .map(|m| {
            // Process 1 computes: where SM use is read, it claims the GPU's work.
            let mut l = vec![gpulse_model::ProcessSample { sm_util_pct: sm.map(|_| 90), ..holder(1, 30.0) }];
            if let Some(m) = m {
                l.push(gpulse_model::ProcessSample { sm_util_pct: sm, class, ..holder(9, *m) });
            }
            std::sync::Arc::new(l)
        })
        .collect();
    run(vec![g])
}

fn flagged(r: &Run) -> Vec<&'static str> {
    findings(r).iter().filter(|f| f.facts.pid == Some(9)).map(|f| f.id.as_str()).collect()
}

#[test]
fn an_idle_holder_holds_1_gib_idle_for_10_s_and_half_its_time() {
    assert_eq!(flagged(&held(&[Some(1.0); 10], Some(0), None)), ["idle_holder"], "1 GiB for 18 s");
    assert!(flagged(&held(&[Some(0.999); 10], Some(0), None)).is_empty(), "under 1 GiB");
    let mut late = [Some(4.0); 10];
    late[..5].fill(None);
    assert!(flagged(&held(&late, Some(0), None)).is_empty(), "listed for 8 s");
    late[4] = Some(4.0);
    assert_eq!(flagged(&held(&late, Some(0), None)), ["idle_holder"], "10 s");
}

/// Work, then 30 GiB held doing nothing: judged over the stretch at its end, which the title
/// names, however busy it was before.
#[test]
fn a_holder_is_judged_by_its_last_stretch() {
    // Computes for 6 s at 90 % SM, then holds 30 GiB at 0 % for 18 s and the same again.
    for (n, idle_s) in [(13, 18.0), (22, 36.0)] {
        let mut r = held(&vec![Some(30.0); n], Some(0), None);
        for (i, l) in r.gpus[0].processes.iter_mut().enumerate().take(4) {
            let mut l2 = (**l).clone();
            l2[1].sm_util_pct = Some(90);
            l2[1].used_memory_bytes = Some(((20.0 + i as f64) * GIB) as u64);
            *l = std::sync::Arc::new(l2);
        }
        let f = findings(&r).into_iter().find(|f| f.facts.pid == Some(9)).expect("flagged");
        assert_eq!(f.id, FindingId::IdleHolder);
        assert_eq!(f.evidence["idle_s"], idle_s);
        assert!(
            f.title.contains(&format!("idle since 6 s after it appeared, holding 30.0 GiB for {idle_s:.0} s")),
            "{}",
            f.title
        );
    }
    // Idle for 10 s after 14 s of work: under half its time.
    let mut r = held(&[Some(30.0); 13], Some(0), None);
    for l in r.gpus[0].processes.iter_mut().take(8) {
        let mut l2 = (**l).clone();
        l2[1].sm_util_pct = Some(90);
        *l = std::sync::Arc::new(l2);
    }
    assert!(flagged(&r).is_empty());
}

#[test]
fn idle_means_memory_within_2_percent_and_sm_at_most_1_percent() {
    let mut m = [Some(4.0); 10];
    m[8] = Some(4.0 * 0.98);
    assert_eq!(flagged(&held(&m, Some(1), None)), ["idle_holder"]);
    m[8] = Some(4.0 * 0.979);
    assert!(flagged(&held(&m, Some(1), None)).is_empty(), "its memory moved");
    assert!(flagged(&held(&[Some(4.0); 10], Some(2), None)).is_empty(), "it uses the SMs");
}

/// Without per-process SM use, a flat process is idle only where the GPU's work is someone
/// else's: the GPU did none, or another process's memory moved.
#[test]
fn with_sm_use_unknown_the_gpus_work_must_be_anothers() {
    // Process 1 (30 GiB) and 9 (4 GiB) both flat on a GPU at 90 %: either could be the job.
    assert!(flagged(&held(&[Some(4.0); 10], None, None)).is_empty(), "a steady training is not idle");
    let lone = run(vec![with_processes(steady(0, 90.0, 20), vec![holder(9, 20.0)])]);
    assert!(flagged(&lone).is_empty(), "alone on a busy GPU");
    let quiet = run(vec![with_processes(steady(0, 0.0, 20), vec![holder(9, 20.0)])]);
    let f = findings(&quiet);
    assert!(f.iter().any(|f| f.facts.pid == Some(9) && !f.limits.is_empty()), "an idle GPU, and said so: {f:?}");
    // Process 1 grows while 9 stays: the work is 1's.
    let mut r = held(&[Some(4.0); 10], None, None);
    for (i, l) in r.gpus[0].processes.iter_mut().enumerate() {
        let mut l2 = (**l).clone();
        l2[0] = holder(1, 10.0 + i as f64);
        *l = std::sync::Arc::new(l2);
    }
    assert_eq!(flagged(&r), ["idle_holder"]);
    // A probe's 500 MiB context, from nothing, in 2 listings of 10: the training stays busy.
    let mut r = run(vec![with_processes(steady(0, 90.0, 10), vec![holder(9, 20.0)])]);
    for (i, l) in r.gpus[0].processes.iter_mut().enumerate().take(2) {
        let mut l2 = (**l).clone();
        l2.push(holder(77, 0.25 * (i + 1) as f64));
        *l = std::sync::Arc::new(l2);
    }
    assert!(flagged(&r).is_empty(), "a probe is not the GPU's work");
    // A listing that could not tell a process's memory is no move of it.
    let mut r = held(&[Some(4.0); 10], None, None);
    let mut l2 = (*r.gpus[0].processes[3]).clone();
    l2[0].used_memory_bytes = None;
    r.gpus[0].processes[3] = std::sync::Arc::new(l2);
    assert!(flagged(&r).is_empty(), "process 1's unknown memory did not move");
}

/// From an nvidia-smi log: 30 GiB held with the GPU at 0 % for 26 s, then another process
/// computing beside it for 14 s (under half the log), then idle again.
#[test]
fn a_holder_alone_on_an_idle_gpu_before_another_computes_is_idle() {
    let util: Vec<f64> = (0..60).map(|i| if (26..40).contains(&i) { 90.0 } else { 0.0 }).collect();
    let mut g = gpu(0, 1.0, &util);
    g.processes = (0..60)
        .map(|i| {
            let mut l = vec![holder(9, 30.0)];
            if (26..40).contains(&i) {
                l.push(holder(10, 2.0 + 0.5 * f64::from(i - 26)));
            }
            std::sync::Arc::new(l)
        })
        .collect();
    let r = run(vec![g.clone()]);
    assert_eq!(flagged(&r), ["idle_holder"]);
    assert!(findings(&r)[0].limits[0].contains("another process's moved"), "{:?}", findings(&r)[0].limits);
    // The GPU worked once with the holder alone: the work may be its own.
    g.util_pct[50] = Some(60.0);
    assert!(flagged(&run(vec![g.clone()])).is_empty());
    // Alone and idle for under 10 s says nothing.
    g.util_pct[50] = Some(0.0);
    for i in 0..60 {
        if !(26..40).contains(&i) && i >= 9 {
            g.util_pct[i] = None;
        }
    }
    assert!(flagged(&run(vec![g])).is_empty());
}

#[test]
fn holders_come_out_in_pid_order_every_time() {
    // Enough processes that a hash map's order would differ from run to run.
    let listing: Vec<_> = (0..40u32)
        .rev()
        .map(|i| gpulse_model::ProcessSample { sm_util_pct: Some(0), ..holder(1000 + i * 7919 % 977, 2.0) })
        .collect();
    let r = run(vec![with_processes(steady(0, 0.0, 20), listing)]);
    let pids: Vec<u64> = findings(&r).iter().map(|f| u64::from(f.facts.pid.unwrap())).collect();
    let mut sorted = pids.clone();
    sorted.sort_unstable();
    assert_eq!(pids.len(), 40);
    assert_eq!(pids, sorted);
}

#[test]
fn a_foreign_process_holds_1_gib_outside_the_tree() {
    let mut m = [Some(1.0); 10];
    m[0] = Some(3.0);
    assert_eq!(
        flagged(&held(&m, Some(50), Some(GpuProcessClass::Foreign))),
        ["foreign_process"],
        "busy and growing, still foreign"
    );
    assert!(flagged(&held(&[Some(0.999); 10], Some(0), Some(GpuProcessClass::Foreign))).is_empty());
}

/// 30 s at GPU-Util 97 %: the job's process 7 (when `job_sm` is given) and process 9 outside
/// the job at 57 % of the SMs, both listed throughout.
fn beside(job_sm: Option<u32>) -> Run {
    let mut listing = vec![gpulse_model::ProcessSample {
        sm_util_pct: Some(57),
        class: Some(GpuProcessClass::Foreign),
        ..holder(9, 20.0)
    }];
    if let Some(sm) = job_sm {
        listing.push(gpulse_model::ProcessSample {
            sm_util_pct: Some(sm),
            class: Some(GpuProcessClass::Tree),
            ..holder(7, 10.0)
        });
    }
    let mut r = run(vec![with_processes(steady(0, 97.0, 31), listing)]);
    r.tree_width = 1;
    r
}

/// Another process computing beside the job is a competitor with its SM share, and the
/// ledger gives its kernels' time an account of their own, not the job's.
#[test]
fn a_busy_process_beside_the_job_shares_the_gpu() {
    let (f, ledger) = crate::rules::all(&beside(Some(40)));
    let shared = f.iter().find(|f| f.id == FindingId::GpuShared).expect("gpu_shared");
    assert_eq!(
        (shared.all_evidence()["pid"].as_u64(), shared.all_evidence()["sm_share_pct"].as_f64()),
        (Some(9), Some(57.0))
    );
    assert!(!shared.advice.iter().any(|a| a.contains("forgotten")), "{:?}", shared.advice);
    assert!(!f.iter().any(|f| matches!(f.id, FindingId::ForeignProcess | FindingId::IdleHolder | FindingId::Healthy)));
    // 30 s of loop: the job's 40 % and the other's 57 %.
    assert!((ledger.seconds(AccountKind::GpuWork) - 12.0).abs() < 0.01, "{ledger:?}");
    assert!((ledger.seconds(AccountKind::GpuOthers) - 17.1).abs() < 0.01, "{ledger:?}");
    assert_eq!(
        shared.wall_share(),
        Some(crate::round(ledger.share(AccountKind::GpuOthers), 4)),
        "the account's share, rounded once as the ledger rounds it"
    );
}

/// A job that never used the GPU, beside a process keeping it busy: no loop, nothing
/// healthy, no roofline, and the other process is not called forgotten.
#[test]
fn a_job_without_a_gpu_gets_nothing_of_anothers_work() {
    let mut r = beside(None);
    r.has_gpm = true;
    for g in &mut r.gpus {
        g.sm_pct = vec![Some(90.0); g.t_s.len()];
    }
    let (f, ledger) = crate::rules::all(&r);
    assert_eq!(ids(&f), ["foreign_process"], "{f:?}");
    assert!(f[0].advice.iter().all(|a| !a.contains("forgotten")), "{:?}", f[0].advice);
    assert_eq!(ledger.seconds(AccountKind::GpuWork), 0.0);
    assert_eq!((ledger.accounts[0].account, ledger.accounts[0].seconds), (AccountKind::NoGpu, 30.0));
    assert!(f[0].title.contains("computes outside the job (57% of the SMs)"), "{}", f[0].title);
    assert!(crate::efficiency(&r).is_empty(), "no roofline for the job");
}

/// Tiny kernels read 0–1 % of the SMs per process on the H200: a process alone on a GPU that
/// works is the one working, whatever its figure; beside a process that claims the SMs, it is
/// idle.
#[test]
fn a_low_sm_figure_on_a_working_gpu_that_nobody_else_claims_is_work() {
    let alone = |util: f64| {
        let p = gpulse_model::ProcessSample { sm_util_pct: Some(1), ..holder(9, 4.0) };
        run(vec![with_processes(steady(0, util, 20), vec![p])])
    };
    assert!(flagged(&alone(22.0)).is_empty(), "GPU-Util 22 %, nobody else");
    assert_eq!(flagged(&alone(0.0)), ["idle_holder"], "the GPU did nothing");
}

/// The job's tiny kernels read 2 % of the SMs beside an idle process outside it at 0 %:
/// GPU-Util's 22 % is the job's work, all of it.
#[test]
fn the_jobs_work_is_its_share_of_gpu_util_not_its_sm_figure() {
    let listing = vec![
        gpulse_model::ProcessSample { sm_util_pct: Some(0), class: Some(GpuProcessClass::Foreign), ..holder(9, 20.0) },
        gpulse_model::ProcessSample { sm_util_pct: Some(2), class: Some(GpuProcessClass::Tree), ..holder(7, 10.0) },
    ];
    let mut r = run(vec![with_processes(steady(0, 22.0, 31), listing)]);
    r.tree_width = 1;
    let ledger = crate::ledger(&r, &[]);
    assert!((ledger.seconds(AccountKind::GpuWork) - 0.22 * 30.0).abs() < 0.01, "{ledger:?}");
    assert_eq!(ledger.seconds(AccountKind::GpuOthers), 0.0);
}

/// The job's own process idle at its end is told to free what it holds, not called forgotten.
#[test]
fn the_jobs_own_idle_process_is_not_called_forgotten() {
    let f = findings(&held(&[Some(4.0); 10], Some(0), Some(GpuProcessClass::Tree)));
    let f = f.iter().find(|f| f.facts.pid == Some(9)).expect("flagged");
    assert!(f.title.contains("process 9 (the job's) idle"), "{}", f.title);
    assert!(f.advice.iter().all(|a| !a.contains("forgotten")), "{:?}", f.advice);
    assert_eq!(f.evidence["sm_util_max_pct"], 0);
}

/// The job's own process whose GPU idles while its main thread works through its code (a
/// metric in numpy each step, say) waits on the host: said at info, with no advice to free
/// its memory. Sampled at one stack all the while, it holds memory it no longer uses.
#[test]
fn the_jobs_process_working_on_the_host_is_no_idle_holder() {
    let sampled = |stacks: u32| {
        let mut r = held(&[Some(4.0); 10], Some(0), Some(GpuProcessClass::Tree));
        let st = gpulse_model::Stacks {
            samples: (0..90)
                .map(|i| gpulse_model::ThreadSample {
                    clock: None,
                    t_us: i64::from(i) * 200_000,
                    pid: 9,
                    stack: i % stacks,
                    kernel: gpulse_model::KernelState { state: 'R', syscall: None, wchan: None, across: false },
                    gil: gpulse_model::Gil::Held,
                })
                .collect(),
            ..gpulse_model::Stacks::default()
        };
        r.stacks = std::sync::Arc::new(st);
        findings(&r).into_iter().find(|f| f.facts.pid == Some(9)).expect("said")
    };
    let working = sampled(4);
    assert_eq!(working.severity, Severity::Info);
    assert!(working.advice.iter().all(|a| !a.contains("empty_cache")), "{:?}", working.advice);
    let parked = sampled(1);
    assert_eq!(parked.severity, Severity::Warning);
    assert!(parked.advice.iter().any(|a| a.contains("empty_cache")), "{:?}", parked.advice);
}

/// The job's own process that computed, then held 30 GiB for 18 s of its 40 s (as on an H200 run,
/// its SM figure lagging the work by a few seconds): said at info; another's beside the job
/// is a warning from 10 s whatever came before.
#[test]
fn a_known_process_is_judged_by_its_last_10_s() {
    let mut r = held(&vec![Some(30.0); 21], Some(0), Some(GpuProcessClass::Tree));
    for l in r.gpus[0].processes.iter_mut().take(12) {
        let mut l2 = (**l).clone();
        l2[1].sm_util_pct = Some(100);
        *l = std::sync::Arc::new(l2);
    }
    let f = findings(&r).into_iter().find(|f| f.facts.pid == Some(9)).expect("flagged");
    assert_eq!(
        (f.id, f.severity, &f.evidence["idle_s"]),
        (FindingId::IdleHolder, Severity::Info, &serde_json::json!(18.0))
    );
    for l in r.gpus[0].processes.iter_mut() {
        let mut l2 = (**l).clone();
        l2[1].class = Some(GpuProcessClass::Foreign);
        *l = std::sync::Arc::new(l2);
    }
    let f = findings(&r).into_iter().find(|f| f.facts.pid == Some(9)).expect("flagged");
    assert_eq!((f.id, f.severity), (FindingId::ForeignProcess, Severity::Warning));
    // Unknown whose: half its time, as before.
    for l in r.gpus[0].processes.iter_mut() {
        let mut l2 = (**l).clone();
        l2[1].class = None;
        *l = std::sync::Arc::new(l2);
    }
    assert!(flagged(&r).is_empty());
}
