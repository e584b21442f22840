//! `serve` and `record` without `--pid` read the main thread of every GPU process on the node:
//! real Python processes that gpulse did not start, each timing itself, listed as GPU processes
//! by the stand-in NVML; `/metrics` checked by promtool and a real Prometheus, `/api` and the
//! recordings against the processes' own clocks.

use std::process::{Command, Stdio};

use super::serve::{Serving, free_port, get, have_prometheus, prometheus, prometheus_query, scrape_config};
use super::support::{KillOnDrop, fresh_dir, gpulse, run, scenario_file, wait_until};

/// How long each job runs: the servers read it the whole time.
const JOB_S: f64 = 9.0;

/// A job that sleeps in its loop, and says the share of its wall time spent in `time.sleep`, less
/// its wait for a core as it woke (its thread's own `schedstat`: on a loaded host that wait is
/// `core_wait`'s).
const SLEEPER: &str = r#"
import json, os, sys, time
clock = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
queued = lambda: int(os.pread(clock, 100, 0).split()[1]) / 1e9
t0 = time.perf_counter(); slept = 0.0
while time.perf_counter() - t0 < float(sys.argv[1]):
    a = time.perf_counter(); q = queued(); time.sleep(0.05); slept += time.perf_counter() - a - (queued() - q)
wall = time.perf_counter() - t0
print(json.dumps({"sleep_share": slept / wall}), flush=True)
"#;

/// A job that runs Python a quarter of the time and sleeps the rest (a full core for the whole test
/// would slow the tests beside it), and says the share of its wall time it was on a CPU (its
/// thread's own clock: under load the rest of its Python is a wait for a core) and asleep (less
/// its wait for a core as it woke, as [`SLEEPER`] says it).
const SPINNER: &str = r#"
import json, os, sys, time
clock = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
queued = lambda: int(os.pread(clock, 100, 0).split()[1]) / 1e9
def spin(n):
    s = 0
    for i in range(n):
        s += i * i
    return s
t0 = time.perf_counter(); c0 = time.thread_time(); slept = 0.0
while time.perf_counter() - t0 < float(sys.argv[1]):
    spin(60000)
    a = time.perf_counter(); q = queued(); time.sleep(0.015); slept += time.perf_counter() - a - (queued() - q)
wall = time.perf_counter() - t0
print(json.dumps({"cpu_share": (time.thread_time() - c0) / wall, "sleep_share": slept / wall}), flush=True)
"#;

fn job(dir: &std::path::Path, name: &str, text: &str) -> KillOnDrop {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    KillOnDrop::spawn(Command::new("python3").arg(&path).arg(JOB_S.to_string()).stdout(Stdio::piped()))
}

fn truth(job: KillOnDrop, key: &str) -> f64 {
    let out = job.wait_with_output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v[key].as_f64().unwrap()
}

/// Two GPUs: GPU 0 idle, with the sleeper; GPU 1 busy, with the spinner and a process that is
/// not Python.
fn scenario(sleeper: u32, spinner: u32, other: u32) -> String {
    let gpu = |i: u32, util: u32, procs: &[u32]| {
        let procs: Vec<String> = procs
            .iter()
            .map(|p| format!(r#"{{"pid": {p}, "name": "python3", "used_memory_mib": 1024, "sm_util_pct": {util}}}"#))
            .collect();
        format!(
            r#"{{"name": "NVIDIA H200", "uuid": "GPU-0000000{i}-aaaa-4000-8000-000000000000", "pci_bus_id": "00000000:1{i}:00.0",
              "base": {{"util_gpu_pct": {util}, "util_mem_pct": 1, "memory_total_mib": 143771, "memory_used_mib": 4096}},
              "processes": [{}]}}"#,
            procs.join(",")
        )
    };
    format!(
        r#"{{"driver_version": "580.159.04", "cuda_driver_version": 13000, "devices": [{}, {}]}}"#,
        gpu(0, 5, &[sleeper]),
        gpu(1, 95, &[spinner, other])
    )
}

/// Each (pid, state) series' value in an exposition, from one family.
fn series(text: &str, family: &str) -> Vec<(u32, String, f64)> {
    text.lines()
        .filter_map(|l| l.strip_prefix(family)?.strip_prefix('{'))
        .filter_map(|l| {
            let (labels, value) = l.rsplit_once("} ")?;
            let get = |k: &str| labels.split(',').find_map(|kv| kv.strip_prefix(&format!("{k}=\""))?.strip_suffix('"'));
            Some((get("pid")?.parse().ok()?, get("state")?.to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// A process's seconds per state, and its share of them in `state`.
fn share(s: &[(u32, String, f64)], pid: u32, state: &str) -> (f64, f64) {
    let total: f64 = s.iter().filter(|x| x.0 == pid).map(|x| x.2).sum();
    let mine: f64 = s.iter().filter(|x| x.0 == pid && x.1 == state).map(|x| x.2).sum();
    (total, mine / total.max(1e-9))
}

/// A process's profile in a recording's diagnosis: its rate and its share in `state`.
fn profile(v: &serde_json::Value, pid: u32, state: &str) -> (f64, f64) {
    let p = v["stacks"].as_array().unwrap().iter().find(|p| p["pid"] == pid).unwrap_or_else(|| panic!("{pid}: {v}"));
    let s = p["states"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["state"] == state)
        .map_or(0.0, |s| s["share"].as_f64().unwrap());
    (p["rate_hz"].as_f64().unwrap(), s)
}

#[test]
fn serve_and_record_read_every_gpu_processs_main_thread_at_a_rate_set_by_its_gpus_wait() {
    // The jobs time themselves: never beside the test that saturates a core on purpose.
    let _one = super::thread_clocks::ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = fresh_dir("node-stacks", "serve");
    let sleeper = job(&dir, "sleeper.py", SLEEPER);
    let spinner = job(&dir, "spinner.py", SPINNER);
    let other = KillOnDrop::spawn(Command::new("sleep").arg("60"));
    let scenario = scenario_file("node-stacks", &scenario(sleeper.id(), spinner.id(), other.id()));
    let (a, b) = (sleeper.id(), spinner.id());
    let served = dir.join("served.db");
    let recorded = dir.join("recorded.db");
    let s = Serving::from_child(KillOnDrop::spawn(
        gpulse(Some(scenario.to_str().unwrap()))
            .args(["serve", "--listen", "127.0.0.1:0", "--interval", "200ms", "--no-auth", "--record"])
            .arg(&served)
            .stderr(Stdio::piped()),
    ));
    let record = KillOnDrop::spawn(
        gpulse(Some(scenario.to_str().unwrap()))
            .args(["record", "--interval", "200ms", "--duration", "6s", "-o"])
            .arg(&recorded)
            .stderr(Stdio::piped()),
    );
    let scraped = have_prometheus("a real Prometheus scraping the node's main threads").then(|| {
        let port = free_port();
        scrape_config(&dir, &s.addr, false);
        (prometheus(&dir, port), port)
    });
    const FAMILY: &str = "gpulse_process_main_thread_seconds_total";
    let mut text = String::new();
    // The live counters hold a block that caught one side of a thread until it catches the
    // other, up to 16 blocks of 2 s at a low rate: the first count can take 32 s.
    wait_until(60, "four seconds of each job's main thread in /metrics", || {
        text = get(&s.addr, "/metrics", &[]).2;
        let s = series(&text, FAMILY);
        share(&s, a, "sleep").0 >= 4.0 && share(&s, b, "python").0 >= 4.0
    });
    assert!(text.contains(&format!("# TYPE {FAMILY} counter")), "{text}");
    assert!(!text.contains("gpulse_job_main_thread_seconds_total"), "no job is watched: {text}");
    let _ = super::serve::promtool_dcgm_naming_only(&text, "promtool on the node's main threads");
    let exported = series(&text, FAMILY);
    assert!(!exported.iter().any(|x| x.0 == other.id()), "not Python, never a series: {text}");

    // What each process's main thread does now, with its line.
    let (code, _, api) = get(&s.addr, "/api/v1/snapshot", &[]);
    assert_eq!(code, 200, "{api}");
    let v: serde_json::Value = serde_json::from_str(&api).unwrap();
    let now = |pid: u32| {
        v["gpus"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["processes"].as_array().unwrap())
            .find(|p| p["pid"] == pid)
            .unwrap()["main_thread"]
            .clone()
    };
    assert_eq!(now(a)["state"], "sleep", "{api}");
    assert!(now(a)["site"].as_str().unwrap().contains("sleeper.py:"), "{api}");
    assert!(now(b)["site"].as_str().unwrap().contains("spinner.py:"), "{api}");
    assert!(now(other.id()).is_null(), "{api}");

    if let Some((_prom, port)) = &scraped {
        wait_until(30, "Prometheus' first scrape of the main threads", || {
            std::panic::catch_unwind(|| prometheus_query(*port, FAMILY)).is_ok_and(|r| r.len() >= 2)
        });
        let got = prometheus_query(*port, &format!("sum by (pid) ({FAMILY}{{state=\"sleep\"}})"));
        assert!(got.iter().any(|(l, v)| l["pid"] == a.to_string() && *v > 1.0), "{got:?}");
    }

    // Each job's own timing, against what /metrics said of it. The spinner only runs Python:
    // what it is not on a CPU it waits for one (its share on a CPU varies with the load, so it is
    // held to the recording below, which spans the job's whole life as its clock does).
    let slept = truth(sleeper, "sleep_share");
    let spun = spinner.wait_with_output().unwrap();
    let spun: serde_json::Value = serde_json::from_slice(&spun.stdout).unwrap();
    let (on_cpu, paused) = (spun["cpu_share"].as_f64().unwrap(), spun["sleep_share"].as_f64().unwrap());
    let (_, sleep) = share(&exported, a, "sleep");
    let (_, python) = share(&exported, b, "python");
    let (_, core_wait) = share(&exported, b, "core_wait");
    assert!((sleep - slept).abs() <= 0.05, "sleep {sleep:.3} against the job's {slept:.3}");
    let (_, pause) = share(&exported, b, "sleep");
    assert!((pause - paused).abs() <= 0.05, "the spinner's sleep {pause:.3} against its {paused:.3}: {text}");
    assert!(python + core_wait >= 0.95 - pause, "python {python:.3} and core_wait {core_wait:.3}: {text}");

    // SAFETY: a plain signal to the server this test started and still holds.
    unsafe { libc::kill(s.child.id() as libc::pid_t, libc::SIGTERM) };
    let later = s.later_lines().join("\n");
    let out = s.child.wait_with_output().unwrap();
    assert!(out.status.success(), "serve: {:?} {later}", out.status);
    let out = record.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "record: {said}");
    assert!(said.contains("their processes' Python main threads"), "{said}");

    // Both recordings keep the stacks: the diagnosis reads each process, and the idle GPU's
    // process is read at over twice the busy one's rate. `serve`'s spans the jobs' lives.
    for (db, whole_life) in [(&served, true), (&recorded, false)] {
        let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(db));
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let (rate_a, sleep) = profile(&v, a, "sleep");
        let (rate_b, python) = profile(&v, b, "python");
        let (_, core_wait) = profile(&v, b, "core_wait");
        assert!((sleep - slept).abs() <= 0.05, "{}: sleep {sleep:.3} against {slept:.3}", db.display());
        if whole_life {
            assert!((python - on_cpu).abs() <= 0.05, "{}: python {python:.3} against {on_cpu:.3}", db.display());
        }
        let (_, pause) = profile(&v, b, "sleep");
        assert!(python + core_wait >= 0.95 - pause, "{}: python {python:.3}, core_wait {core_wait:.3}", db.display());
        assert!(rate_a > 2.0 * rate_b, "{}: {rate_a} Hz on the idle GPU, {rate_b} Hz on the busy one", db.display());
        // The process the ledger does not read is read against its own GPU's idle time: GPU 0
        // idles 95% of the time, GPU 1 5%.
        let profiles = v["stacks"].as_array().unwrap();
        let other = profiles.iter().skip(1).find(|p| p["pid"] == a || p["pid"] == b).unwrap();
        let (gpu, idle, state, own) =
            if profiles[0]["pid"] == b { (0, 0.95, "sleep", slept) } else { (1, 0.05, "python", python) };
        let span = other["span_s"].as_f64().unwrap();
        let other = &other["while_gpu_idle"];
        assert_eq!(other["gpu"], gpu, "{other}");
        let idle_s = other["idle_s"].as_f64().unwrap();
        assert!((idle_s / span - idle).abs() <= 0.02, "{}: {idle_s} s idle of {span} s: {other}", db.display());
        let top = &other["states"][0];
        assert!(
            top["state"] == state && (top["share"].as_f64().unwrap() - own).abs() <= 0.05,
            "{}: {other}",
            db.display()
        );
    }
}

/// A real `serve --record` on an H100 (`tests/fixtures/h100-node`) beside two CUDA jobs it did
/// not start, on the one busy GPU: each read at a quarter of 50 Hz, the host-bound one's Python
/// within 5 points of its own timing, the GPU-bound one never running Python at its own lines.
#[test]
fn a_real_node_recording_reads_each_gpu_process_as_it_timed_itself() {
    let dir = super::support::fixture("h100-node");
    let truth = |name: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{name}.truth.json"))).unwrap()).unwrap()
    };
    let (host, gpu) = (truth("python"), truth("gpu_bound"));
    let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(dir.join("served.db")));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for t in [&host, &gpu] {
        let (rate, _) = profile(&v, t["pid"].as_u64().unwrap() as u32, "python");
        assert!((10.0..=15.0).contains(&rate), "{rate} Hz: {:#}", v["stacks"]);
    }
    let (_, python) = profile(&v, host["pid"].as_u64().unwrap() as u32, "python");
    let own = host["mech_s"].as_f64().unwrap() / host["loop_s"].as_f64().unwrap();
    assert!((python - own).abs() <= 0.05, "python {python:.3} against its own {own:.3}");
    // Nothing of the GPU-bound loop is waiting for its GPU to finish: its GPU never idles.
    let (_, sync) = profile(&v, gpu["pid"].as_u64().unwrap() as u32, "gpu_sync");
    assert!(sync < 0.02, "{sync}");
}
