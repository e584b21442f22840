//! Header and row text for query output.

use gpulse_model::{Absence, DeviceInfo, GpuSample, MIB, Probe, ProbeResult, ProcessSample, Reading, Shown};

use crate::fields::{AppField, AppKey, Fmt, GpuField, GpuKey};
use crate::format::CsvFormat;

/// `name [unit]` joined by `", "`, as nvidia-smi prints headers (units stay under `nounits`).
fn header<'a>(fields: impl Iterator<Item = (&'a str, Option<&'a str>)>) -> String {
    let names: Vec<String> = fields
        .map(|(name, unit)| match unit {
            Some(u) => format!("{name} [{u}]"),
            None => name.to_owned(),
        })
        .collect();
    names.join(", ")
}

/// The header line for `--query-gpu=` output, without the newline.
pub fn gpu_header(fields: &[GpuField]) -> String {
    header(fields.iter().map(|f| (f.canonical, f.unit)))
}

/// The header line for `--query-compute-apps=` output, without the newline.
pub fn app_header(fields: &[AppField]) -> String {
    header(fields.iter().map(|f| (f.canonical, f.unit)))
}

/// Bytes to MiB as nvidia-smi rounds them: up. Seen on an H200: 644939776 reserved bytes
/// (615.06 MiB) print as `616 MiB`, 150109880320 free bytes (143155.94 MiB) as `143156 MiB`.
pub fn mib_ceil(bytes: u64) -> u64 {
    bytes.div_ceil(MIB)
}

/// How nvidia-smi spells a value it does not have.
fn missing(why: Option<Absence>) -> String {
    match why {
        Some(Absence::NotSupported) => "[Not Supported]",
        Some(Absence::NoPermission) => "[Insufficient Permissions]",
        Some(Absence::GpuLost) => "[GPU is lost]",
        Some(Absence::Unknown) => "[Unknown Error]",
        Some(Absence::NotAvailable) | None => "[N/A]",
    }
    .to_owned()
}

/// A value with its unit when `units` is on.
fn with_unit(v: String, unit: Option<&str>, units: bool) -> String {
    match unit {
        Some(u) if units => format!("{v} {u}"),
        _ => v,
    }
}

fn enabled(b: bool) -> String {
    if b { "Enabled" } else { "Disabled" }.to_owned()
}

/// Everything one `--query-gpu=` row may need.
pub struct GpuRow<'a> {
    pub info: &'a DeviceInfo,
    pub sample: &'a GpuSample,
    /// When the row was read, microseconds since the Unix epoch.
    pub timestamp_us: i64,
    /// How many GPUs the system has (nvidia-smi `count`).
    pub device_count: usize,
}

/// One `--query-gpu=` row, without the newline.
pub fn gpu_row(fields: &[GpuField], row: &GpuRow<'_>, fmt: CsvFormat) -> String {
    let cells: Vec<String> = fields.iter().map(|f| gpu_cell(f, row, fmt)).collect();
    cells.join(", ")
}

fn gpu_cell(f: &GpuField, row: &GpuRow<'_>, fmt: CsvFormat) -> String {
    let (info, s) = (row.info, row.sample);
    let num = |v: Option<u32>| v.map(|v| v.to_string());
    let pct1 = |v: Option<f64>| v.map(|v| format!("{v:.1}"));
    let mib_s = |v: Option<f64>| v.map(|v| format!("{:.1}", v / MIB as f64));
    let gpm = s.gpm.as_ref();
    let value: Option<String> = match f.key {
        GpuKey::Timestamp => Some(gpulse_base::clock::format_local(row.timestamp_us)),
        GpuKey::DriverVersion => info.driver_version.clone(),
        GpuKey::Count => Some(row.device_count.to_string()),
        GpuKey::Name => Some(info.name.clone()),
        GpuKey::Index => Some(info.index.to_string()),
        GpuKey::Uuid => Some(info.uuid.clone()),
        GpuKey::PciBusId => info.pci_bus_id.clone(),
        GpuKey::PersistenceMode => info.persistence_mode.map(enabled),
        GpuKey::ComputeMode => info.compute_mode.clone(),
        GpuKey::Hand(m) => {
            m.call().and_then(|c| (c.read)(s).or_else(|| c.device.and_then(|d| d(info)))).map(|v| shown(m.shown, v))
        }
        GpuKey::ClockMaxSm => num(info.clock_max_sm_mhz),
        GpuKey::ClockMaxMemory => num(info.clock_max_mem_mhz),
        GpuKey::ReasonsSupported => info.clocks_event_reasons_supported.map(|r| shown(Shown::Hex16, r)),
        GpuKey::Reason(bit) => {
            s.clocks_event_reasons.map(|r| if r & bit != 0 { "Active" } else { "Not Active" }.to_owned())
        }
        GpuKey::EccModeCurrent => info.ecc_enabled.map(enabled),
        GpuKey::Probe(p, how) => {
            return match probed(&s.probes, p) {
                Some(Ok(r)) => match formatted(r, how) {
                    Ok(v) => with_unit(v, f.unit, fmt.units),
                    Err(text) => text.to_owned(),
                },
                // nvidia-smi 580 prints `[N/A]` for these when NVML answers NOT_SUPPORTED (seen on
                // an H200 for vGPU capabilities, ECC locations, retired pages, GOM).
                Some(Err(Absence::NotSupported)) => missing(None),
                Some(Err(why)) => missing(Some(*why)),
                None => missing(None),
            };
        }
        GpuKey::Table(key) => match s.table.get(key) {
            Some(Ok(v)) => Some(v.to_string()),
            Some(Err(why)) => return missing(Some(why)),
            None => None,
        },
        GpuKey::Fixed(text) => return text.to_owned(),
        GpuKey::Unread => None,
        GpuKey::Gpm(k) => gpm.zip(gpulse_model::GpmField::by_id(k)).and_then(|(g, f)| match f.unit {
            gpulse_model::GpmUnit::Pct => pct1((f.get)(g)),
            gpulse_model::GpmUnit::MibPerS => mib_s((f.get)(g)),
        }),
    };
    match value {
        Some(v) => with_unit(v, f.unit, fmt.units),
        None => missing(
            f.key
                .metric()
                .and_then(|m| s.absence(m))
                .or_else(|| (s.status == gpulse_model::DeviceStatus::Lost).then_some(Absence::GpuLost)),
        ),
    }
}

/// A metric's value as nvidia-smi prints it.
pub fn shown(how: Shown, v: u64) -> String {
    match how {
        Shown::Int => v.to_string(),
        Shown::Watts => format!("{:.2}", gpulse_model::mw_to_w(v)),
        Shown::MibCeil => mib_ceil(v).to_string(),
        Shown::Pstate => format!("P{v}"),
        Shown::Hex16 => format!("0x{v:016X}"),
    }
}

/// What the poll read for `probe`, if it was asked for.
fn probed(probes: &[(Probe, ProbeResult)], probe: Probe) -> Option<&ProbeResult> {
    probes.iter().find(|(p, _)| *p == probe).map(|(_, r)| r)
}

/// A reading as nvidia-smi prints it; `Err` holds text printed as is, without a unit.
fn formatted(r: &Reading, how: Fmt) -> Result<String, &'static str> {
    let flag = |yes: &str, no: &str| match r {
        Reading::Flag(b) => Ok(if *b { yes } else { no }.to_owned()),
        _ => Err("[Unknown Error]"),
    };
    let n = match r {
        Reading::Num(n) => Some(*n),
        _ => None,
    };
    match how {
        Fmt::Enabled => flag("Enabled", "Disabled"),
        Fmt::YesNo => flag("Yes", "No"),
        Fmt::Supported => match r {
            Reading::Flag(true) => Ok("Supported".to_owned()),
            _ => Err("[Not Supported]"),
        },
        Fmt::Text => match r {
            Reading::Text(t) => Ok(t.clone()),
            Reading::Num(n) => Ok(n.to_string()),
            Reading::Flag(_) => Err("[Unknown Error]"),
        },
        Fmt::Int => n.map(|n| n.to_string()).ok_or("[Unknown Error]"),
        Fmt::Hex(w) => n.map(|n| format!("0x{n:0w$X}")).ok_or("[Unknown Error]"),
        Fmt::Watts => n
            .and_then(|mw| u64::try_from(mw).ok())
            .map(|mw| format!("{:.2}", gpulse_model::mw_to_w(mw)))
            .ok_or("[Unknown Error]"),
        Fmt::Mib => n.map(|b| mib_ceil(b.max(0) as u64).to_string()).ok_or("[Unknown Error]"),
        Fmt::Micros => n.map(|ns| (ns / 1000).to_string()).ok_or("[Unknown Error]"),
        // The details of a registered fabric are not read yet (docs/query.md).
        Fmt::FabricNa => Err(if n == Some(0) { "N/A" } else { "[N/A]" }),
    }
}

/// One `--query-compute-apps=` row, without the newline. `probes` is what the poll read for the
/// process's GPU (its serial, for `gpu_serial`).
pub fn app_row(
    fields: &[AppField],
    info: &DeviceInfo,
    probes: &[(Probe, ProbeResult)],
    p: &ProcessSample,
    timestamp_us: i64,
    fmt: CsvFormat,
) -> String {
    let cells: Vec<String> = fields
        .iter()
        .map(|f| {
            let v = match f.key {
                AppKey::Timestamp => Some(gpulse_base::clock::format_local(timestamp_us)),
                AppKey::GpuName => Some(info.name.clone()),
                AppKey::GpuBusId => info.pci_bus_id.clone(),
                AppKey::GpuUuid => Some(info.uuid.clone()),
                AppKey::GpuSerial => match probed(probes, Probe::Serial) {
                    Some(Ok(Reading::Text(t))) => Some(t.clone()),
                    Some(Err(why)) => return missing(Some(*why)),
                    _ => None,
                },
                AppKey::Pid => Some(p.pid.to_string()),
                AppKey::ProcessName => p.name.clone(),
                AppKey::UsedMemory => p.used_memory_bytes.map(|b| mib_ceil(b).to_string()),
            };
            v.map_or_else(|| missing(None), |v| with_unit(v, f.unit, fmt.units))
        })
        .collect();
    cells.join(", ")
}
