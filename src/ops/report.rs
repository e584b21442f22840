//! The HTML report and its PNG, each written whole or not at all.

use gpulse_report::Analysis;

use crate::output::write_whole;

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
