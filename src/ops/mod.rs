//! The use cases every command and the watched job share: open the GPUs, analyse a recording,
//! write its report, and say what went wrong in one line. `cmd/` calls these; nothing here calls
//! into `cmd/`.

pub mod analyze;
pub mod job;
pub mod lines;
pub mod record;
pub mod recorder;
pub mod report;
pub mod serve;
pub mod serving;
pub mod summary;

use std::process::ExitCode;

use gpulse_sample::{NvmlOptions, NvmlSource, SampleError};

use crate::output::is_broken_pipe;

pub use gpulse_input::describe;

/// A failure that carries its own message and exit status (nvidia-smi's, where gpulse stands in
/// for it).
#[derive(Debug)]
pub struct Exit {
    pub code: u8,
    pub message: String,
    /// nvidia-smi prints some errors on standard output; keep that where scripts may rely on it.
    pub to_stdout: bool,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

/// Exit status when no NVIDIA driver can be reached (nvidia-smi uses 9 too).
pub const EXIT_NO_DRIVER: u8 = 9;

/// Prints one clear line for `e` and returns the exit status.
pub fn report_error(e: &anyhow::Error) -> ExitCode {
    if is_broken_pipe(e) {
        return ExitCode::SUCCESS;
    }
    if let Some(exit) = e.downcast_ref::<Exit>() {
        if exit.to_stdout {
            println!("{}", exit.message);
        } else {
            eprintln!("gpulse: {}", exit.message);
        }
        return ExitCode::from(exit.code);
    }
    if let Some(SampleError::NoDriver { .. }) = e.downcast_ref::<SampleError>() {
        eprintln!("gpulse: {e}; `gpulse demo` replays a real H200 recording instead");
        return ExitCode::from(EXIT_NO_DRIVER);
    }
    eprintln!("gpulse: {}", describe(e));
    ExitCode::FAILURE
}

/// How every command that reads the GPUs reaches NVML: the library, and GPM's use and window.
#[derive(Debug, Clone, Default)]
pub struct NvmlAccess {
    /// The library to load instead of the driver's.
    pub lib_path: Option<std::path::PathBuf>,
    /// Leave GPM's counters alone (they can disturb DCGM profiling).
    pub no_gpm: bool,
    /// How long each GPM window spans; by default one a second, or 100 ms for a one-shot view.
    pub gpm_window: Option<std::time::Duration>,
}

/// Opens the live NVML source with `access` applied. `one_shot` views take a single short GPM
/// window; continuous ones default to one window a second.
pub fn open_nvml(access: &NvmlAccess, mut options: NvmlOptions, one_shot: bool) -> anyhow::Result<NvmlSource> {
    options.lib_path = access.lib_path.clone();
    options.gpm &= !access.no_gpm;
    let default_ms = if one_shot { 100 } else { 1000 };
    options.gpm_every = access.gpm_window.unwrap_or(std::time::Duration::from_millis(default_ms));
    match NvmlSource::open(options) {
        Ok(source) => Ok(source),
        Err(e @ SampleError::NoDriver { .. }) => Err(stand_in_scenario_unreadable().unwrap_or_else(|| e.into())),
        Err(e) => Err(e.into()),
    }
}

/// The stand-in NVML library (README, "Without a GPU") reads its scenario from the file that
/// `GPULSE_FAKE_NVML_SCENARIO` names, and answers as a machine without a driver when it cannot:
/// a mistyped path is named as what it is, not as a missing driver.
fn stand_in_scenario_unreadable() -> Option<anyhow::Error> {
    let path = std::path::PathBuf::from(std::env::var_os("GPULSE_FAKE_NVML_SCENARIO").filter(|p| !p.is_empty())?);
    let why = std::fs::File::open(&path).err()?;
    Some(anyhow::anyhow!(
        "cannot read the stand-in NVML's scenario {} (GPULSE_FAKE_NVML_SCENARIO): {why}",
        path.display()
    ))
}
