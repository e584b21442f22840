//! How often the recorder reads slow and costly fields, counted by the stand-in NVML library,
//! and that a value not re-read is the last one read, never an invented one. Its own test
//! binary: it sets the stand-in's scenario in the process environment.

use std::path::PathBuf;
use std::time::Duration;

use gpulse_model::{Absence, Every, GPM_RECORDED, HAND_READ, Metric, Snapshot, Source as Row};
use gpulse_sample::{Cadence, NvmlOptions, NvmlSource, Source};

/// The stand-in library, built with the profile of the tests.
fn fake_lib() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_gpulse"));
    let dir = bin.parent().expect("binary has a directory").to_path_buf();
    let mut cmd = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(["build", "--quiet", "-p", "fake-nvml"]).current_dir(env!("CARGO_MANIFEST_DIR"));
    if dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    assert!(cmd.status().expect("cargo runs").success(), "building the stand-in NVML library failed");
    dir.join("libnvidia_ml.so")
}

/// Calls of `name` so far, from the stand-in's own counter (the library gpulse loaded).
fn calls(lib: &std::path::Path, name: &str) -> u64 {
    let path = std::ffi::CString::new(lib.as_os_str().as_encoded_bytes()).unwrap();
    let sym = std::ffi::CString::new("gpulseFakeCallCount").unwrap();
    let name = std::ffi::CString::new(name).unwrap();
    // SAFETY: the library is loaded already (NOLOAD), and the symbol has this signature.
    unsafe {
        let h = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
        assert!(!h.is_null(), "the stand-in is loaded");
        let f = libc::dlsym(h, sym.as_ptr());
        assert!(!f.is_null());
        let f: extern "C" fn(*const std::os::raw::c_char) -> u64 = std::mem::transmute(f);
        f(name.as_ptr())
    }
}

/// One GPU whose energy counter, power limit and process utilization change every scenario
/// second; scenario time runs 100 times faster than the clock. PCIe link generation is missing,
/// as on an older driver.
fn scenario() -> tempfile::TempDir {
    let me = std::process::id();
    let json = format!(
        r#"{{"driver_version": "580.159.04", "cuda_driver_version": 13000, "speed": 100.0,
        "unsupported_functions": ["nvmlDeviceGetCurrPcieLinkGeneration"],
        "devices": [{{"name": "NVIDIA H200", "uuid": "GPU-1", "pci_bus_id": "00000000:00:06.0",
          "base": {{"util_gpu_pct": 50, "util_mem_pct": 5, "memory_total_bytes": 150754820096,
            "memory_reserved_bytes": 644939776, "memory_used_bytes": 1000000, "temperature_gpu_c": 40,
            "power_w": 300.0, "power_limit_w": 700.0, "enforced_power_limit_w": 700.0, "energy_j": 1000.0,
            "clock_sm_mhz": 1980, "clock_mem_mhz": 3201, "clock_graphics_mhz": 1980, "pstate": 0,
            "clocks_event_reasons": 0, "pcie_link_width": 16, "ecc_enabled": true,
            "ecc_uncorrected_volatile": 0, "ecc_corrected_volatile": 0, "gpm_supported": true,
            "gpm": {{"sm": 40.0, "occupancy": 20.0, "any_tensor": 10.0, "hmma": 9.0, "dram": 30.0,
              "fp32": 5.0, "fp16": 1.0, "graphics": 2.0, "pcie_tx": 4.0, "pcie_rx": 3.0, "nvlink_tx": 0.0, "nvlink_rx": 0.0}}}},
          "timeline": [{{"t_s": 1, "energy_j": 1300.0, "power_limit_w": 650.0}},
                       {{"t_s": 2, "energy_j": 1600.0, "power_limit_w": 600.0}},
                       {{"t_s": 3, "energy_j": 1900.0}}],
          "processes": [{{"pid": {me}, "used_memory_mib": 100, "sm_util_pct": 42, "mem_util_pct": 7}}]}}]}}"#
    );
    let dir = tempfile::Builder::new().prefix("gpulse-cadence-").tempdir().unwrap();
    std::fs::write(dir.path().join("scenario.json"), json).unwrap();
    dir
}

/// What the metric table says the recorder calls in `polls` polls close together: each hand-read
/// row's C function (its `Call.name` up to the argument), once a poll for a row read every poll
/// (or held on the cadence `fast`, made to read every poll), once in all for a held one; a call
/// with several arguments (`nvmlDeviceGetClockInfo(SM)`) counts once for each. Rows read through
/// `nvmlDeviceGetFieldValues` share it with the field-value table and are left out.
fn table_says(polls: u64, fast: Option<Every>) -> Vec<(&'static str, u64)> {
    let mut calls: Vec<(&str, Every)> = Vec::new();
    for m in HAND_READ {
        let Row::Call(c) = m.source else { panic!("{} is hand-read", m.key) };
        match calls.iter().find(|x| x.0 == c.name) {
            Some(x) => assert_eq!(x.1, m.every, "{}: one call, one cadence", c.name),
            None => calls.push((c.name, m.every)),
        }
    }
    let mut out: Vec<(&str, u64)> = Vec::new();
    for (name, every) in calls {
        let function = name.split('(').next().unwrap();
        if function == "nvmlDeviceGetFieldValues" {
            continue;
        }
        // The PCIe call is made only on `NvmlOptions::pcie_every`, left unset here as everywhere
        // (GPM gives the traffic).
        let n = match every {
            Every::Pcie => 0,
            e if e == Every::Poll || Some(e) == fast => polls,
            Every::Poll | Every::Settings | Every::PowerLimit | Every::Energy => 1,
        };
        match out.iter_mut().find(|x| x.0 == function) {
            Some(x) => x.1 += n,
            None => out.push((function, n)),
        }
    }
    out
}

fn polls(source: &mut NvmlSource, n: usize) -> Vec<Snapshot> {
    (0..n).map(|_| source.sample().unwrap()).collect()
}

#[test]
fn the_recorder_reads_slow_fields_on_their_cadence_and_holds_what_it_read() {
    let lib = fake_lib();
    let scenario = scenario();
    // SAFETY: this test binary has this one test, so no other thread reads the environment.
    unsafe { std::env::set_var("GPULSE_FAKE_NVML_SCENARIO", scenario.path().join("scenario.json")) };
    let open = |cadence: Cadence| {
        let options = NvmlOptions {
            lib_path: Some(lib.clone()),
            process_util: true,
            cadence,
            gpm_metrics: Some(GPM_RECORDED.to_vec()),
            ..NvmlOptions::default()
        };
        NvmlSource::open(options).expect("the stand-in opens")
    };
    let counted = [
        "nvmlDeviceGetPowerManagementLimit",
        "nvmlDeviceGetEnforcedPowerLimit",
        "nvmlDeviceGetTotalEnergyConsumption",
        "nvmlDeviceGetSamples",
        "nvmlDeviceGetProcessUtilization",
        "nvmlDeviceGetCurrPcieLinkWidth",
        "nvmlDeviceGetTotalEccErrors",
        "nvmlDeviceGetPowerUsage",
    ];
    // 30 polls over ~0.3 s (30 scenario seconds) on the recorder's cadence of 5 and 10 s: each
    // held field is read once, at the first poll; power draw every poll.
    let mut rec = open(Cadence::RECORDER);
    let said = table_says(30, None);
    let before: Vec<u64> = counted.iter().map(|c| calls(&lib, c)).collect();
    let before_said: Vec<u64> = said.iter().map(|c| calls(&lib, c.0)).collect();
    let mut got = Vec::new();
    for _ in 0..30 {
        got.push(rec.sample().unwrap());
        std::thread::sleep(Duration::from_millis(10));
    }
    let delta: Vec<u64> = counted.iter().zip(&before).map(|(c, b)| calls(&lib, c) - b).collect();
    // The metric table's cadence and NVML call for each hand-read row are what the reader does.
    let done: Vec<(&str, u64)> = said.iter().zip(&before_said).map(|(c, b)| (c.0, calls(&lib, c.0) - b)).collect();
    assert_eq!(done, said, "calls made in 30 polls, against the table's rows");
    // ECC has two counters; the buffer and process utilization take NVML's two calls (size,
    // then fill) per read.
    assert_eq!(delta, [1, 1, 1, 2, 2, 1, 2, 30], "{counted:?}");
    let first = &got[0].gpus[0];
    assert_eq!(first.energy_mj, Some(1_000_000));
    assert_eq!(first.power_limit_mw, Some(700_000));
    assert_eq!(first.processes[0].sm_util_pct, Some(42));
    for s in &got {
        let g = &s.gpus[0];
        assert_eq!(g.energy_mj, first.energy_mj, "held, not re-read, not invented");
        assert_eq!(g.power_limit_mw, first.power_limit_mw);
        assert_eq!((g.pcie_link_gen, g.pcie_link_width), (None, Some(16)));
        assert_eq!(g.absence(Metric::PcieLink), Some(Absence::NotAvailable), "its absence is held too");
        assert_eq!(g.ecc_uncorrected_volatile, Some(0));
        assert_eq!(g.processes[0].sm_util_pct, Some(42), "the last reading, not none");
        assert!(g.util_gpu_samples.is_empty() || std::ptr::eq(s, &got[0]), "the buffer is read once");
    }
    // GPM: the recorded metrics only; one asked for reads, one not asked for is absent.
    let gpm = got.iter().rev().find_map(|s| s.gpus[0].gpm.clone()).expect("a window closed");
    assert_eq!((gpm.sm_util_pct, gpm.dram_bw_util_pct), (Some(40.0), Some(30.0)));
    assert_eq!((gpm.hmma_tensor_util_pct, gpm.fp16_util_pct), (Some(9.0), Some(1.0)), "the roofline's pipes");
    assert_eq!(gpm.graphics_util_pct, None);
    assert_eq!(gpm.nvlink_tx_bytes_per_s, Some(0.0), "NVLink's bytes are recorded");
    drop(rec);

    // Each held cadence on its own read every poll: its rows' calls follow, the others' stay held.
    for (fast, cadence) in [
        (Every::PowerLimit, Cadence { power_limit: Duration::ZERO, ..Cadence::RECORDER }),
        (Every::Settings, Cadence { settings: Duration::ZERO, ..Cadence::RECORDER }),
        (Every::Energy, Cadence { energy: Duration::ZERO, ..Cadence::RECORDER }),
    ] {
        let mut source = open(cadence);
        let said = table_says(5, Some(fast));
        let before: Vec<u64> = said.iter().map(|c| calls(&lib, c.0)).collect();
        polls(&mut source, 5);
        let done: Vec<(&str, u64)> = said.iter().zip(&before).map(|(c, b)| (c.0, calls(&lib, c.0) - b)).collect();
        assert_eq!(done, said, "{fast:?} read every poll");
    }

    // A view reads every poll, and sees the counter move.
    let mut view = open(Cadence::VIEW);
    let before: Vec<u64> = counted.iter().map(|c| calls(&lib, c)).collect();
    let seen = polls(&mut view, 5);
    std::thread::sleep(Duration::from_millis(40));
    let later = view.sample().unwrap();
    let delta: Vec<u64> = counted.iter().zip(&before).map(|(c, b)| calls(&lib, c) - b).collect();
    assert_eq!(delta[2..5], [6, 12, 12], "energy, buffer and process utilization every poll");
    assert!(later.gpus[0].energy_mj > seen[0].gpus[0].energy_mj, "the counter moved: read afresh");
}
