//! `gpulse record`: every GPU, the host and a process tree, into a crash-safe recording.

use std::process::ExitCode;

use crate::cli::RecordArgs;
use crate::ops::NvmlAccess;
use crate::ops::record::{RecordOptions, record};

pub fn run(nvml: &NvmlAccess, args: &RecordArgs) -> anyhow::Result<ExitCode> {
    let options = RecordOptions {
        output: args.output.clone(),
        interval: args.interval,
        duration: args.duration,
        pid: args.pid,
        stacks_hz: (!args.no_stacks).then_some(args.stacks_hz),
    };
    record(nvml, &options)
}
