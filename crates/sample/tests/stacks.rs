//! The stack sampler against real Python processes whose behaviour is known: each test's
//! script blocks or spins at a line it names, and the samples must say so (state, system call,
//! wait channel, GIL, the exact line, the role).

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gpulse_model::{Gil, ProcessRole, Stacks, ThreadSample};
use gpulse_sample::stacks::{Reader, StackOptions, StackSampler};

/// Scripts written for one test, removed at its end.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("gpulse-stacks-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.0.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A Python process, killed (with every process it started) when the test ends, pass or fail.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let pid = self.0.id();
        // The script's own children first, then the script; each by its PID.
        for kid in gpulse_sample::proc_info::children(pid) {
            // SAFETY: kill(2) on a PID read just now from the script's children.
            unsafe { libc::kill(kid as libc::pid_t, libc::SIGKILL) };
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The line of `script` that holds `marker`, from 1.
fn line_of(script: &str, marker: &str) -> u32 {
    script.lines().position(|l| l.contains(marker)).unwrap_or_else(|| panic!("no {marker}")) as u32 + 1
}

/// Starts `script` with python3 and waits for it to print `ready`.
fn start(path: &Path) -> KillOnDrop {
    let mut child = Command::new("python3")
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 (CI has it)");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "the script did not start");
    KillOnDrop(child)
}

/// Samples the tree under `pid` for `for_s` seconds, then returns everything put together.
fn sample(pid: u32, options: StackOptions, for_s: f64) -> Stacks {
    let sampler = StackSampler::spawn(pid, options);
    let mut stacks = Stacks::default();
    let end = Instant::now() + Duration::from_secs_f64(for_s);
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(300));
        stacks.add(sampler.drain());
    }
    stacks.add(sampler.stop());
    stacks
}

/// A test build reads the stacks slowly (py-spy unoptimized): the budget is a test's, not a
/// monitor's.
fn options() -> StackOptions {
    StackOptions { budget: 0.5, ..StackOptions::default() }
}

/// The samples of `pid`, at least `min` of them.
fn of(stacks: &Stacks, pid: u32, min: usize) -> Vec<&ThreadSample> {
    let samples: Vec<&ThreadSample> = stacks.samples.iter().filter(|s| s.pid == pid).collect();
    assert!(samples.len() >= min, "{} samples of {pid}: {:?} {:?}", samples.len(), stacks.refusals, stacks.processes);
    samples
}

/// The share of `samples` for which `pred` holds.
fn share(samples: &[&ThreadSample], pred: impl Fn(&ThreadSample) -> bool) -> f64 {
    samples.iter().filter(|s| pred(s)).count() as f64 / samples.len() as f64
}

/// `file:line function` of a stack's innermost frame.
fn innermost(stacks: &Stacks, stack: u32) -> String {
    stacks.frames_of(stack).next_back().map(|f| format!("{}:{} {}", f.file, f.line, f.function)).unwrap_or_default()
}

/// The most common value of `f` over `samples`, with its share.
fn mode(samples: &[&ThreadSample], f: impl Fn(&ThreadSample) -> String) -> (String, f64) {
    let mut counts = std::collections::HashMap::new();
    for s in samples {
        *counts.entry(f(s)).or_insert(0usize) += 1;
    }
    let (k, n) = counts.into_iter().max_by_key(|(_, n)| *n).unwrap();
    (k, n as f64 / samples.len() as f64)
}

#[test]
fn a_sleeping_loop_is_asleep_in_clock_nanosleep_at_its_line() {
    let dir = TempDir::new("sleep");
    let script =
        "import time\nprint('ready', flush=True)\ndef nap():\n    time.sleep(0.05)  # SLEEP\nwhile True:\n    nap()\n";
    let path = dir.write("nap.py", script);
    let job = start(&path);
    let pid = job.0.id();
    let stacks = sample(pid, options(), 2.0);
    let samples = of(&stacks, pid, 20);
    let site = format!("{}:{} nap", path.display(), line_of(script, "SLEEP"));
    let (top, top_share) = mode(&samples, |s| innermost(&stacks, s.stack));
    assert_eq!(top, site);
    assert!(top_share > 0.9, "{top_share}");
    let asleep = share(&samples, |s| s.kernel.state == 'S' && s.kernel.syscall == Some(230));
    assert!(asleep > 0.9, "{asleep} of the samples asleep in clock_nanosleep: {:?}", samples[0].kernel);
    let wchan = share(&samples, |s| s.kernel.wchan.as_deref().is_some_and(|w| w.contains("nanosleep")));
    assert!(wchan > 0.8, "{wchan}: {:?}", samples[0].kernel);
    // The frame names its code, read from the file.
    let f = stacks.frames.iter().find(|f| f.function == "nap").unwrap();
    assert_eq!(f.code.as_deref(), Some("time.sleep(0.05)  # SLEEP"));
    let p = stacks.process(pid).unwrap();
    assert_eq!(p.role, ProcessRole::Main);
    assert!(p.python.starts_with("3.") && p.command.contains("nap.py"), "{p:?}");
    assert!(stacks.refusals.is_empty(), "{:?}", stacks.refusals);
    // Sampled with the GIL free (sleep releases it), at the rate asked for, timed by the wall
    // clock.
    assert!(share(&samples, |s| s.gil == Gil::Free) > 0.9);
    let rate = stacks.rate_hz.iter().find(|r| r.0 == pid).unwrap().1;
    assert!((40.0..=50.0).contains(&rate), "{rate} Hz");
    let span_s = (samples.last().unwrap().t_us - samples[0].t_us) as f64 / 1e6;
    assert!(span_s > 1.2 && span_s < 2.5, "{span_s}");
    let measured = (samples.len() - 1) as f64 / span_s;
    assert!(measured > rate * 0.6 && measured < rate * 1.3, "{measured} Hz measured, {rate} told");
    assert!(samples.windows(2).all(|w| w[0].t_us < w[1].t_us));
}

#[test]
fn a_busy_loop_runs_holding_the_gil_at_its_line() {
    let dir = TempDir::new("busy");
    let script = "print('ready', flush=True)\ndef spin():\n    x = 0\n    while True: x += 1  # SPIN\nspin()\n";
    let path = dir.write("spin.py", script);
    let job = start(&path);
    let pid = job.0.id();
    let stacks = sample(pid, options(), 1.5);
    let samples = of(&stacks, pid, 15);
    let site = format!("{}:{} spin", path.display(), line_of(script, "SPIN"));
    assert!(share(&samples, |s| innermost(&stacks, s.stack) == site) > 0.9);
    let running = share(&samples, |s| s.kernel.state == 'R' && s.kernel.syscall.is_none());
    assert!(running > 0.9, "{running}: {:?}", samples.iter().map(|s| &s.kernel).collect::<Vec<_>>());
    assert!(share(&samples, |s| s.gil == Gil::Held) > 0.9);
}

#[test]
fn a_thread_that_holds_the_gil_is_named_while_the_main_thread_waits_on_a_lock() {
    let dir = TempDir::new("gil");
    let script = "import threading\n\
def burn():\n    x = 0\n    while True: x += 1  # BURN\n\
threading.Thread(target=burn, daemon=True).start()\n\
lock = threading.Lock()\nlock.acquire()\nprint('ready', flush=True)\n\
def wait():\n    lock.acquire()  # WAIT\nwait()\n";
    let path = dir.write("gil.py", script);
    let job = start(&path);
    let pid = job.0.id();
    let stacks = sample(pid, options(), 1.5);
    let samples = of(&stacks, pid, 15);
    let wait = format!("{}:{} wait", path.display(), line_of(script, "WAIT"));
    let burn = format!("{}:{} burn", path.display(), line_of(script, "BURN"));
    assert!(share(&samples, |s| innermost(&stacks, s.stack) == wait) > 0.9);
    let other = share(&samples, |s| matches!(s.gil, Gil::Other { stack } if innermost(&stacks, stack) == burn));
    assert!(other > 0.8, "{other}: {:?}", samples.iter().map(|s| s.gil).collect::<Vec<_>>());
    // Blocked on the lock: a futex.
    assert!(share(&samples, |s| s.kernel.state == 'S' && s.kernel.syscall == Some(202)) > 0.9);
}

#[test]
fn a_socket_read_and_a_pipe_read_block_in_their_system_calls() {
    let dir = TempDir::new("io");
    let script = "import os, socket\nprint('ready', flush=True)\n\
def fetch(a):\n    a.recv(1)  # RECV\n\
def pipe(r):\n    os.read(r, 1)  # READ\n\
a, b = socket.socketpair()\nr, w = os.pipe()\n\
if os.fork() == 0:\n    pipe(r)\nelse:\n    fetch(a)\n";
    let path = dir.write("io.py", script);
    let job = start(&path);
    let pid = job.0.id();
    let stacks = sample(pid, options(), 2.0);
    let samples = of(&stacks, pid, 15);
    let recv = format!("{}:{} fetch", path.display(), line_of(script, "RECV"));
    assert!(share(&samples, |s| innermost(&stacks, s.stack) == recv) > 0.9);
    let recvfrom = share(&samples, |s| s.kernel.state == 'S' && s.kernel.syscall == Some(45));
    assert!(recvfrom > 0.9, "{recvfrom}: {:?}", samples[0].kernel);
    // The forked child is found in the tree and read as well.
    let child = stacks.processes.iter().find(|p| p.pid != pid).expect("the forked child is sampled").pid;
    let piped = of(&stacks, child, 10);
    let read = format!("{}:{} pipe", path.display(), line_of(script, "READ"));
    assert!(share(&piped, |s| innermost(&stacks, s.stack) == read) > 0.9);
    let in_read =
        share(&piped, |s| s.kernel.syscall == Some(0) && s.kernel.wchan.as_deref().is_some_and(|w| w.contains("pipe")));
    assert!(in_read > 0.9, "{in_read}: {:?}", piped[0].kernel);
}

#[test]
fn dataloader_workers_are_told_apart_and_other_programs_left_alone() {
    let dir = TempDir::new("workers");
    let worker =
        "import time\ndef _worker_loop():\n    while True:\n        time.sleep(0.02)  # FETCH\n_worker_loop()\n";
    let worker_path = dir.write("site/torch/utils/data/_utils/worker.py", worker);
    let main = format!(
        "import subprocess, sys, time\n\
kids = [subprocess.Popen([sys.executable, {w:?}]), subprocess.Popen(['sleep', '60'])]\n\
time.sleep(0.5)\nprint('ready', flush=True)\nwhile True:\n    time.sleep(0.05)  # MAIN\n",
        w = worker_path.display().to_string()
    );
    let path = dir.write("train.py", &main);
    let job = start(&path);
    let pid = job.0.id();
    let kids = gpulse_sample::proc_info::children(pid);
    assert_eq!(kids.len(), 2, "{kids:?}");
    let stacks = sample(pid, options(), 2.5);
    assert_eq!(stacks.process(pid).map(|p| p.role), Some(ProcessRole::Main));
    assert_eq!(stacks.processes.len(), 2, "the main process and its worker, not `sleep`: {:?}", stacks.processes);
    let w = stacks.processes.iter().find(|p| p.role == ProcessRole::Worker).expect("a worker");
    assert!(kids.contains(&w.pid));
    assert!(stacks.refusals.is_empty(), "{:?}", stacks.refusals);
    // At a fifth of the main rate, at the worker's slow line.
    let main_hz = stacks.rate_hz.iter().find(|r| r.0 == pid).unwrap().1;
    let worker_hz = stacks.rate_hz.iter().find(|r| r.0 == w.pid).unwrap().1;
    assert!((worker_hz * 5.0 - main_hz).abs() < 1.0, "{worker_hz} Hz, main {main_hz} Hz");
    let samples = of(&stacks, w.pid, 5);
    let fetch = format!("{}:{} _worker_loop", worker_path.display(), line_of(worker, "FETCH"));
    assert!(share(&samples, |s| innermost(&stacks, s.stack) == fetch) > 0.9);
    let main_samples = of(&stacks, pid, 30).len();
    assert!(main_samples > samples.len() * 3, "main {main_samples}, worker {}", samples.len());

    // Without workers, the main process alone.
    let stacks = sample(pid, StackOptions { workers: false, ..options() }, 1.5);
    let pids: Vec<u32> = stacks.processes.iter().map(|p| p.pid).collect();
    assert_eq!(pids, [pid]);
    assert!(stacks.samples.iter().all(|s| s.pid == pid));
}

#[test]
fn the_budget_slows_the_sampler_down_and_the_rate_says_so() {
    let dir = TempDir::new("budget");
    // A deep stack and a few threads: a costly read.
    let script = "import threading, time\n\
def idle():\n    while True: time.sleep(1)\n\
for _ in range(7): threading.Thread(target=idle, daemon=True).start()\n\
def deep(n):\n    if n == 0:\n        print('ready', flush=True)\n        while True: time.sleep(0.01)\n    deep(n - 1)\n\
deep(40)\n";
    let path = dir.write("deep.py", script);
    let job = start(&path);
    let pid = job.0.id();
    // A fiftieth of the default budget: even a read of a few tens of µs (the optimized reader's)
    // cannot keep the asked 50 Hz within it.
    let stacks = sample(pid, StackOptions { budget: 0.0002, ..StackOptions::default() }, 2.0);
    let samples = of(&stacks, pid, 2);
    assert!(stacks.frames_of(samples[0].stack).count() > 40);
    let rate = stacks.rate_hz.iter().find(|r| r.0 == pid).unwrap().1;
    assert!((1.0..20.0).contains(&rate), "{rate} Hz within 0.02% of a core");
    assert!(samples.len() as f64 <= rate * 2.0 * 1.5 + 3.0, "{} samples at {rate} Hz", samples.len());
}

#[test]
fn the_direct_reader_reads_what_py_spy_reads() {
    let dir = TempDir::new("direct");
    // A recursion of known depth ending in a known line, and a thread that holds the GIL.
    let script = "import sys, threading, time\n\
def burn():\n    x = 0\n    while True: x += 1  # BURN\n\
threading.Thread(target=burn, daemon=True).start()\n\
class Deep:\n    def down(self, n):\n        if n == 0:\n            print('ready', flush=True)\n            while True: time.sleep(0.01)  # SLEEP\n        self.down(n - 1)  # DOWN\n\
Deep().down(30)\n";
    let path = dir.write("direct.py", script);
    let job = start(&path);
    let pid = job.0.id();
    let read = |reader: Reader| {
        let sampler = StackSampler::spawn(pid, StackOptions { reader, ..options() });
        let mut stacks = Stacks::default();
        std::thread::sleep(Duration::from_millis(1500));
        stacks.add(sampler.drain());
        let counts = sampler.read_counts();
        stacks.add(sampler.stop());
        (stacks, counts)
    };
    let frames = |stacks: &Stacks, stack: u32| -> Vec<String> {
        stacks.frames_of(stack).map(|f| format!("{}:{} {}", f.file, f.line, f.function)).collect()
    };
    let (direct, counts) = read(Reader::Direct);
    assert!(counts.direct >= 20 && counts.py_spy <= counts.direct / 10, "{counts:?}");
    let (spied, counts) = read(Reader::PySpy);
    assert!(counts.direct == 0 && counts.py_spy >= 20, "{counts:?}");
    let main = |stacks: &Stacks| {
        let samples = of(stacks, pid, 20);
        mode(&samples, |s| frames(stacks, s.stack).join("\n"))
    };
    let ((a, a_share), (b, b_share)) = (main(&direct), main(&spied));
    assert_eq!(a, b, "the main thread as each reader reads it");
    assert!(a_share > 0.9 && b_share > 0.9, "{a_share} {b_share}");
    let file = path.display();
    let want: Vec<String> = std::iter::once(format!("{file}:{} <module>", script.lines().count()))
        .chain(std::iter::repeat_n(format!("{file}:{} Deep.down", line_of(script, "DOWN")), 30))
        .chain(std::iter::once(format!("{file}:{} Deep.down", line_of(script, "SLEEP"))))
        .collect();
    assert_eq!(a.lines().collect::<Vec<_>>(), want);
    // The GIL's holder, another thread, with its stack.
    let other = |stacks: &Stacks| {
        let samples = of(stacks, pid, 20);
        let held: Vec<&ThreadSample> = samples.into_iter().filter(|s| matches!(s.gil, Gil::Other { .. })).collect();
        assert!(held.len() >= 10, "{} samples with the GIL another thread's", held.len());
        mode(&held, |s| match s.gil {
            Gil::Other { stack } => frames(stacks, stack).join("\n"),
            _ => unreachable!(),
        })
    };
    let ((a, a_share), (b, _)) = (other(&direct), other(&spied));
    assert_eq!(a, b, "the GIL holder as each reader reads it");
    assert!(a_share > 0.9, "{a_share}");
    assert!(a.ends_with(&format!("{file}:{} burn", line_of(script, "BURN"))), "{a}");
    let f = direct.frames.iter().find(|f| f.function == "burn").unwrap();
    assert_eq!(f.code.as_deref(), Some("while True: x += 1  # BURN"));
}

/// What one sample costs: a 40-frame main thread among 8 threads, read at 200 Hz with no budget
/// to hold it back, the CPU of this whole process divided by the samples; by each reader. A
/// measure, not a check:
/// `cargo test --release -p gpulse-sample --test stacks cost_of_one_sample -- --ignored --nocapture`.
#[test]
#[ignore = "a measure, for --release"]
fn cost_of_one_sample() {
    let dir = TempDir::new("cost");
    let script = "import threading, time\n\
def idle():\n    while True: time.sleep(1)\n\
for _ in range(7): threading.Thread(target=idle, daemon=True).start()\n\
def deep(n):\n    if n == 0:\n        print('ready', flush=True)\n        while True: time.sleep(0.001)\n    deep(n - 1)\n\
deep(38)\n";
    let path = dir.write("deep.py", script);
    let job = start(&path);
    let pid = job.0.id();
    let cpu = || {
        // SAFETY: getrusage fills the zeroed struct it is given, a live local.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above; RUSAGE_SELF is always valid.
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        tv(u.ru_utime) + tv(u.ru_stime)
    };
    let mut costs = Vec::new();
    for reader in [Reader::PySpy, Reader::Direct] {
        // A first second opens the process; then the measure.
        let sampler = StackSampler::spawn(pid, StackOptions { rate_hz: 200.0, budget: 1.0, workers: true, reader });
        std::thread::sleep(Duration::from_millis(1500));
        let mut stacks = Stacks::default();
        stacks.add(sampler.drain());
        let (before, n0) = (cpu(), stacks.samples.len());
        std::thread::sleep(Duration::from_secs(5));
        let counts = sampler.read_counts();
        stacks.add(sampler.stop());
        let (spent, n) = (cpu() - before, stacks.samples.len() - n0);
        let depth = stacks.frames_of(stacks.samples.last().unwrap().stack).count();
        let us = spent / n as f64 * 1e6;
        println!("{reader:?}: {n} samples of a {depth}-frame main thread among 8 threads: {us:.0} µs of CPU each");
        println!("  so 1% of a core allows {:.1} Hz ({counts:?})", 0.01 / (us / 1e6));
        costs.push(us);
    }
    println!("direct / py-spy: {:.2}", costs[1] / costs[0]);
}

/// The node's scope: the processes a GPU lists, as that list changes. A stripped interpreter
/// (Debian's `/usr/bin/python3`, where CI has it) is read; a program that is not Python is left
/// alone without a word; one that exits is dropped without a panic; a process off the list is
/// no longer read; and one on a busy GPU is read at a quarter of the rate.
#[test]
fn the_node_scope_follows_the_gpus_process_list() {
    use gpulse_sample::stacks::{NodeRoots, Scope};
    let dir = TempDir::new("node");
    let loop_py =
        dir.write("idle.py", "import time\nprint('ready', flush=True)\nwhile True:\n    time.sleep(0.01)  # IDLE\n");
    let busy_py =
        dir.write("busy.py", "import time\nprint('ready', flush=True)\nwhile True:\n    time.sleep(0.01)  # BUSY\n");
    let brief_py = dir.write("brief.py", "import time\nprint('ready', flush=True)\ntime.sleep(0.8)\n");
    let idle = start(&loop_py);
    let stripped = Path::new("/usr/bin/python3");
    let busy = if stripped.exists() {
        let mut child = Command::new(stripped).arg(&busy_py).stdout(Stdio::piped()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        KillOnDrop(child)
    } else {
        start(&busy_py)
    };
    let brief = start(&brief_py);
    let other = KillOnDrop(Command::new("sleep").arg("30").spawn().unwrap());
    let roots = NodeRoots::default();
    let (a, b, c, d) = (idle.0.id(), busy.0.id(), brief.0.id(), other.0.id());
    roots.set([(a, Some(1.0)), (b, Some(0.0)), (c, Some(1.0)), (d, Some(1.0))]);
    let sampler = StackSampler::spawn_in(Scope::Node(roots.clone()), StackOptions { rate_hz: 40.0, ..options() });
    let mut stacks = Stacks::default();
    let end = Instant::now() + Duration::from_secs(3);
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(300));
        stacks.add(sampler.drain());
    }
    assert!(stacks.refusals.is_empty(), "{:?}", stacks.refusals);
    let count = |st: &Stacks, pid: u32| st.samples.iter().filter(|s| s.pid == pid).count();
    let (na, nb) = (count(&stacks, a), count(&stacks, b));
    assert!(na > 2 * nb && nb >= 5, "idle GPU's process {na} samples, busy GPU's {nb}");
    let line = |pid: u32, marker: &str, path: &Path| {
        let want = format!("{}:4 <module>", path.display());
        let samples = of(&stacks, pid, 5);
        assert!(share(&samples, |s| innermost(&stacks, s.stack) == want) > 0.8, "{marker}: {want}");
    };
    line(a, "IDLE", &loop_py);
    line(b, "BUSY", &busy_py);
    assert!(count(&stacks, c) > 0, "the brief process was read before it ended");
    assert_eq!(count(&stacks, d), 0, "`sleep` is not Python");
    assert!(!stacks.processes.iter().any(|p| p.pid == d));

    // Off the GPU's list: no longer read.
    // The sampler looks at its roots each second.
    roots.set([(b, Some(0.0))]);
    std::thread::sleep(Duration::from_millis(1300));
    stacks.add(sampler.drain());
    std::thread::sleep(Duration::from_millis(1000));
    let mut later = Stacks::default();
    later.add(sampler.drain());
    std::thread::sleep(Duration::from_millis(500));
    later.add(sampler.stop());
    assert_eq!(count(&later, a), 0, "{} samples of the process off the list", count(&later, a));
    assert!(count(&later, b) > 0, "the process still on the list is still read");
    drop((idle, busy, brief, other));
}
