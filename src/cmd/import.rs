//! `gpulse import`: nvidia-smi CSV logs into a recording.

use std::process::ExitCode;

use crate::cli::ImportArgs;
use gpulse_input::{ImportSummary, TempPath, import_logs, warn_malformed};

use crate::output::publish_new;

pub fn run(args: &ImportArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(!args.output.exists(), "{} already exists; import into a new file", args.output.display());
    // A recording given as a log: it needs no import, and is not a malformed CSV.
    for log in &args.logs {
        if gpulse_input::is_recording(log).unwrap_or(false) {
            anyhow::bail!(
                "{0} is already a recording, not an nvidia-smi log; diagnose, report and export read it as it is \
                 (gpulse diagnose {0})",
                log.display()
            );
        }
    }
    // Written beside the target and renamed at the end: the recording appears whole or not at all.
    let tmp = TempPath::beside(&args.output);
    let summary = import_logs(&args.logs, args.fields.as_deref(), &tmp.0)
        .map_err(|e| tmp.hide(e, &args.output.to_string_lossy()))?;
    publish_new(&tmp.0, &args.output)?;
    eprintln!("{}", imported(&summary, &args.output));
    if !summary.ignored_columns.is_empty() {
        eprintln!("columns gpulse does not use: {}", summary.ignored_columns.join(", "));
    }
    // The line every reading command prints, then why each line could not be read.
    warn_malformed(&summary.malformed);
    for (path, m) in summary.malformed.iter().take(20) {
        eprintln!("  {}:{}: {}", path.display(), m.line, m.why);
    }
    if summary.malformed.len() > 20 {
        eprintln!("  … and {} more", summary.malformed.len() - 20);
    }
    Ok(ExitCode::SUCCESS)
}

/// What an import holds, in words: GPU samples and process rows are different things, and a
/// `--query-compute-apps` log alone has no GPU samples.
fn imported(s: &ImportSummary, out: &std::path::Path) -> String {
    let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let gpus = plural(s.gpus, "GPU", "GPUs");
    match (s.gpu_rows, s.app_rows) {
        (g, 0) => format!("imported {} of {gpus} into {}", plural(g, "GPU sample", "GPU samples"), out.display()),
        (0, a) => format!(
            "imported {} of {gpus} into {}, and no GPU samples: a --query-compute-apps log lists processes, \
             not GPU readings",
            plural(a, "process row", "process rows"),
            out.display()
        ),
        (g, a) => format!(
            "imported {} and {} of {gpus} into {}",
            plural(g, "GPU sample", "GPU samples"),
            plural(a, "process row", "process rows"),
            out.display()
        ),
    }
}
