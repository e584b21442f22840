//! `gpulse query` against nvidia-smi's own output from real H200s.

use super::support::*;

/// The reference capture: nvidia-smi's answers on an idle H200 (tests/fixtures/h200-smi-reference).
fn reference() -> String {
    std::fs::read_to_string(fixture("h200-smi-reference/smi_reference.txt")).unwrap()
}

/// The lines of one section of the reference capture.
fn section(name: &str) -> Vec<String> {
    let text = reference();
    let start = text.find(&format!("### {name}\n")).unwrap_or_else(|| panic!("no section {name}"));
    text[start..].lines().skip(1).take_while(|l| !l.starts_with("### ")).map(str::to_owned).collect()
}

const SUPPORTED_SKIP: &[&str] = &["pcie.link.gen.max", "power.draw.instant [W]"];

/// The reference field list, minus fields gpulse does not read.
fn reference_fields() -> (String, Vec<usize>) {
    let smi_fields = "timestamp,driver_version,count,name,index,uuid,pci.bus_id,persistence_mode,pstate,compute_mode,fan.speed,utilization.gpu,utilization.memory,memory.total,memory.used,memory.free,memory.reserved,temperature.gpu,temperature.memory,power.draw,power.limit,enforced.power.limit,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,clocks_event_reasons.active,clocks_event_reasons.supported,clocks_event_reasons.gpu_idle,clocks_event_reasons.applications_clocks_setting,clocks_event_reasons.sw_power_cap,clocks_event_reasons.hw_slowdown,clocks_event_reasons.hw_thermal_slowdown,clocks_event_reasons.hw_power_brake_slowdown,clocks_event_reasons.sw_thermal_slowdown,clocks_event_reasons.sync_boost,pcie.link.gen.current,pcie.link.width.current,ecc.errors.uncorrected.volatile.total,gpu_name,gpu_uuid,gpu_bus_id,clocks_throttle_reasons.active,clocks.gr,clocks.current.memory,clocks.max.memory,ecc.mode.current,pcie.link.gen.max,power.draw.instant,power.draw.average";
    let header = section("--format=csv")[0].clone();
    let keep: Vec<usize> =
        cells(&header).iter().enumerate().filter(|(_, h)| !SUPPORTED_SKIP.contains(h)).map(|(i, _)| i).collect();
    let names: Vec<&str> = smi_fields.split(',').collect();
    let list: Vec<&str> = keep.iter().map(|i| names[*i]).collect();
    (list.join(","), keep)
}

#[test]
fn headers_and_rows_match_nvidia_smi_in_every_format() {
    let (fields, keep) = reference_fields();
    let header = section("--format=csv")[0].clone();
    let header: Vec<&str> = cells(&header);
    let moving: Vec<usize> = keep
        .iter()
        .enumerate()
        .filter(|(_, i)| header[**i].ends_with("[W]") || header[**i].starts_with("temperature."))
        .map(|(k, _)| k)
        .collect();
    for format in ["csv", "csv,noheader", "csv,nounits", "csv,noheader,nounits"] {
        let expected = section(&format!("--format={format}"));
        let expected_lines: Vec<String> = expected
            .iter()
            .filter(|l| !l.starts_with("rc="))
            .map(|l| {
                let c = cells(l);
                keep.iter().map(|i| c[*i]).collect::<Vec<_>>().join(", ")
            })
            .collect();
        let (code, out, err) = run(gpulse(Some("scenarios/h200_idle.json")).args([
            "query",
            &format!("--query-gpu={fields}"),
            &format!("--format={format}"),
        ]));
        assert_eq!(code, 0, "{err}");
        let got: Vec<&str> = out.lines().collect();
        assert_eq!(got.len(), expected_lines.len(), "{format}: {out}");
        for (g, e) in got.iter().zip(&expected_lines) {
            let (g, e) = (cells(g), cells(e));
            assert_eq!(g.len(), e.len());
            for (k, (gc, ec)) in g.iter().zip(&e).enumerate() {
                if is_smi_timestamp(ec) {
                    assert!(is_smi_timestamp(gc), "{format}: timestamp {gc:?}");
                } else if moving.contains(&k) {
                    // Power and temperature moved between nvidia-smi's calls in the capture; the format must not.
                    let shape =
                        |s: &str| s.chars().map(|c| if c.is_ascii_digit() { '9' } else { c }).collect::<String>();
                    assert_eq!(shape(gc), shape(ec), "{format}: column {k}");
                } else {
                    assert_eq!(gc, ec, "{format}: column {k}");
                }
            }
        }
    }
}

#[test]
fn rich_log_row_matches_real_capture() {
    // The first row of a real `nvidia-smi --query-gpu=<rich> -lms 500` log, replayed.
    let text = std::fs::read_to_string(fixture("h200-2026-11-29/rich_dl_bound.csv")).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let first = lines.next().unwrap();
    let fields = "timestamp,index,name,uuid,utilization.gpu,utilization.memory,memory.used,memory.total,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.mem,pstate,clocks_event_reasons.active,pcie.link.gen.current,fan.speed";
    let c = cells(first);
    let json = format!(
        r#"{{"devices":[{{"name":"{}","uuid":"{}","pci_bus_id":"00000000:00:06.0","base":{{
            "util_gpu_pct":0,"util_mem_pct":0,"memory_used_mib":21099,"memory_total_mib":143771,
            "temperature_gpu_c":33,"power_w":98.44,"power_limit_w":700,"clock_sm_mhz":1980,"clock_mem_mhz":3201,
            "pstate":0,"clocks_event_reasons":0,"pcie_link_gen":5}}}}]}}"#,
        c[2], c[3]
    );
    let sc = scenario_file("rich", &json);
    let (code, out, err) = run(gpulse(None)
        .env("GPULSE_FAKE_NVML_SCENARIO", &sc)
        .arg(format!("--query-gpu={fields}"))
        .arg("--format=csv"));
    assert_eq!(code, 0, "{err}");
    let mut got = out.lines();
    assert_eq!(got.next().unwrap(), header);
    let row = got.next().unwrap();
    let (g, e) = (cells(row), cells(first));
    assert!(is_smi_timestamp(g[0]));
    assert_eq!(&g[1..], &e[1..]);
}

#[test]
fn unknown_field_matches_nvidia_smi() {
    let expected = section("unknown field");
    let (code, out, _) =
        run(gpulse(Some("scenarios/h200_idle.json")).args(["--query-gpu=timestamp,foo", "--format=csv"]));
    assert_eq!(code, 2);
    assert_eq!(out.lines().collect::<Vec<_>>(), expected[..expected.len() - 1]);
    let (code, out, _) =
        run(gpulse(Some("scenarios/h200_idle.json")).args(["--query-gpu=index, name", "--format=csv"]));
    assert_eq!((code, out.as_str()), (2, "Field \" name\" is not a valid field to query.\n\n"));
    let (code, out, _) =
        run(gpulse(Some("scenarios/h200_idle.json")).args(["--query-compute-apps=pid,foo", "--format=csv"]));
    assert_eq!((code, out.as_str()), (2, "Field \"foo\" is not a valid field to query.\n\n"));
}

#[test]
fn bad_format_and_missing_device_match_nvidia_smi() {
    let (code, out, _) = run(gpulse(Some("scenarios/h200_idle.json")).args(["--query-gpu=index", "--format=xml"]));
    assert_eq!((code, out.as_str()), (2, "Format modifier is not recognized.\n"));
    for id in ["5", "GPU-bogus"] {
        let (code, out, _) =
            run(gpulse(Some("scenarios/h200_idle.json")).args(["--query-gpu=index", "--format=csv", "-i", id]));
        assert_eq!((code, out.as_str()), (6, "No devices were found\n"));
    }
    for id in ["GPU-250fffdd-1fec-10a1-5462-9d8a906900cf", "00000000:00:06.0", "0"] {
        let (code, out, _) =
            run(gpulse(Some("scenarios/h200_idle.json")).args(["--query-gpu=index", "--format=csv", "-i", id]));
        assert_eq!((code, out.as_str()), (0, "index\n0\n"), "{id}");
    }
}

#[test]
fn empty_and_repeated_fields_match_nvidia_smi() {
    let (code, out, _) = run(gpulse(Some("scenarios/h200_idle.json")).args(["--query-gpu=", "--format=csv"]));
    assert_eq!((code, out.as_str()), (0, "\n\n"));
    let (code, out, _) =
        run(gpulse(Some("scenarios/h200_idle.json")).args(["--query-gpu=index,index", "--format=csv"]));
    assert_eq!((code, out.as_str()), (0, "index, index\n0, 0\n"));
}

#[test]
fn compute_apps_list_processes_like_nvidia_smi() {
    let (code, out, _) = run(gpulse(Some("scenarios/h200_idle.json")).args([
        "--query-compute-apps=timestamp,gpu_name,gpu_bus_id,gpu_uuid,pid,process_name,used_memory",
        "--format=csv",
    ]));
    assert_eq!(code, 0);
    assert_eq!(out, format!("{}\n", section("apps empty")[0]));
    let (code, out, _) = run(gpulse(Some("scenarios/h200_idle.json"))
        .args(["--query-compute-apps=pid,used_memory", "--format=csv,noheader"]));
    assert_eq!((code, out.as_str()), (0, ""));
    let (code, out, err) = run(gpulse(Some("scenarios/h200_training.json"))
        .args(["--query-compute-apps=pid,process_name,used_gpu_memory,name", "--format=csv,nounits"]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "pid, process_name, used_gpu_memory [MiB], process_name\n1250, python3, 21090, python3\n");
}

#[test]
fn loop_ms_keeps_printing_rows_under_one_header() {
    let dir = fresh_dir("query", "loop");
    let out_file = dir.join("loop.csv");
    let mut child = KillOnDrop::spawn(
        gpulse(Some("scenarios/h200_idle.json"))
            .args(["--query-gpu=timestamp,index", "--format=csv", "-lms", "100", "-f"])
            .arg(&out_file),
    );
    let rows = || std::fs::read_to_string(&out_file).unwrap_or_default().lines().count();
    wait_until(60, "a header and four rows", || rows() >= 5);
    child.kill().unwrap();
    child.wait().unwrap();
    let text = std::fs::read_to_string(&out_file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "timestamp, index");
    assert!(lines.len() >= 4, "{text}");
    for l in &lines[1..] {
        let c = cells(l);
        assert!(is_smi_timestamp(c[0]) && c[1] == "0", "{l}");
    }
}

#[test]
fn gpm_fields_follow_a_replayed_h200_trace() {
    // gpm_healthy.csv: a transformer training at ~90% SM activity after a short warm-up.
    let child = Gathered::spawn(gpulse(Some("scenarios/h200_training.json")).args([
        "query",
        "--query-gpu=gpm.sm_active,gpm.tensor_active,gpm.dram_active,gpm.pcie.rx",
        "--format=csv,nounits",
        "-lms",
        "200",
    ]));
    // The scenario plays at 20× speed: the plateau comes within seconds, or a minute when loaded.
    let plateau = |ls: &[String]| ls.iter().skip(1).any(|l| cells(l)[0].parse::<f64>().is_ok_and(|v| v > 80.0));
    child.wait_for_lines(60, "the training's plateau", |ls| ls.len() >= 6 && plateau(ls));
    let (lines, _) = child.stop();
    let out = lines.join("\n");
    assert_eq!(lines[0], "gpm.sm_active [%], gpm.tensor_active [%], gpm.dram_active [%], gpm.pcie.rx [MiB/s]");
    let sm: Vec<f64> = lines[1..].iter().map(|l| cells(l)[0].parse().unwrap()).collect();
    assert!(sm.len() >= 5, "{out}");
    assert!(sm.iter().any(|v| *v > 80.0), "{out}");
    assert!(sm.iter().all(|v| (0.0..=100.0).contains(v)));
}
