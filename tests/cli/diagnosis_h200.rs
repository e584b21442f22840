//! `gpulse diagnose` against workloads with a known bottleneck and their controls, recorded on an
//! H200 under `gpulse run` (tests/fixtures/h200-diagnosis/README.md): the right finding fires,
//! the control does not raise it, and every older recording still diagnoses.

use super::support::*;

/// The findings of `gpulse diagnose --format json` on `rel`, and the document.
fn diagnosed(rel: &str) -> (Vec<String>, serde_json::Value) {
    let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(fixture(rel)));
    assert_eq!(code, 0, "{rel}: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ids = v["findings"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap().to_owned()).collect();
    (ids, v)
}

fn finding<'a>(v: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    v["findings"].as_array().unwrap().iter().find(|f| f["id"] == id).unwrap()
}

#[test]
fn each_cause_fires_on_its_workload_and_not_on_its_control() {
    for (workload, control, id) in [
        ("transfer_pageable", "transfer_pinned", "transfer_bound"),
        ("epoch_restart", "epoch_persistent", "periodic_stall"),
        ("fp32_matmul", "bf16_matmul", "tensor_idle"),
        ("starved_loader", "gpu_bound", "host_saturated"),
    ] {
        let (ids, v) = diagnosed(&format!("h200-diagnosis/{workload}.db"));
        assert_eq!(ids.first().map(String::as_str), Some(id), "{workload}: {ids:?}");
        assert!(v["summary"].is_string(), "{workload}: a primary cause");
        let (ids, _) = diagnosed(&format!("h200-diagnosis/{control}.db"));
        assert!(!ids.iter().any(|i| i == id), "{control}: {ids:?}");
        assert_eq!(ids, ["healthy"], "{control}: nothing else either");
    }
}

#[test]
fn the_findings_carry_their_cost_basis_and_cause() {
    // 2 GiB pageable copies: the loop copied 89 % of its time (its own timing); not input-bound.
    let (ids, v) = diagnosed("h200-diagnosis/transfer_pageable.db");
    assert!(!ids.iter().any(|i| i == "input_bound" || i == "process_bound"), "{ids:?}");
    let f = finding(&v, "transfer_bound");
    // What the copies cost: their account in the ledger, after a fifth of the run in start-up;
    // the rule's own measure, the SMs' idle time over the active window (0.91 against the
    // loop's own 0.89), stays beside it under its own name.
    let own = f["cost"]["own_share"].as_f64().unwrap();
    assert!((0.84..=0.94).contains(&own), "{own}");
    assert!(f["cost"]["basis"].as_str().unwrap().starts_with("ledger"), "{f}");
    assert_eq!(f["cost"]["accounts"], serde_json::json!(["transfer"]), "{f}");
    let wall_share = f["cost"]["wall_share"].as_f64().unwrap();
    let (wall, by) = ledger(&v);
    assert!(
        (wall_share - by["transfer"] / wall).abs() < 0.001 && (0.6..=0.8).contains(&wall_share),
        "{wall_share}: {by:?}"
    );
    // Without --instrument the copies are not timed: their share is inferred, and the bytes at
    // pinned rates (11 % of the time) leave most of the SMs' idle time unexplained.
    assert_eq!(f["basis"], "inferred");
    assert_eq!(f["evidence"]["evidence_supports"], "pageable", "{f}");
    assert!(f["advice"][0].as_str().unwrap().contains("pin"), "{f}");
    // Workers restarting each epoch: the pauses are explained by the fresh DataLoader iterators.
    let (_, v) = diagnosed("h200-diagnosis/epoch_restart.db");
    let f = finding(&v, "periodic_stall");
    assert!(f["title"].as_str().unwrap().contains("epoch start"), "{f}");
    assert!(f["advice"][0].as_str().unwrap().contains("persistent_workers=True"), "{f}");
    // Truth: 3.05 s at each epoch start, epochs 7.7–7.9 s apart.
    let pause = f["evidence"]["pause_s"].as_f64().unwrap();
    let period = f["evidence"]["period_s"].as_f64().unwrap();
    assert!((2.5..=3.6).contains(&pause) && (7.0..=8.5).contains(&period), "{pause} {period}");
    // Burners outside the job on every core: most of the CPU is outside it.
    let (_, v) = diagnosed("h200-diagnosis/starved_loader.db");
    let f = finding(&v, "host_saturated");
    assert!(
        f["evidence"]["outside_cpu_share_pct"].as_f64().unwrap() > f["evidence"]["job_cpu_share_pct"].as_f64().unwrap()
    );
}

#[test]
fn the_callbacks_measure_the_wait_for_data() {
    // Lightning, num_workers=0: the loop's items took 18.8 s of its 21.9 s (86 %); the callback's
    // wait is the gap between batches, which holds the collate too.
    let (ids, v) = diagnosed("h200-diagnosis/lightning.db");
    assert_eq!(ids.first().map(String::as_str), Some("input_bound"), "{ids:?}");
    let f = finding(&v, "input_bound");
    assert_eq!(f["basis"], "measured");
    let share = f["evidence"]["data_wait_share_pct"].as_f64().unwrap();
    assert!((83.0..=93.0).contains(&share), "{share}");
    let steps_per_s = v["steps"]["steps_per_s"].as_f64().unwrap();
    assert!((steps_per_s / 24.51 - 1.0).abs() < 0.01, "truth 24.51/s: {steps_per_s}");
    // No worker and no sampled stack show the DataLoader: the advice says what it rests on.
    let advice = f["advice"][0].as_str().unwrap();
    assert!(advice.contains("loads every batch in the training process") && advice.contains("free core"), "{f}");
    assert!(
        v["summary"].as_str().unwrap().starts_with("The loop waits for data 88% of the loop's time"),
        "{}",
        v["summary"]
    );
    // Hugging Face, 4 workers that keep up: a small measured wait, no input-bound verdict and
    // no advice for more workers.
    let (ids, v) = diagnosed("h200-diagnosis/hf.db");
    assert!(!ids.iter().any(|i| i == "input_bound"), "{ids:?}");
    assert!(v["steps"]["data_wait_share_pct"].as_f64().unwrap() < 20.0);
    let steps_per_s = v["steps"]["steps_per_s"].as_f64().unwrap();
    assert!((steps_per_s / 185.93 - 1.0).abs() < 0.01, "truth 185.93/s: {steps_per_s}");
    assert!(ids.iter().any(|i| i == "startup"), "13 s of imports before the first of 37 s: {ids:?}");
}

#[test]
fn every_older_recording_and_nvidia_smi_log_still_diagnoses() {
    let mut inputs: Vec<std::path::PathBuf> = Vec::new();
    for dir in ["h200-gpulse", "h200x2-gpulse", "h200-gpulse-run"] {
        for e in std::fs::read_dir(fixture(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "db") {
                inputs.push(p);
            }
        }
    }
    // The nvidia-smi logs of the six H200 workloads, each in its three forms.
    for e in std::fs::read_dir(fixture("h200-2026-11-29")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".csv")
            && (name.starts_with("gpm_") || name.starts_with("rich_") || name.starts_with("seed_"))
        {
            inputs.push(p);
        }
    }
    assert!(inputs.len() >= 10 + 18, "{inputs:?}");
    for p in inputs {
        let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(&p));
        assert_eq!(code, 0, "{}: {err}", p.display());
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        for f in v["findings"].as_array().unwrap() {
            assert!(["measured", "inferred"].contains(&f["basis"].as_str().unwrap()), "{}: {f}", p.display());
        }
    }
}

/// The ledger's seconds by account, and the wall time, of `gpulse diagnose --format json`.
fn ledger(v: &serde_json::Value) -> (f64, std::collections::BTreeMap<String, f64>) {
    let mut by = std::collections::BTreeMap::new();
    for a in v["ledger"]["accounts"].as_array().unwrap() {
        *by.entry(a["account"].as_str().unwrap().to_owned()).or_insert(0.0) += a["seconds"].as_f64().unwrap();
    }
    (v["ledger"]["wall_s"].as_f64().unwrap(), by)
}

/// One line of a fixture's `truth.jsonl` (`dir/truth.jsonl`) by its scenario.
fn truth_in(dir: &str, scenario: &str) -> serde_json::Value {
    std::fs::read_to_string(fixture(&format!("{dir}/truth.jsonl")))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["scenario"] == scenario)
        .unwrap_or_else(|| panic!("{dir}: no truth for {scenario}"))
}

fn truth(scenario: &str) -> serde_json::Value {
    truth_in("h200-diagnosis", scenario)
}

#[test]
fn the_ledger_accounts_for_every_second_of_every_recording() {
    for dir in ["h200-diagnosis", "h200-gpulse", "h200x2-gpulse", "h200-gpulse-run", "h200-ledger", "h200-memio"] {
        for e in std::fs::read_dir(fixture(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_none_or(|x| x != "db") {
                continue;
            }
            let rel = format!("{dir}/{}", p.file_name().unwrap().to_string_lossy());
            let (_, v) = diagnosed(&rel);
            let (wall, by) = ledger(&v);
            let sum: f64 = by.values().sum();
            assert!(wall > 0.0 && (sum - wall).abs() < 0.02, "{rel}: {sum} s in accounts of {wall} s: {by:?}");
            assert!(by.values().all(|s| *s >= 0.0), "{rel}: {by:?}");
        }
    }
}

#[test]
fn the_ledgers_accounts_meet_the_loops_own_timing() {
    // Within 5 points of the wall time of what each loop timed itself.
    let near = |rel: &str, account: &[&str], truth_s: f64| {
        let (_, v) = diagnosed(rel);
        let (wall, by) = ledger(&v);
        let got: f64 = account.iter().map(|a| by.get(*a).copied().unwrap_or(0.0)).sum();
        assert!(
            (got - truth_s).abs() <= 0.05 * wall,
            "{rel}: {account:?} {got:.2} s against the loop's {truth_s:.2} s of {wall} s: {by:?}"
        );
    };
    // The DataLoader-bound ResNet-50 and its tuned control: each step's own wait for its batch,
    // the first step's at start-up.
    for name in ["dl_bound", "dl_tuned"] {
        let waits = loop_waits(name);
        near(&format!("h200-gpulse-run/{name}.db"), &["data_wait"], waits[1..].iter().sum());
        near(&format!("h200-gpulse-run/{name}.db"), &["startup_data_wait"], waits[0]);
    }
    near("h200-diagnosis/lightning.db", &["data_wait"], truth("lightning")["train_items_s"].as_f64().unwrap());
    // Workers started afresh each epoch: the first epoch's wait came before the first step, so it
    // is start-up's; all of them are the loop's.
    let epochs = truth("epoch_restart");
    let rel = "h200-diagnosis/epoch_restart.db";
    near(rel, &["data_wait", "startup_data_wait"], epochs["data_wait_s"].as_f64().unwrap());
    near(rel, &["startup_data_wait"], epochs["epoch_starts_and_waits_s"][0][1].as_f64().unwrap());
    // Start-up: from the script's start to its first step (gpulse starts a moment before it).
    let hf = truth("hf");
    let startup = ["startup", "startup_before_cuda", "startup_to_first_step"];
    near("h200-diagnosis/hf.db", &startup, hf["t_first_step"].as_f64().unwrap() - hf["t_script"].as_f64().unwrap());
    // 2 GiB pageable copies: 89 % of the loop's time by its synchronized timing.
    let (_, v) = diagnosed("h200-diagnosis/transfer_pageable.db");
    let (_, by) = ledger(&v);
    let copy_share = by["transfer"] / (by["transfer"] + by["gpu_work"]);
    let truth_share = truth("transfer_pageable")["copy_share"].as_f64().unwrap();
    assert!((copy_share - truth_share).abs() <= 0.05, "{copy_share} against the loop's {truth_share}: {by:?}");
}

/// Each step's wait for its batch, in step order, as the loop `steps_<name>.jsonl` timed it.
fn loop_waits(name: &str) -> Vec<f64> {
    std::fs::read_to_string(fixture(&format!("h200-gpulse-run/steps_{name}.jsonl")))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["data_s"].as_f64())
        .collect()
}

/// The steps line's data wait and the ledger's are one figure over one window: the steps after
/// the first mark. The first batch's wait (1.47 s for the tuned loop, its workers starting) is
/// start-up in both, to the loop's own millisecond.
#[test]
fn the_steps_data_wait_and_the_ledgers_are_one_window() {
    for name in ["dl_bound", "dl_tuned"] {
        let (_, v) = diagnosed(&format!("h200-gpulse-run/{name}.db"));
        let steps = &v["steps"];
        let window = steps["window_s"].as_array().unwrap();
        let span = window[1].as_f64().unwrap() - window[0].as_f64().unwrap();
        let header_s = steps["data_wait_share_pct"].as_f64().unwrap() / 100.0 * span;
        let (_, by) = ledger(&v);
        assert!((by["data_wait"] - header_s).abs() < 0.01, "{name}: {header_s} s in the steps line: {by:?}");
        let first = loop_waits(name)[0];
        assert!((by["startup_data_wait"] - first).abs() < 0.01, "{name}: the loop's first wait {first} s: {by:?}");
    }
}

fn ledger_truth(scenario: &str) -> serde_json::Value {
    truth_in("h200-ledger", scenario)
}

/// Seconds of `v`'s ledger in `account` (any label).
fn account_s(v: &serde_json::Value, account: &str) -> f64 {
    ledger(v).1.get(account).copied().unwrap_or(0.0)
}

#[test]
fn each_mechanism_names_its_cause_and_the_ledger_meets_the_loops_clock() {
    // Within 5 points of the wall time.
    let near = |rel: &str, v: &serde_json::Value, got: f64, truth_s: f64| {
        let wall = v["ledger"]["wall_s"].as_f64().unwrap();
        assert!(
            (got - truth_s).abs() <= 0.05 * wall,
            "{rel}: {got:.2} s against the loop's {truth_s:.2} s of {wall} s"
        );
    };
    // Lightning validating 90 % of its loop: the phase leads, and nothing blames its idle GPU on
    // the host or the data.
    let (ids, v) = diagnosed("h200-ledger/slow_val.db");
    assert_eq!(ids.first().map(String::as_str), Some("marked_phase"), "{ids:?}");
    assert_eq!(finding(&v, "marked_phase")["severity"], "warning");
    assert!(
        !ids.iter().any(|i| ["host_bound", "input_bound", "process_bound", "periodic_stall"].contains(&i.as_str())),
        "{ids:?}"
    );
    let truth = ledger_truth("slow_val");
    near("slow_val", &v, account_s(&v, "phase"), truth["validation_s"].as_f64().unwrap());
    let startup =
        account_s(&v, "startup_before_cuda") + account_s(&v, "startup_to_first_step") + account_s(&v, "startup");
    near("slow_val", &v, startup, truth["t_first_step"].as_f64().unwrap() - truth["t_script"].as_f64().unwrap());
    // Its control: validation is a small part, so at most worth knowing.
    let (_, v) = diagnosed("h200-ledger/fast_val.db");
    near("fast_val", &v, account_s(&v, "phase"), ledger_truth("fast_val")["validation_s"].as_f64().unwrap());
    assert!(
        v["findings"].as_array().unwrap().iter().all(|f| f["id"] != "marked_phase" || f["severity"] == "info"),
        "{v}"
    );
    // Pageable copies, timed by --instrument: measured, and the share of the loop.
    let (ids, v) = diagnosed("h200-ledger/pageable.db");
    assert_eq!(ids.first().map(String::as_str), Some("transfer_bound"), "{ids:?}");
    let f = finding(&v, "transfer_bound");
    assert_eq!(f["basis"], "measured", "{f}");
    let truth = ledger_truth("pageable");
    let share = f["evidence"]["copy_share_pct"].as_f64().unwrap() / 100.0;
    assert!((share - truth["copy_share"].as_f64().unwrap()).abs() <= 0.05, "{share}");
    near("pageable", &v, account_s(&v, "transfer"), truth["copy_s"].as_f64().unwrap());
    // The same without marks: at 6.5 GB/s, a tenth of the link, the mechanism still names them.
    let (ids, v) = diagnosed("h200-ledger/pageable_plain.db");
    assert_eq!(ids.first().map(String::as_str), Some("transfer_bound"), "{ids:?}");
    let f = finding(&v, "transfer_bound");
    assert_eq!(
        (&f["basis"], &f["evidence"]["evidence_supports"]),
        (&serde_json::json!("inferred"), &serde_json::json!("pageable"))
    );
    near("pageable_plain", &v, account_s(&v, "transfer"), ledger_truth("pageable_plain")["copy_s"].as_f64().unwrap());
    // torch.save every 120 steps, timed by --instrument.
    let (ids, v) = diagnosed("h200-ledger/checkpoint.db");
    assert_eq!(ids.first().map(String::as_str), Some("marked_phase"), "{ids:?}");
    assert_eq!(finding(&v, "marked_phase")["evidence"]["phase"], "checkpoint");
    near("checkpoint", &v, account_s(&v, "phase"), ledger_truth("checkpoint")["save_s"].as_f64().unwrap());
    // Two restarts of the workers, too few for a period: named from the fresh iterators.
    let (ids, v) = diagnosed("h200-ledger/epoch_short.db");
    assert_eq!(ids.first().map(String::as_str), Some("epoch_restart"), "{ids:?}");
    let f = finding(&v, "epoch_restart");
    assert_eq!(f["evidence"]["restarts"], 2);
    let waits: Vec<f64> = ledger_truth("epoch_short")["epoch_starts_and_waits_s"].as_array().unwrap()[1..]
        .iter()
        .map(|e| e[1].as_f64().unwrap())
        .collect();
    let mean = waits.iter().sum::<f64>() / waits.len() as f64;
    assert!((f["evidence"]["first_batch_wait_mean_s"].as_f64().unwrap() - mean).abs() < 0.2, "{f} against {mean}");
    assert!(f["advice"][0].as_str().unwrap().contains("persistent_workers=True"));
    // torch.compile's workers seen at start-up: said, with when.
    let (_, v) = diagnosed("h200-ledger/compile.db");
    let f = finding(&v, "startup");
    let truth = ledger_truth("compile");
    let began = truth["t_compile_start"].as_f64().unwrap() - truth["t_script"].as_f64().unwrap();
    let title = f["title"].as_str().unwrap();
    let seen: f64 = title.split("compiling from ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    // The tree is read every 500 ms and the recording starts a moment before the script.
    assert!((seen - began).abs() <= 1.5, "{title}: compiling began {began:.1} s in");
    assert!(f["advice"].as_array().unwrap().iter().any(|a| a.as_str().unwrap().contains("TORCHINDUCTOR")), "{f}");
    // And the controls stay quiet: persistent workers restart nothing, pinned copies beside
    // compute and the tuned loader are not transfer-bound, and no run without a compiler is told
    // about torch.compile.
    let (ids, _) = diagnosed("h200-diagnosis/epoch_persistent.db");
    assert!(!ids.iter().any(|i| i == "epoch_restart"), "{ids:?}");
    for rel in ["h200-diagnosis/transfer_pinned.db", "h200-gpulse-run/dl_tuned.db"] {
        let (ids, _) = diagnosed(rel);
        assert!(!ids.iter().any(|i| i == "transfer_bound"), "{rel}: {ids:?}");
    }
    for rel in ["h200-ledger/checkpoint.db", "h200-ledger/epoch_short.db", "h200-diagnosis/hf.db"] {
        let (_, v) = diagnosed(rel);
        if let Some(f) = v["findings"].as_array().unwrap().iter().find(|f| f["id"] == "startup") {
            assert!(!f.to_string().contains("torch.compile"), "{rel}: {f}");
        }
    }
}

fn memio_truth(scenario: &str) -> serde_json::Value {
    truth_in("h200-memio", scenario)
}

#[test]
fn the_jobs_memory_and_storage_name_their_causes() {
    // Eight workers copying a Python list: their PSS by gpulse against their own reading of it.
    let (ids, v) = diagnosed("h200-memio/worker_copy.db");
    assert_eq!(ids.first().map(String::as_str), Some("worker_memory"), "{ids:?}");
    let f = finding(&v, "worker_memory");
    let gib = 1024.0f64.powi(3);
    let seen = f["evidence"]["workers_pss_gib"].as_array().unwrap();
    let (first, last) = (seen[0].as_f64().unwrap() * gib, seen[1].as_f64().unwrap() * gib);
    let truth = memio_truth("worker_copy");
    let own: Vec<(f64, f64)> =
        truth["pss"].as_array().unwrap().iter().map(|s| (s[0].as_f64().unwrap(), s[2].as_f64().unwrap())).collect();
    // gpulse reads every 5 s: its last reading lies between the loop's readings of the last 5 s.
    let t_last = own.last().unwrap().0;
    let lo = own.iter().filter(|s| s.0 >= t_last - 6.0).map(|s| s.1).fold(f64::MAX, f64::min);
    assert!(
        last >= 0.9 * lo && last <= 1.05 * own.last().unwrap().1,
        "{last} against the workers' own {lo}..{}",
        own.last().unwrap().1
    );
    assert!(first <= 1.1 * own[0].1, "{first} against {} at the first step", own[0].1);
    // Its control shares one array: nothing grows.
    let (ids, _) = diagnosed("h200-memio/worker_arrays.db");
    assert!(!ids.iter().any(|i| i == "worker_memory"), "{ids:?}");
    // torch.save without --instrument: the writes name it, and the bytes are the saves'.
    let (ids, v) = diagnosed("h200-memio/ckpt_plain.db");
    assert_eq!(ids.first().map(String::as_str), Some("checkpoint_writes"), "{ids:?}");
    let truth = memio_truth("ckpt_plain");
    let saves = truth["saves"].as_array().unwrap().len() as f64;
    let written = finding(&v, "checkpoint_writes")["evidence"]["written_gb"].as_f64().unwrap() * 1e9;
    let expected = saves * truth["bytes_per_save"].as_f64().unwrap();
    assert!((written / expected - 1.0).abs() < 0.05, "{written} written against {expected}");
    // Loaders waiting on O_DIRECT reads: measured without step marks, and storage named with
    // the rate its own counters give.
    let (ids, v) = diagnosed("h200-memio/storage.db");
    assert_eq!(ids.first().map(String::as_str), Some("input_bound"), "{ids:?}");
    let f = finding(&v, "input_bound");
    assert_eq!(f["basis"], "measured");
    assert!(f["title"].as_str().unwrap().contains("waits on storage"), "{f}");
    assert_eq!(f["advice"].as_array().unwrap().len(), 1, "storage alone: {f}");
    let truth = memio_truth("storage");
    let rate = truth["bytes_read"].as_f64().unwrap()
        / (truth["t_last_step"].as_f64().unwrap() - truth["t_first_step"].as_f64().unwrap());
    let seen = f["evidence"]["storage_read_mb_per_s"].as_f64().unwrap() * 1e6;
    assert!((seen / rate - 1.0).abs() < 0.15, "{seen} B/s against the loop's {rate}");
    let share = f["evidence"]["data_wait_share_pct"].as_f64().unwrap() / 100.0;
    assert!((share - truth["data_wait_share"].as_f64().unwrap()).abs() <= 0.1, "{share}");
}
