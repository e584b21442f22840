//! The limits against real sockets: idle and slow clients are closed, one address cannot take
//! every connection, an oversized head is refused, and a report being drawn holds up nothing.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Limits;
use crate::{Auth, Config, Server};

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

fn start(limits: Limits, report: Option<crate::ReportFn>) -> SocketAddr {
    let config = Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        auth: Arc::new(Auth::new(Some(TOKEN.into()), false)),
        hosts: Vec::new(),
        max_subscribers: 4,
        report,
        limits,
        web: Default::default(),
    };
    let server = Server::start(config).unwrap();
    let addr = server.local_addr();
    // The server lives on its thread for the rest of the test process.
    std::mem::forget(server);
    addr
}

pub(super) fn limits(head_timeout_ms: u64) -> Limits {
    Limits {
        max_connections: 64,
        max_per_address: 8,
        head_timeout: Duration::from_millis(head_timeout_ms),
        max_head_bytes: 4096,
    }
}

/// The whole answer to `GET path` over a new connection from `from`, or `None` if the server
/// closed it first.
fn get_from(from: &str, addr: SocketAddr, path: &str, extra: &str) -> Option<String> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    socket.bind(&from.parse::<SocketAddr>().ok()?.into()).ok()?;
    socket.connect(&addr.into()).ok()?;
    let mut s: TcpStream = socket.into();
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}Connection: close\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    (!out.is_empty()).then_some(out)
}

pub(super) fn get(addr: SocketAddr, path: &str) -> Option<String> {
    get_from("127.0.0.1:0", addr, path, "")
}

/// Whether the server closed `s` (end of file, or reset) within `within`.
pub(super) fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut b = [0u8; 512];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[test]
fn idle_and_slow_clients_are_closed_and_the_server_answers_meanwhile() {
    let addr = start(limits(500), None);
    let mut idle: Vec<TcpStream> = (0..6).map(|_| TcpStream::connect(addr).unwrap()).collect();
    // A slow client: a byte of its head every 100 ms, never the end of it.
    let mut slow = TcpStream::connect(addr).unwrap();
    let started = Instant::now();
    let dripping = std::thread::spawn(move || {
        for b in b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".iter().cycle() {
            if slow.write_all(&[*b]).is_err() {
                return (true, started.elapsed());
            }
            std::thread::sleep(Duration::from_millis(100));
            if started.elapsed() > Duration::from_secs(20) {
                return (false, started.elapsed());
            }
        }
        unreachable!()
    });
    assert!(get(addr, "/healthz").is_some_and(|r| r.ends_with("ok\n")), "answers beside idle clients");
    for s in &mut idle {
        assert!(closed_within(s, Duration::from_secs(10)), "an idle connection outlived the head timeout");
    }
    let (closed, after) = dripping.join().unwrap();
    assert!(closed, "a client sending its head a byte at a time was never closed");
    assert!(after < Duration::from_secs(10), "closed only after {after:?}");
}

#[test]
fn one_address_cannot_take_every_connection() {
    let addr = start(limits(30_000), None);
    let held: Vec<TcpStream> = (0..8).map(|_| TcpStream::connect(addr).unwrap()).collect();
    // The ninth from the same address is closed at once...
    let mut ninth = TcpStream::connect(addr).unwrap();
    assert!(closed_within(&mut ninth, Duration::from_secs(10)));
    assert_eq!(get(addr, "/healthz"), None, "127.0.0.1 is at its limit");
    // ...while another address is served.
    let other = get_from("127.0.0.2:0", addr, "/healthz", "");
    assert!(other.is_some_and(|r| r.ends_with("ok\n")));
    drop(held);
    let again = (0..100).find_map(|_| {
        std::thread::sleep(Duration::from_millis(50));
        get(addr, "/healthz")
    });
    assert!(again.is_some(), "the address is served again once its connections closed");
}

#[test]
fn an_oversized_request_head_is_refused() {
    let addr = start(limits(30_000), None);
    let big = format!("X-Big: {}\r\n", "a".repeat(8192));
    let answer = get_from("127.0.0.1:0", addr, "/healthz", &big).unwrap_or_default();
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer:?}");
}

#[test]
fn a_report_being_drawn_holds_up_no_other_request() {
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (started_tx, release_rx) = (Mutex::new(started_tx), Arc::new(Mutex::new(release_rx)));
    let report: crate::ReportFn = Box::new(move || {
        let _ = started_tx.lock().unwrap().send(());
        let _ = release_rx.lock().unwrap().recv_timeout(Duration::from_secs(60));
        Ok("<html>report</html>".into())
    });
    let addr = start(limits(30_000), Some(report));
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    let drawing = std::thread::spawn(move || get_from("127.0.0.1:0", addr, "/report", &auth));
    started_rx.recv_timeout(Duration::from_secs(30)).expect("the report started");
    // The report is still being drawn: other requests are answered all the same.
    for _ in 0..3 {
        assert!(get(addr, "/healthz").is_some_and(|r| r.ends_with("ok\n")));
    }
    release_tx.send(()).unwrap();
    let report = drawing.join().unwrap().unwrap_or_default();
    assert!(report.starts_with("HTTP/1.1 200") && report.ends_with("<html>report</html>"), "{report:?}");
}
