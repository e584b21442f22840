//! Waits whose cause is another thread, and a job without a GPU: the split's words and bounds.

use std::sync::Arc;

use gpulse_model::{Gil, KernelState, ThreadSample};

use super::tests::{frame, run, sample, stacks};
use crate::rules::testing;
use crate::{AccountKind, FindingId};

/// A `with lock:` wait (a futex) beside another thread: named as that thread's line where it held
/// the GIL in a fifth of the wait or more, and not where it passed through once or twice.
#[test]
fn a_lock_wait_names_the_thread_that_ran_only_where_it_mostly_ran() {
    let with_holder = |held_per_100: usize| {
        let mut r = run(40.0, &[(0, 40), (1, 60)]);
        let mut st = (*r.stacks).clone();
        st.frames.push(frame("/w/train.py", 66, "train", "with lock:"));
        st.frames.push(frame("/w/saver.py", 12, "save", "blob = pickle.dumps(state)"));
        let n = st.frames.len() as u32;
        st.stacks.push(vec![0, n - 2]);
        st.stacks.push(vec![n - 1]);
        let (waiting, holder) = (st.stacks.len() as u32 - 2, st.stacks.len() as u32 - 1);
        // The numpy samples become the lock's waits, `held_per_100` of each 100 with the holder on the GIL.
        for (i, s) in st.samples.iter_mut().filter(|s| s.stack == 1).enumerate() {
            s.stack = waiting;
            s.kernel =
                KernelState { state: 'S', syscall: Some(202), wchan: Some("futex_wait_queue".into()), across: false };
            s.gil = if i % 60 < held_per_100 * 60 / 100 { Gil::Other { stack: holder } } else { Gil::Free };
        }
        r.stacks = Arc::new(st);
        let (findings, _) = crate::diagnose_with_ledger(&r);
        findings.into_iter().find(|f| f.id == FindingId::LockWait).expect("lock_wait")
    };
    let named = with_holder(40);
    assert!(named.title.ends_with("; meanwhile another thread ran Python at w/saver.py:12 save"), "{}", named.title);
    assert!(named.advice[0].contains("while another thread ran Python at w/saver.py:12 save"), "{:?}", named.advice);
    assert!(named.advice[0].contains("hold a lock only around what it guards"), "{:?}", named.advice);
    let passing = with_holder(5);
    assert!(!passing.title.contains("another thread"), "{}", passing.title);
    assert!(!passing.advice[0].contains("another thread"), "{:?}", passing.advice);
}

/// A job that holds no GPU (a CPU-only torch job): its top-level imports are start-up, split off
/// at its first backward pass as a GPU job's are, not "an import inside the loop".
#[test]
fn a_job_without_a_gpu_has_its_imports_as_start_up() {
    let mut r = testing::run(Vec::new());
    r.host_cpu = (0..=15).map(|t| (f64::from(t), 50.0)).collect();
    let mut st = stacks();
    st.frames.push(frame("/w/train.py", 3, "<module>", "import torch"));
    st.frames.push(frame("<frozen importlib._bootstrap>", 1360, "_find_and_load", ""));
    st.frames.push(frame("/w/train.py", 36, "train", "loss.backward()"));
    st.frames.push(frame("/v/site-packages/torch/autograd/__init__.py", 353, "backward", "_engine_run_backward("));
    let n = st.frames.len() as u32;
    st.stacks.push(vec![n - 4, n - 3]);
    st.stacks.push(vec![0, n - 2, n - 1]);
    let (import, backward) = (st.stacks.len() as u32 - 2, st.stacks.len() as u32 - 1);
    let running = |t_s: f64, stack: u32| ThreadSample {
        kernel: KernelState { state: 'R', syscall: None, wchan: None, across: false },
        gil: Gil::Held,
        ..sample(t_s, stack)
    };
    // 3 s of imports, then 12 s of a loop: backward half of each second, numpy metrics the rest.
    for i in 0..300 {
        st.samples.push(running(i as f64 * 0.01, import));
    }
    for i in 0..1200 {
        let t = 3.0 + i as f64 * 0.01;
        st.samples.push(running(t, if i % 100 < 50 { backward } else { 1 }));
    }
    r.stacks = Arc::new(st);
    let (findings, ledger) = crate::diagnose_with_ledger(&r);
    assert!(findings.iter().all(|f| f.all_evidence()["domain"] != "import"), "{findings:#?}");
    let startup = ledger.seconds(AccountKind::Startup);
    assert!((startup - 3.0).abs() < 0.3, "{startup} s of start-up: {ledger:#?}");
    let metrics = findings.iter().find(|f| f.all_evidence()["domain"] == "host_math").expect("the metrics");
    let own = metrics.cost.as_ref().and_then(|c| c.loop_share).unwrap();
    assert!((own - 0.5).abs() < 0.03, "{own} of the loop: {metrics:#?}");
    // The backward pass is the training itself on the CPU: said as a fact with the way to a GPU,
    // neither a fault nor time to win back, and never the headline's promise.
    let step = findings.iter().find(|f| f.all_evidence()["site"] == "w/train.py:36 train").expect("the step");
    assert_eq!(step.severity, crate::Severity::Info, "{step:#?}");
    assert!(step.title.starts_with("The step's torch ops running on the CPU"), "{}", step.title);
    assert!(
        step.advice[0].contains("model.to(\"cuda\")") && !step.advice[0].contains("DataLoader"),
        "{:?}",
        step.advice
    );
    let summary = crate::summary(&findings).unwrap_or_default();
    assert!(summary.contains("numpy") && !summary.contains("torch ops"), "{summary}");
}

/// A line that launches a small op and reads it back, once per parameter: its waits are for its
/// own ops, the GPU idle between them, so they are its cost with its launches, one cause at the
/// line with its own advice. A line that waits longer than it launches waits for real work.
#[test]
fn reading_back_each_small_op_is_one_cause_at_its_line() {
    let with_waits = |launching: usize, waiting: usize| {
        let mut r = run(10.0, &[(1, 20), (0, launching + waiting)]);
        let mut st = (*r.stacks).clone();
        st.frames.push(frame("/w/train.py", 45, "train", "norms = [p.grad.norm().item() for p in params]"));
        st.frames.push(frame("/v/site-packages/torch/_tensor.py", 880, "norm", "return torch.norm(self, p, dim)"));
        let n = st.frames.len() as u32;
        st.stacks.push(vec![0, n - 2]);
        st.stacks.push(vec![0, n - 2, n - 1]);
        let (waits, launches) = (st.stacks.len() as u32 - 2, st.stacks.len() as u32 - 1);
        for (i, s) in st.samples.iter_mut().filter(|s| s.stack == 0).enumerate() {
            let launch = i % (launching + waiting) < launching;
            s.stack = if launch { launches } else { waits };
            s.kernel = match launch {
                true => KernelState { state: 'R', syscall: None, wchan: None, across: false },
                false => KernelState { state: 'S', syscall: Some(16), wchan: Some("nvidia".into()), across: false },
            };
            s.gil = if launch { Gil::Held } else { Gil::Free };
        }
        r.stacks = Arc::new(st);
        crate::diagnose_with_ledger(&r).0
    };
    let findings = with_waits(44, 36);
    let f = findings
        .iter()
        .find(|f| f.title.contains("reading each back"))
        .unwrap_or_else(|| panic!("{:#?}", findings.iter().map(|f| &f.title).collect::<Vec<_>>()));
    assert!(f.title.contains("reading each back at w/train.py:45 train"), "{}", f.title);
    assert!(f.advice[0].contains("torch._foreach_norm"), "{:?}", f.advice);
    // GPU-Util 10 % of the 80 s loop: 8 s of work, placed on the line's 64 s first; its rest idle.
    let own = f.cost.as_ref().and_then(|c| c.loop_share).unwrap();
    assert!((own - 0.7).abs() < 0.05, "{own} of the loop: {f:#?}");
    // Waits twice the launching: the GPU works through them, and the line reads nothing back.
    let long = with_waits(20, 60);
    assert!(long.iter().all(|f| !f.title.contains("reading each back")), "{long:#?}");
}

/// A step that saves an array with `np.save` and fsyncs its log waits on the disk in both: one
/// cause whose seconds are both waits (a real loop's fsync'd log read 5.7 points short of its own
/// timing while numpy's write stood apart).
#[test]
fn numpys_write_and_the_jobs_fsync_are_one_wait_on_the_disk() {
    let mut r = run(40.0, &[(0, 40), (1, 30), (5, 30)]);
    let mut st = (*r.stacks).clone();
    // Stack 1 becomes `np.save(f, state)` blocked in a write: numpy's frame over the job's line.
    st.frames.push(frame("/w/train.py", 72, "train", "np.save(f, state)"));
    st.frames.push(frame("/v/site-packages/numpy/lib/format.py", 700, "write_array", "fp.write(array.tobytes('C'))"));
    let n = st.frames.len() as u32;
    st.stacks[1] = vec![0, n - 2, n - 1];
    for s in st.samples.iter_mut().filter(|s| s.stack == 1 || s.stack == 5) {
        s.kernel = KernelState { state: 'D', syscall: Some(1), wchan: None, across: false };
        s.gil = Gil::Free;
    }
    r.stacks = Arc::new(st);
    let (findings, ledger) = crate::diagnose_with_ledger(&r);
    let disk: Vec<_> = findings.iter().filter(|f| f.id == FindingId::DiskWait).collect();
    assert_eq!(disk.len(), 1, "{:?}", testing::ids(&findings));
    let idle = 80.0 - ledger.seconds(AccountKind::GpuWork);
    let secs = ledger.seconds(AccountKind::MainThread(crate::main_thread::ThreadState::Disk));
    assert!((secs - idle).abs() < 0.5, "both writes are the idle time: {secs} of {idle}: {ledger:#?}");
}

/// Without a GPU, a line that reads a tensor back (`.item()`) reads a CPU tensor: the job's own
/// time in its function, never a wait on the GPU.
#[test]
fn a_job_without_a_gpu_waits_on_no_gpu() {
    let mut r = testing::run(Vec::new());
    r.host_cpu = (0..=100).map(|t| (f64::from(t), 50.0)).collect();
    let mut st = stacks();
    // Stack 0 (`total += loss.item()`, state R) half of each second, numpy the other half, both
    // in `train`.
    for sec in 10..90 {
        for i in 0..100 {
            st.samples.push(sample(sec as f64 + i as f64 / 100.0, if i < 50 { 0 } else { 1 }));
        }
    }
    r.stacks = Arc::new(st);
    let (findings, ledger) = crate::diagnose_with_ledger(&r);
    let sync = ledger.seconds(AccountKind::MainThread(crate::main_thread::ThreadState::GpuSync));
    assert_eq!(sync, 0.0, "{ledger:#?}");
    assert!(findings.iter().all(|f| !f.title.contains("waiting for the GPU")), "{findings:#?}");
    let python = ledger.seconds(AccountKind::MainThread(crate::main_thread::ThreadState::Python));
    assert!(python >= 0.95 * ledger.wall_s, "the job's time is `train`'s: {ledger:#?}");
}

/// Blocked in `loss.backward()` with another thread on the GIL: where that thread runs the
/// backward itself (a compiled backward on the autograd engine's thread), the wait is the step's
/// launching; where it runs the job's own Python, it is GIL contention.
#[test]
fn a_backward_wait_is_the_backwards_own_where_its_engine_holds_the_gil() {
    let with_holder = |file: &str, function: &str| {
        let mut r = run(20.0, &[(0, 20), (1, 80)]);
        let mut st = (*r.stacks).clone();
        st.frames.push(frame("/w/train.py", 36, "train", "loss.backward()"));
        st.frames.push(frame("/v/site-packages/torch/autograd/graph.py", 869, "_engine_run_backward", ""));
        st.frames.push(frame(file, 10, function, ""));
        let n = st.frames.len() as u32;
        st.stacks.push(vec![0, n - 3, n - 2]);
        st.stacks.push(vec![n - 1]);
        let (waiting, holder) = (st.stacks.len() as u32 - 2, st.stacks.len() as u32 - 1);
        for s in st.samples.iter_mut().filter(|s| s.stack == 1) {
            s.stack = waiting;
            s.kernel =
                KernelState { state: 'S', syscall: Some(202), wchan: Some("futex_wait_queue".into()), across: false };
            s.gil = Gil::Other { stack: holder };
        }
        r.stacks = Arc::new(st);
        crate::diagnose_with_ledger(&r)
    };
    let (findings, ledger) =
        with_holder("/v/site-packages/torch/_functorch/_aot_autograd/runtime_wrappers.py", "backward");
    assert!(!findings.iter().any(|f| f.id == FindingId::GilContention), "{findings:#?}");
    let engine = findings.iter().find(|f| f.id == FindingId::HostPython).expect("launching");
    assert!(engine.title.contains("launching the GPU's work at w/train.py:36"), "{}", engine.title);
    assert_eq!(ledger.seconds(AccountKind::MainThread(super::ThreadState::GilWait)), 0.0);
    // Under the compiled backward the engine runs Python through torch's autograd Function.
    let (findings, _) = with_holder("/v/site-packages/torch/autograd/function.py", "apply");
    assert!(!findings.iter().any(|f| f.id == FindingId::GilContention), "{findings:#?}");
    let (findings, _) = with_holder("/w/producer.py", "produce");
    let gil = findings.iter().find(|f| f.id == FindingId::GilContention).expect("gil_contention");
    assert!(gil.title.contains("another thread holds the GIL at w/producer.py:10 produce"), "{}", gil.title);
}
