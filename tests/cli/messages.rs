//! What gpulse says to a user: when it starts, when a flag is wrong, and what it writes.

use std::process::Command;

use super::support::*;

#[test]
fn record_says_where_it_writes_how_often_and_how_it_stops() {
    let dir = fresh_dir("messages", "record_start");
    let out = dir.join("r.db");
    let (code, _, err) = run(gpulse(Some("scenarios/h200_idle.json"))
        .args(["record", "--interval", "250ms", "--duration", "600ms", "-o"])
        .arg(&out));
    assert_eq!(code, 0, "{err}");
    let first = err.lines().next().unwrap_or_default();
    let gpus = run(gpulse(Some("scenarios/h200_idle.json")).args(["--query-gpu=index", "--format=csv,noheader"])).1;
    let n = gpus.lines().count();
    assert!(n >= 1, "{gpus}");
    let noun = if n == 1 { "GPU" } else { "GPUs" };
    assert_eq!(
        first,
        format!(
            "gpulse: recording {n} {noun}, their processes' Python main threads and the host every 250 ms to {}, for 600 ms; Ctrl-C stops it sooner",
            out.display()
        )
    );
    // Following a process: it stops with that process.
    let mut sleeper = KillOnDrop::spawn(Command::new("sleep").arg("30"));
    let out = dir.join("p.db");
    let mut rec = gpulse(Some("scenarios/h200_idle.json"));
    rec.args(["record", "--pid", &sleeper.id().to_string(), "-o"]).arg(&out).stderr(std::process::Stdio::piped());
    let mut child = KillOnDrop::spawn(&mut rec);
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stderr.as_mut().unwrap()), &mut line).unwrap();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert!(child.wait().unwrap().success());
    assert!(
        line.ends_with(&format!(
            "'s tree every 1 s to {}, until process {} exits; Ctrl-C stops it sooner\n",
            out.display(),
            sleeper.id()
        )),
        "{line}"
    );
}

#[test]
fn a_negative_or_zero_duration_is_refused_with_what_a_duration_looks_like() {
    for (args, value) in [
        (&["watch", "-i"][..], "-1"),
        (&["record", "-o", "/nonexistent/x.db", "--interval"][..], "-2s"),
        (&["record", "-o", "/nonexistent/x.db", "--duration"][..], "0"),
        (&["top", "--interval"][..], "-100ms"),
    ] {
        let (code, out, err) = run(gpulse(Some("scenarios/h200_idle.json")).args(args).arg(value));
        assert_eq!(code, 2, "{args:?} {value}: {out}{err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(first.starts_with("error: invalid value '"), "{args:?} {value}: {err}");
        assert!(first.ends_with(&format!("{value:?} is not a positive duration (try 1s, 100ms, 2m)")), "{err}");
    }
}

#[test]
fn report_with_only_png_writes_only_the_png() {
    let dir = fresh_dir("messages", "png_only");
    let input = fixture("h200-diagnosis/bf16_matmul.db");
    let (code, _, err) = run(gpulse(None).current_dir(&dir).args(["report", "--png", "out.png"]).arg(&input));
    assert_eq!(code, 0, "{err}");
    let mut written: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    written.sort();
    assert_eq!(written, ["out.png"], "{err}");
    assert_eq!(err.trim(), "wrote out.png");
    // No output named at all: the HTML report, as before.
    let (code, _, err) = run(gpulse(None).current_dir(&dir).arg("report").arg(&input));
    assert_eq!(code, 0, "{err}");
    assert!(dir.join("report.html").is_file());
    // Both named: both written.
    let (code, _, err) =
        run(gpulse(None).current_dir(&dir).args(["report", "-o", "r.html", "--png", "r.png"]).arg(&input));
    assert_eq!(code, 0, "{err}");
    assert!(dir.join("r.html").is_file() && dir.join("r.png").is_file(), "{err}");
    // One file under two names is refused before anything is written, whether it exists or not.
    std::os::unix::fs::symlink("r.html", dir.join("link.html")).unwrap();
    let before = std::fs::read(dir.join("r.html")).unwrap();
    for (png, html) in [("./r.html", "r.html"), ("link.html", "r.html"), ("./new.html", "new.html")] {
        let (code, _, err) = run(gpulse(None).current_dir(&dir).args(["report", "--png", png, "-o", html]).arg(&input));
        assert_eq!(code, 1, "{png} {html}: {err}");
        assert_eq!(err.trim(), "gpulse: --png and -o name the same file; give the PNG its own");
    }
    assert_eq!(std::fs::read(dir.join("r.html")).unwrap(), before);
    assert!(!dir.join("new.html").exists());
}

#[test]
fn a_process_that_execs_is_recorded_under_the_command_it_runs_now() {
    // A shim as pyenv's (`bash …/shims/python`): a script that execs the real program after a
    // moment. Run through `sh`, so that no test execs a file just written (ETXTBSY beside a fork).
    let dir = fresh_dir("messages", "exec");
    let shim = dir.join("shim");
    std::fs::write(&shim, "#!/bin/sh\nsleep 1.5\nexec sleep 2.5\n").unwrap();
    let out = dir.join("r.db");
    let (code, _, err) = run(gpulse(None)
        .args(["run", "--interval", "200ms", "--status", "off", "-o"])
        .arg(&out)
        .arg("--")
        .arg("sh")
        .arg(&shim));
    assert_eq!(code, 0, "{err}");
    let root = "SELECT value FROM meta WHERE key = 'root_pid'";
    let script = "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1])\n\
        pid = int(c.execute(sys.argv[2]).fetchone()[0])\n\
        print(c.execute('SELECT cmdline FROM processes WHERE pid = ?', (pid,)).fetchone()[0])";
    let (code, line, err) = run(Command::new("python3").args(["-c", script]).arg(&out).arg(root));
    assert_eq!(code, 0, "{err}");
    assert_eq!(line.trim(), "sleep 2.5");
}
