//! Xid events and NVLink links, answered from a device's `xids` and `nvlinks` in the scenario.

use std::os::raw::{c_uint, c_ulonglong};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nvml_wrapper_sys::bindings::*;

use crate::api::{fill_pci, handle_of};
use crate::scenario::NvLinkSpec;
use crate::*;

/// `nvmlEventTypeXidCriticalError`.
const XID_CRITICAL: c_ulonglong = 8;

/// One event set: the devices registered on it, and the Xids (device, position in its list)
/// it has delivered. A set's handle is its position plus one; a freed set stays as `None`.
#[derive(Default)]
struct EventSet {
    devices: Vec<usize>,
    delivered: Vec<(usize, usize)>,
}

static SETS: Mutex<Vec<Option<EventSet>>> = Mutex::new(Vec::new());

fn sets() -> std::sync::MutexGuard<'static, Vec<Option<EventSet>>> {
    SETS.lock().unwrap_or_else(|e| e.into_inner())
}

fn set_index(set: nvmlEventSet_t) -> usize {
    (set as usize).wrapping_sub(1)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlEventSetCreate(set: *mut nvmlEventSet_t) -> nvmlReturn_t {
    with_world("nvmlEventSetCreate", |_| {
        let mut all = sets();
        all.push(Some(EventSet::default()));
        put(set, Some(all.len() as nvmlEventSet_t))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlEventSetFree(set: nvmlEventSet_t) -> nvmlReturn_t {
    with_world("nvmlEventSetFree", |_| match sets().get_mut(set_index(set)) {
        Some(s @ Some(_)) => {
            *s = None;
            SUCCESS
        }
        _ => INVALID_ARGUMENT,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetSupportedEventTypes(device: nvmlDevice_t, types: *mut c_ulonglong) -> nvmlReturn_t {
    with_device("nvmlDeviceGetSupportedEventTypes", device, |w, i, _| {
        put(types, w.devices[i].spec.xids.as_ref().map(|_| XID_CRITICAL))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceRegisterEvents(
    device: nvmlDevice_t,
    types: c_ulonglong,
    set: nvmlEventSet_t,
) -> nvmlReturn_t {
    with_device("nvmlDeviceRegisterEvents", device, |w, i, _| {
        if w.devices[i].spec.xids.is_none() || types & !XID_CRITICAL != 0 {
            return NOT_SUPPORTED;
        }
        match sets().get_mut(set_index(set)) {
            Some(Some(s)) => {
                s.devices.push(i);
                SUCCESS
            }
            _ => INVALID_ARGUMENT,
        }
    })
}

/// Waits up to `timeout_ms` for an Xid of a registered device whose time has come, checking
/// every 5 ms without holding the library's lock, so other calls go on meanwhile.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlEventSetWait_v2(
    set: nvmlEventSet_t,
    data: *mut nvmlEventData_t,
    timeout_ms: c_uint,
) -> nvmlReturn_t {
    let start = Instant::now();
    loop {
        let due = with_world("nvmlEventSetWait_v2", |w| {
            let now = w.now_s();
            let mut all = sets();
            let Some(Some(s)) = all.get_mut(set_index(set)) else { return INVALID_ARGUMENT };
            for &d in &s.devices {
                let xids = w.devices[d].spec.xids.as_deref().unwrap_or_default();
                let Some((k, x)) =
                    xids.iter().enumerate().find(|(k, x)| x.at_s <= now && !s.delivered.contains(&(d, *k)))
                else {
                    continue;
                };
                s.delivered.push((d, k));
                let event = nvmlEventData_t {
                    device: handle_of(d),
                    eventType: XID_CRITICAL,
                    eventData: x.xid,
                    gpuInstanceId: 0,
                    computeInstanceId: 0,
                };
                return put(data, Some(event));
            }
            TIMEOUT
        });
        if due != TIMEOUT || start.elapsed() >= Duration::from_millis(u64::from(timeout_ms)) {
            return due;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `f` on link `link` of the device: `NOT_SUPPORTED` without links, `INVALID_ARGUMENT`
/// past them.
fn with_link(
    call: &str,
    device: nvmlDevice_t,
    link: c_uint,
    f: impl FnOnce(&NvLinkSpec) -> nvmlReturn_t,
) -> nvmlReturn_t {
    with_device(call, device, |w, i, _| match &w.devices[i].spec.nvlinks {
        None => NOT_SUPPORTED,
        Some(links) => links.get(link as usize).map_or(INVALID_ARGUMENT, f),
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetNvLinkState(
    device: nvmlDevice_t,
    link: c_uint,
    active: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    with_link("nvmlDeviceGetNvLinkState", device, link, |l| put(active, Some(nvmlEnableState_t::from(l.active))))
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetNvLinkVersion(device: nvmlDevice_t, link: c_uint, version: *mut c_uint) -> nvmlReturn_t {
    with_link("nvmlDeviceGetNvLinkVersion", device, link, |l| put(version, l.version))
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetNvLinkRemotePciInfo_v2(
    device: nvmlDevice_t,
    link: c_uint,
    pci: *mut nvmlPciInfo_t,
) -> nvmlReturn_t {
    with_link("nvmlDeviceGetNvLinkRemotePciInfo_v2", device, link, |l| match &l.remote_pci_bus_id {
        Some(bus) => fill_pci(bus, pci),
        None => NOT_SUPPORTED,
    })
}

#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub extern "C" fn nvmlDeviceGetNvLinkErrorCounter(
    device: nvmlDevice_t,
    link: c_uint,
    counter: nvmlNvLinkErrorCounter_t,
    value: *mut c_ulonglong,
) -> nvmlReturn_t {
    with_link("nvmlDeviceGetNvLinkErrorCounter", device, link, |l| {
        let v = match counter {
            nvmlNvLinkErrorCounter_enum_NVML_NVLINK_ERROR_DL_REPLAY => l.replay,
            nvmlNvLinkErrorCounter_enum_NVML_NVLINK_ERROR_DL_RECOVERY => l.recovery,
            nvmlNvLinkErrorCounter_enum_NVML_NVLINK_ERROR_DL_CRC_FLIT => l.crc_flit,
            nvmlNvLinkErrorCounter_enum_NVML_NVLINK_ERROR_DL_CRC_DATA => l.crc_data,
            _ => return INVALID_ARGUMENT,
        };
        put(value, v)
    })
}
