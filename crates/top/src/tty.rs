//! The terminal's input, waited for with poll(2) and read by `top` itself. Once the terminal is
//! gone (its window closed, its tmux pane killed) the descriptor stays readable forever, and
//! crossterm's reader retries without end, deaf to its timeout and to a stop signal. Here a
//! hangup is seen as one, and a signal interrupts the wait.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// What the wait saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// Bytes to read: crossterm may read them now.
    Ready,
    /// Nothing within the timeout, or a signal arrived.
    Idle,
    /// The terminal is gone.
    HungUp,
}

/// The descriptor crossterm reads keys from: standard input when it is a terminal, else
/// `/dev/tty`, which it opens the same way.
pub struct TtyInput {
    fd: RawFd,
    _owned: Option<OwnedFd>,
}

impl TtyInput {
    pub fn open() -> std::io::Result<Self> {
        // SAFETY: isatty only inspects the descriptor.
        if unsafe { libc::isatty(libc::STDIN_FILENO) } == 1 {
            return Ok(Self { fd: libc::STDIN_FILENO, _owned: None });
        }
        let f = std::fs::File::open("/dev/tty")?;
        let owned = OwnedFd::from(f);
        Ok(Self { fd: owned.as_raw_fd(), _owned: Some(owned) })
    }

    /// Waits up to `timeout` for input or a hangup.
    pub fn wait(&self, timeout: Duration) -> Input {
        wait_fd(self.fd, timeout)
    }

    /// The terminal's size, columns and rows: one ioctl, cheap enough to ask every wait.
    pub fn size(&self) -> Option<(u16, u16)> {
        // SAFETY: winsize is plain data, filled by the ioctl when it succeeds.
        let mut w: libc::winsize = unsafe { std::mem::zeroed() };
        // SAFETY: TIOCGWINSZ writes one winsize.
        let ok = unsafe { libc::ioctl(self.fd, libc::TIOCGWINSZ, &mut w) } == 0;
        ok.then_some((w.ws_col, w.ws_row))
    }

    /// Reads what poll(2) said is there. `None`: the terminal is gone (end of file, or an error
    /// other than a signal).
    pub fn read(&self, buf: &mut [u8]) -> Option<usize> {
        // SAFETY: reads into a buffer of its stated length.
        let n = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
        match n {
            0 => None,
            n if n > 0 => Some(n as usize),
            _ => match std::io::Error::last_os_error().kind() {
                std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock => Some(0),
                _ => None,
            },
        }
    }
}

fn wait_fd(fd: RawFd, timeout: Duration) -> Input {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: one valid pollfd, its length 1.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    if n < 0 {
        // EINTR: a signal; the caller checks for a stop. Any other error: a terminal that
        // cannot be polled cannot be read either.
        let interrupted = std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted;
        return if interrupted { Input::Idle } else { Input::HungUp };
    }
    if n == 0 {
        return Input::Idle;
    }
    if p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
        return Input::HungUp;
    }
    Input::Ready
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pseudo-terminal pair: (master, slave).
    fn pty() -> (OwnedFd, OwnedFd) {
        use std::os::fd::FromRawFd;
        let (mut m, mut s) = (0, 0);
        // SAFETY: openpty writes two descriptors; name, termios and size may be null.
        let rc = unsafe { libc::openpty(&mut m, &mut s, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
        assert_eq!(rc, 0, "openpty");
        // SAFETY: both were just opened and are owned here alone.
        unsafe { (OwnedFd::from_raw_fd(m), OwnedFd::from_raw_fd(s)) }
    }

    #[test]
    fn a_closed_terminal_reads_as_hung_up_and_a_key_as_ready() {
        let (master, slave) = pty();
        let fd = slave.as_raw_fd();
        assert_eq!(wait_fd(fd, Duration::from_millis(20)), Input::Idle, "nothing typed");
        let mut m = std::fs::File::from(master.try_clone().unwrap());
        std::io::Write::write_all(&mut m, b"q\n").unwrap();
        // A cooked terminal hands over a line; `top`'s raw one, each key.
        assert_eq!(wait_fd(fd, Duration::from_millis(500)), Input::Ready, "a key");
        // Read, as crossterm would: a line still unread would keep the descriptor readable.
        let mut line = [0u8; 8];
        // SAFETY: reads into a buffer of its stated length.
        assert!(unsafe { libc::read(fd, line.as_mut_ptr().cast(), line.len()) } > 0);
        drop((m, master));
        assert_eq!(wait_fd(fd, Duration::from_millis(500)), Input::HungUp, "the terminal's other end closed");
    }
}
