//! `gpulse watch`: one line per GPU per sample, the loop people write by hand around nvidia-smi.

use std::process::ExitCode;
use std::time::{Duration, Instant};

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
    stream(&mut source, args.interval, args.count, &mut Output::open(None)?)?;
    Ok(ExitCode::SUCCESS)
}

/// Samples `source` every `pace` (of wall time) and prints lines until `count` samples or the
/// source ends.
pub fn stream(source: &mut dyn Source, pace: Duration, count: Option<u64>, out: &mut Output) -> anyhow::Result<()> {
    let start = Instant::now();
    let mut k: u64 = 0;
    while count.is_none_or(|c| k < c) {
        // A replay's end ends the stream; a source that fails is an error, said once.
        let Some(snap) = gpulse_sample::until_ended(source.sample())? else { break };
        if k.is_multiple_of(20) {
            out.emit(&header())?;
        }
        let mut text = String::new();
        for g in &snap.gpus {
            text += &line(snap.timestamp_us, g);
        }
        out.emit(&text)?;
        k += 1;
        // The last sample asked for ends it at once, not an interval later.
        if count == Some(k) {
            break;
        }
        if let Some(wait) = pace.saturating_mul(k as u32).checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    Ok(())
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
        let mut out = crate::output::Output::open(None).unwrap();
        assert!(super::stream(&mut Two(0, || SampleError::Ended), pace, None, &mut out).is_ok());
        let failing = super::stream(&mut Two(0, || SampleError::Nvml("gone".into())), pace, None, &mut out);
        assert_eq!(failing.unwrap_err().to_string(), "NVML failed: gone");
    }
}
