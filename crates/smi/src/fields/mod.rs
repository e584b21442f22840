//! The fields gpulse answers, with nvidia-smi's canonical names, aliases and units.

mod nvml_fields;

use gpulse_model::clocks;
use gpulse_model::{Metric, Probe, TableMetric};

use crate::QueryError;

/// How a probe's reading is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fmt {
    /// A whole number.
    Int,
    Text,
    /// `Enabled` / `Disabled`.
    Enabled,
    /// `Yes` / `No`.
    YesNo,
    /// `Supported` / `[Not Supported]`.
    Supported,
    /// `0x` and upper-case hex, zero-padded to this many digits.
    Hex(usize),
    /// Milliwatts as watts with two decimals.
    Watts,
    /// Bytes as MiB, rounded up.
    Mib,
    /// Nanoseconds as whole microseconds.
    Micros,
    /// A fabric field: `N/A` (no brackets, as nvidia-smi prints it) while the GPU is on no fabric.
    FabricNa,
}

/// What a `--query-gpu=` field reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuKey {
    Timestamp,
    DriverVersion,
    Count,
    Name,
    Index,
    Uuid,
    PciBusId,
    PersistenceMode,
    ComputeMode,
    ClockMaxSm,
    ClockMaxMemory,
    ReasonsSupported,
    /// One named clocks-event reason, by NVML bit, of the hand-read bitmask.
    Reason(u64),
    EccModeCurrent,
    /// A hand-read metric (`gpulse_model::HAND_READ`): utilization, memory, power, clocks…
    Hand(&'static TableMetric),
    /// A GPM metric (`gpm.*`), by its NVML id in the model's table.
    Gpm(u32),
    /// A row of the model's metric table (`gpulse_model::TABLE`), by key.
    Table(&'static str),
    /// One NVML read, printed as `Fmt` says.
    Probe(Probe, Fmt),
    /// What nvidia-smi prints for the field without reading anything (deprecated fields, and
    /// Windows-only ones on Linux).
    Fixed(&'static str),
    /// A field NVML gives gpulse no call for: `[N/A]` (docs/query.md lists them).
    Unread,
}

impl GpuKey {
    /// Whether the field shows a static fact that costs a driver round trip to read
    /// (see `NvmlOptions::device_facts`).
    pub fn is_device_fact(self) -> bool {
        matches!(
            self,
            GpuKey::PersistenceMode
                | GpuKey::ComputeMode
                | GpuKey::ClockMaxSm
                | GpuKey::ClockMaxMemory
                | GpuKey::ReasonsSupported
                | GpuKey::EccModeCurrent
        )
    }

    /// The sampled metric this field shows; `None` for static facts and the timestamp.
    pub fn metric(self) -> Option<Metric> {
        Some(match self {
            GpuKey::Hand(m) => return m.call().map(|c| c.metric),
            GpuKey::Timestamp
            | GpuKey::DriverVersion
            | GpuKey::Count
            | GpuKey::Name
            | GpuKey::Index
            | GpuKey::Uuid
            | GpuKey::PciBusId
            | GpuKey::PersistenceMode
            | GpuKey::ComputeMode
            | GpuKey::ClockMaxSm
            | GpuKey::ClockMaxMemory
            | GpuKey::ReasonsSupported
            | GpuKey::EccModeCurrent
            | GpuKey::Probe(..)
            | GpuKey::Fixed(_)
            | GpuKey::Unread => return None,
            GpuKey::Reason(_) => Metric::ClocksEventReasons,
            GpuKey::Gpm(_) => Metric::Gpm,
            GpuKey::Table(_) => Metric::Table,
        })
    }
}

/// One requested `--query-gpu=` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuField {
    pub key: GpuKey,
    /// The name nvidia-smi prints in the header.
    pub canonical: &'static str,
    /// The unit shown in the header and, without `nounits`, after the value.
    pub unit: Option<&'static str>,
}

impl GpuKey {
    /// The NVML read behind a probe field.
    pub fn probe(self) -> Option<Probe> {
        match self {
            GpuKey::Probe(p, _) => Some(p),
            _ => None,
        }
    }
}

/// (names, canonical first; unit; key).
type Row = (&'static [&'static str], Option<&'static str>, GpuKey);

/// The fields beside the model's metric tables: identity, device facts, and each clocks-event
/// reason of the hand-read bitmask.
const GPU_FIELDS: &[Row] = &[
    (&["timestamp"], None, GpuKey::Timestamp),
    (&["driver_version"], None, GpuKey::DriverVersion),
    (&["count"], None, GpuKey::Count),
    (&["name", "gpu_name"], None, GpuKey::Name),
    (&["index"], None, GpuKey::Index),
    (&["uuid", "gpu_uuid"], None, GpuKey::Uuid),
    (&["pci.bus_id", "gpu_bus_id"], None, GpuKey::PciBusId),
    (&["persistence_mode"], None, GpuKey::PersistenceMode),
    (&["compute_mode"], None, GpuKey::ComputeMode),
    (&["clocks.max.sm"], Some("MHz"), GpuKey::ClockMaxSm),
    (&["clocks.max.memory", "clocks.max.mem"], Some("MHz"), GpuKey::ClockMaxMemory),
    (&["clocks_event_reasons.supported", "clocks_throttle_reasons.supported"], None, GpuKey::ReasonsSupported),
    (&["clocks_event_reasons.gpu_idle", "clocks_throttle_reasons.gpu_idle"], None, GpuKey::Reason(clocks::GPU_IDLE)),
    (
        &["clocks_event_reasons.applications_clocks_setting", "clocks_throttle_reasons.applications_clocks_setting"],
        None,
        GpuKey::Reason(clocks::APPLICATIONS_CLOCKS_SETTING),
    ),
    (
        &["clocks_event_reasons.sw_power_cap", "clocks_throttle_reasons.sw_power_cap"],
        None,
        GpuKey::Reason(clocks::SW_POWER_CAP),
    ),
    (
        &["clocks_event_reasons.hw_slowdown", "clocks_throttle_reasons.hw_slowdown"],
        None,
        GpuKey::Reason(clocks::HW_SLOWDOWN),
    ),
    (
        &["clocks_event_reasons.sync_boost", "clocks_throttle_reasons.sync_boost"],
        None,
        GpuKey::Reason(clocks::SYNC_BOOST),
    ),
    (
        &["clocks_event_reasons.sw_thermal_slowdown", "clocks_throttle_reasons.sw_thermal_slowdown"],
        None,
        GpuKey::Reason(clocks::SW_THERMAL_SLOWDOWN),
    ),
    (
        &["clocks_event_reasons.hw_thermal_slowdown", "clocks_throttle_reasons.hw_thermal_slowdown"],
        None,
        GpuKey::Reason(clocks::HW_THERMAL_SLOWDOWN),
    ),
    (
        &["clocks_event_reasons.hw_power_brake_slowdown", "clocks_throttle_reasons.hw_power_brake_slowdown"],
        None,
        GpuKey::Reason(clocks::HW_POWER_BRAKE_SLOWDOWN),
    ),
    (&["ecc.mode.current"], None, GpuKey::EccModeCurrent),
];

/// Every `--query-gpu=` name gpulse accepts, canonical names and aliases alike.
pub fn gpu_field_names() -> impl Iterator<Item = &'static str> {
    all_rows()
        .flat_map(|r| r.0.iter().copied())
        .chain(gpulse_model::GPM_FIELDS.iter().map(|f| f.smi))
        .chain(gpulse_model::metrics().flat_map(|m| m.smi.iter().copied()))
}

fn all_rows() -> impl Iterator<Item = &'static Row> {
    GPU_FIELDS.iter().chain(nvml_fields::NVML_FIELDS)
}

/// The GPU field called `name` (canonical or alias).
pub fn gpu_field(name: &str) -> Option<GpuField> {
    all_rows()
        .find(|r| r.0.contains(&name))
        .map(|r| GpuField { key: r.2, canonical: r.0[0], unit: r.1 })
        .or_else(|| {
            let f = gpulse_model::GPM_FIELDS.iter().find(|f| f.smi == name)?;
            Some(GpuField { key: GpuKey::Gpm(f.nvml_id), canonical: f.smi, unit: Some(f.unit.smi_unit()) })
        })
        .or_else(|| {
            let m = gpulse_model::metrics().find(|m| m.smi.contains(&name))?;
            let key = if m.call().is_some() { GpuKey::Hand(m) } else { GpuKey::Table(m.key) };
            Some(GpuField { key, canonical: m.smi[0], unit: m.smi_unit })
        })
}

/// Parses the value of `--query-gpu=`: names separated by commas, exactly as nvidia-smi reads
/// them (no trimming, case-sensitive, repeats allowed).
pub fn parse_gpu_fields(list: &str) -> Result<Vec<GpuField>, QueryError> {
    if list.is_empty() {
        return Ok(Vec::new());
    }
    list.split(',').map(|name| gpu_field(name).ok_or_else(|| QueryError::UnknownField(name.to_owned()))).collect()
}

/// What a `--query-compute-apps=` field reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppKey {
    Timestamp,
    GpuName,
    GpuBusId,
    GpuUuid,
    GpuSerial,
    Pid,
    ProcessName,
    UsedMemory,
}

/// One requested `--query-compute-apps=` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppField {
    pub key: AppKey,
    pub canonical: &'static str,
    pub unit: Option<&'static str>,
}

const APP_FIELDS: &[(&[&str], Option<&str>, AppKey)] = &[
    (&["timestamp"], None, AppKey::Timestamp),
    (&["gpu_name"], None, AppKey::GpuName),
    (&["gpu_bus_id"], None, AppKey::GpuBusId),
    (&["gpu_serial"], None, AppKey::GpuSerial),
    (&["gpu_uuid"], None, AppKey::GpuUuid),
    (&["pid"], None, AppKey::Pid),
    (&["process_name", "name"], None, AppKey::ProcessName),
    (&["used_gpu_memory", "used_memory"], Some("MiB"), AppKey::UsedMemory),
];

/// The compute-app field called `name` (canonical or alias).
pub fn app_field(name: &str) -> Option<AppField> {
    APP_FIELDS.iter().find(|r| r.0.contains(&name)).map(|r| AppField { key: r.2, canonical: r.0[0], unit: r.1 })
}

/// Parses the value of `--query-compute-apps=`.
pub fn parse_app_fields(list: &str) -> Result<Vec<AppField>, QueryError> {
    if list.is_empty() {
        return Ok(Vec::new());
    }
    list.split(',').map(|name| app_field(name).ok_or_else(|| QueryError::UnknownField(name.to_owned()))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_resolve_to_canonical_names() {
        let f = parse_gpu_fields("clocks.sm,clocks.mem,gpu_name,clocks_throttle_reasons.active").unwrap();
        let names: Vec<_> = f.iter().map(|f| f.canonical).collect();
        assert_eq!(names, ["clocks.current.sm", "clocks.current.memory", "name", "clocks_event_reasons.active"]);
        let a = parse_app_fields("name,used_memory").unwrap();
        assert_eq!(a[0].canonical, "process_name");
        assert_eq!(a[1].canonical, "used_gpu_memory");
    }

    #[test]
    fn rejects_what_nvidia_smi_rejects() {
        assert_eq!(parse_gpu_fields("index, name"), Err(QueryError::UnknownField(" name".into())));
        assert_eq!(parse_gpu_fields("INDEX"), Err(QueryError::UnknownField("INDEX".into())));
        assert_eq!(parse_app_fields("pid,foo"), Err(QueryError::UnknownField("foo".into())));
        assert_eq!(parse_gpu_fields("index,index").unwrap().len(), 2);
    }

    #[test]
    fn table_metrics_are_fields_of_their_own() {
        let mut names: Vec<&str> = gpu_field_names().collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "no name is both a table metric and a field");
        for m in gpulse_model::TABLE {
            for name in m.smi {
                let f = gpu_field(name).unwrap();
                assert_eq!((f.key, f.canonical, f.key.metric()), (GpuKey::Table(m.key), m.smi[0], Some(Metric::Table)));
            }
        }
        assert!(parse_gpu_fields("").unwrap().is_empty());
    }

    /// Every name of every row of the model's metric tables is a field that shows that row,
    /// with the row's canonical name and unit; no other field shows a hand-read row.
    #[test]
    fn every_metric_names_its_fields() {
        for m in gpulse_model::metrics() {
            for name in m.smi {
                let f = gpu_field(name).unwrap_or_else(|| panic!("{name} ({}) is not a field", m.key));
                let key = match m.call() {
                    Some(c) => {
                        assert_eq!(f.key.metric(), Some(c.metric), "{name}");
                        GpuKey::Hand(m)
                    }
                    None => GpuKey::Table(m.key),
                };
                assert_eq!((f.key, f.canonical, f.unit), (key, m.smi[0], m.smi_unit), "{name}");
            }
        }
        for name in gpu_field_names() {
            if let Some(GpuKey::Hand(m)) = gpu_field(name).map(|f| f.key) {
                assert!(m.smi.contains(&name), "{name} shows {} but the row does not name it", m.key);
            }
        }
        let f = parse_gpu_fields("clocks.mem,power.draw.average,pstate").unwrap();
        let keys: Vec<&str> = f.iter().map(|f| if let GpuKey::Hand(m) = f.key { m.key } else { "" }).collect();
        assert_eq!(keys, ["clock_mem_mhz", "power_draw_average_mw", "pstate"]);
    }
}
