use super::*;
use crate::AccountKind;
use crate::run::{merged, minus};

/// 100 s sampled each second: the context at 5 s, the first step at 10 s, the last at 90 s;
/// evaluation from 30 to 50 s (the GPU idle in it), 1 s of data wait in each 10 s of steps
/// outside it, GPU-Util 80 % elsewhere in the loop.
fn marked() -> Run {
    let util: Vec<f64> = (0..=100).map(|t| if (31..=50).contains(&t) { 0.0 } else { 80.0 }).collect();
    let mut g = crate::rules::testing::gpu(0, 1.0, &util);
    g.processes = (0..=100)
        .map(|t| std::sync::Arc::new(if t >= 5 { vec![crate::rules::testing::holder(7, 1.0)] } else { Vec::new() }))
        .collect();
    let mut r = crate::rules::testing::run(vec![g]);
    r.phases_s = vec![("eval".into(), [30.0, 50.0])];
    r.data_waits_s = [10.0, 20.0, 50.0, 60.0, 70.0, 80.0].iter().map(|t| [*t, t + 1.0]).collect();
    r.steps = Some(crate::Steps { waited_s: Some(6.0), ..crate::rules::testing::steps(7, 80, [10.0, 90.0]) });
    r
}

#[test]
fn an_idle_gpu_has_no_loop_to_be_idle_in() {
    // 60 s of an idle GPU: its active window falls back to the whole series, which is no
    // loop (it said "the GPU idle inside the loop").
    let l = ledger(&crate::rules::testing::run(vec![crate::rules::testing::steady(0, 0.0, 61)]), &[]);
    let labels: Vec<&str> = l.accounts.iter().map(|a| a.label.as_str()).collect();
    assert_eq!(labels, ["unexplained: no training loop seen"], "{l:#?}");
    // A job holding the idle GPU (a loader starved by its storage) runs a loop on it.
    let held = crate::rules::testing::with_processes(
        crate::rules::testing::steady(0, 0.0, 61),
        vec![crate::rules::testing::holder(7, 1.0)],
    );
    let l = ledger(&crate::rules::testing::run(vec![held]), &[]);
    assert!(l.accounts.iter().all(|a| !a.label.contains("no training loop")), "{l:#?}");
    // An idle machine with no job has no loop to mark: no unexplained_time finding, where
    // the held GPU's idle loop has one.
    let ids = |r: &Run| crate::diagnose_run(r).iter().map(|f| f.id).collect::<Vec<_>>();
    let idle = crate::rules::testing::run(vec![crate::rules::testing::steady(0, 0.0, 61)]);
    assert!(!ids(&idle).contains(&FindingId::UnexplainedTime), "{:?}", ids(&idle));
    let held = crate::rules::testing::with_processes(
        crate::rules::testing::steady(0, 0.0, 61),
        vec![crate::rules::testing::holder(7, 1.0)],
    );
    assert!(ids(&crate::rules::testing::run(vec![held])).contains(&FindingId::UnexplainedTime));
    // At 30 % busy, the same series is a loop.
    let l = ledger(&crate::rules::testing::run(vec![crate::rules::testing::steady(0, 30.0, 61)]), &[]);
    assert!(l.accounts.iter().all(|a| !a.label.contains("no training loop")), "{l:#?}");
}

#[test]
fn every_second_is_in_one_account() {
    let l = ledger(&marked(), &[]);
    assert_eq!(l.wall_s, 100.0);
    let sum: f64 = l.accounts.iter().map(|a| a.seconds).sum();
    assert!((sum - 100.0).abs() < 1e-6, "{l:#?}");
    let secs = |a: AccountKind| l.seconds(a);
    assert_eq!((secs(AccountKind::Phase), secs(AccountKind::DataWait)), (20.0, 6.0));
    assert_eq!(
        (secs(AccountKind::StartupBeforeCuda), secs(AccountKind::StartupToFirstStep), secs(AccountKind::AfterLoop)),
        (5.0, 5.0, 10.0)
    );
    // The loop's other 54 s: GPU-Util 80 % over its 60 s of steps and waits is 48 s of
    // kernels; with steps and waits timed, the rest is the loop's host-side work.
    assert!((secs(AccountKind::GpuWork) - 48.0).abs() < 1e-6, "{l:#?}");
    assert!((secs(AccountKind::HostSide) - 6.0).abs() < 1e-6, "{l:#?}");
    // Waits not timed: nothing places the rest.
    let mut untimed = marked();
    untimed.steps.as_mut().unwrap().waited_s = None;
    let l = ledger(&untimed, &[]);
    assert!(
        (l.seconds(AccountKind::Unexplained) - 6.0).abs() < 1e-6 && l.seconds(AccountKind::HostSide) == 0.0,
        "{l:#?}"
    );
    assert_eq!(l.accounts.iter().find(|a| a.account == AccountKind::Phase).map(|a| a.label.as_str()), Some("eval"));
}

#[test]
fn a_marked_phase_is_never_blamed_on_anything_else() {
    let r = marked();
    let (findings, l) = crate::diagnose_with_ledger(&r);
    let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
    let share = |id: FindingId| findings.iter().find(|f| f.id == id).and_then(|f| f.wall_share());
    assert_eq!(share(FindingId::MarkedPhase), Some(0.2), "{ids:?}");
    // The evaluation's idle GPU is no stall and no starved loop: the rules read the run
    // without it. The 6 s of host-side time inside the steps, by elimination, are named, and
    // cost only their own account.
    assert!(!ids.iter().any(|i| matches!(*i, "periodic_stall" | "input_bound")), "{ids:?}");
    assert_eq!(share(FindingId::HostBound), Some(0.06), "{ids:?}");
    assert_eq!(l.seconds(AccountKind::Stall), 0.0);
}

#[test]
fn minus_and_merged_are_interval_arithmetic() {
    assert_eq!(
        merged(vec![[3.0, 5.0], [0.0, 1.0], [0.5, 2.0], [9.0, 12.0]], 0.0, 10.0),
        vec![[0.0, 2.0], [3.0, 5.0], [9.0, 10.0]]
    );
    assert_eq!(minus(&[[0.0, 10.0]], &[[1.0, 2.0], [4.0, 5.0]]), vec![[0.0, 1.0], [2.0, 4.0], [5.0, 10.0]]);
    assert_eq!(minus(&[[0.0, 1.0], [2.0, 3.0]], &[[0.5, 2.5]]), vec![[0.0, 0.5], [2.5, 3.0]]);
    assert!(minus(&[[1.0, 2.0]], &[[0.0, 5.0]]).is_empty());
}

/// Only the job's own causes take the GPU's idle time or an account of their own, and which
/// ones is pinned here: a new finding that claims time must say so.
#[test]
fn the_findings_that_claim_an_account() {
    let claiming = |claims: &dyn Fn(FindingId) -> bool| {
        FindingId::ALL.iter().copied().filter(|id| claims(*id)).map(FindingId::as_str).collect::<Vec<_>>()
    };
    let idle = claiming(&|id| id.idle_account().is_some());
    assert_eq!(idle, ["input_bound", "process_bound", "host_bound", "transfer_bound", "host_saturated"]);
    assert_eq!(
        claiming(&|id| id.own_account(Basis::Measured).is_some()),
        ["input_bound", "transfer_bound", "periodic_stall", "gpu_shared"]
    );
    assert_eq!(claiming(&|id| id.own_account(Basis::Inferred).is_some()), ["periodic_stall", "gpu_shared"]);
    let all = claiming(&|id| id.idle_account().is_some() || id.own_account(Basis::Measured).is_some());
    assert!(all.iter().all(|n| n.parse::<FindingId>().is_ok_and(FindingId::is_trouble)), "{all:?}");
}
