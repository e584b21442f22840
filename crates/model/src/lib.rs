//! gpulse's data model.
//!
//! Everything the samplers produce and everything the renderers consume is defined here, so that
//! sources (live NVML, replayed traces) and consumers (nvidia-smi query output, the status view)
//! never depend on each other. A value a source cannot give is `None`, never 0; units live in
//! field names.

pub mod clocks;
pub mod device;
pub mod event_kind;
pub mod gpm;
pub mod gpu;
pub mod health;
pub mod host;
pub mod meta_key;
pub mod peak;
pub mod probe;
pub mod process;
pub mod run;
pub mod stacks;
pub mod table;
pub mod trace;
pub mod workload;

pub use clocks::ClocksEventReasons;
pub use device::DeviceInfo;
pub use event_kind::EventKind;
pub use gpm::{GPM_FIELDS, GPM_RECORDED, GPM_SERVED, GPM_STATUS, GpmDcgm, GpmField, GpmUnit};
pub use gpu::{Absence, Absences, DeviceStatus, GpmMetrics, GpuSample, Metric, UtilSample};
pub use health::{NvLink, NvrmXid, Xid, parse_nvrm_xid};
pub use host::{GpuProcessClass, HostSample, TreeProcess, TreeSample};
pub use meta_key::MetaKey;
pub use peak::{Arch, DevicePeak, Precision, device_peak};
pub use probe::{EccLocation, Probe, ProbeResult, Reading, SramPart};
pub use process::{ProcessRow, ProcessSample};
pub use run::{Event, Marker, MarkerKind, RunData};
pub use stacks::{
    Gil, KernelState, ProcessRole, PyFrame, Rank, SampledProcess, StackBatch, Stacks, ThreadClock, ThreadSample,
    role_of,
};
pub use table::{
    Call, Column, Dcgm, Every, HAND_READ, Kind, Place, Scale, Shown, Source, TABLE, TableMetric, TableReading,
    TableReadings, Unit, calls_in, columns_in, count_in, hand_read, metrics, table_metric,
};
pub use workload::{Pod, SlurmJob, Workload};

/// One reading of every device a source knows, taken at one moment.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Snapshot {
    /// When the source took the reading, in microseconds since the Unix epoch.
    pub timestamp_us: i64,
    /// One sample per device, in the order of the source's `devices()`.
    pub gpus: Vec<GpuSample>,
}

/// Bytes in one MiB, the unit nvidia-smi reports memory in.
pub const MIB: u64 = 1024 * 1024;

/// Bytes in one GiB, the unit gpulse's own views show memory in.
pub const GIB: u64 = 1 << 30;

/// `bytes` in GiB.
pub fn to_gib(bytes: f64) -> f64 {
    bytes / GIB as f64
}

/// `mw` milliwatts in watts, unrounded: each view rounds or truncates as it prints.
pub fn mw_to_w(mw: impl Into<u64>) -> f64 {
    mw.into() as f64 / 1000.0
}

/// `w` watts in whole milliwatts, rounded: how a trace's or a scenario's watts become NVML's unit.
pub fn w_to_mw(w: f64) -> u32 {
    (w * 1000.0).round() as u32
}

/// A PCIe or NVLink rate for people, in the binary units NVML gives it in (GPM's MiB/s,
/// `nvmlDeviceGetPcieThroughput`'s KiB/s): MiB/s below a GiB/s, GiB/s above. `status`, `top` and
/// the report's chart write it with this, so no two show different numbers for it; findings
/// that hold a rate against a link's decimal speed (GB/s) keep the link's unit.
pub fn rate_text(bytes_per_s: f64) -> String {
    if bytes_per_s < GIB as f64 {
        format!("{:.1} MiB/s", bytes_per_s / MIB as f64)
    } else {
        format!("{:.1} GiB/s", bytes_per_s / GIB as f64)
    }
}

/// One poll of everything a watcher reads: every GPU (when a GPU source is open), the host, and
/// the watched process tree (when one is followed).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Poll {
    pub snapshot: Option<Snapshot>,
    pub host: HostSample,
    pub tree: Option<TreeSample>,
    /// GPUs this poll found lost for the first time.
    pub newly_lost: Vec<u32>,
    /// The watched tree's root is gone (the GPUs and the host were still read: what it left).
    pub root_gone: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_in_nvmls_binary_units() {
        // GPM's PCIE_TX_PER_SEC of 13.6 MiB/s, and a copy at 59 GiB/s.
        assert_eq!(rate_text(13.6 * MIB as f64), "13.6 MiB/s");
        assert_eq!(rate_text(59.0 * GIB as f64), "59.0 GiB/s");
        assert_eq!(rate_text(0.0), "0.0 MiB/s", "a real zero is a zero");
    }

    #[test]
    fn watts_and_milliwatts() {
        assert_eq!(mw_to_w(512_340_u32), 512.34);
        assert_eq!(w_to_mw(512.3404), 512_340);
        assert_eq!(w_to_mw(mw_to_w(u32::MAX)), u32::MAX);
        // `watch` and `status` cut to whole watts: never up.
        assert_eq!(mw_to_w(999_999_u32).trunc(), 999.0);
    }
}
