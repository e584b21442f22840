//! The stand-in library's fidelity, shown by NVML clients nobody here wrote: gpustat and nvitop
//! (through pynvml) load it as `libnvidia-ml.so.1` and must print the scenario's values.
//! CI installs them and sets `GPULSE_REQUIRE_PY_CLIENTS=1`; elsewhere a missing client skips.

use std::process::Command;

use super::support::*;

const SCENARIO: &str = r#"{"devices":[{"name":"NVIDIA H200","uuid":"GPU-11111111-2222-3333-4444-555555555555",
  "pci_bus_id":"00000000:19:00.0","base":{"util_gpu_pct":37,"util_mem_pct":12,"memory_total_mib":143771,
  "memory_reserved_mib":615,"memory_used_mib":20480,"temperature_gpu_c":45,"power_w":321.5,"power_limit_w":700,
  "clock_sm_mhz":1755,"clock_mem_mhz":3201,"pstate":0,"persistence_mode":true,"compute_mode":0,
  "ecc_enabled":true,"ecc_uncorrected_volatile":0},
  "processes":[{"pid":4242,"name":"python3","used_memory_mib":20000}]}]}"#;

/// A command that loads the stand-in library as the system's NVML, from `dir`, which holds it
/// and the scenario until dropped.
fn client(program: &str, dir: &Temp) -> Command {
    std::os::unix::fs::symlink(fake_lib(), dir.join("libnvidia-ml.so.1")).unwrap();
    std::fs::write(dir.join("scenario.json"), SCENARIO).unwrap();
    let mut cmd = Command::new(program);
    cmd.env("LD_LIBRARY_PATH", dir.path()).env("GPULSE_FAKE_NVML_SCENARIO", dir.join("scenario.json"));
    cmd
}

#[test]
fn gpustat_prints_the_scenario() {
    let Some(py) = python_with("gpustat", "against the stand-in library") else { return };
    let (code, out, err) = run(client(py, &fresh_dir("py", "gpustat")).args(["-m", "gpustat", "--json"]));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["driver_version"], "580.159.04");
    let g = &v["gpus"][0];
    assert_eq!(g["name"], "NVIDIA H200");
    assert_eq!(g["uuid"], "GPU-11111111-2222-3333-4444-555555555555");
    assert_eq!(g["utilization.gpu"], 37);
    assert_eq!(g["memory.used"], 20480);
    assert_eq!(g["memory.total"], 143771);
    assert_eq!(g["temperature.gpu"], 45);
    assert_eq!(g["power.draw"], 321);
    assert_eq!(g["enforced.power.limit"], 700);
    assert!(g["fan.speed"].is_null(), "no fan is absent, not 0: {g}");
}

#[test]
fn nvitop_prints_the_scenario() {
    let Some(py) = python_with("nvitop", "against the stand-in library") else { return };
    let script = "from nvitop import Device\n\
        d = Device.all()[0]\n\
        print(d.name(), d.uuid(), d.bus_id(), d.gpu_utilization(), d.memory_used(), d.temperature(), d.power_usage(), d.power_limit(), d.sm_clock(), d.fan_speed(), d.persistence_mode(), d.performance_state(), sorted(d.processes()))";
    let (code, out, err) = run(client(py, &fresh_dir("py", "nvsmi")).args(["-c", script]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        format!(
            "NVIDIA H200 GPU-11111111-2222-3333-4444-555555555555 00000000:19:00.0 37 {} 45 321500 700000 1755 N/A Enabled P0 [4242]",
            20480u64 * 1024 * 1024
        )
    );
    let (code, out, err) = run(client(py, &fresh_dir("py", "nvitop")).args(["-m", "nvitop", "-1"]));
    assert_eq!(code, 0, "{err}");
    // nvitop rounds 321.5 W to whole watts.
    assert!(out.contains("45C") && out.contains("322W / 700W") && out.contains("37%"), "{out}");
    assert!(!err.contains("Segmentation") && !out.contains("Traceback"), "{err}");
}
