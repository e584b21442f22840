//! `gpulse watch`: one line per GPU per sample, the loop people write by hand around nvidia-smi.

use std::process::ExitCode;
use std::time::Duration;

use gpulse_model::Metric;
use gpulse_sample::{NvmlOptions, Source};

use crate::cli::WatchArgs;
use crate::cmd::open_nvml;
use crate::ops::lines::gpu_lines;
use crate::output::Output;

pub fn run(nvml: &crate::ops::NvmlAccess, args: &WatchArgs) -> anyhow::Result<ExitCode> {
    // Only what the line shows.
    let metrics = vec![Metric::Utilization, Metric::Memory, Metric::TemperatureGpu, Metric::PowerDraw, Metric::Gpm];
    let options =
        NvmlOptions { processes: false, metrics: Some(metrics), device_facts: false, ..NvmlOptions::default() };
    let mut source = open_nvml(nvml, options, false)?;
    source.sample()?; // primes GPM, so the first line already has SM activity
    std::thread::sleep(Duration::from_millis(110));
    gpu_lines(source, args.interval, args.count, Output::open(None)?)?;
    Ok(ExitCode::SUCCESS)
}
