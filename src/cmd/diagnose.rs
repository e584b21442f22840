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
    if samples == 0 && recording.host.is_empty() && recording.markers.is_empty() {
        // A compute-apps log lists processes, not GPU readings: say so, and what would do.
        if recording.meta.contains_key("nvidia_smi_app_fields") {
            let logs =
                recording.meta.get("source").and_then(|s| s.strip_prefix("nvidia-smi csv: ")).unwrap_or("APPS.csv");
            anyhow::bail!(
                "{} holds no GPU samples to diagnose: it is a --query-compute-apps log, which lists processes only; \
                 import it with the run's --query-gpu log (gpulse import GPU.csv {logs} -o run.db) and diagnose that",
                path.display()
            );
        }
        anyhow::bail!("{} holds no samples", path.display());
    }
    let run = builder.finish(&recording);
    let findings = gpulse_diagnose::diagnose_run(&run);
    Ok(Analysis { run, findings, gpus: recording.devices.len(), samples })
}

pub fn run(args: &DiagnoseArgs) -> anyhow::Result<ExitCode> {
    let Analysis { findings, gpus, samples, run } = analyze(&args.input)?;
    let text = match args.format {
        ReportFormat::Json => {
            let doc = serde_json::json!({
                "input": args.input.display().to_string(),
                "gpus": gpus,
                "samples": samples,
                "steps": run.steps.as_ref().map(steps_json),
                "findings": findings,
            });
            format!("{}\n", serde_json::to_string_pretty(&doc)?)
        }
        ReportFormat::Text => steps_line(&run) + &render_text(&findings),
    };
    Output::open(None)?.emit(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// The loop's own measurements, for `--format json`.
pub fn steps_json(s: &gpulse_diagnose::Steps) -> serde_json::Value {
    serde_json::json!({
        "pid": s.pid,
        "ranks": s.ranks,
        "steps": s.count,
        "window_s": s.window_s,
        "steps_per_s": s.per_s(),
        "step_mean_ms": 1000.0 * s.mean_step_s(),
        "data_wait_share_pct": s.data_wait_share().map(|w| 100.0 * w),
    })
}

/// One line on the loop's own measurements, when it sent marks.
pub fn steps_line(run: &gpulse_diagnose::Run) -> String {
    let Some(s) = &run.steps else { return String::new() };
    let mut line = format!("steps: {} at {:.2}/s, {:.0} ms each", s.count, s.per_s(), 1000.0 * s.mean_step_s());
    if let Some(w) = s.data_wait_share() {
        line += &format!(", waiting for data {:.0}% of the time", 100.0 * w);
    }
    if s.ranks > 1 {
        line += &format!(" (PID {}, one of {} processes marking steps)", s.pid, s.ranks);
    }
    line + "\n\n"
}

/// Findings for a terminal: a headline each, then evidence, advice and limits.
pub fn render_text(findings: &[Finding]) -> String {
    let mut s = String::new();
    if findings.is_empty() {
        s += "No findings: nothing points to a bottleneck (or the input is too short or too idle to judge).\n";
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
