//! Writing the HTML report (and the PNG) of a day of 8 GPUs at 1 s: 86 400 samples a GPU, each
//! chart downsampled to its minima and maxima. GPU 3 leaks and GPU 5 stalls 20 s every 5 minutes,
//! as in `day_recording`, so findings and hundreds of pauses are drawn. Run:
//! `cargo bench --bench report_day`

use std::time::Instant;

use gpulse_diagnose::{GpuSeries, Run};

const SAMPLES: usize = 86_400;

fn gpu(g: u32) -> GpuSeries {
    let t_s: Vec<f64> = (0..SAMPLES).map(|k| k as f64).collect();
    let stalled = |k: usize| g == 5 && k % 300 < 20;
    let wave =
        |k: usize, lo: f64, hi: f64| lo + (hi - lo) * (0.5 + 0.5 * ((k as f64 + f64::from(g) * 31.0) / 17.0).sin());
    let each = |f: &dyn Fn(usize) -> f64| (0..SAMPLES).map(|k| Some(f(k))).collect::<Vec<_>>();
    let listing = std::sync::Arc::new(vec![gpulse_model::ProcessSample {
        pid: 1000 + g,
        used_memory_bytes: Some(20 << 30),
        class: Some(gpulse_model::GpuProcessClass::Tree),
        ..Default::default()
    }]);
    GpuSeries {
        gpu: g,
        util_pct: each(&|k| if stalled(k) { 0.0 } else { wave(k, 90.0, 100.0) }),
        sm_pct: each(&|k| if stalled(k) { 0.0 } else { wave(k, 70.0, 85.0) }),
        mem_used_bytes: each(&|k| (41_772u64 << 20) as f64 + if g == 3 { k as f64 * 524_288.0 } else { 0.0 }),
        mem_total_bytes: Some((143_771u64 << 20) as f64),
        power_w: each(&|k| if stalled(k) { 120.0 } else { wave(k, 600.0, 700.0) }),
        temp_c: each(&|k| wave(k, 50.0, 62.0)),
        sm_clock_mhz: each(&|k| wave(k, 1_900.0, 1_980.0)),
        max_sm_clock_mhz: Some(1_980.0),
        reasons: vec![None; SAMPLES],
        processes: vec![listing; SAMPLES],
        active: (0, SAMPLES),
        lost_at_s: None,
        t_s,
        ..GpuSeries::default()
    }
}

fn main() {
    let run = Run {
        gpus: (0..8).map(gpu).collect(),
        start_us: 1_795_963_396_000_000,
        has_gpm: true,
        has_processes: true,
        host_cpu: (0..SAMPLES).map(|k| (k as f64, 35.0)).collect(),
        ..Run::default()
    };
    let diagnosis = gpulse_diagnose::Diagnosis::of(&run);
    let ids: Vec<&str> = diagnosis.findings.iter().map(|f| f.id.as_str()).collect();
    let a = gpulse_report::Analysis { run, diagnosis, gpus: 8, samples: 8 * SAMPLES, ..Default::default() };
    let mut best = f64::INFINITY;
    let mut html = String::new();
    for _ in 0..5 {
        let start = Instant::now();
        html = gpulse_report::html::render("day.db", &a);
        std::fs::write("/tmp/gpulse-report-day.html", &html).unwrap();
        best = best.min(start.elapsed().as_secs_f64());
    }
    let start = Instant::now();
    let (svg, _) = gpulse_report::html::composite_svg("day.db", &a);
    let png = gpulse_report::png::render(&svg).unwrap();
    std::fs::write("/tmp/gpulse-report-day.png", &png.bytes).unwrap();
    let png_s = start.elapsed().as_secs_f64();
    println!("findings: {ids:?}");
    println!(
        "HTML of 8 GPUs × {SAMPLES} samples: best of 5 {best:.3} s ({:.1} MB); PNG {png_s:.2} s ({:.1} MB)",
        html.len() as f64 / 1e6,
        png.bytes.len() as f64 / 1e6
    );
}
