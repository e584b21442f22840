//! The import's writing half alone: the rows of the 200 MB benchmark log (1 030 560 samples, 8 GPUs
//! at 500 ms) written through `Writer::gpu_samples` in the import's batches, with nothing parsed.
//! It is the least an import of that log can take on one core while SQLite writes it.
//!
//! Usage: cargo run --release -p gpulse-record --example write_floor [ROUNDS]

use gpulse_model::GpuSample;
use gpulse_record::{RunMeta, Writer};

const ROWS: usize = 1_030_560;
const GPUS: u32 = 8;
const BATCH: usize = 8192;

/// When row `i` was taken (µs): 8 GPUs a poll, a poll every 500 ms.
fn time_us(i: usize) -> i64 {
    1_795_963_396_706_000 + (i / GPUS as usize) as i64 * 500_000
}

fn sample(i: usize) -> (i64, GpuSample) {
    let gpu = (i % GPUS as usize) as u32;
    let v = (i % 97) as u32;
    let s = GpuSample {
        gpu_index: gpu,
        util_gpu_pct: Some(v),
        util_mem_pct: Some(v / 2),
        memory_used_bytes: Some(21_099 << 20),
        memory_total_bytes: Some(143_771 << 20),
        temperature_gpu_c: Some(33 + v % 10),
        power_draw_mw: Some(98_440 + v * 1000),
        power_limit_mw: Some(700_000),
        clock_sm_mhz: Some(1980),
        clock_mem_mhz: Some(3201),
        pstate: Some(0),
        clocks_event_reasons: Some(0),
        pcie_link_gen: Some(5),
        ..Default::default()
    };
    (time_us(i), s)
}

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|r| r.parse().ok()).unwrap_or(5);
    // One batch, its times moved on for each use: the rows stay in cache, as the import's
    // recycled batches do.
    let mut batch: Vec<(i64, GpuSample)> = (0..BATCH).map(sample).collect();
    let dir = tempfile::tempdir().expect("a temporary folder");
    let mut took_ms = Vec::new();
    for round in 0..rounds {
        let out = dir.path().join(format!("floor{round}.db"));
        let meta = RunMeta {
            host: None,
            gpulse_version: "floor".into(),
            command: None,
            started_at_us: 0,
            source: "write_floor".into(),
            interval_ms: None,
            extra: Default::default(),
        };
        let start = std::time::Instant::now();
        let mut w = Writer::create_bulk(&out, &meta, &[]).expect("a new recording");
        for first in (0..ROWS).step_by(BATCH) {
            let n = BATCH.min(ROWS - first);
            for (i, row) in batch.iter_mut().enumerate() {
                row.0 = time_us(first + i);
            }
            w.gpu_samples(batch[..n].iter().map(|(t, s)| (*t, s))).expect("written");
        }
        w.finish().expect("finished");
        took_ms.push(start.elapsed().as_secs_f64() * 1e3);
    }
    let mut sorted = took_ms.clone();
    sorted.sort_by(f64::total_cmp);
    let runs: Vec<String> = took_ms.iter().map(|t| format!("{t:.0}")).collect();
    println!("{ROWS} rows written: median {:.0} ms, runs {} ms", sorted[sorted.len() / 2], runs.join(", "));
}
