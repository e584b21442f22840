//! A third set of real H100 trainings written as a user would write them, after the rules
//! stood (`tests/fixtures/h100-unseen3/`, `tools/device/unseen_more.py`), each timing its own
//! parts: the first finding, its mechanism and advice, and its share of the loop against the
//! loop's own timing.

use std::path::{Path, PathBuf};

use super::support::{fixture, gpulse, run};

fn dir() -> PathBuf {
    fixture("h100-unseen3")
}

/// The diagnosis of scenario `name`, and the loop's own timing of it.
fn of(name: &str) -> (serde_json::Value, serde_json::Value) {
    scenario(&dir(), name)
}

/// The diagnosis of scenario `name` of the set in `dir`, and the loop's own timing of it.
pub(super) fn scenario(dir: &Path, name: &str) -> (serde_json::Value, serde_json::Value) {
    let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(dir.join(format!("{name}.db"))));
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(dir.join("truth.jsonl")).unwrap();
    let truth = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .rfind(|t| t["scenario"] == name)
        .unwrap_or_else(|| panic!("{name} in truth.jsonl"));
    (serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}")), truth)
}

/// Part `part`'s share of the loop by the loop's own clock.
pub(super) fn own(truth: &serde_json::Value, part: &str) -> f64 {
    truth["parts"][part].as_f64().unwrap() / truth["loop_s"].as_f64().unwrap()
}

pub(super) fn advice(f: &serde_json::Value) -> String {
    f["advice"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect::<Vec<_>>().join(" | ")
}

/// The first finding: its id, at its line, its cost within 5 points of `share` of the loop, and
/// the one number in its title and the headline.
pub(super) fn leads<'a>(d: &'a serde_json::Value, id: &str, line: &str, share: f64) -> &'a serde_json::Value {
    let first = &d["findings"][0];
    assert_eq!(first["id"], id, "{d:#}");
    assert!(first["evidence"]["site"].as_str().unwrap().contains(line), "{first:#}");
    let got = first["cost"]["loop_share"].as_f64().unwrap();
    assert!((got - share).abs() < 0.05, "{got:.3} of the loop, its own timing {share:.3}: {first:#}");
    let pct = gpulse_diagnose::pct(first["cost"]["wall_share"].as_f64().unwrap());
    assert!(first["title"].as_str().unwrap().contains(&format!("{pct} of the wall time")), "{first:#}");
    assert!(d["summary"].as_str().unwrap().contains(&format!("{pct} of the wall time")), "{}", d["summary"]);
    first
}

/// `nvidia-smi` run every 4 steps for the GPU's memory: a child process the loop starts and
/// waits for, with its own fix, within 5 points of the loop's timing of it (30.1 %; the loop ran
/// 1.46× as many steps a second without it, `ab.jsonl`).
#[test]
fn nvidia_smi_run_from_the_loop_is_a_child_process_with_its_fix() {
    let (d, t) = of("subproc_smi");
    let first = leads(&d, "ipc_wait", "unseen_more.py:97 ", own(&t, "gpu_log"));
    assert_eq!(first["evidence"]["domain"], "subprocess", "{first:#}");
    let a = advice(first);
    assert!(a.contains("starts a process") && a.contains("mem_get_info"), "{a}");
    assert!(!a.contains("a batch in advance"), "{a}");
}

/// JPEGs decoded and augmented with PIL and torchvision in the loop, while torch's intra-op
/// threads work: one CPU op at its line, whole (torch's, PIL's and Python frames alike), apart
/// from the step's launches in the same function, within 5 points of its own timing (87.8 %).
/// No drain advice: the op runs whether the queue drains or not.
#[test]
fn pil_decoding_in_the_loop_is_one_cpu_op_at_its_line() {
    let (d, t) = of("pil_main");
    let first = leads(&d, "main_thread_native", "unseen_more.py:153 ", own(&t, "decode_augment"));
    let a = advice(first);
    assert!(a.contains("runs on CPU tensors") && !a.contains("queue drains"), "{a}");
    let site = first["evidence"]["site"].as_str().unwrap();
    let same = d["findings"].as_array().unwrap().iter().filter(|f| f["evidence"]["site"].as_str() == Some(site));
    assert_eq!(same.count(), 1, "{d:#}");
}

/// A loss and a row of logits printed each step: printing, not launching, its own time (the
/// print waits for the step's GPU work) within 5 points of the loop's timing of it, and of that
/// only what the GPU idled is its cost. The GPU's queue drains at the print (a tensor's repr
/// reads its values back in torch's own code), which the step's launching is told.
#[test]
fn a_tensor_printed_each_step_is_printing_with_its_wait_told_apart() {
    let (d, t) = of("print_tensor");
    let first = &d["findings"][0];
    assert_eq!(first["evidence"]["domain"], "logging", "{first:#}");
    assert!(first["evidence"]["site"].as_str().unwrap().contains("unseen_more.py:179 "), "{first:#}");
    let thread = first["evidence"]["thread_loop_share"].as_f64().unwrap();
    let share = own(&t, "print");
    assert!((thread - share).abs() < 0.05, "{thread:.3} of the loop by its samples, its own timing {share:.3}");
    let limits = first["limits"].to_string();
    assert!(limits.contains("wait for the GPU to finish its queue"), "{first:#}");
    assert!(advice(first).contains("a CUDA tensor printed"), "{first:#}");
    // The step's launches after it are exposed by the print's drain: their finding says where.
    let launching = d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["title"].as_str().unwrap().contains("launching the GPU's work"));
    let drains = launching.map(|f| f["evidence"]["gpu_drains_at"].to_string()).unwrap_or_default();
    assert!(drains.contains("unseen_more.py:179 "), "{d:#}");
}

/// Every parameter's gradient norm read back with `.item()`: a line that launches a small op and
/// reads it back, one cause with its own advice, near the loop's timing of it (28.4 %); the
/// step's own launching (a 48-layer MLP at batch 256), larger, leads.
#[test]
fn a_norm_read_back_per_parameter_is_its_own_cause() {
    let (d, t) = of("grad_stats");
    let findings = d["findings"].as_array().unwrap();
    let f = findings
        .iter()
        .find(|f| f["evidence"]["site"].as_str().is_some_and(|s| s.contains("unseen_more.py:196 ")))
        .unwrap_or_else(|| panic!("{d:#}"));
    assert!(f["title"].as_str().unwrap().contains("reading each back"), "{f:#}");
    assert!(advice(f).contains("torch._foreach_norm"), "{f:#}");
    let got = f["cost"]["loop_share"].as_f64().unwrap();
    let share = own(&t, "grad_stats");
    assert!((got - share).abs() < 0.06, "{got:.3} of the loop, its own timing {share:.3}: {f:#}");
    assert!(findings[0]["title"].as_str().unwrap().contains("launching the GPU's work"), "{d:#}");
}

/// A pool's map each step: named as the pool, with its fix; a checkpoint thread holding a lock
/// the loop takes: the lock, the thread that ran meanwhile, and the advice to hold it less,
/// within 5 points of the loop's timing of the wait (59.9 %).
#[test]
fn a_pool_and_a_lock_of_the_jobs_own_are_named_with_their_fixes() {
    let (d, _) = of("pool_metric");
    let first = &d["findings"][0];
    assert_eq!(first["evidence"]["domain"], "pool", "{first:#}");
    assert!(advice(first).contains("map_async"), "{first:#}");
    let (d, t) = of("lock_ckpt");
    let first = leads(&d, "lock_wait", "unseen_more.py:289 ", own(&t, "lock_wait"));
    assert!(
        first["title"].as_str().unwrap().contains("another thread ran Python at device/unseen_more.py:280"),
        "{first:#}"
    );
    assert!(advice(first).contains("hold a lock only around what it guards"), "{first:#}");
}

/// A loop at about 11 steps/s, instrumented, waiting on 2 DataLoader workers: the measured wait
/// within 5 points of the loop's own timing (85.6 %), naming the workers' slowest line.
#[test]
fn an_instrumented_loader_wait_names_the_workers_line() {
    let (d, t) = of("loader_30");
    let first = &d["findings"][0];
    assert_eq!(first["id"], "input_bound", "{d:#}");
    let got = first["cost"]["loop_share"].as_f64().unwrap();
    let share = own(&t, "next_batch");
    assert!((got - share).abs() < 0.05, "{got:.3} of the loop, its own timing {share:.3}: {first:#}");
    assert!(advice(first).contains("Slow.__getitem__"), "{first:#}");
}
