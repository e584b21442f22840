//! `gpulse status` (also a bare `gpulse`): one concise block per GPU, SM activity beside
//! GPU-Util, and the processes with their command lines.

use std::process::ExitCode;

use gpulse_sample::{NvmlOptions, Source};

use crate::cli::{GlobalArgs, StatusArgs};
use crate::cmd::{Exit, open_nvml};
use crate::output::Output;

pub fn run(global: &GlobalArgs, args: &StatusArgs) -> anyhow::Result<ExitCode> {
    let options = NvmlOptions { process_util: true, ..NvmlOptions::default() };
    let mut source = open_nvml(global, options, true)?;
    let chosen = gpulse_smi::select::select(source.devices(), args.id.as_deref()).map_err(|e| Exit {
        code: 6,
        message: e.to_string(),
        to_stdout: false,
    })?;
    // One priming sample so that GPM and process utilization cover a real interval.
    source.sample()?;
    std::thread::sleep(args.wait);
    let snap = source.sample()?;
    let text = if args.json {
        let devices: Vec<_> = chosen.iter().map(|&i| &source.devices()[i]).collect();
        let gpus: Vec<_> = chosen.iter().map(|&i| &snap.gpus[i]).collect();
        let doc = serde_json::json!({ "timestamp_us": snap.timestamp_us, "devices": devices, "gpus": gpus });
        format!("{}\n", serde_json::to_string_pretty(&doc)?)
    } else {
        gpulse_report::status::render(source.devices(), &chosen, &snap)
    };
    Output::open(None)?.emit(&text)?;
    Ok(ExitCode::SUCCESS)
}
