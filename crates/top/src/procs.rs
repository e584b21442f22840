//! What `top` reads of this machine's processes to fill the table (CPU, host memory, age, user,
//! the launcher and the DataLoader workers around a GPU process), and the one way it signals
//! one: only the process it showed, checked by its start time, never a PID reused since.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

/// A process as `/proc/PID/stat` and `status` give it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcStat {
    pub ppid: u32,
    /// Since boot, in clock ticks: with the PID, it names one process for good.
    pub start_ticks: u64,
    /// User and system CPU used so far, clock ticks.
    pub cpu_ticks: u64,
    pub rss_bytes: u64,
    pub comm: String,
}

/// Reads `/proc/PID/stat`; `None` when the process is gone.
pub fn read_stat(pid: u32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// `comm` may hold spaces and parentheses: the fields start after the last `)`.
fn parse_stat(text: &str) -> Option<ProcStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_owned();
    let f: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    Some(ProcStat {
        ppid: num(1)? as u32,
        cpu_ticks: num(11)? + num(12)?,
        start_ticks: num(19)?,
        rss_bytes: num(21)? * page_bytes(),
        comm,
    })
}

fn page_bytes() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 { n as u64 } else { 4096 }
}

fn ticks_per_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if n > 0 { n as f64 } else { 100.0 }
}

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
pub struct ProcView {
    seen: HashMap<u32, (u64, u64, Instant)>,
    users: HashMap<u32, Option<String>>,
    cmdlines: HashMap<(u32, u64), Option<String>>,
    ticks_per_s: f64,
}

impl Default for ProcView {
    fn default() -> Self {
        Self { seen: HashMap::new(), users: HashMap::new(), cmdlines: HashMap::new(), ticks_per_s: ticks_per_s() }
    }
}

/// Launchers worth showing above their GPU processes (torchrun, a Python parent); a shell or
/// an init is not.
fn is_launcher(comm: &str) -> bool {
    comm.starts_with("python") || comm.starts_with("torchrun") || comm.starts_with("pt_") || comm == "accelerate"
}

impl ProcView {
    /// `gpu_pids` with their descendants (DataLoader workers) and their launcher, each read now.
    pub fn around(&mut self, gpu_pids: &[u32]) -> HashMap<u32, ProcNow> {
        let uptime_s = std::fs::read_to_string("/proc/uptime")
            .ok()
            .and_then(|t| t.split_whitespace().next().and_then(|v| v.parse::<f64>().ok()));
        let mut want: Vec<u32> = Vec::new();
        let mut visited = HashSet::new();
        let mut stack: Vec<u32> = gpu_pids.to_vec();
        while let Some(pid) = stack.pop() {
            if visited.insert(pid) {
                want.push(pid);
                stack.extend(children(pid));
            }
        }
        let mut out = HashMap::new();
        let now = Instant::now();
        for pid in want {
            let Some(st) = read_stat(pid) else { continue };
            if gpu_pids.contains(&pid)
                && st.ppid > 1
                && !out.contains_key(&st.ppid)
                && let Some(parent) = read_stat(st.ppid).filter(|p| is_launcher(&p.comm))
            {
                let p = self.view(st.ppid, &parent, now, uptime_s);
                out.insert(st.ppid, p);
            }
            let v = self.view(pid, &st, now, uptime_s);
            out.insert(pid, v);
        }
        self.seen.retain(|pid, _| out.contains_key(pid));
        out
    }

    fn view(&mut self, pid: u32, st: &ProcStat, now: Instant, uptime_s: Option<f64>) -> ProcNow {
        let cpu_pct = match self.seen.insert(pid, (st.start_ticks, st.cpu_ticks, now)) {
            Some((start, ticks, at)) if start == st.start_ticks && now > at => {
                let dt = now.duration_since(at).as_secs_f64();
                Some((st.cpu_ticks.saturating_sub(ticks) as f64 / self.ticks_per_s / dt * 100.0) as f32)
            }
            _ => None,
        };
        let user = self.user(pid);
        let cmdline = self
            .cmdlines
            .entry((pid, st.start_ticks))
            .or_insert_with(|| cmdline(pid).or_else(|| Some(st.comm.clone())))
            .clone();
        ProcNow {
            ppid: Some(st.ppid),
            start_ticks: Some(st.start_ticks),
            cpu_pct,
            rss_bytes: Some(st.rss_bytes),
            user,
            age_s: uptime_s.map(|u| (u - st.start_ticks as f64 / self.ticks_per_s).max(0.0)),
            cmdline,
        }
    }

    fn user(&mut self, pid: u32) -> Option<String> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let uid: u32 = status.lines().find_map(|l| l.strip_prefix("Uid:"))?.split_whitespace().next()?.parse().ok()?;
        self.users.entry(uid).or_insert_with(|| Some(user_name(uid).unwrap_or_else(|| uid.to_string()))).clone()
    }
}

fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    let mut out = Vec::new();
    for t in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
            out.extend(text.split_whitespace().filter_map(|c| c.parse::<u32>().ok()));
        }
    }
    out
}

fn cmdline(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let s: Vec<String> =
        raw.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    (!s.is_empty()).then(|| s.join(" "))
}

fn user_name(uid: u32) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        (f.nth(1)?.parse::<u32>().ok()? == uid).then(|| name.to_owned())
    })
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
    // SAFETY: pidfd_open takes a PID and flags, and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, t.pid as libc::pid_t, 0) } as libc::c_int;
    let check = || match read_stat(t.pid) {
        None => Some(Outcome::Gone),
        Some(st) if st.start_ticks != t.start_ticks => Some(Outcome::Reused),
        Some(_) => None,
    };
    if let Some(refused) = check() {
        if fd >= 0 {
            // SAFETY: fd is a descriptor this function opened.
            unsafe { libc::close(fd) };
        }
        return refused;
    }
    // SAFETY: plain syscalls on a descriptor this function owns, or on a PID just checked.
    let rc = unsafe {
        if fd >= 0 {
            let rc = libc::syscall(libc::SYS_pidfd_send_signal, fd, sig.number(), std::ptr::null::<u8>(), 0);
            libc::close(fd);
            rc as libc::c_int
        } else {
            libc::kill(t.pid as libc::pid_t, sig.number())
        }
    };
    if rc == 0 {
        Outcome::Sent
    } else {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ESRCH) { Outcome::Gone } else { Outcome::Failed(e.to_string()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_a_parenthesis_in_its_name() {
        let line = "42 (a (b) c) S 7 42 42 0 -1 4194304 100 0 0 0 30 12 0 0 20 0 1 0 5555 1000 25 18446744073709551615";
        let st = parse_stat(line).unwrap();
        assert_eq!((st.ppid, st.cpu_ticks, st.start_ticks, st.comm.as_str()), (7, 42, 5555, "a (b) c"));
        assert_eq!(st.rss_bytes, 25 * page_bytes());
    }

    #[test]
    fn reads_itself_and_its_children() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        // Until it has exec'd, the child is a copy of the test.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::fs::read(format!("/proc/{}/cmdline", child.id())).ok().as_deref() != Some(b"sleep\x0030\x00") {
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

    /// A signal goes to the process that was shown, never to a PID that is gone or reused.
    #[test]
    fn a_signal_reaches_only_the_process_it_was_meant_for() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        let start = read_stat(pid).unwrap().start_ticks;
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
