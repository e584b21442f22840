//! Signals: by name, said the same way by every stop message; and caught. Ctrl-C, SIGTERM and
//! SIGHUP (a closed terminal) become a flag that loops poll, so recordings end cleanly; for a job
//! gpulse runs, the signals to pass on to it; and `serve`'s SIGHUP, a reload.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

/// The signal that ended the job, by name (`SIGKILL`), when a signal ended it.
pub fn killed_by(status: ExitStatus) -> Option<String> {
    status.signal().map(signal_name)
}

/// A signal named (`SIGINT`) as every stop message says it: `Ctrl-C (SIGINT)` for the one a
/// terminal's Ctrl-C sends, the name alone for the rest.
pub fn signal_words(name: &str) -> String {
    if name == "SIGINT" { "Ctrl-C (SIGINT)".to_owned() } else { name.to_owned() }
}

/// Why a watch stopped on signal `sig`, as `record`, `attach` and `serve` say it:
/// `stopped by Ctrl-C (SIGINT)`.
pub fn stopped_by(sig: i32) -> String {
    format!("stopped by {}", signal_words(&signal_name(sig)))
}

/// A signal's name as `kill -l` gives it, with the `SIG` prefix; `signal N` for the rest.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        _ => return format!("signal {sig}"),
    };
    name.to_owned()
}

static RECEIVED: AtomicI32 = AtomicI32::new(0);
/// SIGINT, SIGTERM and SIGHUP sent to gpulse by another process and not yet passed on to the job.
static TO_FORWARD_INT: AtomicU32 = AtomicU32::new(0);
static TO_FORWARD_TERM: AtomicU32 = AtomicU32::new(0);
static TO_FORWARD_HUP: AtomicU32 = AtomicU32::new(0);
/// SIGHUP received by `serve`, which reloads its token rather than stopping.
static RELOAD: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_reload(_: libc::c_int) {
    RELOAD.fetch_add(1, Ordering::SeqCst);
}

/// Routes `signal` to `handler`, which must touch atomics only.
fn count_with(signal: libc::c_int, handler: extern "C" fn(libc::c_int)) {
    // SAFETY: the handler only touches an atomic; the struct is zeroed, then filled as
    // sigaction(2) asks.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(signal, &action, std::ptr::null_mut());
    }
}

/// SIGHUP asks for a reload (as daemons take it) instead of a stop; see [`take_reload`].
pub fn catch_reload() {
    count_with(libc::SIGHUP, on_reload);
}

/// Whether a reload was asked for since the last call.
pub fn take_reload() -> bool {
    RELOAD.swap(0, Ordering::SeqCst) > 0
}

/// SIGCONT received: a job stopped on its own (SIGSTOP to its PID) goes on with gpulse.
static TO_FORWARD_CONT: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_continue(_: libc::c_int) {
    TO_FORWARD_CONT.fetch_add(1, Ordering::SeqCst);
}

/// Passes SIGCONT on to the job: `kill -CONT` to gpulse resumes a job that was stopped alone.
/// (SIGCONT still continues gpulse itself, whatever the handler.)
pub fn catch_continue() {
    count_with(libc::SIGCONT, on_continue);
}

/// The signals that stop a recording.
const STOP_SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

extern "C" fn on_signal(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    RECEIVED.store(signal, Ordering::SeqCst);
    // The terminal sends Ctrl-C to the whole foreground process group, the job included
    // (si_code SI_KERNEL): passing that on would deliver it twice.
    // SAFETY: the kernel hands a valid siginfo to an SA_SIGINFO handler.
    let from_terminal = !info.is_null() && unsafe { (*info).si_code } == libc::SI_KERNEL;
    if !from_terminal {
        match signal {
            libc::SIGINT => TO_FORWARD_INT.fetch_add(1, Ordering::SeqCst),
            libc::SIGTERM => TO_FORWARD_TERM.fetch_add(1, Ordering::SeqCst),
            libc::SIGHUP => TO_FORWARD_HUP.fetch_add(1, Ordering::SeqCst),
            _ => 0,
        };
    }
}

/// Routes SIGINT, SIGTERM and SIGHUP to [`received`] instead of ending the process. SIGHUP is
/// caught, not ignored, so a job gpulse starts afterwards still gets the default action.
pub fn catch_stop_signals() {
    for sig in STOP_SIGNALS {
        // SAFETY: the handler only touches atomics, which is async-signal-safe; the struct is
        // zeroed, then filled as sigaction(2) asks.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// The stop signal received so far, if any.
pub fn received() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Signals to pass on to a job, in arrival order per kind; each is returned once.
pub fn take_to_forward() -> Vec<i32> {
    let mut out = Vec::new();
    for (counter, sig) in [
        (&TO_FORWARD_INT, libc::SIGINT),
        (&TO_FORWARD_TERM, libc::SIGTERM),
        (&TO_FORWARD_HUP, libc::SIGHUP),
        (&TO_FORWARD_CONT, libc::SIGCONT),
    ] {
        for _ in 0..counter.swap(0, Ordering::SeqCst) {
            out.push(sig);
        }
    }
    out
}
