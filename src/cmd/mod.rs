//! One module per command: glue between the arguments and the use cases in `ops/`.

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

pub use crate::ops::{EXIT_NO_DRIVER, Exit, describe, open_nvml, report_error};
