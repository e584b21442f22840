//! The process tree under a root PID, and how GPU processes relate to it.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use gpulse_model::{GpuProcessClass, TreeProcess, TreeSample};
use procfs::process::Process;

use gpulse_base::clock::now_us;

use crate::proc_info;

/// How often the tree's proportional set sizes may be read: `smaps_rollup` walks the process's
/// page tables (10–20 ms for a process of several GiB on an H200 host), and a DataLoader worker
/// copying its dataset page by page grows over seconds, not within one.
const PSS_EVERY: std::time::Duration = std::time::Duration::from_secs(5);
/// Copies that matter take the host's memory: the tree's PSS is read again only once the host's
/// available memory fell this much since the last reading (and each new process once).
const PSS_AFTER_FALL_BYTES: u64 = 1 << 30;

/// Follows a root PID and everything it spawns.
pub struct TreeSampler {
    root: u32,
    cpu: super::CpuMeter,
    /// When each process's PSS was last read.
    pss_at: HashMap<u32, Instant>,
    /// When the tree's PSS was last read whole, and the host's available memory then.
    pss_round: Option<(Instant, Option<u64>)>,
    /// Each process's command line, and the `comm` it was read under: a new `comm` is an exec
    /// (a pyenv shim becoming the python it runs), so the line is read again.
    cmdlines: HashMap<u32, (String, Option<String>)>,
    page_bytes: u64,
}

impl TreeSampler {
    pub fn new(root: u32) -> Self {
        Self {
            root,
            cpu: super::CpuMeter::default(),
            pss_at: HashMap::new(),
            pss_round: None,
            cmdlines: HashMap::new(),
            page_bytes: proc_info::page_bytes(),
        }
    }

    /// The root PID.
    pub fn root(&self) -> u32 {
        self.root
    }

    /// When a process of the last reading started (`/proc/PID/stat`'s field 22), so that a
    /// GPU process in the tree costs no second read of its stat.
    pub fn start_ticks(&self, pid: u32) -> Option<u64> {
        self.cpu.start_ticks(pid)
    }

    /// PIDs of the tree now, root first, parents before children.
    pub fn pids(&self) -> Vec<u32> {
        let mut out = Vec::new();
        let mut queue = vec![self.root];
        let mut visited = HashSet::new();
        while let Some(pid) = queue.pop() {
            if !visited.insert(pid) || !proc_info::exists(pid) {
                continue;
            }
            out.push(pid);
            let mut kids = proc_info::children(pid);
            kids.sort_unstable_by(|a, b| b.cmp(a));
            queue.extend(kids);
        }
        out
    }

    /// Whether to read the whole tree's PSS now: at the first reading, then at most every
    /// [`PSS_EVERY`] and only once the host's available memory fell [`PSS_AFTER_FALL_BYTES`].
    fn pss_round_due(&mut self, now: Instant) -> bool {
        let available = || <procfs::Meminfo as procfs::Current>::current().ok().and_then(|m| m.mem_available);
        let due = match self.pss_round {
            None => true,
            Some((at, _)) if now.duration_since(at) < PSS_EVERY => false,
            Some((_, before)) => match (before, available()) {
                (Some(b), Some(a)) => b.saturating_sub(a) >= PSS_AFTER_FALL_BYTES,
                // Without the host's figure, the time alone.
                _ => true,
            },
        };
        if due {
            self.pss_round = Some((now, available()));
        }
        due
    }

    /// One reading of the tree; `None` once the root has exited (a zombie counts as exited).
    pub fn sample(&mut self) -> Option<TreeSample> {
        let pids = self.pids();
        if pids.first() != Some(&self.root) {
            return None;
        }
        if !proc_info::is_running(self.root) {
            return None;
        }
        let now = Instant::now();
        let round = self.pss_round_due(now);
        let mut processes = Vec::with_capacity(pids.len());
        for pid in pids {
            let Ok(proc_) = Process::new(pid as i32) else { continue };
            let Ok(stat) = proc_.stat() else { continue };
            if stat.state == 'Z' {
                continue;
            }
            let ticks = stat.utime + stat.stime;
            let cpu_pct = self.cpu.read(pid, stat.starttime, ticks, now);
            let cmdline = match self.cmdlines.get(&pid) {
                Some((comm, line)) if *comm == stat.comm => line.clone(),
                _ => {
                    let line = proc_info::cmdline(pid);
                    self.cmdlines.insert(pid, (stat.comm.clone(), line.clone()));
                    line
                }
            };
            // Another user's process (a setuid helper) refuses both: absent, never 0.
            let io = crate::profile::timed("proc tree io (/proc/PID/io)", || proc_.io()).ok();
            let pss_due = round || !self.pss_at.contains_key(&pid);
            let pss_bytes = if pss_due {
                self.pss_at.insert(pid, now);
                crate::profile::timed("proc tree pss (/proc/PID/smaps_rollup)", || proc_.smaps_rollup())
                    .ok()
                    .and_then(|r| r.memory_map_rollup.0.first().and_then(|m| m.extension.map.get("Pss").copied()))
            } else {
                None
            };
            processes.push(TreeProcess {
                pid,
                ppid: stat.ppid as u32,
                cpu_pct,
                rss_bytes: Some(stat.rss * self.page_bytes),
                threads: u32::try_from(stat.num_threads).ok(),
                state: Some(stat.state),
                cmdline,
                read_bytes: io.as_ref().map(|i| i.read_bytes),
                write_bytes: io.as_ref().map(|i| i.write_bytes),
                pss_bytes,
            });
        }
        let live: HashSet<u32> = processes.iter().map(|p| p.pid).collect();
        self.cpu.retain(|pid| live.contains(&pid));
        self.pss_at.retain(|pid, _| live.contains(pid));
        self.cmdlines.retain(|pid, _| live.contains(pid));
        let cpu_pct = processes.iter().map(|p| p.cpu_pct).sum::<Option<f32>>();
        let rss_bytes = processes.iter().map(|p| p.rss_bytes).sum::<Option<u64>>();
        Some(TreeSample { timestamp_us: now_us(), root_pid: self.root, processes, cpu_pct, rss_bytes })
    }
}

/// Where a GPU process stands: in the tree, foreign (alive elsewhere), or gone from `/proc`.
pub fn classify(pid: u32, tree: &HashSet<u32>) -> GpuProcessClass {
    if tree.contains(&pid) {
        GpuProcessClass::Tree
    } else if proc_info::exists(pid) {
        GpuProcessClass::Foreign
    } else {
        GpuProcessClass::Gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kills the shell's process group when dropped, so a failed assertion leaves no spinner.
    struct Group(std::process::Child);

    impl Drop for Group {
        fn drop(&mut self) {
            // SAFETY: signalling the process group this test created.
            unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
            let _ = self.0.wait();
        }
    }

    #[test]
    fn follows_children_and_their_cpu() {
        // A shell, in its own process group, that starts a CPU-bound child and a sleeping one.
        use std::os::unix::process::CommandExt;
        let spawned = std::process::Command::new("sh")
            .args(["-c", "(while :; do :; done) & sleep 30 & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let mut guard = Group(spawned);
        let root = &mut guard.0;
        // Both children forked, however long a loaded machine takes.
        let mut t = TreeSampler::new(root.id());
        let mut first = t.sample().unwrap();
        while first.processes.len() < 3 {
            std::thread::sleep(std::time::Duration::from_millis(20));
            t = TreeSampler::new(root.id());
            first = t.sample().unwrap();
        }
        let first_at = std::time::Instant::now();
        assert_eq!(first.processes[0].pid, root.id());
        assert_eq!(first.processes.len(), 3, "{first:?}");
        assert!(first.cpu_pct.is_none(), "no interval yet");
        // Wait for work, not for time: the spinner has used 5 more clock ticks of CPU, however
        // long a loaded machine takes to give them, while the sleeper used none.
        let ticks = |pid: u32| -> u64 {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
            let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
            fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
        };
        let kids: Vec<u32> = first.processes.iter().map(|p| p.pid).filter(|&p| p != root.id()).collect();
        // The first child to have run 3 clock ticks spins; the sleeper never gets past its start.
        let spinner = loop {
            if let Some(&p) = kids.iter().find(|&&p| ticks(p) >= 3) {
                break p;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let start_ticks = ticks(spinner);
        while ticks(spinner) < start_ticks + 5 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let since_first = first_at.elapsed();
        let second = t.sample().unwrap();
        let cpu = |pid: u32| second.processes.iter().find(|p| p.pid == pid).and_then(|p| p.cpu_pct).unwrap();
        let sleeper = second.processes.iter().map(|p| p.pid).find(|&p| p != root.id() && p != spinner).unwrap();
        assert!(cpu(spinner) > 0.0 && cpu(spinner) > cpu(sleeper), "the spinner is busy, the sleeper not: {second:?}");
        assert!(second.rss_bytes.unwrap() > 0);
        // The tree's own processes: their storage I/O counters, and a PSS at the first reading and
        // not again within 5 s (nor while the host's memory stands).
        let root_of = |s: &TreeSample| s.processes.iter().find(|p| p.pid == root.id()).unwrap().clone();
        assert!(root_of(&first).read_bytes.is_some() && root_of(&first).write_bytes.is_some(), "{first:?}");
        let pss = root_of(&first).pss_bytes.unwrap();
        let rss = root_of(&first).rss_bytes.unwrap();
        assert!(pss > 0 && pss <= rss, "PSS {pss} within RSS {rss}");
        if since_first < PSS_EVERY {
            assert_eq!(root_of(&second).pss_bytes, None, "read every 5 s");
        }
        let tree: HashSet<u32> = t.pids().into_iter().collect();
        assert_eq!(classify(root.id(), &tree), GpuProcessClass::Tree);
        assert_eq!(classify(1, &tree), GpuProcessClass::Foreign);
        assert_eq!(classify(u32::MAX - 1, &tree), GpuProcessClass::Gone);
        // Killing the shell leaves its children orphaned; the root is gone.
        for p in t.pids().into_iter().rev() {
            // SAFETY: kill(2) on a PID of the tree this test started.
            unsafe { libc::kill(p as i32, libc::SIGKILL) };
        }
        root.wait().unwrap();
        assert!(t.sample().is_none());
        drop(guard);
    }
}
