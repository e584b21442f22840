//! nvidia-smi's options outside the query grammar that scripts pass (`-L`, `--help-query-*`),
//! and what gpulse does when it is called as `nvidia-smi` (a symlink) with anything else.

use std::ffi::OsString;
use std::process::ExitCode;

use gpulse_sample::{NvmlOptions, Source};

use crate::cmd::{Exit, open_nvml};

/// What gpulse called as `nvidia-smi` prints for an nvidia-smi mode it does not have.
pub const NOT_HERE: &str = "this nvidia-smi is gpulse, which answers only the query options (--query-gpu, \
--query-compute-apps, -L, --help-query-gpu); run the real nvidia-smi (/usr/bin/nvidia-smi) for anything else";

/// Whether the program was started under the name `nvidia-smi`.
pub fn called_as_nvidia_smi(argv0: Option<&OsString>) -> bool {
    argv0.and_then(|a| std::path::Path::new(a).file_name()).is_some_and(|n| n == "nvidia-smi")
}

/// What one of nvidia-smi's own options asks for, before gpulse's argument parser sees it.
pub enum Smi {
    ListGpus,
    /// `-L` with `-i`, which nvidia-smi refuses.
    ListWithId,
    HelpQueryGpu,
    HelpQueryApps,
    /// Called as `nvidia-smi` with no query: not something gpulse does.
    Elsewhere,
}

/// Reads `args` (without argv[0]) for nvidia-smi's options; `None` leaves them to clap.
pub fn intercept(args: &[OsString], as_smi: bool) -> Option<Smi> {
    let ours = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let args = &args[..ours];
    let has = |names: &[&str]| args.iter().any(|a| a.to_str().is_some_and(|s| names.contains(&s)));
    if has(&["--help-query-gpu"]) {
        return Some(Smi::HelpQueryGpu);
    }
    if has(&["--help-query-compute-apps"]) {
        return Some(Smi::HelpQueryApps);
    }
    if has(&["-L", "--list-gpus"]) {
        let with_id = args.iter().any(|a| a.to_str().is_some_and(|s| s == "-i" || s.starts_with("--id")));
        return Some(if with_id { Smi::ListWithId } else { Smi::ListGpus });
    }
    let query = args
        .iter()
        .any(|a| a.to_str().is_some_and(|s| s.starts_with("--query-gpu") || s.starts_with("--query-compute-apps")));
    // Global options (--nvml-lib) and --version / --help still work under the nvidia-smi name.
    let gpulse_own = has(&["--version", "-V", "--help", "-h"]);
    (as_smi && !query && !gpulse_own).then_some(Smi::Elsewhere)
}

/// Runs what `intercept` found.
pub fn run(nvml: &crate::ops::NvmlAccess, what: Smi) -> anyhow::Result<ExitCode> {
    match what {
        Smi::HelpQueryGpu => print!("{}", gpulse_smi::HELP_QUERY_GPU),
        Smi::HelpQueryApps => print!("{}", gpulse_smi::HELP_QUERY_COMPUTE_APPS),
        Smi::ListWithId => {
            print!("ERROR: Option -i is not valid for this command. Please run 'nvidia-smi -h' for help.\n\n");
            return Ok(ExitCode::from(2));
        }
        Smi::Elsewhere => return Err(Exit { code: 2, message: NOT_HERE.to_owned(), to_stdout: false }.into()),
        Smi::ListGpus => {
            let options = NvmlOptions {
                gpm: false,
                processes: false,
                metrics: Some(Vec::new()),
                device_facts: false,
                ..NvmlOptions::default()
            };
            let source = open_nvml(nvml, options, true)?;
            let mut text = String::new();
            for d in source.devices() {
                text += &format!("GPU {}: {} (UUID: {})\n", d.index, d.name, d.uuid);
            }
            print!("{text}");
            std::mem::forget(source);
        }
    }
    Ok(ExitCode::SUCCESS)
}
