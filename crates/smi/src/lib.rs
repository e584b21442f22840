//! nvidia-smi's query language, byte for byte.
//!
//! `--query-gpu=` and `--query-compute-apps=` field lists, the headers nvidia-smi prints for them
//! (aliases resolve to the canonical name: `clocks.sm` → `clocks.current.sm [MHz]`), units,
//! `[N/A]` and `[Not Supported]`, the timestamp format, and `-i` device selection. gpulse-only
//! fields live under `gpm.` and never clash with nvidia-smi's names. Rendering takes snapshots;
//! it never reads a GPU.

pub mod fields;
pub mod format;
mod render;
pub mod select;
pub mod timestamp;

pub use fields::{AppField, GpuField, parse_app_fields, parse_gpu_fields};
pub use format::CsvFormat;
pub use render::{GpuRow, app_header, app_row, gpu_header, gpu_row, mib_ceil as render_mib};

/// A query nvidia-smi would refuse, with the message and exit status it uses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("Field \"{0}\" is not a valid field to query.\n")]
    UnknownField(String),
    #[error("Format modifier is not recognized.")]
    BadFormat,
    #[error("No devices were found")]
    NoDevices,
}

impl QueryError {
    /// The exit status nvidia-smi gives this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            QueryError::UnknownField(_) | QueryError::BadFormat => 2,
            QueryError::NoDevices => 6,
        }
    }
}
