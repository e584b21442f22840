//! `gpulse export`: a recording as the CSV nvidia-smi would have written.

use std::process::ExitCode;

use gpulse_record::Recording;
use gpulse_report::csv::{apps_csv, gpu_csv};
use gpulse_smi::CsvFormat;

use crate::cli::ExportArgs;
use crate::cmd::Exit;
use crate::output::{Output, destination, write_whole};
use gpulse_input::{is_trace, load, with_recording};

fn smi(e: gpulse_smi::QueryError) -> Exit {
    Exit { code: e.exit_code() as u8, message: e.to_string(), to_stdout: false }
}

pub fn run(args: &ExportArgs) -> anyhow::Result<ExitCode> {
    if let Some(f) = &args.format {
        CsvFormat::parse(f).map_err(smi)?;
    }
    if let Some(out) = &args.output {
        // Refused before reading: the answer does not depend on the input's contents.
        destination(out, &[&args.input])?;
    }
    let mut apps = None;
    let recording = read_input(args, &mut apps)?;
    let text = match apps {
        Some(rows) => apps_csv(&recording, &rows, args.format.as_deref(), args.query_apps.clone().flatten().as_deref())
            .map_err(smi)?,
        None => gpu_csv(&recording, args.format.as_deref(), args.query_gpu.as_deref()).map_err(smi)?,
    };
    match &args.output {
        Some(path) => write_whole(path, &[&args.input], text.as_bytes())?,
        None => Output::open(None)?.emit(&text)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads the input, and also the process rows of an imported compute-apps log when those are what
/// is written: asked for with --query-compute-apps, or all a recording holds.
fn read_input(args: &ExportArgs, apps: &mut Option<Vec<gpulse_record::ProcessRow>>) -> anyhow::Result<Recording> {
    if is_trace(&args.input)? {
        let rec = load(&args.input)?;
        if args.query_apps.is_some() {
            *apps = Some(snapshot_rows(&rec));
        }
        return Ok(rec);
    }
    with_recording(&args.input, &mut |db| {
        let rec = gpulse_record::read(db)?;
        let imported = rec.meta.contains_key("nvidia_smi_app_fields");
        let only_apps = imported && rec.snapshots.is_empty();
        if args.query_apps.is_some() || only_apps {
            // An imported log's listings are stored as polled; a live recording's only when they
            // changed, so those are taken from every sample instead.
            *apps = Some(if imported { gpulse_record::read_process_rows(db)? } else { snapshot_rows(&rec) });
        }
        Ok(rec)
    })
}

/// Every process of every GPU sample, at the sample's time: what `--query-compute-apps -l` would
/// have printed at each poll.
fn snapshot_rows(rec: &Recording) -> Vec<gpulse_record::ProcessRow> {
    let mut rows = Vec::new();
    for snap in &rec.snapshots {
        for g in &snap.gpus {
            for p in &g.processes {
                rows.push(gpulse_record::ProcessRow {
                    timestamp_us: snap.timestamp_us,
                    gpu: g.gpu_index,
                    process: p.clone(),
                });
            }
        }
    }
    rows
}
