//! Copies the job's stderr through to gpulse's, and turns the lines that matter into events.

use std::io::Read;
use std::sync::Arc;
use std::sync::mpsc::Sender;

use gpulse_model::{Event, EventKind};

use super::stderr_events::{LineSplitter, detect};
use super::terminal::Terminal;

/// The same kind of event again within this long is the same failure printed twice (a chained
/// traceback repeats the message).
const SAME_EVENT_MS: i64 = 2000;

/// Reads `stream` until it ends, in a thread; each recognised line is sent on `events`.
pub fn spawn(mut stream: std::fs::File, term: Arc<Terminal>, events: Sender<Event>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 16 * 1024];
        let mut lines = LineSplitter::default();
        let mut last: Vec<(EventKind, i64)> = Vec::new();
        let mut on_line = |line: &str| {
            let Some((kind, payload)) = detect(line) else { return };
            let t_ms = gpulse_base::clock::now_us() / 1000;
            if last.iter().any(|(k, t)| *k == kind && t_ms - t < SAME_EVENT_MS) {
                return;
            }
            last.retain(|(k, _)| *k != kind);
            last.push((kind.clone(), t_ms));
            let _ = events.send(Event { t_ms, kind, payload });
        };
        loop {
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    term.pass_through(&buf[..n]);
                    lines.feed(&buf[..n], &mut on_line);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // A pseudo-terminal reports EIO once every writer has closed it.
                Err(_) => break,
            }
        }
        lines.flush(&mut on_line);
    })
}
