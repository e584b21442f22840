//! `gpulse diagnose`: why a run was slow, worst first, from a recording or an nvidia-smi log.

use std::process::ExitCode;

use gpulse_report::Analysis;
use gpulse_report::text::{
    ledger_text, main_thread_text, printable, ranks_text, render_text, roofline_text, steps_json, steps_line, wrap,
};

use crate::cli::{DiagnoseArgs, ReportFormat};
use crate::ops::analyze::analyze;
use crate::output::{Output, text_width};

pub fn run(args: &DiagnoseArgs) -> anyhow::Result<ExitCode> {
    let Analysis { diagnosis: d, gpus, samples, run, .. } = analyze(&args.input)?;
    let text = match args.format {
        ReportFormat::Json => {
            let doc = serde_json::json!({
                "input": args.input.display().to_string(),
                "gpus": gpus,
                "samples": samples,
                "steps": run.steps.as_ref().map(steps_json),
                "summary": d.summary,
                "findings": d.findings,
                "ledger": d.ledger,
                "efficiency": d.efficiency,
                "stacks": d.stacks,
                "ranks": d.ranks,
            });
            format!("{}\n", serde_json::to_string_pretty(&doc)?)
        }
        ReportFormat::Text => wrap(
            &printable(
                &(steps_line(&run)
                    + &render_text(&d)
                    + &ledger_text(&d.ledger)
                    + &ranks_text(&d.ranks)
                    + &main_thread_text(&d.stacks)
                    + &roofline_text(&d.efficiency)),
            ),
            text_width(libc::STDOUT_FILENO),
        ),
    };
    Output::open(None)?.emit(&text)?;
    Ok(ExitCode::SUCCESS)
}
