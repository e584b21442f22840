//! Checks against a real GPU and nvidia-smi. Run on a GPU machine with
//! `cargo test -- --ignored hardware` (or a carried test binary with `GPULSE_BIN` set).

use std::process::Command;

use super::support::*;

const RICH: &str = "timestamp,index,name,uuid,utilization.gpu,utilization.memory,memory.used,memory.total,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.mem,pstate,clocks_event_reasons.active,pcie.link.gen.current,fan.speed";

fn nvidia_smi(args: &[&str]) -> (i32, String) {
    let o = Command::new("nvidia-smi").args(args).output().expect("nvidia-smi runs");
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Columns of `RICH` that move between two reads a few milliseconds apart, and how far:
/// utilization, memory used, temperature, power and SM clock.
const MOVING: [(usize, f64); 6] = [(4, 30.0), (5, 30.0), (6, 64.0), (8, 5.0), (9, 150.0), (11, 600.0)];

/// A numeric cell without its unit.
fn number(cell: &str) -> f64 {
    cell.split(' ').next().unwrap().parse().unwrap_or_else(|_| panic!("not a number: {cell}"))
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn hardware_query_matches_nvidia_smi_side_by_side() {
    for format in ["csv", "csv,noheader,nounits"] {
        let (query, format_arg) = (format!("--query-gpu={RICH}"), format!("--format={format}"));
        let args = [query.as_str(), format_arg.as_str()];
        let (smi_code, smi) = nvidia_smi(&args);
        let (code, ours, err) = run(gpulse_live().arg("query").args(args));
        assert_eq!((code, smi_code), (0, 0), "{err}");
        let (smi, ours): (Vec<&str>, Vec<&str>) = (smi.lines().collect(), ours.lines().collect());
        assert_eq!(smi.len(), ours.len());
        for (s, o) in smi.iter().zip(&ours) {
            if !is_smi_timestamp(cells(s)[0]) {
                assert_eq!(s, o, "header");
                continue;
            }
            let (s, o) = (cells(s), cells(o));
            assert_eq!(s.len(), o.len());
            for (k, (sc, oc)) in s.iter().zip(&o).enumerate() {
                let unit = |c: &str| c.split_once(' ').map(|x| x.1.to_owned());
                if let Some(tolerance) = MOVING.iter().find(|m| m.0 == k).map(|m| m.1) {
                    assert!((number(sc) - number(oc)).abs() <= tolerance, "column {k}: {sc} vs {oc}");
                    assert_eq!(unit(sc), unit(oc), "column {k}");
                } else if k == 0 {
                    assert!(is_smi_timestamp(oc), "{oc}");
                } else if k == 13 || k == 14 {
                    // P-state and clocks-event reasons follow the load; their form must agree.
                    assert_eq!(sc.len(), oc.len(), "column {k}: {sc} vs {oc}");
                } else {
                    assert_eq!(sc, oc, "column {k}");
                }
            }
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn hardware_error_messages_match_nvidia_smi() {
    for args in [
        &["--query-gpu=timestamp,foo", "--format=csv"][..],
        &["--query-gpu=index", "--format=xml"],
        &["--query-gpu=index", "-i", "99", "--format=csv"],
    ] {
        let (smi_code, smi) = nvidia_smi(args);
        let (code, ours, _) = run(gpulse_live().args(args));
        assert_eq!((code, ours), (smi_code, smi), "{args:?}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn hardware_compute_apps_match_nvidia_smi() {
    let fields = "--query-compute-apps=gpu_name,gpu_bus_id,gpu_uuid,pid,process_name,used_memory";
    let (_, smi) = nvidia_smi(&[fields, "--format=csv"]);
    let (code, ours, _) = run(gpulse_live().args([fields, "--format=csv"]));
    assert_eq!(code, 0);
    assert_eq!(ours, smi);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn hardware_status_reads_the_utilization_buffer_and_gpm() {
    let (code, out, err) = run(gpulse_live().args(["status", "--json", "--wait", "1.2"]));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let gpu = &v["gpus"][0];
    // NVML buffers a GPU-Util reading about every 1/6 s: a 1.2 s window holds several.
    let buffered = gpu["util_gpu_samples"].as_array().map_or(0, Vec::len);
    assert!(buffered >= 4, "util buffer: {buffered} readings");
    if v["devices"][0]["gpm_supported"] == true {
        let interval = gpu["gpm"]["interval_ms"].as_f64().unwrap();
        assert!((1000.0..2000.0).contains(&interval), "GPM window {interval} ms");
        assert!(gpu["gpm"]["sm_util_pct"].as_f64().is_some());
    }
}
