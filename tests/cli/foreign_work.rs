//! Another process's work is not the job's: `gpulse run` of a job that never touches the GPU,
//! while the stand-in lists a live process outside the job computing at 97 % of the SMs on a busy
//! GPU. The job is not healthy, gets no roofline, and its time is not the other's kernels.

use std::process::Command;

use super::support::{KillOnDrop, fresh_dir, gpulse, root, run, scenario_file};

#[test]
fn a_job_without_a_gpu_is_not_credited_with_anothers_work() {
    let dir = fresh_dir("foreign", "no_gpu");
    let outsider = KillOnDrop::new(Command::new("sleep").arg("600").spawn().unwrap());
    let trace = root().join("tests/fixtures/h200-2026-11-29/gpm_healthy.csv");
    let scenario = serde_json::json!({
        "speed": 20.0,
        "devices": [{
            "name": "NVIDIA H200",
            "uuid": "GPU-00000000-0000-0000-0000-000000000039",
            "pci_bus_id": "00000000:00:06.0",
            "trace": trace,
            "base": {"memory_total_mib": 143771, "gpm_supported": true},
            "processes": [{"pid": outsider.id(), "name": "python3", "used_memory_mib": 20672, "sm_util_pct": 97, "mem_util_pct": 50}]
        }]
    });
    let path = scenario_file("foreign", &scenario.to_string());
    let rec = dir.join("r.db");
    let mut cmd = gpulse(None);
    cmd.env("GPULSE_FAKE_NVML_SCENARIO", &path);
    cmd.args(["run", "--status", "off", "--no-report", "--interval", "200ms", "-o"]).arg(&rec);
    let (code, _, err) = run(cmd.args(["--", "sleep", "4"]));
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(&rec));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let findings = v["findings"].as_array().unwrap();
    let ids: Vec<&str> = findings.iter().map(|f| f["id"].as_str().unwrap()).collect();
    // Nothing about the GPU's work: it is the other's (on the H200 its FP32 matmuls read as the
    // job's tensor_idle before).
    assert_eq!(ids, ["foreign_process"], "{v:#}");
    assert!(v["efficiency"].as_array().is_none_or(|e| e.is_empty()), "no roofline for the job: {v:#}");
    let other = findings.iter().find(|f| f["id"] == "foreign_process").unwrap_or_else(|| panic!("{ids:?}"));
    let title = other["title"].as_str().unwrap();
    assert!(title.contains(&format!("process {} computes outside the job (97% of the SMs)", outsider.id())), "{title}");
    assert!(other["advice"].as_array().unwrap().iter().all(|a| !a.as_str().unwrap().contains("forgotten")), "{other}");
    let accounts = v["ledger"]["accounts"].as_array().unwrap();
    assert!(accounts.iter().all(|a| a["account"] != "gpu_work"), "{accounts:?}");
    assert!(accounts.iter().any(|a| a["account"] == "no_gpu"), "{accounts:?}");
}
