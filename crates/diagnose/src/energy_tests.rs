use super::*;
use crate::rules::testing::steady;

/// `n` one-second samples at `watts(t)`, with the counter read at `reads` (seconds) and held
/// between, as the recorder writes it.
fn gpu(n: usize, watts: impl Fn(f64) -> f64, reads: &[usize]) -> GpuSeries {
    let mut g = steady(0, 95.0, n);
    g.power_w = (0..n).map(|i| Some(watts(i as f64))).collect();
    // The true counter: the power's integral by trapezoids, millijoules.
    let mut truth = vec![0.0; n];
    for i in 1..n {
        truth[i] = truth[i - 1] + (watts(i as f64 - 1.0) + watts(i as f64)) / 2.0 * 1000.0;
    }
    let mut held = None;
    g.energy_mj = (0..n)
        .map(|i| {
            if reads.contains(&i) {
                held = Some(truth[i]);
            }
            held
        })
        .collect();
    g
}

/// One step a second from `from` to `to` (seconds).
fn steps(from: usize, to: usize) -> Steps {
    crate::rules::testing::each_second(from, to, None)
}

#[test]
fn reads_on_the_loops_edges_give_the_counters_own_energy() {
    let g = gpu(61, |_| 500.0, &[0, 30, 60]);
    let e = energy(&g, Some(&steps(0, 60)), None).unwrap();
    assert_eq!((e.steps, e.span_s, e.split_by_power), (60, [0.0, 60.0], false));
    assert!((e.joules_per_step - 500.0).abs() < 1e-9, "{e:?}");
}

#[test]
fn a_short_run_read_only_at_its_start_and_close_is_split_by_the_power() {
    // 20 s: 150 W of start-up for 5 s, 700 W for the 12 s of the loop, then 150 W; the counter
    // read only at the first poll and the closing one.
    let watts = |t: f64| if (5.0..=17.0).contains(&t) { 700.0 } else { 150.0 };
    let g = gpu(21, watts, &[0, 20]);
    let e = energy(&g, Some(&steps(5, 17)), Some(64.0)).unwrap();
    assert!(e.split_by_power);
    assert_eq!((e.steps, e.span_s), (12, [5.0, 17.0]));
    assert!((e.joules_per_step - 700.0).abs() < 1e-6, "the loop's own 700 J a step, not the run's mean: {e:?}");
    // The run's mean power would have said 20 s of energy over 12 steps.
    let whole = (g.energy_mj[20].unwrap() - g.energy_mj[0].unwrap()) / 1000.0 / 12.0;
    assert!(whole > 800.0, "{whole}");
    assert!((e.joules_per_1k_samples.unwrap() - 700.0 / 64.0 * 1000.0).abs() < 1e-3);
}

#[test]
fn a_loop_begun_before_the_first_read_counts_only_the_steps_after_it() {
    // `attach` to a loop under way: the counter is first read at 10 s.
    let g = gpu(41, |_| 400.0, &[10, 40]);
    let e = energy(&g, Some(&steps(0, 40)), None).unwrap();
    assert_eq!((e.steps, e.span_s, e.split_by_power), (30, [10.0, 40.0], false));
    assert!((e.joules_per_step - 400.0).abs() < 1e-9, "{e:?}");
}

#[test]
fn without_power_between_the_reads_nothing_is_split() {
    let mut g = gpu(21, |_| 300.0, &[0, 20]);
    g.power_w[10] = None;
    let err = energy(&g, Some(&steps(5, 17)), None).unwrap_err();
    assert!(err.contains("power samples"), "{err}");
    // Reads on both edges need no power.
    let g = {
        let mut g = gpu(21, |_| 300.0, &[5, 17]);
        g.power_w = vec![None; 21];
        g
    };
    let e = energy(&g, Some(&steps(5, 17)), None).unwrap();
    assert!((e.joules_per_step - 300.0).abs() < 1e-9 && !e.split_by_power, "{e:?}");
}

#[test]
fn one_read_or_no_marks_give_no_energy() {
    let g = gpu(21, |_| 300.0, &[0]);
    assert!(energy(&g, Some(&steps(5, 17)), None).unwrap_err().contains("before and after"));
    assert!(energy(&g, None, None).unwrap_err().contains("no step marks"));
}

#[test]
fn a_window_that_dropped_its_oldest_samples_takes_the_first_change_as_the_first_read() {
    // The counter was read 20 s before this window began (held at 0 J); the window's samples
    // start at 0 s, its next read is at 10 s, then at 40 s. At 500 W, 20 s of the held value's
    // age would be charged to the loop if the first sample counted as a read.
    let mut g = gpu(41, |_| 500.0, &[10, 40]);
    let (start, at_10) = (g.energy_mj[10].unwrap() - 30.0 * 500_000.0, g.energy_mj[10]);
    for e in &mut g.energy_mj[..10] {
        *e = Some(start);
    }
    g.energy_first_held = true;
    let e = energy(&g, Some(&steps(0, 40)), None).unwrap();
    assert_eq!((e.steps, e.span_s), (30, [10.0, 40.0]), "{e:?}");
    assert!((e.joules_per_step - 500.0).abs() < 1e-9, "{e:?}");
    assert_eq!(g.energy_mj[10], at_10);
    // The same series taken as a whole run counts 0 s as a read, and the split charges the loop.
    g.energy_first_held = false;
    let whole = energy(&g, Some(&steps(0, 40)), None).unwrap();
    assert!(whole.joules_per_step > 700.0, "{whole:?}");
}

#[test]
fn a_counter_that_went_back_starts_its_reads_again() {
    // Read at 0, 10, 20 and 30 s; the driver reloaded between the first two reads, so the
    // counter stood a gigajoule higher at 0 s than at 10 s.
    let mut g = gpu(31, |_| 400.0, &[0, 10, 20, 30]);
    for e in g.energy_mj.iter_mut().take(10).flatten() {
        *e += 1e12;
    }
    let e = energy(&g, Some(&steps(0, 30)), None).unwrap();
    assert_eq!((e.steps, e.span_s), (20, [10.0, 30.0]), "{e:?}");
    assert!((e.joules_per_step - 400.0).abs() < 1e-9, "{e:?}");
}

#[test]
fn a_power_step_between_samples_errs_by_at_most_half_a_poll_of_it() {
    // The true power steps from 100 to 700 W at 5.5 s, between two 1 s samples (which read the
    // instant), and back at 17.5 s; the counter integrates the true power. The loop runs from
    // 6 to 17 s; the counter is read at 0 and 20 s.
    let true_w = |t: f64| if (5.5..17.5).contains(&t) { 700.0 } else { 100.0 };
    let mut g = gpu(21, true_w, &[]);
    let counter = |t: f64| -> f64 {
        let dt = 0.001;
        (0..(t / dt) as usize).map(|i| true_w((i as f64 + 0.5) * dt) * dt).sum::<f64>() * 1000.0
    };
    g.energy_mj = (0..21).map(|i| Some(if i < 20 { counter(0.0) } else { counter(20.0) })).collect();
    let e = energy(&g, Some(&steps(6, 17)), None).unwrap();
    let truth_j = 700.0 * 11.0;
    let bound_j = 2.0 * 0.5 * 1.0 * 600.0;
    let got_j = e.joules_per_step * e.steps as f64;
    assert!((got_j - truth_j).abs() <= bound_j, "{got_j} against {truth_j}, bound {bound_j}");
}
