//! `gpulse report`: one self-contained HTML file with timelines, findings and processes.

use std::process::ExitCode;

use gpulse_report::Analysis;

use crate::cli::ReportArgs;
use crate::cmd::diagnose::analyze;
use crate::output::{destination, write_whole};

pub fn run(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    destination(&args.output, &[&args.input])?;
    let analysis = analyze(&args.input)?;
    write(&args.input, &analysis, &args.output)?;
    if args.output.as_os_str() != "-" {
        eprintln!("wrote {}", args.output.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes the report of `analysis` (read from `input`) to `output`, whole or not at all.
pub fn write(input: &std::path::Path, analysis: &Analysis, output: &std::path::Path) -> anyhow::Result<()> {
    let html = gpulse_report::html::render(&input.display().to_string(), analysis);
    write_whole(output, &[input], html.as_bytes())
}
