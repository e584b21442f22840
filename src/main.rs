//! gpulse: why is my PyTorch training slow?
//!
//! `main` parses arguments, runs one command, and maps the result to an exit status. Each
//! command lives in `cmd/<verb>.rs` and is glue between the library crates.

mod cli;
mod cmd;
mod duration;
mod ops;
mod output;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};

fn main() -> ExitCode {
    output::note_inherited_descriptors();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let as_smi = cmd::smi::called_as_nvidia_smi(args.first());
    if let Some(what) = cmd::smi::intercept(args.get(1..).unwrap_or_default(), as_smi) {
        let nvml = ops::NvmlAccess { lib_path: cli::nvml_lib_arg(&args), ..ops::NvmlAccess::default() };
        return cmd::smi::run(&nvml, what).unwrap_or_else(|e| cmd::report_error(&e));
    }
    let cli = match Cli::try_parse_from(cli::normalize_args(args)) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let nvml = |given: &cli::GlobalArgs| cmd::access(&given.or(&cli.global));
    let result = match cli.command.unwrap_or(Command::Status(cli::StatusArgs::default())) {
        Command::Query(args) => cmd::query::run(&nvml(&args.nvml), &args),
        Command::Status(args) => cmd::status::run(&nvml(&args.nvml), &args),
        Command::Watch(args) => cmd::watch::run(&nvml(&args.nvml), &args),
        Command::Record(args) => cmd::record::run(&nvml(&args.nvml), &args),
        Command::Run(args) => cmd::run::run(&nvml(&args.nvml), &args),
        Command::Attach(args) => cmd::attach::run(&nvml(&args.nvml), &args),
        Command::Import(args) => cmd::import::run(&args),
        Command::Export(args) => cmd::export::run(&args),
        Command::Diagnose(args) => cmd::diagnose::run(&args),
        Command::Compare(args) => cmd::compare::run(&args),
        Command::Report(args) => cmd::report::run(&args),
        Command::Demo(args) => cmd::demo::run(&args),
        Command::Serve(args) => cmd::serve::run(&nvml(&args.nvml), &args),
        Command::Top(args) => cmd::top::run(&nvml(&args.nvml), &args),
    };
    let code = match result {
        Ok(code) => code,
        Err(e) => cmd::report_error(&e),
    };
    gpulse_sample::profile::report();
    code
}
