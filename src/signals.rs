//! Ctrl-C and SIGTERM as a flag that loops poll, so recordings end cleanly.

use std::sync::atomic::{AtomicI32, Ordering};

static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signal: libc::c_int) {
    RECEIVED.store(signal, Ordering::SeqCst);
}

/// Routes SIGINT and SIGTERM to [`received`] instead of ending the process.
pub fn catch_stop_signals() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
}

/// The stop signal received so far, if any.
pub fn received() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Sleeps until `deadline`, waking early when a stop signal arrives.
pub fn sleep_until(deadline: std::time::Instant) {
    while received().is_none() {
        let now = std::time::Instant::now();
        let Some(left) = deadline.checked_duration_since(now) else { return };
        std::thread::sleep(left.min(std::time::Duration::from_millis(50)));
    }
}
