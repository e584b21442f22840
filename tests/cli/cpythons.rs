//! The main thread on every CPython a training job runs: the same jobs as `thread_clocks.rs`,
//! run by CPython 3.13 and 3.14 inside Debian chroots (trixie, sid) that `.ci/run` makes with
//! `debootstrap --variant=minbase --include=python3`, while gpulse runs outside and reads them by
//! PID. `GPULSE_CPYTHON_ROOTS` lists the chroots (`:`-separated); under `GPULSE_REQUIRE_CPYTHONS`
//! (CI) a missing one fails rather than skips.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::support::{gpulse, run, skipped};

fn roots() -> Vec<PathBuf> {
    let roots: Vec<PathBuf> = std::env::var("GPULSE_CPYTHON_ROOTS")
        .unwrap_or_default()
        .split(':')
        .filter(|r| !r.is_empty())
        .map(PathBuf::from)
        .filter(|r| r.join("usr/bin/python3").exists())
        .collect();
    if std::env::var_os("GPULSE_REQUIRE_CPYTHONS").is_some() {
        assert!(roots.len() >= 2, "GPULSE_CPYTHON_ROOTS must name the trixie and sid chroots .ci/run makes");
    } else if roots.is_empty() {
        skipped("CPython 3.13 and 3.14 (GPULSE_CPYTHON_ROOTS names no chroot; .ci/run makes them)");
    }
    roots
}

/// The chroot's CPython version, `3.13.5`.
fn version(root: &Path) -> String {
    let out = Command::new("chroot")
        .arg(root)
        .args(["python3", "-c", "import sys; print(sys.version.split()[0])"])
        .output()
        .expect("chroot runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A folder inside the chroot for one job, removed with what is in it when dropped.
struct Inside {
    root: PathBuf,
    rel: String,
}

impl Inside {
    fn new(root: &Path, name: &str) -> Self {
        let rel = format!("tmp/gpulse-cpython-{name}-{}", std::process::id());
        std::fs::create_dir_all(root.join(&rel)).unwrap();
        Self { root: root.to_owned(), rel }
    }

    fn host(&self, file: &str) -> PathBuf {
        self.root.join(&self.rel).join(file)
    }

    fn guest(&self, file: &str) -> String {
        format!("/{}/{file}", self.rel)
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.root.join(&self.rel));
    }
}

/// Runs `script` in the chroot under `gpulse run`, its first argument the truth file `t.json`;
/// returns the folder (removed when dropped) and the recording.
fn record(root: &Path, name: &str, script: &str) -> (Inside, PathBuf) {
    let inside = Inside::new(root, name);
    std::fs::write(inside.host("job.py"), script).unwrap();
    let scenario = inside.host("scenario.json");
    std::fs::write(&scenario, r#"{"init_error": 9, "devices": []}"#).unwrap();
    let rec = inside.host("r.db");
    let mut cmd = gpulse(None);
    cmd.env("GPULSE_FAKE_NVML_SCENARIO", &scenario);
    cmd.args(["run", "--status", "off", "--no-report", "--interval", "200ms", "--stacks-hz", "100", "-o"]);
    cmd.arg(&rec).arg("--").arg("chroot").arg(root).args(["python3", &inside.guest("job.py"), &inside.guest("t.json")]);
    let (code, _, err) = run(&mut cmd);
    assert_eq!(code, 0, "{err}");
    (inside, rec)
}

/// Runs `script` in the chroot under `gpulse run` and returns (its truth, the diagnosis).
fn diagnose(root: &Path, name: &str, script: &str) -> (serde_json::Value, serde_json::Value) {
    let (inside, rec) = record(root, name, script);
    let t = serde_json::from_str(&std::fs::read_to_string(inside.host("t.json")).unwrap()).unwrap();
    let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(&rec));
    assert_eq!(code, 0, "{err}");
    (t, serde_json::from_str(&out).unwrap())
}

fn seconds(d: &serde_json::Value, names: &[&str]) -> f64 {
    d["ledger"]["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| names.contains(&a["account"].as_str().unwrap()))
        .map(|a| a["seconds"].as_f64().unwrap())
        .sum()
}

/// Each step sleeps 30 ms (line 11) and runs 20 ms of pure Python (`work`), timing both.
const SLEEP_AND_PYTHON: &str = r#"import json, sys, time
def work(ms):
    end = time.perf_counter() + ms / 1000
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x
t0 = time.perf_counter(); slept = 0.0; cpu = 0.0
while time.perf_counter() - t0 < 6:
    s = time.perf_counter()
    time.sleep(0.03)
    slept += time.perf_counter() - s
    c = time.thread_time()
    work(20)
    cpu += time.thread_time() - c
json.dump({"loop_s": time.perf_counter() - t0, "sleep_s": slept, "cpu_s": cpu}, open(sys.argv[1], "w"))
"#;

#[test]
fn cpython_313_and_314_give_the_same_states_and_sites_as_311() {
    let _one = super::thread_clocks::ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for root in roots() {
        let v = version(&root);
        let (t, d) = diagnose(&root, "sleep", SLEEP_AND_PYTHON);
        let wall = d["ledger"]["wall_s"].as_f64().unwrap();
        let (loop_s, sleep_s) = (t["loop_s"].as_f64().unwrap(), t["sleep_s"].as_f64().unwrap());
        let sleep = seconds(&d, &["main_thread_sleep"]);
        assert!((sleep - sleep_s).abs() / wall < 0.05, "{v}: sleep {sleep:.2} s, the job {sleep_s:.2} s: {d:#}");
        // Python on a CPU is the thread's own clock; with its wait for a core, the loop's.
        let python = seconds(&d, &["main_thread_python"]);
        let cpu = t["cpu_s"].as_f64().unwrap();
        assert!((python - cpu).abs() / wall < 0.05, "{v}: python {python:.2} s, on a CPU {cpu:.2} s: {d:#}");
        let with_wait = python + seconds(&d, &["main_thread_core_wait"]);
        let want = loop_s - sleep_s;
        assert!((with_wait - want).abs() / wall < 0.05, "{v}: {with_wait:.2} s, the job {want:.2} s: {d:#}");
        let findings = d["findings"].as_array().unwrap();
        let site = |id: &str| {
            let f = findings.iter().find(|f| f["id"] == id).unwrap_or_else(|| panic!("{v}: {id}: {d:#}"));
            f["evidence"]["site"].as_str().unwrap().to_owned()
        };
        assert!(site("sleep_in_loop").ends_with("job.py:11 <module>"), "{v}: {d:#}");
        // Lines 5 and 6 share the loop of `work`: the cause is the function.
        let python = findings.iter().find(|f| f["id"] == "main_thread_python").unwrap();
        assert!(site("main_thread_python").ends_with(" work"), "{v}: {d:#}");
        assert!(python["evidence"]["function"].as_str().unwrap().ends_with("job.py work"), "{v}: {python:#}");
        assert_eq!(d["stacks"][0]["role"], "main", "{v}");
        let (t, d) = diagnose(&root, "gil", super::thread_clocks::GIL);
        let off = t["loop_s"].as_f64().unwrap() - t["cpu_s"].as_f64().unwrap();
        let waited = seconds(&d, &["main_thread_gil_wait", "main_thread_core_wait"]);
        let wall = d["ledger"]["wall_s"].as_f64().unwrap();
        assert!((waited - off).abs() / wall < 0.05, "{v}: GIL wait {waited:.2} s, off its CPU {off:.2} s: {d:#}");
        assert_eq!(d["findings"][0]["id"], "gil_contention", "{v}: {d:#}");
        eprintln!("{v}: sleep {sleep:.2}/{sleep_s:.2} s, GIL wait {waited:.2}/{off:.2} s");
    }
}

/// `record` without `--pid` reads a GPU process that runs in the chroot, which gpulse did not
/// start, as `serve` does: its sleep and its Python at their lines, against the job's own timing.
#[test]
fn cpython_313_and_314_gpu_processes_are_read_by_the_node_scope() {
    let _one = super::thread_clocks::ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for root in roots() {
        let v = version(&root);
        let inside = Inside::new(&root, "node");
        std::fs::write(inside.host("job.py"), SLEEP_AND_PYTHON).unwrap();
        let job = super::support::KillOnDrop::spawn(Command::new("chroot").arg(&root).args([
            "python3",
            &inside.guest("job.py"),
            &inside.guest("t.json"),
        ]));
        let scenario = inside.host("scenario.json");
        std::fs::write(
            &scenario,
            format!(
                r#"{{"driver_version": "580.159.04", "cuda_driver_version": 13000, "devices": [{{"name": "NVIDIA H200",
                  "uuid": "GPU-00000000-aaaa-4000-8000-000000000000", "pci_bus_id": "00000000:10:00.0",
                  "base": {{"util_gpu_pct": 0, "util_mem_pct": 0, "memory_total_mib": 143771, "memory_used_mib": 1024}},
                  "processes": [{{"pid": {}, "name": "python3", "used_memory_mib": 1024}}]}}]}}"#,
                job.id()
            ),
        )
        .unwrap();
        let rec = inside.host("r.db");
        let mut cmd = gpulse(None);
        cmd.env("GPULSE_FAKE_NVML_SCENARIO", &scenario);
        cmd.args(["record", "--interval", "200ms", "--duration", "4s", "-o"]).arg(&rec);
        let (code, _, err) = run(&mut cmd);
        assert_eq!(code, 0, "{v}: {err}");
        // A layout gpulse's own reader does not know (3.14) is read by py-spy, and said once.
        let fallback = format!("runs Python {v}, whose layout gpulse's own reader does not know");
        assert_eq!(err.matches(&fallback).count(), usize::from(v.starts_with("3.14")), "{v}: {err}");
        let pid = job.id();
        let out = job.wait_with_output().unwrap();
        assert!(out.status.success(), "{v}");
        let t: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(inside.host("t.json")).unwrap()).unwrap();
        let own = t["sleep_s"].as_f64().unwrap() / t["loop_s"].as_f64().unwrap();
        let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(&rec));
        assert_eq!(code, 0, "{v}: {err}");
        let d: serde_json::Value = serde_json::from_str(&out).unwrap();
        let p = &d["stacks"][0];
        assert_eq!(d["stacks"].as_array().unwrap().len(), 1, "{v}: one GPU process: {:#}", d["stacks"]);
        assert_eq!(p["pid"], pid, "{v}");
        let state = |name: &str| p["states"].as_array().unwrap().iter().find(|s| s["state"] == name).cloned();
        let sleep = state("sleep").unwrap_or_else(|| panic!("{v}: {p:#}"));
        let share = sleep["share"].as_f64().unwrap();
        assert!((share - own).abs() < 0.05, "{v}: sleep {share:.3} of its samples, the job's own {own:.3}: {p:#}");
        assert!(sleep["sites"][0]["site"].as_str().unwrap().ends_with("job.py:11 <module>"), "{v}: {p:#}");
        let python = state("python").unwrap_or_else(|| panic!("{v}: {p:#}"));
        assert!(python["sites"][0]["site"].as_str().unwrap().ends_with(" work"), "{v}: {p:#}");
        eprintln!("{v}: the node scope read sleep {share:.3} against the job's {own:.3}");
    }
}

/// Each round compiles `f` again, alternately with its loop on line 3 and on line 4, runs it
/// 15 ms, and drops it: each new code object lands where the last was freed, and a cache that
/// kept the last one's line table would read one variant's loop at the other's line. (The
/// tables themselves move between two addresses here; `walk/code.rs` tests the version alone.)
const CODE_REUSE: &str = r#"import json, sys, time
A = "def f():\n    t = time.perf_counter()\n    while time.perf_counter() - t < 0.015: pass\n"
B = "def f():\n\n    t = time.perf_counter()\n    while time.perf_counter() - t < 0.015: pass\n"
t0 = time.perf_counter(); i = 0
while time.perf_counter() - t0 < 4:
    i += 1
    ns = {}
    exec(A if i % 2 else B, {"time": time}, ns)
    ns["f"]()
    del ns
json.dump({"functions": i}, open(sys.argv[1], "w"))
"#;

#[test]
fn cpython_313_and_314_tell_a_new_code_object_at_a_freed_ones_address() {
    let _one = super::thread_clocks::ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for root in roots() {
        let v = version(&root);
        let (_inside, rec) = record(&root, "reuse", CODE_REUSE);
        let (code, out, err) = run(gpulse(None).args(["export", "--format", "folded"]).arg(&rec));
        assert_eq!(code, 0, "{v}: {err}");
        // Samples of `f`, by the line of its innermost frame `f (<string>:L)`.
        let mut at = [0u64; 2];
        for line in out.lines() {
            let (stack, n) = line.rsplit_once(' ').unwrap();
            let n: u64 = n.parse().unwrap();
            match stack.rsplit(';').next().unwrap() {
                "f (<string>:3)" => at[0] += n,
                "f (<string>:4)" => at[1] += n,
                _ => {}
            }
        }
        // The two variants run alike: about half the loop's samples each (3.14 is read by py-spy,
        // at a lower rate within the budget).
        let share = at[1] as f64 / (at[0] + at[1]).max(1) as f64;
        assert!(at[0] + at[1] > 100 && (share - 0.5).abs() < 0.1, "{v}: lines 3 and 4 read {at:?}: {out}");
        eprintln!("{v}: the loop read at line 3 {} and line 4 {} times", at[0], at[1]);
    }
}
