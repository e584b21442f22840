//! `gpulse run` samples the job's Python main thread into the recording: the stack at the exact
//! line, what the kernel said of the thread; `--no-stacks` turns it off, and a bad
//! `--stacks-hz` is one line.

use std::path::Path;

use gpulse_model::ProcessRole;

use super::support::{fresh_dir, gpulse, run};

fn gpulse_run(dir: &Path, extra: &[&str], cmd: &[&str]) -> (i32, String, String) {
    let mut c = gpulse(None);
    c.current_dir(dir).args(["run", "--status", "off", "--no-report"]).args(extra).arg("--").args(cmd);
    run(&mut c)
}

/// Sleeps 50 ms at a time for about 4 s, then exits.
const NAP: &str = "import time\ndef nap():\n    time.sleep(0.05)  # SLEEP\nfor _ in range(80):\n    nap()\n";

#[test]
fn run_records_where_the_main_thread_sleeps() {
    let dir = fresh_dir("stacks", "run");
    std::fs::write(dir.join("nap.py"), NAP).unwrap();
    let (code, _, err) = gpulse_run(&dir, &["-o", "s.db"], &["python3", "nap.py"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("cannot read the Python stacks"), "{err}");
    let rec = gpulse_record::read(&dir.join("s.db")).unwrap();
    let stacks = &rec.stacks;
    assert_eq!(stacks.processes.len(), 1, "{:?}", stacks.processes);
    let p = &stacks.processes[0];
    assert_eq!(p.role, ProcessRole::Main);
    assert!(p.command.contains("nap.py"), "{p:?}");
    let samples: Vec<_> = stacks.samples.iter().filter(|s| s.pid == p.pid).collect();
    // About 3 s sampled (the first second finds the process), at up to 50 Hz: fewer where each
    // sample costs more, since the sampler keeps within 1 % of a core, but never under 1 Hz.
    assert!(samples.len() >= 4, "{} samples", samples.len());
    // A sample taken while the interpreter starts or ends has no Python frame; the rest are in
    // the loop, nearly all of them asleep at its one line that sleeps.
    let framed: Vec<_> = samples.iter().filter(|s| stacks.frames_of(s.stack).next_back().is_some()).collect();
    assert!(
        framed.len() >= 3 && framed.len() + 3 >= samples.len(),
        "{} of {} samples in Python",
        framed.len(),
        samples.len()
    );
    let line = NAP.lines().position(|l| l.contains("SLEEP")).unwrap() as u32 + 1;
    let at_sleep = framed
        .iter()
        .filter(|s| {
            let top = stacks.frames_of(s.stack).next_back();
            top.is_some_and(|top| top.file.ends_with("nap.py") && top.line == line && top.function == "nap")
        })
        .count();
    assert!(at_sleep * 10 >= framed.len() * 9, "{at_sleep} of {} at nap.py:{line}", framed.len());
    let asleep = framed.iter().filter(|s| s.kernel.state == 'S' && s.kernel.syscall == Some(230)).count();
    assert!(asleep * 10 >= framed.len() * 9, "{asleep} of {} in clock_nanosleep", framed.len());
    let rate = stacks.rate_hz.iter().find(|r| r.0 == p.pid).map(|r| r.1);
    assert!(rate.is_some_and(|r| (1.0..=50.0).contains(&r)), "{rate:?}");
    assert!(stacks.refusals.is_empty(), "{:?}", stacks.refusals);
}

#[test]
fn no_stacks_samples_nothing_and_a_bad_rate_is_one_line() {
    let dir = fresh_dir("stacks", "off");
    std::fs::write(dir.join("nap.py"), NAP.replace("range(80)", "range(30)")).unwrap();
    let (code, _, err) = gpulse_run(&dir, &["-o", "n.db", "--no-stacks"], &["python3", "nap.py"]);
    assert_eq!(code, 0, "{err}");
    let rec = gpulse_record::read(&dir.join("n.db")).unwrap();
    assert!(rec.stacks.samples.is_empty() && rec.stacks.processes.is_empty(), "{:?}", rec.stacks.processes);
    for bad in ["0", "500", "often"] {
        let (code, _, err) = gpulse_run(&dir, &["-o", "bad.db", "--stacks-hz", bad], &["python3", "nap.py"]);
        assert_eq!(code, 2, "{bad}: {err}");
        assert!(err.contains("samples a second, from 1 to 200") && !err.contains("panicked"), "{err}");
        assert!(!dir.join("bad.db").exists(), "nothing ran, nothing recorded");
    }
}
