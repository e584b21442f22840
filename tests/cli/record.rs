//! `gpulse record`, `import` and `export`, against the stand-in NVML library and real logs.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::support::*;

fn tmp(name: &str) -> super::support::Temp {
    fresh_dir("rec", name)
}

/// Rows of a SQL query through Python's standard `sqlite3`, as a user would read the file.
fn python_sql(db: &Path, sql: &str) -> String {
    let script = format!("import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(c.execute({sql:?}).fetchall())");
    let o = Command::new("python3").arg("-c").arg(script).arg(db).output().expect("python3 runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap().trim().to_owned()
}

/// A scenario whose GPU processes are a PID in the watched tree, a live foreign PID, and a PID
/// that does not exist.
fn tree_scenario(tree_pid: u32, foreign_pid: u32) -> super::support::Temp {
    let json = format!(
        r#"{{"devices":[{{"name":"NVIDIA H200","uuid":"GPU-aaaaaaaa-0000-0000-0000-000000000000","pci_bus_id":"00000000:19:00.0",
        "base":{{"util_gpu_pct":9,"util_mem_pct":2,"memory_total_mib":143771,"memory_used_mib":28522,"memory_reserved_mib":615,
        "temperature_gpu_c":40,"power_w":151.5,"power_limit_w":700,"clock_sm_mhz":1980,"clock_mem_mhz":3201,"pstate":0,
        "clocks_event_reasons":0,"gpm_supported":true,"gpm":{{"sm":6.0,"occupancy":3.0,"any_tensor":1.0,"dram":3.0}}}},
        "processes":[{{"pid":{tree_pid},"used_memory_mib":7418,"sm_util_pct":6,"mem_util_pct":2}},{{"pid":{foreign_pid},"used_memory_mib":21090}},
                     {{"pid":4000000,"used_memory_mib":512}}]}}]}}"#
    );
    scenario_file(&format!("tree{tree_pid}"), &json)
}

#[test]
fn record_follows_the_tree_and_flags_foreign_processes() {
    let dir = tmp("tree");
    let db = dir.join("run.db");
    // The "training": a shell with two children, like a script and its DataLoader workers.
    // In a group of its own, so that ending it ends its children too.
    let job = KillOnDrop::group(Command::new("sh").args(["-c", "sleep 30 & sleep 30 & wait"]));
    let foreign = KillOnDrop::spawn(Command::new("sleep").arg("30"));
    let children = || {
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", job.id()))
            .unwrap_or_default()
            .split_whitespace()
            .count()
    };
    wait_until(60, "both children forked", || children() == 2);
    let sc = tree_scenario(job.id(), foreign.id());
    let (code, _, err) = run(gpulse(None)
        .env("GPULSE_FAKE_NVML_SCENARIO", &sc)
        .args(["record", "--interval", "100ms", "--duration", "1s", "--pid"])
        .arg(job.id().to_string())
        .arg("-o")
        .arg(&db));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("recorded") && err.contains("duration reached"), "{err}");
    let classes = python_sql(&db, "select pid, class from gpu_processes group by pid order by class");
    assert_eq!(classes, format!("[({}, 'foreign'), (4000000, 'gone'), ({}, 'tree')]", foreign.id(), job.id()));
    // The tree holds the shell and both children.
    let tree = python_sql(&db, "select count(distinct pid) from tree_samples");
    assert_eq!(tree, "[(3,)]");
    let n: usize = python_sql(&db, "select count(*) from gpu_samples")
        .trim_matches(|c| c == '[' || c == ']' || c == '(' || c == ')' || c == ',')
        .parse()
        .unwrap();
    // Polls keep a fixed cadence from the start, so 1 s at 100 ms holds the 10 due before its
    // end and one at it; a loaded machine may take fewer, never more.
    assert!((1..=11).contains(&n), "at most one sample per 100 ms of 1 s, and one at its end: {n}");
    let within = python_sql(
        &db,
        "select min(t_ms) * 1000 >= (select cast(value as integer) from meta where key = 'started_at_us') - 1000 and max(t_ms) <= (select t_ms from events where kind = 'stop') from gpu_samples",
    );
    assert_eq!(within, "[(1,)]", "samples between the recording's start and its stop");
    assert_eq!(python_sql(&db, "select count(*) > 0 from host_samples where cpu_busy_pm is not null"), "[(1,)]");
    assert_eq!(python_sql(&db, "select value from meta where key = 'root_pid'"), format!("[('{}',)]", job.id()));
    // The recording reads back through gpulse, too.
    let (code, out, err) = run(gpulse(None)
        .args(["export", "--query-gpu=index,utilization.gpu,gpm.sm_active,memory.used", "--format=csv,noheader"])
        .arg(&db));
    assert_eq!(code, 0, "{err}");
    // The first sample precedes the first GPM window; the rest carry it.
    assert_eq!(out.lines().next(), Some("0, 9 %, [N/A], 28522 MiB"));
    assert_eq!(out.lines().last(), Some("0, 9 %, 6.0 %, 28522 MiB"));
}

/// `--duration 2s` at 1 s: samples at 0, 1 and 2 s, so the ledger spans the 2 s asked for and
/// recorded, not the 1 s between the first two samples, and no reading from before it is kept.
#[test]
fn a_recordings_duration_is_the_span_its_samples_and_ledger_cover() {
    let dir = tmp("duration");
    let db = dir.join("d.db");
    let (code, _, err) = run(gpulse(Some("scenarios/h200_idle.json"))
        .args(["record", "--interval", "1s", "--duration", "2s", "-o"])
        .arg(&db));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("recorded 3 samples of 1 GPU over 2."), "{err}");
    let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(&db));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let wall_s = v["ledger"]["wall_s"].as_f64().unwrap();
    let started_us: f64 = python_sql(&db, "select value from meta where key = 'started_at_us'")
        .trim_matches(|c| "[](),'".contains(c))
        .parse()
        .unwrap();
    let stop_ms: f64 = python_sql(&db, "select t_ms from events where kind = 'stop'")
        .trim_matches(|c| "[](),".contains(c))
        .parse()
        .unwrap();
    let recorded_s = stop_ms / 1e3 - started_us / 1e6;
    // From the start to the last sample, taken once the 2 s were over (to the millisecond the
    // recording keeps), and no later than the stop.
    assert!(wall_s >= 2.0 - 0.002 && wall_s <= recorded_s + 0.002, "ledger {wall_s} s of {recorded_s} s recorded");
    // The utilization buffer's readings are of the recorded span, all of it: the stand-in's
    // buffer, as NVML's, holds ten seconds from before the recording began, and about six
    // readings a second, which the closing poll reads up to the end though the buffer's period
    // (10 s) is not over.
    let hires = |cond: &str| -> u64 {
        let sql = format!("select count(*) from gpu_util_hires where {cond}");
        python_sql(&db, &sql).trim_matches(|c| "[](),".contains(c)).parse().unwrap()
    };
    assert!(hires("1") >= 8, "{} readings over 2 s", hires("1"));
    // (The source opens before the file's header is written: a reading may fall between.)
    assert_eq!(hires(&format!("t_ms < {}", started_us / 1e3 - 1000.0)), 0);
}

#[test]
fn record_stops_when_the_process_exits_and_on_sigterm() {
    let dir = tmp("stop");
    let db = dir.join("a.db");
    // Not waited for until gpulse is done: the exited child stays a zombie, which counts as gone.
    let mut job = KillOnDrop::spawn(Command::new("sleep").arg("0.5"));
    let (code, _, err) = run(gpulse(Some("scenarios/h200_idle.json"))
        .args(["record", "--interval", "100ms", "--pid"])
        .arg(job.id().to_string())
        .arg("-o")
        .arg(&db));
    job.wait().unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(&format!("process {} exited", job.id())), "{err}");
    let db2 = dir.join("b.db");
    let child = KillOnDrop::spawn(
        gpulse(Some("scenarios/h200_idle.json"))
            .args(["record", "--interval", "100ms", "-o"])
            .arg(&db2)
            .stderr(Stdio::piped()),
    );
    // Python's sqlite3 reads the file while gpulse is still writing it.
    wait_until(60, "samples in the recording", || {
        let script = "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(c.execute('select count(*) from gpu_samples').fetchone()[0])";
        let o = Command::new("python3").arg("-c").arg(script).arg(&db2).output().expect("python3 runs");
        o.status.success() && String::from_utf8_lossy(&o.stdout).trim().parse::<u64>().is_ok_and(|n| n > 0)
    });
    // SAFETY: kill(2) on a process (or group) this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("; stopped by SIGTERM\n"));
    assert_eq!(python_sql(&db2, "select kind from events"), "[('stop',)]");
    // The write-ahead log was folded back: one self-contained file.
    assert!(!dir.join("b.db-wal").exists() || std::fs::metadata(dir.join("b.db-wal")).unwrap().len() == 0);
}

#[test]
fn kill_9_loses_at_most_the_last_second() {
    let dir = tmp("kill");
    let db = dir.join("run.db");
    let mut child = KillOnDrop::spawn(
        gpulse(Some("scenarios/h200_idle.json")).args(["record", "--interval", "100ms", "-o"]).arg(&db),
    );
    // Wait for what a reader can see to pass 12 samples; a commit is once a second, so how long
    // that takes is the machine's business, and what was committed must survive the kill.
    let count = || -> i64 {
        python_sql(&db, "select count(*) from gpu_samples").trim_matches(|c| "[](),".contains(c)).parse().unwrap()
    };
    let mut seen = 0;
    for _ in 0..600 {
        if db.exists() {
            seen = count();
        }
        if seen >= 12 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(seen >= 12, "{seen} samples committed");
    child.kill().unwrap();
    child.wait().unwrap();
    // A reader opens it as it was left, with the write-ahead log beside it, and nothing
    // committed before the kill is gone.
    assert!(count() >= seen, "{} of {seen} committed samples left", count());
    let (code, out, err) = run(gpulse(None).args(["export", "--format=csv,noheader", "--query-gpu=index"]).arg(&db));
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().count() >= 12, "{out}");
}

#[test]
fn record_refuses_an_existing_file_and_a_dead_pid() {
    let dir = tmp("refuse");
    let db = dir.join("exists.db");
    std::fs::write(&db, "keep me").unwrap();
    let (code, _, err) = run(gpulse(Some("scenarios/h200_idle.json")).args(["record", "-o"]).arg(&db));
    assert_eq!(code, 1);
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(std::fs::read_to_string(&db).unwrap(), "keep me");
    let (code, _, err) = run(gpulse(Some("scenarios/h200_idle.json"))
        .args(["record", "--pid", "4000000", "-o"])
        .arg(dir.join("new.db")));
    assert_eq!(code, 1);
    assert!(err.contains("no process 4000000"), "{err}");
    assert!(!dir.join("new.db").exists());
}

#[test]
fn import_then_export_gives_back_the_real_logs_byte_for_byte() {
    let dir = tmp("roundtrip");
    for scenario in ["dl_bound", "dl_tuned", "leak", "tiny", "healthy", "stall"] {
        for kind in ["rich", "seed"] {
            let log = fixture(&format!("h200-2026-11-29/{kind}_{scenario}.csv"));
            let db = dir.join(format!("{kind}_{scenario}.db"));
            let (code, _, err) = run(gpulse(None)
                .arg("import")
                .arg(&log)
                .arg(fixture(&format!("h200-2026-11-29/apps_{scenario}.csv")))
                .arg("-o")
                .arg(&db));
            assert_eq!(code, 0, "{err}");
            let out = dir.join(format!("{kind}_{scenario}.csv"));
            let (code, _, err) = run(gpulse(None).arg("export").arg(&db).arg("-o").arg(&out));
            assert_eq!(code, 0, "{err}");
            let original = std::fs::read_to_string(&log).unwrap();
            assert_eq!(std::fs::read_to_string(&out).unwrap(), original, "{kind}_{scenario}");
            // And the export imports to the same samples.
            let again = dir.join(format!("{kind}_{scenario}.again.db"));
            let (code, _, _) = run(gpulse(None).arg("import").arg(&out).arg("-o").arg(&again));
            assert_eq!(code, 0);
            let q = "select * from gpu_samples order by t_ms, gpu";
            assert_eq!(python_sql(&db, q), python_sql(&again, q), "{kind}_{scenario}");
        }
    }
    // The idle process of every scenario came in from the compute-apps log.
    let db = dir.join("rich_healthy.db");
    assert!(python_sql(&db, "select distinct pid from gpu_processes").contains("1250"));
}

#[test]
fn import_survives_what_real_logs_go_through() {
    let dir = tmp("messy");
    let rich = std::fs::read_to_string(fixture("h200-2026-11-29/rich_stall.csv")).unwrap();
    let lines: Vec<&str> = rich.lines().collect();
    // Appended across a restart (the header repeats), CRLF, and cut short by a crash.
    let mut messy = lines[..20].join("\r\n") + "\r\n" + &lines[0..1].join("") + "\r\n" + &lines[20..30].join("\r\n");
    messy += "\r\n2026/11/29 14:51:10.0";
    let log = dir.join("messy.csv");
    std::fs::write(&log, messy).unwrap();
    let (code, _, err) = run(gpulse(None).arg("import").arg(&log).arg("-o").arg(dir.join("m.db")));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("imported 29 GPU samples of 1 GPU"), "{err}");
    let warning = format!("gpulse: warning: 1 malformed line in {} skipped (line 32)", log.display());
    assert!(err.lines().any(|l| l == warning), "{err}");
    assert!(err.contains("messy.csv:32: 1 cells where the header has 17"), "{err}");
    // Something that is not a log at all.
    let junk = dir.join("junk.csv");
    std::fs::write(&junk, "name,age\nalice,3\n").unwrap();
    let (code, _, err) = run(gpulse(None).arg("import").arg(&junk).arg("-o").arg(dir.join("j.db")));
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not an nvidia-smi CSV log"), "{err}");
    assert!(!dir.join("j.db").exists(), "nothing half-written");
    let (code, _, err) = run(gpulse(None).arg("import").arg(dir.join("missing.csv")).arg("-o").arg(dir.join("x.db")));
    assert_eq!(code, 1);
    assert!(err.contains("missing.csv"), "{err}");
}

#[test]
fn export_reads_nvidia_smi_logs_directly() {
    let (code, out, err) = run(gpulse(None)
        .args(["export", "--query-gpu=timestamp,utilization.gpu", "--format=csv,noheader,nounits"])
        .arg(fixture("h200-2026-11-29/seed_tiny.csv")));
    assert_eq!(code, 0, "{err}");
    let seed = std::fs::read_to_string(fixture("h200-2026-11-29/seed_tiny.csv")).unwrap();
    let first = seed.lines().nth(1).unwrap().replace(" %", "");
    assert!(first.starts_with(out.lines().next().unwrap()), "{first} / {out}");
}
