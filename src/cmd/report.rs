//! `gpulse report`: one self-contained HTML file with timelines, findings and processes, and
//! with `--png` a picture of the same charts.

use std::process::ExitCode;

use crate::cli::ReportArgs;
use crate::ops::analyze::analyze;
use crate::ops::report::{write, write_png};
use crate::output::{destination, same_destination};

pub fn run(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    let html = args.html_output();
    let html_dest = html.as_ref().map(|h| destination(h, &[&args.input])).transpose()?;
    if let Some(png) = &args.png {
        anyhow::ensure!(gpulse_report::PNG, gpulse_report::NO_PNG);
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
