//! Marks from inside the training loop (`gpulse.step()`, phases, `--instrument`'s data wait),
//! received on a Unix datagram socket whose path the job finds in [`SOCKET_ENV`].
//!
//! The Python side batches lines into datagrams and never blocks: when this receiver falls
//! behind, the kernel refuses the datagram and the sender counts it as dropped. Each line is
//! `KIND PID T_NS ...`:
//! `step PID T_NS DROPPED`, `wait PID T_NS DUR_NS`, `phase PID T_NS DUR_NS NAME`,
//! `mark PID T_NS NAME JSON`, `bye PID SENT DROPPED`.
//!
//! Any process of the user can write to the socket, so a line's PID is not trusted: the kernel
//! says who sent each datagram (`SO_PASSCRED`), only the job's own process tree is heard, and
//! each sender is held to a rate no training loop reaches. What is refused is counted.

use std::collections::HashMap;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;
use std::time::Instant;

use gpulse_model::{Event, Marker, MarkerKind};

/// The environment variable that names the socket.
pub const SOCKET_ENV: &str = "GPULSE_EVENTS";

/// Something the loop sent.
#[derive(Debug, Clone, PartialEq)]
pub enum Received {
    Marker(Marker),
    Event(Event),
}

/// What the senders reported about themselves.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct SenderStats {
    /// pid → marks the sender dropped because this receiver was behind.
    pub dropped: HashMap<u32, u64>,
    /// Lines that did not parse.
    pub malformed: u64,
    /// Datagrams from processes outside the job's tree, refused.
    pub foreign: u64,
    /// Lines over a sender's rate, refused.
    pub over_rate: u64,
}

/// Marks a second one sender may send, sustained: a step, a wait and a phase or two per step
/// at 1,000 steps a second (a tiny model) is 4,000.
const RATE_PER_S: f64 = 5_000.0;
/// The burst a sender may send at once: the Python side batches a second of marks or more.
const BURST: f64 = 20_000.0;

/// Parses one line of the protocol from `sender`, the PID the kernel gave for its datagram; the
/// PID written in the line must be the same.
pub fn parse_line(line: &str, sender: u32, stats: &mut SenderStats) -> Option<Received> {
    let mut it = line.splitn(5, ' ');
    let kind = it.next()?;
    let pid: u32 = it.next()?.parse().ok()?;
    if pid != sender {
        return None;
    }
    let a: i64 = it.next()?.parse().ok()?;
    let mut rest = it;
    let marker = |kind, dur_ns: Option<i64>, name: Option<String>| {
        Some(Received::Marker(Marker::one(a / 1000, pid, kind, name, dur_ns.map(|d| d / 1000))))
    };
    match kind {
        "step" => {
            let dropped: u64 = rest.next().and_then(|d| d.parse().ok()).unwrap_or(0);
            note_dropped(stats, pid, dropped);
            marker(MarkerKind::Step, None, None)
        }
        "wait" => marker(MarkerKind::DataWait, Some(rest.next()?.parse().ok()?), None),
        "phase" => {
            let dur: i64 = rest.next()?.parse().ok()?;
            marker(MarkerKind::Phase, Some(dur), Some(rest.next()?.to_owned()))
        }
        "mark" => {
            let name = rest.next()?.to_owned();
            let mut payload = match rest.next() {
                Some(j) => serde_json::from_str::<serde_json::Value>(j).ok()?,
                None => serde_json::json!({}),
            };
            let obj = payload.as_object_mut()?;
            obj.insert("name".into(), name.into());
            obj.insert("pid".into(), pid.into());
            Some(Received::Event(Event { t_ms: a / 1_000_000, kind: gpulse_model::EventKind::Mark, payload }))
        }
        "bye" => {
            let dropped: u64 = rest.next()?.parse().ok()?;
            note_dropped(stats, pid, dropped);
            None
        }
        _ => None,
    }
}

fn note_dropped(stats: &mut SenderStats, pid: u32, dropped: u64) {
    let e = stats.dropped.entry(pid).or_default();
    *e = (*e).max(dropped);
}

/// The socket and the thread that reads it.
pub struct MarkReceiver {
    dir: PathBuf,
    path: PathBuf,
    /// Until [`MarkReceiver::start`]: the kernel queues what arrives meanwhile.
    socket: Option<UnixDatagram>,
    tx: mpsc::Sender<Received>,
    rx: mpsc::Receiver<Received>,
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<SenderStats>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MarkReceiver {
    /// Binds a socket in a new private directory under the user's runtime folder
    /// (`$XDG_RUNTIME_DIR`, which the session's end clears), else the temporary folder. Nothing
    /// is read before [`MarkReceiver::start`] names the job.
    pub fn bind() -> std::io::Result<Self> {
        let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        let base = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|d| d.is_absolute() && d.is_dir())
            .unwrap_or_else(std::env::temp_dir);
        let dir = base.join(format!("gpulse-{}-{stamp}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        let path = dir.join("events.sock");
        let socket = UnixDatagram::bind(&path)?;
        socket.set_read_timeout(Some(Duration::from_millis(200)))?;
        // A larger queue keeps bursts between reads (the kernel caps it; a smaller one still works).
        let _ = set_option(&socket, libc::SO_RCVBUF, 4 << 20);
        // The kernel attaches each sender's credentials to its datagrams.
        set_option(&socket, libc::SO_PASSCRED, 1)?;
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Mutex::new(SenderStats::default()));
        Ok(Self { dir, path, socket: Some(socket), tx, rx, stop, stats, thread: None })
    }

    /// Starts reading, hearing only `root` and the processes below it.
    pub fn start(&mut self, root: u32) -> std::io::Result<()> {
        let Some(socket) = self.socket.take() else { return Ok(()) };
        let (tx, stop, stats) = (self.tx.clone(), self.stop.clone(), self.stats.clone());
        let thread = std::thread::Builder::new()
            .name("marks".into())
            .spawn(move || receive(&socket, root, &tx, &stop, &stats))?;
        self.thread = Some(thread);
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The private folder the socket is in, with `--instrument`'s files beside it.
    pub fn folder(&self) -> &Path {
        &self.dir
    }

    /// Everything received since the last call.
    pub fn drain(&self) -> Vec<Received> {
        self.rx.try_iter().collect()
    }

    pub fn stats(&self) -> SenderStats {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for MarkReceiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // The folder is this process's own (mode 0700): with `--instrument`'s files in it too.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn receive(
    socket: &UnixDatagram,
    root: u32,
    tx: &mpsc::Sender<Received>,
    stop: &AtomicBool,
    stats: &Mutex<SenderStats>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut senders: HashMap<u32, Sender> = HashMap::new();
    while !stop.load(Ordering::SeqCst) {
        let (n, pid) = match recv_with_pid(socket, &mut buf) {
            Ok(r) => r,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        let Ok(mut stats) = stats.lock() else { return };
        // With SO_PASSCRED the kernel always says who sent a datagram; without it, nobody is heard.
        let Some(pid) = pid else {
            stats.foreign += 1;
            continue;
        };
        let now = Instant::now();
        if senders.len() > 4096 {
            senders.retain(|_, s| now.duration_since(s.at) < Duration::from_secs(10));
        }
        let sender =
            senders.entry(pid).or_insert_with(|| Sender { in_tree: false, checked: None, tokens: BURST, at: now });
        // Checked again now and then: a PID of the tree that exits may be reused outside it.
        if sender.checked.is_none_or(|c| now.duration_since(c) > Duration::from_secs(5)) {
            sender.in_tree = in_tree(pid, root);
            sender.checked = Some(now);
        }
        if !sender.in_tree {
            stats.foreign += 1;
            continue;
        }
        sender.refill(now);
        let text = String::from_utf8_lossy(&buf[..n]);
        for line in text.lines().filter(|l| !l.is_empty()) {
            if sender.tokens < 1.0 {
                stats.over_rate += 1;
                continue;
            }
            sender.tokens -= 1.0;
            match parse_line(line, pid, &mut stats) {
                Some(r) => {
                    if tx.send(r).is_err() {
                        return;
                    }
                }
                None => stats.malformed += u64::from(!line.starts_with("bye ")),
            }
        }
    }
}

/// One sender's standing: whether it is the job's, and its rate budget.
struct Sender {
    in_tree: bool,
    checked: Option<Instant>,
    tokens: f64,
    at: Instant,
}

impl Sender {
    fn refill(&mut self, now: Instant) {
        self.tokens = (self.tokens + now.duration_since(self.at).as_secs_f64() * RATE_PER_S).min(BURST);
        self.at = now;
    }
}

/// Whether `pid` is `root` or below it, by its parents in `/proc`.
fn in_tree(pid: u32, root: u32) -> bool {
    let mut at = pid;
    for _ in 0..64 {
        if at == root {
            return true;
        }
        match gpulse_sample::proc_info::parent(at) {
            Some(p) if p > 1 => at = p,
            _ => return false,
        }
    }
    false
}

/// Receives one datagram and the sender's PID as the kernel gives it (`SCM_CREDENTIALS`);
/// `None` when no credentials came with it.
fn recv_with_pid(socket: &UnixDatagram, buf: &mut [u8]) -> std::io::Result<(usize, Option<u32>)> {
    use std::os::fd::AsRawFd;
    // Room for one `ucred` control message, aligned as `cmsghdr` needs.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: zeroed msghdr is a valid empty header; its pointers are set to live buffers below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: recvmsg on a socket this process owns, into buffers that outlive the call.
    let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut pid = None;
    // SAFETY: the CMSG_* macros walk the control buffer recvmsg filled, within msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_CREDENTIALS {
                let cred: libc::ucred = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                pid = u32::try_from(cred.pid).ok().filter(|p| *p > 0);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, pid))
}

/// Sets an integer option of `socket` at `SOL_SOCKET`.
fn set_option(socket: &UnixDatagram, option: libc::c_int, value: libc::c_int) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain setsockopt on a socket this process owns, with a correctly sized value.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            option,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_kind() {
        let mut st = SenderStats::default();
        let step = parse_line("step 42 1700000000123456789 3", 42, &mut st).unwrap();
        assert_eq!(step, Received::Marker(Marker::one(1_700_000_000_123_456, 42, MarkerKind::Step, None, None)));
        assert_eq!(st.dropped[&42], 3);
        let Received::Marker(w) = parse_line("wait 42 1000000 250000", 42, &mut st).unwrap() else { panic!() };
        assert_eq!((w.kind, w.t_us, w.dur_us), (MarkerKind::DataWait, 1000, Some(250)));
        let Received::Marker(p) = parse_line("phase 42 0 5000000 eval", 42, &mut st).unwrap() else { panic!() };
        assert_eq!((p.kind, p.name.as_deref(), p.dur_us), (MarkerKind::Phase, Some("eval"), Some(5000)));
        let Received::Event(e) =
            parse_line(r#"mark 42 2000000 checkpoint {"epoch": 3, "path": "a b.pt"}"#, 42, &mut st).unwrap()
        else {
            panic!()
        };
        assert_eq!((e.kind.as_str(), e.t_ms), ("mark", 2));
        assert_eq!(e.payload, serde_json::json!({"name": "checkpoint", "pid": 42, "epoch": 3, "path": "a b.pt"}));
        assert_eq!(parse_line("bye 42 100 7", 42, &mut st), None);
        assert_eq!(st.dropped[&42], 7);
        assert_eq!(parse_line("wait 42 notanumber 1", 42, &mut st), None);
        assert_eq!(parse_line("", 42, &mut st), None);
        // A line that names another process than the one the kernel says sent it.
        assert_eq!(parse_line("step 43 1000 0", 42, &mut st), None);
        assert_eq!(parse_line("bye 43 100 9", 42, &mut st), None);
        assert!(!st.dropped.contains_key(&43));
    }

    proptest::proptest! {
        /// Whatever a sender writes: no panic, and nothing heard under a PID other than the
        /// kernel's.
        #[test]
        fn any_line_parses_or_is_dropped_and_only_under_the_senders_pid(
            kind in proptest::sample::select(vec!["step", "wait", "phase", "mark", "bye", "x", ""]),
            pid in proptest::prop_oneof![proptest::strategy::Just("42".to_owned()), "[0-9]{1,12}", "[ -~]{0,6}"],
            rest in "[ -~\\t\u{80}-\u{10ffff}]{0,80}",
        ) {
            let mut st = SenderStats::default();
            let line = format!("{kind} {pid} {rest}");
            if let Some(r) = parse_line(&line, 42, &mut st) {
                let heard = match r {
                    Received::Marker(m) => m.pid,
                    Received::Event(e) => e.payload["pid"].as_u64().unwrap() as u32,
                };
                proptest::prop_assert_eq!(heard, 42);
            }
            proptest::prop_assert!(st.dropped.keys().all(|p| *p == 42));
        }
    }

    /// Waits until `r` has delivered `want` marks or two seconds have passed.
    fn gather(r: &MarkReceiver, want: usize) -> Vec<Received> {
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(2);
        while got.len() < want && Instant::now() < deadline {
            got.extend(r.drain());
            std::thread::sleep(Duration::from_millis(10));
        }
        // Anything beyond `want` would still be on its way.
        std::thread::sleep(Duration::from_millis(100));
        got.extend(r.drain());
        got
    }

    #[test]
    fn receives_over_the_socket_from_the_job_only_under_the_kernels_pid() {
        let me = std::process::id();
        let mut r = MarkReceiver::bind().unwrap();
        let s = UnixDatagram::unbound().unwrap();
        // Sent before the job is known: queued by the kernel, read once it is.
        s.send_to(format!("step {me} 1000 0\nwait {me} 2000 1000\ngarbage\nstep 1 3000 0\n").as_bytes(), r.path())
            .unwrap();
        r.start(me).unwrap();
        let got = gather(&r, 2);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got.iter().all(|m| matches!(m, Received::Marker(m) if m.pid == me)), "{got:?}");
        assert_eq!(r.stats().malformed, 2, "garbage, and a line claiming PID 1");
        let dir = r.path().parent().unwrap().to_owned();
        drop(r);
        assert!(!dir.exists(), "the socket's directory is removed");
    }

    #[test]
    fn a_process_outside_the_job_is_not_heard() {
        let mut job = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let mut r = MarkReceiver::bind().unwrap();
        r.start(job.id()).unwrap();
        let me = std::process::id();
        let s = UnixDatagram::unbound().unwrap();
        for _ in 0..3 {
            s.send_to(format!("step {me} 1000 0\n").as_bytes(), r.path()).unwrap();
        }
        // Its own PID written in, from outside: still refused.
        s.send_to(format!("step {} 1000 0\n", job.id()).as_bytes(), r.path()).unwrap();
        let got = gather(&r, 1);
        let _ = job.kill();
        let _ = job.wait();
        assert!(got.is_empty(), "{got:?}");
        assert_eq!(r.stats().foreign, 4);
    }

    #[test]
    fn a_flood_is_held_to_the_rate_and_what_is_refused_is_counted() {
        let me = std::process::id();
        let mut r = MarkReceiver::bind().unwrap();
        r.start(me).unwrap();
        let s = UnixDatagram::unbound().unwrap();
        let line = format!("step {me} 1000 0\n");
        let datagram = line.repeat(1000);
        let started = Instant::now();
        let sent = 40_000usize;
        for _ in 0..sent / 1000 {
            while s.send_to(datagram.as_bytes(), r.path()).is_err() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let elapsed_s = started.elapsed().as_secs_f64();
        let got = gather(&r, sent).len();
        let allowed = BURST + RATE_PER_S * (elapsed_s + 0.5);
        assert!((got as f64) <= allowed, "{got} heard in {elapsed_s:.2} s, at most {allowed:.0} allowed");
        assert_eq!(got as u64 + r.stats().over_rate, sent as u64, "every line heard or counted");
        assert!(r.stats().over_rate > 0);
    }
}
