//! CPU cost of one GPU-sample through the live NVML code path, against the stand-in library
//! with 8 scripted GPUs. Run: `cargo bench --bench poll_cost`.
//!
//! The figure includes the stand-in library's own work (a mutex and a state lookup per call),
//! so it is an upper bound on gpulse's own cost per GPU-sample.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use gpulse_model::Metric;
use gpulse_sample::{NvmlOptions, NvmlSource, Source};

fn fake_lib() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let ok = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--quiet", "--release", "-p", "fake-nvml"])
        .current_dir(&root)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "building the stand-in NVML library failed");
    root.join("target/release/libnvidia_ml.so")
}

fn scenario(gpus: usize) -> PathBuf {
    let dev = |i: usize| {
        format!(
            r#"{{"name":"NVIDIA H200","uuid":"GPU-{i:08}-0000-0000-0000-000000000000","pci_bus_id":"00000000:{:02X}:00.0",
            "base":{{"util_gpu_pct":50,"util_mem_pct":20,"memory_total_mib":143771,"memory_used_mib":40000,
            "memory_reserved_mib":615,"temperature_gpu_c":55,"temperature_memory_c":48,"power_w":500.5,"power_limit_w":700,
            "clock_sm_mhz":1980,"clock_mem_mhz":3201,"pstate":0,"clocks_event_reasons":0,"pcie_link_gen":5,"pcie_link_width":16,
            "ecc_enabled":true,"ecc_uncorrected_volatile":0,"ecc_corrected_volatile":0,"gpm_supported":true,
            "gpm":{{"sm":45.0,"occupancy":20.0,"any_tensor":10.0,"dram":15.0,"pcie_tx":7.0,"pcie_rx":30.0}}}},
            "processes":[{{"pid":{},"used_memory_mib":39000}}]}}"#,
            0x10 + i,
            1000 + i
        )
    };
    let devices: Vec<String> = (0..gpus).map(dev).collect();
    let path = std::env::temp_dir().join(format!("gpulse-bench-{}.json", std::process::id()));
    std::fs::write(&path, format!(r#"{{"devices":[{}]}}"#, devices.join(","))).unwrap();
    path
}

/// Times `polls` samples; with `pace`, sleeps that long between them, untimed, so that each
/// poll finds a GPM window due (windows last at least 100 ms).
fn measure(label: &str, options: NvmlOptions, gpus: usize, polls: u32, pace: Option<Duration>) {
    let mut source = NvmlSource::open(options).expect("stand-in NVML opens");
    source.sample().unwrap();
    std::thread::sleep(Duration::from_millis(120));
    let mut busy = Duration::ZERO;
    if pace.is_none() {
        // Back to back: one clock read around them all.
        let start = Instant::now();
        for _ in 0..polls {
            std::hint::black_box(source.sample().unwrap());
        }
        busy = start.elapsed();
    }
    for _ in 0..polls * u32::from(pace.is_some()) {
        let start = Instant::now();
        std::hint::black_box(source.sample().unwrap());
        busy += start.elapsed();
        std::thread::sleep(pace.unwrap_or_default());
    }
    let per = busy.as_secs_f64() * 1e6 / f64::from(polls) / gpus as f64;
    println!("{label:<48} {per:>7.2} µs per GPU-sample ({gpus} GPUs, {polls} polls)");
}

fn main() {
    let lib = fake_lib();
    let gpus = 8;
    // SAFETY: single-threaded at this point; the stand-in library reads this at nvmlInit.
    unsafe { std::env::set_var("GPULSE_FAKE_NVML_SCENARIO", scenario(gpus)) };
    let base = NvmlOptions { lib_path: Some(lib), ..NvmlOptions::default() };
    let watch = vec![Metric::Utilization, Metric::Memory, Metric::TemperatureGpu, Metric::PowerDraw, Metric::Gpm];
    measure(
        "watch fields (util, memory, temp, power, GPM)",
        NvmlOptions { metrics: Some(watch), ..base.clone() },
        gpus,
        2000,
        None,
    );
    measure("every field, processes, 1 s GPM windows", base.clone(), gpus, 2000, None);
    let all_but_buffer: Vec<Metric> = Metric::ALL.iter().copied().filter(|m| *m != Metric::UtilSamples).collect();
    let no_buffer = NvmlOptions { metrics: Some(all_but_buffer), ..base.clone() };
    measure("every field but the utilization buffer", no_buffer, gpus, 2000, None);
    // The shortest window, 100 ms, and a poll just after each one is due: every poll closes one.
    let fast_gpm = NvmlOptions { gpm_every: Duration::from_millis(100), ..base };
    measure("every field, processes, a GPM window every poll", fast_gpm, gpus, 40, Some(Duration::from_millis(101)));
}
