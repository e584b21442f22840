//! The walker against py-spy on real python3 processes, read back to back.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};

use py_spy::config::LockingStrategy;

use super::*;

struct Job(Child, std::path::PathBuf);

impl Drop for Job {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_file(&self.1);
    }
}

fn start(name: &str, script: &str) -> Job {
    let path = std::env::temp_dir().join(format!("gpulse-walk-{name}-{}.py", std::process::id()));
    std::fs::write(&path, script).unwrap();
    let mut child =
        Command::new("python3").arg(&path).stdin(Stdio::null()).stdout(Stdio::piped()).spawn().expect("python3");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    Job(child, path)
}

fn spy(pid: u32) -> py_spy::PythonSpy {
    let config = py_spy::Config { blocking: LockingStrategy::NonBlocking, full_filenames: true, ..Default::default() };
    let mut spy = py_spy::PythonSpy::new(pid as py_spy::Pid, &config).unwrap();
    spy.config.collect_thread_names = false;
    spy
}

type Frames = Vec<(String, i32, String)>;

/// py-spy's reading: the main thread's frames and the GIL holder's, if another thread.
fn spied(spy: &mut py_spy::PythonSpy, pid: u32) -> (Frames, Option<Frames>) {
    let traces = spy.get_stack_traces().unwrap();
    let of = |t: &py_spy::StackTrace| t.frames.iter().map(|f| (f.filename.clone(), f.line, f.name.clone())).collect();
    let main = traces.iter().find(|t| t.os_thread_id == Some(u64::from(pid))).unwrap();
    let other = traces.iter().find(|t| t.owns_gil && t.os_thread_id != Some(u64::from(pid)));
    (of(main), other.map(of))
}

fn walked(w: &mut Walker) -> (Frames, Option<Frames>) {
    let s = w.sample().unwrap();
    let other = match &s.gil {
        WalkedGil::Other(f) => Some(w.as_frames(f)),
        _ => None,
    };
    (w.as_frames(&s.frames), other)
}

/// Reads `n` times with both, back to back; the walker's reading must be py-spy's, just before
/// or just after, but for `slack` of the rounds (the process moves between two reads, and py-spy
/// reads torn strings at times).
fn agree(pid: u32, n: usize, slack: f64) -> (Walker, Vec<(Frames, Option<Frames>)>) {
    let mut spy = spy(pid);
    let mut w = Walker::new(&spy).expect("a version the walker reads");
    let mut seen = Vec::new();
    let mut differ = Vec::new();
    for _ in 0..n {
        let before = walked(&mut w);
        let theirs = spied(&mut spy, pid);
        if before != theirs {
            let after = walked(&mut w);
            if after != theirs {
                differ.push((before, theirs.clone(), after));
            }
        }
        seen.push(theirs);
        std::thread::sleep(std::time::Duration::from_millis(3));
    }
    assert!(
        differ.len() as f64 <= slack * n as f64,
        "{} rounds differ: {:#?}",
        differ.len(),
        &differ[..differ.len().min(3)]
    );
    (w, seen)
}

#[test]
fn the_walker_reads_what_py_spy_reads_with_the_gil_elsewhere() {
    let script = "import threading, time\n\
def burn():\n    x = 0\n    while True: x += 1\n\
threading.Thread(target=burn, daemon=True).start()\n\
def deep(n):\n    if n == 0:\n        print('ready', flush=True)\n        while True: time.sleep(0.001)\n    deep(n - 1)\n\
deep(25)\n";
    let job = start("deep", script);
    // Both readers read the running process without stopping it, one after the other: the GIL
    // may pass between them twice running, a few rounds in a hundred on a loaded 2-core machine
    // (CI saw 3 of 200). A walker that misread would differ in most rounds.
    let (w, seen) = agree(job.0.id(), 200, 0.03);
    assert!(seen.iter().all(|s| s.0.len() == 27), "{:?}", seen[0].0);
    assert!(seen.iter().filter(|s| s.1.is_some()).count() > 100, "the GIL elsewhere");
    // Frames lie side by side: far fewer page reads than frames.
    assert!(w.window_reads() < 200 * 5, "{} reads", w.window_reads());
}

#[test]
fn a_code_object_freed_and_another_at_its_address_is_read_afresh() {
    // Each round compiles a new function, runs it a while, and drops it: its code object's
    // memory is soon another's.
    let script = "import time\nprint('ready', flush=True)\n\
i = 0\n\
while True:\n    i += 1\n    ns = {}\n    exec(f'def f{i}():\\n    t = time.time()\\n    while time.time() - t < 0.004: pass\\n', {'time': time}, ns)\n    ns[f'f{i}']()\n    del ns\n";
    let job = start("reuse", script);
    let (_, seen) = agree(job.0.id(), 300, 0.03);
    let names: std::collections::HashSet<&str> =
        seen.iter().filter_map(|s| s.0.first()).map(|f| f.2.as_str()).filter(|n| n.starts_with('f')).collect();
    assert!(names.len() > 50, "{} functions seen", names.len());
}

/// A loop that spends its time in generators that yield without pause (as `json.dump`'s
/// encoder does): a generator that yields between the thread's frame pointer and the frame's
/// own read has let go of its caller. Every sample the walker gives reaches the module, or it
/// gives none; a torn one would name a generator line with no caller as the job's site.
#[test]
fn a_generator_that_yields_under_the_read_is_read_again() {
    let script = "def inner():\n    while True:\n        yield 1\n\
def outer():\n    yield from inner()\n\
def consume():\n    for _ in outer():\n        pass\n\
print('ready', flush=True)\n\
consume()\n";
    let job = start("generators", script);
    let spy = spy(job.0.id());
    let mut w = Walker::new(&spy).expect("a version the walker reads");
    let mut read = 0;
    for _ in 0..2000 {
        if let Ok(s) = w.sample() {
            let frames = w.as_frames(&s.frames);
            assert_eq!(frames.last().map(|f| f.2.as_str()), Some("<module>"), "{frames:?}");
            read += 1;
        }
    }
    assert!(read > 1900, "{read} of 2000 read");
}
