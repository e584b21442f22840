//! dcgm-exporter's series (its `etc/default-counters.csv`, plus the profiling ones it ships
//! commented out), read from NVML and GPM instead of a DCGM host engine: the hand-read metrics'
//! and probes' [`fields`], GPM's, then the field values': every row of the model's metric
//! tables that names a dcgm series.

use gpulse_model::{
    Dcgm, DeviceInfo, GPM_FIELDS, GpmDcgm, GpmField, GpmUnit, GpuSample, HAND_READ, MIB, Probe, Reading, TABLE,
    TableMetric, Unit, hand_read, mw_to_w,
};

use super::{Exposition, Family, Value, label};

/// One dcgm-exporter series: its name, Prometheus type, help text as dcgm-exporter writes it, and
/// how gpulse reads it.
#[derive(Clone, Copy)]
pub(super) struct Field {
    pub name: &'static str,
    pub kind: &'static str,
    pub help: &'static str,
    read: Read,
}

/// Where a series' value comes from.
#[derive(Clone, Copy)]
enum Read {
    /// A hand-read metric of the model's table, in dcgm-exporter's unit.
    Metric(&'static TableMetric),
    /// A probe's reading, or the last Xid.
    Other(fn(&GpuSample) -> Option<Value>),
}

/// A series in the order `/metrics` writes it: a hand-read metric's row (its name, type and help
/// are the row's), or one that no row holds.
enum Series {
    Metric(&'static TableMetric),
    Other(Field),
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

/// A hand-read metric in dcgm-exporter's unit: watts, whole MiB (rounded down), else as kept.
fn metric_value(m: &TableMetric, g: &GpuSample) -> Option<Value> {
    let v = (m.call()?.read)(g)?;
    Some(match m.unit {
        Unit::Milliwatt => Value::Float(mw_to_w(u32::try_from(v).ok()?)),
        Unit::Byte => Value::Int(v / MIB),
        _ => Value::Int(v),
    })
}

const fn other(
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    read: fn(&GpuSample) -> Option<Value>,
) -> Series {
    Series::Other(Field { name, kind, help, read: Read::Other(read) })
}

/// The series before GPM's and the field values', in the order gpulse has always written them.
const SERIES: &[Series] = &[
    Series::Metric(hand_read("clock_sm_mhz")),
    Series::Metric(hand_read("clock_mem_mhz")),
    Series::Metric(hand_read("temperature_memory_c")),
    Series::Metric(hand_read("temperature_gpu_c")),
    Series::Metric(hand_read("power_draw_mw")),
    Series::Metric(hand_read("energy_mj")),
    Series::Metric(hand_read("util_gpu_pct")),
    Series::Metric(hand_read("util_mem_pct")),
    other("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", |g| probed(g, Probe::UtilEncoder)),
    other("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", |g| probed(g, Probe::UtilDecoder)),
    Series::Metric(hand_read("memory_free_bytes")),
    Series::Metric(hand_read("memory_used_bytes")),
    Series::Metric(hand_read("memory_reserved_bytes")),
    other(
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors",
        |g| probed(g, Probe::RemappedUncorrectable),
    ),
    other("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors", |g| {
        probed(g, Probe::RemappedCorrectable)
    }),
    other("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed", |g| {
        probed(g, Probe::RemappedFailure)
    }),
    other("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", |g| {
        g.xid_last.map(Value::Int)
    }),
    other(
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "counter",
        "Total number of NVLink bandwidth counters for all lanes.",
        |g| probed(g, Probe::NvlinkThroughput),
    ),
];

/// A hand-read metric's series.
fn metric_field(m: &'static TableMetric) -> Option<Field> {
    let d = m.dcgm?;
    Some(Field { name: d.name, kind: d.kind.as_str(), help: d.help, read: Read::Metric(m) })
}

/// Every series before GPM's and the field values': [`SERIES`], then each hand-read metric with a
/// dcgm-exporter series that it does not place.
pub(super) fn fields() -> impl Iterator<Item = Field> {
    let placed = |m: &TableMetric| SERIES.iter().any(|s| matches!(s, Series::Metric(p) if p.key == m.key));
    let listed = SERIES.iter().filter_map(|s| match s {
        Series::Metric(m) => metric_field(m),
        Series::Other(f) => Some(*f),
    });
    listed.chain(HAND_READ.iter().filter(move |m| !placed(m)).filter_map(metric_field))
}

impl Field {
    fn read(&self, g: &GpuSample) -> Option<Value> {
        match self.read {
            Read::Metric(m) => metric_value(m, g),
            Read::Other(f) => f(g),
        }
    }
}

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
    for f in fields() {
        let mut family = Family::new(out, f.name, f.kind, f.help);
        for (l, g) in &labelled {
            if let Some(v) = f.read(g) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A row [`SERIES`] places has a series: one without would drop out of `/metrics`.
    #[test]
    fn every_placed_metric_is_a_row_with_a_series() {
        for s in SERIES {
            if let Series::Metric(m) = s {
                assert!(m.dcgm.is_some(), "{}", m.key);
            }
        }
    }
}
