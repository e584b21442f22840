//! The job's sampled Python stacks in speedscope's file format
//! (<https://www.speedscope.app/file-format-schema.json>): one sampled profile per process, in
//! seconds, each sample weighted by the time it stands for (`gpulse export --format speedscope`).

use std::collections::HashMap;

use gpulse_model::{PyFrame, Stacks, ThreadSample};
use serde_json::{Value, json};

pub const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

/// The most a sample stands for, at the least: a gap past it (the sampler paused, the process was
/// not sampled for a while) is not time spent where the sample was.
pub const CAP_S: f64 = 0.1;

/// The time each sample of one process stands for, seconds: until that process's next sample,
/// at most [`CAP_S`] or twice the process's median interval, whichever is longer. The last one
/// stands for the median interval (for a lone sample, the sampler's rate, else 20 ms).
pub fn weights(times_us: &[i64], rate_hz: Option<f64>) -> Vec<f64> {
    let mut gaps: Vec<f64> = times_us.windows(2).map(|w| (w[1] - w[0]).max(0) as f64 / 1e6).collect();
    let mut sorted = gaps.clone();
    sorted.sort_by(f64::total_cmp);
    let typical = match sorted.get(sorted.len() / 2) {
        Some(&m) if m > 0.0 => m,
        _ => rate_hz.filter(|r| *r > 0.0).map_or(0.02, |r| 1.0 / r),
    };
    let cap = CAP_S.max(2.0 * typical);
    for g in &mut gaps {
        *g = g.min(cap);
    }
    if !times_us.is_empty() {
        gaps.push(typical.min(cap));
    }
    gaps
}

/// Frames as speedscope reads them: the function as the name, with its file and line.
fn frame(f: &PyFrame) -> Value {
    match f.line {
        0 => json!({"name": f.function, "file": f.file}),
        line => json!({"name": f.function, "file": f.file, "line": line}),
    }
}

/// The whole file: `name` names the group (the recording), `exporter` the program. Frames are
/// shared, numbered in the order first used; each profile's samples list frame indices from the
/// outermost frame to the innermost, in time order; its values start at the sample's time since
/// the first sample of any process, so profiles line up.
pub fn speedscope(stacks: &Stacks, name: &str, exporter: &str) -> String {
    let mut frames: Vec<Value> = Vec::new();
    let mut frame_index: HashMap<u32, usize> = HashMap::new();
    let mut stack_index: HashMap<u32, Vec<usize>> = HashMap::new();
    let start = stacks.samples.iter().map(|s| s.t_us).min().unwrap_or(0);
    let mut profiles = Vec::new();
    for pid in stacks.sampled_pids() {
        let mut mine: Vec<&ThreadSample> = stacks.samples.iter().filter(|s| s.pid == pid).collect();
        mine.sort_by_key(|s| s.t_us);
        let times: Vec<i64> = mine.iter().map(|s| s.t_us).collect();
        let rate = stacks.rate_hz.iter().find(|r| r.0 == pid).map(|r| r.1);
        let weights = weights(&times, rate);
        let samples: Vec<Vec<usize>> = mine
            .iter()
            .map(|s| {
                let indices = stack_index.entry(s.stack).or_insert_with(|| {
                    let ids = stacks.stacks.get(s.stack as usize).into_iter().flatten();
                    ids.filter_map(|&id| {
                        let f = stacks.frames.get(id as usize)?;
                        Some(*frame_index.entry(id).or_insert_with(|| {
                            frames.push(frame(f));
                            frames.len() - 1
                        }))
                    })
                    .collect()
                });
                indices.clone()
            })
            .collect();
        let begin = (times[0] - start) as f64 / 1e6;
        let total: f64 = weights.iter().sum();
        let title = match stacks.process(pid) {
            Some(p) => format!("process {pid} ({}): {}", p.role.as_str(), p.command),
            None => format!("process {pid}"),
        };
        profiles.push(json!({
            "type": "sampled",
            "name": title,
            "unit": "seconds",
            "startValue": begin,
            "endValue": begin + total,
            "samples": samples,
            "weights": weights,
        }));
    }
    let file = json!({
        "$schema": SCHEMA,
        "shared": {"frames": frames},
        "profiles": profiles,
        "name": name,
        "activeProfileIndex": 0,
        "exporter": exporter,
    });
    let mut out = file.to_string();
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use gpulse_model::{Gil, KernelState, ProcessRole, SampledProcess, StackBatch};

    use super::*;

    #[test]
    fn each_sample_stands_for_its_interval_capped() {
        let w = weights(&[0, 20_000, 40_000, 60_000, 2_060_000], Some(50.0));
        assert_eq!(w, [0.02, 0.02, 0.02, 0.1, 0.02]);
        assert_eq!(weights(&[5], Some(40.0)), [0.025]);
        assert_eq!(weights(&[5], None), [0.02]);
        assert!(weights(&[], None).is_empty());
    }

    #[test]
    fn profiles_share_frames_and_line_up_in_time() {
        let f = |n: &str, line| PyFrame { file: "/w/t.py".into(), line, function: n.into(), code: None };
        let k = KernelState { state: 'R', syscall: None, wchan: None, across: false };
        let sample =
            |t_us, pid, stack| ThreadSample { clock: None, t_us, pid, stack, kernel: k.clone(), gil: Gil::Held };
        let mut s = Stacks::default();
        s.add(StackBatch {
            frames: vec![(0, f("main", 1)), (1, f("step", 2)), (2, f("load", 0))],
            stacks: vec![(0, vec![0, 1]), (1, vec![0, 2])],
            processes: vec![
                SampledProcess {
                    gil_read: None,
                    pid: 9,
                    role: ProcessRole::Main,
                    python: "3.12".into(),
                    command: "train".into(),
                    rank: None,
                },
                SampledProcess {
                    gil_read: None,
                    pid: 3,
                    role: ProcessRole::Worker,
                    python: "3.12".into(),
                    command: "train".into(),
                    rank: None,
                },
            ],
            samples: vec![sample(1_000_000, 3, 1), sample(1_010_000, 9, 0), sample(1_030_000, 9, 1)],
            ..Default::default()
        });
        let v: Value = serde_json::from_str(&speedscope(&s, "run.db", "gpulse test")).unwrap();
        assert_eq!(v["$schema"], SCHEMA);
        // Frames numbered as first used: the main process's profile comes first.
        assert_eq!(
            v["shared"]["frames"],
            json!([{"name": "main", "file": "/w/t.py", "line": 1}, {"name": "step", "file": "/w/t.py", "line": 2},
                   {"name": "load", "file": "/w/t.py"}])
        );
        let p = &v["profiles"];
        assert_eq!(p[0]["name"], "process 9 (main): train");
        assert_eq!(p[0]["samples"], json!([[0, 1], [0, 2]]));
        assert_eq!(p[0]["weights"], json!([0.02, 0.02]));
        assert_eq!(p[0]["startValue"], 0.01);
        assert_eq!(p[1]["samples"], json!([[0, 2]]));
        assert_eq!(p[1]["startValue"], 0.0);
    }
}
