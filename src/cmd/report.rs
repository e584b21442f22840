//! `gpulse report`: one self-contained HTML file with timelines, findings and processes, and
//! with `--png` a picture of the same charts.

use std::process::ExitCode;

use gpulse_report::Analysis;

use crate::cli::ReportArgs;
use crate::cmd::diagnose::analyze;
use crate::output::{destination, same_destination, write_whole};

pub fn run(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    let html = args.html_output();
    let html_dest = html.as_ref().map(|h| destination(h, &[&args.input])).transpose()?;
    if let Some(png) = &args.png {
        let png_dest = destination(png, &[&args.input])?;
        anyhow::ensure!(
            !html_dest.as_ref().is_some_and(|h| same_destination(h, &png_dest)),
            "--png and -o name the same file; give the PNG its own"
        );
    }
    let analysis = analyze(&args.input)?;
    if let Some(html) = &html {
        write(&args.input, &analysis, html)?;
        if html.as_os_str() != "-" {
            eprintln!("wrote {}", html.display());
        }
    }
    if let Some(png) = &args.png {
        write_png(&args.input, &analysis, png)?;
        if png.as_os_str() != "-" {
            eprintln!("wrote {}", png.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes the report of `analysis` (read from `input`) to `output`, whole or not at all.
pub fn write(input: &std::path::Path, analysis: &Analysis, output: &std::path::Path) -> anyhow::Result<()> {
    let html = gpulse_report::html::render(&input.display().to_string(), analysis);
    write_whole(output, &[input], html.as_bytes())
}

/// Writes the summary and charts of the report as a PNG to `output`, whole or not at all.
pub fn write_png(input: &std::path::Path, analysis: &Analysis, output: &std::path::Path) -> anyhow::Result<()> {
    let (svg, _) = gpulse_report::html::composite_svg(&input.display().to_string(), analysis);
    let png = gpulse_report::png::render(&svg).map_err(|e| anyhow::anyhow!("cannot draw {}: {e}", output.display()))?;
    if !png.has_text {
        eprintln!("gpulse: no font found on this system: {} has the charts without their labels", output.display());
    }
    write_whole(output, &[input], &png.bytes)
}
