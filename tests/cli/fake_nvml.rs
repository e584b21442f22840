//! The NVML code path under failure: old drivers, scripted errors, lost GPUs, several GPUs.

use super::support::*;

const IDLE: &str = "scenarios/h200_idle.json";

fn idle_with(extra_device: &str, extra_top: &str) -> Temp {
    let json = std::fs::read_to_string(fixture(IDLE)).unwrap();
    let json = json.replacen(
        r#""pci_bus_id": "00000000:00:06.0","#,
        &format!(r#""pci_bus_id": "00000000:00:06.0",{extra_device}"#),
        1,
    );
    let json = json.replacen(r#""driver_version""#, &format!(r#"{extra_top}"driver_version""#), 1);
    scenario_file(&format!("v{}", json.len()), &json)
}

#[test]
fn missing_symbols_of_an_old_driver_read_as_not_available() {
    let lib = lib_without(&["nvmlGpmMetricsGet", "nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetFieldValues"]);
    let (code, out, err) = run(gpulse(Some(IDLE)).env("GPULSE_NVML_LIB", &lib).args([
        "--query-gpu=index,memory.used,temperature.memory,utilization.gpu,gpm.sm_active",
        "--format=csv,noheader",
    ]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "0, [N/A], [N/A], 0 %, [N/A]\n");
    let (code, out, _) = run(gpulse(Some(IDLE)).env("GPULSE_NVML_LIB", &lib).arg("status"));
    assert_eq!(code, 0);
    assert!(out.contains("Memory   — / — "), "{out}");
}

#[test]
fn a_library_without_nvml_init_is_no_driver() {
    let lib = lib_without(&["nvmlInit_v2"]);
    let (code, _, err) = run(gpulse(Some(IDLE)).env("GPULSE_NVML_LIB", &lib).arg("status"));
    assert_eq!(code, 9);
    // Which library, and what it lacks.
    assert!(err.contains(&format!("cannot load the NVML library {}: ", lib.display())), "{err}");
    // The copy's loader names the symbol as renamed (`XvmlInit_v2`); the library's folder is
    // named for nothing it lacks, so this is the loader's word, not the path's.
    assert!(err.contains("undefined symbol: XvmlInit_v2"), "{err}");
}

#[test]
fn function_not_found_and_scripted_errors_map_like_nvidia_smi() {
    let sc = idle_with(
        r#""errors": [{"call": "nvmlDeviceGetPowerUsage", "code": 3}, {"call": "nvmlDeviceGetTemperature", "code": 4}, {"call": "nvmlDeviceGetClockInfo", "code": 999}],"#,
        r#""unsupported_functions": ["nvmlDeviceGetCurrPcieLinkGeneration"],"#,
    );
    let (code, out, err) = run(gpulse(None).env("GPULSE_FAKE_NVML_SCENARIO", &sc).args([
        "--query-gpu=power.draw,temperature.gpu,clocks.sm,pcie.link.gen.current,fan.speed,power.limit",
        "--format=csv,noheader",
    ]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "[Not Supported], [Insufficient Permissions], [Unknown Error], [N/A], [N/A], 700.00 W\n");
}

#[test]
fn a_gpu_falling_off_the_bus_is_a_status_not_a_crash() {
    let sc = idle_with(r#""lost_at_s": 0.3,"#, "");
    let child = Gathered::spawn(
        gpulse(None)
            .env("GPULSE_FAKE_NVML_SCENARIO", &sc)
            .args(["--query-gpu=index,utilization.gpu,memory.used", "--format=csv,noheader", "-lms", "100"])
            .stderr(std::process::Stdio::piped()),
    );
    child.wait_for_lines(60, "the GPU lost", |ls| ls.iter().any(|l| l.contains("[GPU is lost]")));
    let (lines, err) = child.stop();
    assert!(err.is_empty(), "{err}");
    let out = lines.join("\n");
    assert_eq!(lines.first().map(String::as_str), Some("0, 0 %, 0 MiB"), "{out}");
    assert_eq!(lines.last().map(String::as_str), Some("0, [GPU is lost], [GPU is lost]"), "{out}");
    let lost = idle_with(r#""lost_at_s": 0.0,"#, "");
    let (code, out, _) = run(gpulse(None).env("GPULSE_FAKE_NVML_SCENARIO", &lost).arg("status"));
    assert_eq!(code, 0);
    assert!(out.contains("LOST"), "{out}");
}

fn gpus(n: usize) -> Temp {
    let devices: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"name":"NVIDIA H200","uuid":"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd","pci_bus_id":"00000000:{:02X}:00.0",
                "base":{{"util_gpu_pct":{},"util_mem_pct":5,"memory_total_mib":143771,"memory_used_mib":{},"temperature_gpu_c":40}}}}"#,
                0x18 + i * 0x10,
                i * 10,
                1000 * (i + 1)
            )
        })
        .collect();
    scenario_file(&format!("gpus{n}"), &format!(r#"{{"devices":[{}]}}"#, devices.join(",")))
}

#[test]
fn several_gpus_are_listed_and_selected_in_index_order() {
    for n in [2, 4, 8] {
        let sc = gpus(n);
        let (code, out, _) = run(gpulse(None)
            .env("GPULSE_FAKE_NVML_SCENARIO", &sc)
            .args(["--query-gpu=index,count,utilization.gpu,memory.used", "--format=csv,noheader,nounits"]));
        assert_eq!(code, 0);
        let expected: String = (0..n).map(|i| format!("{i}, {n}, {}, {}\n", i * 10, 1000 * (i + 1))).collect();
        assert_eq!(out, expected);
    }
    let sc = gpus(4);
    let (code, out, _) = run(gpulse(None).env("GPULSE_FAKE_NVML_SCENARIO", &sc).args([
        "--query-gpu=index,pci.bus_id",
        "--format=csv,noheader",
        "-i",
        "3,GPU-00000001-aaaa-bbbb-cccc-dddddddddddd",
    ]));
    assert_eq!((code, out.as_str()), (0, "1, 00000000:28:00.0\n3, 00000000:48:00.0\n"));
    let (code, out, _) =
        run(gpulse(None).env("GPULSE_FAKE_NVML_SCENARIO", &sc).env("CUDA_VISIBLE_DEVICES", "2,3").arg("status"));
    assert_eq!(code, 0);
    assert!(out.contains("GPU 2 (cuda:0)") && out.contains("GPU 3 (cuda:1)") && out.contains("GPU 0  NVIDIA"), "{out}");
}

#[test]
fn a_malformed_scenario_fails_cleanly() {
    let sc = scenario_file("bad", r#"{"devices": [{"name": 3}]}"#);
    let (code, _, err) = run(gpulse(None).env("GPULSE_FAKE_NVML_SCENARIO", &sc).arg("status"));
    assert_ne!(code, 0);
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_value_the_scenario_leaves_out_is_not_supported_never_0() {
    // NVML answers GPU and memory utilization in one call, and a process's SM and memory shares
    // in one sample: naming one of a pair answers neither.
    let scenario = |util: &str, process: &str| {
        let json = format!(
            r#"{{"devices":[{{"name":"NVIDIA H200","uuid":"GPU-1","pci_bus_id":"00000000:19:00.0",
            "base":{{{util}"memory_total_mib":143771,"memory_used_mib":20480}},
            "processes":[{{"pid":4242,"name":"python3","used_memory_mib":20000{process}}}]}}]}}"#
        );
        scenario_file(&format!("unnamed-{}", json.len()), &json)
    };
    let query = |sc: &std::path::Path| {
        let (code, out, err) = run(gpulse(None)
            .env("GPULSE_FAKE_NVML_SCENARIO", sc)
            .args(["--query-gpu=utilization.gpu,utilization.memory,memory.used,fan.speed", "--format=csv,noheader"]));
        assert_eq!(code, 0, "{err}");
        out
    };
    let not_supported = "[Not Supported], [Not Supported], 20480 MiB, [N/A]\n";
    assert_eq!(query(&scenario(r#""util_gpu_pct":37,"#, "")), not_supported);
    assert_eq!(query(&scenario(r#""util_mem_pct":12,"#, "")), not_supported);
    assert_eq!(query(&scenario(r#""util_gpu_pct":37,"util_mem_pct":12,"#, "")), "37 %, 12 %, 20480 MiB, [N/A]\n");
    // The process row's SM% in `gpulse status`.
    let sm = |process: &str| {
        let (code, out, err) = run(gpulse(None).env("GPULSE_FAKE_NVML_SCENARIO", &scenario("", process)).arg("status"));
        assert_eq!(code, 0, "{err}");
        let row = out.lines().find(|l| l.trim_start().starts_with("4242 ")).unwrap_or_else(|| panic!("{out}"));
        row.split_whitespace().nth(4).unwrap().to_owned()
    };
    assert_eq!(sm(r#","sm_util_pct":42"#), "—");
    assert_eq!(sm(r#","sm_util_pct":42,"mem_util_pct":7"#), "42");
    // Beside a process with readings, one NVML leaves out of its samples used no SM: 0, not
    // unknown (the driver answers only for processes that used the GPU).
    let sm = |pid: u32| {
        let sc =
            scenario("", r#","sm_util_pct":42,"mem_util_pct":7},{"pid":4243,"name":"python3","used_memory_mib":1000"#);
        let (code, out, err) = run(gpulse(None).env("GPULSE_FAKE_NVML_SCENARIO", &sc).arg("status"));
        assert_eq!(code, 0, "{err}");
        let row =
            out.lines().find(|l| l.trim_start().starts_with(&format!("{pid} "))).unwrap_or_else(|| panic!("{out}"));
        row.split_whitespace().nth(4).unwrap().to_owned()
    };
    assert_eq!((sm(4242), sm(4243)), ("42".to_owned(), "0".to_owned()));
    // `status --json` reads twice, 0.1 s apart, within one of the driver's once-a-second
    // samples: the busy process keeps its share.
    let sc = scenario("", r#","sm_util_pct":42,"mem_util_pct":7"#);
    let (code, out, err) = run(gpulse(None).env("GPULSE_FAKE_NVML_SCENARIO", &sc).args(["status", "--json"]));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let p = &v["gpus"][0]["processes"][0];
    assert_eq!((p["sm_util_pct"].as_u64(), p["mem_util_pct"].as_u64()), (Some(42), Some(7)), "{p}");
}

#[test]
fn a_gpu_lost_during_a_recording_is_a_critical_finding_at_the_time_it_was_lost() {
    let lost_at_s = 1.0;
    let sc = idle_with(&format!(r#""lost_at_s": {lost_at_s},"#), "");
    let dir = fresh_dir("fake-nvml", "lost");
    let db = dir.join("lost.db");
    let (code, _, err) = run(gpulse(None)
        .env("GPULSE_FAKE_NVML_SCENARIO", &sc)
        .args(["record", "--interval", "100ms", "--duration", "2s", "-o"])
        .arg(&db));
    assert_eq!(code, 0, "{err}");
    // The truth is in the recording: the first snapshot that found GPU 0 lost.
    let rec = gpulse_record::read(&db).unwrap();
    let t0 = rec.snapshots[0].timestamp_us;
    let first_lost = rec
        .snapshots
        .iter()
        .find(|s| s.gpus[0].status == gpulse_model::DeviceStatus::Lost)
        .expect("the stand-in lost the GPU");
    let truth_s = (first_lost.timestamp_us - t0) as f64 / 1e6;
    let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(&db));
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let f = doc["findings"].as_array().unwrap().iter().find(|f| f["id"] == "gpu_lost").expect("gpu_lost");
    assert_eq!(f["severity"], "critical");
    assert_eq!(f["evidence"]["gpu"], 0);
    let at = f["evidence"]["at_s"].as_f64().unwrap();
    // To the recorder's 0.1 s rounding; and near the scenario's own time (scenario time starts at
    // nvmlInit, shortly before the first sample; a sample comes every 0.1 s).
    assert!((at - truth_s).abs() <= 0.05, "{at} vs {truth_s}");
    assert!((lost_at_s - 0.5..=lost_at_s + 0.5).contains(&at), "{at} vs the scenario's {lost_at_s}");
    assert_eq!(doc["findings"][0]["id"], "gpu_lost", "critical comes first: {out}");
    let (_, text, _) = run(gpulse(None).arg("diagnose").arg(&db));
    assert!(text.contains("GPU 0: fell off the bus"), "{text}");
}

/// Per-process SM shares that NVML stops giving (an error from 1.5 s on) are absent from their next
/// read on (the recorder reads them every 5 s), never the last one read.
#[test]
fn a_share_that_can_no_longer_be_read_is_absent_not_stale() {
    let sc = idle_with(
        r#""processes": [{"pid": 4242, "used_memory_mib": 2048, "sm_util_pct": 60, "mem_util_pct": 20}],
           "errors": [{"call": "nvmlDeviceGetProcessUtilization", "code": 999, "from_s": 1.5}],"#,
        "",
    );
    let dir = fresh_dir("fake-nvml", "stale");
    let db = dir.join("s.db");
    let (code, _, err) = run(gpulse(None)
        .env("GPULSE_FAKE_NVML_SCENARIO", &sc)
        .args(["record", "--interval", "500ms", "--duration", "7s", "-o"])
        .arg(&db));
    assert_eq!(code, 0, "{err}");
    let rec = gpulse_record::read(&db).unwrap();
    let start = rec.snapshots[0].timestamp_us;
    let shares: Vec<(f64, Option<u32>)> = rec
        .snapshots
        .iter()
        .filter_map(|s| {
            let p = s.gpus[0].processes.iter().find(|p| p.pid == 4242)?;
            Some(((s.timestamp_us - start) as f64 / 1e6, p.sm_util_pct))
        })
        .collect();
    assert!(shares.iter().any(|s| s.1 == Some(60)), "read while NVML gave it: {shares:?}");
    // The read at 5 s fails: from then on the share is unknown.
    assert!(shares.iter().filter(|s| s.0 >= 5.0).all(|s| s.1.is_none()), "{shares:?}");
    assert!(shares.iter().any(|s| s.0 >= 5.0), "samples after the failed read: {shares:?}");
}
