//! Which of this machine's processes `top` shows around a GPU process (its DataLoader workers,
//! its launcher) and their CPU share between two readings, from the sampler's facts
//! (`gpulse_sample::proc_info`: `top` opens no `/proc` file itself); and the one way it signals
//! one: only the process it showed, checked by its start time, never a PID reused since.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use gpulse_sample::host::CpuMeter;
use gpulse_sample::proc_info::{self, ProcStat};

/// One process as the table shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcNow {
    pub ppid: Option<u32>,
    pub start_ticks: Option<u64>,
    /// Since the previous reading, percent of one core; `None` on the first.
    pub cpu_pct: Option<f32>,
    pub rss_bytes: Option<u64>,
    pub user: Option<String>,
    pub age_s: Option<f64>,
    pub cmdline: Option<String>,
}

/// Reads the processes around the GPU processes, keeping what a CPU share needs between polls.
#[derive(Default)]
pub struct ProcView {
    /// CPU shares counted as the job's tree counts them.
    cpu: CpuMeter,
    cmdlines: HashMap<(u32, u64), Option<String>>,
}

/// Launchers worth showing above their GPU processes (torchrun, a Python parent); a shell or
/// an init is not.
fn is_launcher(comm: &str) -> bool {
    comm.starts_with("python") || comm.starts_with("torchrun") || comm.starts_with("pt_") || comm == "accelerate"
}

/// How far up a process's ancestry [`lineage`] goes: deeper than any real tree of launchers.
const LINEAGE_DEPTH: usize = 64;

impl ProcView {
    /// `gpu_pids` with their descendants (DataLoader workers) and their launcher, each read now.
    pub fn around(&mut self, gpu_pids: &[u32]) -> HashMap<u32, ProcNow> {
        let uptime_s = proc_info::uptime_s();
        let mut want: Vec<u32> = Vec::new();
        let mut visited = HashSet::new();
        let mut stack: Vec<u32> = gpu_pids.to_vec();
        while let Some(pid) = stack.pop() {
            if visited.insert(pid) {
                want.push(pid);
                stack.extend(proc_info::children(pid));
            }
        }
        let mut out = HashMap::new();
        let now = Instant::now();
        for pid in want {
            let Some(st) = proc_info::stat(pid) else { continue };
            if gpu_pids.contains(&pid)
                && st.ppid > 1
                && !out.contains_key(&st.ppid)
                && let Some(parent) = proc_info::stat(st.ppid).filter(|p| is_launcher(&p.comm))
            {
                let p = self.view(&parent, now, uptime_s);
                out.insert(st.ppid, p);
            }
            let v = self.view(&st, now, uptime_s);
            out.insert(pid, v);
        }
        self.cpu.retain(|pid| out.contains_key(&pid));
        self.cmdlines.retain(|(pid, _), _| out.contains_key(pid));
        out
    }

    fn view(&mut self, st: &ProcStat, now: Instant, uptime_s: Option<f64>) -> ProcNow {
        let cpu_pct = self.cpu.read(st.pid, st.start_ticks, st.cpu_ticks, now);
        let cmdline = self
            .cmdlines
            .entry((st.pid, st.start_ticks))
            .or_insert_with(|| proc_info::cmdline(st.pid).or_else(|| Some(st.comm.clone())))
            .clone();
        ProcNow {
            ppid: Some(st.ppid),
            start_ticks: Some(st.start_ticks),
            cpu_pct,
            rss_bytes: Some(st.rss_bytes),
            user: proc_info::user(st.pid),
            age_s: uptime_s.map(|u| (u - st.start_ticks as f64 / self.cpu.ticks_per_s()).max(0.0)),
            cmdline,
        }
    }
}

/// The parent of every process above `pids` up to init, where `known` (the processes just read)
/// does not already say it: what tells a watched job's process from another, read with the
/// frame so that the view never asks `/proc` itself.
pub fn lineage(pids: impl IntoIterator<Item = u32>, known: &HashMap<u32, ProcNow>) -> HashMap<u32, u32> {
    let mut parents: HashMap<u32, u32> = HashMap::new();
    for pid in pids {
        let mut at = pid;
        for _ in 0..LINEAGE_DEPTH {
            if at <= 1 || parents.contains_key(&at) {
                break;
            }
            let Some(up) = known.get(&at).and_then(|p| p.ppid).or_else(|| proc_info::parent(at)) else { break };
            parents.insert(at, up);
            at = up;
        }
    }
    parents
}

/// A signal `top` can send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Int,
    Term,
    Kill,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Signal::Int => "SIGINT",
            Signal::Term => "SIGTERM",
            Signal::Kill => "SIGKILL",
        }
    }

    fn number(self) -> libc::c_int {
        match self {
            Signal::Int => libc::SIGINT,
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        }
    }
}

/// The process a signal is meant for: the PID and the start time it had when it was shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub pid: u32,
    pub start_ticks: u64,
    pub label: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Sent,
    /// No process has the PID any more.
    Gone,
    /// Another process has the PID now.
    Reused,
    Failed(String),
}

/// Sends `sig` to `t` only if the PID still names the same process. Through a pidfd where the
/// kernel has one, so that the check and the signal concern one process even if it exits between.
pub fn send(t: &Target, sig: Signal) -> Outcome {
    // Held before the check, so that the checked process is the one signalled.
    let handle = proc_info::handle(t.pid);
    match proc_info::start_ticks(t.pid) {
        None => return Outcome::Gone,
        Some(start) if start != t.start_ticks => return Outcome::Reused,
        Some(_) => {}
    }
    let sent = match &handle {
        Some(h) => h.signal(sig.number()),
        // SAFETY: a plain syscall on a PID just checked.
        None => match unsafe { libc::kill(t.pid as libc::pid_t, sig.number()) } {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        },
    };
    match sent {
        Ok(()) => Outcome::Sent,
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Outcome::Gone,
        Err(e) => Outcome::Failed(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_itself_and_its_children() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        // Until it has exec'd, the child is a copy of the test.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while proc_info::cmdline(child.id()).as_deref() != Some("sleep 30") {
            assert!(std::time::Instant::now() < deadline, "sleep never started");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let me = std::process::id();
        let mut view = ProcView::default();
        let seen = view.around(&[me]);
        let _ = (child.kill(), child.wait());
        assert!(seen[&me].start_ticks.is_some() && seen[&me].rss_bytes.is_some_and(|r| r > 0));
        assert!(seen[&me].cpu_pct.is_none(), "no CPU share without a previous reading");
        assert!(seen.get(&child.id()).is_some_and(|c| c.cmdline.as_deref() == Some("sleep 30")), "{seen:?}");
    }

    #[test]
    fn the_lineage_climbs_to_init() {
        let me = std::process::id();
        let up = lineage([me], &HashMap::new());
        assert_eq!(up.get(&me).copied(), proc_info::parent(me));
        let (mut at, mut steps) = (me, 0);
        while let Some(&p) = up.get(&at) {
            (at, steps) = (p, steps + 1);
            assert!(steps <= LINEAGE_DEPTH, "{up:?}");
        }
        // Init, or a parent outside this PID namespace.
        assert!(at <= 1, "{up:?}");
        let known = HashMap::from([(me, ProcNow { ppid: Some(7), ..ProcNow::default() })]);
        assert_eq!(lineage([me], &known).get(&me), Some(&7), "what was just read is not read again");
    }

    /// A signal goes to the process that was shown, never to a PID that is gone or reused.
    #[test]
    fn a_signal_reaches_only_the_process_it_was_meant_for() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        let start = proc_info::start_ticks(pid).unwrap();
        let reused = Target { pid, start_ticks: start + 1, label: "sleep".into() };
        assert_eq!(send(&reused, Signal::Term), Outcome::Reused);
        assert!(child.try_wait().unwrap().is_none(), "a reused PID is not signalled");
        let right = Target { pid, start_ticks: start, label: "sleep".into() };
        assert_eq!(send(&right, Signal::Term), Outcome::Sent);
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGTERM));
        assert_eq!(send(&right, Signal::Kill), Outcome::Gone, "a reaped child is gone");
    }
}
