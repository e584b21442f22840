//! Calls behind nvidia-smi's less common query fields, answered from a device's `nvml` map in
//! the scenario (see `scenario::DeviceSpec::nvml`), so that CI covers those fields' reads.

use std::os::raw::{c_char, c_uint};

use nvml_wrapper_sys::bindings::*;
use serde_json::Value;

use crate::*;

/// The scenario's answer for `call` on the device, as unsigned integers.
fn uints(call: &str, device: nvmlDevice_t, outs: &[*mut c_uint]) -> nvmlReturn_t {
    with_device(call, device, |w, i, _| {
        let vals: Vec<u64> = match w.devices[i].spec.nvml.get(call) {
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_u64).collect(),
            Some(v) => v.as_u64().into_iter().collect(),
            None => return NOT_SUPPORTED,
        };
        if vals.len() != outs.len() || outs.iter().any(|o| o.is_null()) {
            return if outs.iter().any(|o| o.is_null()) { INVALID_ARGUMENT } else { UNKNOWN };
        }
        for (o, v) in outs.iter().zip(vals) {
            // SAFETY: checked non-null; the caller owns a c_uint there.
            unsafe { o.write(v as c_uint) };
        }
        SUCCESS
    })
}

macro_rules! uint_call {
    ($name:ident($($out:ident),+)) => {
        #[unsafe(no_mangle)]
        pub extern "C" fn $name(device: nvmlDevice_t, $($out: *mut c_uint),+) -> nvmlReturn_t {
            uints(stringify!($name), device, &[$($out),+])
        }
    };
}

uint_call!(nvmlDeviceGetPowerManagementDefaultLimit(limit));
uint_call!(nvmlDeviceGetPowerManagementLimitConstraints(min, max));
uint_call!(nvmlDeviceGetMaxPcieLinkGeneration(generation));
uint_call!(nvmlDeviceGetMaxPcieLinkWidth(width));
uint_call!(nvmlDeviceGetGpuMaxPcieLinkGeneration(generation));
uint_call!(nvmlDeviceGetDisplayMode(mode));
uint_call!(nvmlDeviceGetAccountingMode(mode));
uint_call!(nvmlDeviceGetAccountingBufferSize(size));
uint_call!(nvmlDeviceGetRemappedRows(corrected, uncorrected, pending, failed));
uint_call!(nvmlDeviceGetMigMode(current, pending));

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetVbiosVersion(device: nvmlDevice_t, out: *mut c_char, len: c_uint) -> nvmlReturn_t {
    with_device("nvmlDeviceGetVbiosVersion", device, |w, i, _| {
        match w.devices[i].spec.nvml.get("nvmlDeviceGetVbiosVersion").and_then(Value::as_str) {
            Some(v) => put_str(out, len, v),
            None => NOT_SUPPORTED,
        }
    })
}
