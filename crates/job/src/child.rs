//! The job's process: started with the caller's stdin and stdout, its stderr through gpulse
//! (a pseudo-terminal when gpulse's own stderr is a terminal, so the job still sees one).

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};

/// A started job.
pub struct Job {
    pub child: Child,
    /// What the job writes on stderr.
    pub stderr: File,
}

/// Why the job could not start, with a shell's exit status (127 not found, 126 not runnable).
#[derive(Debug)]
pub struct SpawnError {
    pub code: u8,
    pub message: String,
}

/// Starts `argv` with `env` added to gpulse's environment.
pub fn spawn(argv: &[OsString], env: &[(OsString, OsString)], stderr_is_tty: bool) -> Result<Job, SpawnError> {
    let program = argv.first().ok_or_else(|| SpawnError { code: 2, message: "no command given after --".into() })?;
    let (ours, theirs) = if stderr_is_tty { pty_pair() } else { pipe_pair() }
        .map_err(|e| SpawnError { code: 1, message: format!("cannot set up the job's stderr: {e}") })?;
    let mut cmd = Command::new(program);
    cmd.args(&argv[1..]).stdin(Stdio::inherit()).stdout(Stdio::inherit()).stderr(Stdio::from(theirs));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().map_err(|e| {
        let name = program.to_string_lossy();
        match e.kind() {
            std::io::ErrorKind::NotFound => SpawnError { code: 127, message: format!("{name}: command not found") },
            std::io::ErrorKind::PermissionDenied => {
                SpawnError { code: 126, message: format!("{name}: permission denied") }
            }
            _ => SpawnError { code: 126, message: format!("cannot run {name}: {e}") },
        }
    })?;
    // `cmd` holds the job's end; dropping it leaves the job the only writer, so reading ends
    // when the job (and every process that inherited its stderr) is gone.
    drop(cmd);
    Ok(Job { child, stderr: File::from(ours) })
}

/// How the job ended: the exit status gpulse passes on, the recording's stop reason, and the
/// facts for its stop event (the status, the signal, the OOM killer's count).
pub fn ended(
    status: ExitStatus,
    oom: Option<&super::cgroup::OomCounter>,
) -> (u8, String, serde_json::Map<String, serde_json::Value>) {
    let mut fields = serde_json::Map::new();
    let code = exit_code(status);
    fields.insert("exit_status".into(), code.into());
    let reason = match gpulse_base::signal::killed_by(status) {
        Some(sig) => {
            let reason = format!("command killed by {}", gpulse_base::signal::signal_words(&sig));
            fields.insert("signal".into(), sig.into());
            reason
        }
        None => format!("command exited with status {code}"),
    };
    if let Some(oom) = oom
        && let Some(kills) = oom.since_start()
    {
        fields.insert("oom_kills".into(), kills.into());
        fields.insert("memory_events".into(), oom.path().display().to_string().into());
    }
    (code, reason, fields)
}

/// The status a shell reports for `status`: the exit code, or 128 + the signal that ended it.
pub fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(c), _) => (c & 0xff) as u8,
        (None, Some(s)) => (128 + s).min(255) as u8,
        _ => 1,
    }
}

fn cloexec(fd: &OwnedFd) {
    // SAFETY: F_SETFD on a descriptor this process owns.
    unsafe {
        libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
    }
}

fn pipe_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors that this process then owns.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A pseudo-terminal in raw mode (bytes pass unchanged) with the size of gpulse's stderr.
fn pty_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let (mut master, mut slave) = (0, 0);
    // SAFETY: winsize is plain data; a failed ioctl leaves it zeroed, which openpty accepts.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize into `size`, a live local.
    unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut size) };
    // SAFETY: openpty writes two descriptors; name and termios may be null.
    if unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), &size) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    // SAFETY: termios is plain data filled by tcgetattr before use.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(slave.as_raw_fd(), &mut t) == 0 {
            libc::cfmakeraw(&mut t);
            libc::tcsetattr(slave.as_raw_fd(), libc::TCSANOW, &t);
        }
    }
    cloexec(&master);
    cloexec(&slave);
    Ok((master, slave))
}
