//! One module per command: glue between the arguments and the use cases in `ops/`, which know
//! nothing of the command line.

pub mod attach;
pub mod compare;
pub mod demo;
pub mod diagnose;
pub mod export;
pub mod import;
pub mod query;
pub mod record;
pub mod report;
pub mod run;
pub mod serve;
pub mod smi;
pub mod status;
pub mod top;
pub mod watch;

use gpulse_job::terminal::StatusStyle;

use crate::cli::{GlobalArgs, JobArgs, StatusMode};
use crate::ops::NvmlAccess;
use crate::ops::job::JobOptions;
pub use crate::ops::{EXIT_NO_DRIVER, Exit, describe, open_nvml, report_error};

/// The NVML options as the use cases take them.
pub fn access(given: &GlobalArgs) -> NvmlAccess {
    NvmlAccess { lib_path: given.nvml_lib.clone(), no_gpm: given.no_gpm, gpm_window: given.gpm_interval }
}

/// How `run` and `attach` watch a job: the status as a row on a terminal, else as lines.
fn job_options(args: &JobArgs) -> JobOptions {
    let is_tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let status = match args.status {
        StatusMode::Off => StatusStyle::Off,
        StatusMode::Line => StatusStyle::Lines,
        StatusMode::Auto if is_tty => StatusStyle::Row,
        StatusMode::Auto => StatusStyle::Lines,
    };
    JobOptions {
        output: args.output.clone(),
        interval: args.interval,
        status,
        status_every: args.status_every,
        report: !args.no_report,
        serve: args.serve,
        web_config: args.web_config.clone(),
        stacks_hz: (!args.no_stacks).then_some(args.stacks_hz),
    }
}
