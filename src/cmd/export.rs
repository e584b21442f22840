//! `gpulse export`: a recording as the CSV nvidia-smi would have written.

use std::process::ExitCode;

use gpulse_smi::{CsvFormat, GpuRow};

use crate::cli::ExportArgs;
use crate::cmd::Exit;
use crate::cmd::input::load;
use crate::output::{Output, destination, write_whole};

/// Fields written when neither the user nor an imported log says which.
const DEFAULT_FIELDS: &str = "timestamp,index,name,uuid,utilization.gpu,utilization.memory,memory.used,memory.total,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.mem,pstate,clocks_event_reasons.active,pcie.link.gen.current,fan.speed";

pub fn run(args: &ExportArgs) -> anyhow::Result<ExitCode> {
    let smi = |e: gpulse_smi::QueryError| Exit { code: e.exit_code() as u8, message: e.to_string(), to_stdout: false };
    let format = CsvFormat::parse(&args.format).map_err(smi)?;
    if let Some(out) = &args.output {
        // Refuse before reading: the answer does not depend on the input's contents.
        destination(out, &[&args.input])?;
    }
    let recording = load(&args.input)?;
    let list = match &args.query_gpu {
        Some(q) => q.clone(),
        None => recording.meta.get("nvidia_smi_fields").cloned().unwrap_or_else(|| DEFAULT_FIELDS.to_owned()),
    };
    // An imported log may hold fields gpulse does not read; those cannot be written back.
    let fields: Vec<_> = if args.query_gpu.is_some() {
        gpulse_smi::parse_gpu_fields(&list).map_err(smi)?
    } else {
        list.split(',').filter_map(gpulse_smi::fields::gpu_field).collect()
    };
    let mut text = String::new();
    if format.header {
        text += &gpulse_smi::gpu_header(&fields);
        text.push('\n');
    }
    let count = recording.devices.len();
    for snap in &recording.snapshots {
        for g in &snap.gpus {
            let Some(info) = recording.devices.iter().find(|d| d.index == g.gpu_index) else { continue };
            let row = GpuRow { info, sample: g, timestamp_us: snap.timestamp_us, device_count: count };
            text += &gpulse_smi::gpu_row(&fields, &row, format);
            text.push('\n');
        }
    }
    match &args.output {
        Some(path) => write_whole(path, &[&args.input], text.as_bytes())?,
        None => Output::open(None)?.emit(&text)?,
    }
    Ok(ExitCode::SUCCESS)
}
