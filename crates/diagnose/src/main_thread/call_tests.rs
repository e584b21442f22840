//! A library's call in the loop (`generate`) against the step's own launching, and a failed
//! stack read between two good ones.

use std::sync::Arc;

use gpulse_model::{Gil, KernelState};

use super::tests::{frame, run};
use crate::{AccountKind, FindingId};

/// GPU-Util 20 %: 40 samples a second launch the step's forward and backward in `train`, 60 run
/// transformers' `generate` from the same function, all in torch's Python. With the step's
/// backward seen, `generate` is its own cause, named by its function and package, its GPU work
/// moved out of the loop's; without a backward entry seen, nothing tells the step apart, and
/// the function stays one cause.
#[test]
fn a_library_call_is_its_own_cause_only_beside_a_step() {
    let with_backward = |backward: bool| {
        let mut r = run(20.0, &[(3, 40), (1, 60)]);
        let mut st = (*r.stacks).clone();
        st.frames.push(frame("/w/train.py", 37, "train", "loss.backward()"));
        st.frames.push(frame(
            "/v/site-packages/torch/autograd/graph.py",
            869,
            "_engine_run_backward",
            "return Variable._execution_engine.run_backward(",
        ));
        st.frames.push(frame("/w/train.py", 50, "train", "out = model.generate(prompt, max_new_tokens=16)"));
        st.frames.push(frame(
            "/v/site-packages/torch/utils/_contextlib.py",
            120,
            "decorate_context",
            "return func(*args)",
        ));
        st.frames.push(frame(
            "/v/site-packages/transformers/generation/utils.py",
            2400,
            "GenerationMixin.generate",
            "",
        ));
        st.frames.push(frame("/v/site-packages/torch/nn/modules/module.py", 1750, "_call_impl", ""));
        let n = st.frames.len() as u32;
        st.stacks.push(vec![0, n - 6, n - 5]);
        st.stacks.push(vec![0, n - 4, n - 3, n - 2, n - 1]);
        let (step, generate) = (st.stacks.len() as u32 - 2, st.stacks.len() as u32 - 1);
        for (i, s) in st.samples.iter_mut().enumerate() {
            s.kernel = KernelState { state: 'R', syscall: None, wchan: None, across: false };
            s.gil = Gil::Held;
            s.stack = match (s.stack, backward && i % 2 == 0) {
                (3, true) => step,
                (3, false) => 3,
                _ => generate,
            };
        }
        r.stacks = Arc::new(st);
        crate::diagnose_with_ledger(&r)
    };
    let (findings, ledger) = with_backward(true);
    let call = findings.iter().find(|f| f.evidence.contains_key("call")).unwrap_or_else(|| panic!("{findings:#?}"));
    assert_eq!(call.evidence["call"], "GenerationMixin.generate (transformers)");
    assert!(call.title.contains("in GenerationMixin.generate (transformers) at w/train.py:50"), "{}", call.title);
    assert!(call.advice[0].contains("every N steps"), "{:?}", call.advice);
    // Its GPU work is its own: the ledger still sums to the wall time, and the call's share is
    // its samples' whole time, 60 % of the loop, not only what the GPU idled.
    let sum: f64 = ledger.accounts.iter().map(|a| a.seconds).sum();
    assert!((sum - ledger.wall_s).abs() < 0.05, "{ledger:#?}");
    let share = call.cost.as_ref().and_then(|c| c.loop_share).unwrap();
    assert!((share - 0.6).abs() < 0.05, "{share}: {call:#?}");
    let launching = findings.iter().find(|f| f.id == FindingId::HostPython && !f.evidence.contains_key("call"));
    assert!(launching.is_some_and(|f| f.title.contains("launching the GPU's work at w/train.py:")), "{findings:#?}");
    let (findings, ledger) = with_backward(false);
    assert!(!findings.iter().any(|f| f.evidence.contains_key("call")), "{findings:#?}");
    assert!(ledger.seconds(AccountKind::GpuWork) > 0.0, "{ledger:#?}");
}

/// A read with no frame between two reads with frames is a failed read: its time goes to the
/// sample before it, and no frameless account is booked.
#[test]
fn a_failed_stack_read_gives_its_time_to_the_sample_before_it() {
    let mut r = run(20.0, &[(1, 50), (2, 50)]);
    let mut st = (*r.stacks).clone();
    st.stacks.push(Vec::new());
    let empty = st.stacks.len() as u32 - 1;
    // Every fifth numpy sample fails to read.
    let mut k = 0;
    for s in st.samples.iter_mut().filter(|s| s.stack == 1) {
        k += 1;
        if k % 5 == 0 {
            s.stack = empty;
        }
    }
    r.stacks = Arc::new(st);
    let (findings, ledger) = crate::diagnose_with_ledger(&r);
    let numpy = findings.iter().find(|f| f.all_evidence()["domain"] == "host_math").expect("numpy");
    let share = numpy.cost.as_ref().and_then(|c| c.loop_share).unwrap();
    let sleep = ledger.seconds(AccountKind::MainThread(super::ThreadState::Sleep));
    let numpy_s = numpy.cost.as_ref().and_then(|c| c.seconds).unwrap();
    assert!((numpy_s - sleep).abs() < 0.05 * (numpy_s + sleep), "numpy {numpy_s} s, sleep {sleep} s: {ledger:#?}");
    assert!(share > 0.0, "{numpy:#?}");
    assert!(
        ledger.accounts.iter().all(|a| a.label.contains(" at ") || !a.label.starts_with("the main thread")),
        "{ledger:#?}"
    );
}

/// Adds three stacks and gives each second's 100 running samples to them: 40 to the step's
/// backward and 30 to a launch, both holding the GIL, and 30 to a read-back without it.
fn mix_step_launch_sync(st: &mut gpulse_model::Stacks, [step, launch, sync]: [Vec<u32>; 3]) {
    let n = st.stacks.len() as u32;
    st.stacks.extend([step, launch, sync]);
    for (i, s) in st.samples.iter_mut().enumerate() {
        let (stack, gil) = match i % 100 {
            0..40 => (n, Gil::Held),
            40..70 => (n + 1, Gil::Held),
            _ => (n + 2, Gil::Free),
        };
        s.stack = stack;
        s.gil = gil;
        s.kernel = KernelState { state: 'R', syscall: None, wchan: None, across: false };
    }
}

/// GPU-Util 40 %: a loop's body calls `train_step()`, whose line runs the backward pass (40
/// samples a second), and `evaluate()`, whose lines launch a forward (30) and read an accuracy
/// back with `.item()` (30). `evaluate()` is a call of its own beside the step, its GPU work and
/// its waits included: 60 % of the loop at the body's line that calls it. Where the same forward
/// is a helper called from the function that runs the backward, it is the step's own; where the
/// function launches nothing and only reads back, it waits for the step's work.
#[test]
fn the_jobs_own_function_beside_the_step_is_a_call_of_its_own() {
    let with = |beside: bool, launches: bool| {
        let mut r = run(40.0, &[(3, 100)]);
        let mut st = (*r.stacks).clone();
        let base = st.frames.len() as u32;
        let caller = if beside {
            ("body", "acc = evaluate(model, batches)")
        } else {
            ("train_step", "acc = evaluate(model, batches)")
        };
        st.frames.extend([
            frame("/w/train.py", 90, "main", "body(step)"),
            frame("/w/train.py", 70, "body", "train_step(x, y)"),
            frame("/w/train.py", 50, "train_step", "loss.backward()"),
            frame("/v/site-packages/torch/autograd/graph.py", 869, "_engine_run_backward", "return run_backward("),
            frame("/w/train.py", 72, caller.0, caller.1),
            frame("/w/train.py", 60, "evaluate", "out = model(x)"),
            frame("/v/site-packages/torch/nn/modules/module.py", 1750, "_call_impl", "return forward_call(*args)"),
            frame("/w/train.py", 62, "evaluate", "correct += (out.argmax(1) == y).sum().item()"),
            frame("/w/train.py", 61, "evaluate", "line = format(correct)"),
        ]);
        let f = |i: u32| base + i;
        let step = vec![f(0), f(1), f(2), f(3)];
        let eval_at: Vec<u32> = if beside { vec![f(0), f(4)] } else { vec![f(0), f(1), f(4)] };
        let launch: Vec<u32> = match launches {
            true => eval_at.iter().copied().chain([f(5), f(6)]).collect(),
            false => eval_at.iter().copied().chain([f(8)]).collect(),
        };
        let sync: Vec<u32> = eval_at.iter().copied().chain([f(7)]).collect();
        mix_step_launch_sync(&mut st, [step, launch, sync]);
        r.stacks = Arc::new(st);
        crate::diagnose_with_ledger(&r)
    };
    let (findings, ledger) = with(true, true);
    let call = findings.iter().find(|f| f.evidence.contains_key("call")).unwrap_or_else(|| panic!("{findings:#?}"));
    assert_eq!(call.evidence["call"], "evaluate()");
    assert!(call.title.contains("in evaluate(), beside the training step at w/train.py:72 body"), "{}", call.title);
    assert!(
        call.advice[0].contains("every N steps") && call.advice[1].contains("read them back once"),
        "{:?}",
        call.advice
    );
    assert!(call.title.contains("its GPU work included"), "{}", call.title);
    let share = call.cost.as_ref().and_then(|c| c.loop_share).unwrap();
    assert!((share - 0.6).abs() < 0.05, "{share}: {call:#?}");
    let sum: f64 = ledger.accounts.iter().map(|a| a.seconds).sum();
    assert!((sum - ledger.wall_s).abs() < 0.05, "{ledger:#?}");
    let (findings, _) = with(false, true);
    assert!(!findings.iter().any(|f| f.evidence.contains_key("call")), "{findings:#?}");
    // A function that launches nothing and reads a value back (a logger's `.item()`) waits for
    // the step's own work: no call of its own.
    let (findings, _) = with(true, false);
    assert!(!findings.iter().any(|f| f.evidence.contains_key("call")), "{findings:#?}");
}

/// A library's loop (Lightning's) calls the job's `training_step`, whose forward goes through the
/// job's own model and reads a routing decision back, and runs the backward from its own frames:
/// the backward's stack holds none of `training_step`'s lines, yet the forward is the step's own,
/// not a phase beside it.
#[test]
fn a_training_step_a_library_calls_is_no_phase() {
    let mut r = run(40.0, &[(3, 100)]);
    let mut st = (*r.stacks).clone();
    let base = st.frames.len() as u32;
    st.frames.extend([
        frame("/w/train.py", 90, "<module>", "trainer.fit(model)"),
        frame("/v/site-packages/lightning/pytorch/loops/fit_loop.py", 200, "run", "self.advance()"),
        frame("/v/site-packages/torch/autograd/graph.py", 869, "_engine_run_backward", "return run_backward("),
        frame("/w/train.py", 40, "training_step", "out = self.net(x)"),
        frame("/w/model.py", 12, "Router.forward", "experts = idx.tolist()"),
        frame("/v/site-packages/torch/nn/modules/module.py", 1750, "_call_impl", "return forward_call(*args)"),
        frame("/w/model.py", 10, "Router.forward", "idx = self.gate(x).argmax(-1)"),
    ]);
    let f = |i: u32| base + i;
    mix_step_launch_sync(
        &mut st,
        [vec![f(0), f(1), f(2)], vec![f(0), f(1), f(3), f(6), f(5)], vec![f(0), f(1), f(3), f(4)]],
    );
    r.stacks = Arc::new(st);
    let (findings, _) = crate::diagnose_with_ledger(&r);
    assert!(!findings.iter().any(|f| f.evidence.contains_key("call")), "{findings:#?}");
}
