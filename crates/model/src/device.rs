//! Static facts about one GPU: read once when a source opens.

use serde::{Deserialize, Serialize};

/// What does not change while a device is watched.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// NVML index (`nvmlDeviceGetIndex`; nvidia-smi `index`).
    pub index: u32,
    /// Globally unique id, `GPU-…` (`nvmlDeviceGetUUID`; nvidia-smi `uuid`).
    pub uuid: String,
    /// Product name (`nvmlDeviceGetName`; nvidia-smi `name`).
    pub name: String,
    /// PCI bus id as `domain:bus:device.function` (`nvmlDeviceGetPciInfo`; nvidia-smi `pci.bus_id`).
    pub pci_bus_id: Option<String>,
    /// Index as CUDA numbers it (`cuda:N`), when `CUDA_VISIBLE_DEVICES` lets us tell.
    pub cuda_index: Option<u32>,
    /// Total framebuffer memory in bytes (`nvmlDeviceGetMemoryInfo_v2`; nvidia-smi `memory.total`).
    pub memory_total_bytes: Option<u64>,
    /// Power-management limit in milliwatts (`nvmlDeviceGetPowerManagementLimit`; nvidia-smi `power.limit`).
    pub power_limit_mw: Option<u32>,
    /// Maximum SM clock in MHz (`nvmlDeviceGetMaxClockInfo`; nvidia-smi `clocks.max.sm`).
    pub clock_max_sm_mhz: Option<u32>,
    /// Maximum memory clock in MHz (`nvmlDeviceGetMaxClockInfo`; nvidia-smi `clocks.max.memory`).
    pub clock_max_mem_mhz: Option<u32>,
    /// Clocks-event reasons this device can report, as NVML's bitmask (nvidia-smi `clocks_event_reasons.supported`).
    pub clocks_event_reasons_supported: Option<u64>,
    /// Whether persistence mode is on (`nvmlDeviceGetPersistenceMode`; nvidia-smi `persistence_mode`).
    pub persistence_mode: Option<bool>,
    /// Compute mode as nvidia-smi names it: `Default`, `Exclusive_Process`, `Prohibited`.
    pub compute_mode: Option<String>,
    /// Whether ECC is currently enabled (`nvmlDeviceGetEccMode`; nvidia-smi `ecc.mode.current`).
    pub ecc_enabled: Option<bool>,
    /// Whether the device supports GPM performance counters (Hopper and newer).
    pub gpm_supported: Option<bool>,
    /// Driver version string (`nvmlSystemGetDriverVersion`; nvidia-smi `driver_version`).
    pub driver_version: Option<String>,
    /// CUDA driver API version as `major.minor` (`nvmlSystemGetCudaDriverVersion_v2`).
    pub cuda_version: Option<String>,
}

impl DeviceInfo {
    /// Power-management limit, watts (`power.limit`).
    pub fn power_limit_w(&self) -> Option<f64> {
        self.power_limit_mw.map(crate::mw_to_w)
    }
}
