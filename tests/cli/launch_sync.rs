//! Real H200 CUDA loops whose steps launch small work (`tests/fixtures/h200-launch/`), each timing
//! its own mechanism: a `.item()` after each of 20 tiny ops, 300 tiny ops launched with no sync,
//! and one 10 ms kernel of one thread that the host waits for. The host's launches and syncs are
//! the main thread's time, at the job's own line and function, within 5 points of the loop's own
//! timing; a kernel the host waits for is the GPU's.

use super::support::{fixture, gpulse, run};

fn diagnose(name: &str) -> serde_json::Value {
    let db = fixture(&format!("h200-launch/{name}.db"));
    let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(db));
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The loop's own seconds in its mechanism, as a share of the ledger's wall time.
fn truth_share(name: &str, d: &serde_json::Value) -> f64 {
    let path = fixture(&format!("h200-launch/{name}.truth.json"));
    let t: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    t["mech_s"].as_f64().unwrap() / d["ledger"]["wall_s"].as_f64().unwrap()
}

fn advice(f: &serde_json::Value) -> String {
    f["advice"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect::<Vec<_>>().join(" | ")
}

/// The first finding is `id` at `site`, its share of the wall within 5 points of the loop's own.
fn leads<'a>(d: &'a serde_json::Value, name: &str, id: &str, site: &str) -> &'a serde_json::Value {
    let first = &d["findings"][0];
    assert_eq!(first["id"], id, "{d:#}");
    assert!(first["evidence"]["site"].as_str().unwrap().ends_with(site), "{first:#}");
    let (got, want) = (first["cost"]["wall_share"].as_f64().unwrap(), truth_share(name, d));
    assert!((got - want).abs() < 0.05, "{got:.3} of the wall, the loop's own timing {want:.3}: {first:#}");
    first
}

/// Twenty tiny ops, each followed by `t.item()`: the launches and the syncs of one function are
/// one cause, and the queue drains at that function's `.item()`, not at the loop's own
/// synchronize after its matmuls, though the thread waits longer there: the advice is to sync
/// less often, not to take out a synchronize.
#[test]
fn an_item_after_each_small_op_drains_the_queue_in_its_own_function() {
    let d = diagnose("sync");
    let first = leads(&d, "sync", "main_thread_native", ":188 one_host_step");
    let drains = first["evidence"]["gpu_drains_at"].as_str().unwrap();
    assert!(drains.ends_with(":189 one_host_step"), "{first:#}");
    let a = advice(first);
    assert!(a.contains(".item() every N steps") && !a.contains("explicit synchronize"), "{a}");
}

/// 300 tiny ops a step with no sync: the host's launching is the step's time, told at its line
/// with launch advice.
#[test]
fn launching_tiny_ops_is_the_hosts_time() {
    let d = diagnose("launchbound");
    let first = leads(&d, "launchbound", "main_thread_native", ":196 one_host_step");
    assert!(first["title"].as_str().unwrap().contains("`t = t + 1`"), "{first:#}");
    assert!(advice(first).contains("CUDA graphs"), "{first:#}");
}

/// One thread of one block spinning 10 ms while the host waits: GPU-Util reads it busy, the SMs
/// barely are. That is the GPU's time, not the main thread's, and GPU-Util is said to mislead.
#[test]
fn a_kernel_the_host_waits_for_is_the_gpus_time() {
    let d = diagnose("sleepkernel");
    let accounts = d["ledger"]["accounts"].as_array().unwrap();
    let share = |pick: &dyn Fn(&str) -> bool| -> f64 {
        accounts.iter().filter(|a| pick(a["account"].as_str().unwrap())).map(|a| a["share"].as_f64().unwrap()).sum()
    };
    let (gpu, want) = (share(&|a| a == "gpu_work"), truth_share("sleepkernel", &d));
    assert!(
        (gpu - want).abs() < 0.05,
        "the GPU's work {gpu:.3} of the wall, the loop's own wait {want:.3}: {accounts:#?}"
    );
    assert!(share(&|a| a.starts_with("main_thread")) < 0.05, "{accounts:#?}");
    let ids: Vec<&str> = d["findings"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&"util_misleading") && !ids.iter().any(|i| i.starts_with("main_thread")), "{ids:?}");
}
