//! GPM: samples carry the scenario time they were taken at; metrics are the state at the second.

use std::os::raw::c_uint;

use nvml_wrapper_sys::bindings::*;

use crate::*;

/// What a GPM sample handle points to.
struct Sample {
    device: Option<usize>,
    t: f64,
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmQueryDeviceSupport(device: nvmlDevice_t, support: *mut nvmlGpmSupport_t) -> nvmlReturn_t {
    with_device("nvmlGpmQueryDeviceSupport", device, |_, _, s| {
        if support.is_null() {
            return INVALID_ARGUMENT;
        }
        // SAFETY: non-null pointer to the caller's struct.
        unsafe { (*support).isSupportedDevice = c_uint::from(s.gpm_supported == Some(true)) };
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmSampleAlloc(out: *mut nvmlGpmSample_t) -> nvmlReturn_t {
    with_world("nvmlGpmSampleAlloc", |_| {
        let b = Box::into_raw(Box::new(Sample { device: None, t: 0.0 }));
        put(out, Some(b.cast()))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmSampleFree(sample: nvmlGpmSample_t) -> nvmlReturn_t {
    if sample.is_null() {
        return INVALID_ARGUMENT;
    }
    // SAFETY: handles come from nvmlGpmSampleAlloc's Box::into_raw and are freed once.
    drop(unsafe { Box::from_raw(sample.cast::<Sample>()) });
    SUCCESS
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmSampleGet(device: nvmlDevice_t, sample: nvmlGpmSample_t) -> nvmlReturn_t {
    with_device("nvmlGpmSampleGet", device, |w, i, s| {
        if s.gpm_supported != Some(true) {
            return NOT_SUPPORTED;
        }
        if sample.is_null() {
            return INVALID_ARGUMENT;
        }
        // SAFETY: a live handle from nvmlGpmSampleAlloc.
        let sm = unsafe { &mut *sample.cast::<Sample>() };
        sm.device = Some(i);
        sm.t = w.now_s();
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmMetricsGet(req: *mut nvmlGpmMetricsGet_t) -> nvmlReturn_t {
    with_world("nvmlGpmMetricsGet", |w| {
        if req.is_null() {
            return INVALID_ARGUMENT;
        }
        // SAFETY: non-null pointer to the caller's request.
        let r = unsafe { &mut *req };
        if r.version != NVML_GPM_METRICS_GET_VERSION || r.sample1.is_null() || r.sample2.is_null() {
            return INVALID_ARGUMENT;
        }
        // SAFETY: live handles from nvmlGpmSampleAlloc.
        let (a, b) = unsafe { (&*r.sample1.cast::<Sample>(), &*r.sample2.cast::<Sample>()) };
        let (Some(da), Some(db)) = (a.device, b.device) else { return INVALID_ARGUMENT };
        if da != db || b.t <= a.t {
            return INVALID_ARGUMENT;
        }
        let state = w.devices[db].state(b.t);
        let n = (r.numMetrics as usize).min(r.metrics.len());
        for m in &mut r.metrics[..n] {
            match state.gpm.get(&m.metricId) {
                Some(v) => {
                    m.value = *v;
                    m.nvmlReturn = SUCCESS;
                }
                None => m.nvmlReturn = NOT_SUPPORTED,
            }
            m.metricInfo.shortName = std::ptr::null_mut();
            m.metricInfo.longName = std::ptr::null_mut();
            m.metricInfo.unit = std::ptr::null_mut();
        }
        SUCCESS
    })
}
