//! nvidia-smi's query language, byte for byte.
//!
//! `--query-gpu=` and `--query-compute-apps=` field lists, the headers nvidia-smi prints for them
//! (aliases resolve to the canonical name: `clocks.sm` → `clocks.current.sm [MHz]`), units,
//! `[N/A]` and `[Not Supported]`, the timestamp format, and `-i` device selection. gpulse-only
//! fields live under `gpm.` and never clash with nvidia-smi's names. Rendering takes snapshots;
//! it never reads a GPU.

pub mod fields;
pub mod format;
pub mod log;
mod query;
mod render;
pub mod select;
pub mod timestamp;
#[cfg(test)]
mod zoned;

pub use fields::{AppField, GpuField, parse_app_fields, parse_gpu_fields};
pub use format::CsvFormat;
pub use query::{Query, ReadPlan};
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

/// nvidia-smi 580's `--help-query-gpu` text, as it prints it.
pub const HELP_QUERY_GPU: &str = include_str!("../help/query_gpu.txt");
/// nvidia-smi 580's `--help-query-compute-apps` text.
pub const HELP_QUERY_COMPUTE_APPS: &str = include_str!("../help/query_compute_apps.txt");

#[cfg(test)]
mod properties {
    use gpulse_model::{DeviceInfo, GpuSample};
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Field lists, formats and device ids from any text are accepted or refused, never a panic.
        #[test]
        fn parsers_never_panic(text in "\\PC*") {
            let _ = parse_gpu_fields(&text);
            let _ = parse_app_fields(&text);
            let _ = CsvFormat::parse(&text);
            let devices = vec![DeviceInfo { uuid: "GPU-x".into(), pci_bus_id: Some("00000000:01:00.0".into()), ..DeviceInfo::default() }];
            let _ = select::select(&devices, Some(&text));
        }

        /// Every accepted GPU field list renders a header and a row with one cell per field, even
        /// when every reading is absent.
        #[test]
        fn one_cell_per_field(names in proptest::collection::vec(proptest::sample::select(fields::gpu_field_names().collect::<Vec<_>>()), 1..12)) {
            let list = names.join(",");
            let f = parse_gpu_fields(&list).unwrap();
            let info = DeviceInfo::default();
            let sample = GpuSample::default();
            let row = GpuRow { info: &info, sample: &sample, timestamp_us: 0, device_count: 1 };
            prop_assert_eq!(gpu_header(&f).split(", ").count(), names.len());
            prop_assert_eq!(gpu_row(&f, &row, CsvFormat::default()).split(", ").count(), names.len());
        }
    }
}
