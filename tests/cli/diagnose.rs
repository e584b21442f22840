//! `gpulse diagnose` against the real H200 traces and their ground truth
//! (tests/fixtures/h200-2026-11-29/README.md).

use std::path::PathBuf;

use super::support::*;

const SCENARIOS: [&str; 6] = ["dl_bound", "dl_tuned", "tiny", "leak", "healthy", "stall"];

/// The finding ids `gpulse diagnose --format json` reports for `inputs` (imported together).
fn ids(inputs: &[PathBuf]) -> (Vec<String>, serde_json::Value) {
    let dir = fresh_dir("diag", "import");
    let input = if inputs.len() == 1 {
        inputs[0].clone()
    } else {
        let db = dir.join("imported.db");
        let (code, _, err) = run(gpulse(None).arg("import").args(inputs).arg("-o").arg(&db));
        assert_eq!(code, 0, "{err}");
        db
    };
    let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(&input));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ids = v["findings"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap().to_owned()).collect();
    (ids, v)
}

fn has(ids: &[String], id: &str) -> bool {
    ids.iter().any(|i| i == id)
}

#[test]
fn every_scenario_reads_as_its_ground_truth_from_each_kind_of_log() {
    for s in SCENARIOS {
        let seed = vec![fixture(&format!("h200-2026-11-29/seed_{s}.csv"))];
        let rich =
            vec![fixture(&format!("h200-2026-11-29/rich_{s}.csv")), fixture(&format!("h200-2026-11-29/apps_{s}.csv"))];
        for (kind, input) in [("seed", seed), ("rich+apps", rich)] {
            let (ids, v) = ids(&input);
            let ctx = format!("{s} from {kind}: {ids:?}");
            match s {
                "dl_bound" => assert!(has(&ids, "input_bound") && !has(&ids, "host_bound"), "{ctx}"),
                "dl_tuned" => assert!(!has(&ids, "input_bound") && has(&ids, "host_bound"), "{ctx}"),
                "tiny" => assert!(has(&ids, "host_bound") && !has(&ids, "input_bound"), "{ctx}"),
                // The job died out of memory. A log without memory.total cannot tell that fall from
                // a clean exit: it names the growth and where it stopped, never an OOM.
                "leak" => {
                    assert!(has(&ids, "memory_growth") && has(&ids, "oom") == (kind == "rich+apps"), "{ctx}");
                    let g = v["findings"].as_array().unwrap().iter().find(|f| f["id"] == "memory_growth").unwrap();
                    assert!(
                        g["evidence"]["fell_at_s"].as_f64().is_some_and(|t| (50.0..56.0).contains(&t)),
                        "{ctx}: {g}"
                    );
                }
                "healthy" => {
                    assert!(has(&ids, "healthy") && !has(&ids, "input_bound") && !has(&ids, "host_bound"), "{ctx}")
                }
                "stall" => {
                    assert!(has(&ids, "periodic_stall"), "{ctx}");
                    let f = v["findings"].as_array().unwrap().iter().find(|f| f["id"] == "periodic_stall").unwrap();
                    let period = f["evidence"]["period_s"].as_f64().unwrap();
                    // Ground truth: about 3 s of pause every ~11 s.
                    assert!((9.0..=13.0).contains(&period), "{ctx}: period {period}");
                    assert!((2.0..=4.5).contains(&f["evidence"]["pause_s"].as_f64().unwrap()), "{ctx}");
                }
                _ => unreachable!(),
            }
            // The idle 20 GiB process is flagged wherever the process log is given.
            assert_eq!(has(&ids, "idle_holder"), kind == "rich+apps", "{ctx}");
            for f in v["findings"].as_array().unwrap() {
                assert!(f["title"].is_string() && f["evidence"].is_object() && f["advice"].is_array(), "{f}");
                assert!(["critical", "warning", "info"].contains(&f["severity"].as_str().unwrap()));
            }
        }
    }
}

#[test]
fn a_three_column_log_says_what_it_could_not_tell() {
    let (code, out, _) = run(gpulse(None).arg("diagnose").arg(fixture("h200-2026-11-29/seed_dl_bound.csv")));
    assert_eq!(code, 0);
    assert!(out.contains("[input_bound]") && out.contains("num_workers") && out.contains("pin_memory"), "{out}");
    assert!(out.contains("gpulse record --pid"), "names what to record: {out}");
}

#[test]
fn the_oom_is_forecast_from_half_the_ramp() {
    // rich_leak.csv: memory climbs from the first training step (14:45:28.4) until the
    // out-of-memory error at 14:46:07.14 (steps_leak.jsonl). Keep the log up to half the ramp.
    let text = std::fs::read_to_string(fixture("h200-2026-11-29/rich_leak.csv")).unwrap();
    let cut = "2026/11/29 14:45:47.800";
    let half: Vec<&str> = text.lines().take_while(|l| l.starts_with("timestamp") || l[..23] < *cut).collect();
    let dir = fresh_dir("diag", "half-leak");
    let path = dir.join("half-leak.csv");
    std::fs::write(&path, half.join("\n") + "\n").unwrap();
    let last = half.last().unwrap();
    let (_, v) = ids(&[path]);
    let f = v["findings"].as_array().unwrap().iter().find(|f| f["id"] == "memory_growth").expect("memory_growth");
    let forecast = f["evidence"]["time_to_oom_s"].as_f64().unwrap();
    let range = f["evidence"]["time_to_oom_range_s"].as_array().unwrap();
    // Seconds from the last row kept to the real OOM.
    let last_s = |l: &str| {
        let t = &l[11..23];
        let p: Vec<f64> = t.split(':').map(|x| x.parse().unwrap()).collect();
        p[0] * 3600.0 + p[1] * 60.0 + p[2]
    };
    let real = last_s("2026/11/29 14:46:07.140") - last_s(last);
    assert!((forecast - real).abs() <= 0.2 * real, "forecast {forecast:.1} s, real {real:.1} s");
    assert!(range[0].as_f64().unwrap() <= forecast && range[1].as_f64().is_none_or(|h| h >= forecast));
    assert_eq!(f["severity"], "critical");
}

#[test]
fn gpu_util_that_misleads_is_caught_on_a_real_trace() {
    // matmul_spin_idle.csv: a bf16 matmul (GPU-Util 99 %, SM 96 %), then a kernel spinning on one
    // SM (GPU-Util 100 %, SM 0.8 %), then idle; recorded by gpulse query on an H200.
    let (ids, v) = ids(&[fixture("h200-gpulse/matmul_spin_idle.csv")]);
    assert!(has(&ids, "util_misleading"), "{ids:?}");
    let f = v["findings"].as_array().unwrap().iter().find(|f| f["id"] == "util_misleading").unwrap();
    assert!(f["evidence"]["sm_active_mean_pct"].as_f64().unwrap() < 5.0);
    // The power cap held the matmul's clocks ~25 % down: worth knowing, not a fault.
    let t = v["findings"].as_array().unwrap().iter().find(|f| f["id"] == "throttling").expect("power cap");
    assert_eq!(t["severity"], "info");
}

/// Records `secs` of a scenario through the stand-in NVML library and diagnoses the recording.
fn record_and_diagnose(scenario: &std::path::Path, secs: &str) -> Vec<String> {
    let dir = fresh_dir("diag", "rec");
    let db = dir.join("rec.db");
    let (code, _, err) = run(gpulse(None)
        .env("GPULSE_FAKE_NVML_SCENARIO", scenario)
        .args(["record", "--interval", "100ms", "--duration", secs, "-o"])
        .arg(&db));
    assert_eq!(code, 0, "{err}");
    ids(&[db]).0
}

#[test]
fn a_replayed_healthy_h200_trace_reads_healthy() {
    // gpm_healthy.csv replayed by the stand-in NVML library: GPU-Util ~99 %, SM ~90 %.
    // The trace at its own pace from its 8.5th second (its busy stretch), for 11 s: the rules
    // judge a steady state from 10 s of work.
    let trace = fixture("h200-2026-11-29/gpm_healthy.csv");
    let json = std::fs::read_to_string(fixture("scenarios/h200_training.json"))
        .unwrap()
        .replace(r#""speed": 20.0,"#, r#""speed": 1.0, "start_s": 8.5,"#)
        .replace("../h200-2026-11-29/gpm_healthy.csv", trace.to_str().unwrap());
    assert!(json.contains(r#""start_s": 8.5"#), "the scenario was edited");
    let ids = record_and_diagnose(&scenario_file("healthy-own-pace", &json), "11s");
    assert!(has(&ids, "healthy"), "{ids:?}");
    assert!(!has(&ids, "util_misleading") && !has(&ids, "input_bound") && !has(&ids, "host_bound"), "{ids:?}");
}

#[test]
fn uneven_gpus_read_as_imbalance() {
    let dev = |i: u32, util: u32| {
        format!(
            r#"{{"name":"NVIDIA H200","uuid":"GPU-{i}","pci_bus_id":"00000000:{:02X}:00.0","base":{{"util_gpu_pct":{util},
            "util_mem_pct":30,"memory_total_mib":143771,"memory_used_mib":40000,"temperature_gpu_c":50,"power_w":400}}}}"#,
            0x18 + i
        )
    };
    let devices = |utils: &[u32]| {
        let list: Vec<String> = utils.iter().enumerate().map(|(i, u)| dev(i as u32, *u)).collect();
        format!(r#"{{"devices":[{}]}}"#, list.join(","))
    };
    for n in [2usize, 4, 8] {
        // One rank of n doing a fraction of the others' work.
        let mut utils = vec![92; n];
        utils[n - 1] = 21;
        let ids = record_and_diagnose(&scenario_file(&format!("imbalance{n}"), &devices(&utils)), "1s");
        assert!(has(&ids, "gpu_imbalance"), "{n} GPUs: {ids:?}");
        let even: Vec<u32> = (0..n).map(|i| 88 + (i as u32 % 5)).collect();
        let ids = record_and_diagnose(&scenario_file(&format!("even{n}"), &devices(&even)), "1s");
        assert!(!has(&ids, "gpu_imbalance"), "{n} GPUs: {ids:?}");
    }
    // A two-GPU job on an eight-GPU machine: the six GPUs nobody touches are not idle ranks.
    let ids = record_and_diagnose(&scenario_file("two_of_eight", &devices(&[92, 90, 0, 0, 0, 0, 0, 0])), "1s");
    assert!(!has(&ids, "gpu_imbalance"), "{ids:?}");
}

#[test]
fn a_real_recording_with_its_process_tree_names_the_busy_workers_and_the_foreign_holder() {
    // training_workers.db: ResNet-18 with num_workers=4 on an H200, beside an idle 4 GiB process.
    let (ids, v) = ids(&[fixture("h200-gpulse/training_workers.db")]);
    assert!(has(&ids, "input_bound") && has(&ids, "foreign_process"), "{ids:?}");
    let f = v["findings"].as_array().unwrap().iter().find(|f| f["id"] == "input_bound").unwrap();
    assert_eq!(f["evidence"]["tree_processes"], 5);
    assert!(f["evidence"]["worker_cpu_mean_pct"].as_f64().unwrap() >= 70.0, "{f}");
    assert!(f.get("limits").is_none_or(|l| !l.to_string().contains("no host data")), "{f}");
}

/// The verdict: compare's last paragraph, as one line whatever the width it was wrapped at.
fn last_paragraph(out: &str) -> String {
    out.trim_end().rsplit("\n\n").next().unwrap().split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn compare_reads_the_dataloader_fix_as_its_ground_truth() {
    // From the nvidia-smi logs alone: GPU-Util is the only measure of work.
    let h = |s: &str| fixture(&format!("h200-2026-11-29/rich_{s}.csv"));
    let (code, out, err) = run(gpulse(None).arg("compare").arg(h("dl_bound")).arg(h("dl_tuned")));
    assert_eq!(code, 0, "{err}");
    let verdict = &last_paragraph(&out);
    assert!(verdict.starts_with("input bottleneck removed; util 9% → 53%; throughput up ~"), "{out}");
    assert!(verdict.ends_with("remaining gap: host overhead"), "{out}");
    // With GPM (the gpm_* traces): SM activity measures the work. The truth is the loop's own
    // steps/s between its first and last step (7.1×; the README's 7.3× is the ratio of step
    // counts, 782 against 107, over runs of 49 and 45 s). The ratio of SM activity stands for it
    // when every step costs the same GPU work; the active window also holds start-up (model
    // build, cuDNN autotuning) that is no training step, a few seconds of 45: 10 % is allowed.
    let g = |s: &str| fixture(&format!("h200-2026-11-29/gpm_{s}.csv"));
    let truth = |s: &str| loop_truth(&fixture(&format!("h200-2026-11-29/steps_{s}.jsonl"))).1;
    let truth_ratio = truth("dl_tuned") / truth("dl_bound");
    let (code, out, err) = run(gpulse(None).arg("compare").arg(g("dl_bound")).arg(g("dl_tuned")));
    assert_eq!(code, 0, "{err}");
    let verdict = &last_paragraph(&out);
    assert!(verdict.starts_with("input bottleneck removed; util 9% → 53%; throughput up ~"), "{out}");
    assert!(verdict.ends_with("× (by SM activity); remaining gap: host overhead"), "{out}");
    let said = numbers(verdict.split("throughput up ~").nth(1).unwrap())[0];
    eprintln!("compare says {said}x, the loop {truth_ratio:.2}x");
    assert!((said - truth_ratio).abs() <= 0.10 * truth_ratio, "{said} vs {truth_ratio}: {out}");
    // Both inputs are named.
    assert!(
        out.starts_with(&format!("before: {}\nafter:  {}\n", g("dl_bound").display(), g("dl_tuned").display())),
        "{out}"
    );
    // A file against itself: unchanged, within the noise the comparison states.
    let (code, out, err) = run(gpulse(None).arg("compare").arg(g("healthy")).arg(g("healthy")));
    assert_eq!(code, 0, "{err}");
    let verdict = &last_paragraph(&out);
    assert!(verdict.contains("throughput unchanged by SM activity (within ±") && !verdict.contains('×'), "{out}");
    let changed = |l: &str| l.trim_start().starts_with("gone:") || l.trim_start().starts_with("new:");
    assert!(!out.lines().any(changed), "healthy is no finding that comes or goes: {out}");
    let replay = |s: &str| {
        let text = std::fs::read_to_string(fixture(&format!("h200-2026-11-29/gpm_{s}.csv"))).unwrap();
        let dev = gpulse_model::DeviceInfo { index: 0, memory_total_bytes: Some(143_771 << 20), ..Default::default() };
        let mut r = gpulse_sample::TraceReplay::new(&text, vec![dev.clone()], vec![], 0.2).unwrap();
        let mut rec = gpulse_record::Recording { devices: vec![dev], ..Default::default() };
        while let Ok(s) = gpulse_sample::Source::sample(&mut r) {
            rec.snapshots.push(s);
        }
        let run = gpulse_diagnose::Run::from_recording(&rec);
        let diagnosis = gpulse_diagnose::Diagnosis::of(&run);
        (run, diagnosis)
    };
    let ((rb, fb), (ra, fa)) = (replay("dl_bound"), replay("dl_tuned"));
    let c = gpulse_diagnose::compare::compare(&rb, &fb, &ra, &fa);
    let ratio = c.gpu_work_ratio.unwrap();
    assert_eq!(c.gpu_work_basis, gpulse_diagnose::compare::WorkBasis::SmActivity);
    eprintln!("SM-activity ratio {ratio:.2}x against 7.3x");
    assert!((7.3 * 0.8..=7.3 * 1.2).contains(&ratio), "{ratio:.2}x against 7.3x: {}", c.verdict);
    assert!(c.verdict.starts_with("input bottleneck removed"), "{}", c.verdict);
}

#[test]
fn ranks_without_set_device_read_as_misbinding_and_dataparallel_does_not() {
    let gpu = |i: u32, procs: &str| {
        format!(
            r#"{{"name":"NVIDIA H200","uuid":"GPU-{i}","pci_bus_id":"00000000:{:02X}:00.0","base":{{"util_gpu_pct":80,
            "util_mem_pct":30,"memory_total_mib":143771,"memory_used_mib":40000}},"processes":[{procs}]}}"#,
            0x18 + i
        )
    };
    // DDP without torch.cuda.set_device: rank 1 (pid 4001) works on GPU 1 and also holds a
    // 500 MiB context on GPU 0, next to rank 0 (pid 4000).
    let misbound = scenario_file(
        "misbound",
        &format!(
            r#"{{"devices":[{},{}]}}"#,
            gpu(0, r#"{"pid":4000,"used_memory_mib":20000},{"pid":4001,"used_memory_mib":500}"#),
            gpu(1, r#"{"pid":4001,"used_memory_mib":20000}"#)
        ),
    );
    let ids = record_and_diagnose(&misbound, "1s");
    assert!(has(&ids, "device_misbinding"), "{ids:?}");
    // nn.DataParallel: one process with a full replica on each GPU is parallelism, not a stray.
    let dp = scenario_file(
        "dataparallel",
        &format!(
            r#"{{"devices":[{},{}]}}"#,
            gpu(0, r#"{"pid":5000,"used_memory_mib":30000}"#),
            gpu(1, r#"{"pid":5000,"used_memory_mib":18000}"#)
        ),
    );
    assert!(!has(&record_and_diagnose(&dp, "1s"), "device_misbinding"));
}

#[test]
fn real_two_gpu_traces_read_as_what_they_are() {
    // The same model four ways on two H200s under `gpulse run --instrument` (tests/fixtures/README.md).
    let multi = ["gpu_imbalance", "device_misbinding", "data_parallel"];
    let of = |n: &str| ids(&[fixture(&format!("h200x2-gpulse/{n}.db"))]);
    let (ddp, v) = of("ddp");
    assert!(multi.iter().all(|m| !has(&ddp, m)), "correct DDP: {ddp:?}");
    assert_eq!(v["steps"]["ranks"], 2, "each torchrun rank marks its steps");
    let (misbound, v) = of("misbound");
    assert!(has(&misbound, "device_misbinding"), "{misbound:?}");
    let f = v["findings"].as_array().unwrap().iter().find(|f| f["id"] == "device_misbinding").unwrap();
    assert_eq!(f["evidence"]["gpu"], 0);
    assert_eq!(f["evidence"]["home_gpus"], serde_json::json!([1]));
    assert!(f["evidence"]["extra_gib"].as_f64().unwrap() > 0.3, "{f}");
    assert_eq!(f["evidence"]["pids"].as_array().unwrap().len(), 1, "names the rank: {f}");
    let (uneven, v) = of("uneven");
    assert!(has(&uneven, "gpu_imbalance") && !has(&uneven, "device_misbinding"), "{uneven:?}");
    let f = v["findings"].as_array().unwrap().iter().find(|f| f["id"] == "gpu_imbalance").unwrap();
    for spread in ["sm_active_mean_pct", "util_gpu_spread_pct", "memory_peak_gib"] {
        assert_eq!(f["evidence"][spread].as_array().map(Vec::len), Some(2), "{spread}: {f}");
    }
    let (dp, v) = of("dataparallel");
    assert!(has(&dp, "data_parallel") && !has(&dp, "device_misbinding"), "{dp:?}");
    let f = v["findings"].as_array().unwrap().iter().find(|f| f["id"] == "data_parallel").unwrap();
    assert!(f["advice"].to_string().contains("DistributedDataParallel"));
    // Instrumented, with no DataLoader: the one process is busy driving two GPUs, not waiting for
    // data.
    assert!(!has(&dp, "input_bound"), "{dp:?}");
    // A one-GPU job on a two-GPU machine (gpulse attach): the idle GPU is not an imbalance.
    let (single, _) = of("attach_single_gpu");
    assert!(has(&single, "util_misleading") && !has(&single, "gpu_imbalance"), "{single:?}");
}

#[test]
fn every_gpm_trace_replayed_reads_as_its_ground_truth() {
    // The 200 ms NVML traces with GPM (gpm_*.csv), replayed through the same Source as the demo.
    for s in SCENARIOS {
        let text = std::fs::read_to_string(fixture(&format!("h200-2026-11-29/gpm_{s}.csv"))).unwrap();
        let dev = gpulse_model::DeviceInfo { index: 0, memory_total_bytes: Some(143_771 << 20), ..Default::default() };
        let mut r = gpulse_sample::TraceReplay::new(&text, vec![dev.clone()], vec![], 0.2).unwrap();
        let mut rec = gpulse_record::Recording { devices: vec![dev], ..Default::default() };
        while let Ok(snap) = gpulse_sample::Source::sample(&mut r) {
            rec.snapshots.push(snap);
        }
        let ids: Vec<String> = gpulse_diagnose::diagnose(&rec).iter().map(|f| f.id.as_str().to_owned()).collect();
        let ok = match s {
            "dl_bound" => has(&ids, "input_bound") && !has(&ids, "host_bound"),
            "dl_tuned" => has(&ids, "host_bound") && !has(&ids, "input_bound"),
            "tiny" => has(&ids, "host_bound") && !has(&ids, "input_bound"),
            "leak" => has(&ids, "memory_growth") && has(&ids, "oom"),
            "healthy" => has(&ids, "healthy"),
            "stall" => has(&ids, "periodic_stall"),
            _ => unreachable!(),
        };
        assert!(ok && !has(&ids, "util_misleading"), "gpm_{s}: {ids:?}");
    }
}

/// The recorder asks GPM only for `GPM_RECORDED`: every real recording among the fixtures,
/// stripped of the other metrics, diagnoses exactly as it did with them.
#[test]
fn the_recorded_gpm_metrics_are_all_diagnosis_needs() {
    let mut dbs = Vec::new();
    for dir in ["h200-diagnosis", "h200-gpulse-run", "h200-gpulse"] {
        for e in std::fs::read_dir(fixture(dir)).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "db") {
                dbs.push(e.path());
            }
        }
    }
    assert!(dbs.len() >= 10, "{dbs:?}");
    for db in dbs {
        let full = gpulse_record::read(&db).unwrap();
        let mut stripped = full.clone();
        let mut had_gpm = false;
        for g in stripped.snapshots.iter_mut().flat_map(|s| s.gpus.iter_mut()) {
            if let Some(m) = g.gpm.as_deref_mut() {
                had_gpm = true;
                for f in gpulse_model::GPM_FIELDS.iter().filter(|f| !gpulse_model::GPM_RECORDED.contains(&f.nvml_id)) {
                    (f.set)(m, None);
                }
            }
        }
        let json = |r: &gpulse_model::RunData| serde_json::to_value(gpulse_diagnose::diagnose(r)).unwrap();
        assert_eq!(json(&stripped), json(&full), "{} (GPM: {had_gpm})", db.display());
    }
}

/// Every recording and log among the fixtures: the warnings' costs are their ledger accounts'
/// shares and so add up to at most the run; a title that says a share of the wall time says its
/// cost's, as the headline does (and a share of the loop its loop share), no gpulse frame is
/// shown as a site; and every inferred cause of the loop's idle time that holds 5 %
/// of the run names the finding that explains it.
#[test]
fn lost_shares_add_up_and_every_material_cause_has_a_finding() {
    let mut inputs = Vec::new();
    let mut dirs = vec![fixture("")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            match p.extension().and_then(|x| x.to_str()) {
                _ if p.is_dir() => dirs.push(p),
                Some("db") => inputs.push(p),
                // nvidia-smi logs of the query kind diagnose alone; process logs go with them.
                Some("csv") if p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("rich_")) => {
                    inputs.push(p)
                }
                _ => {}
            }
        }
    }
    inputs.sort();
    assert!(inputs.len() >= 40, "{inputs:?}");
    const CAUSES: [&str; 6] =
        ["host_side", "input_inferred", "transfer", "host_saturated", "gpu_others", "storage_write"];
    for input in inputs {
        let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(&input));
        if code != 0 {
            // A fixture of another kind (an empty or broken file kept to test refusals).
            assert!(err.starts_with("gpulse: "), "{}: {err}", input.display());
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let ctx = input.display();
        let mut sum = 0.0;
        let mut shown = Vec::new();
        for f in v["findings"].as_array().unwrap() {
            let Some(lost) = f["cost"]["wall_share"].as_f64() else { continue };
            let pct = gpulse_diagnose::pct(lost);
            let title = f["title"].as_str().unwrap();
            if title.contains("% of the wall time") {
                assert!(title.contains(&format!("{pct} of the wall time")), "{ctx}: {pct}: {title}");
            }
            // A share said to be lost is the cost's share of the wall time, whatever else the
            // rule measured it against.
            if (title.contains("lost") || title.contains("losing")) && title.contains('%') {
                assert!(title.contains(&format!("{pct} of the wall time")), "{ctx}: {pct}: {title}");
            }
            // A share of the loop in the title is the cost's too: one number per cause.
            if let Some(l) = f["cost"]["loop_share"].as_f64().filter(|_| title.contains("% of the loop")) {
                let l = gpulse_diagnose::pct(l);
                assert!(title.contains(&format!("{l} of the loop")), "{ctx}: {l}: {title}");
            }
            // gpulse's own instrumentation is never the user's line.
            let said = f.to_string();
            assert!(!said.contains("gpulse/_") && !said.contains("_instrument.py"), "{ctx}: {said}");
            // Each account it names is in the ledger.
            for name in f["cost"]["accounts"].as_array().unwrap() {
                assert!(
                    v["ledger"]["accounts"].as_array().unwrap().iter().any(|a| a["account"] == *name),
                    "{ctx}: {f}"
                );
            }
            shown.push(pct);
            if f["severity"] != "info" {
                sum += lost;
            }
        }
        if let Some(headline) = v["summary"].as_str().filter(|s| s.contains("% of the wall time")) {
            assert!(
                shown.iter().any(|p| headline.contains(&format!(" {p} of the wall time"))),
                "{ctx}: {headline}: {shown:?}"
            );
        }
        assert!(sum <= 1.0005, "{ctx}: warnings' lost shares sum to {sum}");
        for a in v["ledger"]["accounts"].as_array().unwrap() {
            let name = a["account"].as_str().unwrap();
            let cause = CAUSES.contains(&name) || name.starts_with("main_thread_");
            if cause && a["basis"] == "inferred" && a["share"].as_f64().unwrap() >= 0.05 {
                // Its own finding, or one whose rule claims it (checkpoint writes name theirs).
                let named = a["finding"].is_string()
                    || (name == "storage_write"
                        && v["findings"].as_array().unwrap().iter().any(|f| f["id"] == "checkpoint_writes"));
                assert!(named, "{ctx}: {a}");
            }
        }
    }
}

/// A real H200 job whose memory grew to 41.5 of 140 GiB and fell to nothing when it exited with
/// status 0: growth that stopped short of the limit, never an OOM.
#[test]
fn a_clean_exit_after_growth_is_no_oom() {
    let (ids, v) = ids(&[fixture("h200-sentences/grow_exit.db")]);
    assert!(!has(&ids, "oom") && !has(&ids, "memory_pressure"), "{ids:?}");
    let g = v["findings"].as_array().unwrap().iter().find(|f| f["id"] == "memory_growth").unwrap();
    let headroom = g["evidence"]["headroom_left_gib"].as_f64().unwrap();
    // 140 GiB less the 41.5 the job held (its tensors, and its CUDA context).
    assert!((97.0..=100.0).contains(&headroom), "{g}");
    assert!(g["title"].as_str().unwrap().contains("short of the limit"), "{g}");
}
