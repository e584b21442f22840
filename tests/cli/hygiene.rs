//! The suite's own helpers leave nothing behind: every temporary path they make is removed and
//! every process they start is ended, when a test passes and when it fails.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::support::{KillOnDrop, fresh_dir, lib_without, scenario_file, wait_until};

/// Whether `pid` is a running process; a zombie (ended, not yet reaped by init) is not.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !s.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')))
}

/// One test's worth of every helper that makes a path or starts a process, noting what each
/// made in `made`; then it fails when asked to.
fn a_test(made: &mut (Vec<PathBuf>, Vec<u32>), fails: bool) {
    let dir = fresh_dir("hygiene", "dir");
    std::fs::write(dir.join("inside"), "a file the test wrote").unwrap();
    let scenario = scenario_file("hygiene", "{}");
    let lib = lib_without(&["nvmlInit_v2"]);
    // A shell whose `sleep` outlives it unless its whole group ends.
    let mut shell =
        KillOnDrop::group(Command::new("sh").args(["-c", "sleep 600 & echo $!; wait"]).stdout(Stdio::piped()));
    let mut line = String::new();
    std::io::BufReader::new(shell.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let sleeper = KillOnDrop::spawn(Command::new("sleep").arg("600"));
    let server = super::serve::serve_started(&[]);
    made.0.extend([dir.to_path_buf(), scenario.to_path_buf(), scenario.parent().unwrap().to_owned()]);
    made.0.extend([lib.to_path_buf(), lib.parent().unwrap().to_owned()]);
    made.1.extend([shell.id(), line.trim().parse().unwrap(), sleeper.id(), server.child.id()]);
    for p in &made.0 {
        assert!(p.exists(), "{} was made", p.display());
    }
    for &pid in &made.1 {
        assert!(alive(pid), "{pid} runs");
    }
    assert!(!fails, "the test fails here");
}

#[test]
fn the_suites_helpers_leave_no_path_and_no_process_passed_or_failed() {
    for fails in [false, true, false, true] {
        let mut made = (Vec::new(), Vec::new());
        let ended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a_test(&mut made, fails)));
        assert_eq!(ended.is_err(), fails);
        assert_eq!((made.0.len(), made.1.len()), (5, 4), "every helper ran");
        for p in &made.0 {
            assert!(!p.exists(), "{} is left behind", p.display());
        }
        // A killed process's children are reaped by init a moment later.
        for &pid in &made.1 {
            wait_until(10, &format!("process {pid} to end"), || !alive(pid));
        }
    }
}

/// What a `gpulse run --instrument` leaves in the temporary folder once it and its job are
/// done, for each way they end: gpulse ended by SIGTERM, SIGINT and SIGKILL (which no handler
/// sees: the keeper of the job's stderr removes the folder once the job is done), the job
/// killed by a signal, the job ending, and a command that never started. Nothing, each time.
#[test]
fn a_run_leaves_nothing_in_the_temporary_folder_however_it_ends() {
    // Six runs one after another: not beside the tests whose jobs time themselves.
    let _one = super::thread_clocks::ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let job = "import os, sys, time\nopen(sys.argv[1], 'w').write(str(os.getpid()))\n\
               time.sleep(float(sys.argv[2]))\nif sys.argv[3] == 'kill': os.kill(os.getpid(), 9)\n";
    for (how, job_s, signal) in [
        ("gpulse SIGTERM", 30.0, Some(libc::SIGTERM)),
        ("gpulse SIGINT", 30.0, Some(libc::SIGINT)),
        ("gpulse SIGKILL", 2.0, Some(libc::SIGKILL)),
        ("job SIGKILL", 0.5, None),
        ("job ends", 0.5, None),
        ("no such command", 0.0, None),
    ] {
        let (tmp, runtime) = (fresh_dir("hygiene", "tmpdir"), fresh_dir("hygiene", "runtime"));
        let here = fresh_dir("hygiene", "job");
        let (script, pid_file) = (here.join("job.py"), here.join("pid"));
        std::fs::write(&script, job).unwrap();
        let scenario = scenario_file("hygiene-run", r#"{"init_error": 9, "devices": []}"#);
        let mut cmd = super::support::gpulse(None);
        cmd.env("GPULSE_FAKE_NVML_SCENARIO", &*scenario).env("TMPDIR", &*tmp).env("GPULSE_JOBS_DIR", here.join("jobs"));
        // Where the user's session has a runtime folder, the run's folder goes there.
        let made_in = if how.contains("SIGKILL") || how == "job ends" {
            cmd.env("XDG_RUNTIME_DIR", &*runtime);
            &runtime
        } else {
            cmd.env_remove("XDG_RUNTIME_DIR");
            &tmp
        };
        cmd.args(["run", "--status", "off", "--no-report", "--instrument", "-o"]).arg(here.join("r.db")).arg("--");
        if how == "no such command" {
            cmd.arg(here.join("nonexistent"));
        } else {
            cmd.arg("python3").arg(&script).arg(&pid_file).arg(job_s.to_string());
            cmd.arg(if how == "job SIGKILL" { "kill" } else { "end" });
        }
        let mut gpulse = KillOnDrop::spawn(cmd.stdout(Stdio::null()).stderr(Stdio::null()));
        if how != "no such command" {
            wait_until(20, &format!("{how}: the job to start"), || {
                pid_file.exists() && made_in.read_dir().unwrap().count() > 0
            });
        }
        if let Some(sig) = signal {
            // SAFETY: a signal to the gpulse this test started.
            unsafe { libc::kill(gpulse.id() as i32, sig) };
        }
        gpulse.wait().unwrap();
        if let Ok(pid) = std::fs::read_to_string(&pid_file) {
            let pid: u32 = pid.parse().unwrap();
            wait_until(40, &format!("{how}: the job to end"), || !alive(pid));
        }
        for d in [&tmp, &runtime] {
            wait_until(10, &format!("{how}: {} to be empty", d.display()), || d.read_dir().unwrap().count() == 0);
        }
    }
}
