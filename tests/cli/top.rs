//! `gpulse top` in a real terminal: tmux runs it in a detached session of fixed size, the test
//! sends keys and reads the screen back with `capture-pane`.

use std::process::Command;
use std::time::{Duration, Instant};

use super::support::*;

/// A tmux server of the test's own (its own socket), with one session running `shell`.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// `None` when tmux is missing (CI installs it and sets GPULSE_REQUIRE_TMUX).
    fn start(name: &str, width: u16, height: u16, shell: &str) -> Option<Self> {
        if Command::new("tmux").arg("-V").output().is_err() {
            assert!(std::env::var_os("GPULSE_REQUIRE_TMUX").is_none(), "tmux is required");
            skipped("gpulse top in a real terminal (no tmux; CI installs it)");
            return None;
        }
        let socket = format!("gpulse-test-{}-{name}", std::process::id());
        let t = Self { socket };
        let ok = t
            .cmd()
            .args(["new-session", "-d", "-s", "top", "-x", &width.to_string(), "-y", &height.to_string()])
            .arg(shell)
            .status()
            .unwrap();
        assert!(ok.success(), "tmux starts");
        Some(t)
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket]).env("TERM", "xterm-256color").env_remove("TMUX");
        c
    }

    fn screen(&self) -> String {
        let out = self.cmd().args(["capture-pane", "-p", "-t", "top"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        self.cmd().args(["send-keys", "-t", "top"]).args(keys).status().unwrap();
    }

    fn display(&self, format: &str) -> String {
        let out = self.cmd().args(["display", "-p", "-t", "top", format]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// The screen once `pred` holds of it, within 20 s.
    fn wait_for(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if pred(&s) {
                return s;
            }
            assert!(start.elapsed() < Duration::from_secs(20), "waited for {what}:\n{s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").status();
    }
}

/// The shell line: `top`, then its exit status and whether the terminal is back in cooked mode.
fn shell(env: &str, args: &str) -> String {
    let bin = gpulse_bin();
    format!("env {env} {} top {args}; echo EXIT=$?; stty -a | grep -o -- '-*icanon'; sleep 60", bin.display())
}

#[test]
fn top_replays_a_recording_in_a_terminal_sorts_and_quits_cleanly() {
    let fixture = fixture("h200-gpulse-run/dl_bound.db");
    let rec = gpulse_record::read(&fixture).unwrap();
    let last = rec.snapshots.last().unwrap();
    let g = &last.gpus[0];
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let memory = format!("{:.1}/{:.1} GiB", gib(g.memory_used_bytes.unwrap()), gib(g.memory_total_bytes.unwrap()));
    let pid = g.processes[0].pid.to_string();
    let args = format!("--replay {} --speed 50", fixture.display());
    let Some(t) = Tmux::start("replay", 120, 40, &shell("TZ=UTC", &args)) else { return };
    let s = t.wait_for("the end of the replay and the finding", |s| s.contains("the end") && s.contains("input_bound"));
    assert!(s.contains("0 cuda:0 H200"), "{s}");
    assert!(s.contains(&memory), "the recording's memory {memory}:\n{s}");
    let row = s.lines().find(|l| l.contains(&format!(" {pid} "))).unwrap_or_else(|| panic!("PID {pid}:\n{s}"));
    assert!(row.contains("tree") && row.contains("python3"), "{row}");
    assert!(s.contains("steps/s") && s.contains("data wait"), "{s}");
    assert!(s.contains("GPU▼"), "sorted by GPU at first:\n{s}");
    t.keys(&["o", "p"]);
    t.wait_for("sorting by PID", |s| s.contains("PID▼"));
    t.keys(&["o", "M"]);
    t.wait_for("the reversed GPU-MEM sort", |s| s.contains("GPU-MEM▲"));
    t.keys(&["K"]);
    t.wait_for("signals refused in a replay", |s| s.contains("signals are off"));
    t.keys(&["?"]);
    t.wait_for("the help", |s| s.contains("gpulse top: keys"));
    t.keys(&["Escape"]);
    // A smaller window is laid out again: at 80 columns the why panel takes its short title. The
    // replay has ended: the panel shows the whole recording's analysis, and says so.
    t.wait_for("the long title at 120 columns, the help closed", |s| {
        s.contains("why it is slow (whole recording, as gpulse diagnose reads it)")
    });
    t.cmd().args(["resize-window", "-t", "top", "-x", "80", "-y", "24"]).status().unwrap();
    t.wait_for("the 80×24 layout", |s| s.contains(" why it is slow (whole recording) ─") && s.lines().count() <= 24);
    t.keys(&["q"]);
    // The shell prints the status, then the terminal's mode: wait for both.
    let after = t.wait_for("the exit", |s| {
        s.contains("EXIT=") && s.lines().any(|l| l.trim() == "icanon" || l.trim() == "-icanon")
    });
    assert!(after.contains("EXIT=0"), "{after}");
    assert!(after.lines().any(|l| l.trim() == "icanon"), "the terminal is back in cooked mode:\n{after}");
    assert!(!after.contains("input_bound"), "the alternate screen is gone:\n{after}");
    assert_eq!(t.display("#{alternate_on}"), "0");
}

/// Live against the stand-in library: what the scenario says is on the screen; SIGTERM ends it
/// and the terminal is restored.
#[test]
fn top_shows_the_stand_ins_values_live_and_a_stop_signal_restores_the_terminal() {
    let mut child = KillOnDrop::spawn(Command::new("sleep").arg("60"));
    let json = std::fs::read_to_string(fixture("scenarios/h200_idle.json"))
        .unwrap()
        .replace(r#""util_gpu_pct": 0,"#, r#""util_gpu_pct": 97,"#)
        .replace(r#""memory_used_bytes": 0,"#, r#""memory_used_bytes": 21474836480,"#)
        .replace(r#""sm": 0.0"#, r#""sm": 12.5"#)
        .replace(
            r#""pci_bus_id": "00000000:00:06.0","#,
            &format!(r#""pci_bus_id": "00000000:00:06.0", "processes": [{{"pid": {}, "used_memory_mib": 20480, "sm_util_pct": 42, "mem_util_pct": 9}}],"#, child.id()),
        );
    let sc = scenario_file("top-live", &json);
    let env = format!("GPULSE_NVML_LIB={} GPULSE_FAKE_NVML_SCENARIO={}", fake_lib().display(), sc.display());
    let Some(t) = Tmux::start("live", 120, 40, &shell(&env, "--interval 200ms")) else {
        let _ = (child.kill(), child.wait());
        return;
    };
    let s = t.wait_for("the stand-in's GPU and process", |s| {
        s.contains(&format!(" {} ", child.id())) && s.contains("SM 12.5%")
    });
    assert!(s.contains("UTL  97%"), "{s}");
    assert!(s.contains("20.0/140.4 GiB"), "{s}");
    assert!(s.contains("PWR 119/700 W") && s.contains("33°C"), "{s}");
    assert!(s.contains("throttle: idle"), "{s}");
    // PCIe as the stand-in's GPM gives it (4.39 and 3.86 MiB/s, NVML's unit) and as plain
    // `gpulse` writes the same reading.
    assert!(s.contains("PCIe ↑4.4 MiB/s ↓3.9 MiB/s"), "{s}");
    let (code, status, err) = run(gpulse(None).env("GPULSE_FAKE_NVML_SCENARIO", &sc));
    assert_eq!(code, 0, "{err}");
    assert!(status.contains("tx 4.4 MiB/s  rx 3.9 MiB/s"), "{status}");
    let row = s.lines().find(|l| l.contains(&format!(" {} ", child.id()))).unwrap();
    assert!(row.contains("20.0GiB") && row.contains("sleep 60"), "{row}");
    // GPU, PID, USER, GPU-MEM, then NVML's per-process SM and memory-bandwidth shares.
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[4..6], ["42", "9"], "%SM and %GMBW: {row}");
    // The process's own reading from /proc: its user and a CPU share after the second poll.
    assert!(row.contains("root") || !row.contains(" — "), "{row}");
    // The signal goes to gpulse itself, the shell's child.
    let shell_pid = t.display("#{pane_pid}");
    let out = Command::new("pgrep").args(["-P", &shell_pid]).output().unwrap();
    let gpulse: Vec<String> = String::from_utf8_lossy(&out.stdout).split_whitespace().map(str::to_owned).collect();
    assert_eq!(gpulse.len(), 1, "one child of the shell: {gpulse:?}");
    Command::new("kill").args(["-TERM", &gpulse[0]]).status().unwrap();
    // The shell prints the status, then the terminal's mode: wait for both.
    let after = t.wait_for("the exit", |s| {
        s.contains("EXIT=") && s.lines().any(|l| l.trim() == "icanon" || l.trim() == "-icanon")
    });
    let _ = (child.kill(), child.wait());
    assert!(after.contains("EXIT=0"), "{after}");
    assert!(after.lines().any(|l| l.trim() == "icanon"), "cooked mode again:\n{after}");
    assert_eq!(t.display("#{alternate_on}"), "0");
}

#[test]
fn top_without_a_terminal_or_a_driver_says_so_in_one_line() {
    let fixture = fixture("h200-gpulse-run/dl_bound.db");
    let (code, out, err) = run(gpulse(None).arg("top").arg("--replay").arg(&fixture));
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("needs a terminal"), "{err}");
    let (code, _, err) = run(gpulse(None).env("GPULSE_NVML_LIB", "/nonexistent/libnvidia-ml.so.1").arg("top"));
    assert_eq!(code, 9, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("gpulse top --replay FILE") && err.contains("gpulse demo"), "{err}");
    let (code, _, err) = run(gpulse(None).args(["top", "--replay", "/nonexistent.db"]));
    assert_eq!((code, err.lines().count()), (1, 1), "{err}");
    let (code, _, err) = run(gpulse(None).args(["top", "--speed", "2"]));
    assert_eq!(code, 2, "--speed needs --replay: {err}");
}

/// A terminal that goes away (its tmux server killed, as a closed window or a dropped SSH
/// session) ends `top`: it neither lingers nor spins on the dead terminal.
#[test]
fn top_exits_when_its_terminal_goes_away() {
    let fixture = fixture("h200-gpulse-run/dl_bound.db");
    let line = format!("{} top --replay {} --speed 1; sleep 60", gpulse_bin().display(), fixture.display());
    let Some(t) = Tmux::start("hangup", 100, 30, &line) else { return };
    t.wait_for("the first frame", |s| s.contains("cuda:0"));
    let shell_pid = t.display("#{pane_pid}");
    let out = Command::new("pgrep").args(["-P", &shell_pid]).output().unwrap();
    let pid = String::from_utf8_lossy(&out.stdout).split_whitespace().next().map(str::to_owned).expect("top runs");
    let _ = t.cmd().arg("kill-server").status();
    let start = Instant::now();
    // Gone, or a zombie no one has reaped yet: either way it no longer runs.
    let running = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
            .unwrap_or(false)
    };
    while running() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    if running() {
        let _ = Command::new("kill").args(["-KILL", &pid]).status();
        panic!("gpulse top ({pid}) still ran 10 s after its terminal went away");
    }
}

/// `top` finds a `gpulse run` job of the machine by itself and shows the loop's own pace and
/// data wait beside the GPUs; the line goes when the job ends.
#[test]
fn top_finds_a_gpulse_run_job_and_shows_its_pace() {
    let dir = fresh_dir("top", "jobs");
    let jobs = dir.join("jobs");
    let scenario = fixture("scenarios/h200_idle.json");
    let env = format!(
        "GPULSE_JOBS_DIR={} GPULSE_NVML_LIB={} GPULSE_FAKE_NVML_SCENARIO={}",
        jobs.display(),
        fake_lib().display(),
        scenario.display()
    );
    let Some(t) = Tmux::start("jobs", 160, 40, &shell(&env, "--interval 500ms")) else { return };
    t.wait_for("the first frame", |s| s.contains("cuda:0") || s.contains("H200"));
    // 50 ms a step, 10 of it waiting for data: 20 steps/s at most, a 20 % wait at least.
    let script = "import gpulse, time\nfor i in range(240):\n    with gpulse.phase('data'):\n        time.sleep(0.01)\n    time.sleep(0.04)\n    gpulse.step()\n";
    let mut job = KillOnDrop::spawn(
        gpulse(Some("scenarios/h200_idle.json"))
            .args(["run", "--status", "off", "--no-report", "-o", "r.db", "--", "python3", "-c", script])
            .env("PYTHONPATH", root().join("python"))
            .env("GPULSE_JOBS_DIR", &jobs)
            // Killed at the end of the test: its marks socket goes in the test's folder.
            .env("TMPDIR", &dir)
            .current_dir(&dir)
            .stderr(std::process::Stdio::null()),
    );
    let s =
        t.wait_for("the job's line with its pace", |s| s.lines().any(|l| l.contains("job ") && l.contains("steps/s")));
    let line = s.lines().find(|l| l.contains("job ") && l.contains("steps/s")).unwrap().to_owned();
    let n = numbers(line.split("job ").nth(1).unwrap());
    let (pid, rate, wait) = (n[0] as u32, n[1], n[2]);
    assert!((14.0..=20.5).contains(&rate), "steps/s {rate}: {line}");
    assert!((15.0..=35.0).contains(&wait), "data wait {wait} %: {line}");
    assert!(line.contains("python3 -c"), "the job's command: {line}");
    let out = Command::new("pgrep").args(["-P", &job.id().to_string()]).output().unwrap();
    // gpulse's children: the job, and the keeper of its stderr.
    let children = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(children.lines().any(|c| c == pid.to_string()), "the job's PID {pid} is gpulse's child: {children}");
    assert!(job.wait().unwrap().success());
    t.wait_for("the line gone with the job", |s| !s.contains(&format!("job {pid}")));
    assert_eq!(std::fs::read_dir(&jobs).unwrap().count(), 0, "the job's file is removed at its end");
    t.keys(&["q"]);
}

/// A replay of a run made under `--instrument`, before its first step: the loop has no pace yet,
/// and the view does not ask for the `--instrument` it was run with.
#[test]
fn top_replaying_an_instrumented_run_before_its_first_step_says_no_steps_yet() {
    let fixture = fixture("h200-gpulse-run/dl_bound.db");
    let args = format!("--replay {} --speed 0.01", fixture.display());
    let Some(t) = Tmux::start("no-steps-yet", 120, 40, &shell("TZ=UTC", &args)) else { return };
    let s = t.wait_for("the first poll", |s| s.contains("why it is slow"));
    assert!(s.contains("loop: no steps yet"), "{s}");
    assert!(!s.contains("--instrument"), "{s}");
}

/// A terminal smaller than the layout gets one line saying the size it needs, and the view once
/// it is large enough.
#[test]
fn top_in_a_terminal_too_small_says_the_size_it_needs() {
    let fixture = fixture("h200-gpulse-run/dl_bound.db");
    let args = format!("--replay {} --speed 1", fixture.display());
    let Some(t) = Tmux::start("too-small", 40, 10, &shell("TZ=UTC", &args)) else { return };
    let s = t.wait_for("the notice", |s| s.contains("gpulse top needs"));
    let first = s.lines().next().unwrap_or_default();
    assert_eq!(first.trim_end(), "gpulse top needs 60×13; this is 40×10", "{s}");
    assert_eq!(s.lines().filter(|l| !l.trim().is_empty()).count(), 1, "one line:\n{s}");
    t.cmd().args(["resize-window", "-t", "top", "-x", "80", "-y", "24"]).status().unwrap();
    t.wait_for("the view at 80×24", |s| s.contains(" why it is slow (") && !s.contains("gpulse top needs"));
}

/// A terminal that says it is 0×0 (a pty nobody sized) is refused in one line, not drawn blank.
#[test]
fn top_on_a_terminal_of_no_size_says_so_in_one_line() {
    use std::os::fd::{FromRawFd, OwnedFd};
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes the two descriptors it opens; the names and sizes may be null.
    let rc =
        unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
    assert_eq!(rc, 0, "a pty");
    // SAFETY: both descriptors were just opened and are owned here alone.
    let (_master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let fixture = fixture("h200-gpulse-run/dl_bound.db");
    let child = KillOnDrop::spawn(
        gpulse(None)
            .args(["top", "--replay"])
            .arg(&fixture)
            .stdin(slave.try_clone().unwrap())
            .stdout(slave)
            .stderr(std::process::Stdio::piped()),
    );
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(
        err,
        "gpulse: gpulse top cannot draw: this terminal says it is 0×0; give it a size (`stty rows 24 cols 80`)\n"
    );
}
