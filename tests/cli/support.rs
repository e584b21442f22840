//! Running gpulse against the stand-in NVML library.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn fixture(rel: &str) -> PathBuf {
    root().join("tests/fixtures").join(rel)
}

/// The stand-in `libnvidia-ml.so`, built once per test run with the same profile as gpulse.
pub fn fake_lib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let bin = PathBuf::from(env!("CARGO_BIN_EXE_gpulse"));
        let dir = bin.parent().expect("binary has a directory").to_path_buf();
        let release = dir.file_name().is_some_and(|n| n == "release");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--quiet", "-p", "fake-nvml"]).current_dir(root());
        if release {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("cargo runs");
        assert!(status.success(), "building the stand-in NVML library failed");
        dir.join("libnvidia_ml.so")
    })
}

/// The gpulse binary under test: `GPULSE_BIN` when set (a test binary carried to a GPU machine),
/// else the one cargo built.
pub fn gpulse_bin() -> PathBuf {
    std::env::var_os("GPULSE_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_gpulse")), PathBuf::from)
}

/// gpulse on the machine's real NVML.
pub fn gpulse_live() -> Command {
    let mut cmd = Command::new(gpulse_bin());
    cmd.env_remove("GPULSE_NVML_LIB").env_remove("GPULSE_FAKE_NVML_SCENARIO");
    cmd
}

/// A gpulse command that loads the stand-in library with `scenario` (relative to the fixtures).
pub fn gpulse(scenario: Option<&str>) -> Command {
    let mut cmd = Command::new(gpulse_bin());
    cmd.env("GPULSE_NVML_LIB", fake_lib()).env("TZ", "UTC").env_remove("CUDA_VISIBLE_DEVICES");
    // No container runtime's or kubelet's socket of this machine: a test hands its own.
    cmd.env("GPULSE_CRI_SOCKET", "").env("GPULSE_POD_RESOURCES_SOCKET", "");
    match scenario {
        Some(s) => cmd.env("GPULSE_FAKE_NVML_SCENARIO", fixture(s)),
        None => cmd.env_remove("GPULSE_FAKE_NVML_SCENARIO"),
    };
    cmd
}

/// Says on the terminal that a check did not run: one `skipped: …` line. The test harness
/// captures `eprintln!` of a passing test, but not a write to the stderr handle itself, so
/// `cargo test` shows this line without `--nocapture`.
pub fn skipped(why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped: {why}");
}

/// Runs and returns (exit status, stdout, stderr).
pub fn run(cmd: &mut Command) -> (i32, String, String) {
    let Output { status, stdout, stderr } = cmd.output().expect("gpulse starts");
    (status.code().unwrap_or(-1), String::from_utf8_lossy(&stdout).into(), String::from_utf8_lossy(&stderr).into())
}

/// A temporary directory, or a file in one, removed with everything under it when dropped
/// (a failed assertion's unwinding included). It derefs to its path.
pub struct Temp {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Temp {
    /// A fresh directory under the system's temporary one, named `gpulse-{label}-…`.
    fn dir(label: &str) -> Temp {
        let dir = tempfile::Builder::new().prefix(&format!("gpulse-{label}-")).tempdir().unwrap();
        Temp { path: dir.path().to_owned(), _dir: dir }
    }

    /// `name` in this directory (which it keeps).
    fn file(self, name: &str, bytes: &[u8]) -> Temp {
        let path = self.path.join(name);
        std::fs::write(&path, bytes).unwrap();
        Temp { path, _dir: self._dir }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl std::ops::Deref for Temp {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

// Taken by reference only: one given away by value to `Command::arg` or `env` would be removed
// before the command runs.
impl AsRef<Path> for &Temp {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<std::ffi::OsStr> for &Temp {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.path.as_os_str()
    }
}

/// An empty directory of its own for one test: `area` names the test file, `name` the test.
pub fn fresh_dir(area: &str, name: &str) -> Temp {
    Temp::dir(&format!("{area}-{name}"))
}

/// The JSON diagnosis of a copy of the recording `db` with its marks deleted: a job read as
/// `top` or `serve` read one it did not start. `area` and `name` name the copy's directory.
pub fn diagnosis_without_marks(db: &Path, area: &str, name: &str) -> serde_json::Value {
    let tmp = fresh_dir(area, name);
    let copy = tmp.join(db.file_name().expect("a recording's file name"));
    std::fs::copy(db, &copy).unwrap();
    rusqlite::Connection::open(&copy).unwrap().execute("DELETE FROM markers", []).unwrap();
    let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(&copy));
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Writes a scenario to a fresh temporary directory and returns its path.
pub fn scenario_file(name: &str, json: &str) -> Temp {
    Temp::dir(&format!("test-{name}")).file("scenario.json", json.as_bytes())
}

/// A child process killed and reaped when dropped (a failed assertion's unwinding included),
/// with its process group when [`KillOnDrop::group`] started it. It derefs to the child.
pub struct KillOnDrop {
    child: std::process::Child,
    group: bool,
}

impl KillOnDrop {
    /// Takes a child already started.
    pub fn new(child: std::process::Child) -> KillOnDrop {
        KillOnDrop { child, group: false }
    }

    /// Spawns `cmd`.
    pub fn spawn(cmd: &mut Command) -> KillOnDrop {
        KillOnDrop::new(cmd.spawn().expect("the command starts"))
    }

    /// Spawns `cmd` in a process group of its own, so that dropping it also ends what it started
    /// (a shell's `sleep`, a job's workers).
    pub fn group(cmd: &mut Command) -> KillOnDrop {
        use std::os::unix::process::CommandExt;
        KillOnDrop { child: cmd.process_group(0).spawn().expect("the command starts"), group: true }
    }

    /// As [`std::process::Child::wait_with_output`]: what it wrote to piped stdout and stderr,
    /// once it has ended.
    pub fn wait_with_output(mut self) -> std::io::Result<Output> {
        use std::io::Read;
        let err = self.child.stderr.take();
        let reader = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut e) = err {
                let _ = e.read_to_end(&mut bytes);
            }
            bytes
        });
        let mut stdout = Vec::new();
        if let Some(mut o) = self.child.stdout.take() {
            o.read_to_end(&mut stdout)?;
        }
        let stderr = reader.join().expect("the reader of stderr ends");
        let status = self.child.wait()?;
        Ok(Output { status, stdout, stderr })
    }
}

impl std::ops::Deref for KillOnDrop {
    type Target = std::process::Child;
    fn deref(&self) -> &std::process::Child {
        &self.child
    }
}

impl std::ops::DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        &mut self.child
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if self.group {
            // The group keeps its id while any member lives, so this reaches only what it started.
            // SAFETY: killpg takes plain integers and touches no memory of ours.
            unsafe { libc::killpg(self.child.id() as libc::pid_t, libc::SIGKILL) };
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Cells of a CSV line as nvidia-smi separates them.
pub fn cells(line: &str) -> Vec<&str> {
    line.split(", ").collect()
}

/// Whether `s` looks like nvidia-smi's `YYYY/MM/DD HH:MM:SS.mmm`.
pub fn is_smi_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 23
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'/',
            10 => *c == b' ',
            13 | 16 => *c == b':',
            19 => *c == b'.',
            _ => c.is_ascii_digit(),
        })
}

/// A copy of the stand-in library in which `symbols` cannot be found by `dlsym`, as in an older
/// driver: each name is renamed in the dynamic string table, so lookups of it fail.
pub fn lib_without(symbols: &[&str]) -> Temp {
    let mut bytes = std::fs::read(fake_lib()).unwrap();
    for sym in symbols {
        let needle: Vec<u8> = [&[0u8][..], sym.as_bytes(), &[0u8][..]].concat();
        let mut hits = 0;
        let mut i = 0;
        while i + needle.len() <= bytes.len() {
            if bytes[i..i + needle.len()] == needle[..] {
                bytes[i + 1] = b'X';
                hits += 1;
            }
            i += 1;
        }
        assert!(hits > 0, "{sym} is not exported");
    }
    Temp::dir("oldlib").file("libnvidia-ml.so.1", &bytes)
}

/// The loop's own data-wait share and steps/s in `steps_<name>.jsonl`, over the window gpulse
/// measures: from the end of the first step to the end of the last.
pub fn loop_truth(path: &std::path::Path) -> (f64, f64) {
    let text = std::fs::read_to_string(path).unwrap();
    let steps: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &serde_json::Value| v["step"].is_u64())
        .collect();
    let ends: Vec<f64> = steps
        .iter()
        .map(|s| s["t"].as_f64().unwrap() + s["data_s"].as_f64().unwrap() + s["compute_s"].as_f64().unwrap())
        .collect();
    let span = ends[ends.len() - 1] - ends[0];
    let waited: f64 = steps[1..].iter().map(|s| s["data_s"].as_f64().unwrap()).sum();
    (100.0 * waited / span, (ends.len() - 1) as f64 / span)
}

/// How many steps the loop logged in `steps_<name>.jsonl`.
pub fn loop_steps(path: &std::path::Path) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().filter(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["step"].is_u64()).count()
}

/// The numbers in a line of text, in order ("2.8 → 20.5  7.2×" gives 2.8, 20.5, 7.2).
pub fn numbers(line: &str) -> Vec<f64> {
    line.split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// `python3` when it can import `module`, else `None` with a `skipped:` line naming `check`; under
/// `GPULSE_REQUIRE_PY_CLIENTS` (CI installs them) a missing module fails instead.
pub fn python_with(module: &str, check: &str) -> Option<&'static str> {
    let ok =
        Command::new("python3").args(["-c", &format!("import {module}")]).output().is_ok_and(|o| o.status.success());
    if ok {
        return Some("python3");
    }
    assert!(std::env::var_os("GPULSE_REQUIRE_PY_CLIENTS").is_none(), "python3 cannot import {module}");
    skipped(&format!("{module} {check} (python3 cannot import {module}; CI installs it)"));
    None
}

/// One HTTP/1.1 GET to `addr` (`host:port`): (status, headers in lower case, body).
pub fn http_get(addr: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(20))).unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req += &format!("{k}: {v}\r\n");
    }
    s.write_all(format!("{req}\r\n").as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, head.to_lowercase(), body.to_owned())
}

/// Waits until `done` holds, checking every 20 ms, for up to `secs`: a loaded machine is slow,
/// never wrong, so each wait is for a condition with a generous deadline, never a fixed time.
pub fn wait_until(secs: u64, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "waited {secs} s for {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A child's stdout, gathered by a thread of its own as it comes.
pub struct Gathered {
    pub child: KillOnDrop,
    text: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Gathered {
    /// Spawns `cmd` with its stdout piped here.
    pub fn spawn(cmd: &mut Command) -> Gathered {
        use std::io::Read;
        let mut child = KillOnDrop::spawn(cmd.stdout(std::process::Stdio::piped()));
        let mut out = child.stdout.take().unwrap();
        let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = std::sync::Arc::clone(&text);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Gathered { child, text }
    }

    /// Complete lines of output so far.
    pub fn lines(&self) -> Vec<String> {
        let text = self.text.lock().unwrap();
        let whole = text.rfind('\n').map_or("", |i| &text[..=i]);
        whole.lines().map(str::to_owned).collect()
    }

    /// Waits up to `secs` until `done` holds of the complete lines so far.
    pub fn wait_for_lines(&self, secs: u64, what: &str, done: impl Fn(&[String]) -> bool) {
        wait_until(secs, what, || done(&self.lines()));
    }

    /// Kills the child and returns its complete lines and its stderr, if piped.
    pub fn stop(mut self) -> (Vec<String>, String) {
        use std::io::Read;
        let _ = self.child.kill();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let _ = self.child.wait();
        (self.lines(), err)
    }
}
