//! Where an always-on path spends its time: each NVML call, the /proc reads, SQLite and the live
//! diagnosis, summed per part and printed as a table to standard error at exit. Each part has its
//! wall time and its thread's CPU time: an NVML call's wall time is mostly waiting on the driver
//! (longer when another monitor holds it), and only the CPU time is what the recorder costs.
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

/// The calling thread's CPU time so far (`CLOCK_THREAD_CPUTIME_ID`), zero where it cannot be read.
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into `ts`, a live local; the clock id is a
    // constant every Linux since 2.6.12 knows, and a failure is told by its return value.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(u64::try_from(ts.tv_sec).unwrap_or(0), u32::try_from(ts.tv_nsec).unwrap_or(0))
}

/// One part's calls, wall time and CPU time.
struct Part {
    name: String,
    calls: u64,
    wall: Duration,
    cpu: Duration,
}

/// Every part, in the order they were first seen.
struct Totals {
    since: Instant,
    parts: Vec<Part>,
}

fn totals() -> &'static Mutex<Totals> {
    static T: OnceLock<Mutex<Totals>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(Totals { since: Instant::now(), parts: Vec::new() }))
}

/// Adds one call of `part` that took `wall` and `cpu` of its thread.
fn add(part: &str, wall: Duration, cpu: Duration) {
    if mode() == 3 && part.starts_with("nvml ") {
        eprintln!("nvml-profile {:>9.1} us  {}", wall.as_secs_f64() * 1e6, &part[5..]);
    }
    let mut t = totals().lock().unwrap_or_else(|e| e.into_inner());
    match t.parts.iter_mut().find(|p| p.name == part) {
        Some(p) => {
            p.calls += 1;
            p.wall += wall;
            p.cpu += cpu;
        }
        None => t.parts.push(Part { name: part.to_owned(), calls: 1, wall, cpu }),
    }
}

/// A part being timed: its start, in wall time and in the thread's CPU time.
#[derive(Debug, Clone, Copy)]
pub struct Started {
    wall: Instant,
    cpu: Duration,
}

/// Starts timing a part on this thread, or `None` when profiling is off.
pub fn start() -> Option<Started> {
    enabled().then(|| Started { wall: Instant::now(), cpu: thread_cpu() })
}

impl Started {
    /// Counts the time since `start` under `part`, on the same thread.
    pub fn finish(self, part: &str) {
        add(part, self.wall.elapsed(), thread_cpu().saturating_sub(self.cpu));
    }
}

/// Runs `f`, and counts its time under `part` when profiling is on.
pub fn timed<T>(part: &str, f: impl FnOnce() -> T) -> T {
    let Some(s) = start() else { return f() };
    let v = f();
    s.finish(part);
    v
}

/// The table: one row per part, most CPU in total first, with the wall time and the CPU time of
/// a call and of each second of the process's life (`cpu ms/s`; 10 ms/s is 1 % of a core).
pub fn table() -> String {
    use std::fmt::Write as _;
    let t = totals().lock().unwrap_or_else(|e| e.into_inner());
    let wall_s = t.since.elapsed().as_secs_f64().max(1e-9);
    let mut rows: Vec<&Part> = t.parts.iter().collect();
    rows.sort_by(|a, b| b.cpu.cmp(&a.cpu).then_with(|| b.wall.cmp(&a.wall)).then_with(|| a.name.cmp(&b.name)));
    let w = rows.iter().map(|r| r.name.chars().count()).max().unwrap_or(0).max(4);
    let mut s = format!("gpulse profile over {wall_s:.1} s\n");
    let _ = writeln!(
        s,
        "{:<w$} {:>8} {:>11} {:>11} {:>11} {:>11} {:>10}",
        "part", "calls", "wall ms", "wall us", "cpu ms", "cpu us", "cpu ms/s"
    );
    for p in rows {
        let (wall_ms, cpu_ms) = (p.wall.as_secs_f64() * 1e3, p.cpu.as_secs_f64() * 1e3);
        let n = p.calls as f64;
        let _ = writeln!(
            s,
            "{:<w$} {:>8} {wall_ms:>11.3} {:>11.1} {cpu_ms:>11.3} {:>11.1} {:>10.4}",
            p.name,
            p.calls,
            wall_ms * 1e3 / n,
            cpu_ms * 1e3 / n,
            cpu_ms / wall_s
        );
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
        add("test part", Duration::from_millis(2), Duration::from_millis(1));
        add("test part", Duration::from_millis(4), Duration::from_millis(2));
        let t = table();
        let row = t.lines().find(|l| l.starts_with("test part")).expect("a row");
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(&cells[2..7], ["2", "6.000", "3000.0", "3.000", "1500.0"], "{row}");
    }

    /// A busy loop's CPU time is counted; a sleep's is not, though its wall time is.
    #[test]
    fn cpu_time_is_the_threads_own() {
        let before = thread_cpu();
        let spin = Instant::now();
        while spin.elapsed() < Duration::from_millis(20) {
            std::hint::black_box(0u64);
        }
        let busy = thread_cpu() - before;
        assert!(busy >= Duration::from_millis(10), "a 20 ms spin used {busy:?} of CPU");
        let before = thread_cpu();
        std::thread::sleep(Duration::from_millis(50));
        let slept = thread_cpu() - before;
        assert!(slept < Duration::from_millis(10), "a 50 ms sleep used {slept:?} of CPU");
    }
}
