//! A stand-in `libnvidia-ml.so` for tests, driven by a scenario file.
//!
//! It exports the NVML functions gpulse calls, with NVML's real C ABI (types from
//! nvml-wrapper-sys), so that gpulse, pynvml, gpustat and nvitop load it as they would load the
//! driver's library. `GPULSE_FAKE_NVML_SCENARIO` names the scenario (see [`scenario`]); without
//! it `nvmlInit` answers `NVML_ERROR_DRIVER_NOT_LOADED`. Functions it does not export come back
//! from NVML clients as `FUNCTION_NOT_FOUND`.

#![allow(non_snake_case, clippy::missing_safety_doc, clippy::not_unsafe_ptr_arg_deref)]

mod api;
mod extra;
mod gpm;
mod health;
pub mod scenario;

use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use nvml_wrapper_sys::bindings::*;

use scenario::{Device, Scenario, State};

pub(crate) const SUCCESS: nvmlReturn_t = nvmlReturn_enum_NVML_SUCCESS;
pub(crate) const UNINITIALIZED: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_UNINITIALIZED;
pub(crate) const INVALID_ARGUMENT: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
pub(crate) const NOT_SUPPORTED: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED;
pub(crate) const NOT_FOUND: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_NOT_FOUND;
pub(crate) const INSUFFICIENT_SIZE: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;
pub(crate) const DRIVER_NOT_LOADED: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_DRIVER_NOT_LOADED;
pub(crate) const FUNCTION_NOT_FOUND: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_FUNCTION_NOT_FOUND;
pub(crate) const GPU_IS_LOST: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST;
pub(crate) const UNKNOWN: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_UNKNOWN;
pub(crate) const TIMEOUT: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_TIMEOUT;

/// The loaded scenario and the clock it runs on.
pub(crate) struct World {
    pub scenario: Scenario,
    pub devices: Vec<Device>,
    pub started: Instant,
    /// Unix time at `started`, seconds: the one wall reading NVML's timestamps count from, so a
    /// scenario moment always maps to the same microsecond.
    pub started_unix_s: f64,
    pub init_count: u32,
}

impl World {
    /// Scenario time now, in seconds.
    pub fn now_s(&self) -> f64 {
        self.scenario.start_s + self.started.elapsed().as_secs_f64() * self.scenario.speed
    }

    /// Maps scenario time to Unix microseconds, for timestamps NVML hands out.
    pub fn unix_us(&self, scenario_s: f64) -> u64 {
        let since_s = (scenario_s - self.scenario.start_s) / self.scenario.speed.max(1e-9);
        ((self.started_unix_s + since_s).max(0.0) * 1e6) as u64
    }
}

static WORLD: Mutex<Option<World>> = Mutex::new(None);

pub(crate) fn world() -> MutexGuard<'static, Option<World>> {
    WORLD.lock().unwrap_or_else(|e| e.into_inner())
}

/// How many times each NVML function was called since the library loaded, so that tests can
/// check how often gpulse reads what (the driver's calls cost milliseconds).
static CALLS: Mutex<Vec<(String, u64)>> = Mutex::new(Vec::new());

fn count(call: &str) {
    let mut calls = CALLS.lock().unwrap_or_else(|e| e.into_inner());
    match calls.iter_mut().find(|c| c.0 == call) {
        Some(c) => c.1 += 1,
        None => calls.push((call.to_owned(), 1)),
    }
}

/// Not NVML's: how many times the NVML function named `call` was called (0 for a null name).
#[unsafe(no_mangle)]
pub extern "C" fn gpulseFakeCallCount(call: *const std::os::raw::c_char) -> u64 {
    if call.is_null() {
        return 0;
    }
    // SAFETY: the caller passes a NUL-terminated string.
    let name = unsafe { std::ffi::CStr::from_ptr(call) }.to_string_lossy();
    CALLS.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|c| c.0 == name).map_or(0, |c| c.1)
}

/// Runs `f` with the device behind `handle` and its state now, after the checks every device
/// call makes: initialized, a valid handle, the function supported, not lost, no scripted error.
pub(crate) fn with_device(
    call: &str,
    handle: nvmlDevice_t,
    f: impl FnOnce(&World, usize, &State) -> nvmlReturn_t,
) -> nvmlReturn_t {
    count(call);
    let guard = world();
    let Some(w) = guard.as_ref() else { return UNINITIALIZED };
    if w.scenario.unsupported_functions.iter().any(|n| n == call) {
        return FUNCTION_NOT_FOUND;
    }
    let idx = (handle as usize).wrapping_sub(1);
    let Some(dev) = w.devices.get(idx) else { return INVALID_ARGUMENT };
    let t = w.now_s();
    if dev.spec.lost_at_s.is_some_and(|l| t >= l) {
        return GPU_IS_LOST;
    }
    if let Some(e) = dev.spec.errors.iter().find(|e| e.call == call && e.from_s <= t && e.until_s.is_none_or(|u| t < u))
    {
        return e.code;
    }
    f(w, idx, dev.state(t))
}

/// Runs `f` with the world, after checking initialization and that the function is supported.
pub(crate) fn with_world(call: &str, f: impl FnOnce(&World) -> nvmlReturn_t) -> nvmlReturn_t {
    count(call);
    let guard = world();
    let Some(w) = guard.as_ref() else { return UNINITIALIZED };
    if w.scenario.unsupported_functions.iter().any(|n| n == call) {
        return FUNCTION_NOT_FOUND;
    }
    f(w)
}

/// Writes `v` through `out` when it is non-null and the value is known.
pub(crate) fn put<T>(out: *mut T, v: Option<T>) -> nvmlReturn_t {
    if out.is_null() {
        return INVALID_ARGUMENT;
    }
    match v {
        Some(v) => {
            // SAFETY: the caller passed a non-null pointer to a T, as NVML's contract requires.
            unsafe { out.write(v) };
            SUCCESS
        }
        None => NOT_SUPPORTED,
    }
}

/// Copies `s` into a C buffer of `len` bytes, NUL-terminated.
pub(crate) fn put_str(out: *mut std::os::raw::c_char, len: u32, s: &str) -> nvmlReturn_t {
    if out.is_null() {
        return INVALID_ARGUMENT;
    }
    let bytes = s.as_bytes();
    if bytes.len() + 1 > len as usize {
        return INSUFFICIENT_SIZE;
    }
    // SAFETY: `out` has room for `len` bytes and we write at most bytes.len() + 1 <= len.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.cast::<u8>(), bytes.len());
        *out.add(bytes.len()) = 0;
    }
    SUCCESS
}
