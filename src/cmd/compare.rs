//! `gpulse compare`: two runs side by side, what changed, and a verdict.

use std::process::ExitCode;

use gpulse_diagnose::compare::compare;

use crate::cli::{CompareArgs, ReportFormat};
use crate::ops::analyze::analyze;
use crate::output::Output;

pub fn run(args: &CompareArgs) -> anyhow::Result<ExitCode> {
    let (before, after) = (analyze(&args.before)?, analyze(&args.after)?);
    let c = compare(&before.run, &before.diagnosis, &after.run, &after.diagnosis);
    let (b, a) = (args.before.display().to_string(), args.after.display().to_string());
    let text = match args.format {
        ReportFormat::Json => {
            let mut doc = serde_json::to_value(&c)?;
            if let Some(o) = doc.as_object_mut() {
                o.insert("before_input".into(), b.into());
                o.insert("after_input".into(), a.into());
            }
            format!("{}\n", serde_json::to_string_pretty(&doc)?)
        }
        // The inputs' paths are named whole, on their labels' lines, however long.
        ReportFormat::Text => format!(
            "before: {b}\nafter:  {a}\n\n{}",
            gpulse_report::text::wrap(
                &gpulse_report::compare::render(&c),
                crate::output::text_width(libc::STDOUT_FILENO)
            )
        ),
    };
    Output::open(None)?.emit(&text)?;
    Ok(ExitCode::SUCCESS)
}
