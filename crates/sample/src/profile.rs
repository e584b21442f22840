//! Where an always-on path spends its time: each NVML call, the /proc reads, SQLite and the live
//! diagnosis, summed per part and printed as a table to standard error at exit.
//!
//! `GPULSE_PROFILE=1` turns it on; `GPULSE_PROFILE_NVML=1` does too, and also prints each NVML
//! call as it returns (the older per-call log). Off, a timed part costs one relaxed load.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// 0: not read yet; 1: off; 2: table; 3: table and per-call lines.
static MODE: AtomicU8 = AtomicU8::new(0);

fn mode() -> u8 {
    match MODE.load(Ordering::Relaxed) {
        0 => {
            let on = |k: &str| std::env::var_os(k).is_some_and(|v| v == "1");
            let m = if on("GPULSE_PROFILE_NVML") {
                3
            } else if on("GPULSE_PROFILE") {
                2
            } else {
                1
            };
            MODE.store(m, Ordering::Relaxed);
            m
        }
        m => m,
    }
}

/// Whether profiling is on.
pub fn enabled() -> bool {
    mode() >= 2
}

/// Calls and total time of one part, in the order parts were first seen.
struct Totals {
    since: Instant,
    parts: Vec<(String, u64, Duration)>,
}

fn totals() -> &'static Mutex<Totals> {
    static T: OnceLock<Mutex<Totals>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(Totals { since: Instant::now(), parts: Vec::new() }))
}

/// Adds one call of `part` that took `took`.
pub fn add(part: &str, took: Duration) {
    if mode() == 3 && part.starts_with("nvml ") {
        eprintln!("nvml-profile {:>9.1} us  {}", took.as_secs_f64() * 1e6, &part[5..]);
    }
    let mut t = totals().lock().unwrap_or_else(|e| e.into_inner());
    match t.parts.iter_mut().find(|p| p.0 == part) {
        Some(p) => {
            p.1 += 1;
            p.2 += took;
        }
        None => t.parts.push((part.to_owned(), 1, took)),
    }
}

/// Runs `f`, and counts its time under `part` when profiling is on.
pub fn timed<T>(part: &str, f: impl FnOnce() -> T) -> T {
    if !enabled() {
        return f();
    }
    let start = Instant::now();
    let v = f();
    add(part, start.elapsed());
    v
}

/// The table: one row per part, slowest in total first, with its share of each second of the
/// process's life (`ms/s`; 10 ms/s is 1 % of a core, on the thread that made the call).
pub fn table() -> String {
    use std::fmt::Write as _;
    let t = totals().lock().unwrap_or_else(|e| e.into_inner());
    let wall_s = t.since.elapsed().as_secs_f64().max(1e-9);
    let mut rows: Vec<&(String, u64, Duration)> = t.parts.iter().collect();
    rows.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    let w = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0).max(4);
    let mut s = format!("gpulse profile over {wall_s:.1} s\n");
    let _ = writeln!(s, "{:<w$} {:>8} {:>11} {:>11} {:>8}", "part", "calls", "total ms", "mean us", "ms/s");
    for (part, calls, took) in rows {
        let ms = took.as_secs_f64() * 1e3;
        let _ = writeln!(s, "{part:<w$} {calls:>8} {ms:>11.3} {:>11.1} {:>8.4}", ms * 1e3 / *calls as f64, ms / wall_s);
    }
    s
}

/// Prints the table to standard error when profiling is on; for the end of `main`.
pub fn report() {
    if enabled() {
        eprint!("{}", table());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_summed_and_tabled() {
        add("test part", Duration::from_millis(2));
        add("test part", Duration::from_millis(4));
        let t = table();
        let row = t.lines().find(|l| l.starts_with("test part")).expect("a row");
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(&cells[2..5], ["2", "6.000", "3000.0"], "{row}");
    }
}
