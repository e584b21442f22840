//! Nothing a user has is lost: `-o` never replaces an input, a recording, a symlink, a FIFO or a
//! device; two jobs never fight over a name; a full disk or a closed terminal still ends cleanly;
//! and no number typed on the command line makes gpulse panic.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::support::KillOnDrop;
use super::support::{fixture, fresh_dir, gpulse, run};

fn tmp(name: &str) -> super::support::Temp {
    fresh_dir("safety", name)
}

/// A real H200 recording, copied to `dir`.
fn recording(dir: &Path) -> PathBuf {
    let p = dir.join("s.db");
    std::fs::copy(fixture("h200-gpulse-run/dl_bound.db"), &p).unwrap();
    p
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn an_output_that_is_an_input_or_a_recording_is_refused() {
    let dir = tmp("same");
    let db = recording(&dir);
    let before = std::fs::read(&db).unwrap();
    for verb in ["export", "report"] {
        let (code, out, err) = run(gpulse(None).current_dir(&dir).args([verb, "s.db", "-o", "s.db"]));
        assert_eq!(code, 1, "{verb}: {out}{err}");
        assert!(err.contains("is the input"), "{verb}: {err}");
        // The same file through another name: a hard link and a symlink.
        std::fs::hard_link(&db, dir.join("hard.db")).unwrap();
        std::os::unix::fs::symlink("s.db", dir.join("soft")).unwrap();
        for alias in ["hard.db", "soft"] {
            let (code, _, err) = run(gpulse(None).current_dir(&dir).args([verb, "s.db", "-o", alias]));
            assert_eq!(code, 1, "{verb} -o {alias}: {err}");
        }
        std::fs::remove_file(dir.join("hard.db")).unwrap();
        std::fs::remove_file(dir.join("soft")).unwrap();
        // Another recording is never replaced either.
        std::fs::copy(&db, dir.join("other.db")).unwrap();
        let (code, _, err) = run(gpulse(None).current_dir(&dir).args([verb, "s.db", "-o", "other.db"]));
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("other.db is a recording"), "{err}");
        assert_eq!(std::fs::read(dir.join("other.db")).unwrap(), before);
    }
    assert_eq!(std::fs::read(&db).unwrap(), before, "the input is untouched");
    assert_eq!(names(&dir), ["other.db", "s.db"], "no temporary file left behind");
    // Any other existing file is replaced whole, as --help says.
    std::fs::write(dir.join("old.csv"), "old").unwrap();
    let (code, _, err) = run(gpulse(None).current_dir(&dir).args(["export", "s.db", "-o", "old.csv"]));
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read_to_string(dir.join("old.csv")).unwrap().starts_with("timestamp, index"));
    let (_, help, _) = run(gpulse(None).args(["export", "--help"]));
    assert!(help.contains("an existing") && help.contains("never is"), "{help}");
}

#[test]
fn symlinks_fifos_devices_and_dash_are_written_in_place() {
    let dir = tmp("special");
    recording(&dir);
    let (_, expected, _) = run(gpulse(None).current_dir(&dir).args(["export", "s.db"]));
    assert!(expected.lines().count() > 10);
    // A symlink: its target gets the output, the link stays a link.
    std::fs::write(dir.join("target.csv"), "old").unwrap();
    std::os::unix::fs::symlink("target.csv", dir.join("link.csv")).unwrap();
    let (code, _, err) = run(gpulse(None).current_dir(&dir).args(["export", "s.db", "-o", "link.csv"]));
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::symlink_metadata(dir.join("link.csv")).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read_to_string(dir.join("target.csv")).unwrap(), expected);
    // A FIFO: its reader gets every byte, and it is still a FIFO afterwards.
    let fifo = dir.join("pipe");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let (code, _, err) = run(gpulse(None).current_dir(&dir).args(["export", "s.db", "-o", "pipe"]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(reader.join().unwrap(), expected);
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&std::fs::symlink_metadata(&fifo).unwrap().file_type()));
    // /dev/stdout and `-`: standard output, appended after what a shell's `>>` file held.
    for name in ["/dev/stdout", "-"] {
        let log = dir.join("app.log");
        std::fs::write(&log, "kept\n").unwrap();
        let append = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        let status =
            gpulse(None).current_dir(&dir).args(["export", "s.db", "-o", name]).stdout(append).status().unwrap();
        assert!(status.success());
        assert_eq!(std::fs::read_to_string(&log).unwrap(), format!("kept\n{expected}"), "-o {name}");
    }
    // A link of the user's to /dev/stdout, as the shell's `>>` file sees it.
    std::os::unix::fs::symlink("/dev/stdout", dir.join("out")).unwrap();
    let log = dir.join("app.log");
    std::fs::write(&log, "kept\n".repeat(200)).unwrap();
    let append = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    let status = gpulse(None).current_dir(&dir).args(["export", "s.db", "-o", "out"]).stdout(append).status().unwrap();
    assert!(status.success());
    assert_eq!(std::fs::read_to_string(&log).unwrap(), format!("{}{expected}", "kept\n".repeat(200)));
    assert!(std::fs::symlink_metadata("/dev/stdout").unwrap().file_type().is_symlink(), "/dev/stdout untouched");
    // A report to standard output is the HTML itself.
    let (code, html, _) = run(gpulse(None).current_dir(&dir).args(["report", "s.db", "-o", "-"]));
    assert_eq!(code, 0);
    assert!(html.starts_with("<!doctype html>"), "{}", &html[..40.min(html.len())]);
    // A directory, or a block device, is refused in one line.
    let (code, _, err) = run(gpulse(None).current_dir(&dir).args(["export", "s.db", "-o", "."]));
    assert_eq!((code, err.lines().count()), (1, 1), "{err}");
}

#[test]
fn jobs_started_at_once_each_get_a_recording() {
    let dir = tmp("race");
    // The names the next seconds would take are taken already: each job must find a free one.
    std::fs::create_dir_all(dir.join("gpulse-runs")).unwrap();
    let now_us = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as i64;
    let mut taken = Vec::new();
    for s in 0..4 {
        let stamp = gpulse_base::clock::format_local(now_us + s * 1_000_000);
        let digits: String = stamp.chars().filter(char::is_ascii_digit).collect();
        let p = dir.join("gpulse-runs").join(format!("{}-{}-train.db", &digits[..8], &digits[8..14]));
        std::fs::write(&p, "a user's file").unwrap();
        taken.push(p);
    }
    let jobs: Vec<_> = (0..4)
        .map(|i| {
            let mut cmd = gpulse(None);
            // The names above were made in this process's time zone; gpulse names in its own.
            match std::env::var_os("TZ") {
                Some(tz) => cmd.env("TZ", tz),
                None => cmd.env_remove("TZ"),
            };
            cmd.current_dir(&dir)
                .args(["run", "--status", "off", "--no-report", "--", "sh", "-c", &format!("echo ran {i}"), "train.py"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, job) in jobs.into_iter().enumerate() {
        let o = job.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        assert_eq!(String::from_utf8_lossy(&o.stdout), format!("ran {i}\n"), "{err}");
        assert!(!err.contains("locked") && !err.contains("not recording"), "{err}");
    }
    for p in &taken {
        assert_eq!(std::fs::read_to_string(p).unwrap(), "a user's file");
    }
    let recordings: Vec<String> = names(&dir.join("gpulse-runs"))
        .into_iter()
        .filter(|n| gpulse_record::read(&dir.join("gpulse-runs").join(n)).is_ok())
        .collect();
    assert_eq!(recordings.len(), 4, "{recordings:?}");
    // Bookkeeping that cannot be done never keeps the job from running.
    let blocked = tmp("blocked");
    std::fs::write(blocked.join("gpulse-runs"), "a file where the folder would go").unwrap();
    let (code, out, err) =
        run(gpulse(None).current_dir(&blocked).args(["run", "--status", "off", "--", "sh", "-c", "echo ran; exit 3"]));
    assert_eq!((code, out.as_str()), (3, "ran\n"), "{err}");
    assert!(err.contains("not recording") && err.contains("the job runs anyway"), "{err}");
}

#[test]
fn a_full_disk_still_gives_the_summary_of_what_was_written() {
    let dir = tmp("full");
    let mut cmd = gpulse(Some("scenarios/h200_idle.json"));
    cmd.current_dir(&dir).args(["run", "--status", "off", "--no-report", "-o", "r.db", "--interval", "20ms", "--"]);
    // The job ends only once gpulse has said the recording stopped: however slowly the file grows.
    cmd.args(["sh", "-c", "while [ ! -e go ]; do sleep 0.05; done; echo done"]);
    // SAFETY: between fork and exec only async-signal-safe calls: a file-size limit the
    // recording soon reaches (as a full disk would stop it), and SIGXFSZ ignored so that the
    // write fails instead of killing gpulse.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: 224 * 1024, rlim_max: 224 * 1024 };
            libc::setrlimit(libc::RLIMIT_FSIZE, &limit);
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let mut child = KillOnDrop::spawn(cmd.stdout(Stdio::piped()).stderr(Stdio::piped()));
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut err = String::new();
    while !err.contains("stopped recording to r.db") {
        let mut line = String::new();
        assert_ne!(std::io::BufRead::read_line(&mut stderr, &mut line).unwrap(), 0, "gpulse ended first: {err}");
        err += &line;
    }
    std::fs::write(dir.join("go"), "").unwrap();
    std::io::Read::read_to_string(&mut stderr, &mut err).unwrap();
    let o = child.wait_with_output().unwrap();
    let (code, out) = (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into_owned());
    assert_eq!((code, out.as_str()), (0, "done\n"), "{err}");
    assert!(err.contains("the job goes on"), "{err}");
    assert!(
        err.contains("── gpulse ──") && err.contains("the recording lost "),
        "the summary, and what was lost: {err}"
    );
    assert!(err.contains("recording: r.db"), "{err}");
    assert!(!err.contains("Error code"), "SQLite's words once: {err}");
    let rec = gpulse_record::read(&dir.join("r.db")).unwrap();
    assert!(!rec.snapshots.is_empty());
}

/// Waits for a recording to hold two samples; the bound only keeps a broken recorder from hanging
/// the suite.
fn wait_for_samples(db: &Path) {
    for _ in 0..2400 {
        if gpulse_record::read(db).is_ok_and(|r| r.snapshots.len() >= 2) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{} got no samples", db.display());
}

#[test]
fn a_closed_terminal_ends_record_and_attach_cleanly_and_reaches_runs_job() {
    let dir = tmp("hup");
    let mut job = KillOnDrop::spawn(Command::new("sleep").arg("60"));
    let job_pid = job.id().to_string();
    let cases: [(&str, Vec<&str>); 2] = [
        ("rec.db", vec!["record", "--interval", "100ms", "-o", "rec.db"]),
        ("att.db", vec!["attach", &job_pid, "--status", "off", "--no-report", "--interval", "100ms", "-o", "att.db"]),
    ];
    for (name, args) in cases {
        let child = KillOnDrop::spawn(
            gpulse(Some("scenarios/h200_idle.json")).current_dir(&dir).args(&args).stderr(Stdio::piped()),
        );
        wait_for_samples(&dir.join(name));
        // SAFETY: signalling a child this test started and has not reaped.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGHUP) };
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{name}: {err}");
        let rec = gpulse_record::read(&dir.join(name)).unwrap();
        let stop = rec.events.iter().find(|e| e.kind.as_str() == "stop").expect("closed cleanly");
        assert_eq!(stop.payload["reason"], "stopped by SIGHUP", "{name}");
        for side in ["-wal", "-shm"] {
            assert!(!dir.join(format!("{name}{side}")).exists(), "{name}{side} left behind");
        }
    }
    let _ = (job.kill(), job.wait());
    // Under `run`, the job gets the hangup and decides.
    let script = "trap 'echo got HUP; exit 5' HUP; echo ready; while :; do sleep 0.05; done";
    let mut child = KillOnDrop::spawn(
        gpulse(None)
            .current_dir(&dir)
            .args(["run", "--status", "off", "--no-report", "-o", "run.db", "--", "sh", "-c", script])
            .stdout(Stdio::piped()),
    );
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line, "ready\n");
    // SAFETY: kill(2) on a process (or group) this test started.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGHUP) };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert_eq!(rest, "got HUP\n");
    assert_eq!(child.wait().unwrap().code(), Some(5));
}

#[test]
fn odd_durations_get_one_clear_error_never_a_panic() {
    let cases: &[&[&str]] = &[
        &["watch", "-i", "1e20"],
        &["watch", "-i", "inf"],
        &["watch", "-i", "nan"],
        &["--gpm-interval=1e20", "status"],
        &["--gpm-interval=-1", "status"],
        &["status", "--wait", "1e300"],
        &["record", "-o", "x.db", "--interval=1e20"],
        &["record", "-o", "x.db", "--duration=99999999999999999999s"],
        &["record", "-o", "x.db", "--interval=NaN"],
        &["record", "-o", "x.db", "--duration=0s"],
        &["run", "--interval=1e20", "--", "true"],
        &["run", "--status-every=1e20", "--", "true"],
        &["run", "--status-every=-5s", "--", "true"],
        &["demo", "--speed", "1e-300"],
        &["demo", "--speed", "inf"],
    ];
    let dir = tmp("durations");
    for args in cases {
        let (code, _, err) = run(gpulse(Some("scenarios/h200_idle.json")).current_dir(&dir).args(*args));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(first.starts_with("error: invalid value"), "{args:?}: {err}");
    }
    assert!(names(&dir).is_empty(), "nothing recorded, nothing run: {:?}", names(&dir));
}

#[test]
fn a_zero_loop_is_refused_as_nvidia_smi_refuses_it() {
    // nvidia-smi's own answer on the H200, captured beside the tests.
    let capture = std::fs::read_to_string(fixture("h200-smi-reference/loop_values.txt")).unwrap();
    for flag in ["-l", "-lms"] {
        let block = capture.split(&format!("=== {flag} 0\n")).nth(1).unwrap();
        let mut lines = block.lines();
        assert_eq!(lines.next(), Some("rc=2"));
        assert_eq!(lines.next(), Some("lines=2"));
        let expected = format!("{}\n\n", lines.next().unwrap());
        let (code, out, err) =
            run(gpulse(Some("scenarios/h200_idle.json")).args(["--query-gpu=timestamp", "--format=csv", flag, "0"]));
        assert_eq!((code, out.as_str(), err.as_str()), (2, expected.as_str(), ""), "{flag} 0");
    }
}

#[test]
fn a_duration_ends_the_recording_whatever_the_interval() {
    let dir = tmp("duration");
    for interval in ["10s", "1h"] {
        let db = dir.join(format!("{interval}.db"));
        let (code, _, err) = run(gpulse(Some("scenarios/h200_idle.json"))
            .args(["record", "--interval", interval, "--duration", "1s", "-o"])
            .arg(&db));
        assert_eq!(code, 0, "{err}");
        // The first sample, and a last one when the second is over: the samples span it.
        assert!(err.contains("recorded 2 samples of 1 GPU") && err.contains("duration reached"), "{err}");
        let rec = gpulse_record::read(&db).unwrap();
        assert_eq!(rec.snapshots.len(), 2);
        // By the recording's own clock, the last sample closed the second (to the millisecond
        // the recording keeps), and it stopped before the next poll was due.
        let started_us: i64 = rec.meta["started_at_us"].parse().unwrap();
        assert!(rec.snapshots[1].timestamp_us - started_us >= 1_000_000 - 1_000, "{interval}");
        let stop_ms = rec.events.iter().find(|e| e.kind.as_str() == "stop").expect("stopped").t_ms;
        assert!(stop_ms * 1000 - started_us < 10_000_000, "{interval}: stopped {} ms in", stop_ms - started_us / 1000);
    }
}

#[test]
fn errors_name_what_is_wrong_once_and_never_a_temporary_file() {
    let dir = tmp("errors");
    let bytes = std::fs::read(fixture("h200-gpulse-run/dl_bound.db")).unwrap();
    let one_line = |args: &[&str], env: Option<(&str, &Path)>| {
        let mut cmd = gpulse(None);
        cmd.current_dir(&dir).args(args);
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        let (code, _, err) = run(&mut cmd);
        assert_ne!(code, 0, "{args:?}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(!err.contains("Error code") && !err.contains(".tmp"), "{args:?}: {err}");
        err
    };
    // Corrupt pages: SQLite's complaint, said once, as damage.
    let mut corrupt = bytes.clone();
    corrupt[8192..].fill(0xA5);
    std::fs::write(dir.join("corrupt.db"), &corrupt).unwrap();
    let err = one_line(&["diagnose", "corrupt.db"], None);
    assert!(err.contains("corrupt.db is damaged"), "{err}");
    // Cut in half.
    std::fs::write(dir.join("half.db"), &bytes[..bytes.len() / 2]).unwrap();
    let err = one_line(&["export", "half.db"], None);
    assert!(err.contains("half.db is damaged: it was cut short"), "{err}");
    // A recording copied while it was written, without its -wal: said so, and reading it leaves
    // no side files of its own.
    let live = dir.join("live.db");
    let mut rec = KillOnDrop::spawn(
        gpulse(Some("scenarios/h200_idle.json")).args(["record", "--interval", "100ms", "-o"]).arg(&live),
    );
    wait_for_samples(&live);
    std::fs::copy(&live, dir.join("copy.db")).unwrap();
    rec.kill().unwrap();
    rec.wait().unwrap();
    let err = one_line(&["diagnose", "copy.db"], None);
    assert!(err.contains("-wal file is missing"), "{err}");
    assert!(!dir.join("copy.db-wal").exists() && !dir.join("copy.db-shm").exists());
    // The import of a log on the fly into a temporary directory that cannot be written.
    std::fs::copy(fixture("h200-2026-11-29/rich_leak.csv"), dir.join("log.csv")).unwrap();
    let err = one_line(&["diagnose", "log.csv"], Some(("TMPDIR", &dir.join("no-such-dir"))));
    assert!(err.contains("temporary recording in"), "{err}");
    // --nvml-lib: the path, and the loader's reason.
    let err = one_line(&["status"], Some(("GPULSE_NVML_LIB", &dir.join("libnope.so"))));
    assert!(err.contains("libnope.so") && err.contains("cannot open shared object file"), "{err}");
    std::fs::write(dir.join("notelf.so"), "text").unwrap();
    let err = one_line(&["--nvml-lib", "notelf.so", "status"], None);
    assert!(err.contains("notelf.so") && err.to_lowercase().contains("elf"), "{err}");
}

#[test]
fn absurd_times_in_a_trace_or_a_recording_are_errors_never_a_hang_or_a_panic() {
    let dir = tmp("absurd");
    let gpm = std::fs::read_to_string(fixture("h200-2026-11-29/gpm_tiny.csv")).unwrap();
    let mut lines = gpm.lines();
    let header = lines.next().unwrap();
    let row = lines.next().unwrap().split_once(',').unwrap().1;
    for (name, t) in [("nan", "NaN"), ("inf", "inf"), ("huge", "1e308")] {
        std::fs::write(dir.join(format!("{name}.csv")), format!("{header}\n1,{row}\n{t},{row}\n")).unwrap();
        let (code, _, err) = run(gpulse(None).current_dir(&dir).args(["diagnose", &format!("{name}.csv")]));
        assert_eq!(code, 1, "{name}: {err}");
        assert!(err.contains("is not a time") && !err.contains("panicked"), "{name}: {err}");
    }
    // A recording whose times were damaged to near i64's end.
    let db = dir.join("t.db");
    std::fs::copy(fixture("h200-gpulse-run/dl_bound.db"), &db).unwrap();
    let sql = "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); \
               c.execute('UPDATE host_samples SET t_ms = 9000000000000000000 WHERE rowid = 1'); \
               c.execute('UPDATE events SET t_ms = -9000000000000000000 WHERE rowid = 1'); c.commit()";
    assert!(Command::new("python3").args(["-c", sql]).arg(&db).status().unwrap().success());
    for verb in ["diagnose", "report"] {
        let args: &[&str] = if verb == "report" { &["report", "t.db", "-o", "-"] } else { &["diagnose", "t.db"] };
        let (code, _, err) = run(gpulse(None).current_dir(&dir).args(args));
        assert!(code == 0 || code == 1, "{verb}: {err}");
        assert!(!err.contains("panicked"), "{verb}: {err}");
    }
}

/// A site comes from the job's own files: a script named with an escape sequence is printed by
/// `diagnose` as text, never as a sequence the terminal would run.
#[test]
fn a_site_from_the_jobs_files_never_reaches_the_terminal_as_a_sequence() {
    let dir = super::support::fresh_dir("safety", "escape-site");
    let script = dir.join("loop\u{1b}[2J.py");
    std::fs::write(&script, "import time\nt = time.time()\nwhile time.time() - t < 3:\n    time.sleep(0.02)\n")
        .unwrap();
    std::fs::write(dir.join("none.json"), r#"{"init_error": 9, "devices": []}"#).unwrap();
    let rec = dir.join("r.db");
    let mut cmd = super::support::gpulse(None);
    cmd.env("GPULSE_FAKE_NVML_SCENARIO", dir.join("none.json"));
    cmd.args(["run", "--status", "off", "--no-report", "--interval", "200ms", "-o"]).arg(&rec).arg("--");
    cmd.arg("python3").arg(&script);
    let (code, _, err) = super::support::run(&mut cmd);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains('\u{1b}'), "run's summary: {err}");
    let (code, out, err) = super::support::run(super::support::gpulse(None).arg("diagnose").arg(&rec));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("loop\\x1b[2J.py:4"), "the sleep's site, escaped: {out}");
    assert!(!out.contains('\u{1b}'), "{out}");
}
