//! The GPM metrics gpulse reads, defined once: NVML's id, the name in traces and scenarios, the
//! unit, and the field of [`GpmMetrics`] each fills. The sampler, the recording, the trace
//! reader and the stand-in library all walk this table, so no two of them can disagree on order.

use crate::GpmMetrics;

/// How NVML reports a metric, and how gpulse keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpmUnit {
    /// A percentage, kept as is.
    Pct,
    /// NVML's MiB per second, kept in bytes per second.
    MibPerS,
}

impl GpmUnit {
    /// NVML's value in gpulse's unit.
    pub fn from_nvml(self, v: f64) -> f64 {
        match self {
            Self::Pct => v,
            Self::MibPerS => v * crate::MIB as f64,
        }
    }

    /// gpulse's value in NVML's unit.
    pub fn to_nvml(self, v: f64) -> f64 {
        match self {
            Self::Pct => v,
            Self::MibPerS => v / crate::MIB as f64,
        }
    }
}

/// One metric.
#[derive(Debug, Clone, Copy)]
pub struct GpmField {
    /// `NVML_GPM_METRIC_*`.
    pub nvml_id: u32,
    /// The column of gpulse's per-poll traces (the reference `gpm_*.csv`): NVML's name.
    pub trace_column: &'static str,
    /// The key of a stand-in scenario's `gpm` object.
    pub scenario_key: &'static str,
    pub unit: GpmUnit,
    pub get: fn(&GpmMetrics) -> Option<f64>,
    pub set: fn(&mut GpmMetrics, Option<f64>),
}

macro_rules! field {
    ($id:expr, $trace:literal, $key:literal, $unit:ident, $f:ident) => {
        GpmField {
            nvml_id: $id,
            trace_column: $trace,
            scenario_key: $key,
            unit: GpmUnit::$unit,
            get: |m| m.$f,
            set: |m, v| m.$f = v,
        }
    };
}

/// Every metric, in the order of the recording's `gpm_samples` columns.
pub const GPM_FIELDS: [GpmField; 13] = [
    field!(1, "GraphicsUtil", "graphics", Pct, graphics_util_pct),
    field!(2, "SmUtil", "sm", Pct, sm_util_pct),
    field!(3, "SmOccupancy", "occupancy", Pct, sm_occupancy_pct),
    field!(5, "AnyTensorUtil", "any_tensor", Pct, any_tensor_util_pct),
    field!(7, "HmmaTensorUtil", "hmma", Pct, hmma_tensor_util_pct),
    field!(10, "DramBwUtil", "dram", Pct, dram_bw_util_pct),
    field!(11, "Fp64Util", "fp64", Pct, fp64_util_pct),
    field!(12, "Fp32Util", "fp32", Pct, fp32_util_pct),
    field!(13, "Fp16Util", "fp16", Pct, fp16_util_pct),
    field!(20, "PcieTxPerSec", "pcie_tx", MibPerS, pcie_tx_bytes_per_s),
    field!(21, "PcieRxPerSec", "pcie_rx", MibPerS, pcie_rx_bytes_per_s),
    field!(61, "NvlinkTotalTxPerSec", "nvlink_tx", MibPerS, nvlink_tx_bytes_per_s),
    field!(60, "NvlinkTotalRxPerSec", "nvlink_rx", MibPerS, nvlink_rx_bytes_per_s),
];

/// The metrics a recording asks for: what the diagnosis, the report, `status` and the snapshot
/// API read (SM activity and occupancy, tensor, DRAM, FP32, PCIe, NVLink). Closing a window costs
/// milliseconds inside the driver, which may grow with the metrics asked for (BENCHMARKS.md).
pub const GPM_RECORDED: [u32; 9] = [2, 3, 5, 10, 12, 20, 21, 60, 61];

/// The metrics `serve` asks for: the recorded ones and dcgm-exporter's graphics, FP64 and FP16.
pub const GPM_SERVED: [u32; 12] = [1, 2, 3, 5, 10, 11, 12, 13, 20, 21, 60, 61];

/// The metrics `status` shows.
pub const GPM_STATUS: [u32; 6] = [2, 3, 5, 10, 20, 21];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_reads_back_what_was_set() {
        let mut m = GpmMetrics::default();
        for (i, f) in GPM_FIELDS.iter().enumerate() {
            (f.set)(&mut m, Some(i as f64 + 0.5));
        }
        for (i, f) in GPM_FIELDS.iter().enumerate() {
            assert_eq!((f.get)(&m), Some(i as f64 + 0.5), "{}", f.trace_column);
        }
        let mut ids: Vec<u32> = GPM_FIELDS.iter().map(|f| f.nvml_id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), GPM_FIELDS.len(), "each NVML metric once");
        assert_eq!(GpmUnit::MibPerS.from_nvml(1.0), 1048576.0);
        assert_eq!(GpmUnit::MibPerS.to_nvml(GpmUnit::MibPerS.from_nvml(3.0)), 3.0);
        for set in [&GPM_RECORDED[..], &GPM_SERVED, &GPM_STATUS] {
            assert!(set.iter().all(|id| ids.contains(id)), "{set:?} names the table's metrics");
        }
        assert!(GPM_STATUS.iter().all(|id| GPM_RECORDED.contains(id)), "a recording shows what status does");
        assert!(GPM_RECORDED.iter().all(|id| GPM_SERVED.contains(id)), "serve records what a recording does");
    }
}
