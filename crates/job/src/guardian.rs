//! Keeps the job's stderr open after gpulse is gone: a small forked process holds a copy of the
//! stream's reading end and, once gpulse exits or is killed, copies what the job writes to the
//! terminal, so the job never dies of SIGPIPE (or EIO on its pseudo-terminal) because its
//! watcher did. Once the job has closed the stream too, it removes gpulse's folder for the job
//! (its socket and `--instrument`'s files), which a gpulse killed outright could not.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The forked keeper; gpulse holds the write end of its lifeline, which the kernel closes
/// whenever gpulse ends, however it ends.
pub struct Guardian {
    _lifeline: OwnedFd,
}

impl Guardian {
    /// Forks the keeper of `stream` (the job's stderr as gpulse reads it), which removes the
    /// folder `leave_nothing_in` once gpulse and the job are both done.
    pub fn start(stream: &impl AsRawFd, leave_nothing_in: Option<&Path>) -> std::io::Result<Self> {
        // Made before the fork: the child only makes system calls.
        let folder = leave_nothing_in.and_then(|p| CString::new(p.as_os_str().as_bytes()).ok());
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills two descriptors that this process then owns.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both were just created and belong to nobody else.
        let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: the child runs only async-signal-safe calls (sigaction, close, read, write,
        // _exit) on a stack buffer, so forking a threaded process is sound.
        match unsafe { libc::fork() } {
            -1 => Err(std::io::Error::last_os_error()),
            0 => keep(stream.as_raw_fd(), read_end.as_raw_fd(), write_end.as_raw_fd(), folder.as_ref()),
            _ => Ok(Self { _lifeline: write_end }),
        }
    }
}

/// The keeper's whole life: wait for gpulse to end, then copy `stream` to fd 2 until every
/// writer of it has closed, then remove `folder`. Signals meant for gpulse (Ctrl-C, a closed
/// terminal) leave it be.
fn keep(stream: RawFd, lifeline: RawFd, ours: RawFd, folder: Option<&CString>) -> ! {
    // SAFETY: async-signal-safe calls only, on descriptors this process holds.
    unsafe {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGPIPE, libc::SIGTSTP] {
            libc::signal(sig, libc::SIG_IGN);
        }
        libc::close(ours);
        // Nothing else of gpulse's is held: its recording, sockets and listeners close here,
        // and so do stdin and stdout, which the job holds itself.
        if stream > 2 && lifeline > 2 {
            libc::close(0);
            libc::close(1);
        }
        let (low, high) = (stream.min(lifeline), stream.max(lifeline));
        for (from, to) in [(3, low - 1), (low + 1, high - 1), (high + 1, RawFd::MAX)] {
            if from <= to && libc::syscall(libc::SYS_close_range, from as u32, to as u32, 0) != 0 {
                // Kernels before 5.9: one by one, up to the descriptor limit.
                let max = libc::sysconf(libc::_SC_OPEN_MAX).clamp(256, 65_536) as RawFd;
                for fd in from..=to.min(max) {
                    libc::close(fd);
                }
            }
        }
        let mut buf = [0u8; 16 * 1024];
        // Blocks while gpulse lives; end of file once it is gone.
        loop {
            let n = libc::read(lifeline, buf.as_mut_ptr().cast(), 1);
            if n >= 0 || *libc::__errno_location() != libc::EINTR {
                break;
            }
        }
        loop {
            let n = libc::read(stream, buf.as_mut_ptr().cast(), buf.len());
            if n > 0 {
                let mut done = 0;
                while done < n {
                    let w = libc::write(2, buf.as_ptr().add(done as usize).cast(), (n - done) as usize);
                    // The terminal gone (EIO): keep draining so the job never blocks.
                    if w <= 0 && *libc::__errno_location() != libc::EINTR {
                        break;
                    }
                    done += w.max(0);
                }
            } else if n == 0 || *libc::__errno_location() != libc::EINTR {
                if let Some(f) = folder {
                    let fd =
                        libc::open(f.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC);
                    if fd >= 0 {
                        empty(fd, 0);
                        libc::close(fd);
                        libc::rmdir(f.as_ptr());
                    }
                }
                libc::_exit(0);
            }
        }
    }
}

/// Removes what the folder open at `dir` holds, folders in it `depth` deep at most 4 levels down,
/// with system calls alone (the forked keeper of a threaded process may not allocate). Links are
/// removed, never followed.
unsafe fn empty(dir: RawFd, depth: u32) {
    let mut buf = [0u8; 4096];
    // SAFETY: getdents64 fills `buf` with records of the folder open at `dir`; each record's
    // length and name lie within what it returned.
    unsafe {
        loop {
            let n = libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len());
            if n <= 0 {
                return;
            }
            let mut at = 0usize;
            while at < n as usize {
                // struct linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type, then the name.
                let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
                let kind = buf[at + 18];
                let name = buf.as_ptr().add(at + 19).cast::<libc::c_char>();
                let dot = *name == b'.' as libc::c_char
                    && (*name.add(1) == 0 || (*name.add(1) == b'.' as libc::c_char && *name.add(2) == 0));
                if !dot {
                    if kind == libc::DT_DIR && depth < 4 {
                        let sub = libc::openat(
                            dir,
                            name,
                            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                        );
                        if sub >= 0 {
                            empty(sub, depth + 1);
                            libc::close(sub);
                        }
                        libc::unlinkat(dir, name, libc::AT_REMOVEDIR);
                    } else {
                        libc::unlinkat(dir, name, 0);
                    }
                }
                at += reclen.max(1);
            }
        }
    }
}
