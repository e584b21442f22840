//! Writes a generated 24-hour recording of 8 GPUs at 1 s (691 200 GPU-samples), for timing
//! `gpulse diagnose` on it. Values cycle through a real H200 trace; GPU 3 leaks memory slowly
//! and GPU 5 stalls every 5 minutes, so the rules have work to do.
//!
//! `cargo bench --bench day_recording` writes /tmp/gpulse-day.db (or `GPULSE_DAY_DB`); then
//! `/usr/bin/time -v target/release/gpulse diagnose /tmp/gpulse-day.db`.

use gpulse_model::{GpmMetrics, GpuSample, MIB, ProcessSample, Snapshot};
use gpulse_record::{RunMeta, Writer};

fn main() {
    let path =
        std::env::var_os("GPULSE_DAY_DB").map_or_else(|| std::path::PathBuf::from("/tmp/gpulse-day.db"), Into::into);
    let _ = std::fs::remove_file(&path);
    let trace = include_str!("../tests/fixtures/h200-2026-11-29/gpm_healthy.csv");
    // The training's steady state only: the trace's idle lead-in would read as stalls.
    let rows: Vec<_> = gpulse_model::trace::parse(trace)
        .expect("the fixture parses")
        .into_iter()
        .filter(|r| r.util_gpu_pct.is_some_and(|u| u >= 90))
        .collect();
    let meta = RunMeta { gpulse_version: "bench".into(), source: "generated".into(), ..RunMeta::default() };
    let devices: Vec<_> = (0..8)
        .map(|i| gpulse_model::DeviceInfo {
            index: i,
            uuid: format!("GPU-{i}"),
            name: "NVIDIA H200".into(),
            memory_total_bytes: Some(143_771 * MIB),
            ..Default::default()
        })
        .collect();
    let mut w = Writer::create(&path, &meta, &devices).unwrap();
    let start = 1_795_963_396_000_000i64;
    for k in 0..86_400usize {
        let gpus = (0..8u32)
            .map(|g| {
                let r = &rows[(k + g as usize * 31) % rows.len()];
                let stalled = g == 5 && k % 300 < 20;
                let leak = if g == 3 { k as u64 * 512 * 1024 } else { 0 };
                GpuSample {
                    gpu_index: g,
                    util_gpu_pct: if stalled { Some(0) } else { r.util_gpu_pct },
                    util_mem_pct: r.util_mem_pct,
                    memory_used_bytes: Some(41_772 * MIB + leak),
                    memory_total_bytes: Some(143_771 * MIB),
                    temperature_gpu_c: r.temperature_gpu_c,
                    power_draw_mw: r.power_draw_w.map(|w| (w * 1000.0) as u32),
                    clock_sm_mhz: r.clock_sm_mhz,
                    clocks_event_reasons: r.clocks_event_reasons,
                    gpm: Some(Box::new(GpmMetrics {
                        interval_ms: 1000.0,
                        sm_util_pct: r.gpm.as_ref().and_then(|m| m.sm_util_pct),
                        ..Default::default()
                    })),
                    processes: vec![ProcessSample {
                        pid: 1000 + g,
                        used_memory_bytes: Some(20 << 30),
                        ..Default::default()
                    }],
                    ..GpuSample::default()
                }
            })
            .collect();
        w.snapshot(&Snapshot { timestamp_us: start + k as i64 * 1_000_000, gpus }).unwrap();
    }
    w.finish().unwrap();
    println!("wrote {} ({} bytes)", path.display(), std::fs::metadata(&path).unwrap().len());
}
