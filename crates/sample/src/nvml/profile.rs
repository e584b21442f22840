//! NVML's calls in the profile (`crate::profile`), each under `nvml <call>`.

use std::sync::OnceLock;

/// Runs `f`, and counts its time under `nvml <what>` when profiling is on.
pub(super) fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let Some(s) = crate::profile::start() else { return f() };
    let v = f();
    s.finish(&format!("nvml {what}"));
    v
}

/// When profiling, times a GPM metrics request for each metric alone (once per process), to
/// show whether the driver's cost grows with the number of metrics asked for.
pub(super) fn per_metric<T: std::fmt::Debug, E>(get: impl Fn(&[T]) -> Result<(), E>, ids: &[T]) {
    static DONE: OnceLock<()> = OnceLock::new();
    if !crate::profile::enabled() || DONE.set(()).is_err() {
        return;
    }
    for id in ids {
        let _ = timed(&format!("gpm_metrics_get({id:?}) alone, once"), || get(std::slice::from_ref(id)));
    }
}
