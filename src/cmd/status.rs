//! `gpulse status` (also a bare `gpulse`): one concise block per GPU, SM activity beside
//! GPU-Util, and the processes with their command lines.
//!
//! The text view is one sample, taken as soon as the GPM window closes: the window opens with
//! NVML, the device facts and every other field are read while it runs, and nothing else is
//! waited for. Per-process utilization is the driver's latest reading, as `nvidia-smi pmon`
//! shows. `--json` prints every field over a primed window, as before.

use std::process::ExitCode;

use gpulse_model::{GPM_STATUS, Metric};
use gpulse_sample::{NvmlOptions, Source};

use crate::cli::StatusArgs;
use crate::cmd::{Exit, open_nvml};
use crate::output::Output;

/// What the text view shows: every metric but the utilization buffer and the energy counter
/// (3 ms each on an H200), which only `--json` prints.
fn shown() -> Vec<Metric> {
    Metric::ALL.iter().copied().filter(|m| !matches!(m, Metric::UtilSamples | Metric::Energy)).collect()
}

pub fn run(nvml: &crate::ops::NvmlAccess, args: &StatusArgs) -> anyhow::Result<ExitCode> {
    let options = if args.json {
        NvmlOptions { process_util: true, ..NvmlOptions::default() }
    } else {
        NvmlOptions {
            process_util: true,
            gpm_wait_first: true,
            metrics: Some(shown()),
            gpm_metrics: Some(GPM_STATUS.to_vec()),
            ..NvmlOptions::default()
        }
    };
    // The window lasts `--wait`.
    let nvml = crate::ops::NvmlAccess { gpm_window: Some(args.wait), ..nvml.clone() };
    let mut source = open_nvml(&nvml, options, true)?;
    let chosen = gpulse_smi::select::select(source.devices(), args.id.as_deref()).map_err(|e| Exit {
        code: 6,
        message: e.to_string(),
        to_stdout: false,
    })?;
    if args.json {
        // Every field, with the utilization buffer and process utilization over the window.
        source.sample()?;
        std::thread::sleep(args.wait);
    }
    let snap = source.sample()?;
    let text = if args.json {
        let devices: Vec<_> = chosen.iter().map(|&i| &source.devices()[i]).collect();
        let gpus: Vec<_> = chosen.iter().map(|&i| &snap.gpus[i]).collect();
        let doc = serde_json::json!({ "timestamp_us": snap.timestamp_us, "devices": devices, "gpus": gpus });
        format!("{}\n", serde_json::to_string_pretty(&doc)?)
    } else {
        gpulse_report::status::render(source.devices(), &chosen, &snap, nvml.no_gpm)
    };
    Output::open(None)?.emit(&text)?;
    // The process exits now: skipping nvmlShutdown saves its teardown, as a one-shot query does.
    std::mem::forget(source);
    Ok(ExitCode::SUCCESS)
}
