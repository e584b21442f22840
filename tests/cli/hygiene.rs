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
