//! `gpulse watch`: one line per GPU per sample, the loop people write by hand around nvidia-smi.

use std::process::ExitCode;
use std::time::Duration;

use gpulse_model::Metric;
use gpulse_report::watch::{header, line};
use gpulse_sample::{NvmlOptions, Source};

use crate::cli::{GlobalArgs, WatchArgs};
use crate::cmd::open_nvml;
use crate::output::Output;

pub fn run(global: &GlobalArgs, args: &WatchArgs) -> anyhow::Result<ExitCode> {
    // Only what the line shows.
    let metrics = vec![Metric::Utilization, Metric::Memory, Metric::TemperatureGpu, Metric::PowerDraw, Metric::Gpm];
    let options =
        NvmlOptions { processes: false, metrics: Some(metrics), device_facts: false, ..NvmlOptions::default() };
    let mut source = open_nvml(global, options, false)?;
    source.sample()?; // primes GPM, so the first line already has SM activity
    std::thread::sleep(Duration::from_millis(110));
    stream(source, args.interval, args.count, Output::open(None)?)?;
    Ok(ExitCode::SUCCESS)
}

/// Samples `source` every `pace` (of wall time) and prints lines until `count` samples or the
/// source ends, through the one loop of every view. Returns `out`, for what follows the lines.
pub fn stream<S: Source + Send + 'static>(
    source: S,
    pace: Duration,
    count: Option<u64>,
    out: Output,
) -> anyhow::Result<Output> {
    let mut k: u64 = 0;
    crate::lines::print(source, pace, count, out, move |snap| {
        let mut text = if k.is_multiple_of(20) { header() } else { String::new() };
        for g in &snap.gpus {
            text += &line(snap.timestamp_us, g);
        }
        k += 1;
        text
    })
}

#[cfg(test)]
mod tests {
    use gpulse_model::{DeviceInfo, Snapshot};
    use gpulse_sample::{SampleError, Source};

    /// Two samples, then `then`.
    struct Two(u32, fn() -> SampleError);

    impl Source for Two {
        fn devices(&self) -> &[DeviceInfo] {
            &[]
        }
        fn sample(&mut self) -> Result<Snapshot, SampleError> {
            self.0 += 1;
            if self.0 > 2 { Err((self.1)()) } else { Ok(Snapshot::default()) }
        }
    }

    #[test]
    fn a_replays_end_ends_the_stream_and_a_failure_is_an_error() {
        let pace = std::time::Duration::ZERO;
        let out = crate::output::Output::open(None).unwrap();
        let out = super::stream(Two(0, || SampleError::Ended), pace, None, out);
        assert!(out.is_ok());
        let failing = super::stream(Two(0, || SampleError::Nvml("gone".into())), pace, None, out.unwrap());
        assert_eq!(failing.err().map(|e| e.to_string()).as_deref(), Some("NVML failed: gone"));
    }
}
