//! `gpulse diagnose`: why a run was slow, worst first, from a recording or an nvidia-smi log.

use std::fmt::Write as _;
use std::process::ExitCode;

use gpulse_diagnose::{Finding, Severity};

use crate::cli::{DiagnoseArgs, ReportFormat};
use crate::cmd::input::load_each;
use crate::output::Output;

/// A run read from a recording or a log, and its findings.
pub struct Analysis {
    pub run: gpulse_diagnose::Run,
    pub findings: Vec<Finding>,
    pub gpus: usize,
    pub samples: usize,
}

/// Reads `path` (snapshots stream into the per-GPU series: a day of 8 GPUs is never held whole)
/// and diagnoses it.
pub fn analyze(path: &std::path::Path) -> anyhow::Result<Analysis> {
    let mut builder = gpulse_diagnose::RunBuilder::default();
    let mut samples = 0usize;
    let recording = load_each(path, &mut |snap| {
        samples += 1;
        builder.push(&snap);
    })?;
    anyhow::ensure!(samples > 0, "{} holds no GPU samples", path.display());
    let run = builder.finish(&recording);
    let findings = gpulse_diagnose::diagnose_run(&run);
    Ok(Analysis { run, findings, gpus: recording.devices.len(), samples })
}

pub fn run(args: &DiagnoseArgs) -> anyhow::Result<ExitCode> {
    let Analysis { findings, gpus, samples, .. } = analyze(&args.input)?;
    let text = match args.format {
        ReportFormat::Json => {
            let doc = serde_json::json!({
                "input": args.input.display().to_string(),
                "gpus": gpus,
                "samples": samples,
                "findings": findings,
            });
            format!("{}\n", serde_json::to_string_pretty(&doc)?)
        }
        ReportFormat::Text => render_text(&findings),
    };
    Output::open(None)?.emit(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// Findings for a terminal: a headline each, then evidence, advice and limits.
pub fn render_text(findings: &[Finding]) -> String {
    let mut s = String::new();
    if findings.is_empty() {
        s += "No findings: the input is too short or too idle to judge.\n";
    }
    for f in findings {
        let tag = match f.severity {
            Severity::Critical => "CRITICAL",
            Severity::Warning => "WARNING",
            Severity::Info => "INFO",
        };
        let _ = writeln!(s, "{tag:<8} {}  [{}]", f.title, f.id);
        let evidence: Vec<String> = f.evidence.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(s, "         evidence: {}", evidence.join(", "));
        for a in &f.advice {
            let _ = writeln!(s, "         - {a}");
        }
        for l in &f.limits {
            let _ = writeln!(s, "         ? {l}");
        }
        s.push('\n');
    }
    s
}
