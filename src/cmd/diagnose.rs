//! `gpulse diagnose`: why a run was slow, worst first, from a recording or an nvidia-smi log.

use std::process::ExitCode;

use gpulse_diagnose::Diagnosis;
use gpulse_report::Analysis;
use gpulse_report::text::{ledger_text, main_thread_text, render_text, roofline_text, steps_json, steps_line, wrap};

use crate::cli::{DiagnoseArgs, ReportFormat};
use crate::ops::analyze::analyze;
use crate::output::{Output, text_width};

pub fn run(args: &DiagnoseArgs) -> anyhow::Result<ExitCode> {
    let Analysis { diagnosis, gpus, samples, run, .. } = analyze(&args.input)?;
    let Diagnosis { findings, ledger, efficiency, stacks, summary } = diagnosis;
    let text = match args.format {
        ReportFormat::Json => {
            let doc = serde_json::json!({
                "input": args.input.display().to_string(),
                "gpus": gpus,
                "samples": samples,
                "steps": run.steps.as_ref().map(steps_json),
                "summary": summary,
                "findings": findings,
                "ledger": ledger,
                "efficiency": efficiency,
                "stacks": stacks,
            });
            format!("{}\n", serde_json::to_string_pretty(&doc)?)
        }
        ReportFormat::Text => wrap(
            &(steps_line(&run)
                + &render_text(&findings)
                + &ledger_text(&ledger)
                + &main_thread_text(&stacks)
                + &roofline_text(&efficiency)),
            text_width(libc::STDOUT_FILENO),
        ),
    };
    Output::open(None)?.emit(&text)?;
    Ok(ExitCode::SUCCESS)
}
