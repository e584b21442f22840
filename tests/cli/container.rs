//! The container image without a Docker engine: `docker/gpulse-entrypoint` run on this machine
//! against the real programs it starts in the image (Debian's OpenSSH, JupyterLab from PyPI,
//! gpulse on the stand-in NVML), each pointed at folders of its own, so that nothing under /etc is
//! read or written; and the Dockerfile checked by hadolint and by its structure.
//!
//! CI installs sshd, JupyterLab, hadolint and shellcheck and sets `GPULSE_REQUIRE_SSHD`,
//! `GPULSE_REQUIRE_JUPYTER`, `GPULSE_REQUIRE_HADOLINT` and `GPULSE_REQUIRE_SHELLCHECK`; elsewhere
//! a missing program skips its check.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::support::{fake_lib, fixture, gpulse_bin, root, run, skipped, wait_until};

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn entrypoint() -> PathBuf {
    root().join("docker/gpulse-entrypoint")
}

/// Whether `program` runs here; if not, a check that needs it fails under `require`, else skips.
fn have(program: &str, args: &[&str], require: &str, what: &str) -> bool {
    let ok = Command::new(program).args(args).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok();
    if !ok {
        assert!(std::env::var_os(require).is_none(), "{program} is required ({require})");
        skipped(&format!("{what} (no {program}; CI installs it)"));
    }
    ok
}

fn have_sshd(what: &str) -> bool {
    Path::new(SSHD).exists() || {
        assert!(std::env::var_os("GPULSE_REQUIRE_SSHD").is_none(), "sshd is required (GPULSE_REQUIRE_SSHD)");
        skipped(&format!("{what} (no {SSHD}; CI installs openssh-server)"));
        false
    }
}

const SSHD: &str = "/usr/sbin/sshd";

/// A free loopback port (released at once; the entrypoint binds it next).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The folders a container would have, in a private folder of the test's own: sshd's StrictModes
/// wants every folder above the authorized keys owned by root or the user and writable by no one
/// else, which /tmp is not, nor a checkout cloned under it.
struct Layout {
    dir: PathBuf,
}

/// Whether sshd's StrictModes accepts `dir` and every folder above it.
fn strict_modes_accept(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid and getuid cannot fail and touch no memory.
    let uid = unsafe { libc::geteuid() };
    dir.ancestors()
        .all(|d| std::fs::metadata(d).is_ok_and(|m| (m.uid() == 0 || m.uid() == uid) && m.mode() & 0o022 == 0))
}

/// A base for the layouts that StrictModes accepts: the build's own temporary folder where it can,
/// else a folder under the user's home (as sshd itself looks it up).
fn private_base() -> PathBuf {
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    if strict_modes_accept(&target) {
        return target;
    }
    // SAFETY: getpwuid returns a pointer into libc's static storage or null, checked before use.
    let home = unsafe {
        let pw = libc::getpwuid(libc::geteuid());
        assert!(!pw.is_null(), "the user has a passwd entry");
        PathBuf::from(std::ffi::CStr::from_ptr((*pw).pw_dir).to_string_lossy().into_owned())
    };
    let base = home.join(".cache/gpulse-tests");
    std::fs::create_dir_all(&base).unwrap();
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert!(strict_modes_accept(&base), "{} is private to the user", base.display());
    base
}

/// A passing test leaves nothing behind; a failing one keeps its folder to be read.
impl Drop for Layout {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Layout {
    fn new(name: &str) -> Layout {
        let dir = private_base().join(format!("container-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["state", "hostkeys", "secrets", "home", "workspace", "bin"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        // `gpulse` on PATH is the binary under test.
        std::os::unix::fs::symlink(gpulse_bin(), dir.join("bin/gpulse")).unwrap();
        Layout { dir }
    }

    /// A layout another user can reach, for the image's unprivileged user: under `/run` (root's,
    /// 0755 all the way up, as sshd's StrictModes wants), wherever the checkout is (CI's may sit
    /// in a folder only root can enter), with the entrypoint copied in beside it.
    fn public(name: &str) -> Layout {
        let base = PathBuf::from("/run/gpulse-tests");
        std::fs::create_dir_all(&base).unwrap();
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
        let dir = base.join(format!("container-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["state", "hostkeys", "secrets", "home", "workspace", "bin"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::copy(entrypoint(), dir.join("gpulse-entrypoint")).unwrap();
        // The binary itself, not a link into the build folder the other user cannot enter: a hard
        // link where the build folder shares the file system, else a copy.
        let bin = dir.join("bin/gpulse");
        if std::fs::hard_link(gpulse_bin(), &bin).is_err() {
            std::fs::copy(gpulse_bin(), &bin).unwrap();
        }
        Layout { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// `gpulse-entrypoint MODE` with this layout and nothing of the caller's tokens or keys.
    fn entrypoint(&self, mode: &str) -> Command {
        self.command(&[mode])
    }

    /// `gpulse-entrypoint ARGS...`, as [`Layout::entrypoint`].
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("sh");
        cmd.arg(entrypoint()).args(args);
        let path = format!("{}:{}", self.path("bin").display(), std::env::var("PATH").unwrap_or_default());
        cmd.env("PATH", path)
            .env("HOME", self.path("home"))
            .env("GPULSE_STATE_DIR", self.path("state"))
            .env("GPULSE_SSH_HOST_KEYS", self.path("hostkeys"))
            .env("GPULSE_SECRETS_DIR", self.path("secrets"))
            .env("GPULSE_WORKSPACE", self.path("workspace"))
            .env("GPULSE_NVML_LIB", fake_lib())
            .env("GPULSE_FAKE_NVML_SCENARIO", fixture("scenarios/serve_three_gpus.json"))
            .env("TZ", "UTC")
            .current_dir(self.path("workspace"));
        for var in [
            "JUPYTER_TOKEN",
            "JUPYTER_TOKEN_FILE",
            "JUPYTER_CONFIG_DIR",
            "JUPYTER_DATA_DIR",
            "JUPYTER_RUNTIME_DIR",
            "AUTHORIZED_KEYS",
            "AUTHORIZED_KEYS_FILE",
            "GPULSE_TOKEN",
        ] {
            cmd.env_remove(var);
        }
        cmd
    }
}

/// A running entrypoint in a process group of its own, all of which is ended when dropped, with
/// what it started in sessions of their own (Jupyter's kernels and terminals).
struct Running {
    child: Child,
    output: Arc<Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Running {
    fn start(mut cmd: Command) -> Running {
        let mut child =
            cmd.process_group(0).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let output = Arc::new(Mutex::new(String::new()));
        let mut readers = Vec::new();
        for stream in
            [Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>, Box::new(child.stderr.take().unwrap())]
        {
            let output = Arc::clone(&output);
            readers.push(std::thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    output.lock().unwrap().push_str(&(line + "\n"));
                }
            }));
        }
        Running { child, output, readers }
    }

    /// Runs `cmd` to its end, for up to `secs`: its exit status, or `None` when it was still
    /// running then (it is stopped), and all it wrote.
    fn finish(cmd: Command, secs: u64) -> (Option<i32>, String) {
        let mut r = Running::start(cmd);
        let deadline = Instant::now() + Duration::from_secs(secs);
        let code = loop {
            if let Some(status) = r.child.try_wait().unwrap() {
                break status.code();
            }
            if Instant::now() > deadline {
                r.stop();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        for reader in std::mem::take(&mut r.readers) {
            let _ = reader.join();
        }
        (code, r.output())
    }

    fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    /// The first output line that starts with `prefix`, waiting up to `secs`.
    fn line(&mut self, prefix: &str, secs: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(l) = self.output().lines().find(|l| l.starts_with(prefix)) {
                return l.to_owned();
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                std::thread::sleep(Duration::from_millis(200));
                panic!("the entrypoint ended ({status}) before '{prefix}':\n{}", self.output());
            }
            assert!(Instant::now() < deadline, "no '{prefix}' within {secs} s:\n{}", self.output());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Every process of the group.
    fn pids(&self) -> Vec<u32> {
        let group = self.child.id();
        processes().into_iter().filter(|p| p.group == group).map(|p| p.pid).collect()
    }

    /// Every process of the group: their command lines.
    fn command_lines(&self) -> Vec<String> {
        self.pids().into_iter().map(command_line).collect()
    }

    /// The group's process whose command line contains `what`, waiting up to `secs`.
    fn pid_of(&self, what: &str, secs: u64) -> u32 {
        let mut found = None;
        wait_until(secs, what, || {
            found = self.pids().into_iter().find(|&p| command_line(p).contains(what));
            found.is_some()
        });
        found.unwrap()
    }

    /// Asks the whole group to stop, as `docker stop` asks the container; kills what is left.
    fn stop(&mut self) -> Option<i32> {
        let group = self.child.id() as i32;
        // SAFETY: kill(2) on a process (or group) this test started.
        unsafe { libc::kill(-group, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(15);
        let code = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status.code();
            }
            if Instant::now() > deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        // SAFETY: kill(2) on a process (or group) this test started.
        unsafe { libc::kill(-group, libc::SIGKILL) };
        let _ = self.child.wait();
        code
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let group = self.child.id() as i32;
        let escaped = self.pids().into_iter().flat_map(descendants).collect::<Vec<_>>();
        // SAFETY: kill(2) on a process (or group) this test started.
        unsafe { libc::kill(-group, libc::SIGKILL) };
        for pid in escaped {
            // SAFETY: kill(2) on a process (or group) this test started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
        let _ = self.child.wait();
    }
}

/// One process as /proc/PID/stat has it.
struct Process {
    pid: u32,
    parent: u32,
    group: u32,
}

fn processes() -> Vec<Process> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // pid (comm) state ppid pgrp ...: comm may hold spaces, so count from its ')'.
        let Some(after) = stat.rsplit_once(')').map(|(_, r)| r) else { continue };
        let fields: Vec<u32> = after.split_whitespace().skip(1).take(2).filter_map(|f| f.parse().ok()).collect();
        if let [parent, group] = fields[..] {
            all.push(Process { pid, parent, group });
        }
    }
    all
}

/// Every process below `pid`, wherever its session or group.
fn descendants(pid: u32) -> Vec<u32> {
    let all = processes();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(all.iter().filter(|p| p.parent == parent).map(|p| p.pid));
        i += 1;
    }
    found.split_off(1)
}

/// A process's command line, its arguments joined by spaces.
fn command_line(pid: u32) -> String {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&cmdline).replace('\0', " ")
}

/// The environment a process was started with: `NAME=value` each.
fn environ(pid: u32) -> Vec<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    environ.split(|&b| b == 0).filter(|v| !v.is_empty()).map(|v| String::from_utf8_lossy(v).into_owned()).collect()
}

/// Where process `pid` has `secret` in its arguments or its environment, or one of the variables
/// `names`: each place, or `None` when its environment cannot be read (it has ended).
fn leaks(pid: u32, secret: &str, names: &[&str]) -> Option<Vec<String>> {
    let (cmdline, env) = (command_line(pid), environ(pid));
    if env.is_empty() {
        return None;
    }
    let mut found = Vec::new();
    if cmdline.contains(secret) {
        found.push(format!("{pid}'s command line: {cmdline}"));
    }
    for var in env {
        if var.contains(secret) || names.contains(&var.split('=').next().unwrap()) {
            found.push(format!("{pid}'s environment ({cmdline}): {var}"));
        }
    }
    Some(found)
}

/// One HTTP/1.1 GET on loopback: (status, body).
fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let (status, _, body) = super::support::http_get(&format!("127.0.0.1:{port}"), path, headers);
    (status, body)
}

/// One HTTP/1.1 POST of a JSON body on loopback: (status, body).
fn post(port: u16, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    use std::io::Write;
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req += &format!("{k}: {v}\r\n");
    }
    s.write_all(format!("{req}\r\n{body}").as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0), body.to_owned())
}

/// Waits until something answers HTTP on `port` with `path`.
fn wait_http(port: u16, path: &str, secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while TcpStream::connect(("127.0.0.1", port)).is_err() || get(port, path, &[]).0 == 0 {
        assert!(Instant::now() < deadline, "nothing answers on {port} within {secs} s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

// ---------------------------------------------------------------------------------------------
// Modes that need nothing but the script.

#[test]
fn an_unknown_mode_or_none_prints_the_usage() {
    let l = Layout::new("usage");
    for args in [&[][..], &["serve-everything"][..]] {
        let (code, _, err) = run(&mut l.command(args));
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("usage: gpulse-entrypoint MODE") && err.contains("jupyter") && err.contains("ssh"),
            "{err}"
        );
    }
    let (code, _, err) = run(&mut l.entrypoint("--help"));
    assert_eq!(code, 0, "{err}");
}

#[test]
fn run_wraps_the_command_in_gpulse_run_and_records_into_the_workspace() {
    let l = Layout::new("run");
    // Options before `--` go to gpulse run; arguments with quotes and spaces reach the command
    // intact; its exit status comes back.
    let (code, out, err) = run(l.entrypoint("run").args([
        "--status",
        "off",
        "--no-report",
        "--interval",
        "100ms",
        "--",
        "sh",
        "-c",
        "printf '%s|%s' \"$1\" \"$2\" > args.txt; exit 3",
        "_",
        "it's a b",
        "*",
    ]));
    assert_eq!(code, 3, "{out}{err}");
    assert_eq!(std::fs::read_to_string(l.path("workspace/args.txt")).unwrap(), "it's a b|*");
    // Without `--`, everything is the command.
    let (code, out, err) = run(l.entrypoint("run").args(["true"]));
    assert_eq!(code, 0, "{out}{err}");
    // `python script.py` is named after the script.
    std::fs::write(l.path("workspace/train.py"), "print('training')\n").unwrap();
    let (code, out, err) =
        run(l.entrypoint("run").args(["--status", "off", "--no-report", "--", "python3", "train.py"]));
    assert_eq!((code, out.as_str()), (0, "training\n"), "{err}");
    let mut recordings: Vec<_> = std::fs::read_dir(l.path("workspace/.gpulse"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".db"))
        .collect();
    recordings.sort();
    assert_eq!(recordings.len(), 3, "{recordings:?}");
    for name in ["-sh.db", "-true.db", "-train.db"] {
        assert!(recordings.iter().any(|n| n.ends_with(name)), "{name}: {recordings:?}");
    }
    // Real recordings: gpulse reads them back.
    for name in &recordings {
        let path = l.path(&format!("workspace/.gpulse/{name}"));
        let (code, out, err) = run(super::support::gpulse(None).arg("diagnose").arg(&path));
        assert_eq!(code, 0, "{name}: {out}{err}");
    }
    let (code, _, err) = run(l.entrypoint("run").arg("--"));
    assert_eq!(code, 1);
    assert!(err.contains("run: no command"), "{err}");
}

#[test]
fn shell_is_a_shell_that_finds_gpulse() {
    let l = Layout::new("shell");
    let (code, out, err) = run(l.entrypoint("shell").args(["-c", "gpulse --version"]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), format!("gpulse {VERSION}"));
}

#[test]
fn jupyter_refuses_an_empty_short_or_unreadable_token_in_one_line() {
    let l = Layout::new("jupyter-refuses");
    std::fs::write(l.path("secrets/empty"), "\n").unwrap();
    std::fs::write(l.path("secrets/jupyter_token"), "short\n").unwrap();
    let cases: [(&str, &str, &str); 6] = [
        ("JUPYTER_TOKEN", "", "is empty, and Jupyter would start without auth"),
        ("JUPYTER_TOKEN", "0123456789abcdef0123456789abcde", "is too weak: about 124 bits, and 128 are needed"),
        ("JUPYTER_TOKEN", "Zq8xT1mW4rLp9sKd2VbN7", "is too weak: about 125 bits"),
        ("JUPYTER_TOKEN", "0123456789abcdef 0123", "has characters other than"),
        ("JUPYTER_TOKEN_FILE", "empty", "is empty"),
        ("JUPYTER_TOKEN_FILE", "missing", "cannot read"),
    ];
    for (var, value, says) in cases {
        let mut cmd = l.entrypoint("jupyter");
        let value = if var == "JUPYTER_TOKEN_FILE" {
            l.path(&format!("secrets/{value}")).display().to_string()
        } else {
            value.to_owned()
        };
        let (code, out, err) = run(cmd.env(var, &value));
        assert_eq!(code, 1, "{var}={value:?}: {out}{err}");
        assert_eq!(err.lines().count(), 1, "{var}={value:?}: {err}");
        assert!(err.contains(says), "{var}={value:?}: {err}");
    }
    // A mounted token file is read when nothing else is given: this one is too short.
    let (code, _, err) = run(&mut l.entrypoint("jupyter"));
    assert_eq!(code, 1);
    assert!(err.contains("secrets/jupyter_token is too weak: about 23 bits"), "{err}");
    assert!(!l.path("state/token").exists(), "nothing started, nothing written");
}

// ---------------------------------------------------------------------------------------------
// JupyterLab, with gpulse serve beside it.

fn have_jupyter(what: &str) -> bool {
    have("jupyter-lab", &["--version"], "GPULSE_REQUIRE_JUPYTER", what)
}

/// Starts jupyter mode on free loopback ports: (running, Jupyter's port, serve's port).
fn start_jupyter(l: &Layout, env: &[(&str, String)]) -> (Running, u16, u16) {
    let (jport, sport) = (free_port(), free_port());
    let mut cmd = l.entrypoint("jupyter");
    cmd.env("JUPYTER_IP", "127.0.0.1")
        .env("JUPYTER_PORT", jport.to_string())
        .env("GPULSE_SERVE_LISTEN", format!("127.0.0.1:{sport}"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    (Running::start(cmd), jport, sport)
}

#[test]
fn jupyter_with_no_token_given_makes_one_prints_it_once_and_locks_jupyter_and_serve_with_it() {
    if !have_jupyter("JupyterLab behind a generated token") {
        return;
    }
    let l = Layout::new("jupyter-generated");
    let (mut j, jport, sport) = start_jupyter(&l, &[]);
    let ready = j.line("gpulse-entrypoint: JupyterLab is ready: ", 180);
    let url = ready.rsplit(' ').next().unwrap();
    let token = url.split_once("/lab?token=").expect("a ready URL with the token").1.to_owned();
    assert_eq!(url, format!("http://127.0.0.1:{jport}/lab?token={token}"));
    assert!(token.len() >= 32 && token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
    // Jupyter: 403 without the token, 200 with it (query or header), and the lab page itself.
    assert_eq!(get(jport, "/api/status", &[]).0, 403);
    assert_eq!(get(jport, &format!("/api/status?token={}", &token[..token.len() - 1]), &[]).0, 403);
    let (code, body) = get(jport, &format!("/api/status?token={token}"), &[]);
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"started\""), "{body}");
    assert_eq!(get(jport, "/api/status", &[("Authorization", &format!("token {token}"))]).0, 200);
    assert_eq!(get(jport, &format!("/lab?token={token}"), &[]).0, 200);
    // gpulse serve beside it: the same token, from the file; metrics open as dcgm-exporter's.
    j.line("gpulse: serving on ", 60);
    wait_http(sport, "/healthz", 30);
    assert_eq!(get(sport, "/api/v1/snapshot", &[]).0, 401);
    assert_eq!(get(sport, "/", &[]).0, 401);
    let (code, body) = get(sport, "/api/v1/snapshot", &[("Authorization", &format!("Bearer {token}"))]);
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"util_gpu_pct\":87"), "{body}");
    let (code, metrics) = get(sport, "/metrics", &[]);
    assert_eq!(code, 200);
    assert!(metrics.contains("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\""));
    // The token file is private; the health check passes; the token is on no command line.
    let mode = std::fs::metadata(l.path("state/token")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(std::fs::metadata(l.path("state")).unwrap().permissions().mode() & 0o777, 0o700);
    let (code, _, err) = run(&mut l.entrypoint("health"));
    assert_eq!(code, 0, "{err}");
    let lines = j.command_lines();
    assert!(lines.iter().any(|c| c.contains("jupyter-lab") || c.contains("jupyter lab")), "{lines:?}");
    assert!(lines.iter().any(|c| c.contains("gpulse serve")), "{lines:?}");
    assert!(lines.iter().all(|c| !c.contains(&token)), "{lines:?}");
    // Printed once, in the ready URL, and nowhere else.
    let output = j.output();
    assert_eq!(output.matches(&token).count(), 1, "{output}");
    assert!(output.contains(&format!("gpulse serve is on http://127.0.0.1:{sport}/ (the same token)")), "{output}");
    // `docker stop`: both end, and the entrypoint with them.
    assert!(j.stop().is_some(), "the entrypoint ends on SIGTERM:\n{}", j.output());
    assert!(j.command_lines().is_empty());
}

#[test]
fn jupyter_takes_a_mounted_token_file_and_never_prints_it() {
    if !have_jupyter("JupyterLab behind a given token") {
        return;
    }
    let l = Layout::new("jupyter-given");
    let token = "given-0123456789abcdef-token";
    std::fs::write(l.path("secrets/jupyter_token"), format!("  {token}  \nsecond line ignored\n")).unwrap();
    let (mut j, jport, sport) = start_jupyter(&l, &[("GPULSE_SERVE_LISTEN", "off".into())]);
    let ready = j.line("gpulse-entrypoint: JupyterLab is ready: ", 180);
    assert!(
        ready.ends_with(&format!(
            "http://127.0.0.1:{jport}/lab (the token from {})",
            l.path("secrets/jupyter_token").display()
        )),
        "{ready}"
    );
    assert_eq!(get(jport, "/api/status", &[]).0, 403);
    assert_eq!(get(jport, &format!("/api/status?token={token}"), &[]).0, 200);
    // serve is off here: nothing listens on its port.
    assert!(TcpStream::connect(("127.0.0.1", sport)).is_err());
    assert!(!j.output().contains(token), "{}", j.output());
    j.stop();
}

/// The token reaches Jupyter in a private config file: Jupyter, the kernels and terminals it
/// starts, and serve have it in neither their arguments nor their environment.
#[test]
fn jupyter_its_kernels_its_terminals_and_serve_never_see_the_token_in_their_environment() {
    if !have_jupyter("the token kept out of the environment of what JupyterLab starts") {
        return;
    }
    let l = Layout::new("jupyter-environ");
    let token = "environ-0123456789abcdef-token";
    std::fs::write(l.path("secrets/token-file"), format!("{token}\n")).unwrap();
    let (mut j, jport, sport) = start_jupyter(
        &l,
        &[
            ("JUPYTER_TOKEN", token.into()),
            ("JUPYTER_TOKEN_FILE", l.path("secrets/token-file").display().to_string()),
            ("SHELL", "/bin/sh".into()),
        ],
    );
    j.line("gpulse-entrypoint: JupyterLab is ready: ", 180);
    // The token still logs in, to Jupyter and to serve.
    assert_eq!(get(jport, "/api/status", &[]).0, 403);
    assert_eq!(get(jport, &format!("/api/status?token={token}"), &[]).0, 200);
    j.line("gpulse: serving on ", 60);
    wait_http(sport, "/healthz", 30);
    assert_eq!(get(sport, "/api/v1/snapshot", &[]).0, 401);
    assert_eq!(get(sport, "/api/v1/snapshot", &[("Authorization", &format!("Bearer {token}"))]).0, 200);
    // A kernel and a terminal, started as from the lab page.
    let auth = format!("token {token}");
    let (code, body) = post(jport, "/api/kernels", &[("Authorization", &auth)], r#"{"name": "python3"}"#);
    assert_eq!(code, 201, "{body}");
    let kernel: serde_json::Value = serde_json::from_str(&body).unwrap();
    let kernel_id = kernel["id"].as_str().unwrap().to_owned();
    let (code, body) = post(jport, "/api/terminals", &[("Authorization", &auth)], "{}");
    assert_eq!(code, 200, "{body}");
    let jupyter = j.pid_of("jupyter-lab", 30);
    let serve = j.pid_of("gpulse serve", 30);
    let (mut kernel, mut terminal) = (None, None);
    wait_until(60, "the kernel's and the terminal's processes", || {
        let below = descendants(jupyter);
        kernel = below.iter().copied().find(|&p| command_line(p).contains(&kernel_id));
        terminal = below.iter().copied().find(|&p| command_line(p).starts_with("/bin/sh"));
        kernel.is_some() && terminal.is_some()
    });
    assert!(command_line(kernel.unwrap()).contains("ipykernel"), "{}", command_line(kernel.unwrap()));
    let secret_names = ["JUPYTER_TOKEN", "JUPYTER_TOKEN_FILE"];
    for pid in [jupyter, serve, kernel.unwrap(), terminal.unwrap()] {
        assert_eq!(leaks(pid, token, &secret_names), Some(vec![]));
    }
    // And whatever else runs below Jupyter (one that has ended by now has nothing to read).
    for pid in descendants(jupyter) {
        assert_eq!(leaks(pid, token, &secret_names).unwrap_or_default(), Vec::<String>::new());
    }
    for line in j.command_lines() {
        assert!(!line.contains(token), "{line}");
    }
    // Jupyter has it from a file only this user reads, in a folder only this user enters.
    let config = l.path("state/jupyter/jupyter_config.json");
    assert!(std::fs::read_to_string(&config).unwrap().contains(token));
    assert_eq!(std::fs::metadata(&config).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(l.path("state/jupyter")).unwrap().permissions().mode() & 0o777, 0o700);
    assert!(j.stop().is_some(), "the entrypoint ends on SIGTERM:\n{}", j.output());
}

#[test]
fn jupyter_stops_when_a_config_file_turns_its_auth_off() {
    if !have_jupyter("JupyterLab with auth turned off by a config file") {
        return;
    }
    let l = Layout::new("jupyter-no-auth");
    std::fs::create_dir_all(l.path("home/.jupyter")).unwrap();
    std::fs::write(l.path("home/.jupyter/jupyter_server_config.py"), "c.IdentityProvider.token = ''\n").unwrap();
    let (mut j, jport, _) = start_jupyter(&l, &[("GPULSE_SERVE_LISTEN", "off".into())]);
    j.line("gpulse-entrypoint: jupyter: JupyterLab answers without the token", 180);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = j.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "still running:\n{}", j.output());
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status.code(), Some(1), "{}", j.output());
    assert!(!j.output().contains("is ready"), "{}", j.output());
    assert!(TcpStream::connect(("127.0.0.1", jport)).is_err(), "Jupyter is gone");
}

/// A token in the user's own config file wins over the entrypoint's, as it would over
/// JUPYTER_TOKEN; the entrypoint then prints no ready URL that would not log in.
#[test]
fn jupyter_says_so_when_a_config_file_sets_another_token() {
    if !have_jupyter("JupyterLab with another token from a config file") {
        return;
    }
    let l = Layout::new("jupyter-other-token");
    let other = "other-0123456789abcdef-token";
    std::fs::create_dir_all(l.path("home/.jupyter")).unwrap();
    std::fs::write(l.path("home/.jupyter/jupyter_server_config.py"), format!("c.IdentityProvider.token = '{other}'\n"))
        .unwrap();
    let (mut j, jport, _) = start_jupyter(&l, &[("GPULSE_SERVE_LISTEN", "off".into())]);
    j.line("gpulse-entrypoint: jupyter: JupyterLab turns away the token (a config file sets another?)", 180);
    assert!(!j.output().contains("is ready"), "{}", j.output());
    assert_eq!(get(jport, "/api/status", &[]).0, 403);
    assert_eq!(get(jport, &format!("/api/status?token={other}"), &[]).0, 200);
    j.stop();
}

// ---------------------------------------------------------------------------------------------
// sshd: keys only.

/// SSH_PORT and SSH_LISTEN go into sshd_config, a directive a line: a value with a line break, or
/// anything but a port number or an address, would add directives of the caller's choosing. Such a
/// value is refused in one line before anything is written or started; addresses sshd takes,
/// IPv6 bare or in brackets, start it.
#[test]
fn ssh_takes_only_a_port_number_and_an_address_or_host_name_to_listen_on() {
    if !have_sshd("ssh mode's SSH_PORT and SSH_LISTEN") {
        return;
    }
    let l = Layout::new("ssh-settings");
    ssh_keygen(&l.path("key"));
    let public = std::fs::read_to_string(l.path("key.pub")).unwrap();
    let port = free_port();
    let ssh = |var: &str, value: &str| {
        let mut cmd = l.entrypoint("ssh");
        cmd.env("AUTHORIZED_KEYS", &public)
            .env("SSH_PORT", port.to_string())
            .env("SSH_LISTEN", "127.0.0.1")
            .env(var, value);
        cmd
    };
    let refused = [
        ("SSH_PORT", format!("{port}\nPermitRootLogin yes\nPasswordAuthentication yes")),
        ("SSH_PORT", format!("{port}\nPermitUserEnvironment yes")),
        ("SSH_PORT", format!("{port}\nAuthorizedKeysFile /tmp/anyone")),
        ("SSH_PORT", format!("{port} ")),
        ("SSH_PORT", "0".into()),
        ("SSH_PORT", "65536".into()),
        ("SSH_PORT", "-22".into()),
        ("SSH_PORT", "0x8ae".into()),
        ("SSH_PORT", format!("0{port}")),
        ("SSH_LISTEN", "127.0.0.1\nAllowTcpForwarding yes\nGatewayPorts yes".into()),
        ("SSH_LISTEN", "127.0.0.1 rdomain other".into()),
        ("SSH_LISTEN", format!("127.0.0.1:{port}")),
        ("SSH_LISTEN", format!("[::1]:{port}")),
        ("SSH_LISTEN", "fe80::1%eth0".into()),
        ("SSH_LISTEN", "[::1".into()),
        ("SSH_LISTEN", "#".into()),
    ];
    for (var, value) in &refused {
        let (code, output) = Running::finish(ssh(var, value), 30);
        assert_eq!(code, Some(1), "{var}={value:?}: {output}");
        assert_eq!(output.lines().count(), 1, "{var}={value:?}: {output}");
        let shown = value.replace('\n', "?");
        assert!(output.starts_with(&format!("gpulse-entrypoint: ssh: {var}='{shown}' is not ")), "{output}");
        assert!(output.trim_end().ends_with("; refusing"), "{output}");
        assert!(!l.path("state/ssh/sshd_config").exists(), "{var}={value:?}: a config was written");
        assert!(!l.path("state/ssh/authorized_keys").exists(), "{var}={value:?}: keys were written");
    }
    // SAFETY: geteuid and getuid cannot fail and touch no memory.
    if unsafe { libc::geteuid() } != 0 {
        assert!(std::env::var_os("GPULSE_REQUIRE_SSHD").is_none(), "the sshd checks run as root");
        skipped("ssh mode on the listen addresses it takes (not root)");
        return;
    }
    let mut accepted = vec![("localhost", "127.0.0.1")];
    if std::net::TcpListener::bind("[::1]:0").is_ok() {
        accepted.extend([("::1", "::1"), ("[::1]", "::1")]);
    } else {
        skipped("ssh mode on an IPv6 address (no IPv6 loopback here)");
    }
    for (listen, on) in accepted {
        let mut s = Running::start(ssh("SSH_LISTEN", listen));
        s.line(&format!("Server listening on {on} port {port}"), 30);
        s.stop();
    }
}

fn ssh_keygen(path: &Path) {
    let (code, _, err) =
        run(Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-C", "test-key", "-f"]).arg(path));
    assert_eq!(code, 0, "{err}");
}

/// `ssh` as a strict client: only this key, only the host key the entrypoint made, no prompts.
fn ssh(l: &Layout, port: u16, user: &str, extra: &[&str], command: &str) -> (i32, String, String) {
    let host_key = std::fs::read_to_string(l.path("hostkeys/ssh_host_ed25519_key.pub")).unwrap();
    std::fs::write(l.path("known_hosts"), format!("[127.0.0.1]:{port} {host_key}")).unwrap();
    let mut cmd = Command::new("ssh");
    cmd.args(["-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=20"])
        .arg("-o")
        .arg(format!("UserKnownHostsFile={}", l.path("known_hosts").display()))
        .args(["-o", "HostKeyAlgorithms=ssh-ed25519", "-p", &port.to_string()])
        .args(extra)
        .arg(format!("{user}@127.0.0.1"))
        .arg(command)
        .env("HOME", l.path("home"));
    run(&mut cmd)
}

/// Checks a started sshd: the effective config, a key login running gpulse, no password login.
fn check_sshd(l: &Layout, s: &mut Running, port: u16, user: &str) {
    s.line(&format!("Server listening on 127.0.0.1 port {port}"), 30);
    let (code, config, err) = run(Command::new(SSHD).arg("-T").arg("-f").arg(l.path("state/ssh/sshd_config")));
    assert_eq!(code, 0, "{err}");
    for want in [
        "passwordauthentication no",
        "kbdinteractiveauthentication no",
        "pubkeyauthentication yes",
        "authenticationmethods publickey",
        "permitemptypasswords no",
        "usepam no",
    ] {
        assert!(config.lines().any(|l| l == want), "sshd -T lacks '{want}':\n{config}");
    }
    // OpenSSH prints prohibit-password under its older name.
    assert!(
        config.lines().any(|l| l == "permitrootlogin without-password" || l == "permitrootlogin prohibit-password")
    );
    let key = l.path("key");
    let (code, out, err) =
        ssh(l, port, user, &["-i", key.to_str().unwrap(), "-o", "IdentitiesOnly=yes"], "gpulse --version");
    assert_eq!(code, 0, "{err}\n{}", s.output());
    assert_eq!(out.trim(), format!("gpulse {VERSION}"));
    // The server offers public keys and nothing else: a client that tries passwords is turned
    // away before it could send one.
    let (code, _, err) = ssh(
        l,
        port,
        user,
        &["-o", "PubkeyAuthentication=no", "-o", "PreferredAuthentications=password,keyboard-interactive"],
        "true",
    );
    assert_eq!(code, 255);
    assert!(err.contains(&format!("{user}@127.0.0.1: Permission denied (publickey).")), "{err}");
    // Another key is refused.
    ssh_keygen(&l.path("other"));
    let other = l.path("other");
    let (code, _, err) = ssh(l, port, user, &["-i", other.to_str().unwrap(), "-o", "IdentitiesOnly=yes"], "true");
    assert_eq!(code, 255, "{err}");
    let (code, _, err) = run(&mut l.entrypoint("health"));
    assert_eq!(code, 0, "{err}");
}

#[test]
fn ssh_refuses_to_start_without_a_key_in_one_clear_line() {
    if !have_sshd("ssh mode without a key") {
        return;
    }
    let l = Layout::new("ssh-refuses");
    let (code, out, err) = run(&mut l.entrypoint("ssh"));
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("gpulse-entrypoint: ssh: no public key: set AUTHORIZED_KEYS"), "{err}");
    assert!(!l.path("state/ssh/sshd_config").exists());
    let (code, _, err) = run(l.entrypoint("ssh").env("AUTHORIZED_KEYS", "not a key"));
    assert_eq!(code, 1);
    assert_eq!(err.trim(), "gpulse-entrypoint: ssh: no valid public key in AUTHORIZED_KEYS");
    let (code, _, err) = run(l.entrypoint("ssh").env("AUTHORIZED_KEYS_FILE", l.path("nothing-here")));
    assert_eq!(code, 1);
    assert!(err.contains("ssh: cannot read AUTHORIZED_KEYS_FILE="), "{err}");
}

/// As root (`docker run --user root`): sshd with privilege separation, the key from the
/// environment, the host keys kept across restarts.
#[test]
fn ssh_as_root_takes_the_key_from_the_environment_and_keeps_its_host_keys() {
    if !have_sshd("ssh mode as root") {
        return;
    }
    // SAFETY: geteuid and getuid cannot fail and touch no memory.
    if unsafe { libc::geteuid() } != 0 {
        assert!(std::env::var_os("GPULSE_REQUIRE_SSHD").is_none(), "the sshd checks run as root");
        skipped("ssh mode as root (not root)");
        return;
    }
    let l = Layout::new("ssh-root");
    // As in the image, where the state folder belongs to the unprivileged user.
    std::os::unix::fs::chown(l.path("state"), Some(1000), Some(1000)).unwrap();
    ssh_keygen(&l.path("key"));
    let public = std::fs::read_to_string(l.path("key.pub")).unwrap();
    let port = free_port();
    // The real sshd, through a wrapper that notes the environment the entrypoint gives it (sshd's
    // own /proc/PID/environ is overwritten by its process title).
    let (wrapper, seen) = (l.path("bin/sshd"), l.path("sshd-environment"));
    let script = format!("#!/bin/sh\n{{ echo \"=== sshd $*\"; env; }} >>'{}'\nexec {SSHD} \"$@\"\n", seen.display());
    std::fs::write(&wrapper, script).unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let start = || {
        let mut cmd = l.entrypoint("ssh");
        cmd.env("GPULSE_SSHD", &wrapper)
            .env("AUTHORIZED_KEYS", format!("# a comment\n{public}"))
            .env("SSH_PORT", port.to_string())
            .env("SSH_LISTEN", "127.0.0.1");
        Running::start(cmd)
    };
    let mut s = start();
    check_sshd(&l, &mut s, port, "root");
    // sshd has the keys from its file, not from its environment (`sshd -T`, then sshd itself).
    let environment = std::fs::read_to_string(&seen).unwrap();
    let calls: Vec<&str> = environment.lines().filter(|l| l.starts_with("=== sshd ")).collect();
    assert!(calls.len() == 2 && calls[0].contains(" -T ") && calls[1].contains(" -D "), "{calls:?}");
    let key = public.split_whitespace().nth(1).unwrap();
    assert!(!environment.contains("AUTHORIZED_KEYS") && !environment.contains(key), "{environment}");
    let output = s.output();
    assert!(output.contains("ssh: made a new ed25519 host key"), "{output}");
    let host_key = std::fs::read_to_string(l.path("hostkeys/ssh_host_ed25519_key.pub")).unwrap();
    let private = l.path("hostkeys/ssh_host_ed25519_key");
    assert_eq!(std::fs::metadata(&private).unwrap().permissions().mode() & 0o777, 0o600);
    s.stop();
    // A second start (the volume kept): the same host key, none made.
    let mut s = start();
    s.line(&format!("Server listening on 127.0.0.1 port {port}"), 30);
    assert!(!s.output().contains("made a new"), "{}", s.output());
    assert_eq!(std::fs::read_to_string(l.path("hostkeys/ssh_host_ed25519_key.pub")).unwrap(), host_key);
    let key = l.path("key");
    let (code, _, err) = ssh(&l, port, "root", &["-i", key.to_str().unwrap(), "-o", "IdentitiesOnly=yes"], "true");
    assert_eq!(code, 0, "{err}");
    s.stop();
}

/// As the image's default: an unprivileged user running sshd itself, the key from a mounted
/// file. The user exists only in a mount namespace of its own, over a copy of /etc/passwd, so
/// the system's is untouched.
#[test]
fn ssh_as_the_images_unprivileged_user_takes_a_mounted_key() {
    if !have_sshd("ssh mode as an unprivileged user") {
        return;
    }
    // SAFETY: geteuid and getuid cannot fail and touch no memory.
    let can = unsafe { libc::geteuid() } == 0
        && Command::new("unshare").args(["--mount", "true"]).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    if !can {
        assert!(
            std::env::var_os("GPULSE_REQUIRE_SSHD").is_none(),
            "the unprivileged sshd check needs root and unshare"
        );
        skipped("ssh mode as an unprivileged user (needs root and unshare --mount)");
        return;
    }
    let l = Layout::public("ssh-user");
    let (uid, user) = (4242, "gpulse");
    ssh_keygen(&l.path("key"));
    std::fs::copy(l.path("key.pub"), l.path("secrets/authorized_keys")).unwrap();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap()
        + &format!("{user}:x:{uid}:{uid}:gpulse:{}:/bin/sh\n", l.path("home").display());
    let group = std::fs::read_to_string("/etc/group").unwrap() + &format!("{user}:x:{uid}:\n");
    std::fs::write(l.path("passwd"), passwd).unwrap();
    std::fs::write(l.path("group"), group).unwrap();
    for sub in ["state", "hostkeys", "secrets", "home", "workspace", "secrets/authorized_keys"] {
        std::os::unix::fs::chown(l.path(sub), Some(uid), Some(uid)).unwrap();
    }
    let port = free_port();
    let ep = l.entrypoint("ssh");
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount --bind '{}' /etc/passwd && mount --bind '{}' /etc/group && exec setpriv --reuid={uid} --regid={uid} --clear-groups sh '{}' ssh",
            l.path("passwd").display(),
            l.path("group").display(),
            l.path("gpulse-entrypoint").display()
        ))
        .envs(ep.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env("SSH_PORT", port.to_string())
        .env("SSH_LISTEN", "127.0.0.1")
        .current_dir(l.path("workspace"));
    let mut s = Running::start(cmd);
    s.line(&format!("gpulse-entrypoint: ssh: sshd on port {port} for user {user}: public keys only"), 30);
    check_sshd(&l, &mut s, port, user);
    assert!(!std::fs::read_to_string("/etc/passwd").unwrap().contains(&format!("{user}:x:{uid}")));
    let (code, _, err) =
        ssh(&l, port, user, &["-i", l.path("key").to_str().unwrap(), "-o", "IdentitiesOnly=yes"], "id -u");
    assert_eq!((code, err.as_str()), (0, ""));
    s.stop();
}

// ---------------------------------------------------------------------------------------------
// The Dockerfile and the script, linted.

#[test]
fn the_entrypoint_passes_shellcheck_as_posix_sh() {
    if !have("shellcheck", &["--version"], "GPULSE_REQUIRE_SHELLCHECK", "shellcheck of the entrypoint") {
        return;
    }
    let (code, out, err) = run(Command::new("shellcheck").args(["--shell=sh", "--severity=style"]).arg(entrypoint()));
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn the_dockerfile_passes_hadolint() {
    if !have("hadolint", &["--version"], "GPULSE_REQUIRE_HADOLINT", "hadolint of the Dockerfile") {
        return;
    }
    let (code, out, err) = run(Command::new("hadolint")
        .args(["--no-color", "--failure-threshold", "info"])
        .arg(root().join("docker/Dockerfile")));
    assert_eq!(code, 0, "{out}{err}");
}

fn dockerfile() -> String {
    std::fs::read_to_string(root().join("docker/Dockerfile")).unwrap()
}

/// The default of a build argument.
fn arg_default(text: &str, name: &str) -> String {
    let prefix = format!("ARG {name}=");
    text.lines().find_map(|l| l.strip_prefix(&prefix)).unwrap_or_else(|| panic!("no ARG {name}")).to_owned()
}

#[test]
fn the_dockerfile_pins_its_bases_runs_unprivileged_and_keeps_no_secret() {
    let text = dockerfile();
    let sha = |s: &str| s.len() == 71 && s.starts_with("sha256:") && s[7..].bytes().all(|b| b.is_ascii_hexdigit());
    // Official PyTorch CUDA runtime image, by tag and digest; the versions are build arguments.
    let from: Vec<&str> = text.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(from.len(), 2, "{from:?}");
    assert_eq!(
        from[1],
        "FROM pytorch/pytorch:${PYTORCH_VERSION}-cuda${CUDA_VERSION}-cudnn${CUDNN_VERSION}-runtime${BASE_DIGEST}"
    );
    assert!(sha(arg_default(&text, "BASE_DIGEST").strip_prefix('@').unwrap()));
    for (arg, pattern) in [("PYTORCH_VERSION", "2."), ("CUDA_VERSION", "12."), ("CUDNN_VERSION", "9")] {
        assert!(arg_default(&text, arg).starts_with(pattern), "{arg}");
    }
    let builder = arg_default(&text, "BUILDER");
    let (image, digest) = builder.split_once('@').unwrap();
    assert!(image.starts_with("ghcr.io/pyo3/maturin:v1.") && sha(digest), "{builder}");
    assert!(arg_default(&text, "JUPYTERLAB_VERSION").split('.').count() == 3);
    // Runs as the unprivileged user it makes, numerically (Kubernetes' runAsNonRoot checks that).
    let users: Vec<&str> = text.lines().filter(|l| l.starts_with("USER ")).collect();
    assert_eq!(users, ["USER ${USER_UID}:${USER_UID}"]);
    assert_ne!(arg_default(&text, "USER_UID"), "0");
    assert!(text.contains("useradd --create-home --uid \"${USER_UID}\""));
    // No baked-in host keys; a health check; the entrypoint, Jupyter by default.
    assert!(text.contains("rm -f /etc/ssh/ssh_host_*"));
    assert!(text.contains("HEALTHCHECK ") && text.contains("CMD [\"gpulse-entrypoint\", \"health\"]"));
    assert!(text.contains("ENTRYPOINT [\"gpulse-entrypoint\"]\nCMD [\"jupyter\"]"));
    assert!(text.contains("openssh-server") && text.contains("jupyterlab==${JUPYTERLAB_VERSION}"));
    // No secret in ENV or ARG: tokens and keys come at run time.
    let mut in_env = false;
    for line in text.lines() {
        let instruction = line.starts_with("ENV ") || line.starts_with("ARG ");
        if instruction || in_env {
            let upper = line.to_uppercase();
            for word in ["TOKEN", "PASSWORD", "SECRET", "AUTHORIZED_KEYS", "PRIVATE"] {
                assert!(!upper.contains(word), "a secret in the image: {line}");
            }
        }
        in_env = (instruction || in_env) && line.ends_with('\\');
    }
}

/// What the wheel stage copies is in the build context that .dockerignore leaves, and is all that
/// cargo needs: the manifests parse there, and every file that the sources include is there.
#[test]
fn the_build_context_holds_what_the_build_needs() {
    let text = dockerfile();
    let ignore = std::fs::read_to_string(root().join(".dockerignore")).unwrap();
    let kept: Vec<&str> = ignore.lines().filter_map(|l| l.strip_prefix('!')).collect();
    assert_eq!(ignore.lines().find(|l| !l.starts_with('#') && !l.is_empty()), Some("*"), "an allow list");
    let copied: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("COPY ") && !l.contains("--from="))
        .flat_map(|l| {
            let words: Vec<&str> = l.split_whitespace().filter(|w| !w.starts_with("--")).collect();
            words[1..words.len() - 1].to_vec()
        })
        .collect();
    for path in &copied {
        assert!(kept.contains(path), "COPY {path}, which .dockerignore leaves out");
    }
    let context = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("container-context-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&context);
    std::fs::create_dir_all(&context).unwrap();
    for path in copied.iter().filter(|p| !p.starts_with("docker/")) {
        let (code, _, err) = run(Command::new("cp").arg("-r").arg(root().join(path)).arg(context.join(path)));
        assert_eq!(code, 0, "{err}");
    }
    let _ = std::fs::remove_dir_all(context.join("crates/fake-nvml/target"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let (code, _, err) = run(Command::new(cargo)
        .args(["metadata", "--offline", "--locked", "--no-deps", "--format-version", "1"])
        .current_dir(&context)
        .env("CARGO_TARGET_DIR", context.join("target")));
    assert_eq!(code, 0, "cargo in the build context: {err}");
    // Cargo reads a [[bench]]'s file whenever it builds the package; `metadata` does not look.
    let manifest = std::fs::read_to_string(context.join("Cargo.toml")).unwrap();
    let mut lines = manifest.lines();
    while let Some(line) = lines.next() {
        if line == "[[bench]]" {
            let name = lines.next().and_then(|l| l.strip_prefix("name = \"")).unwrap().trim_end_matches('"');
            assert!(context.join(format!("benches/{name}.rs")).exists(), "bench {name} is not in the build context");
        }
    }
    // include_str!/include_bytes! outside tests resolve inside the context.
    let mut missing = Vec::new();
    let mut stack = vec![context.join("src"), context.join("crates")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() && path.file_name().is_some_and(|n| n != "tests" && n != "target") {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let source = std::fs::read_to_string(&path).unwrap();
                for (i, _) in source.match_indices("include_") {
                    let rest = &source[i..];
                    let Some(open) = rest.find("!(\"").filter(|&o| o <= "include_bytes".len()) else { continue };
                    let rel = rest[open + 3..].split('"').next().unwrap();
                    if !path.parent().unwrap().join(rel).exists() {
                        missing.push(format!("{}: {rel}", path.display()));
                    }
                }
            }
        }
    }
    assert!(missing.is_empty(), "included files outside the build context: {missing:?}");
    let _ = std::fs::remove_dir_all(&context);
}
