//! `gpulse status`, `watch` and `demo`.

use super::support::*;

#[test]
fn status_shows_sm_activity_and_process_command_lines() {
    // The scripted process is this test itself, so /proc has a real command line for it.
    let me = std::process::id();
    let json = std::fs::read_to_string(fixture("scenarios/h200_idle.json"))
        .unwrap()
        .replace(r#""cuda_cc": [9, 0],"#, r#""cuda_cc": [9, 0], "util_gpu_pct": 97,"#)
        .replace(r#""pci_bus_id": "00000000:00:06.0","#, &format!(r#""pci_bus_id": "00000000:00:06.0", "processes": [{{"pid": {me}, "used_memory_mib": 20480, "sm_util_pct": 42, "mem_util_pct": 9}}],"#))
        .replace(r#""sm": 0.0"#, r#""sm": 12.5"#);
    let sc = scenario_file("status", &json);
    let (code, out, err) = run(gpulse(None).env("GPULSE_FAKE_NVML_SCENARIO", &sc).arg("status"));
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("1 GPU · driver 580.159.04 · CUDA 13.0 · "), "{out}");
    assert!(
        out.contains("GPU 0 (cuda:0)  NVIDIA H200  GPU-250fffdd-1fec-10a1-5462-9d8a906900cf  00000000:00:06.0"),
        "{out}"
    );
    assert!(out.contains("GPU-Util  97%   SM active 12.5%"), "{out}");
    assert!(out.contains("Memory   0 / 143771 MiB (0%)   reserved 616 MiB"), "{out}");
    let row = out.lines().find(|l| l.trim_start().starts_with(&me.to_string())).expect("process row");
    assert!(row.contains("20480 MiB") && row.contains("42"), "{row}");
    let exe = std::env::current_exe().unwrap();
    assert!(row.contains(exe.file_name().unwrap().to_str().unwrap()), "command line from /proc: {row}");
    // A command line with newlines (a `python3 -c` script) stays on its row.
    // In a group of its own: the shell's `sleep 30` ends with it.
    let mut script = KillOnDrop::group(std::process::Command::new("sh").args(["-c", "sleep 30\n\tsleep 1", "x\ny"]));
    let multi = json.replace(&format!(r#""pid": {me}"#), &format!(r#""pid": {}"#, script.id()));
    let sc2 = scenario_file("status-multiline", &multi);
    let (code, out, _) = run(gpulse(None).env("GPULSE_FAKE_NVML_SCENARIO", &sc2).arg("status"));
    let _ = (script.kill(), script.wait());
    assert_eq!(code, 0);
    let row = out.lines().find(|l| l.trim_start().starts_with(&script.id().to_string())).expect("process row");
    assert!(row.ends_with("sh -c sleep 30 sleep 1 x y"), "{row}");
    assert_eq!(out.lines().last(), Some(row), "nothing of the command spills onto further lines: {out}");
    // A bare `gpulse` prints the same view.
    let (code, bare, _) = run(gpulse(None).env("GPULSE_FAKE_NVML_SCENARIO", &sc));
    assert_eq!(code, 0);
    assert!(bare.contains("SM active 12.5%"));
}

#[test]
fn watch_prints_a_line_per_gpu_per_sample() {
    let (code, out, err) = run(gpulse(Some("scenarios/h200_idle.json")).args(["watch", "-i", "0.1", "-n", "3"]));
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines[0].starts_with("time"));
    for l in &lines[1..] {
        let f: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(&f[1..], ["0", "0%", "0.0%", "0/143771", "33C", "119W"], "{l}");
    }
}

#[test]
fn demo_replays_the_bundled_recording_without_a_gpu() {
    let (code, out, err) = run(gpulse(None).args(["demo", "--speed", "10000"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("14:43:16.918   0    0%   0.0%      21098/143771   33C   103W"), "{out}");
    assert!(out.contains("SM active"));
    assert!(out.contains("21090 MiB"), "the idle holder shows: {out}");
    // The whole pipeline ends in the diagnosis of the recording.
    assert!(out.contains("[input_bound]") && out.contains("[idle_holder]"), "{out}");
}

#[test]
fn no_driver_is_one_clear_line() {
    for args in [&["status"][..], &["watch"], &["--query-gpu=index", "--format=csv"]] {
        let (code, out, err) = run(gpulse(None).args(args));
        assert_eq!(code, 9, "{args:?}");
        assert_eq!(out, "");
        assert_eq!(err.lines().count(), 1, "{err}");
        // The stand-in loads, and answers as NVML does on a machine without the kernel driver.
        assert!(err.contains("no NVIDIA driver found (the NVML library loaded, but no driver is running)"), "{err}");
    }
    let (code, _, err) = run(gpulse(None).env("GPULSE_NVML_LIB", "/nonexistent/libnvidia-ml.so.1").arg("status"));
    assert_eq!(code, 9);
    assert!(err.contains("cannot load the NVML library /nonexistent/libnvidia-ml.so.1: "), "{err}");
}

#[test]
fn wrong_flags_fail_clearly() {
    let (code, _, err) = run(gpulse(None).args(["watch", "--bogus"]));
    assert_eq!(code, 2);
    assert!(err.contains("--bogus"));
    let (code, _, err) = run(gpulse(Some("scenarios/h200_idle.json")).args(["watch", "-i", "0"]));
    assert_eq!(code, 2);
    assert!(
        err.starts_with("error: invalid value '0' for '--interval <DURATION>': \"0\" is not a positive duration"),
        "{err}"
    );
    let (code, _, err) = run(gpulse(Some("scenarios/h200_idle.json")).args(["watch", "-i", "10ms"]));
    assert_eq!(code, 2);
    assert!(
        err.starts_with(
            "error: invalid value '10ms' for '--interval <DURATION>': \"10ms\" is too short (at least 50 ms)"
        ),
        "{err}"
    );
}
