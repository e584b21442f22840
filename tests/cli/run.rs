//! `gpulse run` and `gpulse attach`: exit codes, signals, stdio passed through unchanged, events
//! from stderr, marks from the Python package, and `--instrument` on a PyTorch-shaped loop.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use super::support::KillOnDrop;
use super::support::{fixture, fresh_dir, gpulse, root, run, skipped};

fn tmp(name: &str) -> super::support::Temp {
    fresh_dir("run", name)
}

/// `gpulse run` in `dir`, its temporary files (the marks' socket) in `dir` too: a gpulse a test
/// kills cannot remove them itself.
fn gpulse_run(dir: &Path, extra: &[&str], cmd: &[&str]) -> Command {
    let mut c = gpulse(None);
    c.current_dir(dir).env("TMPDIR", dir).args(["run", "--status", "off"]).args(extra).arg("--").args(cmd);
    c
}

fn read(path: &Path) -> gpulse_record::Recording {
    gpulse_record::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn exit_status_is_the_commands() {
    let dir = tmp("exit");
    let (code, _, err) = run(&mut gpulse_run(&dir, &["-o", "a.db"], &["sh", "-c", "exit 7"]));
    assert_eq!(code, 7, "{err}");
    assert!(err.contains("recording: a.db") && err.contains("report:    a.html"), "{err}");
    assert!(dir.join("a.html").exists());
    // Killed by a signal: 128 + the signal, as a shell reports it.
    let (code, _, err) = run(&mut gpulse_run(&dir, &["-o", "b.db"], &["sh", "-c", "kill -TERM $$"]));
    assert_eq!(code, 128 + 15, "{err}");
    let (code, _, err) = run(&mut gpulse_run(&dir, &["-o", "c.db"], &["no-such-command-gpulse"]));
    assert_eq!(code, 127, "{err}");
    assert!(err.contains("no-such-command-gpulse: command not found"), "{err}");
    assert!(!dir.join("c.db").exists(), "nothing ran, nothing recorded");
    // Without -o the recording goes to ./gpulse-runs/, named after the script.
    let (code, _, err) = run(&mut gpulse_run(&dir, &[], &["sh", "-c", "true", "train.py"]));
    assert_eq!(code, 0, "{err}");
    let names: Vec<String> = std::fs::read_dir(dir.join("gpulse-runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().any(|n| n.ends_with("-train.db")), "{names:?}");
    // An existing recording is never overwritten, and the command does not run.
    let (code, out, err) = run(&mut gpulse_run(&dir, &["-o", "a.db"], &["echo", "ran"]));
    assert_ne!(code, 0);
    assert!(!out.contains("ran") && err.contains("already exists"), "{out}{err}");
}

#[test]
fn stdio_passes_through_unchanged() {
    let dir = tmp("stdio");
    // Bytes that are not UTF-8, carriage returns, and no final newline.
    let payload: &[u8] = b"line 1\r\nprogress 10%\rprogress 100%\n\xff\xfe raw\x00 bytes";
    let mut child = gpulse_run(&dir, &["-o", "s.db"], &["sh", "-c", "cat; printf 'to stderr\\r\\n\\377 and more' >&2"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(payload).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, payload, "stdout is the command's, byte for byte");
    let expected: &[u8] = b"to stderr\r\n\xff and more";
    assert!(
        out.stderr.windows(expected.len()).any(|w| w == expected),
        "stderr passes through byte for byte: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn errors_on_stderr_become_events() {
    let dir = tmp("events");
    let script = r#"
import sys
e = sys.stderr
print("epoch 1 loss 0.5", file=e)
print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 139.81 GiB of which 1.21 GiB is free.", file=e)
print("[rank1]:[E1130 08:00:00.000 123 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.", file=e)
print("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled cuda error, NCCL version 2.21.5", file=e)
print("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed. ", file=e)
e.write("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.")
e.flush()
sys.exit(1)
"#;
    let (code, _, err) = run(&mut gpulse_run(&dir, &["-o", "e.db"], &["python3", "-c", script]));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("GPU has fallen off the bus."), "stderr still reaches the terminal: {err}");
    let rec = read(&dir.join("e.db"));
    let kinds: Vec<&str> = rec.events.iter().map(|e| e.kind.as_str()).collect();
    for k in ["cuda_oom", "nccl_timeout", "nccl_error", "dataloader_killed", "xid", "stop"] {
        assert!(kinds.contains(&k), "{k} missing from {kinds:?}");
    }
    let oom = rec.events.iter().find(|e| e.kind.as_str() == "cuda_oom").unwrap();
    assert!(oom.payload["text"].as_str().unwrap().starts_with("torch.OutOfMemoryError: CUDA out of memory."));
    assert_eq!(oom.payload["tried_bytes"], 2u64 << 30);
}

/// The ids and the `oom` finding of a recording's diagnosis.
fn oom_finding(db: &Path) -> Option<serde_json::Value> {
    let (code, out, err) = run(gpulse(None).arg("diagnose").arg(db).args(["--format", "json"]));
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    doc["findings"].as_array().unwrap().iter().find(|f| f["id"] == "oom").cloned()
}

const CUDA_OOM: &str = "import sys\nprint('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 139.81 GiB of which 1.21 GiB is free.', file=sys.stderr)\nsys.exit(1)\n";

#[test]
fn a_cuda_oom_without_a_driver_is_an_oom_finding_from_the_message_alone() {
    let dir = tmp("oom-nodriver");
    let mut cmd = gpulse_run(&dir, &["-o", "o.db"], &["python3", "-c", CUDA_OOM]);
    cmd.env("GPULSE_NVML_LIB", dir.join("no-such-libnvidia-ml.so"));
    let (code, _, err) = run(&mut cmd);
    assert_eq!(code, 1, "{err}");
    let rec = read(&dir.join("o.db"));
    assert!(rec.snapshots.is_empty(), "no driver, no GPU readings");
    let oom = oom_finding(&dir.join("o.db")).expect("an oom finding from the cuda_oom event");
    assert_eq!(oom["severity"], "critical");
    assert_eq!(oom["evidence"]["gpu"], 0, "the GPU the message names");
    assert!(oom["evidence"]["message"]["text"].as_str().unwrap().contains("CUDA out of memory"), "{oom}");
    assert!(oom["evidence"].get("peak_gib").is_none(), "no memory was read: no peak");
    assert!(err.contains("ran out of memory"), "the summary at exit says so: {err}");
}

#[test]
fn a_cuda_oom_on_the_stand_in_gpu_is_an_oom_finding_with_its_memory() {
    let dir = tmp("oom-gpu");
    let mut cmd = gpulse(Some("scenarios/h200_idle.json"));
    cmd.current_dir(&dir).args(["run", "--status", "off", "-o", "o.db", "--interval", "100ms", "--"]);
    cmd.args(["python3", "-c", &format!("import time\ntime.sleep(0.5)\n{CUDA_OOM}")]);
    let (code, _, err) = run(&mut cmd);
    assert_eq!(code, 1, "{err}");
    let rec = read(&dir.join("o.db"));
    let used: Vec<u64> = rec.snapshots.iter().flat_map(|s| &s.gpus).filter_map(|g| g.memory_used_bytes).collect();
    assert!(!used.is_empty(), "the stand-in GPU's memory was read");
    let oom = oom_finding(&dir.join("o.db")).expect("an oom finding");
    assert_eq!(oom["evidence"]["gpu"], 0);
    // The peak is the recording's own highest reading, in GiB to two places.
    let peak_gib = *used.iter().max().unwrap() as f64 / (1u64 << 30) as f64;
    assert!((oom["evidence"]["peak_gib"].as_f64().unwrap() - peak_gib).abs() <= 0.005, "{oom} vs {peak_gib}");
    assert!(oom["evidence"]["message"]["text"].as_str().unwrap().contains("CUDA out of memory"), "{oom}");
}

#[test]
fn a_job_killed_by_sigkill_is_reported_killed() {
    let dir = tmp("sigkill");
    let (code, _, err) = run(&mut gpulse_run(&dir, &["-o", "k.db"], &["sh", "-c", "kill -KILL $$"]));
    assert_eq!(code, 128 + 9, "a shell's status for SIGKILL: {err}");
    assert!(err.contains("command killed by SIGKILL, exit status 137"), "the summary: {err}");
    let rec = read(&dir.join("k.db"));
    let stop = rec.events.iter().find(|e| e.kind.as_str() == "stop").expect("the stop event");
    assert_eq!(stop.payload["reason"], "command killed by SIGKILL");
    assert_eq!(stop.payload["signal"], "SIGKILL");
    assert_eq!(stop.payload["exit_status"], 137);
    // The kernel did not take it: no host_oom, unless this host's own counters say otherwise.
    let (_, out, _) = run(gpulse(None).arg("diagnose").arg(dir.join("k.db")).args(["--format", "json"]));
    let host_full = rec
        .host
        .iter()
        .filter_map(|h| Some(h.memory_used_bytes? as f64 / h.memory_total_bytes? as f64))
        .any(|u| u >= 0.95);
    if stop.payload["oom_kills"].as_u64().unwrap_or(0) == 0 && !host_full {
        assert!(!out.contains("\"host_oom\""), "{out}");
    }
    // A job that exits by itself is not called killed.
    let (code, _, err) = run(&mut gpulse_run(&dir, &["-o", "x.db"], &["sh", "-c", "exit 137"]));
    assert_eq!(code, 137);
    assert!(!err.contains("killed"), "{err}");
    assert_eq!(
        read(&dir.join("x.db")).events.iter().find(|e| e.kind.as_str() == "stop").unwrap().payload["reason"],
        "command exited with status 137"
    );
}

/// Starts `gpulse run` on a Python script that prints `ready` once its handlers are set.
fn start_ready(dir: &Path, script: &str) -> (KillOnDrop, BufReader<std::process::ChildStdout>) {
    let mut child = KillOnDrop::spawn(
        gpulse_run(dir, &["-o", "sig.db"], &["python3", "-u", "-c", script])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    (child, out)
}

#[test]
fn sigint_and_sigterm_reach_the_command() {
    let script = r#"
import signal, sys, time
def on(sig, frame):
    print(f"got {signal.Signals(sig).name}", flush=True)
    sys.exit(40 + sig)
signal.signal(signal.SIGINT, on)
signal.signal(signal.SIGTERM, on)
print("ready", flush=True)
time.sleep(30)
"#;
    for (sig, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")] {
        let dir = tmp(&format!("sig{sig}"));
        let (mut child, mut out) = start_ready(&dir, script);
        // SAFETY: signalling a child this test started and has not reaped.
        unsafe { libc::kill(child.id() as libc::pid_t, sig) };
        let mut rest = String::new();
        out.read_to_string(&mut rest).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(rest.trim(), format!("got {name}"), "the command got the signal once");
        assert_eq!(status.code(), Some(40 + sig), "gpulse exits with the command's status");
        let rec = read(&dir.join("sig.db"));
        assert!(rec.events.iter().any(|e| e.kind.as_str() == "stop"), "the recording is closed cleanly");
    }
}

#[test]
fn without_a_driver_the_command_still_runs_and_the_host_is_recorded() {
    let dir = tmp("nodriver");
    let mut cmd = gpulse_run(&dir, &["-o", "h.db", "--interval", "100ms"], &["sh", "-c", "sleep 0.6; echo done"]);
    cmd.env("GPULSE_NVML_LIB", dir.join("no-such-libnvidia-ml.so"));
    let (code, out, err) = run(&mut cmd);
    assert_eq!((code, out.as_str()), (0, "done\n"), "{err}");
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("recording the host only")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    let rec = read(&dir.join("h.db"));
    assert!(rec.snapshots.is_empty());
    assert!(rec.host.len() >= 3, "{} host samples", rec.host.len());
    assert!(!rec.trees.is_empty() && rec.trees.iter().all(|t| t.processes.iter().any(|p| p.pid == t.root_pid)));
    assert_eq!(rec.meta["source"], "host only");
}

#[test]
fn gpus_are_recorded_through_nvml_and_the_tree_is_followed() {
    let dir = tmp("nvml");
    let mut cmd = gpulse(Some("scenarios/h200_idle.json"));
    cmd.current_dir(&dir).args(["run", "--status", "off", "-o", "g.db", "--interval", "100ms", "--"]);
    cmd.args(["sh", "-c", "sleep 0.8 & sleep 0.8; wait"]);
    let (code, _, err) = run(&mut cmd);
    assert_eq!(code, 0, "{err}");
    let rec = read(&dir.join("g.db"));
    assert!(rec.snapshots.len() >= 4, "{} snapshots", rec.snapshots.len());
    assert_eq!(rec.meta["source"], "nvml");
    let root: u32 = rec.meta["root_pid"].parse().unwrap();
    assert!(rec.trees.iter().any(|t| t.root_pid == root && t.processes.len() >= 2), "the shell and its children");
}

#[test]
fn instrument_measures_the_data_wait_of_a_pytorch_shaped_loop() {
    let dir = tmp("instrument");
    let mut cmd = gpulse_run(&dir, &["-o", "i.db", "--instrument"], &["python3"]);
    cmd.arg(root().join("tests/python/train_loop.py")).args(["0.03", "0.01", "50"]);
    cmd.env("PYTHONPATH", root().join("tests/python/fake_torch"));
    let (code, out, err) = run(&mut cmd);
    assert_eq!(code, 0, "{err}");
    let truth: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let truth_pct = truth["data_wait_share_pct"].as_f64().unwrap();
    let rec = read(&dir.join("i.db"));
    // Marks count every step and every wait, however a fast loop's are folded into rows.
    let count = |k| rec.markers.iter().filter(|m| m.kind == k).map(|m| m.count).sum::<u32>();
    assert_eq!(count(gpulse_record::MarkerKind::Step), 50, "one per optimizer step");
    assert!(count(gpulse_record::MarkerKind::DataWait) >= 50, "one wait per batch");
    let (_, json, _) = run(gpulse(None).arg("diagnose").arg(dir.join("i.db")).args(["--format", "json"]));
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let measured = doc["steps"]["data_wait_share_pct"].as_f64().unwrap();
    eprintln!("data wait: gpulse {measured:.1}%, the loop {truth_pct:.1}%");
    assert!((measured - truth_pct).abs() <= 5.0, "{measured} vs {truth_pct}");
    let ids: Vec<&str> = doc["findings"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&"input_bound"), "{ids:?}");
    let input = doc["findings"].as_array().unwrap().iter().find(|f| f["id"] == "input_bound").unwrap();
    // The loader's settings as the iterator held them, and no advice the loop already follows.
    assert_eq!(input["evidence"]["dataloader"]["pin_memory"], true, "{input:#}");
    assert_eq!(input["evidence"]["dataloader"]["num_workers"], 0, "{input:#}");
    assert_eq!(input["evidence"]["dataloader"]["batch_size"], 1, "{input:#}");
    let advice: Vec<&str> = input["advice"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert!(!advice.iter().any(|a| a.contains("pin_memory=True") || a.contains("persistent_workers")), "{advice:?}");
    // No workers: the main thread builds each batch, sleeping in the dataset's own line.
    assert_eq!(input["evidence"]["loader_site"], "python/train_loop.py:28 SlowDataset.__getitem__", "{input:#}");
    assert_eq!(input["evidence"]["loader_state"], "sleep", "{input:#}");
    assert!(advice[0].contains("python/train_loop.py:28 SlowDataset.__getitem__"), "{advice:?}");
    assert!(err.contains("waiting for data"), "the summary at exit: {err}");
    // The summary counts the steps the loop took, and says the rate is over the ones after the
    // first (whose mark opens the window), as the loop's own timing has it.
    let steps = truth["steps"].as_u64().unwrap();
    let line = err.lines().find(|l| l.starts_with("steps: ")).unwrap_or_else(|| panic!("a steps line: {err}"));
    assert!(line.starts_with(&format!("steps: {steps} marked, ")), "{line}");
    assert!(line.contains(&format!("/s over the {} after the first mark", steps - 1)), "{line}");
    assert_eq!(doc["steps"]["steps"].as_u64(), Some(steps), "the JSON counts them alike");
    // The user's own PYTHONPATH still works (the fake torch came from it), and the bootstrap
    // leaves nothing behind.
    assert!(!err.contains("instrumentation off"), "{err}");
}

/// A loop that only waits for data, at 33 steps/s: the measured waits are the data wait's, and
/// none of it reaches the main thread's split (a fast loop's waits are folded into rows, yet the
/// samples inside them are still the loader's); the main thread's profile sums to its span.
#[test]
fn instrument_keeps_a_fast_loops_data_waits_out_of_the_main_thread_split() {
    let dir = tmp("instrument-fast");
    let mut cmd = gpulse_run(&dir, &["-o", "f.db", "--instrument"], &["python3"]);
    cmd.arg(root().join("tests/python/train_loop.py")).args(["0.03", "0", "250"]);
    cmd.env("PYTHONPATH", root().join("tests/python/fake_torch"));
    let (code, out, err) = run(&mut cmd);
    assert_eq!(code, 0, "{err}");
    let truth: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert!(truth["steps_per_s"].as_f64().unwrap() > 25.0, "{truth}");
    let (_, json, _) = run(gpulse(None).arg("diagnose").arg(dir.join("f.db")).args(["--format", "json"]));
    let d: serde_json::Value = serde_json::from_str(&json).unwrap();
    let measured = d["steps"]["data_wait_share_pct"].as_f64().unwrap();
    let truth_pct = truth["data_wait_share_pct"].as_f64().unwrap();
    assert!((measured - truth_pct).abs() <= 5.0, "{measured} vs {truth_pct}");
    let accounts = d["ledger"]["accounts"].as_array().unwrap();
    let wall = d["ledger"]["wall_s"].as_f64().unwrap();
    let split: f64 = accounts
        .iter()
        .filter(|a| a["account"].as_str().unwrap().starts_with("main_thread_"))
        .map(|a| a["seconds"].as_f64().unwrap())
        .sum();
    assert!(split / wall < 0.05, "the waits leaked into the split: {accounts:#?}");
    let ids: Vec<&str> = d["findings"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap()).collect();
    assert!(ids.first() == Some(&"input_bound") && !ids.contains(&"sleep_in_loop"), "{ids:?}");
    let p = &d["stacks"][0];
    let secs: f64 = p["states"].as_array().unwrap().iter().map(|s| s["seconds"].as_f64().unwrap()).sum();
    let span = p["span_s"].as_f64().unwrap();
    assert!((secs - span).abs() <= 0.05 * span + 0.1, "the profile sums to {secs} s of a {span} s span: {p:#}");
}

/// `--instrument` times the copies to the GPU that block the loop and each `torch.save`: the
/// ledger's accounts and the measured `transfer_bound` against the loop's own timing.
#[test]
fn instrument_times_blocking_copies_and_checkpoint_saves() {
    let dir = tmp("instrument-copies");
    let mut cmd = gpulse_run(&dir, &["-o", "c.db", "--instrument"], &["python3"]);
    // 40 steps: 5 ms for each batch, a 30 ms copy, 10 ms of compute; a 300 ms save every 15.
    cmd.arg(root().join("tests/python/train_loop.py")).args(["0.005", "0.01", "40", "0.03", "15", "0.3"]);
    cmd.env("PYTHONPATH", root().join("tests/python/fake_torch"));
    let (code, out, err) = run(&mut cmd);
    assert_eq!(code, 0, "{err}");
    let truth: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let rec = read(&dir.join("c.db"));
    let phases = |name: &str| {
        rec.markers
            .iter()
            .filter(|m| m.kind == gpulse_record::MarkerKind::Phase && m.name.as_deref() == Some(name))
            .count()
    };
    assert_eq!(phases("h2d_copy"), 40, "one per blocking copy");
    assert_eq!(phases("checkpoint"), 2, "one per torch.save");
    let (_, json, _) = run(gpulse(None).arg("diagnose").arg(dir.join("c.db")).args(["--format", "json"]));
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let f = doc["findings"].as_array().unwrap().iter().find(|f| f["id"] == "transfer_bound").expect("transfer_bound");
    assert_eq!(f["basis"], "measured", "{f}");
    let share = f["evidence"]["copy_share_pct"].as_f64().unwrap();
    let truth_share = truth["copy_share_pct"].as_f64().unwrap();
    assert!((share - truth_share).abs() <= 5.0, "{share} against the loop's {truth_share}");
    let seconds = |account: &str| {
        doc["ledger"]["accounts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["account"] == account)
            .map(|a| a["seconds"].as_f64().unwrap())
            .sum::<f64>()
    };
    let saved: f64 = truth["save_s"].as_array().unwrap().iter().map(|s| s.as_f64().unwrap()).sum();
    assert!((seconds("phase") - saved).abs() < 0.05, "{} s of checkpoint phases against {saved} s", seconds("phase"));
    // Every copy is marked; the loop's truth leaves out the first step's.
    assert!(seconds("transfer") >= truth["copy_s"].as_f64().unwrap() - 0.01, "{doc}");
}

#[test]
fn attach_follows_a_running_process_until_it_exits() {
    let dir = tmp("attach");
    let mut job = KillOnDrop::spawn(Command::new("sh").args(["-c", "sleep 1.2"]));
    let mut cmd = gpulse(None);
    cmd.current_dir(&dir).args([
        "attach",
        &job.id().to_string(),
        "-o",
        "a.db",
        "--interval",
        "100ms",
        "--status",
        "off",
    ]);
    cmd.env("GPULSE_NVML_LIB", dir.join("none.so"));
    // The job is this test's child: reap it as it exits so attach sees it gone.
    let reaper = std::thread::spawn(move || job.wait());
    let (code, _, err) = run(&mut cmd);
    reaper.join().unwrap().unwrap();
    assert_eq!(code, 0, "{err}");
    let rec = read(&dir.join("a.db"));
    assert!(rec.trees.len() >= 3, "{}", rec.trees.len());
    assert!(
        rec.events
            .iter()
            .any(|e| e.kind.as_str() == "stop" && e.payload["reason"].as_str().unwrap().contains("exited"))
    );
    let (code, _, err) = run(gpulse(None).args(["attach", "999999999", "-o"]).arg(dir.join("x.db")));
    assert_eq!(code, 1);
    assert!(err.contains("no process 999999999"), "{err}");
}

#[test]
fn the_python_package_works_outside_and_inside_gpulse_run() {
    let dir = tmp("pkg");
    let test = root().join("tests/python/test_package.py");
    // Outside `gpulse run`: unit tests of the package itself, loading a recording of schema 1
    // and one of schema 2.
    let recordings = [fixture("h200-gpulse/training_workers.db"), fixture("h200-gpulse-run/dl_bound.db")];
    let (code, out, err) = run(Command::new("python3")
        .arg(&test)
        .env("PYTHONPATH", root().join("python"))
        .env("GPULSE_TEST_RECORDING", std::env::join_paths(recordings).unwrap())
        .env_remove("GPULSE_EVENTS")
        .current_dir(&dir));
    assert_eq!(code, 0, "{out}{err}");
    // unittest may have begun the line with the test's name.
    for line in err.lines().filter_map(|l| l.split_once("skipped: ")) {
        skipped(line.1);
    }
    // Inside: step, phase and mark reach the recording.
    let script = "import gpulse\nassert gpulse.enabled()\nfor i in range(5):\n    with gpulse.phase('data'):\n        pass\n    gpulse.step()\ngpulse.mark('checkpoint', epoch=3, path='a b.pt')\n";
    let mut cmd = gpulse_run(&dir, &["-o", "p.db"], &["python3", "-c", script]);
    cmd.env("PYTHONPATH", root().join("python"));
    let (code, _, err) = run(&mut cmd);
    assert_eq!(code, 0, "{err}");
    let rec = read(&dir.join("p.db"));
    let kinds = |k| rec.markers.iter().filter(|m| m.kind == k).map(|m| m.count).sum::<u32>();
    assert_eq!(kinds(gpulse_record::MarkerKind::Step), 5);
    assert_eq!(kinds(gpulse_record::MarkerKind::Phase), 5);
    let mark = rec.events.iter().find(|e| e.kind.as_str() == "mark").expect("the mark");
    assert_eq!(mark.payload["name"], "checkpoint");
    assert_eq!(mark.payload["epoch"], 3);
    assert_eq!(mark.payload["path"], "a b.pt");
    // Recordings of schema 4, where `gpu_samples` is a view, load into pandas under the tables'
    // usual names, with `t_ms` and `gpu`, and without the view's base table: the one just written
    // and an imported log's.
    let log = fixture("h200-2026-11-29/rich_dl_bound.csv");
    let (code, _, err) = run(gpulse(None).arg("import").arg(&log).arg("-o").arg(dir.join("i.db")));
    assert_eq!(code, 0, "{err}");
    let load = r#"
import sys, gpulse
try:
    import pandas
except ImportError:
    print("no pandas")
    sys.exit(0)
for path, rows in (sys.argv[1], 0), (sys.argv[2], 100):
    t = gpulse.load(path)
    assert "gpu_sample_rows" not in t, sorted(t)
    g = t["gpu_samples"]
    assert {"t_ms", "gpu", "util_gpu_pct"} <= set(g.columns), list(g.columns)
    assert len(g) >= rows and (g["t_ms"] * 256 + g["gpu"] == g["id"]).all(), g.head()
print("loaded")
"#;
    let (code, out, err) = run(Command::new("python3")
        .args(["-c", load])
        .arg(dir.join("p.db"))
        .arg(dir.join("i.db"))
        .env("PYTHONPATH", root().join("python"))
        .env_remove("GPULSE_EVENTS"));
    assert_eq!(code, 0, "{out}{err}");
    if out.trim() == "no pandas" {
        assert!(std::env::var("GPULSE_REQUIRE_PANDAS").is_err(), "CI installs pandas");
        skipped("gpulse.load() of a schema-4 recording (python3 has no pandas)");
    } else {
        assert_eq!(out.trim(), "loaded", "{err}");
    }
}

/// The marks socket is open to every process of the user: only the job's tree is heard, under
/// the PID the kernel gives, and what is refused is counted.
#[test]
fn marks_from_outside_the_job_are_refused_and_counted() {
    let dir = tmp("foreign_marks");
    let job = "import os, socket, time\n\
        path = os.environ['GPULSE_EVENTS']\n\
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
        for _ in range(5):\n    s.sendto(f'step {os.getpid()} {time.time_ns()} 0\\n'.encode(), path)\n\
        open('socket.txt.tmp', 'w').write(path + ' ' + str(os.getpid()))\n\
        os.rename('socket.txt.tmp', 'socket.txt')\n\
        time.sleep(3)\n";
    let mut child = KillOnDrop::spawn(
        gpulse_run(&dir, &["-o", "r.db", "--no-report"], &["python3", "-c", job]).stderr(Stdio::piped()),
    );
    let ready = dir.join("socket.txt");
    super::support::wait_until(20, "the job to write its socket's path", || ready.exists());
    let text = std::fs::read_to_string(&ready).unwrap();
    let (path, pid) = text.split_once(' ').unwrap();
    // From outside the tree, with the job's own PID written in.
    let s = std::os::unix::net::UnixDatagram::unbound().unwrap();
    for _ in 0..200 {
        s.send_to(format!("step {pid} 1000 0\nstep {pid} 2000 0\n").as_bytes(), path).unwrap();
    }
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(child.wait().unwrap().success(), "{err}");
    let rec = read(&dir.join("r.db"));
    let steps: u32 = rec.markers.iter().filter(|m| m.kind == gpulse_record::MarkerKind::Step).map(|m| m.count).sum();
    assert_eq!(steps, 5, "the job's own five steps, none of the 400 sent from outside");
    assert!(
        err.contains(
            "gpulse: marks refused: 200 datagrams from processes outside the job, 0 lines over a sender's rate"
        ),
        "{err}"
    );
    assert!(rec.events.iter().any(|e| e.kind.as_str() == "marks_refused" && e.payload["foreign"] == 200));
}

#[test]
fn instrument_leaves_no_temporary_folder_behind() {
    let dir = tmp("instrument_tmp");
    let tmpdir = dir.join("tmp");
    std::fs::create_dir(&tmpdir).unwrap();
    let job = "import os, sys; sys.path.insert(0, '.'); import gpulse; print(os.environ['GPULSE_EVENTS'])";
    let (code, out, err) =
        run(gpulse_run(&dir, &["-o", "r.db", "--no-report", "--instrument"], &["python3", "-c", job])
            .env("TMPDIR", &tmpdir));
    assert_eq!(code, 0, "{err}");
    assert!(out.trim().starts_with(&tmpdir.display().to_string()), "the socket was under TMPDIR: {out}");
    // The per-user folder where `gpulse top` finds running jobs stays, empty once the job ended.
    // SAFETY: geteuid and getuid cannot fail and touch no memory.
    let registry = tmpdir.join(format!("gpulse-{}", unsafe { libc::getuid() }));
    let left: Vec<_> =
        std::fs::read_dir(&tmpdir).unwrap().map(|e| e.unwrap().path()).filter(|p| *p != registry).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let jobs: Vec<_> =
        std::fs::read_dir(registry.join("jobs")).map_or(Vec::new(), |d| d.map(|e| e.unwrap().path()).collect());
    assert!(jobs.is_empty(), "left behind: {jobs:?}");
}

/// gpulse sits in the job's stderr to catch its errors: killed, it must not take the job with it.
#[test]
fn the_job_outlives_a_killed_gpulse_and_its_stderr_still_arrives() {
    let dir = tmp("outlives");
    let job =
        "sleep 0.5; echo first >&2; while [ ! -e go ]; do sleep 0.05; done; echo second >&2; echo done > survived";
    let mut child = KillOnDrop::spawn(gpulse_run(&dir, &["-o", "r.db"], &["sh", "-c", job]).stderr(Stdio::piped()));
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("first") {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "stderr ended before the job wrote");
    }
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::write(dir.join("go"), "").unwrap();
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    assert!(rest.contains("second"), "the job's later stderr reached the terminal: {rest:?}");
    assert_eq!(std::fs::read_to_string(dir.join("survived")).unwrap(), "done\n", "the job ran to its end");
}

#[test]
fn a_stopped_job_is_said_and_sigcont_to_gpulse_resumes_it() {
    let dir = tmp("stopped");
    let mut child =
        gpulse_run(&dir, &["-o", "r.db", "--no-report"], &["sh", "-c", "kill -STOP $$; sleep 1; echo on > resumed"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("is stopped") {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "gpulse ended without saying the job stopped");
    }
    assert!(line.starts_with("gpulse: the job (PID ") && line.contains("`kill -CONT "), "{line}");
    assert!(!dir.join("resumed").exists());
    // SAFETY: kill(2) on the gpulse process this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGCONT) };
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    assert!(child.wait().unwrap().success(), "{rest}");
    assert!(rest.contains(") resumed"), "{rest}");
    assert_eq!(std::fs::read_to_string(dir.join("resumed")).unwrap(), "on\n");
    let kinds: Vec<String> =
        read(&dir.join("r.db")).events.iter().map(|e| e.kind.to_string()).filter(|k| k.starts_with("job_")).collect();
    assert_eq!(kinds, ["job_stopped", "job_resumed"]);
}
