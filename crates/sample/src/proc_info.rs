//! What `/proc` says about a process: its command line and its owner.

use std::fs;

/// A process's command line, arguments joined by spaces; `None` if it is gone or hidden.
pub fn cmdline(pid: u32) -> Option<String> {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<String> =
        raw.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    (!args.is_empty()).then(|| args.join(" "))
}

/// Whether `pid` is running: it exists and has not exited (a zombie, not yet reaped, has).
pub fn is_running(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next()))
        .is_some_and(|state| !matches!(state, 'Z' | 'X'))
}

/// When a process started, in clock ticks since boot (`/proc/PID/stat`'s field 22): with the
/// PID, it names one process, never a later one that reused the PID.
pub fn start_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command's closing parenthesis start at field 3.
    stat.rsplit_once(')')?.1.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// A process's state letter (`/proc/PID/stat`'s field 3): `R`, `S`, `T` when stopped, ...
pub fn state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// A process's parent (`/proc/PID/stat`'s field 4).
pub fn parent(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(4 - 3)?.parse().ok()
}

/// The short name the kernel keeps for a process (`/proc/PID/comm`).
pub fn comm(pid: u32) -> Option<String> {
    let s = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(s.trim_end().to_owned())
}

/// The user name that owns a process (its real uid, looked up in the user database); the
/// numeric uid when the database has no entry.
pub fn user(pid: u32) -> Option<String> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let uid: u32 = status.lines().find_map(|l| l.strip_prefix("Uid:"))?.split_whitespace().next()?.parse().ok()?;
    Some(user_name(uid).unwrap_or_else(|| uid.to_string()))
}

fn user_name(uid: u32) -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 4096];
    // SAFETY: passwd is plain data; all zeroes is a valid value that getpwuid_r overwrites.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer refers to live, correctly sized storage owned by this frame.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc != 0 || result.is_null() || pwd.pw_name.is_null() {
        return None;
    }
    // SAFETY: getpwuid_r succeeded, so pw_name points to a NUL-terminated string inside `buf`.
    let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) };
    Some(name.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_process() {
        let me = std::process::id();
        assert!(cmdline(me).unwrap().contains("gpulse_sample"));
        assert!(!comm(me).unwrap().is_empty());
        // SAFETY: getuid cannot fail and touches no memory.
        let uid = unsafe { libc::getuid() };
        let expected = user_name(uid).unwrap_or_else(|| uid.to_string());
        assert_eq!(user(me), Some(expected));
    }

    #[test]
    fn start_ticks_say_when_the_process_started() {
        let started = std::time::Instant::now();
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let ticks = start_ticks(child.id()).unwrap();
        // SAFETY: sysconf only reads a setting.
        let per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let uptime_s: f64 =
            fs::read_to_string("/proc/uptime").unwrap().split_whitespace().next().unwrap().parse().unwrap();
        let age_s = uptime_s - ticks as f64 / per_s;
        assert!((-0.05..=started.elapsed().as_secs_f64() + 0.05).contains(&age_s), "started {age_s} s ago");
        assert!(start_ticks(std::process::id()).unwrap() <= ticks, "the test started before its child");
        let _ = (child.kill(), child.wait());
        assert_eq!(start_ticks(u32::MAX), None);
    }

    #[test]
    fn missing_process_is_none() {
        assert_eq!(cmdline(u32::MAX), None);
        assert_eq!(user(u32::MAX), None);
    }
}
