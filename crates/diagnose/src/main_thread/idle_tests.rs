//! Where the GPU's work goes among the main thread's samples, and so what each sample weighs in
//! its idle time.

use super::*;
use crate::main_thread::Class;
use crate::rules::testing;

/// A poll says only how much of its second the GPU worked: that work goes beside the samples that
/// waited on the GPU first, then beside those that launched to it, and the rest of the samples
/// take the poll's idle time whole. Each poll keeps its idle total.
#[test]
fn the_gpus_work_goes_beside_its_waits_and_launches_first() {
    // Polls each second at GPU-Util 40 %, then 90 %.
    let g = testing::gpu(0, 1.0, &[0.0, 40.0, 90.0]);
    let point = |t_s: f64, state: ThreadState| Point {
        t_s,
        dur_s: 0.01,
        stack: 0,
        gil_stack: None,
        class: Class { state, domain: None, basis: crate::Basis::Measured },
        split: false,
    };
    // In each second: 20 samples waiting on the GPU, 30 launching, 50 of the job's own work.
    let mut pts = Vec::new();
    for sec in [0.0, 1.0] {
        for i in 0..100 {
            let state = match i {
                0..20 => ThreadState::GpuSync,
                20..50 => ThreadState::Native,
                _ => ThreadState::Python,
            };
            pts.push(point(sec + 0.005 + f64::from(i) / 100.0, state));
        }
    }
    let w = weights_by_state(&g, &pts);
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    // 40 % busy: the waits take 20 of it, the launches the other 20 of their 30.
    assert!(close(w[0], 0.0) && close(w[20], 1.0 / 3.0) && close(w[50], 1.0), "{:?}", &w[..100]);
    // 90 % busy: only the job's own work keeps any idle time, a fifth of it.
    assert!(close(w[100], 0.0) && close(w[120], 0.0) && close(w[150], 0.2), "{:?}", &w[100..]);
    for (sec, util) in [(0, 0.4), (1, 0.9)] {
        let idle: f64 = w[sec * 100..sec * 100 + 100].iter().map(|x| x * 0.01).sum();
        assert!(close(idle, 1.0 - util), "second {sec}: {idle}");
    }
}

/// Each point's weight in the GPU's idle time, its tier by its state: a wait on the GPU, native
/// code launching, the rest.
fn weights_by_state(g: &crate::GpuSeries, pts: &[Point]) -> Vec<f64> {
    let tiers: Vec<Tier> = pts
        .iter()
        .map(|p| match p.class.state {
            ThreadState::GpuSync => Tier::Sync,
            ThreadState::Native => Tier::Launch,
            _ => Tier::Rest,
        })
        .collect();
    let refs: Vec<&Point> = pts.iter().collect();
    idle_weights(g, &refs, &tiers).into_iter().map(Option::unwrap).collect()
}

fn point(t_s: f64, dur_s: f64, stack: u32, state: ThreadState) -> Point {
    Point {
        t_s,
        dur_s,
        stack,
        gil_stack: None,
        class: Class { state, domain: None, basis: crate::Basis::Measured },
        split: false,
    }
}

/// The driver's own GPU-Util samples (a fifth of a second each) place the GPU's work where a
/// poll's one reading cannot. A stretch that caught fewer launches than its work needs puts the
/// rest on the job's own work only where the run's work reaches that work at all: else the
/// shortfall is the samples' error (a checkpoint after a few launches took a third of its
/// stretch's work on a real H100).
#[test]
fn a_stretch_with_few_launches_spills_its_work_only_where_the_runs_work_reaches() {
    let weights = |steps_util: f64| {
        // One poll over the whole second, at 30 %: it alone would give every sample a share.
        let mut g = testing::gpu(0, 1.0, &[0.0, 30.0]);
        // Five driver samples: the steps, then 50 % over a stretch that caught 40 ms of
        // launching and 160 ms of the job's own work.
        g.util_fine = (0..=4).map(|i| (f64::from(i) * 0.2, if i == 0 { 0.0 } else { steps_util })).collect();
        g.util_fine.push((1.0, 50.0));
        let state = |i: i32| match i {
            0..80 if i % 2 == 0 => ThreadState::GpuSync,
            0..84 => ThreadState::Native,
            _ => ThreadState::Python,
        };
        let pts: Vec<Point> = (0..100).map(|i| point(0.005 + f64::from(i) * 0.01, 0.01, 0, state(i))).collect();
        weights_by_state(&g, &pts)
    };
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    // Steps at 90 %: the waits whole, the launches 80 % of theirs. The run's 0.82 s of work fit
    // in its waits and launches: the last stretch's 60 ms short of its work stay idle.
    let w = weights(90.0);
    assert!(close(w[0], 0.0) && close(w[1], 0.2), "{:?}", &w[..4]);
    assert!(close(w[80], 0.0) && close(w[90], 1.0), "{:?}", &w[80..]);
    // Steps at 100 %: the run's work reaches its own work, and the last stretch's 60 ms go there.
    let w = weights(100.0);
    assert!(close(w[1], 0.0) && close(w[80], 0.0) && close(w[90], 1.0 - 0.06 / 0.16), "{:?}", &w[80..]);
}

/// Samples of the host's work after a wait on the GPU are drained until the next launch.
#[test]
fn the_queue_is_drained_from_a_wait_on_the_gpu_to_the_next_launch() {
    use Tier::*;
    let tiers = Tier::with_drains(
        [(Launch, false), (Rest, false), (Sync, true), (Rest, false), (Rest, false), (Launch, false), (Rest, false)]
            .into_iter(),
    );
    assert_eq!(tiers, [Launch, Rest, Sync, Drained, Drained, Launch, Rest]);
}
