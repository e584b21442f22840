//! Bytes on disk per GPU-sample of the base fields over a long recording, written through the
//! live (crash-safe, 4 KiB pages, WAL) writer. Run: `cargo bench --bench record_size`.
//!
//! Values follow a real H200 trace (tests/fixtures/h200-2026-11-29/gpm_healthy.csv), cycled over
//! 8 GPUs at 1 s, so they vary as real readings do.

use std::time::Instant;

use gpulse_model::{GpuSample, MIB, Snapshot};
use gpulse_record::{RunMeta, Writer};

fn main() {
    let trace = include_str!("../tests/fixtures/h200-2026-11-29/gpm_healthy.csv");
    let rows = gpulse_model::trace::parse(trace).expect("the fixture parses");
    let path = std::env::temp_dir().join(format!("gpulse-size-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let meta = RunMeta { gpulse_version: "bench".into(), source: "bench".into(), ..RunMeta::default() };
    let devices: Vec<_> = (0..8)
        .map(|i| gpulse_model::DeviceInfo {
            index: i,
            uuid: format!("GPU-{i}"),
            name: "NVIDIA H200".into(),
            ..Default::default()
        })
        .collect();
    let mut w = Writer::create(&path, &meta, &devices).unwrap();
    let polls = 50_000;
    let start = Instant::now();
    for k in 0..polls {
        let gpus = (0..8u32)
            .map(|g| {
                let r = &rows[(k + g as usize * 17) % rows.len()];
                GpuSample {
                    gpu_index: g,
                    util_gpu_pct: r.util_gpu_pct,
                    util_mem_pct: r.util_mem_pct,
                    memory_used_bytes: r.memory_used_mib.map(|m| m * MIB),
                    temperature_gpu_c: r.temperature_gpu_c,
                    power_draw_mw: r.power_draw_w.map(|w| (w * 1000.0) as u32),
                    clock_sm_mhz: r.clock_sm_mhz,
                    clock_mem_mhz: Some(3201),
                    pstate: Some(0),
                    clocks_event_reasons: r.clocks_event_reasons,
                    memory_total_bytes: Some(143_771 * MIB),
                    ..GpuSample::default()
                }
            })
            .collect();
        w.snapshot(&Snapshot { timestamp_us: 1_795_963_396_000_000 + k as i64 * 1_000_000, gpus }).unwrap();
    }
    w.finish().unwrap();
    let secs = start.elapsed().as_secs_f64();
    let n = polls * 8;
    let size = std::fs::metadata(&path).unwrap().len();
    println!(
        "{n} GPU-samples of the base fields: {size} bytes, {:.1} bytes each (target ≤ 48)",
        size as f64 / n as f64
    );
    println!("writing: {:.2} µs per GPU-sample", secs * 1e6 / n as f64);
    if std::env::var_os("KEEP").is_some() {
        println!("kept {}", path.display());
    } else {
        let _ = std::fs::remove_file(&path);
    }
}
