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
    Steps {
        pid: 1,
        ranks: 1,
        marked: to - from + 1,
        timed: to - from,
        window_s: [from as f64, to as f64],
        step_s: (from + 1..=to).map(|i| (i as f64, 1.0)).collect(),
        data_wait_s: Vec::new(),
        waited_s: None,
    }
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
