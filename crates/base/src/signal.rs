//! Signals by name, said the same way by every stop message.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

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
