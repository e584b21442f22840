//! Whole-machine CPU (total, per core, iowait, steal), memory and load.
//!
//! Read at every poll (ten times a second at `run`'s interval), so the three files stay open and
//! are read again from their start, and only the fields kept are parsed: opening them and
//! parsing every line each poll cost three times as much (the tests check the values against
//! `procfs`'s own parsers).

use std::fs::File;
use std::os::unix::fs::FileExt;

use gpulse_model::HostSample;

use gpulse_base::clock::now_us;

/// Busy and total ticks of one CPU line of `/proc/stat`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Ticks {
    busy: u64,
    iowait: u64,
    steal: u64,
    total: u64,
}

impl Ticks {
    /// The fields after a `cpu`/`cpuN` label: user nice system idle iowait irq softirq steal
    /// guest guest_nice (older kernels stop earlier; a missing field is 0).
    fn of_line(fields: &str) -> Option<Self> {
        let mut v = [0u64; 8];
        let mut n = 0;
        for (slot, f) in v.iter_mut().zip(fields.split_ascii_whitespace()) {
            *slot = f.parse().ok()?;
            n += 1;
        }
        if n < 4 {
            return None;
        }
        let [user, nice, system, idle, iowait, irq, softirq, steal] = v;
        let idle = idle + iowait;
        // guest time is already counted in user time.
        let total = user + nice + system + idle + irq + softirq + steal;
        Some(Self { busy: total - idle - steal, iowait, steal, total })
    }
}

/// The machine's total and each core's ticks, in `/proc/stat`'s order.
fn cpu_ticks(stat: &str) -> Option<(Ticks, Vec<Ticks>)> {
    let mut total = None;
    let mut cores = Vec::new();
    for line in stat.lines().take_while(|l| l.starts_with("cpu")) {
        let (label, rest) = line.split_once(' ')?;
        match label {
            "cpu" => total = Some(Ticks::of_line(rest)?),
            _ => cores.push(Ticks::of_line(rest)?),
        }
    }
    Some((total?, cores))
}

/// A `/proc/meminfo` value in bytes (the file says kB and means KiB).
fn meminfo_bytes(meminfo: &str, key: &str) -> Option<u64> {
    let line = meminfo.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))?;
    let mut it = line.split_ascii_whitespace();
    let n: u64 = it.next()?.parse().ok()?;
    Some(if it.next() == Some("kB") { n * 1024 } else { n })
}

/// The first of `/proc/loadavg`'s three load averages.
fn load_1m(loadavg: &str) -> Option<f32> {
    loadavg.split_ascii_whitespace().next()?.parse().ok()
}

/// Percent of `part` over the interval between two readings.
fn share(now: u64, before: u64, total_now: u64, total_before: u64) -> Option<f32> {
    let dt = total_now.checked_sub(total_before).filter(|d| *d > 0)?;
    Some((now.saturating_sub(before) as f64 * 100.0 / dt as f64) as f32)
}

/// A `/proc` file kept open and read again from its start each time.
#[derive(Debug)]
struct Kept {
    file: Option<File>,
    buf: Vec<u8>,
}

impl Kept {
    fn open(path: &str) -> Self {
        Self { file: File::open(path).ok(), buf: vec![0; 4096] }
    }

    /// The whole file now. A `/proc` file is made at the read that starts at 0, so a buffer it
    /// fills is too small for it: read it again, whole, into a larger one.
    fn read(&mut self) -> Option<&str> {
        let file = self.file.as_ref()?;
        loop {
            let n = file.read_at(&mut self.buf, 0).ok()?;
            if n < self.buf.len() {
                return std::str::from_utf8(&self.buf[..n]).ok();
            }
            self.buf.resize(2 * self.buf.len(), 0);
        }
    }
}

/// Reads the machine; CPU shares cover the time since the previous call.
#[derive(Debug)]
pub struct HostSampler {
    prev: Option<(Ticks, Vec<Ticks>)>,
    stat: Kept,
    meminfo: Kept,
    loadavg: Kept,
}

impl Default for HostSampler {
    fn default() -> Self {
        Self::new()
    }
}

impl HostSampler {
    pub fn new() -> Self {
        Self {
            prev: None,
            stat: Kept::open("/proc/stat"),
            meminfo: Kept::open("/proc/meminfo"),
            loadavg: Kept::open("/proc/loadavg"),
        }
    }

    /// One reading. CPU fields are `None` on the first call (there is no interval yet).
    pub fn sample(&mut self) -> HostSample {
        let mut s = HostSample { timestamp_us: now_us(), ..HostSample::default() };
        if let Some((total, cores)) = self.stat.read().and_then(cpu_ticks) {
            if let Some((pt, pc)) = &self.prev {
                s.cpu_busy_pct = share(total.busy, pt.busy, total.total, pt.total);
                s.cpu_iowait_pct = share(total.iowait, pt.iowait, total.total, pt.total);
                s.cpu_steal_pct = share(total.steal, pt.steal, total.total, pt.total);
                s.cpu_core_busy_pct =
                    cores.iter().zip(pc).map(|(c, p)| share(c.busy, p.busy, c.total, p.total)).collect();
            }
            self.prev = Some((total, cores));
        }
        if let Some(m) = self.meminfo.read() {
            let total = meminfo_bytes(m, "MemTotal");
            s.memory_total_bytes = total;
            s.memory_used_bytes = total.zip(meminfo_bytes(m, "MemAvailable")).map(|(t, a)| t.saturating_sub(a));
            let swap = meminfo_bytes(m, "SwapTotal");
            s.swap_total_bytes = swap;
            s.swap_used_bytes = swap.zip(meminfo_bytes(m, "SwapFree")).map(|(t, f)| t.saturating_sub(f));
        }
        s.load_1m = self.loadavg.read().and_then(load_1m);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_core_without_ticks_is_unknown_not_idle() {
        assert_eq!(share(500, 500, 1000, 1000), None, "no ticks passed: nothing to tell");
        assert_eq!(share(500, 400, 1100, 900), Some(50.0));
        assert_eq!(share(5, 4, 90, 100), None, "a counter that went back");
    }

    /// The fields as `procfs` parses them, from the same bytes: the hand parser's ground truth.
    #[test]
    fn the_kept_files_read_what_procfs_reads() {
        use procfs::{FromBufRead, FromBufReadSI, FromRead};
        let mut h = HostSampler::new();
        let stat = h.stat.read().unwrap().to_owned();
        let want = procfs::KernelStats::from_buf_read(stat.as_bytes(), procfs::current_system_info()).unwrap();
        let (total, cores) = cpu_ticks(&stat).unwrap();
        let of = |c: &procfs::CpuTime| {
            let (iowait, steal) = (c.iowait.unwrap_or(0), c.steal.unwrap_or(0));
            let t = c.user + c.nice + c.system + c.idle + iowait + c.irq.unwrap_or(0) + c.softirq.unwrap_or(0) + steal;
            Ticks { busy: t - c.idle - iowait - steal, iowait, steal, total: t }
        };
        assert_eq!(total, of(&want.total));
        assert_eq!(cores, want.cpu_time.iter().map(of).collect::<Vec<_>>());
        let meminfo = h.meminfo.read().unwrap().to_owned();
        let m = procfs::Meminfo::from_buf_read(meminfo.as_bytes()).unwrap();
        assert_eq!(meminfo_bytes(&meminfo, "MemTotal"), Some(m.mem_total));
        assert_eq!(meminfo_bytes(&meminfo, "MemAvailable"), m.mem_available);
        assert_eq!(meminfo_bytes(&meminfo, "SwapFree"), Some(m.swap_free));
        assert_eq!(meminfo_bytes(&meminfo, "Mem"), None, "a key is a whole name");
        let load = h.loadavg.read().unwrap().to_owned();
        let l = procfs::LoadAverage::from_read(load.as_bytes()).unwrap();
        assert_eq!(load_1m(&load), Some(l.one));
    }

    /// An older kernel's four fields, a guest's extra ones, and a buffer the file outgrows.
    #[test]
    fn cpu_lines_of_any_length_and_a_file_larger_than_the_buffer() {
        let stat = "cpu  10 1 5 100\ncpu0 10 1 5 100 7 1 2 3 40 0\nintr 1 2 3\ncpu9 1 1 1 1\n";
        let (total, cores) = cpu_ticks(stat).unwrap();
        assert_eq!(total, Ticks { busy: 16, iowait: 0, steal: 0, total: 116 });
        assert_eq!(
            cores,
            [Ticks { busy: 19, iowait: 7, steal: 3, total: 129 }],
            "guest is in user already; lines after the cpu block are not cores"
        );
        assert_eq!(cpu_ticks("cpu  1 2 3\n"), None, "too few fields to tell");
        let mut small = Kept::open("/proc/self/status");
        small.buf = vec![0; 8];
        let whole = std::fs::read_to_string("/proc/self/status").unwrap();
        let read = small.read().unwrap().to_owned();
        assert_eq!(read.lines().next(), whole.lines().next());
        assert_eq!(read.lines().count(), whole.lines().count());
        assert!(Kept::open("/proc/no such file").read().is_none());
    }

    #[test]
    fn second_reading_has_cpu_shares() {
        let mut h = HostSampler::new();
        let first = h.sample();
        assert_eq!(first.cpu_busy_pct, None);
        assert!(first.memory_total_bytes.unwrap() > first.memory_used_bytes.unwrap());
        // Swap as /proc/meminfo has it, read here on our own.
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
        let kib = |key: &str| -> u64 {
            let line = meminfo.lines().find(|l| l.starts_with(key)).unwrap();
            line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
        };
        assert_eq!(first.swap_total_bytes, Some(kib("SwapTotal:")));
        let used = kib("SwapTotal:") - kib("SwapFree:");
        let got = first.swap_used_bytes.unwrap();
        assert!(got.abs_diff(used) <= 64 << 20, "swap in use {got} against {used} a moment later");
        // Burn a little CPU so the interval has ticks in it.
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(60) {
            std::hint::black_box(0u64.wrapping_add(1));
        }
        let second = h.sample();
        let busy = second.cpu_busy_pct.expect("an interval");
        assert!((0.0..=100.0).contains(&busy));
        assert_eq!(
            second.cpu_core_busy_pct.len(),
            std::thread::available_parallelism().map_or(0, |n| n.get()).max(second.cpu_core_busy_pct.len())
        );
    }
}
