//! The main thread end to end: `gpulse run` of a real Python loop on the stand-in GPU (which
//! lists the job's process as holding it and never busy), then `diagnose` of the recording: the
//! loop's idle time split by what its main thread did, against the loop's own timing.

use std::path::Path;

use super::support::{gpulse, root, run};

/// A folder removed with everything in it when the test ends, passed or not.
struct TempDir(super::support::Temp);

impl TempDir {
    fn new(name: &str) -> Self {
        Self(super::support::fresh_dir("main-thread", name))
    }
}

/// One idle H200 whose process list holds the job gpulse started.
const SCENARIO: &str = r#"{
  "devices": [{
    "name": "NVIDIA H200",
    "uuid": "GPU-00000000-0000-0000-0000-000000000038",
    "pci_bus_id": "00000000:00:06.0",
    "base": {"util_gpu_pct": 0, "util_mem_pct": 0, "memory_total_bytes": 150754820096, "memory_used_bytes": 1073741824},
    "processes": [{"pid": "child", "used_memory_mib": 1024}]
  }]
}"#;

/// Each step sleeps 30 ms (line 11) and runs 20 ms of pure Python (line 6), timing both itself;
/// it marks its steps and writes its own figures at the end.
const LOOP: &str = r#"import json, sys, time
import gpulse
def work(ms):
    end = time.perf_counter() + ms / 1000
    x = 0
    while time.perf_counter() < end: x += 1
    return x
def step():
    t0 = time.perf_counter()
    slept = time.perf_counter()
    time.sleep(0.03)
    slept = time.perf_counter() - slept
    c = time.thread_time()
    work(20)
    return slept, time.thread_time() - c
gpulse.step()
t0 = time.perf_counter()
slept = cpu = 0.0
while time.perf_counter() - t0 < float(sys.argv[2]):
    s, c = step()
    slept += s
    cpu += c
    gpulse.step()
loop = time.perf_counter() - t0
json.dump({"loop_s": loop, "sleep_s": slept, "cpu_s": cpu}, open(sys.argv[1], "w"))
"#;

fn diagnose_json(rec: &Path) -> serde_json::Value {
    let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(rec));
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn a_sleep_in_the_loop_is_named_with_its_line_and_its_time() {
    sleep_and_python("gpu", SCENARIO);
}

/// Without a driver, a CPU-only job's time gets the same breakdown.
#[test]
fn without_a_driver_the_breakdown_still_comes() {
    sleep_and_python("nodriver", r#"{"init_error": 9, "devices": []}"#);
}

fn sleep_and_python(name: &str, scenario_json: &str) {
    let dir = TempDir::new(name);
    let scenario = dir.0.join("scenario.json");
    std::fs::write(&scenario, scenario_json).unwrap();
    let script = dir.0.join("train_loop.py");
    std::fs::write(&script, LOOP).unwrap();
    let truth = dir.0.join("truth.json");
    let rec = dir.0.join("r.db");
    let mut cmd = gpulse(None);
    cmd.env("GPULSE_FAKE_NVML_SCENARIO", &scenario).env("PYTHONPATH", root().join("python"));
    cmd.args(["run", "--status", "off", "--no-report", "--interval", "200ms", "--stacks-hz", "100", "-o"]);
    cmd.arg(&rec).args(["--", "python3"]).arg(&script).arg(&truth).arg("8");
    let (code, _, err) = run(&mut cmd);
    assert_eq!(code, 0, "{err}");
    assert_eq!(err.contains("recording the host only"), name == "nodriver", "{err}");
    let t: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&truth).unwrap()).unwrap();
    let (loop_s, sleep_s) = (t["loop_s"].as_f64().unwrap(), t["sleep_s"].as_f64().unwrap());
    let d = diagnose_json(&rec);
    let wall = d["ledger"]["wall_s"].as_f64().unwrap();
    let accounts = d["ledger"]["accounts"].as_array().unwrap();
    let secs = |name: &str| -> f64 {
        accounts.iter().filter(|a| a["account"] == name).map(|a| a["seconds"].as_f64().unwrap()).sum()
    };
    // The GPU never works: the loop's whole time is host-side, split by the main thread.
    let truth_share = sleep_s / wall;
    let share = secs("main_thread_sleep") / wall;
    assert!(
        (share - truth_share).abs() < 0.05,
        "sleep: {share:.3} of the wall, the loop timed {truth_share:.3}: {d:#}"
    );
    // The loop's clock counts its work's wait for a core as work: Python on a CPU is the
    // thread's own clock, and with the wait for a core it is the loop's.
    let (work_truth, cpu_truth) = ((loop_s - sleep_s) / wall, t["cpu_s"].as_f64().unwrap() / wall);
    let python = secs("main_thread_python") / wall;
    let waited = secs("main_thread_core_wait") / wall;
    assert!((python - cpu_truth).abs() < 0.05, "python: {python:.3} against {cpu_truth:.3} on a CPU: {d:#}");
    assert!(
        (python + waited - work_truth).abs() < 0.05,
        "python and core_wait: {:.3} against {work_truth:.3}: {d:#}",
        python + waited
    );
    assert_eq!(secs("host_side"), 0.0, "{d:#}");
    assert!(!accounts.iter().any(|a| a["label"] == "unexplained: the GPU idle inside the loop"), "{d:#}");
    // The finding names the mechanism and the exact line.
    let findings = d["findings"].as_array().unwrap();
    let sleep = findings.iter().find(|f| f["id"] == "sleep_in_loop").unwrap_or_else(|| panic!("{d:#}"));
    let dir_name = dir.0.file_name().unwrap().to_string_lossy();
    assert_eq!(sleep["evidence"]["site"], format!("{dir_name}/train_loop.py:11 step"), "{sleep:#}");
    assert!(sleep["title"].as_str().unwrap().contains("time.sleep(0.03)"), "{sleep:#}");
    assert!(sleep["advice"][0].as_str().unwrap().contains("take the sleep out"), "{sleep:#}");
    let python = findings.iter().find(|f| f["id"] == "main_thread_python").unwrap_or_else(|| panic!("{d:#}"));
    assert_eq!(python["evidence"]["site"], format!("{dir_name}/train_loop.py:6 work"), "{python:#}");
    assert!(!findings.iter().any(|f| f["id"] == "host_bound" || f["id"] == "process_bound"), "{d:#}");
    // The stacks list: the job's process first, with its states' shares of its sampled time.
    let stacks = &d["stacks"][0];
    assert_eq!(stacks["role"], "main", "{stacks:#}");
    // 8 s asked at 100 Hz: the sampler keeps to its 1 % budget, so a loaded machine gets fewer
    // (114 on CI's, 70 Hz); enough for the shares checked above.
    assert!(stacks["samples"].as_u64().unwrap() > 80, "{stacks:#}");
    let state_share = |s: &str| {
        stacks["states"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["state"] == s)
            .map_or(0.0, |x| x["share"].as_f64().unwrap())
    };
    // Over the process's whole sampled time (start-up included) the sleep is most of it.
    assert!(state_share("sleep") > 0.4, "{stacks:#}");
}

/// `record --pid` samples the followed process's main thread as `run` does, and `--no-stacks`
/// keeps it out.
#[test]
fn record_pid_samples_the_followed_python_process() {
    let dir = TempDir::new("record");
    let script = dir.0.join("nap.py");
    std::fs::write(&script, "import time\nwhile True:\n    time.sleep(0.01)\n").unwrap();
    let child = super::support::KillOnDrop::spawn(std::process::Command::new("python3").arg(&script));
    let pid = child.id().to_string();
    let record = |name: &str, extra: &[&str]| {
        let rec = dir.0.join(name);
        let (code, _, err) = run(gpulse(Some("scenarios/h200_idle.json"))
            .args(["record", "--duration", "3s", "--pid", &pid])
            .args(extra)
            .arg("-o")
            .arg(&rec));
        assert_eq!(code, 0, "{err}");
        gpulse_record::read(&rec).unwrap_or_else(|e| panic!("{e}")).stacks
    };
    let stacks = record("with.db", &[]);
    let at_sleep = stacks
        .samples
        .iter()
        .filter(|s| stacks.frames_of(s.stack).last().is_some_and(|f| f.line == 3 && f.file.ends_with("nap.py")))
        .count();
    assert!(at_sleep >= 10, "{} samples, {at_sleep} at nap.py:3", stacks.samples.len());
    assert!(record("without.db", &["--no-stacks"]).samples.is_empty());
}

/// Diagnoses the H200 recording `tests/fixtures/h200-main-thread/<name>.db` and checks that its
/// first finding is `id` at `site`, its share of the wall time within 5 points of the loop's own
/// timing of the mechanism (`<name>.truth.json`). Returns the diagnosis.
fn leads_within_5_points(name: &str, id: &str, site: &str) -> serde_json::Value {
    leads_within_5_points_in("h200-main-thread", name, id, site)
}

/// [`leads_within_5_points`] for the recordings of the fixture folder `folder`.
fn leads_within_5_points_in(folder: &str, name: &str, id: &str, site: &str) -> serde_json::Value {
    let dir = super::support::fixture(folder);
    let truth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{name}.truth.json"))).unwrap()).unwrap();
    let d = diagnose_json(&dir.join(format!("{name}.db")));
    let first = &d["findings"][0];
    assert_eq!(first["id"], id, "{d:#}");
    assert_eq!(first["evidence"]["site"], site);
    let mech = truth["mech_s"].as_f64().unwrap() / d["ledger"]["wall_s"].as_f64().unwrap();
    let share = first["cost"]["wall_share"].as_f64().unwrap();
    // The headline, the title and the ledger line print the one number.
    let pct = gpulse_diagnose::pct(share);
    assert!(first["title"].as_str().unwrap().contains(&format!(": {pct} of the wall time")), "{pct}: {first:#}");
    assert!(d["summary"].as_str().unwrap().contains(&format!(" {pct} of the wall time")), "{pct}: {}", d["summary"]);
    assert!((share - mech).abs() < 0.05, "{name}: {share:.3} of the wall, the loop's own timing {mech:.3}");
    d
}

/// Two real H200 recordings (`tests/fixtures/h200-main-thread/`): a CUDA loop that fetches each
/// step's data over a local socket is told so first, at its line, within 5 points of the loop's
/// own timing of its `recv`s; a GPU-bound loop gets no host-side finding.
#[test]
fn on_the_h200_a_network_wait_leads_and_a_gpu_bound_loop_has_none() {
    leads_within_5_points("network", "network_wait", "device/main_thread_workloads.py:148 one_host_step");
    let d = diagnose_json(&super::support::fixture("h200-main-thread/gpu_bound.db"));
    let ids: Vec<&str> = d["findings"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&"healthy"), "{ids:?}");
    for host in [
        "main_thread_python",
        "gil_contention",
        "sleep_in_loop",
        "network_wait",
        "disk_wait",
        "ipc_wait",
        "lock_wait",
        "main_thread_blocked",
        "host_bound",
        "process_bound",
    ] {
        assert!(!ids.contains(&host), "{ids:?}");
    }
    assert!(d["stacks"][0]["samples"].as_u64().unwrap() > 300, "{:#}", d["stacks"]);
    // Its GPU at the power limit under dense math is a fact beside the clean bill of health:
    // the headline promises no speed-up for it.
    let headline = d["summary"].as_str().unwrap();
    assert!(headline.starts_with("No bottleneck found") && !headline.contains("steps/s"), "{headline}");
}

/// Real H200 recordings (`tests/fixtures/h200-main-thread/*_saturated.db`): a CUDA loop that
/// sleeps 20 ms a step, then one that runs 20 ms of Python, while other processes keep all 16
/// cores busy. The host is saturated, but the main thread's samples say what the GPU waited for:
/// the sleep, within 5 points of the loop's own timing of its sleeps. The saturation stays a fact of the run and claims none of the time.
#[test]
fn on_a_saturated_h200_host_the_main_thread_says_what_the_gpu_waited_for() {
    let d =
        leads_within_5_points("sleep_saturated", "sleep_in_loop", "device/main_thread_workloads.py:143 one_host_step");
    let accounts = d["ledger"]["accounts"].as_array().unwrap();
    assert!(accounts.iter().all(|a| a["account"] != "host_saturated"), "{accounts:#?}");
    let saturated = d["findings"].as_array().unwrap().iter().find(|f| f["id"] == "host_saturated");
    let saturated = saturated.unwrap_or_else(|| panic!("the host was saturated: {d:#}"));
    assert_eq!(saturated["severity"], "info", "{saturated:#}");
    assert!(saturated.get("cost").is_none(), "{saturated:#}");
    assert!(d["summary"].as_str().unwrap().contains("sleeping"), "{}", d["summary"]);
    // Pure Python on the same saturated host: told as Python, within 5 points of its own timing,
    // saying that the kernel's "running" holds the wait for a core, and advising cores first.
    let d = leads_within_5_points(
        "python_saturated",
        "main_thread_python",
        "device/main_thread_workloads.py:40 busy_python",
    );
    let first = &d["findings"][0];
    let said =
        |key: &str| first[key].as_array().is_some_and(|a| a.iter().any(|l| l.as_str().unwrap().contains("core")));
    assert!(said("limits") && said("advice"), "{first:#}");
    let saturated = d["findings"].as_array().unwrap().iter().find(|f| f["id"] == "host_saturated");
    assert_eq!(saturated.expect("the host was saturated")["severity"], "info");
}

/// A real H100 recording with the thread's clocks (schema 5, `tests/fixtures/h100-thread-clocks/`):
/// a CUDA loop that writes 64 KiB, flushes and fsyncs each step. The fsync, much of it on a CPU in
/// the kernel with the GIL released, is file I/O at its line, within 5 points of the loop's own
/// timing of it; no part of it is called Python.
#[test]
fn on_an_h100_fsync_in_the_loop_is_file_io_by_the_threads_clocks() {
    let d = leads_within_5_points_in(
        "h100-thread-clocks",
        "fsync",
        "disk_wait",
        "device/main_thread_workloads.py:208 one_host_step",
    );
    let rec = gpulse_record::read(&super::support::fixture("h100-thread-clocks/fsync.db")).unwrap();
    assert!(rec.stacks.samples.iter().filter(|s| s.clock.is_some()).count() > 300, "the clocks were recorded");
    let python = d["findings"].as_array().unwrap().iter().find(|f| f["id"] == "main_thread_python");
    assert!(python.is_none_or(|p| !p["evidence"]["site"].as_str().unwrap().contains(":208 ")), "{d:#}");
}

/// A real H100 recording made by the sampler that reads the thread's state on both sides of its
/// stack (`tests/fixtures/h100-thread-clocks/fsync_cuda.db`): a CUDA loop that writes, flushes and
/// fsyncs each step. The fsync leads at its line within 5 points of the loop's own timing, with
/// advice for a sync to storage, not for reads. The matmuls' launches at `a @ a` (native code with
/// the GIL released on a GPU process) run beside the GPU's work, which the poll's busy time goes
/// to first: under a twentieth of the wall as idle time, and any finding of them gets advice for
/// launches as well as for CPU ops (the samples cannot tell the two apart), never CPU-op advice
/// alone.
#[test]
fn on_an_h100_an_fsync_gets_advice_for_a_sync_and_a_launch_line_for_launches() {
    let d = leads_within_5_points_in(
        "h100-thread-clocks",
        "fsync_cuda",
        "disk_wait",
        "device/main_thread_workloads.py:207 one_host_step",
    );
    let advice = |id: &str| -> String {
        let f = d["findings"].as_array().unwrap().iter().find(|f| f["id"] == id).unwrap_or_else(|| panic!("{d:#}"));
        f["advice"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect::<Vec<_>>().join(" | ")
    };
    let disk = advice("disk_wait");
    assert!(disk.contains("fsync") && disk.contains("every N steps") && !disk.contains("DataLoader"), "{disk}");
    let accounts = d["ledger"]["accounts"].as_array().unwrap();
    let at_launch = accounts.iter().filter(|a| a["label"].as_str().unwrap().ends_with(":38 gpu_work"));
    let launch_share: f64 = at_launch.map(|a| a["share"].as_f64().unwrap()).sum();
    assert!(launch_share > 0.0 && launch_share < 0.05, "{accounts:#?}");
    if d["findings"].as_array().unwrap().iter().any(|f| f["id"] == "main_thread_native") {
        let native = advice("main_thread_native");
        assert!(native.contains("launch") && native.contains("CUDA graphs"), "{native}");
    }
}

/// A real H100 recording (`tests/fixtures/h100-thread-clocks/disk.db`): a CUDA loop that reads a
/// 64 MiB file it dropped from the page cache each step, after a set-up that wrote the file in
/// the second the loop began. The storage counters' write falls in the loop's first second, but
/// the main thread's samples there are reading: the reads lead within 5 points of the loop's own
/// timing, and no second of the loop is called a checkpoint's write.
#[test]
fn on_an_h100_a_read_after_a_write_in_one_second_is_the_reads() {
    let d = leads_within_5_points_in(
        "h100-thread-clocks",
        "disk",
        "disk_wait",
        "device/main_thread_workloads.py:194 one_host_step",
    );
    let accounts = d["ledger"]["accounts"].as_array().unwrap();
    assert!(accounts.iter().all(|a| a["account"] != "storage_write"), "{accounts:#?}");
}

/// A real H100 recording (`tests/fixtures/h100-thread-clocks/gpu_bound.db`, made by a sampler
/// that says its reader sees the GIL): a GPU-bound CUDA loop whose main thread is blocked in its
/// kernel launches, torch having let the GIL go. Its loop is native code at the launching line,
/// as the GIL the reader saw says. A sampler that came in after the start-up may catch none of
/// the Python between launches, so the same recording with every held GIL read free must say the
/// same; the rule before the reader said so took that for Python.
#[test]
fn on_an_h100_a_loop_blocked_in_its_launches_is_native_code() {
    let path = super::support::fixture("h100-thread-clocks/gpu_bound.db");
    let rec = gpulse_record::read(&path).unwrap();
    assert_eq!(rec.stacks.processes[0].gil_read, Some(true));
    // The ground truth: the reader's own view of the GIL at the launching line.
    let at_launch: Vec<_> = rec
        .stacks
        .samples
        .iter()
        .filter(|s| s.kernel.state == 'R' && rec.stacks.frames_of(s.stack).last().is_some_and(|f| f.line == 38))
        .collect();
    let free = at_launch.iter().filter(|s| s.gil == gpulse_model::Gil::Free).count();
    assert!(at_launch.len() > 100 && free * 10 > at_launch.len() * 9, "{free} of {}", at_launch.len());
    let at_38 = |d: &serde_json::Value, state: &str| -> f64 {
        let states = d["stacks"][0]["states"].as_array().unwrap();
        states
            .iter()
            .filter(|s| s["state"] == state)
            .flat_map(|s| s["sites"].as_array().unwrap())
            .filter(|x| x["site"].as_str().unwrap().ends_with(":38 gpu_work"))
            .map(|x| x["share"].as_f64().unwrap())
            .sum()
    };
    let d = diagnose_json(&path);
    assert!(at_38(&d, "native") > 0.5 && at_38(&d, "python") < 0.02, "{:#}", d["stacks"]);
    assert!(d["findings"].as_array().unwrap().iter().any(|f| f["id"] == "healthy"), "{d:#}");
    // No held GIL caught at all: still native where the reader sees the GIL, Python where the
    // recording does not say so.
    let dir = super::support::fresh_dir("main-thread", "no-held-gil");
    let copy = dir.join("gpu_bound.db");
    std::fs::copy(&path, &copy).unwrap();
    let db = rusqlite::Connection::open(&copy).unwrap();
    db.execute("UPDATE stack_obs SET gil = 'free' WHERE gil = 'held'", []).unwrap();
    let d = diagnose_json(&copy);
    assert!(at_38(&d, "native") > 0.5 && at_38(&d, "python") < 0.02, "{:#}", d["stacks"]);
    db.execute("UPDATE stack_processes SET gil_read = NULL", []).unwrap();
    let d = diagnose_json(&copy);
    assert!(at_38(&d, "native") < 0.02 && at_38(&d, "python") > 0.5, "{:#}", d["stacks"]);
}
