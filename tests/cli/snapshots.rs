//! Snapshots of every text output gpulse prints, on real fixtures (issue 11, step 1). The same
//! snapshots passing after a restructuring shows that nothing a user sees has changed.
//!
//! A change shows as a failing test with a diff. Accept a reviewed one with `cargo insta review`,
//! or `INSTA_UPDATE=always cargo test --test tests cli::snapshots` and read `git diff`. Under
//! `CI=true` insta writes no `.snap.new` file and a mismatch or a missing snapshot fails the test.
//!
//! Commands run in the repository root with relative fixture paths, so the paths they print are
//! the same on every machine. Filters hide only what varies between two runs: each says why.

use std::process::Command;

use super::support::KillOnDrop;
use super::support::{fixture, gpulse, gpulse_bin, root, run};

/// The stand-in GPU used for the live views: one idle H200.
const IDLE: &str = "scenarios/h200_idle.json";

/// nvidia-smi's `YYYY/MM/DD HH:MM:SS.mmm`, for views that print the wall clock of the moment they
/// sampled (status's header, query's `timestamp` field). Recordings keep their own times unfiltered.
const WALL_CLOCK: (&str, &str) = (r"\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}\.\d{3}", "[wall clock]");

/// A live job's ledger: its seconds are the job's own timing, and a job of a few milliseconds has
/// one only when the machine is slow. The fixtures' ledgers are held to ground truth in
/// `diagnosis_h200.rs`.
const LIVE_LEDGER: (&str, &str) = (r"where the [0-9.]+ s went:\n(?: +[^\n]*\n)*\n?", "");

/// Snapshots `text` as `name`. `what` (the command, and a known fault where the output is wrong)
/// heads the snapshot file; each filter is a (regex, replacement) pair.
fn snap(name: &str, what: &str, text: &str, filters: &[(&str, &str)]) {
    let mut s = insta::Settings::clone_current();
    s.set_prepend_module_to_snapshot(false);
    s.set_omit_expression(true);
    s.set_description(what);
    for (re, with) in filters {
        s.add_filter(re, *with);
    }
    s.bind(|| insta::assert_snapshot!(name, text));
}

/// Runs `gpulse ARGS` in the repository root with the stand-in library (and `scenario`, if any);
/// returns (exit status, stdout, stderr) and the command line as a user would type it.
fn at_root(scenario: Option<&str>, args: &[&str]) -> ((i32, String, String), String) {
    let got = run(gpulse(scenario).current_dir(root()).args(args));
    (got, format!("gpulse {}", args.join(" ")))
}

/// stdout of a command that must succeed and print nothing on stderr.
fn stdout_of(scenario: Option<&str>, args: &[&str]) -> (String, String) {
    let ((code, out, err), line) = at_root(scenario, args);
    assert_eq!((code, err.as_str()), (0, ""), "{line}");
    assert!(!out.is_empty(), "{line} printed nothing");
    (out, line)
}

/// The recordings and the nvidia-smi log that `diagnose` is pinned on, with the known fault of
/// each output where there is one.
const DIAGNOSED: [(&str, &str); 6] = [
    ("h200-gpulse-run/dl_bound.db", ""),
    ("h200-gpulse-run/dl_tuned.db", ""),
    (
        "h200-gpulse-run/leak.db",
        "the cuda_oom message was cut mid-URL when recorded (texts were cut at 600 characters), as the oom finding says",
    ),
    ("h200x2-gpulse/uneven.db", ""),
    ("h200x2-gpulse/misbound.db", ""),
    ("h200-2026-11-29/rich_stall.csv", ""),
];

/// "h200x2-gpulse/uneven.db" → "uneven".
fn stem(path: &str) -> &str {
    let file = path.rsplit('/').next().unwrap();
    file.split('.').next().unwrap()
}

fn described(line: &str, note: &str) -> String {
    if note.is_empty() { line.to_owned() } else { format!("{line}\n{note}") }
}

#[test]
fn diagnose_text_and_json() {
    for (rel, note) in DIAGNOSED {
        let path = format!("tests/fixtures/{rel}");
        let (text, line) = stdout_of(None, &["diagnose", &path]);
        snap(&format!("diagnose_{}", stem(rel)), &described(&line, note), &text, &[]);
        let (json, line) = stdout_of(None, &["diagnose", "--format", "json", &path]);
        serde_json::from_str::<serde_json::Value>(&json).expect("diagnose --format json is JSON");
        snap(&format!("diagnose_json_{}", stem(rel)), &described(&line, note), &json, &[]);
    }
}

#[test]
fn compare_text_and_json() {
    let (before, after) = ("tests/fixtures/h200-gpulse-run/dl_bound.db", "tests/fixtures/h200-gpulse-run/dl_tuned.db");
    let (text, line) = stdout_of(None, &["compare", before, after]);
    snap("compare_dl_bound_dl_tuned", &line, &text, &[]);
    let (json, line) = stdout_of(None, &["compare", "--format", "json", before, after]);
    serde_json::from_str::<serde_json::Value>(&json).expect("compare --format json is JSON");
    snap("compare_json_dl_bound_dl_tuned", &line, &json, &[]);
}

#[test]
fn status_and_status_json_through_the_stand_in() {
    let (text, line) = stdout_of(Some(IDLE), &["status"]);
    snap("status_h200_idle", &line, &text, &[WALL_CLOCK]);
    let (json, line) = stdout_of(Some(IDLE), &["status", "--json"]);
    serde_json::from_str::<serde_json::Value>(&json).expect("status --json is JSON");
    let filters = [
        // The sampling moment, and NVML's own timestamps of its utilization samples.
        (r#""timestamp_us": \d+"#, r#""timestamp_us": "[µs since the epoch]""#),
        // The GPM window as measured on the host's clock: 200 ms plus scheduling jitter.
        (r#""interval_ms": [0-9.]+"#, r#""interval_ms": "[measured, about 200]""#),
    ];
    snap("status_json_h200_idle", &line, &json, &filters);
}

#[test]
fn watch_through_the_stand_in() {
    let (out, line) = stdout_of(Some(IDLE), &["watch", "-n", "3", "-i", "0.1"]);
    // Each line starts with the wall clock of its sample; the placeholder has its width, so the
    // columns stay where a user sees them.
    snap("watch_h200_idle", &line, &out, &[(r"(?m)^\d{2}:\d{2}:\d{2}\.\d{3}", "HH:MM:SS.mmm")]);
}

#[test]
fn export_of_a_recording_with_the_default_fields() {
    // The recording's own times, in UTC (support.rs sets TZ): nothing to filter.
    let (csv, line) = stdout_of(None, &["export", "tests/fixtures/h200-gpulse-run/dl_bound.db"]);
    snap("export_dl_bound", &line, &csv, &[]);
}

/// The idle scenario with one process that NVML lists on GPU 0 (`process` is its JSON object).
fn idle_with_process(name: &str, process: &str) -> super::support::Temp {
    let bus = r#""pci_bus_id": "00000000:00:06.0","#;
    let json = std::fs::read_to_string(fixture(IDLE)).unwrap();
    assert!(json.contains(bus));
    super::support::scenario_file(name, &json.replace(bus, &format!(r#"{bus} "processes": [{process}],"#)))
}

#[test]
fn query_one_shot_through_the_stand_in() {
    let fields = "timestamp,index,name,uuid,pci.bus_id,driver_version,utilization.gpu,utilization.memory,\
                  memory.used,memory.total,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.mem,pstate,\
                  gpm.sm_active";
    let (csv, line) = stdout_of(Some(IDLE), &["query", &format!("--query-gpu={fields}"), "--format=csv"]);
    snap("query_gpu_h200_idle", &line, &csv, &[WALL_CLOCK]);
    // A process NVML lists: its PID is above Linux's largest pid_max (2^22), so no live process on
    // the test machine can lend it a name from /proc.
    let sc = idle_with_process("snap-apps", r#"{"pid": 4194399, "name": "python3", "used_memory_mib": 20000}"#);
    let fields = "timestamp,gpu_name,gpu_bus_id,gpu_uuid,pid,process_name,used_memory";
    let args = [&format!("--query-compute-apps={fields}"), "--format=csv"];
    let (code, csv, err) = run(gpulse(None).env("GPULSE_FAKE_NVML_SCENARIO", &sc).current_dir(root()).args(args));
    assert_eq!((code, err.as_str()), (0, ""));
    snap("query_compute_apps_one_process", &format!("gpulse {}", args.join(" ")), &csv, &[WALL_CLOCK]);
}

/// The report as one line per element. gpulse writes it on one line; breaking it after each tag
/// lets a diff show which element changed, and joining the lines gives the bytes back.
fn tag_per_line(html: &str) -> String {
    let body = html.strip_suffix('\n').unwrap_or(html);
    assert!(!body.contains('\n'), "the report is one line, so the split below is lossless");
    body.replace("><", ">\n<") + "\n"
}

#[test]
fn html_report_of_a_recording() {
    // A run-wide window on every chart and memory scaled to the data; a GPU's overlapping
    // windows labelled in rows, the OOM marked, and a text the recording cut said to be cut.
    let cases = [
        ("dl_bound", "input_bound's window on every chart; memory scaled to 7 GiB of 140"),
        ("leak", "two labelled windows, the OOM marker, memory drawn up to its total"),
    ];
    for (name, note) in cases {
        let path = format!("tests/fixtures/h200-gpulse-run/{name}.db");
        // The input path is printed as given, relative to the root here; the report has no
        // rendering time, and its times are offsets into the run: nothing varies.
        let (html, line) = stdout_of(None, &["report", &path, "-o", "-"]);
        assert!(html.starts_with("<!doctype html>") && html.trim_end().ends_with("</html>"), "{line}");
        snap(&format!("report_{name}"), &described(&line, note), &tag_per_line(&html), &[]);
    }
}

/// A fresh directory for a job's recording, so `-o x.db` prints a relative path.
fn job_dir(name: &str) -> super::support::Temp {
    super::support::fresh_dir("snap", name)
}

#[test]
fn run_summary_on_stderr() {
    // The recording and the report are named relative to the job's directory, the summary has no
    // PID (no process held a GPU); only the ledger's times vary.
    let cases = [("exit_3", "exit 3", 3), ("sigterm", "kill -TERM $$", 128 + 15)];
    for (name, script, status) in cases {
        let dir = job_dir(name);
        let args = ["run", "--status", "off", "-o", "x.db", "--", "sh", "-c", script];
        let (code, out, err) = run(gpulse(Some(IDLE)).current_dir(&dir).args(args));
        assert_eq!((code, out.as_str()), (status, ""), "{err}");
        assert!(dir.join("x.html").exists(), "the report the summary names is there");
        let line = format!("gpulse run --status off -o x.db -- sh -c '{script}'");
        snap(&format!("run_summary_{name}"), &line, &err, &[LIVE_LEDGER]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn attach_summary_names_the_gpus_the_job_held() {
    // The job is `sleep 30`, ended once attach watches it (however long a loaded machine takes to
    // start attach); the stand-in lists it on GPU 0, as NVML lists a training process.
    let mut job = KillOnDrop::spawn(Command::new("sleep").arg("30"));
    let pid = job.id().to_string();
    let sc = idle_with_process("snap-attach", &format!(r#"{{"pid": {pid}, "used_memory_mib": 20000}}"#));
    let dir = job_dir("attach");
    let args = ["attach", "--interval", "0.1", "-o", "x.db", &pid];
    let mut attach = KillOnDrop::spawn(
        gpulse(None)
            .env("GPULSE_FAKE_NVML_SCENARIO", &sc)
            .current_dir(&dir)
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
    );
    // Its first line says it watches; a few polls later the job ends.
    let mut err = String::new();
    let mut lines = std::io::BufReader::new(attach.stderr.take().unwrap());
    std::io::BufRead::read_line(&mut lines, &mut err).unwrap();
    assert!(err.starts_with("gpulse: watching PID"), "{err}");
    // Five polls recorded, however long that takes, then the job ends.
    let db = dir.join("x.db");
    super::support::wait_until(60, "five polls recorded", || {
        let script = "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from gpu_samples').fetchone()[0])";
        Command::new("python3").arg("-c").arg(script).arg(&db).output().is_ok_and(|o| {
            o.status.success() && String::from_utf8_lossy(&o.stdout).trim().parse::<u32>().is_ok_and(|n| n >= 5)
        })
    });
    let _ = (job.kill(), job.wait());
    std::io::Read::read_to_string(&mut lines, &mut err).unwrap();
    let o = attach.wait_with_output().unwrap();
    let (code, out) = (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into_owned());
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    let filters = [
        // The job's PID: first in the holders' table, where it is padded to 8 characters (so
        // the padding goes with it), then wherever else it is named.
        (format!(r"  PID {pid} +GPU "), "  PID [pid]    GPU ".to_owned()),
        (format!(r"\b{pid}\b"), "[pid]".to_owned()),
        (LIVE_LEDGER.0.to_owned(), LIVE_LEDGER.1.to_owned()),
    ];
    let filters: Vec<(&str, &str)> = filters.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let line =
        "gpulse attach --interval 0.1 -o x.db PID (a `sleep 30` the stand-in lists on GPU 0, ended after five polls)";
    let note = "the job's own process held its memory half a second: too short to call it idle, so no finding";
    snap("attach_summary_one_holder", &described(line, note), &err, &filters);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_help() {
    const SUBCOMMANDS: [&str; 12] = [
        "query", "status", "watch", "record", "run", "attach", "import", "export", "diagnose", "compare", "report",
        "demo",
    ];
    // Without GPULSE_NVML_LIB in the environment: clap prints its value in the help, and support.rs
    // sets it to the stand-in's path under target/.
    let help = |args: &[&str]| {
        let mut cmd = Command::new(gpulse_bin());
        cmd.env_remove("GPULSE_NVML_LIB").env_remove("GPULSE_FAKE_NVML_SCENARIO").args(args);
        let (code, out, err) = run(&mut cmd);
        assert_eq!((code, err.as_str()), (0, ""), "{args:?}");
        (out, format!("gpulse {}", args.join(" ")))
    };
    let (out, line) = help(&["--help"]);
    snap("help", &line, &out, &[]);
    for sub in SUBCOMMANDS {
        assert!(out.contains(&format!("\n  {sub} ")), "the top-level help lists {sub}");
        let (out, line) = help(&[sub, "--help"]);
        snap(&format!("help_{sub}"), &line, &out, &[]);
    }
}

#[test]
fn demo_replays_the_bundled_recording() {
    // The replay prints the recording's own times and the demo's fixed process table: nothing varies.
    let (out, line) = stdout_of(None, &["demo", "--speed", "10000"]);
    snap("demo", &line, &out, &[]);
}
