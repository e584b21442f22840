//! Tests that need a time zone run in a copy of the test binary started with `TZ` set: setting
//! `TZ` in a running test binary races with other threads' `localtime_r`, which is undefined
//! behaviour.

use std::process::Command;

/// Set in the copy to the test it runs.
const CHILD: &str = "GPULSE_SMI_ZONED_TEST";

/// Runs `body` in a fresh copy of this test binary with `TZ=zone`. `test` is the test's path
/// below the crate (`log::tests::name`); the parent fails when the copy fails or ran no test.
pub fn in_zone(zone: &str, test: &str, body: impl FnOnce()) {
    if std::env::var(CHILD).as_deref() == Ok(test) {
        return body();
    }
    let exe = std::env::current_exe().expect("the test binary has a path");
    let out = Command::new(exe)
        .args([test, "--exact", "--test-threads=1"])
        .env(CHILD, test)
        .env("TZ", zone)
        .output()
        .expect("the test binary starts again");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{test} under TZ={zone} failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("test result: ok. 1 passed"), "{test} did not run under TZ={zone}:\n{stdout}");
}
