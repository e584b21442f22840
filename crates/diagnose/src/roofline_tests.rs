use super::*;
use crate::rules::testing::{run, steady};

/// An H200 for `n` seconds at a fixed clock, with the given pipe activities (percent).
fn h200(n: usize, mhz: f64, pipes: &[(&str, f64)]) -> GpuSeries {
    let mut g = steady(0, 95.0, n);
    g.name = Some("NVIDIA H200".into());
    g.max_sm_clock_mhz = Some(1980.0);
    g.sm_clock_mhz = vec![Some(mhz); n];
    g.sm_pct = vec![Some(90.0); n];
    for (pipe, pct) in pipes {
        let v = vec![Some(*pct); n];
        match *pipe {
            "hmma" => g.hmma_pct = v,
            "tensor" => g.tensor_pct = v,
            "fp32" => g.fp32_pct = v,
            "fp64" => g.fp64_pct = v,
            "dfma" => g.dfma_pct = v,
            "dram" => g.dram_pct = v,
            other => panic!("{other}"),
        }
    }
    g
}

fn one(g: GpuSeries) -> Efficiency {
    efficiency(&run(vec![g])).remove(0)
}

#[test]
fn half_busy_hmma_at_the_datasheet_clock_is_half_the_datasheet_peak() {
    // 132 SMs × 4096 BF16 FLOP per clock × 1830 MHz = 989.5 TFLOP/s; half of it busy.
    let e = one(h200(30, 1830.0, &[("hmma", 50.0), ("tensor", 50.0), ("fp32", 4.0), ("dram", 20.0)]));
    let m = e.math.as_ref().unwrap();
    assert_eq!((m.pipe, m.active_pct), (Pipe::Hmma, 50.0));
    let rate = |p| m.rates.iter().find(|r| r.precision == p).unwrap().achieved_per_s;
    assert!((rate(Precision::Bf16Tensor) / 494.75e12 - 1.0).abs() < 1e-3, "{}", rate(Precision::Bf16Tensor));
    assert!((rate(Precision::Tf32Tensor) / 247.4e12 - 1.0).abs() < 1e-3, "TF32: half the FLOPs per busy cycle");
    let [lo, hi] = m.utilization_ratio().unwrap();
    assert!((lo - 0.5).abs() < 1e-3 && (hi - 0.5).abs() < 1e-3, "the share does not hang on the precision: {lo} {hi}");
    assert_eq!(e.bound, Some(Bound::Math), "half the roof: bound by it");
    assert_eq!(e.dram_bytes_per_s, Some(0.2 * 4.8e12));
    assert_eq!(e.headroom(), Some(2.0));
    let line = e.line();
    assert!(line.starts_with("GPU 0 math-bound: tensor cores (HMMA) 50% busy at 1830 MHz"), "{line}");
    assert!(
        line.contains("50% of peak (BF16/FP16 tensor 495 of 990 TFLOP/s or TF32 tensor 247 of 494 TFLOP/s"),
        "{line}"
    );
    assert!(line.contains("precision not told apart") && line.contains("headroom ≤ 2.0×"), "{line}");
}

#[test]
fn a_lower_clock_lowers_the_rate_and_the_share_with_it() {
    let e = one(h200(30, 1373.0, &[("hmma", 80.0), ("dram", 10.0)]));
    let [lo, _] = e.math.unwrap().utilization_ratio().unwrap();
    // 80 % busy at 1373 of the datasheet's 1830 MHz: 60 % of the datasheet peak.
    assert!((lo - 0.8 * 1373.0 / 1830.0).abs() < 1e-3, "{lo}");
}

#[test]
fn dram_at_80_percent_is_memory_bound_and_light_work_is_neither() {
    let e = one(h200(30, 1980.0, &[("fp32", 10.0), ("tensor", 0.0), ("dram", 80.0)]));
    assert_eq!(e.bound, Some(Bound::Memory));
    assert!((e.dram_ratio().unwrap() - 0.8).abs() < 1e-9);
    assert!(e.line().contains("memory-bound: DRAM 80% busy"), "{}", e.line());
    let m = e.math.as_ref().unwrap();
    assert_eq!(m.pipe, Pipe::Fp32, "the busiest pipe");
    // 10 % of 132 SMs × 256 FLOP per clock at 1980 MHz.
    assert!((m.rates[0].achieved_per_s - 0.1 * 132.0 * 256.0 * 1980e6).abs() < 1e6);
    let e = one(h200(30, 1980.0, &[("fp32", 10.0), ("tensor", 1.0), ("dram", 5.0)]));
    assert_eq!(e.bound, Some(Bound::Neither));
    assert_eq!(e.headroom(), Some(10.0));
    assert!(
        e.line().contains("bound by neither math nor memory") && e.line().contains("headroom ≤ 10.0×"),
        "{}",
        e.line()
    );
}

#[test]
fn an_old_recording_takes_any_tensor_as_hmma_and_says_so() {
    let e = one(h200(30, 1830.0, &[("tensor", 40.0), ("fp32", 2.0), ("dram", 10.0)]));
    assert_eq!(e.math.as_ref().unwrap().pipe, Pipe::AnyTensor);
    assert!(e.limits.iter().any(|l| l.contains("any-tensor activity only")), "{:?}", e.limits);
}

#[test]
fn an_unknown_device_has_shares_but_no_rates_and_no_invented_numbers() {
    let mut g = h200(30, 1830.0, &[("hmma", 60.0), ("dram", 10.0)]);
    g.name = Some("NVIDIA H100 NVL".into());
    let e = one(g);
    assert_eq!(e.product, None);
    assert!(e.math.as_ref().unwrap().rates.is_empty());
    assert_eq!((e.dram_bytes_per_s, e.bound), (None, Some(Bound::Math)));
    assert!(e.limits[0].starts_with("no roof for NVIDIA H100 NVL"));
    let mut g = h200(30, 1830.0, &[("hmma", 60.0)]);
    g.sm_clock_mhz = vec![None; 30];
    assert!(one(g).math.unwrap().rates.is_empty(), "no clock, no rate");
}

#[test]
fn fp32_matmuls_with_idle_tensor_cores_say_tensor_idle_as_the_finding_does() {
    let e = one(h200(30, 1980.0, &[("fp32", 72.0), ("tensor", 0.0), ("hmma", 0.0), ("dram", 10.0)]));
    assert_eq!(e.math.as_ref().unwrap().pipe, Pipe::Fp32);
    assert!(e.tensor_idle);
    assert!(e.line().contains("tensor cores idle (tensor_idle)"), "{}", e.line());
    let findings = crate::diagnose_run(&run(vec![h200(30, 1980.0, &[("fp32", 72.0), ("tensor", 0.0)])]));
    assert!(findings.iter().any(|f| f.id == crate::FindingId::TensorIdle));
}

#[test]
fn joules_per_step_come_from_two_counter_readings_and_the_steps_between() {
    // 60 s at 1 step a second; the counter read at 0, 30 and 60 s, 500 W throughout.
    let mut g = h200(61, 1830.0, &[("hmma", 50.0), ("dram", 10.0)]);
    g.energy_mj = (0..61).map(|i| Some(f64::from(i / 30 * 30) * 500_000.0)).collect();
    let mut r = run(vec![g]);
    let step_s = (1..=60).map(|i| (f64::from(i), 1.0)).collect();
    r.steps = Some(crate::Steps { step_s, ..crate::rules::testing::steps(1, 60, [0.0, 60.0]) });
    let e = efficiency(&r).remove(0).energy.unwrap();
    assert_eq!((e.steps, e.span_s), (60, [0.0, 60.0]));
    assert!((e.joules_per_step - 500.0).abs() < 1e-9, "{}", e.joules_per_step);
    assert_eq!(e.joules_per_1k_samples, None, "the loop did not say its batch");
    r.events.push((gpulse_model::EventKind::Mark, 1.0, serde_json::json!({"name": "batch", "samples_per_step": 256})));
    let e = efficiency(&r).remove(0);
    assert!((e.energy.as_ref().unwrap().joules_per_1k_samples.unwrap() - 500.0 / 256.0 * 1000.0).abs() < 1e-9);
    assert_eq!(e.energy_line().unwrap(), "GPU 0 energy: 500.0 J per step, 1953 J per 1,000 samples (over 60 steps)");
    r.steps = None;
    let e = efficiency(&r).remove(0);
    assert!(e.energy.is_none() && e.limits.iter().any(|l| l.contains("no step marks")), "{:?}", e.limits);
}

#[test]
fn an_idle_gpu_has_no_roofline_rather_than_neither_roof() {
    let mut idle = h200(30, 345.0, &[("hmma", 0.0), ("fp32", 0.0), ("dram", 0.0)]);
    idle.gpu = 1;
    idle.util_pct = vec![Some(0.0); 30];
    idle.sm_pct = vec![Some(0.0); 30];
    idle.active = (0, 30);
    let busy = h200(30, 1980.0, &[("hmma", 60.0), ("dram", 20.0)]);
    let gpus: Vec<u32> = efficiency(&run(vec![busy, idle.clone()])).iter().map(|e| e.gpu).collect();
    assert_eq!(gpus, [0], "the idle GPU 1 has no line");
    // A GPU at 1 % now and then (a monitor's context) is idle too; at 10 % it works.
    idle.util_pct = (0..30).map(|i| Some(if i % 2 == 0 { 2.0 } else { 0.0 })).collect();
    assert!(efficiency(&run(vec![idle.clone()])).is_empty());
    idle.util_pct = vec![Some(10.0); 30];
    assert_eq!(efficiency(&run(vec![idle])).len(), 1);
}

#[test]
fn the_brief_line_keeps_the_bound_the_share_and_the_headroom() {
    let e = one(h200(30, 1830.0, &[("hmma", 50.0), ("dram", 10.0)]));
    let (line, brief) = (e.line(), e.brief());
    assert!(line.contains("TFLOP/s") && line.contains("TB/s"), "{line}");
    assert!(!brief.contains("TFLOP/s") && !brief.contains("TB/s"), "{brief}");
    assert!(brief.starts_with("GPU 0 ") && brief.contains("50% of peak") && brief.contains("headroom"), "{brief}");
    assert!(brief.len() * 2 < line.len() + 40, "{brief} | {line}");
    let idle = one(h200(30, 1980.0, &[("fp32", 72.0), ("tensor", 0.0), ("hmma", 0.0), ("dram", 10.0)]));
    assert!(idle.brief().contains("tensor cores idle (tensor_idle)"), "{}", idle.brief());
}

#[test]
fn a_gpu_doing_no_math_has_no_math_part() {
    let e = one(h200(30, 1980.0, &[("hmma", 0.0), ("fp32", 0.2), ("dram", 85.0)]));
    assert_eq!(e.bound, Some(Bound::Memory));
    assert!(!e.line().contains("of peak") && !e.line().contains("TFLOP/s"), "{}", e.line());
    assert!(e.line().contains("TB/s"), "{}", e.line());
}
