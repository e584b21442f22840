//! A distributed job seen whole: real multi-process Python jobs started the way torchrun starts
//! them (`python -m torch.distributed.run`: a launcher in its monitor loop, each rank with
//! torchrun's environment), meeting in real barriers over sockets (the stand-in
//! `torch.distributed` in `tests/python/fake_torch`), one rank slowed by a known mechanism, and
//! every rank timing its own parts. The diagnosis must list every rank, never the launcher, and
//! lead with the slow rank, what it did, and the time it cost, within 5 points of the ranks'
//! own timing.

use super::support::{gpulse, root, run};

/// Each rank: its batch from a DataLoader (timed by `--instrument`), a step of 10 ms (the GPU's
/// work, a sleep here) and a barrier; rank 1's dataset builds each item in pure Python
/// (`load_batch`), or rank 0 writes a checkpoint every other step (`torch.save`: pickling a state
/// of a million floats). Each rank writes its own timing to `TRUTH.RANK`.
const TRAIN: &str = r#"import json, os, sys, time
import gpulse
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

def load_batch(n):
    x = 0
    for i in range(n):
        x += i * i
    return x

class Items:
    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        return load_batch(800000) if mode == "load" and rank == 1 else i

STATE = {"weights": [float(i) for i in range(1000000)], "names": {str(i): i for i in range(200000)}}

def save_checkpoint(path):
    torch.save(STATE, path)

truth, mode = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo")
rank = dist.get_rank()
loader = iter(DataLoader(Items()))
own = {"barrier_s": 0.0, "data_s": 0.0, "save_s": 0.0}
t0 = time.perf_counter()
for step in range(int(sys.argv[3])):
    a = time.perf_counter()
    batch = next(loader)
    b = time.perf_counter()
    if mode == "save" and rank == 0 and step % 2 == 0:
        save_checkpoint(truth + ".ckpt")
    c = time.perf_counter()
    own["data_s"] += b - a
    own["save_s"] += c - b
    time.sleep(0.01)
    a = time.perf_counter()
    dist.barrier()
    own["barrier_s"] += time.perf_counter() - a
    gpulse.step()
own["loop_s"] = time.perf_counter() - t0
own["pid"] = os.getpid()
dist.destroy_process_group()
json.dump(own, open(f"{truth}.{rank}", "w"))
"#;

/// Runs the job of `mode` under `gpulse run` over the launcher, and returns (each rank's own
/// timing, in rank order; the diagnosis; the HTML report).
fn job(mode: &str, ranks: usize, steps: u32) -> (Vec<serde_json::Value>, serde_json::Value, String) {
    let _one = super::thread_clocks::ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = super::support::fresh_dir("ranks", mode);
    std::fs::write(dir.join("train.py"), TRAIN).unwrap();
    std::fs::write(dir.join("none.json"), r#"{"init_error": 9, "devices": []}"#).unwrap();
    let (truth, rec) = (dir.join("truth"), dir.join("r.db"));
    let path = format!("{}:{}", root().join("tests/python/fake_torch").display(), root().join("python").display());
    let mut cmd = gpulse(None);
    cmd.env("GPULSE_FAKE_NVML_SCENARIO", dir.join("none.json")).env("PYTHONPATH", path);
    cmd.args(["run", "--instrument", "--status", "off", "--no-report", "--interval", "200ms", "--stacks-hz", "100"]);
    cmd.arg("-o").arg(&rec);
    cmd.args(["--", "python3", "-m", "torch.distributed.run", &format!("--nproc_per_node={ranks}")]);
    cmd.arg(dir.join("train.py"));
    cmd.arg(&truth).arg(mode).arg(steps.to_string());
    let (code, _, err) = run(&mut cmd);
    assert_eq!(code, 0, "{err}");
    let own: Vec<serde_json::Value> = (0..ranks)
        .map(|r| {
            let text = std::fs::read_to_string(format!("{}.{r}", truth.display())).unwrap();
            serde_json::from_str(&text).unwrap()
        })
        .collect();
    let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(&rec));
    assert_eq!(code, 0, "{err}");
    let html = dir.join("r.html");
    let (code, _, err) = run(gpulse(None).arg("report").arg(&rec).arg("-o").arg(&html));
    assert_eq!(code, 0, "{err}");
    let html = std::fs::read_to_string(html).unwrap();
    (own, serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}")), html)
}

/// The ranks are listed rank by rank, with their own PIDs, each one's time in the barrier
/// within 5 points of its own timing; the launcher is no rank, no sampled process, no site.
fn ranks_as_timed(own: &[serde_json::Value], d: &serde_json::Value) {
    let ranks = d["ranks"].as_array().unwrap_or_else(|| panic!("no ranks: {d:#}"));
    assert_eq!(ranks.len(), own.len(), "{:#}", d["stacks"]);
    let world = own.len();
    for (r, (row, own)) in ranks.iter().zip(own).enumerate() {
        assert_eq!(row["rank"], r as u64, "{row:#}");
        assert_eq!(row["world_size"], world, "{row:#}");
        assert_eq!(row["pid"], own["pid"], "{row:#}");
        let want = own["barrier_s"].as_f64().unwrap() / own["loop_s"].as_f64().unwrap();
        let got = row["peer_wait_share"].as_f64().unwrap();
        assert!((got - want).abs() < 0.05, "rank {r}: {got:.3} in collectives, its own timing {want:.3}: {row:#}");
        assert!(row["steps_per_s"].as_f64().is_some(), "each rank's own steps: {row:#}");
        // `--instrument` reached every rank: each one's wait for its batch, as it timed it.
        let want = own["data_s"].as_f64().unwrap() / own["loop_s"].as_f64().unwrap();
        let got = row["data_wait_share"].as_f64().unwrap_or_else(|| panic!("no data wait: {row:#}"));
        assert!((got - want).abs() < 0.05, "rank {r}: data wait {got:.3}, its own timing {want:.3}: {row:#}");
    }
}

/// Under torchrun's stand-in, only the ranks are sampled and the launcher is nowhere.
fn launcher_unseen(own: &[serde_json::Value], d: &serde_json::Value) {
    let sampled: Vec<&serde_json::Value> = d["stacks"].as_array().unwrap().iter().map(|p| &p["pid"]).collect();
    assert_eq!(sampled.len(), own.len(), "only the ranks are sampled: {:#}", d["stacks"]);
    let text = d.to_string();
    assert!(!text.contains("distributed/run.py"), "the launcher's frames are nowhere: {d:#}");
}

/// The straggler's finding leads, names `rank` and `state` (for Python, or its wait for a core)
/// at the script's `function`, and its
/// cost, as a share of the loop, is the waiters' time in the barrier less the straggler's own,
/// within 5 points.
fn leads_with_straggler(own: &[serde_json::Value], d: &serde_json::Value, rank: usize, state: &str, function: &str) {
    let first = &d["findings"][0];
    assert_eq!(first["id"], "rank_straggler", "{d:#}");
    let e = &first["evidence"];
    assert_eq!(e["rank"], rank as u64, "{first:#}");
    // CPU work on a loaded machine is partly a wait for a core: the same work, by the clocks.
    let cpu_work = state == "python" && e["state"] == "core_wait";
    assert!(e["state"] == state || cpu_work, "{first:#}");
    let site = e["site"].as_str().unwrap_or_else(|| panic!("no site: {first:#}"));
    assert!(site.contains("train.py:") && site.ends_with(&format!(" {function}")), "{site}: {first:#}");
    let share = |r: &serde_json::Value| r["barrier_s"].as_f64().unwrap() / r["loop_s"].as_f64().unwrap();
    let waiters: Vec<f64> = own.iter().enumerate().filter(|(r, _)| *r != rank).map(|(_, o)| share(o)).collect();
    let want = waiters.iter().sum::<f64>() / waiters.len() as f64 - share(&own[rank]);
    let got = first["cost"]["loop_share"].as_f64().unwrap_or_else(|| panic!("no loop share: {first:#}"));
    assert!((got - want).abs() < 0.05, "lost {got:.3} of the loop, the ranks' own timing {want:.3}: {first:#}");
    // One number: the headline says the finding's.
    let pct = format!("{:.0}%", 100.0 * first["cost"]["wall_share"].as_f64().unwrap());
    assert!(first["title"].as_str().unwrap().contains(&pct), "{first:#}");
    assert!(d["summary"].as_str().unwrap().contains(&pct), "{}: {first:#}", d["summary"]);
}

#[test]
fn a_rank_whose_dataloader_is_slower_holds_the_others_back() {
    let (own, d, html) = job("load", 3, 500);
    ranks_as_timed(&own, &d);
    launcher_unseen(&own, &d);
    // The report: a row per rank, and each rank's strip on one time axis.
    let section = &html[html.find("<section class=\"ranks\">").unwrap_or_else(|| panic!("no ranks in the report"))..];
    let section = &section[..section.find("</section>").unwrap()];
    for (r, o) in own.iter().enumerate() {
        assert!(section.contains(&format!("<tr><td>{r}</td><td>{}</td>", o["pid"])), "{section}");
        assert!(section.contains(&format!("<title>rank {r} at ")), "{section}");
    }
    assert!(section.contains("waiting for the other ranks in a collective"), "the waits are drawn: {section}");
    leads_with_straggler(&own, &d, 1, "python", "load_batch");
    let advice = d["findings"][0]["advice"].to_string();
    assert_eq!(d["findings"][0]["evidence"]["domain"], "dataloader", "{:#}", d["findings"][0]);
    assert!(advice.contains("input is slower"), "{advice}");
}

#[test]
fn rank_0_writing_checkpoints_holds_the_others_back() {
    // Two ranks: each is sampled the more often for it (one budget for the job).
    let (own, d, _) = job("save", 2, 500);
    ranks_as_timed(&own, &d);
    launcher_unseen(&own, &d);
    leads_with_straggler(&own, &d, 0, "python", "save_checkpoint");
    assert_eq!(d["findings"][0]["evidence"]["domain"], "checkpoint", "{:#}", d["findings"][0]);
    let advice = d["findings"][0]["advice"].to_string();
    assert!(advice.contains("rank 0 alone writes"), "{advice}");
}

/// `torch.multiprocessing.spawn`'s shape: the script's own process starts two ranks under
/// multiprocessing's spawn start method, each running `_wrap(fn, i, args)` with no `RANK` in its
/// environment (the rank is `fn`'s argument), and waits for them in `ProcessContext.join`.
const SPAWN: &str = r#"import json, os, socket, sys, time
import gpulse
import torch.distributed as dist
import torch.multiprocessing as mp

def load_batch(n):
    x = 0
    for i in range(n):
        x += i * i
    return x

def train(rank, truth, steps, world):
    dist.init_process_group("gloo", rank=rank, world_size=world)
    own = {"barrier_s": 0.0, "data_s": 0.0}
    t0 = time.perf_counter()
    for step in range(steps):
        a = time.perf_counter()
        if rank == 1:
            load_batch(800000)
        own["data_s"] += time.perf_counter() - a
        time.sleep(0.01)
        a = time.perf_counter()
        dist.barrier()
        own["barrier_s"] += time.perf_counter() - a
        gpulse.step()
    own["loop_s"] = time.perf_counter() - t0
    own["pid"] = os.getpid()
    dist.destroy_process_group()
    json.dump(own, open(f"{truth}.{rank}", "w"))

if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(s.getsockname()[1])
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    json.dump({"parent": os.getpid()}, open(sys.argv[1] + ".parent", "w"))
    mp.spawn(train, args=(sys.argv[1], int(sys.argv[2]), 2), nprocs=2)
"#;

/// Runs `script` (a job that starts its own ranks) for `steps` steps under `gpulse run`, and
/// returns its directory (kept while it lives), its truth files' stem and the recording.
fn script_job(name: &str, script: &str, steps: u32) -> (super::support::Temp, std::path::PathBuf, std::path::PathBuf) {
    let dir = super::support::fresh_dir("ranks", name);
    std::fs::write(dir.join("train.py"), script).unwrap();
    std::fs::write(dir.join("none.json"), r#"{"init_error": 9, "devices": []}"#).unwrap();
    let (truth, rec) = (dir.join("truth"), dir.join("r.db"));
    let path = format!("{}:{}", root().join("tests/python/fake_torch").display(), root().join("python").display());
    let mut cmd = gpulse(None);
    cmd.env("GPULSE_FAKE_NVML_SCENARIO", dir.join("none.json")).env("PYTHONPATH", path);
    cmd.args(["run", "--status", "off", "--no-report", "--interval", "200ms", "--stacks-hz", "100", "-o"]).arg(&rec);
    cmd.args(["--", "python3"]).arg(dir.join("train.py")).arg(&truth).arg(steps.to_string());
    let (code, _, err) = run(&mut cmd);
    assert_eq!(code, 0, "{err}");
    (dir, truth, rec)
}

#[test]
fn mp_spawns_ranks_are_told_by_their_order_and_the_parent_is_no_rank() {
    let _one = super::thread_clocks::ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let (_dir, truth, rec) = script_job("spawn", SPAWN, 500);
    let read = |suffix: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(format!("{}.{suffix}", truth.display())).unwrap()).unwrap()
    };
    let own = vec![read("0"), read("1")];
    let parent = read("parent")["parent"].as_u64().unwrap();
    let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(&rec));
    assert_eq!(code, 0, "{err}");
    let d: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ranks = d["ranks"].as_array().unwrap_or_else(|| panic!("no ranks: {d:#}"));
    assert_eq!(ranks.len(), 2, "{d:#}");
    for (r, row) in ranks.iter().enumerate() {
        assert_eq!(row["pid"], own[r]["pid"], "rank {r} by its spawn order: {row:#}");
        let want = own[r]["barrier_s"].as_f64().unwrap() / own[r]["loop_s"].as_f64().unwrap();
        let got = row["peer_wait_share"].as_f64().unwrap();
        assert!((got - want).abs() < 0.05, "rank {r}: {got:.3} in collectives, its own timing {want:.3}: {row:#}");
    }
    leads_with_straggler(&own, &d, 1, "python", "load_batch");
    // The parent only waits for its ranks: no finding is of it.
    for f in d["findings"].as_array().unwrap() {
        assert_ne!(f["evidence"]["pid"], parent, "{f:#}");
    }
}

/// Real torchrun, `mp.spawn` and `accelerate launch` recordings on an H100 (`tests/fixtures/h100-ranks`, two ranks over
/// gloo on one GPU): each rank's time in collectives and wait for data within 5 points of its own timing,
/// and the straggler named with its mechanism and its cost within 5 points of the ranks' own.
#[test]
fn real_torchrun_recordings_name_the_straggler_as_the_ranks_timed_it() {
    for (name, straggler, state, domain) in [
        ("gloo2_loader", 1, "ipc", "dataloader"),
        ("gloo2_save", 0, "disk", "checkpoint"),
        ("spawn2_loader", 1, "ipc", "dataloader"),
        ("accel2_loader", 1, "ipc", "dataloader"),
    ] {
        let dir = root().join("tests/fixtures/h100-ranks");
        let truth: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{name}.truth.json"))).unwrap()).unwrap();
        let own = truth["ranks"].as_array().unwrap();
        let (code, out, err) =
            run(gpulse(None).args(["diagnose", "--format", "json"]).arg(dir.join(format!("{name}.db"))));
        assert_eq!(code, 0, "{err}");
        let d: serde_json::Value = serde_json::from_str(&out).unwrap();
        let share = |o: &serde_json::Value, k: &str| o[k].as_f64().unwrap() / o["loop_s"].as_f64().unwrap();
        for (r, row) in d["ranks"].as_array().unwrap().iter().enumerate() {
            assert_eq!(row["pid"], own[r]["pid"], "{name}: {row:#}");
            for (got, want) in [("peer_wait_share", "collective_s"), ("data_wait_share", "data_s")] {
                let (g, w) = (row[got].as_f64().unwrap(), share(&own[r], want));
                assert!((g - w).abs() < 0.05, "{name} rank {r}: {got} {g:.3}, its own timing {w:.3}: {row:#}");
            }
        }
        let first = &d["findings"][0];
        assert_eq!(first["id"], "rank_straggler", "{name}: {d:#}");
        assert_eq!(first["evidence"]["rank"], straggler, "{name}: {first:#}");
        assert_eq!(first["evidence"]["state"], state, "{name}: {first:#}");
        assert_eq!(first["evidence"]["domain"], domain, "{name}: {first:#}");
        let want = share(&own[1 - straggler], "collective_s") - share(&own[straggler], "collective_s");
        let got = first["cost"]["loop_share"].as_f64().unwrap();
        assert!(
            (got - want).abs() < 0.05,
            "{name}: lost {got:.3} of the loop, the ranks' own timing {want:.3}: {first:#}"
        );
        // Only the ranks are the job's main processes: no launcher, no `mp.spawn` parent in `join`.
        for p in d["stacks"].as_array().unwrap().iter().filter(|p| p["role"] == "main") {
            assert!(p["rank"].is_object(), "{name}: {p:#}");
        }
        // One cause, one finding: the checkpoint's measured phase is the straggler's.
        assert!(!d["findings"].as_array().unwrap().iter().any(|f| f["id"] == "marked_phase"), "{name}: {d:#}");
    }
}

/// The same recordings read without their marks, as `top` or `serve --record` reads jobs they did
/// not start: the straggler still leads, with its cost within 5 points of the ranks' own timing
/// (of the wall time: the loop's start is no longer marked), and the collectives' own time left
/// to the waiter is judged by its own share, so it neither turns critical nor ranks above the
/// straggler that holds more. Rank 0's checkpoint is one cause: its writes with the GPU idle, by
/// the job's I/O counters, are the straggler's, not a finding beside it.
#[test]
fn real_rank_recordings_read_without_their_marks_still_lead_with_the_straggler() {
    for (name, straggler) in [("gloo2_loader", 1), ("gloo2_save", 0), ("spawn2_loader", 1), ("accel2_loader", 1)] {
        let dir = root().join("tests/fixtures/h100-ranks");
        let truth: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{name}.truth.json"))).unwrap()).unwrap();
        let own = truth["ranks"].as_array().unwrap();
        let d = super::support::diagnosis_without_marks(
            &dir.join(format!("{name}.db")),
            "ranks",
            &format!("no-marks-{name}"),
        );
        let first = &d["findings"][0];
        assert_eq!(first["id"], "rank_straggler", "{name}: {d:#}");
        assert_eq!(first["evidence"]["rank"], straggler, "{name}: {first:#}");
        let lost_s =
            own[1 - straggler]["collective_s"].as_f64().unwrap() - own[straggler]["collective_s"].as_f64().unwrap();
        let (got, want) =
            (first["cost"]["wall_share"].as_f64().unwrap(), lost_s / d["ledger"]["wall_s"].as_f64().unwrap());
        assert!((got - want).abs() < 0.05, "{name}: {got:.3} of the wall, the ranks' own timing {want:.3}: {first:#}");
        assert!(!d["findings"].as_array().unwrap().iter().any(|f| f["id"] == "checkpoint_writes"), "{name}: {d:#}");
        for f in d["findings"].as_array().unwrap().iter().filter(|f| f["id"] == "peer_wait") {
            let share = f["cost"]["loop_share"].as_f64().unwrap();
            assert_eq!(f["severity"], if share >= 0.5 { "critical" } else { "warning" }, "{name}: {f:#}");
        }
    }
}

/// PyTorch Lightning's DDP shape: the script's own process is rank 0 and starts the others as
/// `python train.py` with `LOCAL_RANK`, `NODE_RANK` and `WORLD_SIZE` (no `RANK`), setting its own
/// after it started, where `/proc` does not show them.
const LIGHTNING: &str = r#"import json, os, socket, subprocess, sys, time
import gpulse
import torch.distributed as dist

def load_batch(n):
    x = 0
    for i in range(n):
        x += i * i
    return x

truth, steps = sys.argv[1], int(sys.argv[2])
if "LOCAL_RANK" not in os.environ:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, NODE_RANK="0", WORLD_SIZE="2")
    child = subprocess.Popen([sys.executable, *sys.argv], env=dict(os.environ, LOCAL_RANK="1"))
    os.environ["LOCAL_RANK"] = "0"
rank = int(os.environ["LOCAL_RANK"])
dist.init_process_group("gloo", rank=rank, world_size=2)
own = {"barrier_s": 0.0}
t0 = time.perf_counter()
for step in range(steps):
    if rank == 1:
        load_batch(800000)
    time.sleep(0.01)
    a = time.perf_counter()
    dist.barrier()
    own["barrier_s"] += time.perf_counter() - a
    gpulse.step()
own["loop_s"] = time.perf_counter() - t0
own["pid"] = os.getpid()
dist.destroy_process_group()
json.dump(own, open(f"{truth}.{rank}", "w"))
if rank == 0:
    child.wait()
"#;

#[test]
fn lightnings_script_is_rank_0_and_its_children_the_others() {
    let _one = super::thread_clocks::ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let (_dir, truth, rec) = script_job("lightning", LIGHTNING, 500);
    let read = |r: u32| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(format!("{}.{r}", truth.display())).unwrap()).unwrap()
    };
    let own = vec![read(0), read(1)];
    let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(&rec));
    assert_eq!(code, 0, "{err}");
    let d: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ranks = d["ranks"].as_array().unwrap_or_else(|| panic!("no ranks: {d:#}"));
    assert_eq!(ranks.len(), 2, "{d:#}");
    for (r, row) in ranks.iter().enumerate() {
        assert_eq!(row["pid"], own[r]["pid"], "rank {r}: {row:#}");
    }
    leads_with_straggler(&own, &d, 1, "python", "load_batch");
}

/// A rank first seen between its parent's fork and its `exec`: Lightning's script whose child
/// runs Python for 2.5 s before its `exec` (a `preexec_fn`; the window a `vfork` leaves is the
/// same, only shorter), so that the sampler meets it as a copy of rank 0: its command line, its
/// environment without `LOCAL_RANK`, its stack. Once it has run `exec` it is told again as the
/// program it runs, rank 1, and the ranks are both there.
#[test]
fn a_rank_seen_before_its_exec_is_told_again_as_the_rank_it_runs() {
    let _one = super::thread_clocks::ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let started = r#"env=dict(os.environ, LOCAL_RANK="1"))"#;
    assert!(LIGHTNING.contains(started));
    let script =
        LIGHTNING.replace(started, r#"env=dict(os.environ, LOCAL_RANK="1"), preexec_fn=lambda: time.sleep(2.5))"#);
    let (_dir, truth, rec) = script_job("lightning-exec", &script, 100);
    let read = |r: u32| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(format!("{}.{r}", truth.display())).unwrap()).unwrap()
    };
    let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(&rec));
    assert_eq!(code, 0, "{err}");
    let d: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ranks = d["ranks"].as_array().unwrap_or_else(|| panic!("no ranks: {d:#}"));
    assert_eq!(ranks.len(), 2, "{:#}", d["stacks"]);
    for (r, row) in ranks.iter().enumerate() {
        assert_eq!(row["pid"], read(r as u32)["pid"], "rank {r}: {row:#}");
    }
    // The child is told by its own command line, not its parent's.
    let child = d["stacks"].as_array().unwrap().iter().find(|p| p["pid"] == ranks[1]["pid"]).unwrap();
    assert!(child["rank"].is_object(), "{child:#}");
}
