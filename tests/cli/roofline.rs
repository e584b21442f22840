//! The roofline estimate: ground truth through the stand-in's live path, old recordings read
//! without the new pipes, and the roofline line and the `tensor_idle` finding agreeing on every
//! fixture.

use gpulse_diagnose::roofline::{Bound, Pipe};
use gpulse_diagnose::{FindingId, Run};

use super::support::*;

/// Every recording, log and trace under `tests/fixtures` that gpulse reads.
fn every_fixture() -> Vec<std::path::PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "db" || x == "csv") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&fixture(""), &mut out);
    out.sort();
    out
}

#[test]
fn the_roofline_line_and_tensor_idle_agree_on_every_fixture() {
    let (mut read, mut with_gpm) = (0, 0);
    for path in every_fixture() {
        let Ok(rec) = gpulse_input::load(&path) else { continue };
        read += 1;
        let run = Run::from_recording(&rec);
        let findings = gpulse_diagnose::diagnose_run(&run);
        let efficiency = gpulse_diagnose::efficiency(&run);
        with_gpm += usize::from(!efficiency.is_empty());
        let idle_gpus: Vec<Option<u32>> =
            findings.iter().filter(|f| f.id == FindingId::TensorIdle).map(|f| f.gpu).collect();
        for g in idle_gpus.iter().flatten() {
            assert!(
                efficiency.iter().any(|e| e.gpu == *g),
                "{}: tensor_idle on GPU {g} without a roofline",
                path.display()
            );
        }
        for e in &efficiency {
            let name = format!("{} GPU {}", path.display(), e.gpu);
            let line = e.line();
            assert!(!line.contains("NaN") && !line.contains("inf"), "{name}: {line}");
            assert_eq!(e.tensor_idle, idle_gpus.contains(&Some(e.gpu)), "{name}: {line}");
            let pipe = e.math.as_ref().map(|m| m.pipe);
            if e.tensor_idle {
                assert_eq!(pipe, Some(Pipe::Fp32), "{name}: idle tensor cores, the FP32 pipe works: {line}");
                assert!(line.contains("tensor cores idle (tensor_idle)"), "{name}: {line}");
            }
            if e.bound == Some(Bound::Math) && matches!(pipe, Some(Pipe::Hmma | Pipe::AnyTensor)) {
                assert!(!e.tensor_idle, "{name}: bound by the tensor cores it calls idle: {line}");
            }
        }
    }
    assert!(read >= 20 && with_gpm >= 5, "walked {read} fixtures, {with_gpm} with GPM");
}

/// A recording made before the IMMA, DFMA and integer columns reads as it did, the new
/// metrics absent (never 0).
#[test]
fn an_older_recording_reads_without_the_new_pipes() {
    let rec = gpulse_record::read(&fixture("h200-gpulse-run/dl_bound.db")).unwrap();
    let gpm: Vec<&gpulse_model::GpmMetrics> =
        rec.snapshots.iter().flat_map(|s| s.gpus.iter()).filter_map(|g| g.gpm.as_deref()).collect();
    assert!(!gpm.is_empty());
    assert!(gpm.iter().all(|m| m.sm_util_pct.is_some()));
    assert!(
        gpm.iter().all(|m| (m.imma_tensor_util_pct, m.dfma_tensor_util_pct, m.integer_util_pct) == (None, None, None))
    );
}

/// The stand-in runs an H200 at a fixed 1830 MHz (the clock its datasheet's tensor peaks are
/// quoted at) with the HMMA pipe 60 % busy: `gpulse record` asks for the pipes, and the
/// estimate is 60 % of 989.5 TFLOP/s in BF16, half that in TF32, 60 % of the peak either way.
#[test]
fn a_known_pipe_activity_at_a_known_clock_gives_a_known_rate_through_the_live_path() {
    let json = std::fs::read_to_string(fixture("scenarios/h200_idle.json"))
        .unwrap()
        .replace(r#""util_gpu_pct": 0,"#, r#""util_gpu_pct": 97,"#)
        .replace(r#""clock_sm_mhz": 405"#, r#""clock_sm_mhz": 1830"#)
        .replace(r#""sm": 0.0, "occupancy": 0.0, "any_tensor": 0.0, "hmma": 0.0, "dram": 0.0"#, r#""sm": 90.0, "occupancy": 30.0, "any_tensor": 60.0, "hmma": 60.0, "dram": 25.0, "imma": 0.0, "dfma": 0.0"#)
        .replace(r#""fp32": 0.0"#, r#""fp32": 5.0"#);
    assert!(json.contains(r#""hmma": 60.0"#) && json.contains("1830"), "the scenario was edited");
    let sc = scenario_file("roofline-hmma60", &json);
    let dir = fresh_dir("roofline", "live");
    let db = dir.join("hmma60.db");
    let (code, _, err) = run(gpulse(None)
        .env("GPULSE_FAKE_NVML_SCENARIO", &sc)
        .args(["record", "--interval", "100ms", "--gpm-interval", "100ms", "--duration", "2s", "-o"])
        .arg(&db));
    assert_eq!(code, 0, "{err}");
    let rec = gpulse_record::read(&db).unwrap();
    let e = gpulse_diagnose::efficiency(&Run::from_recording(&rec)).remove(0);
    assert_eq!(e.product, Some("H200 SXM"));
    let m = e.math.as_ref().unwrap();
    assert_eq!((m.pipe, m.active_pct), (Pipe::Hmma, 60.0));
    let rate = |p| m.rates.iter().find(|r| r.precision == p).unwrap().achieved_per_s;
    assert!((rate(gpulse_model::Precision::Bf16Tensor) / (0.6 * 989.5e12) - 1.0).abs() < 1e-3);
    assert!((rate(gpulse_model::Precision::Tf32Tensor) / (0.6 * 494.5e12) - 1.0).abs() < 1e-3);
    let [lo, hi] = m.utilization_ratio().unwrap();
    assert!((lo - 0.6).abs() < 1e-3 && (hi - 0.6).abs() < 1e-3, "{lo} {hi}");
    assert!((e.dram_ratio().unwrap() - 0.25).abs() < 1e-9);
    assert_eq!(e.bound, Some(Bound::Math));
}

/// Ground truth from the H200: GEMMs of known FLOPs in each precision and copies of known bytes,
/// each loop's own rate beside the recording `gpulse run` made of it. The estimate is within
/// ±20 % of the truth, at the precision the loop computed, and under the roof it ran into.
#[test]
fn the_estimate_is_within_a_fifth_of_the_h200_ground_truth() {
    use gpulse_model::Precision;
    let dir = fixture("h200-roofline");
    let truth = std::fs::read_to_string(dir.join("truth.jsonl")).unwrap();
    let mut checked = 0;
    for line in truth.lines() {
        let t: serde_json::Value = serde_json::from_str(line).unwrap();
        let kind = t["kind"].as_str().unwrap();
        let computed = t["rate_per_s"].as_f64().unwrap();
        let rec = gpulse_input::load(&dir.join(format!("{kind}.db"))).unwrap();
        let e = gpulse_diagnose::efficiency(&Run::from_recording(&rec)).into_iter().find(|e| e.gpu == 0).unwrap();
        let (estimate, bound) = match kind {
            "copy" => (e.dram_bytes_per_s.unwrap(), Bound::Memory),
            _ => {
                let precision = match kind {
                    "bf16" | "fp16" => Precision::Bf16Tensor,
                    "tf32" => Precision::Tf32Tensor,
                    "fp32" => Precision::Fp32,
                    "fp64" => Precision::Fp64Tensor,
                    other => panic!("no precision for {other}"),
                };
                let math = e.math.as_ref().unwrap();
                let rate = math.rates.iter().find(|r| r.precision == precision);
                (rate.unwrap_or_else(|| panic!("{kind}: {math:?}")).achieved_per_s, Bound::Math)
            }
        };
        let ratio = estimate / computed;
        assert!((0.8..=1.2).contains(&ratio), "{kind}: estimate {estimate:.3e} against {computed:.3e} ({ratio:.2})");
        assert_eq!(e.bound, Some(bound), "{kind}: {}", e.line());
        checked += 1;
    }
    assert_eq!(checked, 6, "every kind the calibration ran");
}

/// A job shorter than the energy counter's 30 s period: the counter is read at the first poll and
/// again at the job's closing poll, and its rise between is split by the power samples. The
/// stand-in draws 600 W throughout and its counter rises with it, so each step costs 600 W times
/// the step's time, which the loop measures itself.
#[test]
fn a_short_jobs_energy_per_step_is_its_power_times_its_step_time() {
    const WATTS: f64 = 600.0;
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("scenarios/h200_idle.json")).unwrap()).unwrap();
    let dev = &mut json["devices"][0];
    dev["base"]["power_w"] = WATTS.into();
    dev["base"]["util_gpu_pct"] = 97.into();
    dev["base"]["gpm"]["sm"] = 90.0.into();
    dev["base"]["gpm"]["hmma"] = 50.0.into();
    // The counter as the driver keeps it, at a twentieth of a second's grain.
    dev["timeline"] =
        (0..1200).map(|i| serde_json::json!({"t_s": i as f64 / 20.0, "energy_j": WATTS * i as f64 / 20.0})).collect();
    let sc = scenario_file("energy-short-job", &json.to_string());
    let dir = fresh_dir("roofline", "energy");
    let script = "import gpulse, json, time\n\
        time.sleep(1.0)\n\
        ends = []\n\
        for _ in range(25):\n    time.sleep(0.1)\n    gpulse.step()\n    ends.append(time.monotonic())\n\
        time.sleep(0.5)\n\
        json.dump((ends[-1] - ends[0]) / (len(ends) - 1), open('step_s.json', 'w'))\n";
    let (code, _, err) = run(gpulse(None)
        .current_dir(&dir)
        .env("GPULSE_FAKE_NVML_SCENARIO", &sc)
        .env("PYTHONPATH", root().join("python"))
        .args([
            "run",
            "--status",
            "off",
            "--no-report",
            "--interval",
            "200ms",
            "-o",
            "e.db",
            "--",
            "python3",
            "-c",
            script,
        ]));
    assert_eq!(code, 0, "{err}");
    let step_s: f64 = serde_json::from_str(&std::fs::read_to_string(dir.join("step_s.json")).unwrap()).unwrap();
    let rec = gpulse_record::read(&dir.join("e.db")).unwrap();
    let e = gpulse_diagnose::efficiency(&Run::from_recording(&rec)).remove(0);
    let energy = e.energy.as_ref().unwrap_or_else(|| panic!("no energy per step: {:?}", e.limits));
    let truth = WATTS * step_s;
    assert!(
        (energy.joules_per_step / truth - 1.0).abs() < 0.05,
        "{} J per step against {truth:.1}",
        energy.joules_per_step
    );
    assert!(energy.split_by_power, "a 4 s job is inside one 30 s period of the counter");
    assert!(err.contains("J per step"), "the summary says it: {err}");
}

/// Energy per step on the H200 against the job's own reads of the energy counter at its first
/// and last step: the short loop lies inside one 30 s period of the recorder's reads, so both
/// its edges are split by the power samples. Each edge can be off by about half a poll of the
/// power's step there (the samples are a poll apart, and the driver's reading averages the last
/// second), which bounds the error.
#[test]
fn energy_per_step_on_the_h200_is_within_the_power_samples_grain_of_the_truth() {
    let dir = fixture("h200-energy");
    let truth = std::fs::read_to_string(dir.join("truth.jsonl")).unwrap();
    for line in truth.lines() {
        let t: serde_json::Value = serde_json::from_str(line).unwrap();
        let name = t["run"].as_str().unwrap();
        let rec = gpulse_record::read(&dir.join(format!("energy_{name}.db"))).unwrap();
        let run = Run::from_recording(&rec);
        let e = gpulse_diagnose::efficiency(&run).remove(0);
        let energy = e.energy.unwrap_or_else(|| panic!("{name}: {:?}", e.limits));
        assert_eq!(energy.steps as u64, t["steps"].as_u64().unwrap(), "{name}");
        let g = &run.gpus[0];
        let watts: Vec<f64> = g.power_w.iter().flatten().copied().collect();
        let step_w = watts.iter().copied().fold(f64::MIN, f64::max) - watts.iter().copied().fold(f64::MAX, f64::min);
        let poll_s = (g.t_s[g.t_s.len() - 1] - g.t_s[0]) / (g.t_s.len() - 1) as f64;
        let bound_j = 2.0 * 0.5 * poll_s * step_w;
        let joules = energy.joules_per_step * energy.steps as f64;
        let truth_j = t["joules"].as_f64().unwrap();
        eprintln!("{name}: {:.2} J per step against {:.2}", energy.joules_per_step, t["joules_per_step"]);
        assert!((joules - truth_j).abs() <= bound_j, "{name}: {joules:.0} J against {truth_j:.0}, bound {bound_j:.0}");
        assert!(energy.split_by_power, "{name}");
    }
}
