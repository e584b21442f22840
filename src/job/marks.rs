//! Marks from inside the training loop (`gpulse.step()`, phases, `--instrument`'s data wait),
//! received on a Unix datagram socket whose path the job finds in [`SOCKET_ENV`].
//!
//! The Python side batches lines into datagrams and never blocks: when this receiver falls
//! behind, the kernel refuses the datagram and the sender counts it as dropped. Each line is
//! `KIND PID T_NS ...`:
//! `step PID T_NS DROPPED`, `wait PID T_NS DUR_NS`, `phase PID T_NS DUR_NS NAME`,
//! `mark PID T_NS NAME JSON`, `bye PID SENT DROPPED`.

use std::collections::HashMap;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use gpulse_record::{Event, Marker, MarkerKind};

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
}

/// Parses one line of the protocol.
pub fn parse_line(line: &str, stats: &mut SenderStats) -> Option<Received> {
    let mut it = line.splitn(5, ' ');
    let kind = it.next()?;
    let pid: u32 = it.next()?.parse().ok()?;
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
            Some(Received::Event(Event { t_ms: a / 1_000_000, kind: "mark".into(), payload }))
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
    rx: mpsc::Receiver<Received>,
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<SenderStats>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MarkReceiver {
    /// Binds a socket in a new private directory under the temporary directory.
    pub fn bind() -> std::io::Result<Self> {
        let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        let dir = std::env::temp_dir().join(format!("gpulse-{}-{stamp}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        let path = dir.join("events.sock");
        let socket = UnixDatagram::bind(&path)?;
        socket.set_read_timeout(Some(Duration::from_millis(200)))?;
        set_receive_buffer(&socket, 4 << 20);
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Mutex::new(SenderStats::default()));
        let thread = {
            let (stop, stats) = (stop.clone(), stats.clone());
            std::thread::Builder::new().name("marks".into()).spawn(move || receive(&socket, &tx, &stop, &stats))?
        };
        Ok(Self { dir, path, rx, stop, stats, thread: Some(thread) })
    }

    pub fn path(&self) -> &Path {
        &self.path
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
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn receive(socket: &UnixDatagram, tx: &mpsc::Sender<Received>, stop: &AtomicBool, stats: &Mutex<SenderStats>) {
    let mut buf = vec![0u8; 64 * 1024];
    while !stop.load(Ordering::SeqCst) {
        let n = match socket.recv(&mut buf) {
            Ok(n) => n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        let text = String::from_utf8_lossy(&buf[..n]);
        let Ok(mut stats) = stats.lock() else { return };
        for line in text.lines().filter(|l| !l.is_empty()) {
            let parsed = parse_line(line, &mut stats);
            let ok = match parsed {
                Some(r) => tx.send(r).is_ok(),
                None => {
                    stats.malformed += u64::from(!line.starts_with("bye "));
                    true
                }
            };
            if !ok {
                return;
            }
        }
    }
}

/// Asks for a larger queue so bursts between reads are kept; the kernel caps it.
fn set_receive_buffer(socket: &UnixDatagram, bytes: libc::c_int) {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain setsockopt on a socket this process owns, with a correctly sized value.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_kind() {
        let mut st = SenderStats::default();
        let step = parse_line("step 42 1700000000123456789 3", &mut st).unwrap();
        assert_eq!(step, Received::Marker(Marker::one(1_700_000_000_123_456, 42, MarkerKind::Step, None, None)));
        assert_eq!(st.dropped[&42], 3);
        let Received::Marker(w) = parse_line("wait 42 1000000 250000", &mut st).unwrap() else { panic!() };
        assert_eq!((w.kind, w.t_us, w.dur_us), (MarkerKind::DataWait, 1000, Some(250)));
        let Received::Marker(p) = parse_line("phase 42 0 5000000 eval", &mut st).unwrap() else { panic!() };
        assert_eq!((p.kind, p.name.as_deref(), p.dur_us), (MarkerKind::Phase, Some("eval"), Some(5000)));
        let Received::Event(e) =
            parse_line(r#"mark 42 2000000 checkpoint {"epoch": 3, "path": "a b.pt"}"#, &mut st).unwrap()
        else {
            panic!()
        };
        assert_eq!((e.kind.as_str(), e.t_ms), ("mark", 2));
        assert_eq!(e.payload, serde_json::json!({"name": "checkpoint", "pid": 42, "epoch": 3, "path": "a b.pt"}));
        assert_eq!(parse_line("bye 42 100 7", &mut st), None);
        assert_eq!(st.dropped[&42], 7);
        assert_eq!(parse_line("wait 42 notanumber 1", &mut st), None);
        assert_eq!(parse_line("", &mut st), None);
    }

    #[test]
    fn receives_over_the_socket() {
        let r = MarkReceiver::bind().unwrap();
        let s = UnixDatagram::unbound().unwrap();
        s.send_to(b"step 1 1000 0\nwait 1 2000 1000\ngarbage\n", r.path()).unwrap();
        let mut got = Vec::new();
        for _ in 0..100 {
            got.extend(r.drain());
            if got.len() >= 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(r.stats().malformed, 1);
        let dir = r.path().parent().unwrap().to_owned();
        drop(r);
        assert!(!dir.exists(), "the socket's directory is removed");
    }
}
