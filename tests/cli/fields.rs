//! Every field nvidia-smi 580 lists, against the H200 capture in
//! tests/fixtures/h200-smi-reference/fields (tools/device/verify_fields.sh), and gpulse standing in
//! for `nvidia-smi` under real clients (nvsmi, GPUtil). CI installs the clients and sets
//! `GPULSE_REQUIRE_PY_CLIENTS=1`; elsewhere a missing client skips.

use std::process::Command;

use super::support::*;

/// (name, nvidia-smi header, nvidia-smi value) of each row of a capture table.
fn capture(file: &str) -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(fixture(&format!("h200-smi-reference/fields/{file}"))).unwrap();
    text.lines()
        .skip(1)
        .map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            let value = c[3].trim_end_matches("rc=0").trim_end().to_owned();
            (c[0].to_owned(), c[1].to_owned(), value)
        })
        .collect()
}

const SCENARIO: &str = include_str!("../fixtures/scenarios/fields.json");

fn scenario() -> Command {
    // Read from the fixture itself: a file written for it would outlive every test.
    gpulse(Some("scenarios/fields.json"))
}

#[test]
fn every_listed_field_has_nvidia_smis_header() {
    for (file, flag) in [("fields_gpu.tsv", "--query-gpu"), ("fields_apps.tsv", "--query-compute-apps")] {
        let rows = capture(file);
        assert!(rows.len() > if flag == "--query-gpu" { 250 } else { 9 }, "{file} is the whole list");
        let list: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
        let (code, out, err) = run(scenario().arg(format!("{flag}={}", list.join(","))).arg("--format=csv"));
        assert_eq!(code, 0, "{err}{out}");
        let header = out.lines().next().unwrap();
        let ours = cells(header);
        assert_eq!(ours.len(), rows.len());
        for (r, h) in rows.iter().zip(ours) {
            assert_eq!(h, r.1, "header of {}", r.0);
        }
    }
}

#[test]
fn fields_the_stand_in_lacks_print_what_the_h200_printed_for_no_value() {
    // The stand-in exports none of these calls, so each is absent; on the H200 nvidia-smi printed
    // `[N/A]` for them, and so must gpulse, never a number.
    let rows: Vec<_> = capture("fields_gpu.tsv").into_iter().filter(|r| r.2 == "[N/A]").collect();
    assert!(rows.len() > 60);
    let list: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    let (code, out, err) = run(scenario().arg(format!("--query-gpu={}", list.join(","))).arg("--format=csv,noheader"));
    assert_eq!(code, 0, "{err}");
    for (r, v) in rows.iter().zip(cells(out.trim_end())) {
        assert!(v == "[N/A]" || v == "[Not Supported]", "{}: {v}", r.0);
    }
}

#[test]
fn static_fields_the_stand_in_answers_match_the_h200() {
    let want = [("serial", "1653724057407"), ("pci.domain", "0x0000"), ("pci.bus", "0x00"), ("pci.device", "0x06")];
    let list: Vec<&str> = want.iter().map(|w| w.0).collect();
    let (code, out, err) = run(scenario().arg(format!("--query-gpu={}", list.join(","))).arg("--format=csv,noheader"));
    assert_eq!(code, 0, "{err}");
    let got = cells(out.trim_end());
    let h200 = capture("fields_gpu.tsv");
    for ((name, v), g) in want.iter().zip(got) {
        assert_eq!(g, *v, "{name}");
        if *name != "serial" {
            assert!(h200.iter().any(|r| r.0 == *name && r.2 == *v), "{name} is {v} on the H200 too");
        }
    }
}

/// A PATH whose `nvidia-smi` is gpulse, and the folder that holds it until dropped.
fn smi_path(test: &str) -> (std::ffi::OsString, Temp) {
    let dir = fresh_dir("fields", test);
    std::os::unix::fs::symlink(gpulse_bin(), dir.join("nvidia-smi")).unwrap();
    let mut path = dir.as_os_str().to_owned();
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    (path, dir)
}

#[test]
fn called_as_nvidia_smi_it_answers_queries_and_lists_gpus() {
    let (path, _dir) = smi_path("as-smi");
    let smi = || {
        let mut c = scenario();
        c.env("PATH", &path);
        c
    };
    let (code, out, _) =
        run(Command::new("nvidia-smi").args(["-L"]).envs(smi().get_envs().filter_map(|(k, v)| Some((k, v?)))));
    assert_eq!((code, out.as_str()), (0, "GPU 0: NVIDIA H200 (UUID: GPU-83cef610-6e26-95a5-7ecf-c4ac2594206b)\n"));
    let envs: Vec<_> = smi().get_envs().filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))).collect();
    let cmd = |args: &[&str]| {
        let mut c = Command::new("nvidia-smi");
        c.args(args).envs(envs.iter().map(|(k, v)| (k, v)));
        run(&mut c)
    };
    let (code, out, _) = cmd(&["--query-gpu=index,serial,memory.used", "--format=nounits,noheader,csv", "--id=0"]);
    assert_eq!((code, out.as_str()), (0, "0, 1653724057407, 20480\n"));
    let (code, out, _) = cmd(&["--help-query-gpu"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("List of valid properties to query for the switch \"--query-gpu\":"));
    for args in [&["-q"][..], &["dmon"], &["topo", "-m"], &[]] {
        let (code, out, err) = cmd(args);
        assert_eq!(code, 2, "{args:?}");
        assert!(out.is_empty() && err.lines().count() == 1 && err.contains("real nvidia-smi"), "{args:?}: {err}");
    }
    let (code, out, _) = cmd(&["-L", "-i", "0"]);
    assert_eq!(
        (code, out.as_str()),
        (2, "ERROR: Option -i is not valid for this command. Please run 'nvidia-smi -h' for help.\n\n")
    );
}

fn client(py: &str, script: &str) -> String {
    let (path, _dir) = smi_path(&script.chars().filter(char::is_ascii_alphanumeric).take(12).collect::<String>());
    let mut c = scenario();
    let envs: Vec<_> = c.get_envs().filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))).collect();
    c = Command::new(py);
    c.args(["-c", script]).envs(envs.iter().map(|(k, v)| (k, v))).env("PATH", path);
    let (code, out, err) = run(&mut c);
    assert_eq!(code, 0, "{err}{out}");
    out
}

#[test]
fn nvsmi_lists_the_scenarios_gpu() {
    let Some(py) = python_with("nvsmi", "with gpulse as nvidia-smi") else { return };
    let out = client(
        py,
        "import nvsmi\nfor g in nvsmi.get_gpus(): print(g.id, g.uuid, g.gpu_util, g.mem_total, g.mem_used, g.mem_free, g.driver, g.name, g.serial, g.display_active, g.temperature)\nfor p in nvsmi.get_gpu_processes(): print(p.pid, p.process_name, p.gpu_id, p.used_memory)",
    );
    assert_eq!(
        out,
        "0 GPU-83cef610-6e26-95a5-7ecf-c4ac2594206b 37.0 143771.0 20480.0 122676.0 580.159.04 NVIDIA H200 1653724057407 [N/A] 45.0\n4242 python3 0 20000.0\n"
    );
}

#[test]
fn gputil_lists_the_scenarios_gpu() {
    let Some(py) = python_with("GPUtil", "with gpulse as nvidia-smi") else { return };
    let out = client(
        py,
        "import GPUtil\nfor g in GPUtil.getGPUs(): print(g.id, g.uuid, g.load, g.memoryTotal, g.memoryUsed, g.memoryFree, g.driver, g.name, g.serial, g.display_mode, g.temperature)",
    );
    assert_eq!(
        out,
        "0 GPU-83cef610-6e26-95a5-7ecf-c4ac2594206b 0.37 143771.0 20480.0 122676.0 580.159.04 NVIDIA H200 1653724057407 [Requested functionality has been deprecated] 45.0\n"
    );
}

/// The H200's answers to the calls behind its static fields, given to the stand-in library.
const H200_CALLS: &str = r#"{"devices":[{"name":"NVIDIA H200","uuid":"GPU-83cef610-6e26-95a5-7ecf-c4ac2594206b",
  "pci_bus_id":"00000000:00:06.0","nvml":{"nvmlDeviceGetVbiosVersion":"96.00.A5.00.1A",
  "nvmlDeviceGetPowerManagementDefaultLimit":700000,"nvmlDeviceGetPowerManagementLimitConstraints":[200000,700000],
  "nvmlDeviceGetMaxPcieLinkGeneration":5,"nvmlDeviceGetMaxPcieLinkWidth":16,"nvmlDeviceGetGpuMaxPcieLinkGeneration":5,
  "nvmlDeviceGetDisplayMode":1,"nvmlDeviceGetAccountingMode":0,"nvmlDeviceGetAccountingBufferSize":4000,
  "nvmlDeviceGetRemappedRows":[0,0,0,0],"nvmlDeviceGetMigMode":[0,0]}}]}"#;

#[test]
fn static_fields_read_through_the_stand_in_match_the_h200_capture() {
    let names = [
        "vbios_version",
        "power.default_limit",
        "power.min_limit",
        "power.max_limit",
        "pcie.link.gen.max",
        "pcie.link.width.max",
        "pcie.link.gen.gpumax",
        "display_attached",
        "accounting.mode",
        "accounting.buffer_size",
        "remapped_rows.correctable",
        "remapped_rows.uncorrectable",
        "remapped_rows.pending",
        "remapped_rows.failure",
        "mig.mode.current",
        "mig.mode.pending",
    ];
    let mut cmd = gpulse(None);
    let sc = scenario_file("fields-h200", H200_CALLS);
    cmd.env("GPULSE_FAKE_NVML_SCENARIO", &sc);
    let (code, out, err) = run(cmd.arg(format!("--query-gpu={}", names.join(","))).arg("--format=csv,noheader"));
    assert_eq!(code, 0, "{err}");
    let h200 = capture("fields_gpu.tsv");
    for (name, got) in names.iter().zip(cells(out.trim_end())) {
        let want = &h200.iter().find(|r| r.0 == *name).unwrap().2;
        assert_eq!(got, want, "{name}");
    }
    // A call the scenario does not name is NOT_SUPPORTED, which nvidia-smi prints as `[N/A]`.
    let mut cmd = gpulse(None);
    let sc = scenario_file("fields-none", SCENARIO);
    cmd.env("GPULSE_FAKE_NVML_SCENARIO", &sc);
    let (_, out, _) = run(cmd.args(["--query-gpu=vbios_version,power.min_limit", "--format=csv,noheader"]));
    assert_eq!(out, "[N/A], [N/A]\n");
}
