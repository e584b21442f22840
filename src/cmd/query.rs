//! `gpulse query`: nvidia-smi's `--query-gpu` / `--query-compute-apps` mode.

use std::process::ExitCode;
use std::time::Duration;

use gpulse_sample::{NvmlOptions, Source};
use gpulse_smi::{CsvFormat, Query, QueryError};

use crate::cli::QueryArgs;
use crate::cmd::{Exit, open_nvml};
use crate::output::Output;

fn smi_error(e: QueryError) -> anyhow::Error {
    Exit { code: e.exit_code() as u8, message: e.to_string(), to_stdout: true }.into()
}

/// What nvidia-smi 580 prints (on stdout, exit 2) for `-l 0` or `-lms 0`, rather than looping
/// as fast as it can.
const ZERO_LOOP: &str = "Provided [-l(ms) | --loop(-ms)=] value is incorrect. Loop frequency must be greater than 0.\n";

pub fn run(nvml: &crate::ops::NvmlAccess, args: &QueryArgs) -> anyhow::Result<ExitCode> {
    if args.loop_s == Some(0) || args.loop_ms == Some(0) {
        return Err(Exit { code: 2, message: ZERO_LOOP.to_owned(), to_stdout: true }.into());
    }
    let Some(query) = Query::parse(args.query_gpu.as_deref(), args.query_apps.as_deref()) else {
        anyhow::bail!("nothing to query: give --query-gpu=FIELDS or --query-compute-apps=FIELDS")
    };
    let query = query.map_err(smi_error)?;
    let format = CsvFormat::parse(&args.format).map_err(smi_error)?;
    let plan = query.plan();
    let needs_gpm = plan.gpm;
    let options = NvmlOptions {
        gpm: plan.gpm,
        processes: true,
        metrics: Some(plan.metrics),
        device_facts: plan.device_facts,
        probes: plan.probes,
        ..NvmlOptions::default()
    };
    let one_shot = args.loop_ms.is_none() && args.loop_s.is_none();
    let mut source = open_nvml(nvml, options, one_shot)?;
    let chosen = gpulse_smi::select::select(source.devices(), args.id.as_deref()).map_err(smi_error)?;
    if needs_gpm {
        // GPM metrics need two samples at least 100 ms apart.
        source.sample()?;
        std::thread::sleep(Duration::from_millis(110));
    }
    let interval = args.loop_ms.map(Duration::from_millis).or(args.loop_s.map(Duration::from_secs));
    let mut out = Output::open(args.file.as_deref())?;
    if format.header {
        out.emit(&format!("{}\n", query.header()))?;
    }
    let Some(every) = interval else {
        let snapshot = source.sample()?;
        out.emit(&query.rows(source.devices(), &chosen, &snapshot, format))?;
        // A one-shot query exits now: skipping nvmlShutdown saves ~3 ms, and the driver
        // releases everything when the process ends.
        std::mem::forget(source);
        return Ok(ExitCode::SUCCESS);
    };
    // On a fixed cadence, as nvidia-smi keeps, rather than drifting by the poll time: the loop
    // of every view, its rows rendered as they come.
    let devices = source.devices().to_vec();
    crate::ops::lines::print(source, every, None, out, move |snapshot| {
        query.rows(&devices, &chosen, snapshot, format)
    })?;
    Ok(ExitCode::SUCCESS)
}
