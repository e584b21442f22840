use std::sync::Arc;

use gpulse_model::{Gil, KernelState, ProcessRole, PyFrame, SampledProcess, Stacks, ThreadSample};

use super::*;
use crate::rules::testing;
use crate::{AccountKind, FindingId, Severity};

pub(super) fn frame(file: &str, line: u32, function: &str, code: &str) -> PyFrame {
    PyFrame { file: file.into(), line, function: function.into(), code: Some(code.into()) }
}

/// Stacks: 0 syncs at train.py:41, 1 computes metrics in numpy called from train.py:52, 2
/// sleeps at train.py:60; 3 runs the model's forward in torch; 4 is in `F.interpolate` with the
/// GIL released; 5 syncs a log file to storage at train.py:70.
pub(super) fn stacks() -> Stacks {
    let main = frame("/w/train.py", 80, "main", "train(model)");
    let frames = vec![
        main,
        frame("/w/train.py", 41, "train", "total += loss.item()"),
        frame("/w/train.py", 52, "train", "acc = score(preds)"),
        frame("/v/site-packages/numpy/core/fromnumeric.py", 88, "_wrapreduction", "return ufunc.reduce(obj)"),
        frame("/w/train.py", 60, "train", "time.sleep(0.01)"),
        frame("/w/train.py", 35, "train", "out = model(x)"),
        frame("/v/site-packages/torch/nn/modules/module.py", 1750, "_call_impl", "return forward_call(*args)"),
        frame("/w/train.py", 44, "train", "big = F.interpolate(img, scale_factor=2)"),
        frame(
            "/v/site-packages/torch/nn/functional.py",
            4700,
            "interpolate",
            "return torch._C._nn.upsample_bilinear2d(...)",
        ),
        frame("/w/train.py", 70, "train", "log.flush(); os.fsync(log.fileno())"),
    ];
    Stacks {
        frames,
        stacks: vec![vec![0, 1], vec![0, 2, 3], vec![0, 4], vec![0, 5, 6], vec![0, 7, 8], vec![0, 9]],
        processes: vec![SampledProcess {
            gil_read: None,
            pid: 7,
            role: ProcessRole::Main,
            python: "3.11.7".into(),
            command: "python train.py".into(),
            rank: None,
        }],
        ..Stacks::default()
    }
}

pub(super) fn sample(t_s: f64, stack: u32) -> ThreadSample {
    let (state, syscall, wchan, gil) = match stack {
        0 | 4 => ('R', None, None, Gil::Free),
        1 | 3 => ('R', None, None, Gil::Held),
        _ => ('S', Some(230), Some("hrtimer_nanosleep".to_owned()), Gil::Free),
    };
    ThreadSample {
        clock: None,
        t_us: (t_s * 1e6) as i64,
        pid: 7,
        stack,
        kernel: KernelState { state, syscall, wchan: wchan.map(Into::into), across: false },
        gil,
    }
}

/// 100 s, polled each second; the loop's steps marked from 10 to 90 s, its waits timed (none);
/// GPU-Util `util` % in the loop. The main thread sampled at 100 Hz: in each second of the loop,
/// `mix` gives how many of the 100 samples are in each stack, in order.
pub(super) fn run(util: f64, mix: &[(u32, usize)]) -> Run {
    let u: Vec<f64> = (0..=100).map(|t| if (11..=90).contains(&t) { util } else { 0.0 }).collect();
    let g = testing::with_processes(testing::gpu(0, 1.0, &u), vec![testing::holder(7, 1.0)]);
    let mut r = testing::run(vec![g]);
    r.steps = Some(crate::Steps { waited_s: Some(0.0), ..testing::steps(7, 80, [10.0, 90.0]) });
    let mut st = stacks();
    for sec in 10..90 {
        let mut i = 0;
        for &(stack, n) in mix {
            for _ in 0..n {
                st.samples.push(sample(sec as f64 + i as f64 / 100.0 + 0.005, stack));
                i += 1;
            }
        }
    }
    r.stacks = Arc::new(st);
    r
}

#[test]
fn the_host_side_time_is_split_by_what_the_main_thread_did() {
    // GPU-Util 40 %: the loop's idle time is what the ledger leaves of its 80 s after the GPU's
    // work. The main thread syncs 40 % of each second (the GPU works then), computes numpy
    // metrics 30 % and sleeps 30 %: half the idle time each.
    let r = run(40.0, &[(0, 40), (1, 30), (2, 30)]);
    let (findings, ledger) = crate::diagnose_with_ledger(&r);
    let secs = |a: AccountKind| ledger.seconds(a);
    let idle = 80.0 - secs(AccountKind::GpuWork);
    assert!(idle > 40.0, "{ledger:#?}");
    assert!((secs(AccountKind::MainThread(ThreadState::Python)) - idle / 2.0).abs() < 0.5, "{ledger:#?}");
    assert!((secs(AccountKind::MainThread(ThreadState::Sleep)) - idle / 2.0).abs() < 0.5, "{ledger:#?}");
    assert_eq!(secs(AccountKind::HostSide), 0.0, "the split replaces the lump");
    assert_eq!(
        secs(AccountKind::MainThread(ThreadState::GpuSync)),
        0.0,
        "waiting on the device is not the GPU's idle time"
    );
    let sum: f64 = ledger.accounts.iter().map(|a| a.seconds).sum();
    assert!((sum - ledger.wall_s).abs() < 0.01, "every second in one account: {ledger:#?}");
    let ids = testing::ids(&findings);
    assert!(!ids.contains(&"host_bound") && !ids.contains(&"process_bound"), "{ids:?}");
    let python = findings.iter().find(|f| f.id == FindingId::HostPython).expect("main_thread_python");
    assert_eq!(python.all_evidence()["site"], "w/train.py:52 train");
    assert_eq!(python.all_evidence()["domain"], "host_math");
    assert_eq!(python.evidence["gpu_drains_at"], "w/train.py:41 train");
    // The line's function, all its lines together, and its caller.
    assert_eq!(python.evidence["function"], "w/train.py train");
    assert_eq!(python.evidence["called_from"], "w/train.py:80 main");
    let (f, l) = (python.evidence["function_share"].as_f64().unwrap(), python.evidence["line_share"].as_f64().unwrap());
    assert!(f >= l && (l - python.wall_share().unwrap()).abs() < 0.01, "{f} {l}: {python:?}");
    // numpy in the step: moved to the DataLoader's workers where it prepares the batch, to the
    // GPU where it scores it.
    assert!(python.advice[0].contains("the DataLoader's workers"), "{:?}", python.advice);
    assert!(python.advice[1].contains("metric on the GPU"), "{:?}", python.advice);
    assert!(python.advice.iter().any(|a| a.contains(".item() every N steps")), "{:?}", python.advice);
    // The same drain at an explicit synchronize: no `.item()` to take out, the synchronize is.
    let mut r = run(40.0, &[(0, 40), (1, 30), (2, 30)]);
    let mut st = (*r.stacks).clone();
    let at = st.frames.iter().position(|f| f.line == 41).unwrap();
    st.frames[at].code = Some("torch.cuda.synchronize()".into());
    r.stacks = Arc::new(st);
    let (explicit, _) = crate::diagnose_with_ledger(&r);
    let python2 = explicit.iter().find(|f| f.id == FindingId::HostPython).expect("main_thread_python");
    assert!(!python2.advice.iter().any(|a| a.contains(".item()")), "{:?}", python2.advice);
    assert!(python2.advice.iter().any(|a| a.contains("an explicit synchronize: take it out")), "{:?}", python2.advice);
    let sleep = findings.iter().find(|f| f.id == FindingId::SleepInLoop).expect("sleep_in_loop");
    assert_eq!(sleep.all_evidence()["site"], "w/train.py:60 train");
    let own = sleep.cost.as_ref().and_then(|c| c.loop_share).unwrap();
    assert!((own - idle / 2.0 / 80.0).abs() < 0.01, "of the 80 s loop: {sleep:?}");
    assert!((sleep.wall_share().unwrap() - idle / 2.0 / 100.0).abs() < 0.01, "of the 100 s run: {sleep:?}");
    assert!(sleep.title.contains(&format!("{:.0}% of the wall time", idle / 2.0)), "{}", sleep.title);
    assert_eq!(sleep.severity, Severity::Warning);
}

#[test]
fn a_gpu_bound_loop_gets_no_host_side_finding() {
    // GPU-Util 99 %, the main thread launching the model's forward and syncing: the 1 % idle is
    // under a twentieth of the wall time.
    let r = run(99.0, &[(3, 60), (0, 40)]);
    let (findings, ledger) = crate::diagnose_with_ledger(&r);
    let host: Vec<&str> = findings
        .iter()
        .filter(|f| matches!(f.id, FindingId::HostPython | FindingId::SleepInLoop | FindingId::HostBound))
        .map(|f| f.id.as_str())
        .collect();
    assert!(host.is_empty(), "{host:?}");
    assert!(ledger.seconds(AccountKind::MainThread(ThreadState::Python)) < 1.0, "{ledger:#?}");
}

#[test]
fn too_few_samples_leave_the_lump_as_it_was() {
    let mut r = run(40.0, &[(1, 50), (2, 50)]);
    let mut st = (*r.stacks).clone();
    st.samples.truncate(10);
    r.stacks = Arc::new(st);
    let (_, ledger) = crate::diagnose_with_ledger(&r);
    assert!(ledger.seconds(AccountKind::HostSide) > 40.0, "{ledger:#?}");
    assert_eq!(ledger.seconds(AccountKind::MainThread(ThreadState::Python)), 0.0);
}

#[test]
fn a_profile_gives_each_state_its_share_and_sites() {
    let r = run(40.0, &[(0, 40), (1, 30), (2, 30)]);
    let p = profiles(&r);
    assert_eq!(p.len(), 1);
    assert_eq!((p[0].pid, p[0].role, p[0].samples), (7, ProcessRole::Main, 8000));
    let share = |s: ThreadState| p[0].states.iter().find(|x| x.state == s).map_or(0.0, |x| x.share);
    assert!((share(ThreadState::Python) - 0.3).abs() < 0.01, "{p:#?}");
    assert!((share(ThreadState::GpuSync) - 0.4).abs() < 0.01, "{p:#?}");
    assert!((share(ThreadState::Sleep) - 0.3).abs() < 0.01, "{p:#?}");
    assert_eq!(p[0].states[0].state, ThreadState::GpuSync, "largest first");
    assert_eq!(p[0].states[0].sites[0].site, "w/train.py:41 train");
    assert!((p[0].rate_hz - 100.0).abs() < 1.5, "{}", p[0].rate_hz);
}

/// A loop waiting for its DataLoader's result queue is named so, and the workers' own samples
/// name the line of `__getitem__` to speed up.
#[test]
fn waiting_for_the_workers_names_the_workers_line() {
    let mut r = run(10.0, &[(0, 100)]);
    let mut st = (*r.stacks).clone();
    let n = st.frames.len() as u32;
    st.frames.push(frame(
        "/v/site-packages/torch/utils/data/dataloader.py",
        1300,
        "_get_data",
        "success, data = self._try_get_data()",
    ));
    st.frames.push(frame(
        "/usr/lib/python3.11/multiprocessing/connection.py",
        430,
        "_recv",
        "chunk = read(handle, remaining)",
    ));
    st.frames.push(frame(
        "/v/site-packages/torch/utils/data/_utils/worker.py",
        349,
        "_worker_loop",
        "data = fetcher.fetch(index)",
    ));
    st.frames.push(frame("/w/data.py", 21, "__getitem__", "img = decode(path)"));
    st.stacks.push(vec![0, n, n + 1]);
    st.stacks.push(vec![n + 2, n + 3]);
    let (wait, work) = (st.stacks.len() as u32 - 2, st.stacks.len() as u32 - 1);
    st.processes.push(SampledProcess {
        gil_read: None,
        pid: 8,
        role: ProcessRole::Worker,
        python: "3.11.7".into(),
        command: "python train.py".into(),
        rank: None,
    });
    for s in &mut st.samples {
        s.stack = wait;
        s.kernel = KernelState { state: 'S', syscall: Some(0), wchan: Some("anon_pipe_read".into()), across: false };
        s.gil = Gil::Free;
    }
    for i in 0..400 {
        st.samples.push(ThreadSample {
            clock: None,
            t_us: 10_000_000 + i * 200_000,
            pid: 8,
            stack: work,
            kernel: KernelState { state: 'R', syscall: None, wchan: None, across: false },
            gil: Gil::Held,
        });
    }
    st.samples.sort_by_key(|s| s.t_us);
    r.stacks = Arc::new(st);
    let (findings, _) = crate::diagnose_with_ledger(&r);
    let ipc = findings.iter().find(|f| f.id == FindingId::IpcWait).unwrap_or_else(|| panic!("{findings:#?}"));
    assert_eq!(ipc.all_evidence()["domain"], "dataloader");
    assert_eq!(ipc.evidence["worker_site"], "w/data.py:21 __getitem__");
    assert!(ipc.advice[0].contains("running Python on the host at w/data.py:21 __getitem__"), "{:?}", ipc.advice);
    assert_eq!(findings[0].id, FindingId::IpcWait, "the first finding: {findings:#?}");
}

/// Recompiling inside the loop is one account and one finding, whether the main thread traced
/// Python or waited for its compile workers.
#[test]
fn a_recompile_is_one_mechanism_whatever_the_thread_waits_on() {
    let mut r = run(5.0, &[(0, 100)]);
    let mut st = (*r.stacks).clone();
    let n = st.frames.len() as u32;
    st.frames.push(frame("/v/site-packages/torch/_dynamo/eval_frame.py", 600, "_fn", "return fn(*args, **kwargs)"));
    st.frames.push(frame(
        "/v/site-packages/torch/_inductor/async_compile.py",
        300,
        "wait",
        "self._wait_futures(scope)",
    ));
    st.frames.push(frame(
        "/usr/lib/python3.11/concurrent/futures/_base.py",
        450,
        "result",
        "self._condition.wait(timeout)",
    ));
    st.frames.push(frame(
        "/v/site-packages/torch/_dynamo/symbolic_convert.py",
        900,
        "InstructionTranslator.step",
        "self.dispatch_table[inst.opcode](self, inst)",
    ));
    st.stacks.push(vec![0, n, n + 3]);
    st.stacks.push(vec![0, n, n + 1, n + 2]);
    let (tracing, waiting) = (st.stacks.len() as u32 - 2, st.stacks.len() as u32 - 1);
    for (i, s) in st.samples.iter_mut().enumerate() {
        if i % 2 == 0 {
            s.stack = tracing;
            s.kernel = KernelState { state: 'R', syscall: None, wchan: None, across: false };
            s.gil = Gil::Held;
        } else {
            s.stack = waiting;
            s.kernel =
                KernelState { state: 'S', syscall: Some(202), wchan: Some("futex_wait_queue".into()), across: false };
            s.gil = Gil::Free;
        }
    }
    r.stacks = Arc::new(st);
    let (findings, ledger) = crate::diagnose_with_ledger(&r);
    let host: Vec<&crate::Finding> =
        findings.iter().filter(|f| f.id.is_trouble() && f.evidence.contains_key("state")).collect();
    assert_eq!(host.len(), 1, "{findings:#?}");
    assert_eq!(host[0].all_evidence()["domain"], "compile");
    assert!(host[0].title.starts_with("The main thread recompiling (torch.compile)"), "{}", host[0].title);
    assert!(host[0].advice[0].contains("mark_dynamic"), "{:?}", host[0].advice);
    assert_eq!(ledger.seconds(AccountKind::MainThread(ThreadState::Lock)), 0.0, "{ledger:#?}");
}

#[test]
fn a_saturated_hosts_idle_time_is_split_and_the_saturation_claims_none() {
    // GPU-Util 40 % on a host other processes keep 99 % busy; the main thread computes numpy
    // metrics half of each second and sleeps the other half.
    let mut r = run(40.0, &[(1, 50), (2, 50)]);
    r.cores = 16;
    r.host_cpu = (0..=100).map(|t| (f64::from(t), 99.0)).collect();
    r.tree_cpu = (0..=100).map(|t| (f64::from(t), 50.0)).collect();
    let (findings, ledger) = crate::diagnose_with_ledger(&r);
    assert_eq!(ledger.seconds(AccountKind::HostSaturated), 0.0, "{ledger:#?}");
    let idle = 80.0 - ledger.seconds(AccountKind::GpuWork);
    for state in [ThreadState::Python, ThreadState::Sleep] {
        let s = ledger.seconds(AccountKind::MainThread(state));
        assert!((s - idle / 2.0).abs() < 0.5, "{state:?}: {ledger:#?}");
    }
    let saturated = findings.iter().find(|f| f.id == FindingId::HostSaturated).expect("a fact of the run");
    assert_eq!(saturated.severity, Severity::Info);
    assert_eq!(saturated.cost, None, "{saturated:?}");
    // Running, as the kernel says it, is running or waiting for a core: the Python part says so.
    // A woken sleeper's wait for a core is its sleep's, as the loop's own clock counts it.
    let python = findings.iter().find(|f| f.id == FindingId::HostPython).expect("main_thread_python");
    assert!(python.limits.iter().any(|l| l.contains("waiting for a core")), "{:?}", python.limits);
    assert!(python.advice.iter().any(|a| a.contains("free cores")), "{:?}", python.advice);
    let sleep = findings.iter().find(|f| f.id == FindingId::SleepInLoop).expect("sleep_in_loop");
    assert!(sleep.limits.iter().all(|l| !l.contains("core")), "{:?}", sleep.limits);
}

/// Two sites of one mechanism are two causes: each finding costs its own account, and the
/// headline, its title and its ledger line print one number.
#[test]
fn two_findings_of_one_id_each_cost_their_own_account() {
    // GPU-Util 10 %: numpy metrics at train.py:52 take 60 of each 100 samples, the model's
    // forward in torch at train.py:35 takes 30, a sleep 10.
    let r = run(10.0, &[(1, 60), (3, 30), (2, 10)]);
    let (findings, ledger) = crate::diagnose_with_ledger(&r);
    let python: Vec<&crate::Finding> = findings.iter().filter(|f| f.id == FindingId::HostPython).collect();
    assert_eq!(python.len(), 2, "{findings:#?}");
    for f in &python {
        let site = f.facts.site.as_deref().unwrap();
        let account = ledger.accounts.iter().find(|a| a.label.ends_with(site)).expect("its account");
        let cost = f.cost.as_ref().unwrap();
        assert_eq!(cost.wall_share, Some(account.share), "{site}: {cost:?} against {account:?}");
        assert_eq!(cost.seconds, Some(account.seconds), "{site}");
        assert!(f.title.contains(&format!("{} of the wall time", crate::pct(account.share))), "{}", f.title);
    }
    let (lead, other) = (python[0], python[1]);
    assert!(lead.wall_share() > other.wall_share(), "ranked by their own cost: {python:#?}");
    assert_eq!(lead.all_evidence()["site"], "w/train.py:52 train");
    // The GPU's work (10 of each second's 100 samples' time) goes beside the launches first:
    // the forward keeps 20 of its 30 as idle time, the metrics all 60.
    let ratio = lead.cost.as_ref().unwrap().seconds.unwrap() / other.cost.as_ref().unwrap().seconds.unwrap();
    assert!((ratio - 3.0).abs() < 0.1, "{ratio}");
    let headline = crate::summary(&findings).unwrap();
    let wall = crate::pct(lead.wall_share().unwrap());
    let of_loop = crate::pct(lead.cost.as_ref().unwrap().loop_share.unwrap());
    assert!(headline.contains(&format!("cost about {wall} of the wall time ({of_loop} of the loop's)")), "{headline}");
    assert!(headline.contains("train.py:52"), "{headline}");
}

/// Of a whole machine, a process unsampled for a while is forgotten, its series with it.
#[test]
fn a_quiet_process_is_forgotten_and_a_sampled_one_kept() {
    let mut t = super::Totals::default();
    for (pid, at_s) in [(1u32, 0i64), (2, 290), (3, 400)] {
        t.now.insert(pid, (at_s * 1_000_000, ThreadState::Sleep, None));
        t.seconds.insert((pid, ThreadState::Sleep), 1.0);
        t.ranks.insert(pid, pid);
    }
    t.forget_quiet(300_000_000);
    assert_eq!(t.now.keys().copied().collect::<Vec<_>>(), [2, 3]);
    assert_eq!(t.seconds.len(), 2);
    assert!(!t.ranks.contains_key(&1));
}

/// The live totals read a stack that runs with the GIL free as native code, as the diagnosis
/// does: `/metrics` and `top` say what `diagnose` says.
#[test]
fn the_live_totals_tell_native_code_as_the_diagnosis_does() {
    let st = stacks();
    let mut samples = vec![sample(0.0, 1)];
    samples.extend((1..=40).map(|i| ThreadSample { gil: Gil::Free, ..sample(f64::from(i) * 0.02, 3) }));
    let mut t = super::Totals::default();
    t.add(&st, &samples);
    let native = t.seconds.get(&(7, ThreadState::Native)).copied().unwrap_or(0.0);
    let python = t.seconds.get(&(7, ThreadState::Python)).copied().unwrap_or(0.0);
    assert!(native > 0.3 && python <= 0.03, "native {native}, python {python}: {:?}", t.seconds);
    assert_eq!(t.now[&7].1, ThreadState::Native);
}

/// A sample stands for the gaps around it: a start-up read first at 4 Hz, then faster as the
/// sampler warms up, keeps each phase's own time, while samples whose next read comes later by
/// their state (a running stack is slower to copy) stand for the same time.
#[test]
fn samples_stand_for_the_gaps_around_them() {
    // A real start-up's sample times (s): an import that ran to 3.50 s by the job's own clock,
    // then 2.0 s of its own code, then the loop's sleeps (`tests/cli/thread_clocks.rs`'s STARTUP).
    let t = [
        0.0, 0.0146, 0.2637, 0.4961, 0.6961, 0.8873, 1.1388, 1.3630, 1.5963, 1.7965, 1.9736, 2.1763, 2.3193, 2.5157,
        2.6425, 2.7899, 2.9536, 3.0892, 3.1979, 3.3018, 3.4363, 3.5458, 3.6466, 3.7275, 3.8387, 3.9341, 4.0036, 4.0778,
        4.1432, 4.2189, 4.2918, 4.3616, 4.4318, 4.4917, 4.5617, 4.6149, 4.6674, 4.7243, 4.7804, 4.8362, 4.8766, 4.9204,
        4.9727, 5.0105, 5.0450, 5.0785, 5.1221, 5.1535, 5.1834, 5.2235, 5.2567, 5.2910, 5.3183, 5.3473, 5.3779, 5.4122,
        5.4431, 5.4739, 5.4978, 5.5210, 5.5503, 5.5770, 5.6001, 5.6220, 5.6489, 5.6767, 5.7048, 5.7320, 5.7579, 5.7797,
        5.8080, 5.8328, 5.8609, 5.8838, 5.9056, 5.9262, 5.9520, 5.9796, 6.0071,
    ];
    let w = super::weights(&t).0;
    let import: f64 = w[..21].iter().sum();
    let build: f64 = w[21..60].iter().sum();
    assert!((import - 3.5).abs() < 0.1 && (build - 2.0).abs() < 0.1, "import {import:.2} s, build {build:.2} s");
    // Alternating 30 ms and 10 ms gaps: every sample 20 ms.
    let t: Vec<f64> = (0..100).map(|i| f64::from(i / 2) * 0.04 + if i % 2 == 1 { 0.03 } else { 0.0 }).collect();
    let w = super::weights(&t).0;
    assert!(w[10..90].iter().all(|x| (x - 0.02).abs() < 0.0015), "{:?}", &w[10..20]);
}

/// A pause in sampling counts for the wait its thread's clocks witness: blocked on one line at
/// both ends and off the CPU between, the thread waited there (a rank in its barrier while the
/// sampler went without a core); where the clocks say it ran, or they are missing, the pause is
/// capped as before.
#[test]
fn a_pause_the_clocks_witness_is_the_waits_time() {
    use gpulse_model::ThreadClock;
    // Samples every 20 ms from 0 to 2 s, in stack 2 (sleeping), then none until 3 s.
    let mut t: Vec<f64> = (0..=100).map(|i| f64::from(i) * 0.02).collect();
    t.push(3.0);
    let with = |cpu_in_pause_us: Option<u64>| -> Vec<ThreadSample> {
        t.iter()
            .enumerate()
            .map(|(i, ts)| {
                let cpu_us = 100 * i as u64 + if i == t.len() - 1 { cpu_in_pause_us.unwrap_or(0) } else { 0 };
                ThreadSample { clock: cpu_in_pause_us.map(|_| ThreadClock { cpu_us, wait_us: 0 }), ..sample(*ts, 2) }
            })
            .collect()
    };
    let weighed = |samples: &[ThreadSample]| -> f64 {
        let refs: Vec<&ThreadSample> = samples.iter().collect();
        let (mut w, capped) = super::weights(&t);
        super::witnessed_pauses(&refs, &t, &capped, &mut w);
        w.iter().sum()
    };
    // Off the CPU through the pause (0.1 ms of it running): the pause is the sleep's, whole.
    let whole = weighed(&with(Some(100)));
    assert!((whole - 3.02).abs() < 0.01, "{whole:.3} s");
    // Running 0.5 s of it, or no clocks: capped at twice the typical gap.
    for capped in [weighed(&with(Some(500_000))), weighed(&with(None))] {
        assert!((capped - 2.06).abs() < 0.01, "{capped:.3} s");
    }
    // Live, the pause counts whole as well: 0.5 s more than where it is capped at half a second.
    let live = |samples: Vec<ThreadSample>| -> f64 {
        let last = samples[samples.len() - 1].clone();
        let more = (1..=40).map(|i| ThreadSample { t_us: last.t_us + 20_000 * i, ..last.clone() });
        let samples: Vec<ThreadSample> = samples.iter().cloned().chain(more).collect();
        let mut totals = super::Totals::default();
        totals.add(&stacks(), &samples);
        totals.seconds.values().sum()
    };
    let (whole, capped) = (live(with(Some(100))), live(with(None)));
    assert!((whole - capped - 0.5).abs() < 0.01, "live: {whole:.3} s against {capped:.3} s");
}

/// A loop blocked in native calls (CUDA launches) whose Python between them is never caught:
/// where the sampler says its reader sees the GIL, a free GIL is free, live and in the
/// diagnosis; a recording from before it said so, or a reader blind to the GIL, keeps to Python
/// until a sample shows the thread holding it.
#[test]
fn a_free_gil_is_trusted_where_the_reader_sees_the_gil() {
    for (gil_read, want) in
        [(Some(true), ThreadState::Native), (None, ThreadState::Python), (Some(false), ThreadState::Python)]
    {
        let mut st = stacks();
        st.processes[0].gil_read = gil_read;
        let samples: Vec<ThreadSample> =
            (0..40).map(|i| ThreadSample { gil: Gil::Free, ..sample(f64::from(i) * 0.02, 3) }).collect();
        let mut t = super::Totals::default();
        t.add(&st, &samples);
        assert_eq!(t.now[&7].1, want, "{gil_read:?}: {:?}", t.seconds);
        st.samples = samples;
        let mut r = testing::run(vec![]);
        r.stacks = Arc::new(st);
        let pts = points(&r, 7);
        assert!(pts.iter().all(|p| p.class.state == want), "{gil_read:?}: {:?}", pts[0].class);
    }
}

/// A process first sampled while importing is settled by all its samples: `mp.spawn`'s parent,
/// waiting in `join` the rest of the run, is no process of the job; a process whose samples
/// mostly run a DataLoader worker's loop is a worker.
#[test]
fn roles_are_settled_by_every_sample_not_the_first() {
    let frames = vec![
        frame("/w/train.py", 1, "<module>", "import torch"),
        frame(
            "/v/site-packages/torch/multiprocessing/spawn.py",
            200,
            "join",
            "ready = multiprocessing.connection.wait(",
        ),
        frame("/v/site-packages/torch/utils/data/_utils/worker.py", 300, "_worker_loop", "r = index_queue.get("),
    ];
    let proc = |pid| SampledProcess {
        gil_read: None,
        pid,
        role: ProcessRole::Main,
        python: "3.12".into(),
        command: String::new(),
        rank: None,
    };
    let mut st = Stacks {
        frames,
        stacks: vec![vec![0], vec![0, 1], vec![2]],
        processes: vec![proc(1), proc(2), proc(3)],
        ..Stacks::default()
    };
    let at = |pid, i: u32, stack| ThreadSample { pid, stack, ..sample(f64::from(i) * 0.02, 0) };
    for i in 0..30 {
        st.samples.push(at(1, i, if i < 5 { 0 } else { 1 }));
        st.samples.push(at(2, i, if i < 5 { 0 } else { 2 }));
        st.samples.push(at(3, i, 0));
    }
    let s = crate::run::settled(st.clone());
    let roles: Vec<(u32, ProcessRole)> = s.processes.iter().map(|p| (p.pid, p.role)).collect();
    assert_eq!(roles, [(2, ProcessRole::Worker), (3, ProcessRole::Main)]);
    assert!(s.samples.iter().all(|x| x.pid != 1));
}

/// Inside torch's own code, Python leading is launching the GPU's work: one cause through the
/// forward, told so. Native code leading inside a functional op may be CPU work on CPU tensors
/// (`F.interpolate` on an image): told as native code, with advice for both readings.
#[test]
fn launching_is_said_where_torchs_python_leads() {
    let title_and_advice = |mix: &[(u32, usize)]| {
        let (findings, _) = crate::diagnose_with_ledger(&run(10.0, mix));
        let f = findings.iter().find(|f| f.facts.site.is_some()).expect("a main-thread finding").clone();
        (f.title.clone(), f.advice.join(" | "))
    };
    let (title, advice) = title_and_advice(&[(3, 60), (4, 30), (2, 10)]);
    assert!(title.contains("launching the GPU's work at w/train.py:35 train"), "{title}");
    assert!(advice.contains("CUDA graphs"), "{advice}");
    let (title, advice) = title_and_advice(&[(4, 60), (3, 30), (2, 10)]);
    assert!(!title.contains("launching") && title.contains("native code"), "{title}");
    assert!(advice.contains("CPU tensors") && advice.contains("CUDA graphs"), "{advice}");
}

/// A step mostly in `gc.collect()`, sampled slowly as the loop begins, shows its first backward
/// pass late: the loop began at the earliest sample before it whose innermost frame and line
/// come again after it, past a first forward pass's few that never do, and before set-up's. An
/// import inside the loop does not make start-up's imports the loop's: their lines differ.
#[test]
fn the_loop_begins_where_its_frames_begin_to_recur() {
    let (setup, gc, backward, once) = (Some((0, 20)), Some((1, 40)), Some((2, 41)), Some((3, 41)));
    let (import_at_start, import_in_loop) = (Some((4, 10)), Some((4, 42)));
    let entry =
        |keys: &[Option<(u32, u32)>]| crate::run::loop_entry(keys, keys.iter().position(|k| *k == backward).unwrap());
    assert_eq!(entry(&[setup, setup, gc, gc, gc, backward, gc, gc, backward, gc]), 2);
    // Three samples in a row of the first step's own frames are passed; a fourth ends the loop.
    assert_eq!(entry(&[setup, gc, once, once, once, gc, backward, gc]), 1);
    assert_eq!(entry(&[gc, setup, once, once, once, gc, backward, gc]), 5);
    assert_eq!(entry(&[gc, None, None, None, None, gc, backward, gc]), 5);
    // Nothing before the first backward pass comes again: it begins the loop.
    assert_eq!(entry(&[setup, setup, backward, gc]), 2);
    let imports = [import_at_start; 6];
    let keys: Vec<_> = imports.iter().chain(&[gc, backward, import_in_loop, gc]).copied().collect();
    assert_eq!(entry(&keys), 6);
}

/// Native code in torch's ops while the process's other threads keep cores busy is a CPU op on
/// CPU tensors (torch's intra-op pool runs it): told so, without the launch advice. With the
/// process at one core, both readings stay.
#[test]
fn torchs_native_code_with_the_other_threads_busy_is_a_cpu_op() {
    let advice = |cpu_pct: f64| {
        let mut r = run(10.0, &[(4, 60), (3, 30), (2, 10)]);
        r.main_cpu
            .insert(7, (0..=100).map(|t| (f64::from(t), if (10..90).contains(&t) { cpu_pct } else { 0.0 })).collect());
        let (findings, _) = crate::diagnose_with_ledger(&r);
        let f = findings.iter().find(|f| f.facts.site.is_some()).expect("a main-thread finding").clone();
        (f.advice.join(" | "), f.evidence.clone())
    };
    let (a, evidence) = advice(290.0);
    assert!(a.contains("runs on CPU tensors") && !a.contains("CUDA graphs"), "{a}");
    assert!(
        evidence.get("other_threads_cores").and_then(serde_json::Value::as_f64).is_some_and(|c| (c - 1.9).abs() < 0.15),
        "{evidence:?}"
    );
    let (a, _) = advice(100.0);
    assert!(a.contains("CPU tensors") && a.contains("CUDA graphs"), "{a}");
}
