//! The GPM metrics gpulse reads, defined once: NVML's id, the name in traces and scenarios, the
//! recording's column, the `--query-gpu` name, dcgm-exporter's series where it has one, the
//! unit, and the field of [`GpmMetrics`] each fills. The sampler, the recording, the trace
//! reader, the query language, `/metrics` and the stand-in library all walk this table, so a
//! metric is one row (and one field of [`GpmMetrics`]), and no two readers disagree on order.

use crate::{GpmMetrics, GpuSample};

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

    /// The unit `--query-gpu` shows.
    pub fn smi_unit(self) -> &'static str {
        match self {
            Self::Pct => "%",
            Self::MibPerS => "MiB/s",
        }
    }
}

/// dcgm-exporter's series for a GPM metric: a gauge, a percentage as DCGM's ratio and a rate in
/// bytes per second.
#[derive(Debug, Clone, Copy)]
pub struct GpmDcgm {
    pub name: &'static str,
    /// The help text as dcgm-exporter's `etc/dcp-metrics-included.csv` writes it.
    pub help: &'static str,
    /// On in dcgm-exporter's list (the commented-out ones follow them on `/metrics`).
    pub default: bool,
    /// What to serve when GPM has no reading (PCIe: NVML's sampled counter), bytes per second.
    pub fallback: Option<fn(&GpuSample) -> Option<f64>>,
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
    /// The recording's `gpm_samples` column: per-mille for a percentage, KiB/s for a rate.
    pub column: &'static str,
    /// The `--query-gpu` name (`gpm.*`).
    pub smi: &'static str,
    pub dcgm: Option<GpmDcgm>,
    pub unit: GpmUnit,
    pub get: fn(&GpmMetrics) -> Option<f64>,
    pub set: fn(&mut GpmMetrics, Option<f64>),
}

impl GpmField {
    /// The row of NVML id `id`.
    pub fn by_id(id: u32) -> Option<&'static GpmField> {
        GPM_FIELDS.iter().find(|f| f.nvml_id == id)
    }
}

macro_rules! field {
    ($id:expr, $trace:literal, $key:literal, $col:literal, $smi:literal, $dcgm:expr, $unit:ident, $f:ident) => {
        GpmField {
            nvml_id: $id,
            trace_column: $trace,
            scenario_key: $key,
            column: $col,
            smi: $smi,
            dcgm: $dcgm,
            unit: GpmUnit::$unit,
            get: |m| m.$f,
            set: |m, v| m.$f = v,
        }
    };
}

/// dcgm-exporter's series, on by default (`true`) or shipped commented out.
const fn dcgm(name: &'static str, help: &'static str, default: bool) -> Option<GpmDcgm> {
    Some(GpmDcgm { name, help, default, fallback: None })
}

const PCIE_TX: GpmDcgm = GpmDcgm {
    name: "DCGM_FI_PROF_PCIE_TX_BYTES",
    help: "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
    default: true,
    fallback: Some(|g| g.pcie_tx_bytes_per_s.map(|v| v as f64)),
};
const PCIE_RX: GpmDcgm = GpmDcgm {
    name: "DCGM_FI_PROF_PCIE_RX_BYTES",
    help: "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
    default: true,
    fallback: Some(|g| g.pcie_rx_bytes_per_s.map(|v| v as f64)),
};

/// Every metric, in the order of the recording's `gpm_samples` columns: a new metric is a row
/// at the end (a reader of an older file finds its column missing and the metric absent).
/// dcgm-exporter's lists (`etc/dcp-metrics-included.csv`) have no series for the HMMA, IMMA,
/// DFMA and integer pipes, so those have none here.
#[rustfmt::skip]
pub const GPM_FIELDS: [GpmField; 16] = [
    field!(1, "GraphicsUtil", "graphics", "graphics_pm", "gpm.graphics_active",
        dcgm("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.", true), Pct, graphics_util_pct),
    field!(2, "SmUtil", "sm", "sm_pm", "gpm.sm_active",
        dcgm("DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned.", false), Pct, sm_util_pct),
    field!(3, "SmOccupancy", "occupancy", "occupancy_pm", "gpm.sm_occupancy",
        dcgm("DCGM_FI_PROF_SM_OCCUPANCY", "The ratio of number of warps resident on an SM.", false), Pct, sm_occupancy_pct),
    field!(5, "AnyTensorUtil", "any_tensor", "tensor_pm", "gpm.tensor_active",
        dcgm("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active.", true), Pct, any_tensor_util_pct),
    field!(7, "HmmaTensorUtil", "hmma", "hmma_pm", "gpm.hmma_active", None, Pct, hmma_tensor_util_pct),
    field!(10, "DramBwUtil", "dram", "dram_pm", "gpm.dram_active",
        dcgm("DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the device memory interface is active sending or receiving data.", true), Pct, dram_bw_util_pct),
    field!(11, "Fp64Util", "fp64", "fp64_pm", "gpm.fp64_active",
        dcgm("DCGM_FI_PROF_PIPE_FP64_ACTIVE", "Ratio of cycles the fp64 pipes are active.", false), Pct, fp64_util_pct),
    field!(12, "Fp32Util", "fp32", "fp32_pm", "gpm.fp32_active",
        dcgm("DCGM_FI_PROF_PIPE_FP32_ACTIVE", "Ratio of cycles the fp32 pipes are active.", false), Pct, fp32_util_pct),
    field!(13, "Fp16Util", "fp16", "fp16_pm", "gpm.fp16_active",
        dcgm("DCGM_FI_PROF_PIPE_FP16_ACTIVE", "Ratio of cycles the fp16 pipes are active.", false), Pct, fp16_util_pct),
    field!(20, "PcieTxPerSec", "pcie_tx", "pcie_tx_kib_s", "gpm.pcie.tx", Some(PCIE_TX), MibPerS, pcie_tx_bytes_per_s),
    field!(21, "PcieRxPerSec", "pcie_rx", "pcie_rx_kib_s", "gpm.pcie.rx", Some(PCIE_RX), MibPerS, pcie_rx_bytes_per_s),
    field!(61, "NvlinkTotalTxPerSec", "nvlink_tx", "nvlink_tx_kib_s", "gpm.nvlink.tx", None, MibPerS, nvlink_tx_bytes_per_s),
    field!(60, "NvlinkTotalRxPerSec", "nvlink_rx", "nvlink_rx_kib_s", "gpm.nvlink.rx", None, MibPerS, nvlink_rx_bytes_per_s),
    field!(9, "ImmaTensorUtil", "imma", "imma_pm", "gpm.imma_active", None, Pct, imma_tensor_util_pct),
    field!(6, "DfmaTensorUtil", "dfma", "dfma_pm", "gpm.dfma_active", None, Pct, dfma_tensor_util_pct),
    field!(4, "IntegerUtil", "integer", "integer_pm", "gpm.integer_active", None, Pct, integer_util_pct),
];

/// The metrics a recording asks for: what the diagnosis, the report, `status` and the snapshot
/// API read (SM activity and occupancy, tensor, DRAM, PCIe, NVLink), and every math pipe the
/// roofline estimate reads (HMMA, IMMA, DFMA, FP64, FP32, FP16). Closing a window costs
/// milliseconds inside the driver; asking for more metrics of the same window costs about a
/// microsecond each (BENCHMARKS.md).
pub const GPM_RECORDED: [u32; 14] = [2, 3, 5, 6, 7, 9, 10, 11, 12, 13, 20, 21, 60, 61];

/// The metrics `serve` asks for: the recorded ones and dcgm-exporter's graphics.
pub const GPM_SERVED: [u32; 15] = [1, 2, 3, 5, 6, 7, 9, 10, 11, 12, 13, 20, 21, 60, 61];

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
        let names: [fn(&GpmField) -> &'static str; 4] =
            [|f| f.trace_column, |f| f.scenario_key, |f| f.column, |f| f.smi];
        for name in names {
            let mut names: Vec<&str> = GPM_FIELDS.iter().map(name).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), GPM_FIELDS.len(), "each name once: {names:?}");
        }
        assert!(GPM_FIELDS.iter().all(|f| f.smi.starts_with("gpm.")), "gpulse's own query names");
        assert!(GPM_FIELDS.iter().all(|f| GpmField::by_id(f.nvml_id).is_some_and(|g| g.column == f.column)));
        assert_eq!(GpmUnit::MibPerS.from_nvml(1.0), 1048576.0);
        assert_eq!(GpmUnit::MibPerS.to_nvml(GpmUnit::MibPerS.from_nvml(3.0)), 3.0);
        for set in [&GPM_RECORDED[..], &GPM_SERVED, &GPM_STATUS] {
            assert!(set.iter().all(|id| ids.contains(id)), "{set:?} names the table's metrics");
        }
        assert!(GPM_STATUS.iter().all(|id| GPM_RECORDED.contains(id)), "a recording shows what status does");
        assert!(GPM_RECORDED.iter().all(|id| GPM_SERVED.contains(id)), "serve records what a recording does");
    }
}
