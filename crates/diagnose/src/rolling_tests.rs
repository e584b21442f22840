//! The live diagnosis: what leads, each GPU's workloads, its window and its cadence.

use gpulse_model::StackBatch;

use super::*;

/// A live diagnosis of one process (PID 7, one stack), with none of its samples yet.
fn one_process() -> RollingDiagnosis {
    use gpulse_model::{ProcessRole, PyFrame, SampledProcess};
    let mut live = RollingDiagnosis::new(&[], false);
    let frame = PyFrame { file: "/w/train.py".into(), line: 3, function: "main".into(), code: None };
    let process = SampledProcess {
        pid: 7,
        role: ProcessRole::Main,
        python: "3.12.3".into(),
        command: "python train.py".into(),
        rank: None,
        gil_read: Some(true),
    };
    live.push_stacks(StackBatch {
        frames: vec![(0, frame)],
        stacks: vec![(0, vec![0])],
        processes: vec![process],
        ..StackBatch::default()
    });
    live
}

/// A sample of PID 7 running Python at `t_us`.
fn running_at(t_us: i64) -> gpulse_model::ThreadSample {
    use gpulse_model::{Gil, KernelState, ThreadSample};
    let kernel = KernelState { state: 'R', syscall: None, wchan: None, across: false };
    ThreadSample { t_us, pid: 7, stack: 0, kernel, gil: Gil::Held, clock: None }
}

/// A poll at `sec` s, then `update`; returns when it diagnosed, if it did.
fn poll(live: &mut RollingDiagnosis, sec: i64) -> Option<i64> {
    let t = sec * 1_000_000;
    let host = gpulse_model::HostSample { timestamp_us: t, ..Default::default() };
    let snapshot = gpulse_model::Snapshot { timestamp_us: t, gpus: vec![] };
    live.push_poll(Poll { snapshot: Some(snapshot), host, ..Poll::default() });
    let before = live.last_diagnosis_us;
    live.update();
    (live.last_diagnosis_us != before).then_some(t)
}

/// Polls a second apart from 1 s to `secs` s, each with `per_poll` stack samples of one
/// process spread over its second.
fn fed(secs: i64, per_poll: i64) -> RollingDiagnosis {
    let mut live = one_process();
    for sec in 1..=secs {
        let t = sec * 1_000_000;
        let samples = (0..per_poll).map(|i| running_at(t - 1_000_000 + i * 1_000_000 / per_poll)).collect();
        live.push_stacks(StackBatch { samples, ..StackBatch::default() });
        poll(&mut live, sec);
    }
    live
}

/// Between diagnoses the window keeps up to half a minute past its ten; a diagnosis reads the
/// ten minutes alone.
#[test]
fn a_diagnosis_reads_the_last_ten_minutes_alone() {
    let live = fed(641, 2);
    let oldest = |w: &RunData| w.stacks.samples.first().map(|s| s.t_us);
    // Diagnosed at 641 s (every 5 s from the warm-up's end at 31 s): the run it read begins at
    // 41 s.
    assert_eq!(live.last_diagnosis_us, Some(641_000_000));
    let read = live.run.as_ref().expect("a diagnosed run");
    assert_eq!(read.stacks.samples.first().map(|s| s.t_us), Some(41_000_000));
    assert_eq!(live.window().snapshots.first().map(|s| s.timestamp_us), Some(41_000_000));
    let mut live = fed(644, 2);
    assert_eq!(live.last_diagnosis_us, Some(641_000_000));
    assert_eq!(oldest(live.window()), Some(41_000_000), "kept past the window until the next diagnosis");
    // Past the next diagnosis' due time, it reads from 46 s.
    assert_eq!(poll(&mut live, 646), Some(646_000_000));
    assert_eq!(live.run.as_ref().unwrap().stacks.samples.first().map(|s| s.t_us), Some(46_000_000));
}

/// One process at 100 Hz is diagnosed every 5 s. A window of 250 000 stack samples, every 6.25 s
/// (25 µs a sample), which keeps it within a hundredth of a core: eight ranks at 50 Hz with six
/// workers each at 10 Hz hold 528 000 in ten minutes, diagnosed every 13 s.
#[test]
fn the_live_diagnosis_comes_less_often_as_its_window_grows() {
    let live = fed(40, 100);
    assert_eq!(live.every_us(), DIAGNOSE_EVERY_US);
    let mut live = one_process();
    let samples = (0..250_000).map(|i| running_at(1_000_000 + i * 120)).collect();
    live.push_stacks(StackBatch { samples, ..StackBatch::default() });
    let diagnosed: Vec<i64> = (1..=46).filter_map(|sec| poll(&mut live, sec)).collect();
    // The warm-up ends at 31 s; then 6.25 s apart, at the polls that follow.
    assert_eq!(diagnosed, [31_000_000, 38_000_000, 45_000_000]);
}

#[test]
fn a_finished_start_leads_only_when_nothing_else_was_found() {
    use crate::Severity;
    use FindingId::{Healthy, InputBound, Startup, Throttling};
    let f = |id: FindingId, share: Option<f64>| {
        let mut f = Finding::new(id, Severity::Warning, id.to_string());
        f.cost = share.map(|s| crate::Cost::of_ledger(s, 1.0, None, vec!["data_wait"]));
        f
    };
    // A loop 36 s in, 28 s of it spent starting: the data wait is what costs it now.
    let found = [f(Startup, Some(0.92)), f(InputBound, Some(0.86)), f(Throttling, None)];
    // Worst first, as diagnose_run sorts them.
    assert_eq!(leading_of(&found).map(|f| f.id), Some(InputBound));
    let found = [f(Startup, Some(0.2)), f(Throttling, None)];
    assert_eq!(leading_of(&found).map(|f| f.id), Some(Throttling), "any ongoing cause first");
    assert_eq!(leading_of(&[f(Startup, Some(0.2))]).map(|f| f.id), Some(Startup));
    assert_eq!(leading_of(&[f(Healthy, None)]).map(|f| f.id), None);
}

/// A GPU's samples go when other PIDs take it, and only then: not for a list that could not
/// be read, nor for another GPU's change, nor where the old PIDs stay.
#[test]
fn a_gpu_starts_again_when_other_processes_take_it() {
    use gpulse_model::{Absence, GpuSample, ProcessSample, Snapshot};
    let gpu = |i: u32, pids: Option<&[u32]>| {
        let mut g = GpuSample { gpu_index: i, ..GpuSample::default() };
        match pids {
            Some(p) => g.processes = p.iter().map(|&pid| ProcessSample { pid, ..ProcessSample::default() }).collect(),
            None => g.absent.push((Metric::Processes, Absence::NotAvailable)),
        }
        g
    };
    let mut live = RollingDiagnosis::new(&[], false).following_workloads();
    let mut t = 0;
    let mut push = |live: &mut RollingDiagnosis, gpus: Vec<GpuSample>| {
        t += 1_000_000;
        let host = gpulse_model::HostSample { timestamp_us: t, ..Default::default() };
        live.push_poll(Poll { snapshot: Some(Snapshot { timestamp_us: t, gpus }), host, ..Poll::default() });
    };
    let held = |live: &RollingDiagnosis, i: u32| {
        live.window().snapshots.iter().filter(|s| s.gpus.iter().any(|g| g.gpu_index == i)).count()
    };
    push(&mut live, vec![gpu(0, Some(&[10])), gpu(1, Some(&[20]))]);
    push(&mut live, vec![gpu(0, None), gpu(1, Some(&[20, 21]))]);
    push(&mut live, vec![gpu(0, Some(&[10])), gpu(1, Some(&[21]))]);
    assert_eq!((held(&live, 0), held(&live, 1)), (3, 3), "unread, joined, one left: the same job");
    push(&mut live, vec![gpu(0, Some(&[11])), gpu(1, Some(&[21]))]);
    assert_eq!((held(&live, 0), held(&live, 1)), (1, 4), "GPU 0 starts again with its new job");
    assert!(live.warming_up(Some(0)) && !live.warming_up(Some(1)) && !live.warming_up(None));
    push(&mut live, vec![gpu(0, Some(&[])), gpu(1, Some(&[21]))]);
    assert_eq!(held(&live, 0), 1, "and again when it is left idle");
    // GPU 1: a holder the diagnosis found idle stays while job 21 gives way to job 22.
    push(&mut live, vec![gpu(0, Some(&[])), gpu(1, Some(&[21, 5]))]);
    live.workloads.as_mut().unwrap().idle.insert((1, 5), None);
    push(&mut live, vec![gpu(0, Some(&[])), gpu(1, Some(&[21, 5]))]);
    let before = held(&live, 1);
    push(&mut live, vec![gpu(0, Some(&[])), gpu(1, Some(&[22, 5]))]);
    assert_eq!((before, held(&live, 1)), (7, 1), "the holder is no part of either job");
    push(&mut live, vec![gpu(0, Some(&[])), gpu(1, Some(&[22, 5]))]);
    push(&mut live, vec![gpu(0, Some(&[])), gpu(1, Some(&[5]))]);
    assert_eq!(held(&live, 1), 1, "the job left the holder alone: a start again");
    assert!(live.idle_processes().contains(&(1, 5)), "still known idle");
    push(&mut live, vec![gpu(0, Some(&[])), gpu(1, Some(&[]))]);
    assert!(live.idle_processes().is_empty(), "gone with its process");
    let mut plain = RollingDiagnosis::new(&[], false);
    push(&mut plain, vec![gpu(0, Some(&[10]))]);
    push(&mut plain, vec![gpu(0, Some(&[11]))]);
    assert_eq!(held(&plain, 0), 2, "a job's own diagnosis keeps its whole window");
}

/// Two GPUs busy at 90 %; at 61 s another job starts on GPU 0 at 10 %. While it warms up,
/// GPU 0 is left out of the machine's findings too (no imbalance from a start); after, the
/// imbalance of the two jobs is found.
#[test]
fn a_gpu_warming_up_sits_out_the_machines_findings() {
    use gpulse_model::{GpuSample, ProcessSample, Snapshot};
    let gpu = |i: u32, pid: u32, util: u32| GpuSample {
        gpu_index: i,
        util_gpu_pct: Some(util),
        memory_used_bytes: Some(20 << 30),
        memory_total_bytes: Some(140 << 30),
        processes: vec![ProcessSample { pid, used_memory_bytes: Some(20 << 30), ..ProcessSample::default() }],
        ..GpuSample::default()
    };
    let devices: Vec<DeviceInfo> = (0..2).map(|index| DeviceInfo { index, ..DeviceInfo::default() }).collect();
    let mut live = RollingDiagnosis::new(&devices, false).following_workloads();
    let mut seen = Vec::new();
    for s in 1..=120i64 {
        let t = s * 1_000_000;
        let g0 = if s <= 60 { gpu(0, 10, 90) } else { gpu(0, 11, 10) };
        let host = gpulse_model::HostSample { timestamp_us: t, ..Default::default() };
        let snap = Snapshot { timestamp_us: t, gpus: vec![g0, gpu(1, 20, 90)] };
        live.push_poll(Poll { snapshot: Some(snap), host, ..Poll::default() });
        live.update();
        seen.push((s, live.current().iter().any(|f| f.id == FindingId::GpuImbalance)));
    }
    let imbalanced = |from: i64, to: i64| seen.iter().filter(|(s, _)| (from..=to).contains(s)).any(|(_, i)| *i);
    assert!(!imbalanced(1, 60), "both at 90 %");
    assert!(!imbalanced(61, 90), "GPU 0's new job warms up");
    assert!(
        imbalanced(96, 120),
        "then 10 % against 90 % is found: {:?}",
        live.current().iter().map(|f| f.id).collect::<Vec<_>>()
    );
}

/// A holder found idle by the diagnosis itself stays known while its GPU warms up after the
/// job beside it leaves, and stops being idle the moment it works.
#[test]
fn a_holder_found_idle_stays_known_until_it_works() {
    use gpulse_model::{GpuSample, ProcessSample, Snapshot};
    let proc = |pid: u32, gib: u64, sm: u32| ProcessSample {
        pid,
        used_memory_bytes: Some(gib << 30),
        sm_util_pct: Some(sm),
        mem_util_pct: Some(0),
        ..ProcessSample::default()
    };
    let devices = [DeviceInfo { index: 0, ..DeviceInfo::default() }];
    let mut live = RollingDiagnosis::new(&devices, false).following_workloads();
    let mut known = Vec::new();
    for s in 1..=110i64 {
        let t = s * 1_000_000;
        let mut processes = vec![proc(5, 20, if s > 100 { 50 } else { 0 })];
        if s <= 60 {
            processes.push(proc(10, 10, 90));
        }
        let g = GpuSample {
            gpu_index: 0,
            util_gpu_pct: Some(if s <= 60 { 90 } else { 0 }),
            memory_used_bytes: Some(30 << 30),
            memory_total_bytes: Some(140 << 30),
            processes,
            ..GpuSample::default()
        };
        let host = gpulse_model::HostSample { timestamp_us: t, ..Default::default() };
        live.push_poll(Poll { snapshot: Some(Snapshot { timestamp_us: t, gpus: vec![g] }), host, ..Poll::default() });
        live.update();
        known.push((s, live.idle_processes().contains(&(0, 5))));
    }
    let all = |from: i64, to: i64| known.iter().filter(|(s, _)| (from..=to).contains(s)).all(|(_, k)| *k);
    assert!(all(40, 60), "found idle beside the job: {known:?}");
    assert!(all(61, 100), "known through the warm-up after the job left, and after");
    assert!(!known.iter().any(|(s, k)| *s > 100 && *k), "it works from 101 s");
}

#[test]
fn each_gpus_finding_is_written_once() {
    let mut live = RollingDiagnosis::new(&[], false);
    let on = |gpu: u32| Finding::new(FindingId::InputBound, crate::Severity::Warning, String::new()).on_gpu(gpu);
    let ids = |f: Vec<Finding>| f.iter().map(|f| f.gpu.unwrap()).collect::<Vec<_>>();
    assert_eq!(ids(live.worth_writing(&[on(0)])), [0]);
    assert_eq!(ids(live.worth_writing(&[on(0), on(1)])), [1], "GPU 1's is news, GPU 0's is not");
    assert!(live.worth_writing(&[on(0), on(1)]).is_empty());
}
