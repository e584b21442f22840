//! A check that cannot run here says so where `cargo test` shows it, and CI, which installs
//! everything, never skips.

use std::process::Command;

use super::support::*;

#[test]
fn a_skipped_check_is_shown_through_the_harness_capture() {
    if std::env::var_os("GPULSE_SKIP_PROBE").is_some() {
        skipped("the probe's own check");
        return;
    }
    // This test binary again, running only this test, as `cargo test` runs it: output capture
    // on, the test passing.
    let name = format!("{}::a_skipped_check_is_shown_through_the_harness_capture", module_path!());
    let name = name.split_once("::").expect("crate::module").1;
    let (code, out, err) = run(Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--test-threads=1"])
        .env("GPULSE_SKIP_PROBE", "1"));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("1 passed"), "{out}");
    assert_eq!(err.lines().filter(|l| *l == "skipped: the probe's own check").count(), 1, "{out}{err}");
}
