//! The hand-read metrics: those NVML gives through calls of their own, each a field of
//! [`GpuSample`] that `nvml/read.rs` fills. A new one is a field, its read, a row here (with its
//! recording column), the column in `gpulse-record`'s `CREATE`, and the stand-in's answer
//! (`fake-nvml`); `--query-gpu` (names, unit, how it prints, an nvidia-smi log's cells),
//! `/metrics` (dcgm-exporter's series) and the recording's writer and reader follow from the row.

use super::{Call, Column, Dcgm, Every, Kind, Place, Scale, Shown, Source, TableMetric, Unit};
use crate::{GpuSample, Metric};

/// The [`Call`] of `$name` that fills the sample's `$field`, an integer of the given type.
macro_rules! call {
    ($name:literal, $metric:ident, $field:ident: u32) => {
        Call {
            name: $name,
            metric: Metric::$metric,
            read: |s: &GpuSample| s.$field.map(u64::from),
            write: |s: &mut GpuSample, v| s.$field = u32::try_from(v).ok(),
            device: None,
            column: None,
        }
    };
    ($name:literal, $metric:ident, $field:ident: u64) => {
        Call {
            name: $name,
            metric: Metric::$metric,
            read: |s: &GpuSample| s.$field,
            write: |s: &mut GpuSample, v| s.$field = Some(v),
            device: None,
            column: None,
        }
    };
}

#[allow(clippy::too_many_arguments)]
const fn row(
    key: &'static str,
    unit: Unit,
    (call, column): (Call, Option<Column>),
    every: Every,
    smi: &'static [&'static str],
    shown: Shown,
    smi_unit: Option<&'static str>,
    dcgm: Option<Dcgm>,
) -> TableMetric {
    TableMetric { key, unit, source: Source::Call(Call { column, ..call }), every, smi, shown, smi_unit, dcgm }
}

/// A call kept in `gpu_sample_rows`' column `name`, every poll.
const fn base(call: Call, name: &'static str, scale: Scale) -> (Call, Option<Column>) {
    (call, Some(Column { name, place: Place::Base, scale }))
}

/// A call kept in `gpu_state`'s column `name`, when it changes.
const fn state(call: Call, name: &'static str, scale: Scale) -> (Call, Option<Column>) {
    (call, Some(Column { name, place: Place::State, scale }))
}

/// A call no column keeps: a second name of another row's field, or a value worked out when read.
const fn unkept(call: Call) -> (Call, Option<Column>) {
    (call, None)
}

/// dcgm-exporter's gauge, with its help text as `etc/default-counters.csv` writes it.
const fn gauge(name: &'static str, help: &'static str) -> Option<Dcgm> {
    Some(Dcgm { name, kind: Kind::Gauge, help })
}

/// Every hand-read metric. Keys name the [`GpuSample`] field each reads; a field nvidia-smi shows
/// under two names of its own has a row for each, the second keyed by that name
/// (`power_draw_average_mw`, `pcie_link_gen_gpu`).
#[rustfmt::skip]
pub const HAND_READ: &[TableMetric] = &[
    row("util_gpu_pct", Unit::Pct, base(call!("nvmlDeviceGetUtilizationRates", Utilization, util_gpu_pct: u32), "util_gpu_pct", Scale::One), Every::Poll,
        &["utilization.gpu"], Shown::Int, Some("%"), gauge("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).")),
    row("util_mem_pct", Unit::Pct, base(call!("nvmlDeviceGetUtilizationRates", Utilization, util_mem_pct: u32), "util_mem_pct", Scale::One), Every::Poll,
        &["utilization.memory"], Shown::Int, Some("%"), gauge("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).")),
    row("memory_used_bytes", Unit::Byte, base(call!("nvmlDeviceGetMemoryInfo_v2", Memory, memory_used_bytes: u64), "mem_used_kib", Scale::Kib), Every::Poll,
        &["memory.used"], Shown::MibCeil, Some("MiB"), gauge("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).")),
    row("memory_free_bytes", Unit::Byte, unkept(call!("nvmlDeviceGetMemoryInfo_v2", Memory, memory_free_bytes: u64)), Every::Poll,
        &["memory.free"], Shown::MibCeil, Some("MiB"), gauge("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).")),
    row("memory_reserved_bytes", Unit::Byte, state(call!("nvmlDeviceGetMemoryInfo_v2", Memory, memory_reserved_bytes: u64), "mem_reserved_kib", Scale::Kib), Every::Poll,
        &["memory.reserved"], Shown::MibCeil, Some("MiB"), gauge("DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB).")),
    row("memory_total_bytes", Unit::Byte,
        state(Call { device: Some(|d| d.memory_total_bytes), ..call!("nvmlDeviceGetMemoryInfo_v2", Memory, memory_total_bytes: u64) }, "mem_total_kib", Scale::Kib),
        Every::Poll, &["memory.total"], Shown::MibCeil, Some("MiB"), None),
    row("temperature_gpu_c", Unit::Celsius, base(call!("nvmlDeviceGetTemperature", TemperatureGpu, temperature_gpu_c: u32), "temp_gpu_c", Scale::One), Every::Poll,
        &["temperature.gpu"], Shown::Int, None, gauge("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).")),
    row("temperature_memory_c", Unit::Celsius,
        base(call!("nvmlDeviceGetFieldValues(NVML_FI_DEV_MEMORY_TEMP)", TemperatureMemory, temperature_memory_c: u32), "temp_mem_c", Scale::One), Every::Poll,
        &["temperature.memory"], Shown::Int, None, gauge("DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C).")),
    row("power_draw_mw", Unit::Milliwatt, base(call!("nvmlDeviceGetPowerUsage", PowerDraw, power_draw_mw: u32), "power_mw", Scale::One), Every::Poll,
        &["power.draw"], Shown::Watts, Some("W"), gauge("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).")),
    // nvidia-smi's one-second average: gpulse answers it with the draw it samples.
    row("power_draw_average_mw", Unit::Milliwatt, unkept(call!("nvmlDeviceGetPowerUsage", PowerDraw, power_draw_mw: u32)), Every::Poll,
        &["power.draw.average", "gpu.power.draw.average"], Shown::Watts, Some("W"), None),
    row("power_limit_mw", Unit::Milliwatt,
        state(Call { device: Some(|d| d.power_limit_mw.map(u64::from)), ..call!("nvmlDeviceGetPowerManagementLimit", PowerLimit, power_limit_mw: u32) }, "power_limit_mw", Scale::One),
        Every::PowerLimit, &["power.limit", "gpu.power.requested_limit"], Shown::Watts, Some("W"), None),
    row("enforced_power_limit_mw", Unit::Milliwatt,
        state(call!("nvmlDeviceGetEnforcedPowerLimit", EnforcedPowerLimit, enforced_power_limit_mw: u32), "enforced_power_limit_mw", Scale::One), Every::Settings,
        &["enforced.power.limit", "gpu.power.current_limit"], Shown::Watts, Some("W"), None),
    row("energy_mj", Unit::Millijoule, state(call!("nvmlDeviceGetTotalEnergyConsumption", Energy, energy_mj: u64), "energy_mj", Scale::One), Every::Energy,
        &[], Shown::Int, None,
        Some(Dcgm { name: "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", kind: Kind::Counter, help: "Total energy consumption since boot (in mJ)." })),
    row("clock_sm_mhz", Unit::Mhz, base(call!("nvmlDeviceGetClockInfo(SM)", ClockSm, clock_sm_mhz: u32), "sm_mhz", Scale::One), Every::Poll,
        &["clocks.current.sm", "clocks.sm"], Shown::Int, Some("MHz"), gauge("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).")),
    row("clock_mem_mhz", Unit::Mhz, base(call!("nvmlDeviceGetClockInfo(MEM)", ClockMem, clock_mem_mhz: u32), "mem_mhz", Scale::One), Every::Poll,
        &["clocks.current.memory", "clocks.mem"], Shown::Int, Some("MHz"), gauge("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).")),
    row("clock_graphics_mhz", Unit::Mhz, state(call!("nvmlDeviceGetClockInfo(GRAPHICS)", ClockGraphics, clock_graphics_mhz: u32), "graphics_mhz", Scale::One), Every::Poll,
        &["clocks.current.graphics", "clocks.gr"], Shown::Int, Some("MHz"), None),
    row("pstate", Unit::Pstate, base(call!("nvmlDeviceGetPerformanceState", Pstate, pstate: u32), "pstate", Scale::One), Every::Poll,
        &["pstate"], Shown::Pstate, None, None),
    row("fan_speed_pct", Unit::Pct, base(call!("nvmlDeviceGetFanSpeed_v2", FanSpeed, fan_speed_pct: u32), "fan_pct", Scale::One), Every::Poll,
        &["fan.speed"], Shown::Int, Some("%"), None),
    row("clocks_event_reasons", Unit::Bitmask,
        base(call!("nvmlDeviceGetCurrentClocksThrottleReasons", ClocksEventReasons, clocks_event_reasons: u64), "reasons", Scale::One), Every::Poll,
        &["clocks_event_reasons.active", "clocks_throttle_reasons.active"], Shown::Hex16, None, None),
    row("pcie_tx_bytes_per_s", Unit::BytePerS, state(call!("nvmlDeviceGetPcieThroughput(TX)", PcieThroughput, pcie_tx_bytes_per_s: u64), "pcie_tx_kib_s", Scale::Kib),
        Every::Pcie, &[], Shown::Int, None, None),
    row("pcie_rx_bytes_per_s", Unit::BytePerS, state(call!("nvmlDeviceGetPcieThroughput(RX)", PcieThroughput, pcie_rx_bytes_per_s: u64), "pcie_rx_kib_s", Scale::Kib),
        Every::Pcie, &[], Shown::Int, None, None),
    row("pcie_link_gen", Unit::Count, state(call!("nvmlDeviceGetCurrPcieLinkGeneration", PcieLink, pcie_link_gen: u32), "pcie_link_gen", Scale::One), Every::Settings,
        &["pcie.link.gen.current"], Shown::Int, None, None),
    // The GPU's side of the link: gpulse reads one generation for both.
    row("pcie_link_gen_gpu", Unit::Count, unkept(call!("nvmlDeviceGetCurrPcieLinkGeneration", PcieLink, pcie_link_gen: u32)), Every::Settings,
        &["pcie.link.gen.gpucurrent"], Shown::Int, None, None),
    row("pcie_link_width", Unit::Count, state(call!("nvmlDeviceGetCurrPcieLinkWidth", PcieLink, pcie_link_width: u32), "pcie_link_width", Scale::One), Every::Settings,
        &["pcie.link.width.current"], Shown::Int, None, None),
    row("ecc_uncorrected_volatile", Unit::Count,
        state(call!("nvmlDeviceGetTotalEccErrors(UNCORRECTED, VOLATILE)", EccErrors, ecc_uncorrected_volatile: u64), "ecc_uncorrected", Scale::One), Every::Settings,
        &["ecc.errors.uncorrected.volatile.total"], Shown::Int, None, None),
    row("ecc_corrected_volatile", Unit::Count,
        state(call!("nvmlDeviceGetTotalEccErrors(CORRECTED, VOLATILE)", EccErrors, ecc_corrected_volatile: u64), "ecc_corrected", Scale::One), Every::Settings,
        &["ecc.errors.corrected.volatile.total"], Shown::Int, None, None),
];

/// The [`HAND_READ`] row keyed `key`. Evaluated in a constant, a key that no row has is a
/// compile error, so code that names a row by its key cannot misspell it.
pub const fn hand_read(key: &str) -> &'static TableMetric {
    let mut i = 0;
    while i < HAND_READ.len() {
        if same(HAND_READ[i].key, key) {
            return &HAND_READ[i];
        }
        i += 1;
    }
    panic!("no hand-read metric has this key");
}

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_row_is_found_by_its_key() {
        assert_eq!(super::hand_read("power_draw_mw").key, "power_draw_mw");
        assert!(std::panic::catch_unwind(|| super::hand_read("power_draw_w")).is_err());
    }
}
