//! Parsing an nvidia-smi CSV log into typed samples in memory, without writing a recording: the
//! operation `pandas.read_csv` plus type conversion performs. Run:
//! `python3 tools/bench/make_big_log.py /tmp/big.csv 500 && GPULSE_BENCH_LOG=/tmp/big.csv cargo bench --bench log_parse`

use std::time::Instant;

fn main() {
    let Some(path) = std::env::var_os("GPULSE_BENCH_LOG") else {
        eprintln!("set GPULSE_BENCH_LOG to an nvidia-smi CSV log (tools/bench/make_big_log.py writes one)");
        return;
    };
    let start = Instant::now();
    let bytes = std::fs::read(&path).unwrap();
    let text = std::str::from_utf8(&bytes).unwrap();
    let mut registry = gpulse_smi::log::Registry::default();
    let mut rows = Vec::new();
    let summary = gpulse_smi::log::parse_each(text, None, &mut registry, &mut |r| rows.push(r)).unwrap();
    println!(
        "parsed {} rows ({:.0} MB) into typed samples in {:.2} s",
        summary.rows,
        bytes.len() as f64 / 1e6,
        start.elapsed().as_secs_f64()
    );
}
