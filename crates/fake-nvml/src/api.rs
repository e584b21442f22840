//! The exported NVML functions, other than GPM.

use std::os::raw::{c_char, c_int, c_uint, c_ulonglong};
use std::time::Instant;

use nvml_wrapper_sys::bindings::*;

use crate::scenario::{self, State};
use crate::*;

const MIB: u64 = 1024 * 1024;

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit_v2() -> nvmlReturn_t {
    let mut guard = world();
    if let Some(w) = guard.as_mut() {
        w.init_count += 1;
        return SUCCESS;
    }
    let Some(path) = std::env::var_os("GPULSE_FAKE_NVML_SCENARIO") else { return DRIVER_NOT_LOADED };
    let path = std::path::PathBuf::from(path);
    let Ok(text) = std::fs::read_to_string(&path) else { return DRIVER_NOT_LOADED };
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    let (scenario, devices) = match scenario::load(&text, dir) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("fake-nvml: {}: {e}", path.display());
            return UNKNOWN;
        }
    };
    if let Some(code) = scenario.init_error {
        return code;
    }
    let started_unix_s =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs_f64();
    *guard = Some(World { scenario, devices, started: Instant::now(), started_unix_s, init_count: 1 });
    SUCCESS
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit() -> nvmlReturn_t {
    nvmlInit_v2()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> nvmlReturn_t {
    nvmlInit_v2()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlShutdown() -> nvmlReturn_t {
    let mut guard = world();
    match guard.as_mut() {
        None => UNINITIALIZED,
        Some(w) => {
            w.init_count -= 1;
            if w.init_count == 0 {
                *guard = None;
            }
            SUCCESS
        }
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlErrorString(result: nvmlReturn_t) -> *const c_char {
    let s: &'static [u8] = match result {
        0 => b"Success\0",
        1 => b"Uninitialized\0",
        2 => b"Invalid Argument\0",
        3 => b"Not Supported\0",
        4 => b"Insufficient Permissions\0",
        6 => b"Not Found\0",
        7 => b"Insufficient Size\0",
        9 => b"Driver Not Loaded\0",
        13 => b"Function Not Found\0",
        15 => b"GPU is lost\0",
        _ => b"Unknown Error\0",
    };
    s.as_ptr().cast()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlSystemGetDriverVersion(version: *mut c_char, length: c_uint) -> nvmlReturn_t {
    with_world("nvmlSystemGetDriverVersion", |w| put_str(version, length, &w.scenario.driver_version))
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlSystemGetNVMLVersion(version: *mut c_char, length: c_uint) -> nvmlReturn_t {
    with_world("nvmlSystemGetNVMLVersion", |w| put_str(version, length, &w.scenario.nvml_version))
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlSystemGetCudaDriverVersion_v2(v: *mut c_int) -> nvmlReturn_t {
    with_world("nvmlSystemGetCudaDriverVersion_v2", |w| put(v, Some(w.scenario.cuda_driver_version)))
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlSystemGetCudaDriverVersion(v: *mut c_int) -> nvmlReturn_t {
    nvmlSystemGetCudaDriverVersion_v2(v)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlSystemGetProcessName(pid: c_uint, name: *mut c_char, length: c_uint) -> nvmlReturn_t {
    with_world("nvmlSystemGetProcessName", |w| {
        let scripted =
            w.devices.iter().flat_map(|d| &d.spec.processes).find(|p| p.pid == pid).and_then(|p| p.name.clone());
        let from_proc = || std::fs::read_to_string(format!("/proc/{pid}/comm")).ok().map(|s| s.trim_end().to_owned());
        match scripted.or_else(from_proc) {
            Some(n) => put_str(name, length, &n),
            None => NOT_FOUND,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> nvmlReturn_t {
    with_world("nvmlDeviceGetCount_v2", |w| put(count, Some(w.devices.len() as c_uint)))
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetCount(count: *mut c_uint) -> nvmlReturn_t {
    nvmlDeviceGetCount_v2(count)
}

pub(crate) fn handle_of(i: usize) -> nvmlDevice_t {
    (i + 1) as nvmlDevice_t
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetHandleByIndex_v2(index: c_uint, device: *mut nvmlDevice_t) -> nvmlReturn_t {
    with_world("nvmlDeviceGetHandleByIndex_v2", |w| {
        if index as usize >= w.devices.len() {
            return INVALID_ARGUMENT;
        }
        put(device, Some(handle_of(index as usize)))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetHandleByIndex(index: c_uint, device: *mut nvmlDevice_t) -> nvmlReturn_t {
    nvmlDeviceGetHandleByIndex_v2(index, device)
}

fn c_str(p: *const c_char) -> Option<String> {
    // SAFETY: NVML callers pass NUL-terminated strings.
    (!p.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetHandleByUUID(uuid: *const c_char, device: *mut nvmlDevice_t) -> nvmlReturn_t {
    with_world("nvmlDeviceGetHandleByUUID", |w| {
        let Some(u) = c_str(uuid) else { return INVALID_ARGUMENT };
        match w.devices.iter().position(|d| d.spec.uuid == u) {
            Some(i) => put(device, Some(handle_of(i))),
            None => NOT_FOUND,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetHandleByPciBusId_v2(bus: *const c_char, device: *mut nvmlDevice_t) -> nvmlReturn_t {
    with_world("nvmlDeviceGetHandleByPciBusId_v2", |w| {
        let Some(b) = c_str(bus) else { return INVALID_ARGUMENT };
        match w.devices.iter().position(|d| d.spec.pci_bus_id.eq_ignore_ascii_case(&b)) {
            Some(i) => put(device, Some(handle_of(i))),
            None => NOT_FOUND,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetIndex(device: nvmlDevice_t, index: *mut c_uint) -> nvmlReturn_t {
    with_device("nvmlDeviceGetIndex", device, |_, i, _| put(index, Some(i as c_uint)))
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetName(device: nvmlDevice_t, name: *mut c_char, length: c_uint) -> nvmlReturn_t {
    with_device("nvmlDeviceGetName", device, |w, i, _| put_str(name, length, &w.devices[i].spec.name))
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetUUID(device: nvmlDevice_t, uuid: *mut c_char, length: c_uint) -> nvmlReturn_t {
    with_device("nvmlDeviceGetUUID", device, |w, i, _| put_str(uuid, length, &w.devices[i].spec.uuid))
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetSerial(device: nvmlDevice_t, serial: *mut c_char, length: c_uint) -> nvmlReturn_t {
    with_device("nvmlDeviceGetSerial", device, |w, i, _| match &w.devices[i].spec.serial {
        Some(s) => put_str(serial, length, s),
        None => NOT_SUPPORTED,
    })
}

pub(crate) fn fill_pci(bus_id: &str, out: *mut nvmlPciInfo_t) -> nvmlReturn_t {
    if out.is_null() {
        return INVALID_ARGUMENT;
    }
    // SAFETY: `out` is non-null and points to an nvmlPciInfo_t the caller owns.
    let p = unsafe { &mut *out };
    // SAFETY: nvmlPciInfo_t is plain old data.
    *p = unsafe { std::mem::zeroed() };
    let parts: Vec<&str> = bus_id.split([':', '.']).collect();
    let hex = |s: Option<&&str>| s.and_then(|s| u32::from_str_radix(s, 16).ok()).unwrap_or(0);
    p.domain = hex(parts.first());
    p.bus = hex(parts.get(1));
    p.device = hex(parts.get(2));
    p.pciDeviceId = 0x233510de;
    let legacy = format!("{:04X}:{:02X}:{:02X}.0", p.domain, p.bus, p.device);
    for (dst, src) in p.busId.iter_mut().zip(bus_id.bytes().take(31)) {
        *dst = src as c_char;
    }
    for (dst, src) in p.busIdLegacy.iter_mut().zip(legacy.bytes().take(15)) {
        *dst = src as c_char;
    }
    SUCCESS
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetPciInfo_v3(device: nvmlDevice_t, pci: *mut nvmlPciInfo_t) -> nvmlReturn_t {
    with_device("nvmlDeviceGetPciInfo_v3", device, |w, i, _| fill_pci(&w.devices[i].spec.pci_bus_id, pci))
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetPciInfo_v2(device: nvmlDevice_t, pci: *mut nvmlPciInfo_t) -> nvmlReturn_t {
    nvmlDeviceGetPciInfo_v3(device, pci)
}

/// Memory as NVML reports it: free = total - reserved - used.
fn memory(s: &State) -> Option<(u64, u64, u64, u64)> {
    let total = s.memory_total_bytes.or(s.memory_total_mib.map(|m| m * MIB))?;
    let reserved = s.memory_reserved_bytes.or(s.memory_reserved_mib.map(|m| m * MIB)).unwrap_or(0);
    let used = s.memory_used_bytes.or(s.memory_used_mib.map(|m| m * MIB))?;
    Some((total, reserved, total.saturating_sub(reserved + used), used))
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMemoryInfo_v2(device: nvmlDevice_t, m: *mut nvmlMemory_v2_t) -> nvmlReturn_t {
    with_device("nvmlDeviceGetMemoryInfo_v2", device, |_, _, s| {
        let v = memory(s).map(|(total, reserved, free, used)| nvmlMemory_v2_t {
            // SAFETY: non-null, `m` is the caller's struct, whose version it set before the call.
            version: if m.is_null() { 0 } else { unsafe { (*m).version } },
            total,
            reserved,
            free,
            used,
        });
        put(m, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMemoryInfo(device: nvmlDevice_t, m: *mut nvmlMemory_t) -> nvmlReturn_t {
    with_device("nvmlDeviceGetMemoryInfo", device, |_, _, s| {
        // The v1 call counts reserved memory as used.
        put(m, memory(s).map(|(total, reserved, free, used)| nvmlMemory_t { total, free, used: used + reserved }))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetUtilizationRates(device: nvmlDevice_t, u: *mut nvmlUtilization_t) -> nvmlReturn_t {
    // One call answers both, so it answers only when the scenario names both.
    with_device("nvmlDeviceGetUtilizationRates", device, |_, _, s| {
        put(u, s.util_gpu_pct.zip(s.util_mem_pct).map(|(gpu, memory)| nvmlUtilization_t { gpu, memory }))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetTemperature(
    device: nvmlDevice_t,
    sensor: nvmlTemperatureSensors_t,
    t: *mut c_uint,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetTemperature", device, |_, _, s| {
        if sensor == 0 { put(t, s.temperature_gpu_c) } else { INVALID_ARGUMENT }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetFieldValues(
    device: nvmlDevice_t,
    count: c_int,
    values: *mut nvmlFieldValue_t,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetFieldValues", device, |w, _, s| {
        if values.is_null() || count < 0 {
            return INVALID_ARGUMENT;
        }
        // SAFETY: the caller passes `count` initialized entries.
        let vals = unsafe { std::slice::from_raw_parts_mut(values, count as usize) };
        let now = w.unix_us(w.now_s()) as i64;
        for v in vals {
            v.timestamp = now;
            v.latencyUsec = 0;
            // NVML_FI_DEV_MEMORY_TEMP = 82, an unsigned int; the scenario's `fields` as unsigned
            // long longs when not negative, as NVML gives its counters.
            let growth = s.fields_per_s.get(&v.fieldId).map_or(0, |per_s| (*per_s as f64 * w.now_s()) as i64);
            let field = s.fields.get(&v.fieldId).map(|x| x + growth);
            match (v.fieldId, s.temperature_memory_c, field.as_ref()) {
                (82, Some(c), _) => {
                    v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT;
                    v.value.uiVal = c;
                    v.nvmlReturn = SUCCESS;
                }
                (_, _, Some(&x)) if x >= 0 => {
                    v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
                    v.value.ullVal = x as u64;
                    v.nvmlReturn = SUCCESS;
                }
                (_, _, Some(&x)) => {
                    v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_LONG_LONG;
                    v.value.sllVal = x;
                    v.nvmlReturn = SUCCESS;
                }
                _ => v.nvmlReturn = NOT_SUPPORTED,
            }
        }
        SUCCESS
    })
}

macro_rules! scalar {
    ($name:ident, $ty:ty, |$s:ident| $e:expr) => {
        #[unsafe(no_mangle)]
        pub extern "C" fn $name(device: nvmlDevice_t, out: *mut $ty) -> nvmlReturn_t {
            with_device(stringify!($name), device, |_, _, $s| put(out, $e))
        }
    };
}

fn mw(w: Option<f64>) -> Option<c_uint> {
    w.map(gpulse_model::w_to_mw)
}

scalar!(nvmlDeviceGetPowerUsage, c_uint, |s| mw(s.power_w));
scalar!(nvmlDeviceGetPowerManagementLimit, c_uint, |s| mw(s.power_limit_w));
scalar!(nvmlDeviceGetEnforcedPowerLimit, c_uint, |s| mw(s.enforced_power_limit_w.or(s.power_limit_w)));
scalar!(nvmlDeviceGetTotalEnergyConsumption, c_ulonglong, |s| s.energy_j.map(|j| (j * 1000.0) as c_ulonglong));
scalar!(nvmlDeviceGetPerformanceState, nvmlPstates_t, |s| s.pstate);
scalar!(nvmlDeviceGetFanSpeed, c_uint, |s| s.fan_speed_pct);
scalar!(nvmlDeviceGetCurrentClocksThrottleReasons, c_ulonglong, |s| s.clocks_event_reasons);
scalar!(nvmlDeviceGetCurrentClocksEventReasons, c_ulonglong, |s| s.clocks_event_reasons);
scalar!(nvmlDeviceGetSupportedClocksThrottleReasons, c_ulonglong, |s| s.clocks_event_reasons_supported);
scalar!(nvmlDeviceGetSupportedClocksEventReasons, c_ulonglong, |s| s.clocks_event_reasons_supported);
scalar!(nvmlDeviceGetCurrPcieLinkGeneration, c_uint, |s| s.pcie_link_gen);
scalar!(nvmlDeviceGetCurrPcieLinkWidth, c_uint, |s| s.pcie_link_width);
scalar!(nvmlDeviceGetPersistenceMode, nvmlEnableState_t, |s| s.persistence_mode.map(c_uint::from));
scalar!(nvmlDeviceGetComputeMode, nvmlComputeMode_t, |s| s.compute_mode);

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetNumFans(device: nvmlDevice_t, n: *mut c_uint) -> nvmlReturn_t {
    with_device("nvmlDeviceGetNumFans", device, |_, _, s| put(n, Some(u32::from(s.fan_speed_pct.is_some()))))
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetFanSpeed_v2(device: nvmlDevice_t, fan: c_uint, speed: *mut c_uint) -> nvmlReturn_t {
    with_device("nvmlDeviceGetFanSpeed_v2", device, |_, _, s| match s.fan_speed_pct {
        Some(v) if fan == 0 => put(speed, Some(v)),
        // What the H200's driver answers for a board without fans.
        _ => INVALID_ARGUMENT,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetEccMode(
    device: nvmlDevice_t,
    current: *mut nvmlEnableState_t,
    pending: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetEccMode", device, |_, _, s| {
        let v = s.ecc_enabled.map(c_uint::from);
        match put(current, v) {
            SUCCESS => put(pending, v),
            e => e,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetClockInfo(
    device: nvmlDevice_t,
    kind: nvmlClockType_t,
    clock: *mut c_uint,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetClockInfo", device, |_, _, s| match kind {
        0 => put(clock, s.clock_graphics_mhz.or(s.clock_sm_mhz)),
        1 => put(clock, s.clock_sm_mhz),
        2 => put(clock, s.clock_mem_mhz),
        _ => NOT_SUPPORTED,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMaxClockInfo(
    device: nvmlDevice_t,
    kind: nvmlClockType_t,
    clock: *mut c_uint,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetMaxClockInfo", device, |_, _, s| match kind {
        0 => put(clock, s.clock_max_graphics_mhz.or(s.clock_max_sm_mhz)),
        1 => put(clock, s.clock_max_sm_mhz),
        2 => put(clock, s.clock_max_mem_mhz),
        _ => NOT_SUPPORTED,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetPcieThroughput(
    device: nvmlDevice_t,
    counter: nvmlPcieUtilCounter_t,
    value: *mut c_uint,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetPcieThroughput", device, |_, _, s| match counter {
        0 => put(value, s.pcie_tx_kib_s),
        1 => put(value, s.pcie_rx_kib_s),
        _ => INVALID_ARGUMENT,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetTotalEccErrors(
    device: nvmlDevice_t,
    error_type: nvmlMemoryErrorType_t,
    counter: nvmlEccCounterType_t,
    count: *mut c_ulonglong,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetTotalEccErrors", device, |_, _, s| {
        if s.ecc_enabled != Some(true) || counter != 0 {
            return NOT_SUPPORTED;
        }
        put(count, if error_type == 1 { s.ecc_uncorrected_volatile } else { s.ecc_corrected_volatile })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetCudaComputeCapability(
    device: nvmlDevice_t,
    major: *mut c_int,
    minor: *mut c_int,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetCudaComputeCapability", device, |_, _, s| match put(major, s.cuda_cc.map(|c| c.0)) {
        SUCCESS => put(minor, s.cuda_cc.map(|c| c.1)),
        e => e,
    })
}

/// The scripted processes alive on device `i` at time `t`.
fn live_processes(w: &World, i: usize, t: f64) -> Vec<scenario::ProcessSpec> {
    w.devices[i]
        .spec
        .processes
        .iter()
        .filter(|p| p.from_s <= t && p.until_s.is_none_or(|u| t < u))
        .filter_map(|p| match p.pid {
            scenario::CHILD_PID => Some(scenario::ProcessSpec { pid: first_child()?, ..p.clone() }),
            _ => Some(p.clone()),
        })
        .collect()
}

/// The first child of the process that loaded the library, from any of its threads' lists, that
/// runs another program (a fork of the loader, gpulse's keeper of the job's stderr, is not the
/// job): a scenario's `"pid": "child"`. `None` while it has none.
fn first_child() -> Option<u32> {
    let me = std::fs::read_link("/proc/self/exe").ok();
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let mut children: Vec<u32> = tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|l| l.split_whitespace().filter_map(|p| p.parse().ok()).collect::<Vec<u32>>())
        .collect();
    children.sort_unstable();
    children.into_iter().find(|c| std::fs::read_link(format!("/proc/{c}/exe")).ok() != me)
}

/// NVML's two-call list protocol: report the count when the buffer is too small.
fn fill_list<T>(count: *mut c_uint, out: *mut T, items: Vec<T>) -> nvmlReturn_t {
    if count.is_null() {
        return INVALID_ARGUMENT;
    }
    // SAFETY: `count` is non-null and points to the caller's capacity.
    let cap = unsafe { *count } as usize;
    // SAFETY: the same non-null `count`, written once.
    unsafe { *count = items.len() as c_uint };
    if items.is_empty() {
        return SUCCESS;
    }
    if cap < items.len() || out.is_null() {
        return INSUFFICIENT_SIZE;
    }
    for (k, item) in items.into_iter().enumerate() {
        // SAFETY: the caller's buffer holds `cap >= items.len()` entries.
        unsafe { out.add(k).write(item) };
    }
    SUCCESS
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetComputeRunningProcesses_v3", device, |w, i, _| {
        let items = live_processes(w, i, w.now_s())
            .into_iter()
            .map(|p| nvmlProcessInfo_t {
                pid: p.pid,
                // NVML_VALUE_NOT_AVAILABLE when the scenario gives no figure.
                usedGpuMemory: p.used_memory_mib.map_or(u64::MAX, |m| m * MIB),
                gpuInstanceId: u32::MAX,
                computeInstanceId: u32::MAX,
            })
            .collect();
        fill_list(count, infos, items)
    })
}

macro_rules! no_processes {
    ($name:ident) => {
        #[unsafe(no_mangle)]
        pub extern "C" fn $name(
            device: nvmlDevice_t,
            count: *mut c_uint,
            infos: *mut nvmlProcessInfo_t,
        ) -> nvmlReturn_t {
            with_device(stringify!($name), device, |_, _, _| fill_list(count, infos, Vec::new()))
        }
    };
}
no_processes!(nvmlDeviceGetGraphicsRunningProcesses_v3);
no_processes!(nvmlDeviceGetMPSComputeRunningProcesses_v3);

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetProcessUtilization(
    device: nvmlDevice_t,
    utilization: *mut nvmlProcessUtilizationSample_t,
    count: *mut c_uint,
    last_seen_us: c_ulonglong,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetProcessUtilization", device, |w, i, _| {
        let now = w.now_s();
        // The driver takes a process's sample once a second: a second read within it finds
        // nothing newer.
        let ts = w.unix_us(now.floor());
        // A sample carries both figures, so a process has samples only when both are named. As
        // the driver does, a process that used no SM since `last_seen_us` has no sample; a device
        // where no process names both cannot tell at all.
        let procs = live_processes(w, i, now);
        if !procs.iter().any(|p| p.sm_util_pct.is_some() && p.mem_util_pct.is_some()) {
            return NOT_SUPPORTED;
        }
        let items: Vec<_> = procs
            .into_iter()
            .filter(|_| ts > last_seen_us)
            .filter_map(|p| {
                Some(nvmlProcessUtilizationSample_t {
                    pid: p.pid,
                    timeStamp: ts,
                    smUtil: p.sm_util_pct?,
                    memUtil: p.mem_util_pct?,
                    encUtil: 0,
                    decUtil: 0,
                })
            })
            .collect();
        // The driver answers NOT_FOUND when its buffer holds no samples.
        if items.is_empty() {
            return NOT_FOUND;
        }
        fill_list(count, utilization, items)
    })
}

/// The driver's utilization buffer: one reading every 1/6 s over the last 10 s.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetSamples(
    device: nvmlDevice_t,
    kind: nvmlSamplingType_t,
    last_seen_us: c_ulonglong,
    value_type: *mut nvmlValueType_t,
    count: *mut c_uint,
    samples: *mut nvmlSample_t,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetSamples", device, |w, i, _| {
        // NVML_GPU_UTILIZATION_SAMPLES = 1
        if kind != 1 {
            return NOT_SUPPORTED;
        }
        if count.is_null() || value_type.is_null() {
            return INVALID_ARGUMENT;
        }
        let now = w.now_s();
        let step = w.scenario.speed / 6.0;
        let mut items = Vec::new();
        for k in (0..60).rev() {
            let t = now - f64::from(k) * step;
            let ts = w.unix_us(t);
            if ts <= last_seen_us {
                continue;
            }
            let Some(v) = w.devices[i].state(t).util_gpu_pct else { continue };
            // SAFETY: nvmlSample_t is plain data (a union of numbers); all zeroes is valid.
            let mut sample: nvmlSample_t = unsafe { std::mem::zeroed() };
            sample.timeStamp = ts;
            sample.sampleValue.uiVal = v;
            items.push(sample);
        }
        // SAFETY: checked non-null above.
        unsafe { *value_type = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT };
        if items.is_empty() {
            // SAFETY: `count` was checked non-null above.
            unsafe { *count = 0 };
            return NOT_FOUND;
        }
        if samples.is_null() {
            // SAFETY: `count` was checked non-null above.
            unsafe { *count = items.len() as c_uint };
            return SUCCESS;
        }
        // SAFETY: `count` was checked non-null above; it holds the caller's capacity.
        let cap = unsafe { *count } as usize;
        items.truncate(cap);
        fill_list(count, samples, items)
    })
}

macro_rules! not_supported {
    ($name:ident($($arg:ident: $ty:ty),*)) => {
        /// Exported so that NVML clients get the driver's `NOT_SUPPORTED`, as on a Linux
        /// data-centre GPU, rather than a missing symbol.
        #[unsafe(no_mangle)]
        pub extern "C" fn $name(device: nvmlDevice_t, $($arg: $ty),*) -> nvmlReturn_t {
            $(let _ = $arg;)*
            with_device(stringify!($name), device, |_, _, _| NOT_SUPPORTED)
        }
    };
}
not_supported!(nvmlDeviceGetEncoderUtilization(util: *mut c_uint, period_us: *mut c_uint));
not_supported!(nvmlDeviceGetDecoderUtilization(util: *mut c_uint, period_us: *mut c_uint));
not_supported!(nvmlDeviceGetDisplayActive(active: *mut nvmlEnableState_t));
not_supported!(nvmlDeviceGetDriverModel(current: *mut nvmlDriverModel_t, pending: *mut nvmlDriverModel_t));
