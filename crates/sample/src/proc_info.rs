//! What `/proc` says about one process, read here and nowhere else in gpulse (through `procfs`
//! where it parses the file) and handed on as plain values, so that the views and the job never
//! open a `/proc` file themselves.

use std::collections::HashMap;
use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Mutex, OnceLock};

use procfs::process::Process;

/// A process as `/proc/PID/stat` gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: u32,
    pub ppid: u32,
    /// The scheduler's state letter: `R`, `S`, `D`, `T` when stopped, `Z` a zombie, ...
    pub state: char,
    /// The short name the kernel keeps (at most 15 bytes; may hold spaces and parentheses).
    pub comm: String,
    /// Since boot, in clock ticks: with the PID, it names one process, never a later one that
    /// reused the PID.
    pub start_ticks: u64,
    /// User and system CPU used so far, clock ticks.
    pub cpu_ticks: u64,
    pub rss_bytes: u64,
    pub threads: Option<u32>,
}

/// One reading of `/proc/PID/stat`; `None` when the process is gone (or hidden).
pub fn stat(pid: u32) -> Option<ProcStat> {
    let st = Process::new(i32::try_from(pid).ok()?).ok()?.stat().ok()?;
    Some(ProcStat {
        pid,
        ppid: u32::try_from(st.ppid).unwrap_or(0),
        state: st.state,
        comm: st.comm,
        start_ticks: st.starttime,
        cpu_ticks: st.utime + st.stime,
        rss_bytes: st.rss * page_bytes(),
        threads: u32::try_from(st.num_threads).ok(),
    })
}

/// Whether `/proc` lists `pid` at all (a zombie included).
pub fn exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// The children of `pid`, from every thread's `/proc/PID/task/TID/children` (a thread other
/// than the main one may have forked them); empty when it is gone.
pub fn children(pid: u32) -> Vec<u32> {
    let Some(tasks) = i32::try_from(pid).ok().and_then(|p| Process::new(p).ok()).and_then(|p| p.tasks().ok()) else {
        return Vec::new();
    };
    tasks.flatten().filter_map(|t| t.children().ok()).flatten().collect()
}

/// Seconds since boot (`/proc/uptime`): with a start time in ticks, a process's age.
pub fn uptime_s() -> Option<f64> {
    <procfs::Uptime as procfs::Current>::current().ok().map(|u| u.uptime)
}

/// Clock ticks a second, the unit of [`ProcStat::start_ticks`] and [`ProcStat::cpu_ticks`].
pub fn ticks_per_s() -> f64 {
    procfs::ticks_per_second() as f64
}

/// Bytes a page, the unit `/proc` counts resident memory in.
pub fn page_bytes() -> u64 {
    procfs::page_size()
}

/// A process's command line, arguments joined by spaces; `None` if it is gone, a zombie or a
/// kernel thread. Read by hand: an argument need not be UTF-8, and is then shown lossily.
pub fn cmdline(pid: u32) -> Option<String> {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<String> =
        raw.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    (!args.is_empty()).then(|| args.join(" "))
}

/// Whether `pid` is running: it exists and has not exited (a zombie, not yet reaped, has).
pub fn is_running(pid: u32) -> bool {
    state(pid).is_some_and(|s| !matches!(s, 'Z' | 'X'))
}

/// When a process started, in clock ticks since boot (see [`ProcStat::start_ticks`]): one small
/// read of `/proc/PID/stat`, parsed only to field 22, since every poll asks it of every GPU
/// process (`workload::Attributor`) to tell a reused PID from the process it knew.
pub fn start_ticks(pid: u32) -> Option<u64> {
    // Field 3 (the state) is the first after `comm`, so field 22 is the 20th.
    stat_fields(pid, |fields| number(fields.nth(19)))
}

/// `f` over the fields of `/proc/PID/stat` from field 3 on, read in one small read. `comm`
/// (field 2) may hold spaces and parentheses: the fields go on after the last `)`.
fn stat_fields<T>(pid: u32, f: impl FnOnce(&mut dyn Iterator<Item = &[u8]>) -> Option<T>) -> Option<T> {
    let line = read_capped(&format!("/proc/{pid}/stat"), 4096)?;
    let after = &line[line.iter().rposition(|b| *b == b')')? + 1..];
    f(&mut after.split(u8::is_ascii_whitespace).filter(|f| !f.is_empty()))
}

/// A field of `/proc/PID/stat` as a number.
fn number(field: Option<&[u8]>) -> Option<u64> {
    std::str::from_utf8(field?).ok()?.parse().ok()
}

/// When a process started (as [`start_ticks`]) and which program image it runs: where its
/// address space put its code and its first stack (`/proc/PID/stat` fields 26 and 28), which
/// every `exec` lays out afresh (at random places, the kernel's default, and elsewhere for
/// arguments and environment of another size). A child seen between its parent's `fork` (or
/// `vfork`) and its own `exec` has its parent's image, its command line and environment: the
/// image says when that is no longer so. The image is 0 where the kernel hides the addresses
/// (a process this one may not read) or an `exec` is still laying them out.
pub fn start_and_image(pid: u32) -> Option<(u64, u64)> {
    stat_fields(pid, |fields| {
        // Fields 22 (start time), 26 (start of code) and 28 (start of stack): the 20th, 24th and
        // 26th after the `)`.
        let start = number(fields.nth(19))?;
        let code = number(fields.nth(3)).unwrap_or(0);
        let stack = number(fields.nth(1)).unwrap_or(0);
        // Hidden (0, or 1 for the code), or an `exec` still laying them out: no image yet.
        if code <= 1 || stack == 0 {
            return Some((start, 0));
        }
        Some((start, code.rotate_left(32) ^ stack))
    })
}

/// A process held through a pidfd. A pidfd never follows its PID to a later process, and the
/// kernel says when its process has exited: while the handle's has not, the PID still names it,
/// known without reading `/proc`.
#[derive(Debug)]
pub struct Handle(OwnedFd);

/// A handle on the process `pid` names now (close-on-exec); `None` when it is gone, or where
/// the kernel gives no pidfds (before Linux 5.3, or a seccomp filter that refuses them).
pub fn handle(pid: u32) -> Option<Handle> {
    let pid = libc::pid_t::try_from(pid).ok()?;
    // SAFETY: pidfd_open takes a PID and flags, and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = libc::c_int::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: the descriptor was just opened, and nothing else owns it.
    Some(Handle(unsafe { OwnedFd::from_raw_fd(fd) }))
}

impl Handle {
    /// Sends signal `sig` to the held process, never to a later one with its PID.
    ///
    /// # Errors
    /// The kernel's: `ESRCH` once the process has exited.
    pub fn signal(&self, sig: libc::c_int) -> std::io::Result<()> {
        // SAFETY: a plain syscall on a descriptor this handle owns, with no info struct.
        let rc =
            unsafe { libc::syscall(libc::SYS_pidfd_send_signal, self.0.as_raw_fd(), sig, std::ptr::null::<u8>(), 0) };
        if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
    }
}

/// Which of `handles` have exited, in their order, from one `poll` of them all; every one of
/// them when the kernel would not say (then each is read again: slower, never wrong).
pub fn exited(handles: &[&Handle]) -> Vec<bool> {
    let mut fds: Vec<libc::pollfd> =
        handles.iter().map(|h| libc::pollfd { fd: h.0.as_raw_fd(), events: libc::POLLIN, revents: 0 }).collect();
    // SAFETY: `fds` is a live array of `fds.len()` entries; a zero timeout never blocks.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
    // Readable is exited; a hang-up or a bad descriptor says no more that it lives.
    fds.iter().map(|f| rc < 0 || f.revents != 0).collect()
}

/// A process's state letter (see [`ProcStat::state`]).
pub fn state(pid: u32) -> Option<char> {
    stat(pid).map(|s| s.state)
}

/// A process's parent.
pub fn parent(pid: u32) -> Option<u32> {
    stat(pid).map(|s| s.ppid)
}

/// The short name the kernel keeps for a process.
pub fn comm(pid: u32) -> Option<String> {
    stat(pid).map(|s| s.comm)
}

/// The real uid a process runs as (`/proc/PID/status`'s first `Uid:`).
pub fn uid(pid: u32) -> Option<u32> {
    Process::new(i32::try_from(pid).ok()?).ok()?.status().ok().map(|s| s.ruid)
}

/// The path of a process's cgroup in the cgroup v2 hierarchy (`/proc/PID/cgroup`'s `0::` line),
/// relative to the v2 mount, `/` for its root; `None` without a v2 entry (v1 only) or when it
/// is gone.
pub fn cgroup_v2(pid: u32) -> Option<String> {
    let groups = Process::new(i32::try_from(pid).ok()?).ok()?.cgroups().ok()?;
    groups.0.into_iter().find(|g| g.hierarchy == 0 && g.controllers.is_empty()).map(|g| g.pathname)
}

/// A process's `/proc/PID/cgroup` as text, every hierarchy's line (v1 and v2), at most 16 KiB;
/// `None` when it is gone. Who owns the cgroup is `workload::cgroup`'s to say.
pub fn cgroup_file(pid: u32) -> Option<String> {
    let bytes = read_capped(&format!("/proc/{pid}/cgroup"), 16 * 1024)?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// A process's environment (`/proc/PID/environ`, NUL-separated), at most 64 KiB; `None` when
/// it is gone or not ours to read (another user's, without the capability).
pub fn environ(pid: u32) -> Option<Vec<u8>> {
    read_capped(&format!("/proc/{pid}/environ"), 64 * 1024)
}

/// One thread's `/proc/PID/task/TID/{stat,syscall,wchan,schedstat}`, each opened once and read
/// again from its start each time. The stack sampler reads them at every sample of a main
/// thread, where an open and a close each cost as much as the read: cold, on a virtual machine,
/// a sample's five reads took more of its CPU than its stack. A file names its thread, not a
/// PID: once the thread is gone it reads nothing, whoever takes the PID.
#[derive(Debug)]
pub struct TaskFiles {
    dir: String,
    files: [Option<fs::File>; 4],
}

impl TaskFiles {
    pub fn of(pid: u32, tid: u32) -> Self {
        Self { dir: format!("/proc/{pid}/task/{tid}"), files: Default::default() }
    }

    /// File `i` of `stat`, `syscall`, `wchan`, `schedstat`, read into `buf`; opened the first
    /// time, and again after a read fails.
    fn read<'b>(&mut self, i: usize, buf: &'b mut [u8]) -> Option<&'b [u8]> {
        use std::os::unix::fs::FileExt as _;
        const NAMES: [&str; 4] = ["stat", "syscall", "wchan", "schedstat"];
        if self.files[i].is_none() {
            self.files[i] = fs::File::open(format!("{}/{}", self.dir, NAMES[i])).ok();
        }
        match self.files[i].as_ref()?.read_at(buf, 0) {
            Ok(n) => Some(&buf[..n]),
            Err(_) => {
                self.files[i] = None;
                None
            }
        }
    }

    /// The state letter (`stat`).
    pub fn state(&mut self) -> Option<char> {
        let mut buf = [0u8; 512];
        let line = self.read(0, &mut buf)?;
        // `comm` may hold spaces and parentheses: the state is the first field after the last `)`.
        let after = &line[line.iter().rposition(|b| *b == b')')? + 1..];
        after.iter().find(|b| !b.is_ascii_whitespace()).map(|b| char::from(*b))
    }

    /// The system call it is blocked in (`syscall`'s first field: x86-64 numbers there); `None`
    /// while it runs (`running`), between calls (`-1`), or unread (another user's thread, without
    /// the capability).
    pub fn syscall(&mut self) -> Option<u32> {
        let mut buf = [0u8; 256];
        let text = self.read(1, &mut buf)?;
        let first = text.split(u8::is_ascii_whitespace).next()?;
        std::str::from_utf8(first).ok()?.parse().ok()
    }

    /// The kernel function it waits in (`wchan`: `hrtimer_nanosleep`, `pipe_read`); `None` while
    /// it runs (`0`) or when the kernel hides it.
    pub fn wchan(&mut self) -> Option<String> {
        let mut buf = [0u8; 128];
        let text = std::str::from_utf8(self.read(2, &mut buf)?).ok()?.trim();
        (!text.is_empty() && text != "0").then(|| text.to_owned())
    }

    /// Its clocks (`schedstat`: ns on a CPU, ns ready but waiting for one), in µs; `None` when
    /// the kernel keeps no schedstat or the thread is gone.
    pub fn clock(&mut self) -> Option<gpulse_model::ThreadClock> {
        let mut buf = [0u8; 128];
        let text = std::str::from_utf8(self.read(3, &mut buf)?).ok()?;
        let mut fields = text.split_ascii_whitespace().map(|f| f.parse::<u64>().ok());
        let (cpu_ns, wait_ns) = (fields.next()??, fields.next()??);
        Some(gpulse_model::ThreadClock { cpu_us: cpu_ns / 1000, wait_us: wait_ns / 1000 })
    }
}

/// The program a process runs (`/proc/PID/exe`); `None` when it is gone or not ours to read.
pub fn exe(pid: u32) -> Option<std::path::PathBuf> {
    fs::read_link(format!("/proc/{pid}/exe")).ok()
}

/// The link `/proc/PID/LINK` names (`root`, `cwd`, `ns/mnt`): where the process sees its files,
/// as this process can open them, or its namespace's identity.
pub fn link(pid: u32, link: &str) -> Option<std::path::PathBuf> {
    fs::read_link(format!("/proc/{pid}/{link}")).ok()
}

/// Yama's `ptrace_scope` (0 classic, 1 descendants only, 2 admin only, 3 none); `None` without
/// Yama, where ptrace follows the classic rules.
pub fn yama_ptrace_scope() -> Option<u32> {
    fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").ok()?.trim().parse().ok()
}

fn read_capped(path: &str, max_bytes: u64) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let mut buf = Vec::new();
    fs::File::open(path).ok()?.take(max_bytes).read_to_end(&mut buf).ok()?;
    Some(buf)
}

/// The user name that owns a process (its real uid, see [`user_name`]).
pub fn user(pid: u32) -> Option<String> {
    let uid = uid(pid)?;
    Some(user_name(uid).unwrap_or_else(|| uid.to_string()))
}

/// The user database's name for `uid` (`getpwuid_r`, so LDAP and the like answer too), looked
/// up once per uid for the life of the process: every poll asks it for every GPU process, and
/// a directory service may be slow.
pub fn user_name(uid: u32) -> Option<String> {
    static NAMES: OnceLock<Mutex<HashMap<u32, Option<String>>>> = OnceLock::new();
    let names = NAMES.get_or_init(Default::default);
    if let Some(known) = names.lock().unwrap_or_else(|e| e.into_inner()).get(&uid) {
        return known.clone();
    }
    // Looked up without the lock: a slow directory holds up no other thread's hit.
    let name = lookup_user(uid);
    names.lock().unwrap_or_else(|e| e.into_inner()).insert(uid, name.clone());
    name
}

fn lookup_user(uid: u32) -> Option<String> {
    let mut buf_len = 4096;
    loop {
        let mut buf = vec![0 as libc::c_char; buf_len];
        // SAFETY: passwd is plain data; all zeroes is a valid value that getpwuid_r overwrites.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer refers to live, correctly sized storage owned by this frame.
        let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
        // An entry larger than the buffer: try again with more, up to a sane bound.
        if rc == libc::ERANGE && buf_len < 1 << 20 {
            buf_len *= 4;
            continue;
        }
        if rc != 0 || result.is_null() || pwd.pw_name.is_null() {
            return None;
        }
        // SAFETY: getpwuid_r succeeded, so pw_name points to a NUL-terminated string inside `buf`.
        let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) };
        return Some(name.to_string_lossy().into_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_process() {
        let me = std::process::id();
        assert!(cmdline(me).unwrap().contains("gpulse_sample"));
        assert!(!comm(me).unwrap().is_empty());
        // SAFETY: getuid cannot fail and touches no memory.
        let uid = unsafe { libc::getuid() };
        let expected = lookup_user(uid).unwrap_or_else(|| uid.to_string());
        assert_eq!(user(me), Some(expected.clone()));
        assert_eq!(user(me), Some(expected), "the cached name is the same");
        let st = stat(me).unwrap();
        assert!(st.rss_bytes > 0 && st.threads.is_some_and(|n| n >= 1) && st.state != 'Z', "{st:?}");
        assert_eq!(parent(me), Some(st.ppid));
        assert!(is_running(me) && exists(me));
        assert!(cgroup_v2(me).is_none_or(|p| p.starts_with('/')));
    }

    #[test]
    fn start_ticks_say_when_the_process_started() {
        let started = std::time::Instant::now();
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let ticks = start_ticks(child.id()).unwrap();
        assert_eq!(Some(ticks), stat(child.id()).map(|s| s.start_ticks), "field 22, as procfs reads it");
        // A name with the stat line's separators in it (a process may name only itself): the
        // fields are counted after the last `)`.
        let mut named = std::process::Command::new("sh")
            .args(["-c", "printf 'a) 1 2 (b) 3' > /proc/$$/comm; sleep 5"])
            .spawn()
            .unwrap();
        let deadline = started + std::time::Duration::from_secs(5);
        while comm(named.id()).as_deref() != Some("a) 1 2 (b) 3") {
            assert!(std::time::Instant::now() < deadline, "never renamed: {:?}", comm(named.id()));
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(start_ticks(named.id()), stat(named.id()).map(|s| s.start_ticks));
        let _ = (named.kill(), named.wait());
        let age_s = uptime_s().unwrap() - ticks as f64 / ticks_per_s();
        assert!((-0.05..=started.elapsed().as_secs_f64() + 0.05).contains(&age_s), "started {age_s} s ago");
        assert!(start_ticks(std::process::id()).unwrap() <= ticks, "the test started before its child");
        assert!(children(std::process::id()).contains(&child.id()), "a child of a test thread is found");
        let _ = (child.kill(), child.wait());
        assert_eq!(start_ticks(u32::MAX), None);
    }

    /// An `exec` lays the process out afresh: another image, the same start.
    #[test]
    fn an_exec_is_another_image_of_the_same_process() {
        use std::io::Write as _;
        let mut child = std::process::Command::new("sh")
            .args(["-c", "read line; exec sleep 5"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Its addresses are 0 while its `exec` lays them out (the spawn returns before the end).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let (start, image) = loop {
            let (start, image) = start_and_image(child.id()).unwrap();
            if image != 0 {
                break (start, image);
            }
            assert!(std::time::Instant::now() < deadline, "its own child's addresses are readable");
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        assert_eq!(Some(start), start_ticks(child.id()));
        assert_eq!(start_and_image(child.id()), Some((start, image)), "the same until its exec");
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while start_and_image(child.id()) == Some((start, image)) {
            assert!(std::time::Instant::now() < deadline, "no other image after the exec");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(start_and_image(child.id()).map(|s| s.0), Some(start));
        let _ = (child.kill(), child.wait());
        assert_eq!(start_and_image(u32::MAX), None);
    }

    #[test]
    fn a_handle_says_when_its_process_has_exited() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let mine = handle(std::process::id()).expect("pidfds (Linux 5.3)");
        let h = handle(child.id()).unwrap();
        assert_eq!(exited(&[&mine, &h]), [false, false]);
        child.kill().unwrap();
        // A zombie has exited though its PID is not yet free; reaped, the same.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while exited(&[&h]) != [true] {
            assert!(std::time::Instant::now() < deadline, "the kill never showed");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        child.wait().unwrap();
        assert_eq!(exited(&[&mine, &h]), [false, true]);
        assert!(handle(u32::MAX).is_none() && exited(&[]).is_empty());
    }

    /// The clocks against the thread's own doing: spinning adds to its CPU time, sleeping does not.
    #[test]
    fn a_threads_clock_counts_its_time_on_a_cpu() {
        let link = std::fs::read_link("/proc/thread-self").unwrap();
        let tid: u32 = link.file_name().unwrap().to_str().unwrap().parse().unwrap();
        let pid = std::process::id();
        // One set of files, kept open: each read is the clock as it is then.
        let mut files = TaskFiles::of(pid, tid);
        let a = files.clock().expect("schedstat");
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(200) {
            std::hint::spin_loop();
        }
        let b = files.clock().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let c = files.clock().unwrap();
        assert_eq!(TaskFiles::of(pid, u32::MAX).clock(), None);
        // Spinning: on a CPU or waiting for one, the whole 200 ms; asleep, neither.
        let spun = (b.cpu_us + b.wait_us) - (a.cpu_us + a.wait_us);
        assert!((195_000..400_000).contains(&spun), "{a:?} {b:?}");
        assert!(b.cpu_us - a.cpu_us >= 20_000, "{a:?} {b:?}");
        assert!(c.cpu_us - b.cpu_us < 20_000, "asleep: {b:?} {c:?}");
    }

    #[test]
    fn a_sleeping_thread_says_where_it_sleeps() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        // Each read opened afresh, as a first read is.
        let once = || TaskFiles::of(pid, pid);
        while once().syscall() != Some(230) {
            assert!(std::time::Instant::now() < deadline, "never asleep: {:?}", once().syscall());
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(once().state(), Some('S'));
        assert!(once().wchan().is_none_or(|w| w.contains("nanosleep")), "{:?}", once().wchan());
        assert!(exe(pid).is_some_and(|e| e.ends_with("sleep")), "{:?}", exe(pid));
        // Kept open, the files read the thread as it is, and nothing once it is gone.
        let mut files = TaskFiles::of(pid, pid);
        assert_eq!((files.state(), files.syscall()), (Some('S'), Some(230)));
        let _ = (child.kill(), child.wait());
        assert_eq!((files.state(), files.syscall(), files.wchan(), files.clock()), (None, None, None, None));
        let me = std::process::id();
        assert_eq!(TaskFiles::of(me, me).state(), state(me), "read as procfs reads it");
        let mut none = TaskFiles::of(u32::MAX, 1);
        assert_eq!((none.state(), none.syscall(), none.wchan(), none.clock()), (None, None, None, None));
    }

    #[test]
    fn missing_process_is_none() {
        assert_eq!(cmdline(u32::MAX), None);
        assert_eq!(user(u32::MAX), None);
        assert_eq!(stat(u32::MAX), None);
        assert!(children(u32::MAX).is_empty() && !exists(u32::MAX) && !is_running(u32::MAX));
    }
}
