//! What one snapshot of a thread cannot tell, told by the thread's own clocks and the GIL: real
//! CPU-only Python jobs under `gpulse run`, each timing its own parts (`time.thread_time`, or the
//! wall time around the call), and `diagnose` of the recording. Each mechanism's account must be
//! within 5 points of the job's own timing, and the first finding must name it at its line.

use super::support::{gpulse, run};

/// A job: its name, its script, and the arguments after its truth file's path.
struct Job<'a> {
    name: &'static str,
    script: &'static str,
    args: &'a [&'a str],
}

/// One job at a time: each times itself, and one saturates the host on purpose.
pub(super) static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `job` under gpulse without a driver and returns (the job's own figures, the diagnosis,
/// the script's file name).
fn diagnose(job: &Job<'_>) -> (serde_json::Value, serde_json::Value, String) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    diagnose_alone(job)
}

/// [`diagnose`] where the caller holds [`ONE_AT_A_TIME`].
fn diagnose_alone(job: &Job<'_>) -> (serde_json::Value, serde_json::Value, String) {
    let dir = super::support::fresh_dir("thread-clocks", job.name);
    let scenario = dir.join("scenario.json");
    std::fs::write(&scenario, r#"{"init_error": 9, "devices": []}"#).unwrap();
    let script = dir.join(format!("{}.py", job.name));
    std::fs::write(&script, job.script).unwrap();
    let truth = dir.join("truth.json");
    let rec = dir.join("r.db");
    let mut cmd = gpulse(None);
    cmd.env("GPULSE_FAKE_NVML_SCENARIO", &scenario)
        .env("PYTHONPATH", super::support::root().join("python"))
        .env("OPENBLAS_NUM_THREADS", "1")
        .env("OMP_NUM_THREADS", "1");
    cmd.args(["run", "--status", "off", "--no-report", "--interval", "200ms", "--stacks-hz", "100", "-o"]);
    cmd.arg(&rec).args(["--", "python3"]).arg(&script).arg(&truth).args(job.args);
    let (code, _, err) = run(&mut cmd);
    assert_eq!(code, 0, "{err}");
    let t: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&truth).unwrap()).unwrap();
    let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(&rec));
    assert_eq!(code, 0, "{err}");
    let d = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    (t, d, format!("{}.py", job.name))
}

/// The seconds of the ledger's accounts named `names`, as a share of the wall time.
fn share(d: &serde_json::Value, names: &[&str]) -> f64 {
    let accounts = d["ledger"]["accounts"].as_array().unwrap();
    let s: f64 = accounts
        .iter()
        .filter(|a| names.contains(&a["account"].as_str().unwrap()))
        .map(|a| a["seconds"].as_f64().unwrap())
        .sum();
    s / d["ledger"]["wall_s"].as_f64().unwrap()
}

/// Asserts the share of `names` is within 5 points of `truth_s` of the wall, and that the first
/// finding is `id` at the script's `line`.
fn within_5_points(d: &serde_json::Value, names: &[&str], truth_s: f64, id: &str, script: &str, line: u32) {
    let wall = d["ledger"]["wall_s"].as_f64().unwrap();
    let (got, want) = (share(d, names), truth_s / wall);
    assert!((got - want).abs() < 0.05, "{names:?}: {got:.3} of the wall, the job's own timing {want:.3}: {d:#}");
    let first = &d["findings"][0];
    assert_eq!(first["id"], id, "{d:#}");
    let site = first["evidence"]["site"].as_str().unwrap();
    assert!(site.contains(&format!("{script}:{line} ")), "{site}: {first:#}");
}

/// The main thread loops over pure Python while two other threads spin on pure Python too: it is
/// off its CPU about two thirds of the time, waiting for the GIL, as its own `thread_time` says.
pub(super) const GIL: &str = r#"import json, sys, threading, time
stop = False
def hog():
    x = 0
    while not stop:
        x += 1
for _ in range(2):
    threading.Thread(target=hog, daemon=True).start()
def work(n):
    x = 0
    for i in range(n):
        x += i
    return x
t0 = time.perf_counter(); c0 = time.thread_time()
while time.perf_counter() - t0 < 8:
    work(20000)
wall = time.perf_counter() - t0; cpu = time.thread_time() - c0
stop = True
json.dump({"loop_s": wall, "cpu_s": cpu}, open(sys.argv[1], "w"))
"#;

#[test]
fn a_gil_starved_main_thread_is_told_by_its_own_clocks() {
    let (t, d, script) = diagnose(&Job { name: "gil", script: GIL, args: &[] });
    let (loop_s, cpu_s) = (t["loop_s"].as_f64().unwrap(), t["cpu_s"].as_f64().unwrap());
    // Off its CPU: waiting for the GIL, or for a core to take it on.
    within_5_points(
        &d,
        &["main_thread_gil_wait", "main_thread_core_wait"],
        loop_s - cpu_s,
        "gil_contention",
        &script,
        12,
    );
    assert!(d["findings"][0]["evidence"]["gil_holder_site"].as_str().unwrap().contains(&format!("{script}:6 hog")));
}

/// `write`, `flush` and `fsync` of each step: much of it on a CPU in the kernel, with the GIL
/// released. That is file I/O, not Python. The job times the calls' wall time, and the part of
/// it it waited for a core as it woke from them (its own `schedstat`, read outside the timed
/// calls), which is `core_wait`'s.
const FSYNC: &str = include_str!("../python/jobs/fsync_loop.py");

#[test]
fn fsync_in_the_loop_is_file_io_not_python() {
    let dir = super::support::fresh_dir("thread-clocks", "fsync-data");
    let data = dir.join("data.bin");
    let (t, d, script) = diagnose(&Job { name: "fsync", script: FSYNC, args: &[data.to_str().unwrap()] });
    let (io_s, queued_s) = (t["io_s"].as_f64().unwrap(), t["io_queued_s"].as_f64().unwrap());
    let wall = d["ledger"]["wall_s"].as_f64().unwrap();
    let (got, want) = (share(&d, &["main_thread_disk"]), (io_s - queued_s) / wall);
    // The mechanism: the fsync is file I/O, never Python, and its size is the calls' own time
    // less their wait for a core.
    assert!((got - want).abs() < 0.05, "disk: {got:.3} of the wall, the job timed {want:.3}: {d:#}");
    let python_got = share(&d, &["main_thread_python"]);
    let python_max = (wall - io_s) / wall;
    assert!(python_got < python_max + 0.05, "python: {python_got:.3}, the rest of the wall {python_max:.3}: {d:#}");
    let disk = d["findings"].as_array().unwrap().iter().find(|f| f["id"] == "disk_wait").expect("disk_wait");
    assert!(disk["evidence"]["site"].as_str().unwrap().contains(&format!("{script}:15 ")), "{disk:#}");
    // Advice for a sync to storage, not for reading data.
    let advice = disk["advice"][0].as_str().unwrap();
    assert!(advice.contains("fsync") && !advice.contains("DataLoader"), "{advice}");
    let python = d["findings"].as_array().unwrap().iter().find(|f| f["id"] == "main_thread_python");
    assert!(python.is_none_or(|p| !p["evidence"]["site"].as_str().unwrap().contains(":15 ")), "{d:#}");
}

/// `with lock:` while another thread holds the lock 30 ms at a time: a futex wait with no frame
/// of its own, on the `with` line. The main thread's own work is outside the lock: holding it
/// there, the main thread took it back each time before the holder woke (a lock is not fair),
/// and on a busy host the job ran its Python 80 % of the time with the lock its own.
const LOCK: &str = r#"import json, sys, threading, time
lock = threading.Lock()
stop = False
def holder():
    while not stop:
        with lock:
            time.sleep(0.03)
        time.sleep(0.001)
threading.Thread(target=holder, daemon=True).start()
t0 = time.perf_counter(); waited = 0.0
while time.perf_counter() - t0 < 8:
    s = time.perf_counter()
    with lock:
        waited += time.perf_counter() - s
    x = sum(range(20000))
wall = time.perf_counter() - t0
stop = True
json.dump({"loop_s": wall, "lock_s": waited}, open(sys.argv[1], "w"))
"#;

#[test]
fn a_with_lock_block_is_a_lock_wait() {
    let (t, d, script) = diagnose(&Job { name: "lock", script: LOCK, args: &[] });
    within_5_points(&d, &["main_thread_lock"], t["lock_s"].as_f64().unwrap(), "lock_wait", &script, 13);
    // The holder sleeps with the lock: no thread runs Python meanwhile, and none is named.
    let first = &d["findings"][0];
    assert!(!first["title"].as_str().unwrap().contains("another thread ran"), "{first:#}");
    assert!(first["advice"][0].as_str().unwrap().contains("hold a lock only around what it guards"), "{first:#}");
}

/// `Pool.map` of busy work: the main thread waits for the pool's processes, and the pool's
/// workers, busier than it, are never taken for the job's main process.
const POOL: &str = r#"import json, multiprocessing, sys, time
def f(x):
    end = time.perf_counter() + 0.002
    while time.perf_counter() < end: pass
    return x
if __name__ == "__main__":
    with multiprocessing.Pool(2) as p:
        t0 = time.perf_counter(); waited = 0.0
        while time.perf_counter() - t0 < 8:
            s = time.perf_counter()
            p.map(f, range(20))
            waited += time.perf_counter() - s
            x = sum(range(20000))
        wall = time.perf_counter() - t0
    json.dump({"loop_s": wall, "pool_s": waited}, open(sys.argv[1], "w"))
"#;

#[test]
fn a_multiprocessing_pool_is_a_wait_on_other_processes() {
    let (t, d, script) = diagnose(&Job { name: "pool", script: POOL, args: &[] });
    within_5_points(&d, &["main_thread_ipc"], t["pool_s"].as_f64().unwrap(), "ipc_wait", &script, 11);
    let first = &d["findings"][0];
    assert!(!first["advice"][0].as_str().unwrap().contains("its own threads"), "{first:#}");
    // Named as the pool it is, with the fix a pool has: its result a step later.
    assert_eq!(first["evidence"]["domain"], "pool", "{first:#}");
    assert!(first["advice"][0].as_str().unwrap().contains("map_async"), "{first:#}");
    assert_eq!(d["stacks"][0]["role"], "main", "{:#}", d["stacks"]);
}

/// A child process run and waited for in each step (a tool's report read through `subprocess`):
/// the wait is the child's, named as the process the loop starts, with its own fix.
const SUBPROCESS: &str = r#"import json, subprocess, sys, time
t0 = time.perf_counter(); waited = 0.0
while time.perf_counter() - t0 < 8:
    s = time.perf_counter()
    out = subprocess.run(["sleep", "0.04"], capture_output=True).returncode
    waited += time.perf_counter() - s
    x = sum(range(200000))
json.dump({"loop_s": time.perf_counter() - t0, "child_s": waited}, open(sys.argv[1], "w"))
"#;

#[test]
fn a_child_process_in_the_loop_is_named_with_its_fix() {
    let (t, d, script) = diagnose(&Job { name: "child", script: SUBPROCESS, args: &[] });
    within_5_points(&d, &["main_thread_ipc"], t["child_s"].as_f64().unwrap(), "ipc_wait", &script, 5);
    let first = &d["findings"][0];
    assert_eq!(first["evidence"]["domain"], "subprocess", "{first:#}");
    let advice = first["advice"][0].as_str().unwrap();
    assert!(advice.contains("starts a process") && !advice.contains("a batch in advance"), "{advice}");
}

/// numpy's matrix product, which lets the GIL go for its BLAS call: native code, not Python. The
/// job times the call's CPU time: a wait for a core in it is `core_wait`'s.
const NATIVE: &str = r#"import json, sys, time
import numpy as np
a = np.random.rand(400, 400)
def work(n):
    x = 0
    for i in range(n): x += i
    return x
t0 = time.perf_counter(); native = 0.0
while time.perf_counter() - t0 < 8:
    s = time.thread_time()
    b = a @ a
    native += time.thread_time() - s
    work(20000)
json.dump({"loop_s": time.perf_counter() - t0, "native_s": native}, open(sys.argv[1], "w"))
"#;

#[test]
fn native_code_that_releases_the_gil_is_not_python() {
    let (t, d, script) = diagnose(&Job { name: "native", script: NATIVE, args: &[] });
    within_5_points(&d, &["main_thread_native"], t["native_s"].as_f64().unwrap(), "main_thread_native", &script, 11);
    let advice = d["findings"][0]["advice"][0].as_str().unwrap();
    assert!(!advice.contains("make it tensor operations"), "{advice}");
}

/// Pure Python while two processes spin beside it on its one core (all three pinned to the first
/// CPU they may use, so the rest of the machine, and the tests running on it, stay free): the
/// kernel says R all along, the thread's clocks say how much of that was a wait for the core.
const SATURATED: &str = r#"import json, os, sys, time
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
def work(n):
    x = 0
    for i in range(n):
        x += i
    return x
t0 = time.perf_counter(); c0 = time.thread_time()
while time.perf_counter() - t0 < 8:
    work(20000)
wall = time.perf_counter() - t0; cpu = time.thread_time() - c0
json.dump({"loop_s": wall, "cpu_s": cpu}, open(sys.argv[1], "w"))
"#;

/// A process that spins on the same core as [`SATURATED`].
const SPIN: &str = "import os\nos.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\nwhile True: pass\n";

#[test]
fn on_a_saturated_core_the_wait_for_it_is_measured() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let _spin: Vec<super::support::KillOnDrop> = (0..2)
        .map(|_| super::support::KillOnDrop::spawn(std::process::Command::new("python3").args(["-c", SPIN])))
        .collect();
    let (t, d, script) = diagnose_alone(&Job { name: "saturated", script: SATURATED, args: &[] });
    let (loop_s, cpu_s) = (t["loop_s"].as_f64().unwrap(), t["cpu_s"].as_f64().unwrap());
    let wall = d["ledger"]["wall_s"].as_f64().unwrap();
    let python = share(&d, &["main_thread_python"]);
    assert!((python - cpu_s / wall).abs() < 0.05, "python {python:.3}, on its CPU {:.3}: {d:#}", cpu_s / wall);
    let waited = share(&d, &["main_thread_core_wait"]);
    assert!((waited - (loop_s - cpu_s) / wall).abs() < 0.05, "core wait {waited:.3}: {d:#}");
    assert!(waited > 0.3, "two spinning on its core: {waited:.3}");
    let python = d["findings"].as_array().unwrap().iter().find(|f| f["id"] == "main_thread_python").unwrap();
    // Lines 4 and 5 share `work`'s loop: the cause is the function.
    assert!(python["evidence"]["function"].as_str().unwrap().ends_with(&format!("{script} work")), "{python:#}");
    // Measured, not hedged: no word that the running time may hold the wait.
    assert!(python["limits"].as_array().is_none_or(|l| l.is_empty()), "{python:#}");
}

/// A launcher shaped as torchrun's: a script named `torchrun` that starts one rank with the
/// environment torchrun gives it and watches it in a monitor loop. The rank is sampled and
/// diagnosed; the launcher is neither sampled nor named.
const LAUNCHER: &str = r#"#!/usr/bin/env python3
import json, os, subprocess, sys, time
env = dict(os.environ, RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
rank = subprocess.Popen([sys.executable, sys.argv[2]], env=env)
while rank.poll() is None:
    time.sleep(0.1)
json.dump({"launcher": os.getpid(), "rank": rank.pid}, open(sys.argv[1], "w"))
"#;

const RANK: &str = r#"import time
def work(n):
    x = 0
    for i in range(n):
        x += i
    return x
t0 = time.perf_counter()
while time.perf_counter() - t0 < 5:
    work(20000)
"#;

#[test]
fn a_launcher_is_not_the_job_its_rank_is() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = super::support::fresh_dir("thread-clocks", "launcher");
    std::fs::create_dir(dir.join("bin")).unwrap();
    let launcher = dir.join("bin/torchrun");
    std::fs::write(&launcher, LAUNCHER).unwrap();
    std::fs::set_permissions(&launcher, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(dir.join("train.py"), RANK).unwrap();
    let (truth, rec) = (dir.join("truth.json"), dir.join("r.db"));
    let mut cmd = gpulse(None);
    cmd.env("GPULSE_FAKE_NVML_SCENARIO", dir.join("none.json"));
    std::fs::write(dir.join("none.json"), r#"{"init_error": 9, "devices": []}"#).unwrap();
    cmd.args(["run", "--status", "off", "--no-report", "--interval", "200ms", "-o"]).arg(&rec).arg("--");
    cmd.arg(&launcher).arg(&truth).arg(dir.join("train.py"));
    let (code, _, err) = run(&mut cmd);
    assert_eq!(code, 0, "{err}");
    let t: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&truth).unwrap()).unwrap();
    let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(&rec));
    assert_eq!(code, 0, "{err}");
    let d: serde_json::Value = serde_json::from_str(&out).unwrap();
    let sampled: Vec<u64> = d["stacks"].as_array().unwrap().iter().map(|p| p["pid"].as_u64().unwrap()).collect();
    assert_eq!(sampled, [t["rank"].as_u64().unwrap()], "{:#}", d["stacks"]);
    let first = &d["findings"][0];
    assert_eq!(first["id"], "main_thread_python", "{d:#}");
    let site = first["evidence"]["site"].as_str().unwrap();
    assert!(site.contains("train.py:") && site.ends_with(" work"), "{first:#}");
    assert!(!out.contains("torchrun:"), "the launcher's frames are nowhere: {d:#}");
}

/// Start-up split by what the main thread did: an import that runs 3.5 s of module code, then
/// 2 s of the job's own `build_index`, then the loop. Each activity's share of the start-up is
/// within 5 points of the job's own timing, and the largest is named with its line.
const STARTUP: &str = r#"import json, os, sys, time
t0 = time.perf_counter()
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "slowmod.py"), "w") as f:
    f.write("import time\nt = time.perf_counter()\nx = 0\nwhile time.perf_counter() - t < 3.5:\n    x += 1\n")
sys.path.insert(0, here)
a = time.perf_counter()
import slowmod
import_s = time.perf_counter() - a
def build_index():
    t = time.perf_counter()
    d = {}
    while time.perf_counter() - t < 2.0:
        d[len(d) % 1000] = str(len(d))
    return d
a = time.perf_counter()
build_index()
build_s = time.perf_counter() - a
import gpulse
start_s = time.perf_counter() - t0
while time.perf_counter() - t0 < start_s + 5:
    time.sleep(0.02)
    gpulse.step()
json.dump({"import_s": import_s, "build_s": build_s, "start_s": start_s}, open(sys.argv[1], "w"))
"#;

#[test]
fn start_up_is_split_by_what_the_main_thread_did() {
    let (t, d, _) = diagnose(&Job { name: "startup", script: STARTUP, args: &[] });
    let f = d["findings"].as_array().unwrap().iter().find(|f| f["id"] == "startup").unwrap_or_else(|| panic!("{d:#}"));
    let parts = f["evidence"]["startup_split"].as_array().unwrap_or_else(|| panic!("no split: {f:#}"));
    let share = |a: &str| parts.iter().find(|p| p["activity"] == a).map_or(0.0, |p| p["share"].as_f64().unwrap());
    // The build, sampled whole, within 5 points of the start-up; the import, which begins as
    // the interpreter does, only where the sampler had opened the process: never more than the
    // job timed, and most of it.
    let seconds = |a: &str| parts.iter().find(|p| p["activity"] == a).map_or(0.0, |p| p["seconds"].as_f64().unwrap());
    let start = t["start_s"].as_f64().unwrap();
    let (build, own_build) = (seconds("own_code"), t["build_s"].as_f64().unwrap());
    assert!((build - own_build).abs() / start < 0.05, "build {build:.2} s, the job's own {own_build:.2} s: {f:#}");
    let (import, own_import) = (seconds("imports"), t["import_s"].as_f64().unwrap());
    assert!(
        import <= own_import + 0.25 * start && import >= 0.5 * own_import,
        "import {import:.2} s, the job's own {own_import:.2} s: {f:#}"
    );
    let _ = share;
    assert_eq!(parts[0]["activity"], "imports", "{f:#}");
    assert!(parts[0]["site"].as_str().unwrap().contains("slowmod.py:"), "{f:#}");
    let own = parts.iter().find(|p| p["activity"] == "own_code").unwrap();
    assert!(own["site"].as_str().unwrap().ends_with(" build_index"), "{f:#}");
    // The module imported is named from its file: the title says what the import was.
    assert_eq!(parts[0]["module"], "slowmod", "{f:#}");
    assert!(f["title"].as_str().unwrap().contains("mostly importing slowmod ("), "{f:#}");
    assert!(f["advice"][0].as_str().unwrap().contains("-X importtime"), "{f:#}");
}
