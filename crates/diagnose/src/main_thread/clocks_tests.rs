//! The thread's clocks against its samples: what `clocks` makes of samples that catch one side.

use std::sync::Arc;

use gpulse_model::{KernelState, Stacks, ThreadSample};

use super::ThreadState;
use super::tests::{sample, stacks};
use crate::rules::testing;

/// A thread sampled at 50 Hz for 16 s whose clocks say it ran 4 ms and waited 4 ms for a core of
/// every 20 ms, sampled in `pattern`'s stacks and states over and over: its states' shares, as
/// the diagnosis and the live counters read them.
fn clocked_shares(pattern: &[(u32, char)], wait_us: u64) -> [Vec<(ThreadState, f64)>; 2] {
    use gpulse_model::ThreadClock;
    let samples: Vec<ThreadSample> = (0..800u64)
        .map(|i| {
            let (stack, state) = pattern[i as usize % pattern.len()];
            let mut s = sample(i as f64 * 0.02, stack);
            if state == 'R' {
                s.kernel = KernelState { state, syscall: None, wchan: None };
            }
            ThreadSample { clock: Some(ThreadClock { cpu_us: 4_000 * i, wait_us: wait_us * i }), ..s }
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

fn share_of(shares: &[(ThreadState, f64)], state: ThreadState) -> f64 {
    shares.iter().find(|x| x.0 == state).map_or(0.0, |x| x.1)
}

/// Caught runnable at its sleep's line, a thread was woken and waits for a core: the wait is
/// there, and the running time is the line that ran. Read in one ratio with the running
/// samples, half the Python's time was told as its sleep.
#[test]
fn a_thread_woken_at_its_sleep_takes_the_wait_and_the_line_that_ran_the_running_time() {
    let pattern = [(2, 'S'), (2, 'S'), (2, 'S'), (2, 'S'), (2, 'S'), (2, 'S'), (2, 'R'), (2, 'R'), (3, 'R'), (3, 'R')];
    for shares in clocked_shares(&pattern, 4_000) {
        assert!((share_of(&shares, ThreadState::Python) - 0.2).abs() < 0.02, "{shares:?}");
        assert!((share_of(&shares, ThreadState::CoreWait) - 0.2).abs() < 0.02, "{shares:?}");
        assert!((share_of(&shares, ThreadState::Sleep) - 0.6).abs() < 0.02, "{shares:?}");
    }
}

/// A thread its clocks say ran a fifth of the time, caught running once in 50 samples: a block
/// of 25 that never caught it grows until it does. Counted alone, such a block told its running
/// time as its sleep, and the Python read half what it was.
#[test]
fn a_block_that_never_caught_the_thread_running_grows_until_it_does() {
    let mut pattern = vec![(2, 'S'); 50];
    pattern[24] = (3, 'R');
    for shares in clocked_shares(&pattern, 0) {
        assert!((share_of(&shares, ThreadState::Python) - 0.2).abs() < 0.02, "{shares:?}");
        assert!((share_of(&shares, ThreadState::Sleep) - 0.8).abs() < 0.02, "{shares:?}");
    }
}
