//! Per-call timing of NVML, printed to standard error when `GPULSE_PROFILE_NVML=1`.
//!
//! It exists to find which calls a poll spends its time in on a real driver.

use std::sync::OnceLock;
use std::time::Instant;

fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("GPULSE_PROFILE_NVML").is_some_and(|v| v == "1"))
}

/// Runs `f`, and prints how long it took when profiling is on.
pub(super) fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    if !enabled() {
        return f();
    }
    let start = Instant::now();
    let v = f();
    eprintln!("nvml-profile {:>9.1} us  {what}", start.elapsed().as_secs_f64() * 1e6);
    v
}

/// When profiling, times a GPM metrics request for each metric alone (once per process), to
/// show which metrics the driver's cost comes from.
pub(super) fn per_metric<T: std::fmt::Debug, E>(get: impl Fn(&[T]) -> Result<(), E>, ids: &[T]) {
    static DONE: OnceLock<()> = OnceLock::new();
    if !enabled() || DONE.set(()).is_err() {
        return;
    }
    for id in ids {
        let _ = timed(&format!("gpm_metrics_get({id:?})"), || get(std::slice::from_ref(id)));
    }
}
