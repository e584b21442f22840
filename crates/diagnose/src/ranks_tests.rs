//! The straggler's cost on a loaded host: a waiter woken in its collective waits there for a
//! core, and its own clock counts that wait as part of the collective.

use std::sync::Arc;

use gpulse_model::{Gil, KernelState, ProcessRole, PyFrame, Rank, SampledProcess, Stacks, ThreadClock, ThreadSample};

use crate::rules::testing;

fn frame(file: &str, line: u32, function: &str, code: &str) -> PyFrame {
    PyFrame { file: file.into(), line, function: function.into(), code: Some(code.into()) }
}

fn rank(pid: u32, rank: u32) -> SampledProcess {
    SampledProcess {
        gil_read: Some(true),
        pid,
        role: ProcessRole::Main,
        python: "3.12.3".into(),
        command: "python train.py".into(),
        rank: Some(Rank { rank, world_size: 2, local_rank: Some(rank), device: Some(rank) }),
    }
}

/// Stack 0: the loop in `dist.barrier()`; stack 1: the loop in `load_batch`.
fn stacks() -> Stacks {
    let c10d = "/venv/lib/python3.12/site-packages/torch/distributed/distributed_c10d.py";
    Stacks {
        frames: vec![
            frame("/w/train.py", 30, "main", "dist.barrier()"),
            frame(c10d, 4800, "barrier", "work.wait()"),
            frame("/w/train.py", 28, "main", "x = load_batch(n)"),
            frame("/w/train.py", 10, "load_batch", "x += i * i"),
        ],
        stacks: vec![vec![0, 1], vec![2, 3]],
        processes: vec![rank(10, 0), rank(11, 1)],
        ..Stacks::default()
    }
}

/// 20 s of 200 ms steps, each rank sampled at 50 Hz (10 samples a step), the two offset by half
/// an interval. `pattern` gives each rank's samples in a step, and `clock` its CPU time and wait
/// for a core per step, in µs.
fn sample(pid: u32, i: u64, pattern: &[(u32, char, Gil)], clock: (u64, u64)) -> ThreadSample {
    let (stack, state, gil) = pattern[i as usize % pattern.len()];
    let offset_us = if pid == 10 { 0 } else { 10_000 };
    let per_sample = (clock.0 / pattern.len() as u64, clock.1 / pattern.len() as u64);
    ThreadSample {
        t_us: 1_000_000_000 + (i * 20_000 + offset_us) as i64,
        pid,
        stack,
        kernel: KernelState { state, syscall: (state == 'S').then_some(7), wchan: None, across: false },
        gil,
        clock: Some(ThreadClock { cpu_us: per_sample.0 * i, wait_us: per_sample.1 * i }),
    }
}

/// Rank 1 loads its batch for 160 ms a step while rank 0 waits for it in the barrier; woken,
/// rank 0 waits 40 ms for a core (its clocks say so, its samples read runnable in the barrier),
/// then runs 40 ms. Its own clock would time 80 % of each step in `dist.barrier()`; rank 1's, the
/// last to arrive, 20 %. The straggler costs the loop their difference, 60 %.
#[test]
fn a_waiters_wait_for_a_core_in_the_collective_is_part_of_its_wait() {
    let held = (Gil::Held, Gil::Free);
    let waiter: Vec<(u32, char, Gil)> =
        [[(0, 'S', held.1); 6].as_slice(), &[(0, 'R', held.1); 2], &[(1, 'R', held.0); 2]].concat();
    let straggler: Vec<(u32, char, Gil)> = [[(1, 'R', held.0); 8].as_slice(), &[(0, 'S', held.1); 2]].concat();
    let mut st = stacks();
    for i in 0..1000 {
        st.samples.push(sample(10, i, &waiter, (40_000, 40_000)));
        st.samples.push(sample(11, i, &straggler, (160_000, 0)));
    }
    let mut r = testing::run(vec![]);
    r.stacks = Arc::new(st);
    let rows = super::rows(&r);
    assert_eq!(rows.len(), 2, "{rows:#?}");
    assert!((rows[0].peer_wait_share - 0.8).abs() < 0.03, "{rows:#?}");
    assert!((rows[1].peer_wait_share - 0.2).abs() < 0.03, "{rows:#?}");
    let s = super::straggler(&r).expect("a straggler");
    assert_eq!(s.rank, 1, "{s:#?}");
    let span = s.window_s[1] - s.window_s[0];
    assert!((s.waiters_wait_s / span - 0.8).abs() < 0.03, "{s:#?}");
    assert!((s.lost_s() / span - 0.6).abs() < 0.03, "{s:#?}");
}
