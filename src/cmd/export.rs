//! `gpulse export`: a recording as the CSV nvidia-smi would have written, or its sampled Python
//! stacks for flame-graph tools (`--format folded`, `--format speedscope`).

use std::process::ExitCode;

use gpulse_record::Recording;
use gpulse_report::csv::{apps_csv, gpu_csv};
use gpulse_smi::CsvFormat;

use crate::cli::ExportArgs;
use crate::cmd::Exit;
use crate::output::{Output, destination, write_whole};
use gpulse_input::{is_recording, is_trace, load, with_recording};

fn smi(e: gpulse_smi::QueryError) -> Exit {
    Exit { code: e.exit_code() as u8, message: e.to_string(), to_stdout: false }
}

gpulse_base::words! {
    /// What `--format` asks for.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Stacks {
        Folded => "folded",
        Speedscope => "speedscope",
    }
}

fn usage(message: String) -> Exit {
    Exit { code: 2, message, to_stdout: false }
}

pub fn run(args: &ExportArgs) -> anyhow::Result<ExitCode> {
    let stacks = args.format.as_deref().and_then(Stacks::parse);
    match (stacks, &args.format) {
        (Some(kind), _) => {
            let csv_only =
                [("--query-gpu", args.query_gpu.is_some()), ("--query-compute-apps", args.query_apps.is_some())];
            if let Some((flag, _)) = csv_only.iter().find(|f| f.1) {
                let why =
                    format!("--format {} writes the job's Python stacks; {flag} is for --format csv", kind.as_str());
                return Err(usage(why).into());
            }
        }
        (None, Some(f)) => {
            CsvFormat::parse(f).map_err(smi)?;
        }
        (None, None) => {}
    }
    if let Some(out) = &args.output {
        // Refused before reading: the answer does not depend on the input's contents.
        destination(out, &[&args.input])?;
    }
    let text = match stacks {
        Some(kind) => stacks_text(args, kind)?,
        None => csv_text(args)?,
    };
    match &args.output {
        Some(path) => write_whole(path, &[&args.input], text.as_bytes())?,
        None => Output::open(None)?.emit(&text)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The sampled stacks of a recording, folded or as speedscope's JSON; a recording without any
/// says so.
fn stacks_text(args: &ExportArgs, kind: Stacks) -> anyhow::Result<String> {
    let shown = args.input.display();
    let none = |why: String| Exit { code: 1, message: why, to_stdout: false };
    if is_trace(&args.input)? || !is_recording(&args.input)? {
        let why =
            format!("{shown} is not a gpulse recording: an nvidia-smi log or a trace has no Python stack samples");
        return Err(none(why).into());
    }
    let rec = with_recording(&args.input, &mut |db| Ok(gpulse_record::read_each(db, &mut |_| {})?))?;
    if rec.stacks.is_empty() {
        let why = match rec.stacks.refusals.first() {
            Some((pid, text)) => {
                format!("{shown} has no Python stack samples: process {pid} could not be sampled: {text}")
            }
            None => format!(
                "{shown} has no Python stack samples (recorded without them: by a gpulse before they were sampled, with --no-stacks, or with no Python process in the job)"
            ),
        };
        return Err(none(why).into());
    }
    Ok(match kind {
        Stacks::Folded => gpulse_report::folded::folded(&rec.stacks),
        Stacks::Speedscope => {
            let name = args.input.file_name().map_or_else(|| shown.to_string(), |n| n.to_string_lossy().into_owned());
            gpulse_report::speedscope::speedscope(&rec.stacks, &name, concat!("gpulse ", env!("CARGO_PKG_VERSION")))
        }
    })
}

/// The GPU samples or the process rows, as nvidia-smi's CSV.
fn csv_text(args: &ExportArgs) -> anyhow::Result<String> {
    let mut apps = None;
    let recording = read_input(args, &mut apps)?;
    Ok(match apps {
        Some(rows) => apps_csv(&recording, &rows, args.format.as_deref(), args.query_apps.clone().flatten().as_deref())
            .map_err(smi)?,
        None => gpu_csv(&recording, args.format.as_deref(), args.query_gpu.as_deref()).map_err(smi)?,
    })
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
        let imported = rec.meta_value(gpulse_model::MetaKey::NvidiaSmiAppFields).is_some();
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
