//! One poll of one device, and the mapping of NVML errors to absences.

use std::collections::HashMap;
use std::time::Instant;

use gpulse_model::{
    Absence, DeviceInfo, DeviceStatus, GpuSample, Metric, Probe, ProbeResult, ProcessSample, Reading, UtilSample,
};
use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, MemoryError, PcieUtilCounter, Sampling, TemperatureSensor,
};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::{Device, Nvml};

use super::absence::absence_of;
use super::cadence::SETTINGS;
use super::{NvmlOptions, Tracked};
use crate::proc_info;

/// `NVML_FI_DEV_MEMORY_TEMP`: HBM temperature, °C.
const FI_DEV_MEMORY_TEMP: u32 = 82;

/// Collects absences while reading one device.
struct Reader<'a> {
    absent: gpulse_model::Absences,
    lost: bool,
    wanted: Option<&'a [Metric]>,
}

impl Reader<'_> {
    /// Whether the caller asked for `metric`.
    fn wants(&self, metric: Metric) -> bool {
        self.wanted.is_none_or(|w| w.contains(&metric))
    }

    /// Calls NVML for `metric` when it is wanted and the device is not lost; the value, or `None`
    /// with the reason recorded. `call` names it in the profile.
    fn get<T>(&mut self, metric: Metric, call: &'static str, f: impl FnOnce() -> Result<T, NvmlError>) -> Option<T> {
        self.untimed(metric, || super::profile::timed(call, f))
    }

    /// As [`Self::get`], for work that is not one NVML call (its calls are profiled inside).
    fn untimed<T>(&mut self, metric: Metric, f: impl FnOnce() -> Result<T, NvmlError>) -> Option<T> {
        if self.lost || !self.wants(metric) {
            return None;
        }
        match f() {
            Ok(v) => Some(v),
            Err(e) => {
                let why = absence_of(&e);
                self.lost |= why == Absence::GpuLost;
                if !self.absent.iter().any(|a| a.0 == metric) {
                    self.absent.push((metric, why));
                }
                None
            }
        }
    }
}

/// `read!(r, Metric::X, d.call())`: an NVML call, named for profiles by its own text.
macro_rules! read {
    ($r:expr, $metric:expr, $call:expr) => {
        $r.get($metric, stringify!($call), || $call)
    };
}

/// Reads the facts that do not change while the device is watched.
pub(super) fn device_info(d: &Device<'static>, index: u32, facts: bool) -> DeviceInfo {
    let identity = DeviceInfo {
        index: super::profile::timed("index", || d.index()).unwrap_or(index),
        uuid: super::profile::timed("uuid", || d.uuid()).unwrap_or_default(),
        name: super::profile::timed("name", || d.name()).unwrap_or_default(),
        pci_bus_id: super::profile::timed("pci_info", || d.pci_info()).ok().map(|p| p.bus_id),
        ..DeviceInfo::default()
    };
    if !facts {
        return identity;
    }
    DeviceInfo {
        memory_total_bytes: super::profile::timed("memory_info", || d.memory_info()).ok().map(|m| m.total),
        power_limit_mw: super::profile::timed("power_management_limit", || d.power_management_limit()).ok(),
        clock_max_sm_mhz: super::profile::timed("max_clock_info", || d.max_clock_info(Clock::SM)).ok(),
        clock_max_mem_mhz: super::profile::timed("max_clock_info", || d.max_clock_info(Clock::Memory)).ok(),
        clocks_event_reasons_supported: super::profile::timed("supported_throttle_reasons", || {
            d.supported_throttle_reasons()
        })
        .ok()
        .map(|r| r.bits()),
        persistence_mode: super::profile::timed("is_in_persistent_mode", || d.is_in_persistent_mode()).ok(),
        compute_mode: super::profile::timed("compute_mode", || d.compute_mode()).ok().map(|m| {
            use nvml_wrapper::enum_wrappers::device::ComputeMode as M;
            match m {
                M::Default => "Default",
                M::ExclusiveThread => "Exclusive_Thread",
                M::Prohibited => "Prohibited",
                M::ExclusiveProcess => "Exclusive_Process",
            }
            .to_owned()
        }),
        ecc_enabled: super::profile::timed("is_ecc_enabled", || d.is_ecc_enabled()).ok().map(|e| e.currently_enabled),
        ..identity
    }
}

/// Reads everything about one device. Never fails: what cannot be read is `None`.
/// What a process is, read once per PID while it holds a GPU context.
pub(super) struct Identity {
    name: Option<String>,
    cmdline: Option<String>,
    user: Option<String>,
}

pub(super) fn sample_device(
    nvml: &'static Nvml,
    info: &DeviceInfo,
    t: &mut Tracked,
    opts: &NvmlOptions,
    ids: &mut HashMap<u32, Identity>,
) -> GpuSample {
    let mut s = GpuSample { gpu_index: info.index, ..GpuSample::default() };
    let Some(d) = t.device.as_ref().filter(|_| !t.lost) else {
        s.status = DeviceStatus::Lost;
        return s;
    };
    let mut r = Reader { absent: gpulse_model::Absences::new(), lost: false, wanted: opts.metrics.as_deref() };
    let due = t.held.due(&opts.cadence, Instant::now());
    if let Some(u) = read!(r, Metric::Utilization, d.utilization_rates()) {
        s.util_gpu_pct = Some(u.gpu);
        s.util_mem_pct = Some(u.memory);
    }
    if r.lost {
        return lost(s, t);
    }
    if let Some(m) = read!(r, Metric::Memory, d.memory_info()) {
        s.memory_used_bytes = Some(m.used);
        s.memory_free_bytes = Some(m.free);
        s.memory_reserved_bytes = Some(m.reserved);
        s.memory_total_bytes = Some(m.total);
    }
    s.temperature_gpu_c = read!(r, Metric::TemperatureGpu, d.temperature(TemperatureSensor::Gpu));
    if r.wants(Metric::TemperatureMemory) {
        s.temperature_memory_c = memory_temperature(d, &mut r);
    }
    s.power_draw_mw = read!(r, Metric::PowerDraw, d.power_usage());
    if due.power_limit {
        s.power_limit_mw = read!(r, Metric::PowerLimit, d.power_management_limit());
        t.held.power_limit_mw = s.power_limit_mw;
        t.held.keep_absences(&[Metric::PowerLimit], &r.absent);
    } else {
        s.power_limit_mw = t.held.power_limit_mw;
        t.held.restore_absences(&[Metric::PowerLimit], &mut r.absent);
    }
    if due.energy {
        s.energy_mj = read!(r, Metric::Energy, d.total_energy_consumption());
        t.held.energy_mj = s.energy_mj;
        t.held.keep_absences(&[Metric::Energy], &r.absent);
    } else {
        s.energy_mj = t.held.energy_mj;
        t.held.restore_absences(&[Metric::Energy], &mut r.absent);
    }
    s.clock_sm_mhz = read!(r, Metric::ClockSm, d.clock_info(Clock::SM));
    s.clock_mem_mhz = read!(r, Metric::ClockMem, d.clock_info(Clock::Memory));
    s.clock_graphics_mhz = read!(r, Metric::ClockGraphics, d.clock_info(Clock::Graphics));
    s.pstate = read!(r, Metric::Pstate, d.performance_state()).and_then(|p| {
        use nvml_wrapper::enum_wrappers::device::PerformanceState as P;
        let all = [
            P::Zero,
            P::One,
            P::Two,
            P::Three,
            P::Four,
            P::Five,
            P::Six,
            P::Seven,
            P::Eight,
            P::Nine,
            P::Ten,
            P::Eleven,
            P::Twelve,
            P::Thirteen,
            P::Fourteen,
            P::Fifteen,
        ];
        all.iter().position(|x| *x == p).map(|i| i as u32)
    });
    s.fan_speed_pct = read!(r, Metric::FanSpeed, d.fan_speed(0));
    s.clocks_event_reasons = read!(r, Metric::ClocksEventReasons, d.current_throttle_reasons().map(|b| b.bits()));
    if due.settings {
        let h = &mut t.held;
        h.enforced_power_limit_mw = read!(r, Metric::EnforcedPowerLimit, d.enforced_power_limit());
        h.pcie_link_gen = read!(r, Metric::PcieLink, d.current_pcie_link_gen());
        h.pcie_link_width = read!(r, Metric::PcieLink, d.current_pcie_link_width());
        h.ecc_uncorrected =
            read!(r, Metric::EccErrors, d.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile));
        h.ecc_corrected = read!(r, Metric::EccErrors, d.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile));
        h.nvlinks = r.untimed(Metric::NvLink, || super::nvlink::read(d)).unwrap_or_default();
        h.keep_absences(SETTINGS, &r.absent);
    } else {
        t.held.restore_absences(SETTINGS, &mut r.absent);
    }
    s.enforced_power_limit_mw = t.held.enforced_power_limit_mw;
    s.pcie_link_gen = t.held.pcie_link_gen;
    s.pcie_link_width = t.held.pcie_link_width;
    s.ecc_uncorrected_volatile = t.held.ecc_uncorrected;
    s.ecc_corrected_volatile = t.held.ecc_corrected;
    s.nvlinks.clone_from(&t.held.nvlinks);
    if r.wants(Metric::Table) && !r.lost {
        // Rows read on the settings cadence keep their last reading between reads.
        s.table = t.held.table.clone();
        r.lost |= super::table::read(d, due.settings, &mut s.table);
        t.held.table.clone_from(&s.table);
    }
    if r.lost {
        return lost(s, t);
    }
    if due.util_buffer && r.wants(Metric::UtilSamples) {
        s.util_gpu_samples = super::profile::timed("samples", || util_samples(d, &mut t.last_util_sample_us));
    }
    if !opts.processes || !r.wants(Metric::Processes) {
        // Not listed is unknown, not "no processes".
        r.absent.push((Metric::Processes, Absence::NotAvailable));
    } else if due.processes {
        let listed = processes(
            nvml,
            d,
            (&mut t.last_proc_util_us, &mut t.held.process_util),
            opts,
            due.process_util,
            &mut r,
            ids,
        );
        t.held.keep_absences(&[Metric::Processes], &r.absent);
        t.held.processes = listed.clone();
        s.processes = listed.unwrap_or_default();
    } else {
        s.processes = t.held.processes.clone().unwrap_or_default();
        t.held.restore_absences(&[Metric::Processes], &mut r.absent);
    }
    if opts.gpm && info.gpm_supported == Some(true) && r.wants(Metric::Gpm) {
        s.gpm =
            r.untimed(Metric::Gpm, || t.gpm.poll(nvml, d, opts.gpm_every, opts.gpm_wait_first)).flatten().map(Box::new);
    }
    match s.gpm.as_ref().map(|g| (g.pcie_tx_bytes_per_s, g.pcie_rx_bytes_per_s)) {
        Some((Some(tx), Some(rx))) => {
            s.pcie_tx_bytes_per_s = Some(tx as u64);
            s.pcie_rx_bytes_per_s = Some(rx as u64);
        }
        _ => {
            let due = r.wants(Metric::PcieThroughput)
                && opts.pcie_every.is_some_and(|every| t.last_pcie.is_none_or(|l| l.elapsed() >= every));
            if due {
                t.last_pcie = Some(Instant::now());
                // NVML's "KB/s" are KiB/s (1024 bytes, as nvitop reads them too).
                s.pcie_tx_bytes_per_s = read!(r, Metric::PcieThroughput, d.pcie_throughput(PcieUtilCounter::Send))
                    .map(|k| u64::from(k) * 1024);
                s.pcie_rx_bytes_per_s = read!(r, Metric::PcieThroughput, d.pcie_throughput(PcieUtilCounter::Receive))
                    .map(|k| u64::from(k) * 1024);
            }
        }
    }
    for &p in &opts.probes {
        let mut got = super::profile::timed("probe", || super::probe::read(nvml, d, p)).map_err(|e| absence_of(&e));
        if p == Probe::NvlinkThroughput {
            got = nvlink_rate(&mut t.last_nvlink_kib, got);
        }
        r.lost |= got == Err(Absence::GpuLost);
        s.probes.push((p, got));
    }
    if r.lost {
        return lost(s, t);
    }
    s.absent = r.absent;
    s
}

/// DCGM's NVLink bandwidth from the data counters' reading: their increase since the previous
/// read over the time between, KiB/s divided by 1,000 as DCGM divides it. The first read, or a
/// counter that went back, gives no rate.
fn nvlink_rate(last: &mut Option<(Instant, i64)>, got: ProbeResult) -> ProbeResult {
    let Ok(Reading::Num(kib)) = got else {
        *last = None;
        return got;
    };
    let now = Instant::now();
    match last.replace((now, kib)) {
        Some((at, before)) if kib >= before && now > at => {
            Ok(Reading::Num(((kib - before) as f64 / (now - at).as_secs_f64() / 1000.0) as i64))
        }
        _ => Err(Absence::NotAvailable),
    }
}

/// Marks the device lost for good: NVML does not bring a lost GPU back without a reset.
fn lost(mut s: GpuSample, t: &mut Tracked) -> GpuSample {
    t.lost = true;
    let index = s.gpu_index;
    s = GpuSample { gpu_index: index, status: DeviceStatus::Lost, ..GpuSample::default() };
    s
}

fn memory_temperature(d: &Device<'static>, r: &mut Reader) -> Option<u32> {
    let values = read!(r, Metric::TemperatureMemory, d.field_values_for(&[FieldId(FI_DEV_MEMORY_TEMP)]))?;
    let v = r.untimed(Metric::TemperatureMemory, || values.into_iter().next().ok_or(NvmlError::Unknown)?)?;
    match r.untimed(Metric::TemperatureMemory, || v.value)? {
        SampleValue::U32(x) => Some(x),
        SampleValue::U64(x) => u32::try_from(x).ok(),
        SampleValue::I64(x) => u32::try_from(x).ok(),
        SampleValue::F64(x) => (x >= 0.0).then_some(x as u32),
    }
    // A value of 0 from an HBM sensor means the sensor is absent.
    .filter(|c| *c > 0)
}

/// The driver's high-rate GPU-utilization readings newer than the last poll.
fn util_samples(d: &Device<'static>, last_seen_us: &mut u64) -> Vec<UtilSample> {
    let Ok(samples) = d.samples(Sampling::GpuUtilization, *last_seen_us) else {
        return Vec::new();
    };
    let mut out: Vec<UtilSample> = samples
        .into_iter()
        .filter(|s| s.timestamp > *last_seen_us)
        .filter_map(|s| {
            let v = match s.value {
                SampleValue::U32(v) => v,
                SampleValue::U64(v) => v as u32,
                SampleValue::I64(v) => v as u32,
                SampleValue::F64(v) => v as u32,
            };
            Some(UtilSample { timestamp_us: i64::try_from(s.timestamp).ok()?, util_pct: v })
        })
        .collect();
    out.sort_by_key(|s| s.timestamp_us);
    if let Some(last) = out.last() {
        *last_seen_us = last.timestamp_us as u64;
    }
    out
}

/// The least span of per-process utilization samples asked for.
const UTIL_SPAN_US: u64 = 2_000_000;

fn processes(
    nvml: &'static Nvml,
    d: &Device<'static>,
    (last_seen_us, held): (&mut u64, &mut HashMap<u32, (u32, u32)>),
    opts: &NvmlOptions,
    util_due: bool,
    r: &mut Reader,
    ids: &mut HashMap<u32, Identity>,
) -> Option<Vec<ProcessSample>> {
    use nvml_wrapper::enums::device::UsedGpuMemory;
    let list = read!(r, Metric::Processes, d.running_compute_processes())?;
    if opts.process_util && util_due && !list.is_empty() {
        // NVML answers only for processes that used the GPU since the timestamp asked (NOT_FOUND
        // when none did): a listed process it leaves out used none of it. The span asked is 2 s
        // at least, whatever the reads' spacing (a one-shot view reads twice, 0.1 s apart), so a
        // busy process has a sample in it. Any other failure leaves every share unknown: a value
        // that could not be read is absent, never the last one read.
        let floor_us = u64::try_from(gpulse_base::clock::now_us()).unwrap_or(0).saturating_sub(UTIL_SPAN_US);
        // The first read too: the whole buffer may hold a sample from before a process fell idle.
        let since_us = if *last_seen_us == 0 { floor_us } else { (*last_seen_us).min(floor_us) };
        let util = match super::profile::timed("process_utilization_stats", || d.process_utilization_stats(since_us)) {
            Ok(u) => Some(u),
            Err(nvml_wrapper::error::NvmlError::NotFound) => Some(Vec::new()),
            Err(_) => {
                held.clear();
                None
            }
        };
        if let Some(util) = util {
            if let Some(newest) = util.iter().map(|u| u.timestamp).max() {
                *last_seen_us = newest;
            }
            for p in &list {
                let u = util.iter().filter(|u| u.pid == p.pid).max_by_key(|u| u.timestamp);
                held.insert(p.pid, u.map_or((0, 0), |u| (u.sm_util, u.mem_util)));
            }
        }
    }
    held.retain(|pid, _| list.iter().any(|p| p.pid == *pid));
    Some(
        list.into_iter()
            .map(|p| {
                let u = held.get(&p.pid);
                let id = ids.entry(p.pid).or_insert_with(|| Identity {
                    name: super::profile::timed("sys_process_name", || nvml.sys_process_name(p.pid, 256))
                        .ok()
                        .filter(|n| !n.is_empty())
                        .or_else(|| proc_info::comm(p.pid)),
                    cmdline: proc_info::cmdline(p.pid),
                    user: proc_info::user(p.pid),
                });
                ProcessSample {
                    pid: p.pid,
                    used_memory_bytes: match p.used_gpu_memory {
                        UsedGpuMemory::Used(b) => Some(b),
                        UsedGpuMemory::Unavailable => None,
                    },
                    name: id.name.clone(),
                    cmdline: id.cmdline.clone(),
                    user: id.user.clone(),
                    sm_util_pct: u.map(|u| u.0),
                    mem_util_pct: u.map(|u| u.1),
                    class: None,
                    workload: None,
                }
            })
            .collect(),
    )
}
