//! The loop's own marks on the real H200 runs: the fixtures' `steps_*.jsonl` (each step's wait
//! for data and compute, logged by the training loop) become the marks `gpulse run --instrument`
//! sends, beside the GPM trace of the same run.

use gpulse_diagnose::FindingId;
use gpulse_record::{Marker, MarkerKind, Recording};

use super::support::{fixture, loop_steps, loop_truth, numbers};

/// The run's GPM trace and its steps as marks. Returns the run and the loop's own data-wait
/// share over the same window (from the end of the first step to the end of the last).
fn run_with_marks(name: &str) -> (gpulse_diagnose::Run, f64, f64) {
    let text = std::fs::read_to_string(fixture(&format!("h200-2026-11-29/gpm_{name}.csv"))).unwrap();
    let dev = gpulse_model::DeviceInfo { index: 0, memory_total_bytes: Some(143_771 << 20), ..Default::default() };
    let mut replay = gpulse_sample::TraceReplay::new(&text, vec![dev.clone()], vec![], 0.2).unwrap();
    let mut rec = Recording { devices: vec![dev], ..Default::default() };
    while let Ok(s) = gpulse_sample::Source::sample(&mut replay) {
        rec.snapshots.push(s);
    }
    let steps = std::fs::read_to_string(fixture(&format!("h200-2026-11-29/steps_{name}.jsonl"))).unwrap();
    let (mut ends, mut waits) = (Vec::new(), Vec::new());
    for line in steps.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let (Some(t), Some(data), Some(compute)) = (v["t"].as_f64(), v["data_s"].as_f64(), v["compute_s"].as_f64())
        else {
            continue;
        };
        let us = |s: f64| (s * 1e6).round() as i64;
        rec.markers.push(Marker::one(us(t), 1, MarkerKind::DataWait, None, Some(us(data))));
        rec.markers.push(Marker::one(us(t + data + compute), 1, MarkerKind::Step, None, None));
        ends.push(t + data + compute);
        waits.push(data);
    }
    let truth = 100.0 * waits[1..].iter().sum::<f64>() / (ends[ends.len() - 1] - ends[0]);
    let per_s = (ends.len() - 1) as f64 / (ends[ends.len() - 1] - ends[0]);
    (gpulse_diagnose::Run::from_recording(&rec), truth, per_s)
}

#[test]
fn input_bound_rests_on_the_measured_wait() {
    let (run, truth, _) = run_with_marks("dl_bound");
    let findings = gpulse_diagnose::diagnose_run(&run);
    let f = findings.iter().find(|f| f.id == FindingId::InputBound).expect("dl_bound is input-bound");
    let measured = f.evidence["data_wait_share_pct"].as_f64().unwrap();
    eprintln!("dl_bound: data wait {measured:.1}% against the loop's {truth:.1}%");
    assert!((measured - truth).abs() <= 1.0, "{measured} vs {truth}");
    assert!(f.title.contains("measured in the loop"), "{}", f.title);
    assert!(f.limits.is_empty(), "a measured wait has no caveat: {:?}", f.limits);

    let (run, truth, _) = run_with_marks("dl_tuned");
    let findings = gpulse_diagnose::diagnose_run(&run);
    let ids: Vec<FindingId> = findings.iter().map(|f| f.id).collect();
    eprintln!("dl_tuned: the loop waited {truth:.1}%; findings {ids:?}");
    assert!(!ids.contains(&FindingId::InputBound), "{ids:?}");
    let hb = findings.iter().find(|f| f.id == FindingId::HostBound).expect("the rest of the gap is the host");
    assert!(hb.evidence["data_wait_share_pct"].as_f64().unwrap() < 5.0);
}

#[test]
fn compare_reports_steps_per_second() {
    let (before, b_wait, b_truth) = run_with_marks("dl_bound");
    let (after, a_wait, a_truth) = run_with_marks("dl_tuned");
    let (fb, fa) = (gpulse_diagnose::Diagnosis::of(&before), gpulse_diagnose::Diagnosis::of(&after));
    let c = gpulse_diagnose::compare::compare(&before, &fb, &after, &fa);
    assert_eq!(c.gpu_work_basis, gpulse_diagnose::compare::WorkBasis::StepsPerS);
    let truth = a_truth / b_truth;
    let ratio = c.gpu_work_ratio.unwrap();
    eprintln!("{}", c.verdict);
    assert!((ratio - truth).abs() < 0.01 * truth, "{ratio} vs {truth}");
    assert!(c.verdict.contains(&format!("{:.1}× more steps/s", truth)), "{}", c.verdict);
    assert!(c.verdict.contains(&format!("data wait {b_wait:.0}% → {a_wait:.0}%")), "{}", c.verdict);
}

/// Recordings `gpulse run --instrument` made of the fixtures' workloads on an H200.
#[test]
fn gpulse_run_on_the_h200_agrees_with_the_loops_own_timing() {
    let dir = fixture("h200-gpulse-run");
    let diagnose = |name: &str| {
        let (code, out, err) = super::support::run(
            super::support::gpulse(None).arg("diagnose").arg(dir.join(format!("{name}.db"))).args(["--format", "json"]),
        );
        assert_eq!(code, 0, "{err}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    for (name, input_bound) in [("dl_bound", true), ("dl_tuned", false)] {
        let (truth, truth_per_s) = loop_truth(&dir.join(format!("steps_{name}.jsonl")));
        let d = diagnose(name);
        let measured = d["steps"]["data_wait_share_pct"].as_f64().unwrap();
        let per_s = d["steps"]["steps_per_s"].as_f64().unwrap();
        eprintln!(
            "{name}: data wait gpulse {measured:.1}% vs the loop {truth:.1}%; {per_s:.2} vs {truth_per_s:.2} steps/s"
        );
        assert!((measured - truth).abs() <= 5.0, "{name}: {measured} vs {truth}");
        assert!((per_s - truth_per_s).abs() <= 0.02 * truth_per_s, "{name}: {per_s} vs {truth_per_s}");
        let ids: Vec<&str> = d["findings"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap()).collect();
        assert_eq!(ids.contains(&"input_bound"), input_bound, "{name}: {ids:?}");
    }
    let (code, out, err) = super::support::run(
        super::support::gpulse(None).arg("compare").arg(dir.join("dl_bound.db")).arg(dir.join("dl_tuned.db")),
    );
    assert_eq!(code, 0, "{err}");
    // Against the loop's own steps/s and wait: the same 2 % as above, plus the table's rounding
    // to 0.1 (steps/s) and to 0.1 point (the wait).
    let (b_wait, b_per_s) = loop_truth(&dir.join("steps_dl_bound.jsonl"));
    let (a_wait, a_per_s) = loop_truth(&dir.join("steps_dl_tuned.jsonl"));
    let row =
        |name: &str| numbers(out.lines().find(|l| l.trim_start().starts_with(name)).unwrap_or_else(|| panic!("{out}")));
    let steps = row("steps/s");
    assert!((steps[0] - b_per_s).abs() <= 0.02 * b_per_s + 0.05, "{steps:?} vs {b_per_s}: {out}");
    assert!((steps[1] - a_per_s).abs() <= 0.02 * a_per_s + 0.05, "{steps:?} vs {a_per_s}: {out}");
    let truth_ratio = a_per_s / b_per_s;
    assert!((steps[2] - truth_ratio).abs() <= 0.04 * truth_ratio + 0.05, "{steps:?} vs {truth_ratio}: {out}");
    // The verdict: the last paragraph, however it was wrapped.
    let verdict = out.trim_end().rsplit("\n\n").next().unwrap().split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(verdict.contains(&format!("{truth_ratio:.1}× more steps/s")), "{verdict} vs {truth_ratio}");
    // A share changes by points, not by a ratio of shares.
    let wait = row("data wait");
    assert!(!out.contains("0.0×") && out.lines().any(|l| l.contains("data wait") && l.ends_with(" pts")), "{out}");
    assert!((wait[2] - (a_wait - b_wait)).abs() <= 5.0 + 0.1, "{wait:?} vs {}: {out}", a_wait - b_wait);

    // The leak: the OOM on stderr is an event, and the forecast made before it is in the file.
    let rec = gpulse_record::read(&dir.join("leak.db")).unwrap();
    let oom = rec.events.iter().find(|e| e.kind.as_str() == "cuda_oom").expect("the OOM event");
    assert!(oom.payload["text"].as_str().unwrap().starts_with("torch.OutOfMemoryError: CUDA out of memory."));
    let forecast = rec
        .events
        .iter()
        .find(|e| e.kind.as_str() == "finding" && e.payload["evidence"]["time_to_oom_s"].is_number())
        .expect("a forecast");
    let lead_s = (oom.t_ms - forecast.t_ms) as f64 / 1000.0;
    let predicted_s = forecast.payload["evidence"]["time_to_oom_s"].as_f64().unwrap();
    eprintln!("leak: forecast {lead_s:.0} s before the OOM, predicting {predicted_s:.0} s");
    assert!(lead_s >= 15.0 && (predicted_s - lead_s).abs() <= 5.0, "{lead_s} vs {predicted_s}");
    let d = diagnose("leak");
    let oom = d["findings"].as_array().unwrap().iter().find(|f| f["id"] == "oom").expect("oom finding");
    let message = &oom["evidence"]["message"];
    let text = message["text"].as_str().unwrap();
    assert!(text.contains("CUDA out of memory"));
    // PyTorch's message ends with its documentation's URL, "…pytorch-cuda-alloc-conf)"; this
    // recording kept its first 600 characters, up to the middle of the URL. The finding shows
    // them up to the last whole word, without the broken URL, and says it was cut.
    let stored = rec.events.iter().find(|e| e.kind.as_str() == "cuda_oom").unwrap().payload["text"].as_str().unwrap();
    assert!(stored.ends_with("#optimizing-memory-usage-with-pytorch-cuda-a"), "{stored}");
    assert!(stored.starts_with(text) && text.ends_with("See documentation for Memory Management"), "{text}");
    assert_eq!(message["cut"], true, "{message}");
    let limits = oom["limits"].as_array().unwrap();
    assert!(limits.iter().any(|l| l.as_str().unwrap().contains("cut when recorded")), "{limits:?}");
}

#[test]
fn the_report_draws_step_time_and_data_wait_and_lists_caught_errors() {
    let dir = super::support::fresh_dir("markers", "report");
    let report = |name: &str| {
        let out = dir.join(format!("{name}.html"));
        let (code, _, err) = super::support::run(
            super::support::gpulse(None)
                .arg("report")
                .arg(fixture(&format!("h200-gpulse-run/{name}.db")))
                .arg("-o")
                .arg(&out),
        );
        assert_eq!(code, 0, "{err}");
        std::fs::read_to_string(out).unwrap()
    };
    let html = report("dl_bound");
    // The loop's own count, and its rate over every step after the first (the first step's mark
    // opens the window), at the loop's steps/s within the 2 % above and the text's 0.005 rounding.
    let truth = fixture("h200-gpulse-run/steps_dl_bound.jsonl");
    let (_, per_s) = loop_truth(&truth);
    let head = "<h2>Training loop</h2><p>";
    let section = &html[html.find(head).expect("the loop's section") + head.len()..];
    let n = numbers(section.split(" after the first mark").next().unwrap());
    assert_eq!((n[0] as usize, n[2] as usize), (loop_steps(&truth), loop_steps(&truth) - 1), "{}", &section[..80]);
    assert!((n[1] - per_s).abs() <= 0.02 * per_s + 0.005, "{n:?} vs {per_s}");
    assert!(section.starts_with(&format!("{} steps marked, ", loop_steps(&truth))), "{}", &section[..80]);
    assert!(html.contains("waiting for data 87% of that time"));
    let section = &html[html.find("Training loop").unwrap()..];
    assert!(section.contains("Step time and data wait, ms") && section.contains("<title>waiting for data</title>"));
    let html = report("leak");
    assert!(html.contains("<h2>Events</h2>") && html.contains("<td>cuda_oom</td>"), "the OOM is listed");
    assert!(html.contains("torch.OutOfMemoryError: CUDA out of memory."));
}

/// A launch-bound loop on the H200 under `--instrument`: ~1 200 steps a second, folded into a few
/// rows a second, still counted step by step.
#[test]
fn a_fast_real_loop_is_folded_and_counted_exactly() {
    let path = fixture("h200-gpulse-run/tiny_instrumented.db");
    let rec = gpulse_record::read(&path).unwrap();
    let steps: Vec<&Marker> = rec.markers.iter().filter(|m| m.kind == MarkerKind::Step).collect();
    assert_eq!(steps.iter().map(|m| m.count).sum::<u32>(), 23_384, "the loop's own count");
    assert!(steps.len() < 250, "{} rows", steps.len());
    let run = gpulse_diagnose::Run::from_recording(&rec);
    let s = run.steps.as_ref().unwrap();
    assert_eq!((s.marked, s.timed), (23_384, 23_383), "every step marked; timed, those after the first mark");
    assert!((1_100.0..1_300.0).contains(&s.per_s()), "{}", s.per_s());
    assert_eq!(s.data_wait_share(), Some(0.0), "instrumented, and no DataLoader");
    let ids: Vec<FindingId> = gpulse_diagnose::diagnose_run(&run).iter().map(|f| f.id).collect();
    assert!(ids.contains(&FindingId::HostBound) && !ids.contains(&FindingId::InputBound), "{ids:?}");
}
