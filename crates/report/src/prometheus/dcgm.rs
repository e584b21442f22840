//! dcgm-exporter's series (its `etc/default-counters.csv`, plus the profiling ones it ships
//! commented out), read from NVML and GPM instead of a DCGM host engine: the hand-written
//! [`FIELDS`], then every row of the model's metric table that names a dcgm series.

use gpulse_model::{Dcgm, DeviceInfo, GpuSample, MIB, Probe, Reading, TABLE, TableMetric};

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

/// A GPM percentage as DCGM's ratio.
fn ratio(g: &GpuSample, pick: fn(&gpulse_model::GpmMetrics) -> Option<f64>) -> Option<Value> {
    g.gpm.as_deref().and_then(pick).map(|p| Value::Float(p / 100.0))
}

/// The NVML reads dcgm-exporter's other fields need, beyond the sampled metrics: what a live
/// source must be asked for (`NvmlOptions::probes`) to serve them.
pub const PROBES: &[Probe] = &[
    Probe::UtilEncoder,
    Probe::UtilDecoder,
    Probe::RemappedCorrectable,
    Probe::RemappedUncorrectable,
    Probe::RemappedFailure,
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

/// PCIe throughput: GPM's byte counts when there are any, else NVML's sampled counter.
fn pcie(g: &GpuSample, gpm: fn(&gpulse_model::GpmMetrics) -> Option<f64>, nvml: Option<u64>) -> Option<Value> {
    g.gpm.as_deref().and_then(gpm).map(|v| Value::Float(v.max(0.0))).or(nvml.map(|v| Value::Float(v as f64)))
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
        name: "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        kind: "gauge",
        help: "Ratio of time the graphics engine is active.",
        read: |g| ratio(g, |m| m.graphics_util_pct),
    },
    Field {
        name: "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        kind: "gauge",
        help: "Ratio of cycles the tensor (HMMA) pipe is active.",
        read: |g| ratio(g, |m| m.any_tensor_util_pct),
    },
    Field {
        name: "DCGM_FI_PROF_DRAM_ACTIVE",
        kind: "gauge",
        help: "Ratio of cycles the device memory interface is active sending or receiving data.",
        read: |g| ratio(g, |m| m.dram_bw_util_pct),
    },
    Field {
        name: "DCGM_FI_PROF_PCIE_TX_BYTES",
        kind: "gauge",
        help: "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
        read: |g| pcie(g, |m| m.pcie_tx_bytes_per_s, g.pcie_tx_bytes_per_s),
    },
    Field {
        name: "DCGM_FI_PROF_PCIE_RX_BYTES",
        kind: "gauge",
        help: "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
        read: |g| pcie(g, |m| m.pcie_rx_bytes_per_s, g.pcie_rx_bytes_per_s),
    },
    // dcgm-exporter ships these commented out; GPM has them without a host engine.
    Field {
        name: "DCGM_FI_PROF_SM_ACTIVE",
        kind: "gauge",
        help: "The ratio of cycles an SM has at least 1 warp assigned.",
        read: |g| ratio(g, |m| m.sm_util_pct),
    },
    Field {
        name: "DCGM_FI_PROF_SM_OCCUPANCY",
        kind: "gauge",
        help: "The ratio of number of warps resident on an SM.",
        read: |g| ratio(g, |m| m.sm_occupancy_pct),
    },
    Field {
        name: "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
        kind: "gauge",
        help: "Ratio of cycles the fp64 pipes are active.",
        read: |g| ratio(g, |m| m.fp64_util_pct),
    },
    Field {
        name: "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
        kind: "gauge",
        help: "Ratio of cycles the fp32 pipes are active.",
        read: |g| ratio(g, |m| m.fp32_util_pct),
    },
    Field {
        name: "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
        kind: "gauge",
        help: "Ratio of cycles the fp16 pipes are active.",
        read: |g| ratio(g, |m| m.fp16_util_pct),
    },
];

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
