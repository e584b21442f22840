//! CPU time of one host reading (`/proc/stat`, `meminfo`, `loadavg`), as the recorder takes it
//! at every poll: `cargo run --release -p gpulse-sample --example host_cost [N]`.
fn main() {
    let n: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let mut h = gpulse_sample::host::HostSampler::new();
    let cpu0 = gpulse_sample::profile::thread_cpu();
    for _ in 0..n {
        std::hint::black_box(h.sample());
    }
    let cpu = gpulse_sample::profile::thread_cpu() - cpu0;
    println!("{:.2} us of CPU a reading, over {n}", cpu.as_secs_f64() * 1e6 / f64::from(n));
}
