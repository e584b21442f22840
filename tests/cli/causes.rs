//! Messages name the cause a new user is up against, not a neighbouring one.

use std::os::unix::fs::PermissionsExt;

use super::serve::{get, serve};
use super::support::{fixture, fresh_dir, gpulse, run, scenario_file};

/// A recording given to `import` is said to be one, not a malformed CSV.
#[test]
fn importing_a_recording_says_it_already_is_one() {
    let dir = fresh_dir("causes", "import");
    let rec = fixture("h200-gpulse-run/dl_bound.db");
    let (code, _, err) = run(gpulse(None).arg("import").arg(&rec).arg("-o").arg(dir.join("x.db")));
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        err,
        format!(
            "gpulse: {0} is already a recording, not an nvidia-smi log; diagnose, report and export read it as \
             it is (gpulse diagnose {0})\n",
            rec.display()
        )
    );
    assert!(!dir.join("x.db").exists());
}

/// A mistyped scenario path for the stand-in NVML is named, not taken for a missing driver.
#[test]
fn a_mistyped_scenario_path_is_named_not_a_missing_driver() {
    let dir = fresh_dir("causes", "scenario");
    let missing = dir.join("scenaro.json");
    for args in [&["status"][..], &["record", "-o", "r.db", "--duration", "1s"]] {
        let (code, _, err) = run(gpulse(None).current_dir(&dir).env("GPULSE_FAKE_NVML_SCENARIO", &missing).args(args));
        assert_eq!(code, 1, "{args:?}: {err}");
        assert_eq!(
            err,
            format!(
                "gpulse: cannot read the stand-in NVML's scenario {} (GPULSE_FAKE_NVML_SCENARIO): No such file or \
                 directory (os error 2)\n",
                missing.display()
            ),
            "{args:?}"
        );
    }
}

/// `status --no-gpm` says GPM is off by the flag, not missing from the GPU.
#[test]
fn status_no_gpm_blames_the_flag_not_the_gpu() {
    let (code, out, err) = run(gpulse(Some("scenarios/h200_idle.json")).args(["status", "--no-gpm"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("SM active — (GPM off: --no-gpm)"), "{out}");
    assert!(!out.contains("no GPM on this GPU"), "{out}");
}

/// A user no one can name is `—` in `status`, as in `top` and every other gap of the view.
#[test]
fn an_unknown_user_is_a_dash_as_in_top() {
    // Above the kernel's highest PID: no process, so no user and no command line.
    let pid: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max").unwrap().trim().parse::<u32>().unwrap() + 1;
    let json = std::fs::read_to_string(fixture("scenarios/h200_idle.json")).unwrap().replace(
        r#""pci_bus_id": "00000000:00:06.0","#,
        &format!(r#""pci_bus_id": "00000000:00:06.0", "processes": [{{"pid": {pid}, "used_memory_mib": 20}}],"#),
    );
    let sc = scenario_file("unknown-user", &json);
    let (code, out, err) = run(gpulse(None).env("GPULSE_FAKE_NVML_SCENARIO", &sc).arg("status"));
    assert_eq!(code, 0, "{err}");
    let row = out.lines().find(|l| l.trim_start().starts_with(&pid.to_string())).expect("process row");
    assert_eq!(row.split_whitespace().nth(1), Some("—"), "{row}");
    assert!(!row.contains('?'), "{row}");
}

/// With `--token-file`, the line that says where gpulse serves does not offer a dashboard link
/// that answers 401: it says how to open the dashboard, naming the file, never the token.
#[test]
fn serve_with_a_token_file_says_how_to_open_the_dashboard() {
    let dir = fresh_dir("causes", "token-file");
    let token = "9f2c4e6a8b0d1f3e5a7c9e1b3d5f7a9c";
    let file = dir.join("token");
    std::fs::write(&file, format!("{token}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let s = serve(&["--token-file", file.to_str().unwrap()]);
    let line = s.stderr.lines().find(|l| l.starts_with("gpulse: serving on ")).unwrap();
    let addr = &s.addr;
    assert_eq!(
        line,
        format!(
            "gpulse: serving on http://{addr}/; the dashboard opens as http://{addr}/?token=TOKEN with the token in {}",
            file.display()
        )
    );
    assert!(!s.stderr.contains(token), "{}", s.stderr);
    // The link it describes opens the dashboard; the bare address asks for the token in words
    // that do not send the user back to it.
    assert_eq!(get(addr, &format!("/?token={token}"), &[]).0, 303, "signed in");
    let (code, _, body) = get(addr, "/", &[]);
    assert_eq!(code, 401);
    assert!(body.contains("add ?token=TOKEN to this one"), "{body}");
}
