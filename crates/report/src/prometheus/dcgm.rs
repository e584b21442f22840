//! dcgm-exporter's series (its `etc/default-counters.csv`, plus the profiling ones it ships
//! commented out), read from NVML and GPM instead of a DCGM host engine: the hand-written
//! [`FIELDS`], then every row of the model's metric table that names a dcgm series.

use gpulse_model::{
    Dcgm, DeviceInfo, GPM_FIELDS, GpmDcgm, GpmField, GpmUnit, GpuSample, MIB, Probe, Reading, TABLE, TableMetric,
};

use super::{Exposition, Family, Value, label};

/// One dcgm-exporter field: its name, Prometheus type, help text as dcgm-exporter writes it, and
/// how gpulse reads it.
pub(super) struct Field {
    pub name: &'static str,
    pub kind: &'static str,
    pub help: &'static str,
    read: fn(&GpuSample) -> Option<Value>,
}

fn int(v: Option<impl Into<u64>>) -> Option<Value> {
    v.map(|v| Value::Int(v.into()))
}

/// The NVML reads dcgm-exporter's other fields need, beyond the sampled metrics: what a live
/// source must be asked for (`NvmlOptions::probes`) to serve them.
pub const PROBES: &[Probe] = &[
    Probe::UtilEncoder,
    Probe::UtilDecoder,
    Probe::RemappedCorrectable,
    Probe::RemappedUncorrectable,
    Probe::RemappedFailure,
    Probe::NvlinkThroughput,
];

/// A probe's reading as a number: a count, or a flag as 1 or 0.
fn probed(g: &GpuSample, probe: Probe) -> Option<Value> {
    match g.probes.iter().find(|p| p.0 == probe)?.1.as_ref().ok()? {
        Reading::Num(n) => u64::try_from(*n).ok().map(Value::Int),
        Reading::Flag(f) => Some(Value::Int(u64::from(*f))),
        Reading::Text(_) => None,
    }
}

fn mib(bytes: Option<u64>) -> Option<Value> {
    bytes.map(|b| Value::Int(b / MIB))
}

pub(super) const FIELDS: &[Field] = &[
    Field {
        name: "DCGM_FI_DEV_SM_CLOCK",
        kind: "gauge",
        help: "SM clock frequency (in MHz).",
        read: |g| int(g.clock_sm_mhz),
    },
    Field {
        name: "DCGM_FI_DEV_MEM_CLOCK",
        kind: "gauge",
        help: "Memory clock frequency (in MHz).",
        read: |g| int(g.clock_mem_mhz),
    },
    Field {
        name: "DCGM_FI_DEV_MEMORY_TEMP",
        kind: "gauge",
        help: "Memory temperature (in C).",
        read: |g| int(g.temperature_memory_c),
    },
    Field {
        name: "DCGM_FI_DEV_GPU_TEMP",
        kind: "gauge",
        help: "GPU temperature (in C).",
        read: |g| int(g.temperature_gpu_c),
    },
    Field {
        name: "DCGM_FI_DEV_POWER_USAGE",
        kind: "gauge",
        help: "Power draw (in W).",
        read: |g| g.power_draw_mw.map(|mw| Value::Float(f64::from(mw) / 1000.0)),
    },
    Field {
        name: "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        kind: "counter",
        help: "Total energy consumption since boot (in mJ).",
        read: |g| int(g.energy_mj),
    },
    Field {
        name: "DCGM_FI_DEV_GPU_UTIL",
        kind: "gauge",
        help: "GPU utilization (in %).",
        read: |g| int(g.util_gpu_pct),
    },
    Field {
        name: "DCGM_FI_DEV_MEM_COPY_UTIL",
        kind: "gauge",
        help: "Memory utilization (in %).",
        read: |g| int(g.util_mem_pct),
    },
    Field {
        name: "DCGM_FI_DEV_ENC_UTIL",
        kind: "gauge",
        help: "Encoder utilization (in %).",
        read: |g| probed(g, Probe::UtilEncoder),
    },
    Field {
        name: "DCGM_FI_DEV_DEC_UTIL",
        kind: "gauge",
        help: "Decoder utilization (in %).",
        read: |g| probed(g, Probe::UtilDecoder),
    },
    Field {
        name: "DCGM_FI_DEV_FB_FREE",
        kind: "gauge",
        help: "Framebuffer memory free (in MiB).",
        read: |g| mib(g.memory_free_bytes),
    },
    Field {
        name: "DCGM_FI_DEV_FB_USED",
        kind: "gauge",
        help: "Framebuffer memory used (in MiB).",
        read: |g| mib(g.memory_used_bytes),
    },
    Field {
        name: "DCGM_FI_DEV_FB_RESERVED",
        kind: "gauge",
        help: "Framebuffer memory reserved (in MiB).",
        read: |g| mib(g.memory_reserved_bytes),
    },
    Field {
        name: "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        kind: "counter",
        help: "Number of remapped rows for uncorrectable errors",
        read: |g| probed(g, Probe::RemappedUncorrectable),
    },
    Field {
        name: "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        kind: "counter",
        help: "Number of remapped rows for correctable errors",
        read: |g| probed(g, Probe::RemappedCorrectable),
    },
    Field {
        name: "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        kind: "gauge",
        help: "Whether remapping of rows has failed",
        read: |g| probed(g, Probe::RemappedFailure),
    },
    Field {
        name: "DCGM_FI_DEV_XID_ERRORS",
        kind: "gauge",
        help: "Value of the last XID error encountered.",
        read: |g| int(g.xid_last),
    },
    Field {
        name: "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        kind: "counter",
        help: "Total number of NVLink bandwidth counters for all lanes.",
        read: |g| probed(g, Probe::NvlinkThroughput),
    },
];

/// The GPM metrics with a dcgm-exporter series: those on in its list first, then those it ships
/// commented out, each in the table's order.
pub(super) fn gpm_series() -> impl Iterator<Item = (&'static GpmField, &'static GpmDcgm)> {
    let with = |default: bool| {
        GPM_FIELDS.iter().filter_map(move |f| f.dcgm.as_ref().filter(|d| d.default == default).map(|d| (f, d)))
    };
    with(true).chain(with(false))
}

/// A GPM percentage as DCGM's ratio, a rate in bytes per second; a rate GPM did not give is
/// NVML's counter where the row names one.
fn gpm_value(g: &GpuSample, f: &GpmField, d: &GpmDcgm) -> Option<f64> {
    let read = g.gpm.as_deref().and_then(|m| (f.get)(m));
    match f.unit {
        GpmUnit::Pct => read.map(|p| p / 100.0),
        GpmUnit::MibPerS => read.map(|v| v.max(0.0)).or_else(|| d.fallback.and_then(|fb| fb(g))),
    }
}

/// dcgm-exporter's labels, in its order, then the container or Slurm job the GPU is assigned
/// to (its `pod`, `namespace`, `container`, `hpc_job`).
fn labels(d: Option<&DeviceInfo>, g: &GpuSample, e: &Exposition) -> String {
    let index = g.gpu_index;
    let mut l = vec![label("gpu", &index.to_string())];
    if let Some(d) = d {
        l.push(label("UUID", &d.uuid));
        if let Some(bus) = &d.pci_bus_id {
            l.push(label("pci_bus_id", bus));
        }
    }
    l.push(label("device", &format!("nvidia{index}")));
    if let Some(d) = d {
        l.push(label("modelName", &d.name));
    }
    l.push(label(e.host_label, e.hostname));
    if let Some(v) = d.and_then(|d| d.driver_version.as_deref()) {
        l.push(label("DCGM_FI_DRIVER_VERSION", v));
    }
    if let Some(w) = &g.assigned {
        l.extend(super::workload_labels(w, false));
    }
    l.join(",")
}

pub(super) fn render(e: &Exposition, out: &mut String) {
    let Some(snap) = &e.poll.snapshot else { return };
    let labelled: Vec<(String, &GpuSample)> =
        snap.gpus.iter().map(|g| (labels(e.devices.iter().find(|d| d.index == g.gpu_index), g, e), g)).collect();
    for f in FIELDS {
        let mut family = Family::new(out, f.name, f.kind, f.help);
        for (l, g) in &labelled {
            if let Some(v) = (f.read)(g) {
                family.sample(l, v);
            }
        }
    }
    for (f, d) in gpm_series() {
        let mut family = Family::new(out, d.name, "gauge", d.help);
        for (l, g) in &labelled {
            if let Some(v) = gpm_value(g, f, d) {
                family.sample(l, Value::Float(v));
            }
        }
    }
    for (m, d) in table_series() {
        let mut family = Family::new(out, d.name, d.kind.as_str(), d.help);
        for (l, g) in &labelled {
            // A negative count is not one dcgm-exporter could print: left out.
            if let Some(v) = g.table.value(m.key).and_then(|v| u64::try_from(v).ok()) {
                family.sample(l, Value::Int(v));
            }
        }
    }
}

/// The metric table's rows that dcgm-exporter has a series for.
pub(super) fn table_series() -> impl Iterator<Item = (&'static TableMetric, Dcgm)> {
    TABLE.iter().filter_map(|m| Some((m, m.dcgm?)))
}
