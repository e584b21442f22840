//! One reading of one GPU.

use serde::{Deserialize, Serialize};

use crate::ProcessSample;

/// Whether the device answered at all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceStatus {
    /// The device answered; individual fields may still be `None`.
    #[default]
    Ok,
    /// NVML reported `GPU_IS_LOST`: the GPU fell off the bus. Every field is `None`.
    Lost,
}

/// Why a field is `None`. Renderers that must match nvidia-smi need the distinction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Absence {
    /// NVML answered `NOT_SUPPORTED`: the device does not have this. nvidia-smi: `[Not Supported]`.
    NotSupported,
    /// NVML answered `NO_PERMISSION`. nvidia-smi: `[Insufficient Permissions]`.
    NoPermission,
    /// The GPU is lost. nvidia-smi: `[GPU is lost]`.
    GpuLost,
    /// Any other failure, or a value that does not apply. nvidia-smi: `[N/A]`.
    NotAvailable,
    /// NVML failed in an unexpected way. nvidia-smi: `[Unknown Error]`.
    Unknown,
}

gpulse_base::words! {
    /// The GPU fields a source reads, named so that an absence can say which one it concerns.
    /// Each word is its serde name.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Metric {
        Utilization => "utilization",
        /// NVML's high-rate utilization buffer (`nvmlDeviceGetSamples`).
        UtilSamples => "util_samples",
        Memory => "memory",
        TemperatureGpu => "temperature_gpu",
        TemperatureMemory => "temperature_memory",
        PowerDraw => "power_draw",
        PowerLimit => "power_limit",
        EnforcedPowerLimit => "enforced_power_limit",
        Energy => "energy",
        ClockSm => "clock_sm",
        ClockMem => "clock_mem",
        ClockGraphics => "clock_graphics",
        Pstate => "pstate",
        FanSpeed => "fan_speed",
        ClocksEventReasons => "clocks_event_reasons",
        PcieThroughput => "pcie_throughput",
        PcieLink => "pcie_link",
        EccErrors => "ecc_errors",
        Processes => "processes",
        Gpm => "gpm",
        /// Every NVLink link's state and error counters (`GpuSample::nvlinks`).
        NvLink => "nv_link",
        /// The metric table's rows (`crate::TABLE`); each row's absence is in its reading.
        Table => "table",
    }
}

/// One reading of NVML's high-rate utilization buffer (`nvmlDeviceGetSamples`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UtilSample {
    /// When the driver took it, in microseconds since the Unix epoch.
    pub timestamp_us: i64,
    /// GPU utilization over the driver's sampling period, in percent.
    pub util_pct: u32,
}

/// GPM performance counters over one interval (Hopper and newer; `nvmlGpmMetricsGet`).
/// Percentages are 0–100 over the interval; rates are per second.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpmMetrics {
    /// Length of the interval the metrics cover, in milliseconds.
    pub interval_ms: f64,
    /// Share of time the graphics engine was busy (`NVML_GPM_METRIC_GRAPHICS_UTIL`).
    pub graphics_util_pct: Option<f64>,
    /// Share of SMs busy, averaged over time (`NVML_GPM_METRIC_SM_UTIL`): what GPU-Util is not.
    pub sm_util_pct: Option<f64>,
    /// Resident warps as a share of the maximum (`NVML_GPM_METRIC_SM_OCCUPANCY`).
    pub sm_occupancy_pct: Option<f64>,
    /// Tensor-core activity of any kind (`NVML_GPM_METRIC_ANY_TENSOR_UTIL`).
    pub any_tensor_util_pct: Option<f64>,
    /// Half-precision tensor-core (HMMA) activity (`NVML_GPM_METRIC_HMMA_TENSOR_UTIL`).
    pub hmma_tensor_util_pct: Option<f64>,
    /// DRAM bandwidth used as a share of peak (`NVML_GPM_METRIC_DRAM_BW_UTIL`).
    pub dram_bw_util_pct: Option<f64>,
    /// FP64 pipe activity (`NVML_GPM_METRIC_FP64_UTIL`).
    pub fp64_util_pct: Option<f64>,
    /// FP32 pipe activity (`NVML_GPM_METRIC_FP32_UTIL`).
    pub fp32_util_pct: Option<f64>,
    /// FP16 pipe activity (`NVML_GPM_METRIC_FP16_UTIL`).
    pub fp16_util_pct: Option<f64>,
    /// PCIe traffic from the GPU, bytes per second (`NVML_GPM_METRIC_PCIE_TX_PER_SEC`).
    pub pcie_tx_bytes_per_s: Option<f64>,
    /// PCIe traffic to the GPU, bytes per second (`NVML_GPM_METRIC_PCIE_RX_PER_SEC`).
    pub pcie_rx_bytes_per_s: Option<f64>,
    /// NVLink traffic from the GPU over all links, bytes per second (`NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC`).
    pub nvlink_tx_bytes_per_s: Option<f64>,
    /// NVLink traffic to the GPU over all links, bytes per second (`NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC`).
    pub nvlink_rx_bytes_per_s: Option<f64>,
    /// Integer-tensor-core (IMMA: INT8) activity (`NVML_GPM_METRIC_IMMA_TENSOR_UTIL`).
    pub imma_tensor_util_pct: Option<f64>,
    /// Double-precision tensor-core (DFMA) activity (`NVML_GPM_METRIC_DFMA_TENSOR_UTIL`).
    pub dfma_tensor_util_pct: Option<f64>,
    /// Integer pipe activity (`NVML_GPM_METRIC_INTEGER_UTIL`).
    pub integer_util_pct: Option<f64>,
}

/// Everything read from one GPU in one poll. Every reading is optional: `None` means the source
/// could not give it, and `absent` says why when the source knows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    /// NVML index of the device this sample belongs to.
    pub gpu_index: u32,
    /// Whether the device answered.
    pub status: DeviceStatus,
    /// GPU utilization over the driver's last period, percent (`nvmlDeviceGetUtilizationRates`; `utilization.gpu`).
    pub util_gpu_pct: Option<u32>,
    /// Memory-controller utilization, percent (`nvmlDeviceGetUtilizationRates`; `utilization.memory`).
    pub util_mem_pct: Option<u32>,
    /// The driver's high-rate GPU-utilization readings since the previous poll (`nvmlDeviceGetSamples`).
    pub util_gpu_samples: Vec<UtilSample>,
    /// Memory used, bytes (`nvmlDeviceGetMemoryInfo_v2`; `memory.used`).
    pub memory_used_bytes: Option<u64>,
    /// Memory free, bytes (`memory.free`).
    pub memory_free_bytes: Option<u64>,
    /// Memory the driver reserves for itself, bytes (`memory.reserved`).
    pub memory_reserved_bytes: Option<u64>,
    /// Total memory, bytes (`memory.total`).
    pub memory_total_bytes: Option<u64>,
    /// Core temperature, °C (`nvmlDeviceGetTemperature`; `temperature.gpu`).
    pub temperature_gpu_c: Option<u32>,
    /// HBM temperature, °C (field `NVML_FI_DEV_MEMORY_TEMP`; `temperature.memory`).
    pub temperature_memory_c: Option<u32>,
    /// Board power draw, milliwatts (`nvmlDeviceGetPowerUsage`; `power.draw`).
    pub power_draw_mw: Option<u32>,
    /// Power-management limit, milliwatts (`nvmlDeviceGetPowerManagementLimit`; `power.limit`).
    pub power_limit_mw: Option<u32>,
    /// Limit actually enforced, milliwatts (`nvmlDeviceGetEnforcedPowerLimit`; `enforced.power.limit`).
    pub enforced_power_limit_mw: Option<u32>,
    /// Energy used since the driver loaded, millijoules (`nvmlDeviceGetTotalEnergyConsumption`).
    pub energy_mj: Option<u64>,
    /// SM clock, MHz (`nvmlDeviceGetClockInfo(SM)`; `clocks.sm`).
    pub clock_sm_mhz: Option<u32>,
    /// Memory clock, MHz (`nvmlDeviceGetClockInfo(MEM)`; `clocks.mem`).
    pub clock_mem_mhz: Option<u32>,
    /// Graphics clock, MHz (`nvmlDeviceGetClockInfo(GRAPHICS)`; `clocks.gr`).
    pub clock_graphics_mhz: Option<u32>,
    /// Performance state, 0 (P0, fastest) to 15 (`nvmlDeviceGetPerformanceState`; `pstate`).
    pub pstate: Option<u32>,
    /// Fan speed, percent of maximum (`nvmlDeviceGetFanSpeed_v2`; `fan.speed`).
    pub fan_speed_pct: Option<u32>,
    /// Active clocks-event reasons, NVML bitmask (`nvmlDeviceGetCurrentClocksThrottleReasons`, the
    /// older name of `…EventReasons`; `clocks_event_reasons.active`).
    pub clocks_event_reasons: Option<u64>,
    /// PCIe bytes per second sent by the GPU (`nvmlDeviceGetPcieThroughput(TX)`, or GPM).
    pub pcie_tx_bytes_per_s: Option<u64>,
    /// PCIe bytes per second received by the GPU (`nvmlDeviceGetPcieThroughput(RX)`, or GPM).
    pub pcie_rx_bytes_per_s: Option<u64>,
    /// Current PCIe link generation (`nvmlDeviceGetCurrPcieLinkGeneration`; `pcie.link.gen.current`).
    pub pcie_link_gen: Option<u32>,
    /// Current PCIe link width in lanes (`nvmlDeviceGetCurrPcieLinkWidth`; `pcie.link.width.current`).
    pub pcie_link_width: Option<u32>,
    /// Uncorrected ECC errors since the driver loaded (`nvmlDeviceGetTotalEccErrors`; `ecc.errors.uncorrected.volatile.total`).
    pub ecc_uncorrected_volatile: Option<u64>,
    /// Corrected ECC errors since the driver loaded (`ecc.errors.corrected.volatile.total`).
    pub ecc_corrected_volatile: Option<u64>,
    /// The metric table's readings (`crate::TABLE`), by key; empty when none was asked for.
    #[serde(default, skip_serializing_if = "crate::TableReadings::has_no_value")]
    pub table: crate::TableReadings,
    /// Each NVLink link the GPU has, read with the settings; empty when it has none or they were
    /// not read (`absent` says which).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nvlinks: Vec<crate::NvLink>,
    /// The Xids the driver raised since the previous sample (NVML's events).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub xids: Vec<crate::Xid>,
    /// The last Xid seen since the source started watching (dcgm-exporter's
    /// `DCGM_FI_DEV_XID_ERRORS`): 0 while none came; `None` when the GPU's events are not watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xid_last: Option<u64>,
    /// GPM counters over the interval ending at this sample; `None` off Hopper or with `--no-gpm`.
    pub gpm: Option<Box<GpmMetrics>>,
    /// Compute processes holding a context on this GPU.
    pub processes: Vec<ProcessSample>,
    /// The one container or Slurm job this GPU is assigned to: the kubelet's pod-resources answer
    /// for its UUID, or the job every process on it runs in. `None` when shared or not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assigned: Option<crate::Workload>,
    /// Why fields are `None`, where the source knows.
    pub absent: Absences,
    /// The probes a query asked for (`NvmlOptions::probes`), in its order; never recorded.
    #[serde(skip)]
    pub probes: Vec<(crate::Probe, crate::ProbeResult)>,
}

/// Why fields are absent, by metric. A sample rarely lacks more than a few, so they are kept
/// inline: no allocation per sample.
pub type Absences = smallvec::SmallVec<[(Metric, Absence); 4]>;

impl GpuSample {
    /// Why `metric` is missing, if the source said.
    pub fn absence(&self, metric: Metric) -> Option<Absence> {
        if self.status == DeviceStatus::Lost {
            return Some(Absence::GpuLost);
        }
        self.absent.iter().find(|a| a.0 == metric).map(|a| a.1)
    }

    /// Board power draw, watts (`power.draw`).
    pub fn power_draw_w(&self) -> Option<f64> {
        self.power_draw_mw.map(crate::mw_to_w)
    }

    /// Power-management limit, watts (`power.limit`).
    pub fn power_limit_w(&self) -> Option<f64> {
        self.power_limit_mw.map(crate::mw_to_w)
    }

    /// The power limit in force, milliwatts: the enforced one, else the management limit.
    pub fn power_cap_mw(&self) -> Option<u32> {
        self.enforced_power_limit_mw.or(self.power_limit_mw)
    }

    /// The power limit in force, watts.
    pub fn power_cap_w(&self) -> Option<f64> {
        self.power_cap_mw().map(crate::mw_to_w)
    }

    /// Memory used, GiB.
    pub fn memory_used_gib(&self) -> Option<f64> {
        self.memory_used_bytes.map(|b| crate::to_gib(b as f64))
    }

    /// Total memory, GiB.
    pub fn memory_total_gib(&self) -> Option<f64> {
        self.memory_total_bytes.map(|b| crate::to_gib(b as f64))
    }

    /// SM activity in percent: GPM's SM util when the source has it.
    pub fn sm_active_pct(&self) -> Option<f64> {
        self.gpm.as_ref().and_then(|g| g.sm_util_pct)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_metric_word_is_its_serde_name() {
        for m in Metric::ALL {
            assert_eq!(serde_json::to_value(m).unwrap(), m.as_str());
            assert_eq!(serde_json::from_value::<Metric>(m.as_str().into()).unwrap(), m);
        }
    }
}
