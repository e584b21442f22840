//! Commands as a new user types them from the help: each does what it says, when it says.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::serve::{SCENARIO, Serving, TOKEN, get};
use super::support::{KillOnDrop, fresh_dir, gpulse, numbers, run, skipped, wait_until};

const IDLE: &str = "scenarios/h200_idle.json";

/// `watch -n 2` ends with its second line, not an interval after it.
#[test]
fn watch_ends_at_its_last_sample() {
    let start = Instant::now();
    let (code, out, err) = run(gpulse(Some(IDLE)).args(["watch", "-i", "2s", "-n", "2"]));
    let took = start.elapsed();
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().filter(|l| l.contains("143771")).count(), 2, "{out}");
    // One interval between the two samples; waiting another after the last took 4 s and more.
    assert!(took >= Duration::from_secs(2), "{took:?}");
    assert!(took < Duration::from_millis(3500), "waited after the last sample: {took:?}");
}

/// `watch -n 0` would print nothing at all: it is refused, saying what a count is.
#[test]
fn watch_refuses_a_count_of_none() {
    for n in ["0", "two"] {
        let (code, out, err) = run(gpulse(Some(IDLE)).args(["watch", "-n", n]));
        assert_eq!((code, out.as_str()), (2, ""), "{n}: {err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(first.ends_with(&format!("{n:?} is not a number of samples (1 or more)")), "{n}: {err}");
    }
}

/// A server started with `args` (its `--listen` or `--serve` among them) in `dir`, and the
/// address it says. Its temporary files are in `dir` too: killed, it cannot remove them. Its
/// process group goes with it: a `run`'s job and the keeper of its stderr end too.
fn served(args: &[&str], dir: &std::path::Path) -> Serving {
    Serving::from_child(KillOnDrop::group(
        gpulse(Some(SCENARIO))
            .current_dir(dir)
            .env("TMPDIR", dir)
            .args(args)
            .env("GPULSE_TOKEN", TOKEN)
            .stderr(Stdio::piped()),
    ))
}

/// `--listen` and `--serve` take HOST:PORT as Prometheus exporters do: a name that resolves, and
/// an IPv6 address in brackets.
#[test]
fn listen_and_serve_take_a_host_name_and_bracketed_ipv6() {
    let dir = fresh_dir("as-typed", "listen");
    let s = served(&["serve", "--listen", "localhost:0", "--interval", "200ms"], &dir);
    assert!(s.addr.starts_with("127.0.0.1:"), "localhost listens on IPv4: {}", s.addr);
    wait_until(30, "a sample served", || get(&s.addr, "/ready", &[]).0 == 200);
    drop(s);
    let job = ["--status", "off", "--no-report", "--interval", "200ms"];
    let mut sleeper = KillOnDrop::spawn(Command::new("sleep").arg("30"));
    let pid = sleeper.id().to_string();
    for (verb, rest) in [("run", vec!["-o", "r.db", "--", "sleep", "30"]), ("attach", vec!["-o", "a.db", &pid])] {
        let s = served(&[&[verb, "--serve", "localhost:0"][..], &job, &rest].concat(), &dir);
        assert!(s.addr.starts_with("127.0.0.1:"), "{verb}: {}", s.addr);
        wait_until(30, "the job served", || get(&s.addr, "/ready", &[]).0 == 200);
    }
    let _ = sleeper.kill();
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        return skipped("--listen [::1]:0 (no IPv6 loopback here)");
    }
    let s = served(&["serve", "--listen", "[::1]:0", "--interval", "200ms"], &dir);
    assert!(s.addr.starts_with("[::1]:"), "{}", s.addr);
    wait_until(30, "a sample served over IPv6", || get(&s.addr, "/ready", &[]).0 == 200);
}

/// A listen address that cannot be used is refused in words that say why.
#[test]
fn a_listen_address_without_a_port_or_brackets_is_refused_saying_why() {
    for (value, why) in [
        ("localhost", "\"localhost\" has no port (try localhost:9400, 0.0.0.0:9400 or [::1]:9400)"),
        ("::1:9400", "an IPv6 address takes brackets: [::1]:9400"),
        ("no-such-host.invalid:9400", "cannot resolve \"no-such-host.invalid\""),
    ] {
        let (code, _, err) = run(gpulse(Some(SCENARIO)).args(["serve", "--listen", value]));
        assert_eq!(code, 2, "{value}: {err}");
        assert!(err.lines().next().unwrap_or_default().contains(why), "{value}: {err}");
    }
}

/// `record --pid` stops as the process ends, not at the poll an interval later, and keeps a
/// closing poll from that moment.
#[test]
fn record_pid_stops_when_the_process_ends_not_at_the_next_poll() {
    let dir = fresh_dir("as-typed", "record-pid");
    let db = dir.join("r.db");
    let job = KillOnDrop::spawn(Command::new("sleep").arg("1"));
    let start = Instant::now();
    let (code, _, err) = run(gpulse(Some(IDLE))
        .args(["record", "--interval", "20s", "--pid"])
        .arg(job.id().to_string())
        .arg("-o")
        .arg(&db));
    let took = start.elapsed();
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(&format!("; process {} exited", job.id())), "{err}");
    assert!(took < Duration::from_secs(10), "waited for the next poll: {took:?}");
    let rec = gpulse_record::read(&db).unwrap();
    assert_eq!(rec.snapshots.len(), 2, "the first poll and the closing one");
    let span = (rec.snapshots[1].timestamp_us - rec.snapshots[0].timestamp_us) as f64 / 1e6;
    assert!((0.8..5.0).contains(&span), "the closing poll is when the process ended: {span} s");
}

/// The recording as a reader sees it while gpulse writes it: its samples so far.
fn samples(db: &std::path::Path) -> usize {
    gpulse_record::read(db).map_or(0, |r| r.snapshots.len())
}

/// Ctrl-C on `record` keeps a closing poll from the moment it stopped, and says Ctrl-C.
#[test]
fn ctrl_c_on_record_keeps_the_closing_poll_and_says_ctrl_c() {
    let dir = fresh_dir("as-typed", "record-int");
    let db = dir.join("r.db");
    let mut rec = KillOnDrop::spawn(
        gpulse(Some(IDLE)).args(["record", "--interval", "30s", "-o"]).arg(&db).stderr(Stdio::piped()),
    );
    // The first line comes before the first poll, which is taken at once however soon the stop.
    let mut stderr = std::io::BufReader::new(rec.stderr.take().unwrap());
    let mut err = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut err).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let asked = gpulse_base::clock::now_us();
    // SAFETY: kill(2) on the child this test started and has not reaped.
    unsafe { libc::kill(rec.id() as libc::pid_t, libc::SIGINT) };
    std::io::Read::read_to_string(&mut stderr, &mut err).unwrap();
    assert!(rec.wait().unwrap().success(), "{err}");
    assert!(err.trim_end().ends_with("; stopped by Ctrl-C (SIGINT)"), "{err}");
    let r = gpulse_record::read(&db).unwrap();
    assert_eq!(r.snapshots.len(), 2, "the first poll and the closing one");
    let times: Vec<i64> = r.snapshots.iter().map(|s| s.timestamp_us - asked).collect();
    assert!(times[1] >= 0, "the closing poll is from the stop: µs after it {times:?}, {err}");
    let stop = r.events.iter().find(|e| e.kind.as_str() == "stop").unwrap();
    assert_eq!(stop.payload["reason"], "stopped by Ctrl-C (SIGINT)");
}

/// `attach` and `run` say Ctrl-C as `record` does.
#[test]
fn attach_and_run_say_ctrl_c_as_record_does() {
    let dir = fresh_dir("as-typed", "ctrl-c");
    let job = KillOnDrop::spawn(Command::new("sleep").arg("600"));
    let pid = job.id().to_string();
    let mut attach = KillOnDrop::spawn(
        gpulse(Some(IDLE))
            .current_dir(&dir)
            .args(["attach", &pid, "--status", "off", "--no-report", "--interval", "100ms", "-o", "a.db"])
            .stderr(Stdio::piped()),
    );
    // A loaded machine is slow to start a process; one that ended is reported with its words.
    wait_until(180, "attach's first sample", || {
        if attach.try_wait().unwrap().is_some() && samples(&dir.join("a.db")) == 0 {
            let o = std::mem::replace(&mut attach, KillOnDrop::spawn(&mut Command::new("true")));
            let err = o.wait_with_output().unwrap().stderr;
            panic!("attach ended before its first sample: {}", String::from_utf8_lossy(&err));
        }
        samples(&dir.join("a.db")) >= 1
    });
    // SAFETY: kill(2) on the child this test started and has not reaped.
    unsafe { libc::kill(attach.id() as libc::pid_t, libc::SIGINT) };
    let o = attach.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("gpulse: stopped by Ctrl-C (SIGINT); process {pid} goes on\n")), "{err}");
    let stop = gpulse_record::read(&dir.join("a.db")).unwrap().events.into_iter().find(|e| e.kind.as_str() == "stop");
    assert_eq!(stop.unwrap().payload["reason"], "stopped by Ctrl-C (SIGINT)");
    // `run`: the job gets the Ctrl-C, and its end is said in the same words.
    let script = "echo ready; exec sleep 30";
    let mut run = KillOnDrop::spawn(
        gpulse(Some(IDLE))
            .current_dir(&dir)
            .args(["run", "--status", "off", "--no-report", "-o", "r.db", "--", "sh", "-c", script])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let mut ready = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(run.stdout.take().unwrap()), &mut ready).unwrap();
    // SAFETY: kill(2) on the child this test started and has not reaped.
    unsafe { libc::kill(run.id() as libc::pid_t, libc::SIGINT) };
    let o = run.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.contains("command killed by Ctrl-C (SIGINT), exit status 130\n"), "{err}");
    assert!(err.trim_end().ends_with("gpulse: the command was killed by Ctrl-C (SIGINT)"), "{err}");
    assert!(!err.contains("signal 2"), "{err}");
}

/// `record`'s closing line gives the seconds its samples span, as `diagnose` of the file does.
#[test]
fn records_closing_seconds_are_the_ones_diagnose_accounts_for() {
    let dir = fresh_dir("as-typed", "record-span");
    let db = dir.join("r.db");
    let (code, _, err) =
        run(gpulse(Some(IDLE)).args(["record", "--interval", "100ms", "--duration", "2s", "-o"]).arg(&db));
    assert_eq!(code, 0, "{err}");
    let line = err.lines().find(|l| l.starts_with("recorded ")).unwrap();
    let recorded = numbers(line.split(" over ").nth(1).unwrap())[0];
    let (code, out, err) = run(gpulse(None).arg("diagnose").arg(&db));
    assert_eq!(code, 0, "{err}");
    let went = out.lines().find(|l| l.starts_with("where the ")).unwrap();
    assert_eq!(recorded, numbers(went)[0], "{line} / {went}");
    let r = gpulse_record::read(&db).unwrap();
    let span = (r.snapshots.last().unwrap().timestamp_us - r.snapshots[0].timestamp_us) as f64 / 1e6;
    assert_eq!(format!("{recorded:.1}"), format!("{span:.1}"), "{line}");
}

/// `png` is a default feature: a plain `cargo build` or `cargo install` draws `report --png`, as
/// the wheel does.
#[test]
fn a_default_build_draws_the_png() {
    let toml = std::fs::read_to_string(super::support::root().join("Cargo.toml")).unwrap();
    let features = toml.split("\n[features]\n").nth(1).unwrap().split("\n[").next().unwrap();
    let default = features.lines().find(|l| l.starts_with("default = ")).expect("default features");
    assert!(default.contains("\"png\""), "{default}");
    let dir = fresh_dir("as-typed", "png");
    let input = super::support::fixture("h200-diagnosis/bf16_matmul.db");
    let (code, _, err) = run(gpulse(None).current_dir(&dir).args(["report", "--png", "r.png"]).arg(&input));
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read(dir.join("r.png")).unwrap().starts_with(b"\x89PNG\r\n\x1a\n"));
}
