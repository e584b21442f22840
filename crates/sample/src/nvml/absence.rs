//! What an NVML error says of a value: one mapping, for every reader of the device.

use gpulse_model::Absence;
use nvml_wrapper::error::NvmlError;

/// Why an NVML error means a value is absent.
pub(super) fn absence_of(e: &NvmlError) -> Absence {
    match e {
        NvmlError::NotSupported => Absence::NotSupported,
        NvmlError::NoPermission => Absence::NoPermission,
        NvmlError::GpuLost => Absence::GpuLost,
        NvmlError::Unknown => Absence::Unknown,
        _ => Absence::NotAvailable,
    }
}
