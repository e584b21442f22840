//! The job's Python threads go into the recording and come back as they were: frames, stacks,
//! processes, every sample with its kernel state and GIL; a recording from before the tables
//! reads with no samples; a crash loses at most the last second of them; and an hour at 50 Hz of
//! one process stays within 2 MB.

use std::path::{Path, PathBuf};

use gpulse_model::{Gil, KernelState, ProcessRole, PyFrame, SampledProcess, StackBatch, Stacks, ThreadSample};
use gpulse_record::{RunMeta, Writer};

/// A test's folder, removed when the test ends, failed or not.
struct Dir(PathBuf);

impl std::ops::Deref for Dir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn dir(name: &str) -> Dir {
    let d = std::env::temp_dir().join(format!("gpulse-stacks-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Dir(d)
}

fn meta() -> RunMeta {
    RunMeta { gpulse_version: "test".into(), source: "test".into(), ..Default::default() }
}

fn frame(file: &str, line: u32, function: &str, code: Option<&str>) -> PyFrame {
    PyFrame { file: file.into(), line, function: function.into(), code: code.map(str::to_owned) }
}

fn running() -> KernelState {
    KernelState { state: 'R', syscall: None, wchan: None, across: false }
}

fn sleeping(syscall: u32, wchan: &str) -> KernelState {
    KernelState { state: 'S', syscall: Some(syscall), wchan: Some(wchan.into()), across: false }
}

const T0: i64 = 1_760_000_000_000_000;

/// A small tidy PRNG: the tests need variety, not randomness.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// Two processes over three seconds and a half, sent in batches that cut seconds in two, with
/// every kind of observation, a stack sent in a later batch than its first frame, a refusal, a
/// rate that changes and a process told again.
fn batches() -> Vec<StackBatch> {
    let main = SampledProcess {
        gil_read: Some(true),
        pid: 4242,
        role: ProcessRole::Main,
        python: "3.11.7".into(),
        command: "python train.py".into(),
        rank: None,
    };
    let worker = SampledProcess {
        gil_read: Some(false),
        pid: 4300,
        role: ProcessRole::Worker,
        python: "3.11.7".into(),
        command: "python train.py".into(),
        rank: None,
    };
    let mut out = vec![StackBatch {
        frames: vec![
            (0, frame("<frozen runpy>", 198, "_run_module_as_main", None)),
            (1, frame("/w/train.py", 88, "main", Some("loss = step(batch)"))),
            (2, frame("/w/train.py", 41, "step", Some("loss.item()"))),
            (3, frame("/usr/lib/python3.11/threading.py", 320, "wait", Some("waiter.acquire()"))),
        ],
        stacks: vec![(0, vec![0, 1, 2]), (1, vec![0, 1, 3])],
        processes: vec![main.clone()],
        rate_hz: vec![(4242, 50.0)],
        ..Default::default()
    }];
    let observations = [
        (running(), Gil::Held),
        (running(), Gil::Free),
        (sleeping(202, "futex_wait_queue"), Gil::Other { stack: 2 }),
        (sleeping(230, "hrtimer_nanosleep"), Gil::Free),
        (
            KernelState { state: 'D', syscall: Some(0), wchan: Some("folio_wait_bit_common".into()), across: false },
            Gil::Free,
        ),
        (KernelState { state: 'S', syscall: None, wchan: None, across: false }, Gil::Held),
        // Read across a change of letter: into an fsync, the GIL free.
        (KernelState { state: 'D', syscall: Some(74), wchan: None, across: true }, Gil::Free),
    ];
    let mut rng = Lcg(7);
    let mut samples = Vec::new();
    let mut t = T0 + 3_000;
    // The thread's clocks: rising, unread one sample in five, and once lower than before (the
    // thread reread after a restart): every change must come back as it was.
    let mut clock = gpulse_model::ThreadClock { cpu_us: 1_000_000, wait_us: 5_000 };
    let mut n = 0;
    while t < T0 + 3_500_000 {
        let o = &observations[rng.next() as usize % observations.len()];
        let stack = (rng.next() % 3) as u32;
        clock.cpu_us += rng.next() % 20_000;
        clock.wait_us += rng.next() % 300;
        n += 1;
        if n == 40 {
            clock.cpu_us -= 500_000;
        }
        let read = (!rng.next().is_multiple_of(5)).then_some(clock);
        samples.push(ThreadSample { clock: read, t_us: t, pid: 4242, stack, kernel: o.0.clone(), gil: o.1 });
        t += 15_000 + (rng.next() % 10_000) as i64;
    }
    // The worker from its first sample at 1 s on, at 10 Hz.
    let mut t = T0 + 1_000_017;
    while t < T0 + 3_500_000 {
        samples.push(ThreadSample { clock: None, t_us: t, pid: 4300, stack: 1, kernel: running(), gil: Gil::Held });
        t += 97_531;
    }
    samples.sort_by_key(|s| (s.t_us, s.pid));
    let cut = |from: i64, to: i64| -> Vec<ThreadSample> {
        samples.iter().filter(|s| s.t_us >= T0 + from && s.t_us < T0 + to).cloned().collect()
    };
    out.push(StackBatch { samples: cut(0, 400_000), ..Default::default() });
    out.push(StackBatch {
        frames: vec![(4, frame("/w/train.py", 60, "log", None))],
        stacks: vec![(2, vec![0, 1, 4])],
        processes: vec![worker],
        samples: cut(400_000, 1_700_000),
        rate_hz: vec![(4242, 40.0), (4300, 10.0)],
        refusals: vec![(4400, "cannot read 4400: Python 3.14 is not supported".into())],
    });
    out.push(StackBatch { samples: cut(1_700_000, 2_000_000), ..Default::default() });
    // The main process told again after its `exec`: the row takes it, in its place.
    let rank = gpulse_model::Rank { rank: 1, world_size: 2, local_rank: Some(1), device: Some(1) };
    let execd = SampledProcess { command: "/venv/bin/python train.py".into(), rank: Some(rank), ..main };
    out.push(StackBatch {
        samples: cut(2_000_000, 3_500_000),
        rate_hz: vec![(4242, 45.5)],
        processes: vec![execd],
        ..Default::default()
    });
    out
}

fn expected(batches: &[StackBatch]) -> Stacks {
    let mut s = Stacks::default();
    for b in batches {
        s.add(b.clone());
    }
    s
}

#[test]
fn stacks_round_trip() {
    let d = dir("trip");
    let path = d.join("run.db");
    let batches = batches();
    let mut w = Writer::create(&path, &meta(), &[]).unwrap();
    for b in &batches {
        w.stacks(b).unwrap();
    }
    w.finish().unwrap();
    let rec = gpulse_record::read(&path).unwrap();
    let want = expected(&batches);
    assert!(want.samples.len() > 150, "{}", want.samples.len());
    assert!(want.samples.iter().any(|s| s.pid == 4300));
    assert!(want.samples.iter().filter(|s| s.clock.is_some()).count() > 100, "clocks to round-trip");
    assert_eq!(rec.stacks.frames, want.frames);
    assert_eq!(rec.stacks.stacks, want.stacks);
    assert_eq!(rec.stacks.processes, want.processes);
    assert_eq!(rec.stacks.rate_hz, want.rate_hz);
    assert_eq!(rec.stacks.refusals, want.refusals);
    assert_eq!(rec.stacks.samples.len(), want.samples.len());
    for (i, (got, want)) in rec.stacks.samples.iter().zip(&want.samples).enumerate() {
        assert_eq!(got, want, "sample {i}");
    }
    assert_eq!(rec.stacks, want);
    // One row per process and second, not per sample.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let rows: i64 = conn.query_row("SELECT count(*) FROM stack_samples", [], |r| r.get(0)).unwrap();
    assert!(rows <= 8, "{rows} rows");
}

#[test]
fn a_recording_without_the_tables_reads_with_no_stacks() {
    let d = dir("old");
    let path = d.join("run.db");
    let mut w = Writer::create(&path, &meta(), &[]).unwrap();
    w.stacks(&batches()[0]).unwrap();
    w.finish().unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    for t in ["stack_samples", "stack_obs", "stacks", "stack_frames", "stack_processes", "stack_refusals"] {
        conn.execute_batch(&format!("DROP TABLE {t}")).unwrap();
    }
    drop(conn);
    let rec = gpulse_record::read(&path).unwrap();
    assert_eq!(rec.stacks, Stacks::default());
    assert!(rec.stacks.is_empty());
}

#[test]
fn a_crash_loses_at_most_the_last_second_of_samples() {
    let d = dir("crash");
    let path = d.join("run.db");
    let batches = batches();
    let mut w = Writer::create(&path, &meta(), &[]).unwrap();
    for b in &batches {
        w.stacks(b).unwrap();
    }
    w.commit().unwrap();
    // Dropped without `finish`: what a `kill -9` leaves, the committed part.
    drop(w);
    let rec = gpulse_record::read(&path).unwrap();
    let want = expected(&batches);
    let kept: Vec<&ThreadSample> = want.samples.iter().filter(|s| s.t_us < T0 + 3_000_000).collect();
    assert_eq!(rec.stacks.samples.iter().collect::<Vec<_>>(), kept);
    assert_eq!(rec.stacks.stacks, want.stacks);
}

/// An hour of one process at 50 Hz: a 50-frame main stack whose innermost frames vary among 30
/// sites, mostly running Python with the GIL, some waits on a futex (the GIL, a lock) and
/// sleeps, with a new stack now and then (a recompile, a checkpoint). Returns the bytes the
/// samples added to the file, and how many samples there were.
fn hour_at_50_hz(path: &Path) -> (u64, usize) {
    let empty = path.with_extension("empty.db");
    Writer::create(&empty, &meta(), &[]).unwrap().finish().unwrap();
    let mut w = Writer::create(path, &meta(), &[]).unwrap();
    // Ids as a long run has them: past the first hundreds, two bytes each.
    const F: u32 = 5000;
    const S: u32 = 3000;
    let mut frames: Vec<(u32, PyFrame)> = (0..45)
        .map(|i| {
            (F + i, frame(&format!("/opt/conda/lib/python3.11/site-packages/pkg{i}/mod.py"), 100 + i, "call", None))
        })
        .collect();
    let mut stacks = Vec::new();
    for site in 0..30u32 {
        let tail: Vec<u32> = (0..5).map(|k| F + 100 + site * 5 + k).collect();
        for (k, &id) in tail.iter().enumerate() {
            frames.push((
                id,
                frame(
                    &format!("/opt/conda/lib/python3.11/site-packages/torch/site{site}.py"),
                    10 * k as u32 + 7,
                    &format!("fn{site}_{k}"),
                    Some("x = torch.foo(y)"),
                ),
            ));
        }
        stacks.push((S + site, (F..F + 45).chain(tail).collect::<Vec<u32>>()));
    }
    let process = SampledProcess {
        gil_read: None,
        pid: 31337,
        role: ProcessRole::Main,
        python: "3.11.7".into(),
        command: "python train.py --epochs 3".into(),
        rank: None,
    };
    w.stacks(&StackBatch {
        frames,
        stacks,
        processes: vec![process],
        rate_hz: vec![(31337, 50.0)],
        ..Default::default()
    })
    .unwrap();
    let mut rng = Lcg(42);
    let mut t = T0;
    let (mut n, mut next_stack, mut next_frame) = (0, S + 30, F + 1000);
    for second in 0..3600 {
        let mut batch = StackBatch::default();
        if second % 60 == 30 {
            // A new site, once a minute.
            batch.frames.push((next_frame, frame("/w/train.py", second as u32, "compile_step", None)));
            batch.stacks.push((next_stack, (F..F + 45).chain([next_frame]).collect()));
            next_frame += 1;
            next_stack += 1;
        }
        while t < T0 + (second + 1) * 1_000_000 {
            let r = rng.next() % 100;
            let (kernel, gil) = match r {
                0..70 => (running(), Gil::Held),
                70..80 => (running(), Gil::Free),
                80..90 => (sleeping(202, "futex_wait_queue"), Gil::Other { stack: S + (r % 3) as u32 }),
                90..95 => (sleeping(202, "futex_wait_queue"), Gil::Free),
                _ => (sleeping(230, "hrtimer_nanosleep"), Gil::Free),
            };
            let stack = if rng.next().is_multiple_of(50) { next_stack - 1 } else { S + (rng.next() % 30) as u32 };
            batch.samples.push(ThreadSample { clock: None, t_us: t, pid: 31337, stack, kernel, gil });
            n += 1;
            // Jittered around 20 ms, as the sampler's intervals are.
            t += 16_000 + (rng.next() % 8_000) as i64;
        }
        w.stacks(&batch).unwrap();
    }
    w.finish().unwrap();
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    (size(path) - size(&empty), n)
}

#[test]
fn an_hour_at_50_hz_stays_within_2_mb() {
    let d = dir("size");
    let (bytes, samples) = hour_at_50_hz(&d.join("run.db"));
    assert!((175_000..185_000).contains(&samples), "{samples}");
    println!("{bytes} bytes for {samples} samples: {:.2} bytes per sample", bytes as f64 / samples as f64);
    assert!(bytes <= 2_000_000, "{bytes} bytes for an hour");
    // The samples read back whole.
    let rec = gpulse_record::read(&d.join("run.db")).unwrap();
    assert_eq!(rec.stacks.samples.len(), samples);
    assert_eq!(rec.stacks.frames_of(3000).count(), 50);
}
