//! Writes a generated recording of 8 ranks with their main threads' stacks, for timing
//! `gpulse diagnose`, `report` and `export --format folded` on it: 8 GPUs at 1 s, 8 ranks whose
//! main threads are sampled at 50 Hz, 6 DataLoader workers each at 10 Hz, stacks 50 frames deep
//! (a few hundred distinct ones, a dozen states and sites), with the threads' clocks.
//!
//! `GPULSE_RANK_HOURS=1 cargo bench --bench ranks_stacks` writes /tmp/gpulse-ranks.db (or
//! `GPULSE_RANKS_DB`); then `/usr/bin/time -v target/release/gpulse diagnose /tmp/gpulse-ranks.db`.

use gpulse_model::{
    DeviceInfo, Gil, GpuSample, KernelState, MIB, ProcessRole, ProcessSample, PyFrame, Rank, SampledProcess, Snapshot,
    StackBatch, ThreadClock, ThreadSample,
};
use gpulse_record::{RunMeta, Writer};

const RANKS: u32 = 8;
const WORKERS: u32 = 6;
const DEPTH: u32 = 50;

fn frame(file: &str, line: u32, function: &str, code: &str) -> PyFrame {
    PyFrame { file: file.into(), line, function: function.into(), code: Some(code.into()) }
}

fn main() {
    let hours: f64 = std::env::var("GPULSE_RANK_HOURS").ok().and_then(|h| h.parse().ok()).unwrap_or(1.0);
    let path = std::env::var_os("GPULSE_RANKS_DB")
        .map_or_else(|| std::path::PathBuf::from("/tmp/gpulse-ranks.db"), Into::into);
    let _ = std::fs::remove_file(&path);
    let meta = RunMeta { gpulse_version: "bench".into(), source: "generated".into(), ..RunMeta::default() };
    let devices: Vec<DeviceInfo> = (0..RANKS)
        .map(|i| DeviceInfo {
            index: i,
            uuid: format!("GPU-{i}"),
            name: "NVIDIA H200".into(),
            memory_total_bytes: Some(143_771 * MIB),
            ..Default::default()
        })
        .collect();
    let mut w = Writer::create(&path, &meta, &devices).unwrap();
    // Frames: a framework's 40 frames, then a site's 10 of 30 sites; a worker's 20 frames.
    let mut frames: Vec<(u32, PyFrame)> = Vec::new();
    for i in 0..40 {
        frames
            .push((i, frame("/venv/lib/python3.12/site-packages/lightning/loop.py", 100 + i, "run", "self.advance()")));
    }
    let sites = [
        ("loss.backward()", "train.py", "training_step"),
        ("loss.item()", "train.py", "training_step"),
        ("batch = next(it)", "train.py", "fit"),
        ("optimizer.step()", "train.py", "training_step"),
        ("dist.all_reduce(t)", "train.py", "sync_metrics"),
        ("time.sleep(0.01)", "train.py", "throttle"),
        ("os.fsync(f.fileno())", "train.py", "save"),
        ("x = sum(v)", "metrics.py", "accumulate"),
    ];
    for (k, (code, file, func)) in sites.iter().enumerate() {
        for d in 0..10 {
            let id = 40 + (k as u32) * 10 + d;
            frames.push((id, frame(&format!("/work/{file}"), 10 + d * 3 + k as u32, func, code)));
        }
    }
    let worker_base = frames.len() as u32;
    for i in 0..20 {
        frames.push((
            worker_base + i,
            frame(
                "/venv/lib/python3.12/site-packages/torch/utils/data/_utils/worker.py",
                300 + i,
                "_worker_loop",
                "r = index_queue.get(timeout=MP_STATUS_CHECK_INTERVAL)",
            ),
        ));
    }
    // Stacks: each site at 40 framework depths' variants (300+ distinct stacks), and workers'.
    let mut stacks: Vec<(u32, Vec<u32>)> = Vec::new();
    for k in 0..sites.len() as u32 {
        for variant in 0..40u32 {
            let mut s: Vec<u32> = (0..40).collect();
            s[39] = variant;
            s.extend((0..DEPTH - 40).map(|d| 40 + k * 10 + d));
            stacks.push((stacks.len() as u32, s));
        }
    }
    let worker_stack0 = stacks.len() as u32;
    for v in 0..20 {
        let mut s: Vec<u32> = (worker_base..worker_base + 20).collect();
        s[19] = worker_base + v;
        stacks.push((stacks.len() as u32, s));
    }
    let states: [(char, Option<u32>, Option<&str>, Gil); 6] = [
        ('R', None, None, Gil::Held),
        ('R', None, None, Gil::Free),
        ('S', Some(202), Some("futex_wait_queue"), Gil::Free),
        ('S', Some(45), Some("sk_wait_data"), Gil::Free),
        ('S', Some(230), Some("hrtimer_nanosleep"), Gil::Free),
        ('D', Some(74), Some("jbd2_log_wait_commit"), Gil::Free),
    ];
    let main_pid = |r: u32| 10_000 + r;
    let worker_pid = |r: u32, k: u32| 20_000 + r * 10 + k;
    let mut first = StackBatch { frames, stacks, ..Default::default() };
    for r in 0..RANKS {
        first.processes.push(SampledProcess {
            pid: main_pid(r),
            role: ProcessRole::Main,
            python: "3.12.3".into(),
            command: "python train.py".into(),
            rank: Some(Rank { rank: r, world_size: RANKS, local_rank: Some(r), device: Some(r) }),
            gil_read: Some(true),
        });
        for k in 0..WORKERS {
            first.processes.push(SampledProcess {
                pid: worker_pid(r, k),
                role: ProcessRole::Worker,
                python: "3.12.3".into(),
                command: "python train.py".into(),
                rank: None,
                gil_read: Some(true),
            });
        }
    }
    let start = 1_795_963_396_000_000i64;
    let seconds = (hours * 3600.0) as i64;
    let mut rng = 0x9e3779b97f4a7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut clocks = std::collections::HashMap::<u32, (u64, u64)>::new();
    let mut n = 0u64;
    for sec in 0..seconds {
        let t = start + sec * 1_000_000;
        let gpus = (0..RANKS)
            .map(|g| GpuSample {
                gpu_index: g,
                util_gpu_pct: Some(if sec % 60 < 50 { 95 } else { 5 }),
                memory_used_bytes: Some(60_000 * MIB),
                memory_total_bytes: Some(143_771 * MIB),
                power_draw_mw: Some(500_000),
                processes: vec![ProcessSample {
                    pid: main_pid(g),
                    used_memory_bytes: Some(50 << 30),
                    ..Default::default()
                }],
                ..GpuSample::default()
            })
            .collect();
        w.snapshot(&Snapshot { timestamp_us: t, gpus }).unwrap();
        let mut batch = if sec == 0 { std::mem::take(&mut first) } else { StackBatch::default() };
        for r in 0..RANKS {
            for i in 0..50 {
                let x = next();
                let site = (x % sites.len() as u64) as u32;
                let state = states[(x >> 8) as usize % states.len()];
                batch.samples.push(sample(
                    main_pid(r),
                    t + i * 20_000,
                    site * 40 + ((x >> 16) % 40) as u32,
                    state,
                    &mut clocks,
                ));
            }
            for k in 0..WORKERS {
                for i in 0..10 {
                    let x = next();
                    let state = states[2 + (x as usize % 2)];
                    let stack = worker_stack0 + (x >> 8) as u32 % 20;
                    batch.samples.push(sample(worker_pid(r, k), t + i * 100_000, stack, state, &mut clocks));
                }
            }
        }
        n += batch.samples.len() as u64;
        w.stacks(&batch).unwrap();
    }
    w.finish().unwrap();
    let bytes = std::fs::metadata(&path).unwrap().len();
    let rank_hours = f64::from(RANKS) * hours;
    println!(
        "wrote {} ({} thread samples, {bytes} bytes: {:.1} MB a rank-hour)",
        path.display(),
        n,
        bytes as f64 / 1e6 / rank_hours
    );
}

fn sample(
    pid: u32,
    t_us: i64,
    stack: u32,
    (state, syscall, wchan, gil): (char, Option<u32>, Option<&str>, Gil),
    clocks: &mut std::collections::HashMap<u32, (u64, u64)>,
) -> ThreadSample {
    let c = clocks.entry(pid).or_default();
    c.0 += if state == 'R' { 18_000 } else { 1_000 };
    c.1 += 200;
    ThreadSample {
        t_us,
        pid,
        stack,
        kernel: KernelState { state, syscall, wchan: wchan.map(Into::into), across: false },
        gil,
        clock: Some(ThreadClock { cpu_us: c.0, wait_us: c.1 }),
    }
}
