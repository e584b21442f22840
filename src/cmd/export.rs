//! `gpulse export`: a recording as the CSV nvidia-smi would have written.

use std::process::ExitCode;

use gpulse_record::Recording;
use gpulse_smi::{CsvFormat, GpuRow};

use crate::cli::ExportArgs;
use crate::cmd::Exit;
use crate::output::{Output, destination, write_whole};
use gpulse_input::{is_trace, load, with_recording};

/// Fields written when neither the user nor an imported log says which.
const DEFAULT_FIELDS: &str = "timestamp,index,name,uuid,utilization.gpu,utilization.memory,memory.used,memory.total,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.mem,pstate,clocks_event_reasons.active,pcie.link.gen.current,fan.speed";
/// Compute-app fields written when neither the user nor an imported log says which: all of them,
/// in the order nvidia-smi's help lists them.
const DEFAULT_APP_FIELDS: &str = "timestamp,gpu_name,gpu_bus_id,gpu_uuid,pid,process_name,used_gpu_memory";

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
        Some(rows) => apps_csv(args, &recording, &rows)?,
        None => gpu_csv(args, &recording)?,
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

/// The format to write: the one asked for, else the imported log's own, else plain csv.
fn format(args: &ExportArgs, rec: &Recording, key: &str) -> anyhow::Result<CsvFormat> {
    let spec = args.format.as_deref().or(rec.meta.get(key).map(String::as_str)).unwrap_or("csv");
    Ok(CsvFormat::parse(spec).map_err(smi)?)
}

/// Where headers go: where the imported log had them when its own fields are written, else on top.
fn header_rows(rec: &Recording, key: &str, own_fields: bool) -> Vec<usize> {
    let stored: Option<Vec<usize>> = rec.meta.get(key).map(|v| v.split(',').filter_map(|r| r.parse().ok()).collect());
    match stored {
        Some(rows) if own_fields && !rows.is_empty() => rows,
        _ => vec![0],
    }
}

/// `rows` as lines, with `header` before the rows it stood before (and once on top of none).
fn csv(header: &str, at: &[usize], format: CsvFormat, rows: impl Iterator<Item = String>) -> String {
    let mut text = String::new();
    let mut at = at.iter().peekable();
    let mut put_headers = |text: &mut String, before: Option<usize>| {
        while format.header && at.next_if(|&&r| before.is_none_or(|n| r <= n)).is_some() {
            *text += header;
            text.push('\n');
        }
    };
    for (n, row) in rows.enumerate() {
        put_headers(&mut text, Some(n));
        text += &row;
        text.push('\n');
    }
    put_headers(&mut text, None);
    text
}

fn gpu_csv(args: &ExportArgs, rec: &Recording) -> anyhow::Result<String> {
    let format = format(args, rec, "nvidia_smi_format")?;
    let list = match &args.query_gpu {
        Some(q) => q.clone(),
        None => rec.meta.get("nvidia_smi_fields").cloned().unwrap_or_else(|| DEFAULT_FIELDS.to_owned()),
    };
    // An imported log may hold fields gpulse does not read; those cannot be written back.
    let fields: Vec<_> = if args.query_gpu.is_some() {
        gpulse_smi::parse_gpu_fields(&list).map_err(smi)?
    } else {
        list.split(',').filter_map(gpulse_smi::fields::gpu_field).collect()
    };
    let at = header_rows(rec, "nvidia_smi_header_rows", args.query_gpu.is_none());
    let count = rec.devices.len();
    let fields = &fields;
    let rows = rec.snapshots.iter().flat_map(|snap| {
        snap.gpus.iter().filter_map(move |g| {
            let info = rec.devices.iter().find(|d| d.index == g.gpu_index)?;
            let row = GpuRow { info, sample: g, timestamp_us: snap.timestamp_us, device_count: count };
            Some(gpulse_smi::gpu_row(fields, &row, format))
        })
    });
    Ok(csv(&gpulse_smi::gpu_header(fields), &at, format, rows))
}

fn apps_csv(args: &ExportArgs, rec: &Recording, rows: &[gpulse_record::ProcessRow]) -> anyhow::Result<String> {
    let format = format(args, rec, "nvidia_smi_app_format")?;
    let asked = args.query_apps.clone().flatten();
    let list = match &asked {
        Some(q) => q.clone(),
        None => rec.meta.get("nvidia_smi_app_fields").cloned().unwrap_or_else(|| DEFAULT_APP_FIELDS.to_owned()),
    };
    let fields: Vec<_> = if asked.is_some() {
        gpulse_smi::parse_app_fields(&list).map_err(smi)?
    } else {
        list.split(',').filter_map(gpulse_smi::fields::app_field).collect()
    };
    let at = header_rows(rec, "nvidia_smi_app_header_rows", asked.is_none());
    let unknown = gpulse_model::DeviceInfo::default();
    let lines = rows.iter().map(|r| {
        let info = rec.devices.iter().find(|d| d.index == r.gpu).unwrap_or(&unknown);
        gpulse_smi::app_row(&fields, info, &r.process, r.timestamp_us, format)
    });
    Ok(csv(&gpulse_smi::app_header(&fields), &at, format, lines))
}
