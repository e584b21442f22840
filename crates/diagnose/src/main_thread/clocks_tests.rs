//! The thread's clocks against its samples: what `clocks` makes of samples that catch one side.

use std::sync::Arc;

use gpulse_model::{KernelState, Stacks, ThreadSample};

use super::ThreadState;
use super::tests::{sample, stacks};
use crate::rules::testing;

/// A thread sampled at 50 Hz for 16 s whose clocks say it ran `cpu_us` and waited `wait_us` for a
/// core of every 20 ms, sampled in `pattern`'s stacks and states over and over (`A`: `D` read
/// across a change of letter): its states' shares, as the diagnosis and the live counters read
/// them.
fn clocked_shares(pattern: &[(u32, char)], cpu_us: u64, wait_us: u64) -> [Vec<(ThreadState, f64)>; 2] {
    use gpulse_model::ThreadClock;
    let samples: Vec<ThreadSample> = (0..800u64)
        .map(|i| {
            let (stack, state) = pattern[i as usize % pattern.len()];
            let mut s = sample(i as f64 * 0.02, stack);
            if state != 'S' {
                let (state, across) = if state == 'A' { ('D', true) } else { (state, false) };
                s.kernel = KernelState { state, syscall: None, wchan: None, across };
            }
            ThreadSample { clock: Some(ThreadClock { cpu_us: cpu_us * i, wait_us: wait_us * i }), ..s }
        })
        .collect();
    let mut r = testing::run(vec![]);
    r.stacks = Arc::new(Stacks { samples: samples.clone(), ..stacks() });
    let mut read = std::collections::BTreeMap::<ThreadState, f64>::new();
    for p in super::points(&r, 7).iter() {
        *read.entry(p.class.state).or_default() += p.dur_s;
    }
    let total: f64 = read.values().sum();
    let diagnosed = read.into_iter().map(|(s, v)| (s, v / total)).collect();
    let mut live = super::Totals::default();
    live.add(&stacks(), &samples);
    [diagnosed, live.shares(7)]
}

/// Asserts each state's share of [`clocked_shares`], by the diagnosis and the live counters, is
/// within 2 points of `want`.
fn expect_shares(pattern: &[(u32, char)], cpu_us: u64, wait_us: u64, want: &[(ThreadState, f64)]) {
    for shares in clocked_shares(pattern, cpu_us, wait_us) {
        for (state, share) in want {
            let got = shares.iter().find(|x| x.0 == *state).map_or(0.0, |x| x.1);
            assert!((got - share).abs() < 0.02, "{state:?}: {shares:?}");
        }
    }
}

/// Caught runnable at its sleep's line, a thread was woken and waits for a core: the wait is
/// there, and the running time is the line that ran. Read in one ratio with the running
/// samples, half the Python's time was told as its sleep.
#[test]
fn a_thread_woken_at_its_sleep_takes_the_wait_and_the_line_that_ran_the_running_time() {
    let pattern = [(2, 'S'), (2, 'S'), (2, 'S'), (2, 'S'), (2, 'S'), (2, 'S'), (2, 'R'), (2, 'R'), (3, 'R'), (3, 'R')];
    expect_shares(
        &pattern,
        4_000,
        4_000,
        &[(ThreadState::Python, 0.2), (ThreadState::CoreWait, 0.2), (ThreadState::Sleep, 0.6)],
    );
}

/// Caught runnable with the GIL free in a call that blocks (an fsync), a thread was woken from it:
/// on a loaded host the wait for a core is there first, and the running time is the Python's.
/// Read in one ratio with the running samples, half the Python's time was told as the fsync's.
#[test]
fn a_thread_woken_from_a_call_takes_the_wait_before_the_lines_that_ran() {
    let pattern = [(5, 'R'), (5, 'R'), (3, 'R'), (3, 'R'), (2, 'S'), (2, 'S'), (2, 'S'), (2, 'S'), (2, 'S'), (2, 'S')];
    expect_shares(
        &pattern,
        4_000,
        4_000,
        &[(ThreadState::Python, 0.2), (ThreadState::CoreWait, 0.2), (ThreadState::Disk, 0.0)],
    );
}

/// A thread its clocks say ran a fifth of the time, caught running once in 50 samples: a block
/// of 25 that never caught it grows until it does. Counted alone, such a block told its running
/// time as its sleep, and the Python read half what it was.
#[test]
fn a_block_that_never_caught_the_thread_running_grows_until_it_does() {
    let mut pattern = vec![(2, 'S'); 50];
    pattern[24] = (3, 'R');
    expect_shares(&pattern, 4_000, 0, &[(ThreadState::Python, 0.2), (ThreadState::Sleep, 0.8)]);
}

/// A thread its clocks say ran 60 % of the time, caught running Python in half of its samples,
/// blocked in a call in three tenths, and in the call across a change of letter in two tenths:
/// the running time the Python's samples leave is the call's own, on its CPU. Read as blocked,
/// those samples left it to the Python, which read 60 % for the 50 % it was caught at.
#[test]
fn samples_read_across_a_change_of_letter_take_the_running_time_left_over() {
    let pattern = [(3, 'R'), (4, 'D'), (3, 'R'), (4, 'A'), (3, 'R'), (4, 'D'), (3, 'R'), (4, 'A'), (3, 'R'), (4, 'D')];
    expect_shares(&pattern, 12_000, 0, &[(ThreadState::Python, 0.5), (ThreadState::Disk, 0.5)]);
}
