//! `gpulse import`: nvidia-smi CSV logs into a recording.

use std::process::ExitCode;

use crate::cli::ImportArgs;
use crate::cmd::input::import_logs;
use crate::output::{TempPath, publish_new};

pub fn run(args: &ImportArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(!args.output.exists(), "{} already exists; import into a new file", args.output.display());
    // Written beside the target and renamed at the end: the recording appears whole or not at all.
    let tmp = TempPath::beside(&args.output);
    let summary = import_logs(&args.logs, args.fields.as_deref(), &tmp.0)
        .map_err(|e| tmp.hide(e, &args.output.to_string_lossy()))?;
    publish_new(&tmp.0, &args.output)?;
    eprintln!(
        "imported {} rows of {} GPU{} into {}",
        summary.rows,
        summary.gpus,
        if summary.gpus == 1 { "" } else { "s" },
        args.output.display()
    );
    if !summary.ignored_columns.is_empty() {
        eprintln!("columns gpulse does not use: {}", summary.ignored_columns.join(", "));
    }
    if !summary.malformed.is_empty() {
        eprintln!(
            "{} malformed line{} skipped:",
            summary.malformed.len(),
            if summary.malformed.len() == 1 { "" } else { "s" }
        );
        for (path, m) in summary.malformed.iter().take(20) {
            eprintln!("  {}:{}: {}", path.display(), m.line, m.why);
        }
        if summary.malformed.len() > 20 {
            eprintln!("  … and {} more", summary.malformed.len() - 20);
        }
    }
    Ok(ExitCode::SUCCESS)
}
