//! `gpulse export --format folded` and `--format speedscope`: a recording's sampled Python stacks
//! for flame-graph tools, and the refusals around them.

use std::path::{Path, PathBuf};

use gpulse_model::{Gil, KernelState, ProcessRole, PyFrame, SampledProcess, StackBatch, ThreadSample};
use serde_json::{Value, json};

use super::support::{fixture, fresh_dir, gpulse, run};

const T0: i64 = 1_760_000_000_000_000;

fn frame(file: &str, line: u32, function: &str) -> PyFrame {
    PyFrame { file: file.into(), line, function: function.into(), code: None }
}

fn process(pid: u32, role: ProcessRole) -> SampledProcess {
    SampledProcess { gil_read: None, pid, role, python: "3.11.7".into(), command: "python train.py".into(), rank: None }
}

fn sample(t_us: i64, pid: u32, stack: u32) -> ThreadSample {
    ThreadSample {
        clock: None,
        t_us,
        pid,
        stack,
        kernel: KernelState { state: 'R', syscall: None, wchan: None, across: false },
        gil: Gil::Held,
    }
}

/// A recording of `batches`, written with the recorder's own writer.
fn recording(dir: &Path, name: &str, batches: &[StackBatch]) -> PathBuf {
    let path = dir.join(name);
    let meta = gpulse_record::RunMeta { gpulse_version: "test".into(), source: "test".into(), ..Default::default() };
    let mut w = gpulse_record::Writer::create(&path, &meta, &[]).unwrap();
    for b in batches {
        w.stacks(b).unwrap();
    }
    w.finish().unwrap();
    path
}

const TRAIN: &str = "/job/train.py";
const TENSOR: &str = "/usr/lib/python3.11/site-packages/torch/_tensor.py";

/// The main process 100 at 50 Hz for two seconds with a second's gap between them: 60 samples
/// in `step`, 20 in `.item()` under it, 20 in a socket read; a DataLoader worker 200 at 10 Hz.
fn known_stacks() -> Vec<StackBatch> {
    let frames = vec![
        (0, frame(TRAIN, 120, "<module>")),
        (1, frame(TRAIN, 88, "train")),
        (2, frame(TRAIN, 41, "step")),
        (3, frame(TENSOR, 1030, "item")),
        (4, frame("/job/data.py", 17, "fetch")),
        (5, frame("/usr/lib/python3.11/socket.py", 705, "recv_into")),
    ];
    let stacks = vec![(0, vec![0, 1, 2]), (1, vec![0, 1, 2, 3]), (2, vec![0, 1, 4, 5]), (3, vec![4, 5])];
    let main_t = |i: i64| T0 + i * 20_000 + if i >= 50 { 1_000_000 } else { 0 };
    let main: Vec<ThreadSample> = (0..100)
        .map(|i| {
            let stack = match i % 10 {
                0..6 => 0,
                6..8 => 1,
                _ => 2,
            };
            sample(main_t(i), 100, stack)
        })
        .collect();
    let worker: Vec<ThreadSample> = (0..10).map(|i| sample(T0 + 5_000 + i * 100_000, 200, 3)).collect();
    let mut all: Vec<ThreadSample> = main.into_iter().chain(worker).collect();
    all.sort_by_key(|s| s.t_us);
    let (first, rest) = all.split_at(37);
    vec![
        StackBatch {
            frames,
            stacks,
            processes: vec![process(100, ProcessRole::Main), process(200, ProcessRole::Worker)],
            samples: first.to_vec(),
            rate_hz: vec![(100, 50.0), (200, 10.0)],
            ..Default::default()
        },
        StackBatch { samples: rest.to_vec(), ..Default::default() },
    ]
}

#[test]
fn folded_writes_one_line_per_stack_of_the_main_thread() {
    let dir = fresh_dir("export-stacks", "folded");
    let db = recording(&dir, "run.db", &known_stacks());
    let (code, out, err) = run(gpulse(None).args(["export", "--format", "folded"]).arg(&db));
    assert_eq!(code, 0, "{err}");
    let head = "<module> (/job/train.py:120);train (/job/train.py:88)";
    let expected = format!(
        "{head};fetch (/job/data.py:17);recv_into (/usr/lib/python3.11/socket.py:705) 20\n\
         {head};step (/job/train.py:41) 60\n\
         {head};step (/job/train.py:41);item ({TENSOR}:1030) 20\n"
    );
    assert_eq!(out, expected);
    // The worker's samples are not the main thread's: 100 samples, the main process's.
    let total: u64 = out.lines().map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap()).sum();
    assert_eq!(total, 100);

    // To a file, through export's output rules: written whole, never over the input.
    let out_path = dir.join("run.folded");
    let (code, _, err) = run(gpulse(None).args(["export", "--format=folded", "-o"]).arg(&out_path).arg(&db));
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read_to_string(&out_path).unwrap(), expected);
    let before = std::fs::read(&db).unwrap();
    let (code, _, err) = run(gpulse(None).args(["export", "--format=folded", "-o"]).arg(&db).arg(&db));
    assert_ne!(code, 0);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

#[test]
fn folded_names_the_process_when_several_main_processes_were_sampled() {
    let dir = fresh_dir("export-stacks", "ranks");
    let batch = StackBatch {
        frames: vec![(0, frame(TRAIN, 120, "<module>")), (1, frame(TRAIN, 41, "step"))],
        stacks: vec![(0, vec![0, 1])],
        processes: vec![process(101, ProcessRole::Main), process(100, ProcessRole::Main)],
        samples: vec![sample(T0, 100, 0), sample(T0 + 1, 101, 0), sample(T0 + 20_000, 101, 0)],
        ..Default::default()
    };
    let db = recording(&dir, "ranks.db", &[batch]);
    let (code, out, err) = run(gpulse(None).args(["export", "--format=folded"]).arg(&db));
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "process 100;<module> (/job/train.py:120);step (/job/train.py:41) 1\n\
         process 101;<module> (/job/train.py:120);step (/job/train.py:41) 2\n"
    );
}

#[test]
fn speedscope_writes_a_profile_per_process_with_shared_frames() {
    let dir = fresh_dir("export-stacks", "speedscope");
    let db = recording(&dir, "run.db", &known_stacks());
    let (code, out, err) = run(gpulse(None).args(["export", "--format", "speedscope"]).arg(&db));
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).expect("speedscope's JSON");
    assert_eq!(v["$schema"], "https://www.speedscope.app/file-format-schema.json");
    assert_eq!(v["name"], "run.db");
    // Frames in the order first used: the main process's `step`, `.item()`, then the socket read.
    let names: Vec<&str> =
        v["shared"]["frames"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["<module>", "train", "step", "item", "fetch", "recv_into"]);
    assert_eq!(v["shared"]["frames"][3], json!({"name": "item", "file": TENSOR, "line": 1030}));
    let profiles = v["profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 2);
    let (main, worker) = (&profiles[0], &profiles[1]);
    assert_eq!(main["type"], "sampled");
    assert_eq!(main["unit"], "seconds");
    assert_eq!(main["name"], "process 100 (main): python train.py");
    let samples = main["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 100);
    assert_eq!(samples[0], json!([0, 1, 2]));
    assert_eq!(samples[6], json!([0, 1, 2, 3]));
    assert_eq!(samples[8], json!([0, 1, 4, 5]));
    let count = |stack: Value| samples.iter().filter(|s| **s == stack).count();
    assert_eq!((count(json!([0, 1, 2])), count(json!([0, 1, 2, 3])), count(json!([0, 1, 4, 5]))), (60, 20, 20));
    // Each sample stands for 20 ms; the one before the second's gap for the cap, 100 ms.
    let weights: Vec<f64> = main["weights"].as_array().unwrap().iter().map(|w| w.as_f64().unwrap()).collect();
    assert_eq!(weights.len(), 100);
    for (i, w) in weights.iter().enumerate() {
        let want = if i == 49 { 0.1 } else { 0.02 };
        assert!((w - want).abs() < 1e-9, "weight {i}: {w}");
    }
    assert_eq!(main["startValue"], 0.0);
    let end = main["endValue"].as_f64().unwrap();
    assert!((end - (99.0 * 0.02 + 0.1)).abs() < 1e-9, "{end}");
    assert_eq!(worker["name"], "process 200 (worker): python train.py");
    assert_eq!(worker["samples"].as_array().unwrap().len(), 10);
    assert!(worker["samples"].as_array().unwrap().iter().all(|s| *s == json!([4, 5])));
    assert!((worker["startValue"].as_f64().unwrap() - 0.005).abs() < 1e-9);
}

#[test]
fn stack_formats_refuse_csv_flags_and_recordings_without_stacks() {
    let dir = fresh_dir("export-stacks", "refuse");
    let db = recording(&dir, "run.db", &known_stacks());
    for format in ["folded", "speedscope"] {
        for flag in ["--query-gpu=index", "--query-compute-apps", "--query-compute-apps=pid"] {
            let (code, out, err) = run(gpulse(None).args(["export", "--format", format, flag]).arg(&db));
            assert_eq!(code, 2, "{format} {flag}: {err}");
            assert!(out.is_empty());
            assert_eq!(err.lines().count(), 1, "{err}");
            let name = flag.split('=').next().unwrap();
            assert!(err.contains(name) && err.contains(format), "{err}");
        }
        // A recording made without stacks, and an nvidia-smi log, say so in one line each.
        for input in [fixture("h200-gpulse-run/dl_bound.db"), fixture("h200-2026-11-29/rich_healthy.csv")] {
            let (code, out, err) = run(gpulse(None).args(["export", "--format", format]).arg(&input));
            assert_eq!(code, 1, "{}: {err}", input.display());
            assert!(out.is_empty());
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.contains("no Python stack samples"), "{err}");
        }
    }
    let empty = recording(&dir, "empty.db", &[]);
    let (code, _, err) = run(gpulse(None).args(["export", "--format=folded"]).arg(&empty));
    assert_eq!(code, 1);
    assert!(err.contains("empty.db has no Python stack samples"), "{err}");
    // An unknown format is still nvidia-smi's words.
    let (code, _, err) = run(gpulse(None).args(["export", "--format=flame"]).arg(&db));
    assert_eq!(code, 2, "{err}");
}
