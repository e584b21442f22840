//! One data line into a GPU sample or a process, and the GPU it belongs to.

use gpulse_model::{Absence, DeviceInfo, DeviceStatus, GpuSample, MIB, ProcessSample, Shown};

use super::cells::{Col, absence, milli, number, scaled, uint};
use super::{LogRow, Registry};
use crate::fields::{AppKey, GpuKey};

/// The GPU a row names by UUID, bus id or index (in that order of preference), registering it.
/// The most bytes a memory cell may say: a recording stores KiB in 63 bits.
const MAX_BYTES: f64 = (1u64 << 62) as f64;

/// GPUs one recording holds (its sample keys keep 8 bits for the GPU).
const MAX_GPUS: u32 = 256;

/// Refuses a GPU index the recording could not tell from another one.
fn checked(index: u32) -> Result<u32, String> {
    if index < MAX_GPUS { Ok(index) } else { Err(format!("GPU index {index}: a recording holds GPUs 0 to 255")) }
}

pub(super) fn device_for(reg: &mut Registry, key: String, info: DeviceInfo) -> u32 {
    if let Some(g) = reg.find(&key) {
        let d = &mut reg.devices[g as usize];
        if d.name.is_empty() {
            d.name = info.name;
        }
        if d.uuid.is_empty() {
            d.uuid = info.uuid;
        }
        if d.pci_bus_id.is_none() {
            d.pci_bus_id = info.pci_bus_id;
        }
        return g;
    }
    let g = reg.devices.len() as u32;
    reg.devices.push(info);
    reg.ids.push((key, g));
    g
}

pub(super) fn gpu_row(
    cols: &[(Col, String)],
    cells: &[&str],
    tz: &mut crate::timestamp::LocalStamps,
    reg: &mut Registry,
    positional: &mut u32,
    last_t: &mut Option<i64>,
) -> Result<LogRow, String> {
    // A --query-gpu row lists no processes: `processes` stays empty, and importers must not read
    // that as "none" (the recording writes such rows without a process listing).
    let mut s = GpuSample::default();
    // Device facts, made only when a row has one (most logs have none).
    let mut facts: Option<DeviceInfo> = None;
    // Identity cells, borrowed: a row of a known GPU allocates nothing for them.
    let (mut name_cell, mut uuid_cell, mut bus_cell, mut driver_cell) = (None, None, None, None);
    let mut t = None;
    let mut index = None;
    let mut reason_bits: Option<u64> = None;
    for ((col, name), &cell) in cols.iter().zip(cells) {
        let Col::Gpu(key) = *col else { continue };
        if let Some(why) = absence(cell) {
            if let GpuKey::Table(k) = key {
                s.table.set(k, Err(why));
            } else if let Some(m) = key.metric()
                && !s.absent.iter().any(|a| a.0 == m)
            {
                s.absent.push((m, why));
            }
            if why == Absence::GpuLost {
                s.status = DeviceStatus::Lost;
            }
            continue;
        }
        let bad = || format!("{name}: cannot read {cell:?}");
        let u = || uint(cell).ok_or_else(bad);
        let mib = || {
            uint(cell)
                .map(|m| u64::from(m) * MIB)
                .or_else(|| scaled(cell, MIB as f64, MAX_BYTES).map(|v| v as u64))
                .ok_or_else(bad)
        };
        let mw = || milli(cell).or_else(|| scaled(cell, 1000.0, f64::from(u32::MAX)).map(|v| v as u32)).ok_or_else(bad);
        match key {
            GpuKey::Timestamp => t = Some(tz.parse(cell).ok_or_else(bad)?),
            GpuKey::DriverVersion => driver_cell = Some(cell),
            GpuKey::Count | GpuKey::Probe(..) | GpuKey::Fixed(_) | GpuKey::Unread => {}
            GpuKey::Name => name_cell = Some(cell),
            GpuKey::Index => index = Some(u()?),
            GpuKey::Uuid => uuid_cell = Some(cell),
            GpuKey::PciBusId => bus_cell = Some(cell),
            GpuKey::PersistenceMode => facts.get_or_insert_default().persistence_mode = Some(cell == "Enabled"),
            GpuKey::ComputeMode => facts.get_or_insert_default().compute_mode = Some(cell.to_owned()),
            GpuKey::EccModeCurrent => facts.get_or_insert_default().ecc_enabled = Some(cell == "Enabled"),
            GpuKey::ClockMaxSm => facts.get_or_insert_default().clock_max_sm_mhz = Some(u()?),
            GpuKey::ClockMaxMemory => facts.get_or_insert_default().clock_max_mem_mhz = Some(u()?),
            GpuKey::ReasonsSupported => {
                facts.get_or_insert_default().clocks_event_reasons_supported =
                    Some(u64::from_str_radix(cell.trim_start_matches("0x"), 16).map_err(|_| bad())?)
            }
            GpuKey::Hand(m) => {
                let v = match m.shown {
                    Shown::Int => u64::from(u()?),
                    Shown::Watts => u64::from(mw()?),
                    Shown::MibCeil => mib()?,
                    Shown::Pstate => cell.strip_prefix('P').and_then(|p| p.parse::<u32>().ok()).ok_or_else(bad)?.into(),
                    Shown::Hex16 => {
                        u64::from_str_radix(cell.strip_prefix("0x").unwrap_or(cell), 16).map_err(|_| bad())?
                    }
                };
                if let Some(c) = m.call() {
                    (c.write)(&mut s, v);
                }
            }
            GpuKey::Reason(bit) => {
                let on = match cell {
                    "Active" => true,
                    "Not Active" => false,
                    _ => return Err(bad()),
                };
                *reason_bits.get_or_insert(0) |= if on { bit } else { 0 };
            }
            GpuKey::Table(k) => s.table.set(k, Ok(cell.parse().map_err(|_| bad())?)),
            GpuKey::Gpm(k) => {
                let v = number(cell).ok_or_else(bad)?;
                let g = s.gpm.get_or_insert_with(Box::default);
                let f = gpulse_model::GpmField::by_id(k).ok_or_else(bad)?;
                (f.set)(g, Some(f.unit.from_nvml(v)));
            }
        }
    }
    if s.clocks_event_reasons.is_none() {
        s.clocks_event_reasons = reason_bits;
    }
    let t = t.ok_or("no timestamp: the log needs the timestamp field")?;
    // Identify the GPU; a log without an id column cycles through GPUs within one poll.
    let key: std::borrow::Cow<'_, str> = if let Some(u) = uuid_cell {
        u.into()
    } else if let Some(b) = bus_cell {
        b.into()
    } else if let Some(i) = index {
        format!("index {i}").into()
    } else {
        // A new poll starts when time moves on by more than the spread of one poll's rows.
        if last_t.is_some_and(|l| t - l > 50_000) {
            *positional = 0;
        }
        *last_t = Some(t);
        let p = *positional;
        *positional += 1;
        format!("position {p}").into()
    };
    // The common case: a GPU already known, with nothing new about it.
    if let Some(g) = reg.find(key.as_ref()) {
        let d = &reg.devices[g as usize];
        let complete = name_cell.is_none_or(|_| !d.name.is_empty())
            && uuid_cell.is_none_or(|_| !d.uuid.is_empty())
            && bus_cell.is_none_or(|_| d.pci_bus_id.is_some());
        if complete {
            s.gpu_index = d.index;
            return Ok(LogRow::Gpu(t, s));
        }
    }
    let mut info = facts.unwrap_or_default();
    info.name = name_cell.unwrap_or_default().to_owned();
    info.uuid = uuid_cell.unwrap_or_default().to_owned();
    info.pci_bus_id = bus_cell.map(str::to_owned);
    info.driver_version = driver_cell.map(str::to_owned);
    let known = reg.find(key.as_ref()).map(|g| reg.devices[g as usize].index);
    info.index = checked(index.or(known).unwrap_or(reg.devices.len() as u32))?;
    info.memory_total_bytes = s.memory_total_bytes;
    info.power_limit_mw = s.power_limit_mw;
    let g = device_for(reg, key.into_owned(), info);
    s.gpu_index = reg.devices[g as usize].index;
    Ok(LogRow::Gpu(t, s))
}

pub(super) fn app_row(
    cols: &[(Col, String)],
    cells: &[&str],
    tz: &mut crate::timestamp::LocalStamps,
    reg: &mut Registry,
) -> Result<LogRow, String> {
    let mut p = ProcessSample::default();
    let mut info = DeviceInfo::default();
    let mut t = None;
    let mut pid = None;
    for ((col, name), &cell) in cols.iter().zip(cells) {
        let Col::App(key) = *col else { continue };
        if absence(cell).is_some() {
            continue;
        }
        let bad = || format!("{name}: cannot read {cell:?}");
        match key {
            AppKey::Timestamp => t = Some(tz.parse(cell).ok_or_else(bad)?),
            AppKey::GpuName => info.name = cell.to_owned(),
            AppKey::GpuBusId => info.pci_bus_id = Some(cell.to_owned()),
            AppKey::GpuUuid => info.uuid = cell.to_owned(),
            AppKey::GpuSerial => {}
            AppKey::Pid => pid = Some(cell.parse::<u32>().map_err(|_| bad())?),
            AppKey::ProcessName => p.name = Some(cell.to_owned()),
            AppKey::UsedMemory => {
                p.used_memory_bytes = Some(scaled(cell, MIB as f64, MAX_BYTES).map(|v| v as u64).ok_or_else(bad)?)
            }
        }
    }
    p.pid = pid.ok_or("no pid")?;
    let t = t.ok_or("no timestamp: the log needs the timestamp field")?;
    let key = if !info.uuid.is_empty() {
        info.uuid.clone()
    } else if let Some(b) = &info.pci_bus_id {
        b.clone()
    } else {
        // One GPU, named or not.
        reg.ids.first().map(|(k, _)| k.clone()).unwrap_or_else(|| "position 0".to_owned())
    };
    let known = reg.find(&key).map(|g| reg.devices[g as usize].index);
    info.index = checked(known.unwrap_or(reg.devices.len() as u32))?;
    let g = device_for(reg, key, info);
    Ok(LogRow::App(t, reg.devices[g as usize].index, p))
}
