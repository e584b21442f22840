//! Reading logs that nvidia-smi's CSV mode wrote: `--query-gpu` and `--query-compute-apps`,
//! any fields in any order, with or without header or units, appended across restarts (headers
//! repeat), several GPUs interleaved, CRLF, and a last line cut short by a crash.
//!
//! Lines that cannot be read are counted with their line numbers, never dropped silently.

use std::collections::HashMap;

use gpulse_model::{Absence, DeviceInfo, DeviceStatus, GpuSample, MIB, ProcessSample};

use crate::fields::{AppKey, GpmKey, GpuKey, app_field, gpu_field};

/// One line that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    /// 1-based line number in its file.
    pub line: usize,
    pub why: String,
}

/// A process listing from a `--query-compute-apps` log: every process one GPU showed at one poll.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessPoll {
    pub timestamp_us: i64,
    pub gpu_index: u32,
    pub processes: Vec<ProcessSample>,
}

/// What a log held.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogImport {
    pub devices: Vec<DeviceInfo>,
    /// One sample per GPU row, with the row's own timestamp, in file order.
    pub samples: Vec<(i64, GpuSample)>,
    pub process_polls: Vec<ProcessPoll>,
    /// The `--query-gpu` fields of the last GPU header, canonical names, for a faithful export.
    pub gpu_fields: Vec<String>,
    /// Header columns gpulse does not read (valid nvidia-smi fields it has no use for).
    pub ignored_columns: Vec<String>,
    pub rows: usize,
    pub malformed: Vec<Malformed>,
}

/// A file that is not an nvidia-smi CSV log at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    #[error("not an nvidia-smi CSV log: {0}")]
    NotALog(String),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Col {
    Gpu(GpuKey),
    App(AppKey),
    Ignored,
}

/// Splits a line the way nvidia-smi joins it (`", "`); a bare `,` also separates.
fn split(line: &str) -> impl Iterator<Item = &str> {
    line.split(',').map(|c| c.strip_prefix(' ').unwrap_or(c))
}

/// The field name of a header cell, without ` [unit]`.
fn header_name(cell: &str) -> &str {
    cell.split_once(" [").map_or(cell, |(n, _)| n).trim()
}

/// Whether a line is a header: every cell is a lowercase field name, and at least one is known.
fn parse_header(line: &str) -> Option<Vec<(Col, String)>> {
    let mut cols = Vec::new();
    let mut known = 0;
    let apps =
        split(line).any(|c| matches!(header_name(c), "pid" | "used_gpu_memory" | "used_memory" | "process_name"));
    for cell in split(line) {
        let name = header_name(cell);
        if name.is_empty()
            || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'_')
        {
            return None;
        }
        let col =
            if apps { app_field(name).map(|f| Col::App(f.key)) } else { gpu_field(name).map(|f| Col::Gpu(f.key)) };
        known += usize::from(col.is_some() && !name.bytes().all(|b| b.is_ascii_digit()));
        cols.push((col.unwrap_or(Col::Ignored), name.to_owned()));
    }
    (known > 0).then_some(cols)
}

/// A cell that holds no value, and why.
fn absence(cell: &str) -> Option<Absence> {
    if !matches!(cell.as_bytes().first(), None | Some(b'[' | b'N')) {
        return None;
    }
    match cell {
        "[N/A]" | "N/A" | "" => Some(Absence::NotAvailable),
        "[Not Supported]" => Some(Absence::NotSupported),
        "[Insufficient Permissions]" => Some(Absence::NoPermission),
        "[GPU is lost]" => Some(Absence::GpuLost),
        "[Unknown Error]" | "[Unknown]" => Some(Absence::Unknown),
        _ => None,
    }
}

/// A cell without its unit: the text before the first space.
fn strip_unit(cell: &str) -> &str {
    match cell.bytes().position(|b| b == b' ') {
        Some(i) => &cell[..i],
        None => cell,
    }
}

/// The number in a cell, with its unit (if any) removed.
fn number(cell: &str) -> Option<f64> {
    strip_unit(cell).parse::<f64>().ok().filter(|v| v.is_finite())
}

/// A whole number in a cell, with its unit (if any) removed.
fn uint(cell: &str) -> Option<u32> {
    let digits = strip_unit(cell).as_bytes();
    if digits.is_empty() || digits.len() > 9 {
        return strip_unit(cell).parse().ok();
    }
    let mut v = 0u32;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u32::from(d - b'0');
    }
    Some(v)
}

/// A decimal with at most three fraction digits, in thousandths (`98.44 W` → 98440), read without
/// going through floating point.
fn milli(cell: &str) -> Option<u32> {
    let n = strip_unit(cell);
    let (whole, frac) = n.split_once('.').unwrap_or((n, ""));
    if frac.len() > 3 || whole.is_empty() || whole.len() > 6 {
        return None;
    }
    let mut v = uint(whole)?;
    for i in 0..3 {
        let d = frac.as_bytes().get(i).copied().unwrap_or(b'0');
        if !d.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u32::from(d - b'0');
    }
    Some(v)
}

/// Splits a data line into `cells` at commas, dropping the space nvidia-smi puts after each.
fn split_into<'a>(line: &'a str, cells: &mut Vec<&'a str>) {
    let bytes = line.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b',' {
            cells.push(&line[start..i]);
            start = i + 1;
            if bytes.get(start) == Some(&b' ') {
                start += 1;
            }
        }
    }
    cells.push(&line[start..]);
}

/// The GPUs seen so far, shared by every log of one import so that they agree on indices.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    pub devices: Vec<DeviceInfo>,
    /// (key, position in `devices`): a handful of GPUs, so a scan beats hashing every row.
    ids: Vec<(String, u32)>,
    /// Where the next scan starts: logs list GPUs in the same order every poll, so the GPU after
    /// the last one found is usually the next.
    next: usize,
}

impl Registry {
    fn find(&mut self, key: &str) -> Option<u32> {
        let n = self.ids.len();
        let at = (0..n).map(|i| (self.next + i) % n).find(|&i| self.ids[i].0 == key)?;
        self.next = at + 1;
        Some(self.ids[at].1)
    }
}

/// One row of a log, as it is read. Rows travel in batches, so the GPU sample is not boxed: a
/// copy is cheaper than an allocation per row.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum LogRow {
    /// A `--query-gpu` row: its timestamp and the GPU's sample.
    Gpu(i64, GpuSample),
    /// A `--query-compute-apps` row: its timestamp, the GPU index and the process.
    App(i64, u32, ProcessSample),
}

/// What reading a log found, apart from its rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogSummary {
    pub gpu_fields: Vec<String>,
    pub ignored_columns: Vec<String>,
    pub rows: usize,
    pub malformed: Vec<Malformed>,
}

/// Reads one log whole. `fields`, when given, is the `--query-gpu` list of a log written with
/// `noheader`.
pub fn parse(text: &str, fields: Option<&str>) -> Result<LogImport, LogError> {
    let mut registry = Registry::default();
    let mut samples = Vec::new();
    let mut process_polls: Vec<ProcessPoll> = Vec::new();
    let mut polls: HashMap<(i64, u32), usize> = HashMap::new();
    let summary = parse_each(text, fields, &mut registry, &mut |row| match row {
        LogRow::Gpu(t, s) => samples.push((t, s)),
        LogRow::App(t, gpu, p) => {
            let k = *polls.entry((t, gpu)).or_insert_with(|| {
                process_polls.push(ProcessPoll { timestamp_us: t, gpu_index: gpu, processes: Vec::new() });
                process_polls.len() - 1
            });
            process_polls[k].processes.push(p);
        }
    })?;
    Ok(LogImport {
        devices: registry.devices,
        samples,
        process_polls,
        gpu_fields: summary.gpu_fields,
        ignored_columns: summary.ignored_columns,
        rows: summary.rows,
        malformed: summary.malformed,
    })
}

/// Reads one log row by row, handing each row to `on_row` as soon as it is read, so a large
/// log never has to be held in memory. GPUs are registered in `registry`.
pub fn parse_each(
    text: &str,
    fields: Option<&str>,
    registry: &mut Registry,
    on_row: &mut dyn FnMut(LogRow),
) -> Result<LogSummary, LogError> {
    let mut parser = LogParser::new(fields, registry)?;
    parser.feed(text, on_row);
    parser.finish()
}

/// A log read a piece at a time: each piece ends at a line break (or the log's end), so a large
/// log is parsed as it is read or mapped in, and the first rows go on while the rest arrive.
pub struct LogParser<'r> {
    registry: &'r mut Registry,
    out: LogSummary,
    header: Option<Vec<(Col, String)>>,
    /// Whether the header is a `--query-compute-apps` one.
    apps: bool,
    tz: Option<(i64, i64)>,
    lines_seen: usize,
    /// Lines before the current piece.
    line_offset: usize,
    /// Without an id column, rows of one poll cycle through the GPUs in index order.
    positional: u32,
    last_t: Option<i64>,
}

impl<'r> LogParser<'r> {
    /// `fields`, when given, is the `--query-gpu` list of a log written with `noheader`.
    pub fn new(fields: Option<&str>, registry: &'r mut Registry) -> Result<Self, LogError> {
        let header = match fields {
            Some(f) => Some(
                parse_header(&f.replace(',', ", "))
                    .ok_or_else(|| LogError::NotALog(format!("unknown fields {f:?}")))?,
            ),
            None => None,
        };
        let apps = header.as_ref().is_some_and(|h| is_apps(h));
        Ok(Self {
            registry,
            out: LogSummary::default(),
            header,
            apps,
            tz: None,
            lines_seen: 0,
            line_offset: 0,
            positional: 0,
            last_t: None,
        })
    }

    /// Reads the lines of `piece`, which ends at a line break or at the end of the log.
    pub fn feed(&mut self, piece: &str, on_row: &mut dyn FnMut(LogRow)) {
        let mut cells: Vec<&str> = Vec::new();
        let mut lines = 0;
        let mut start = 0;
        let breaks = memchr::memchr_iter(b'\n', piece.as_bytes()).chain(std::iter::once(piece.len()));
        for (i, end) in breaks.enumerate() {
            let raw = &piece[start..end];
            start = end + 1;
            lines = i + 1;
            let line = raw.strip_suffix('\r').unwrap_or(raw);
            if line.trim().is_empty() {
                continue;
            }
            self.lines_seen += 1;
            let number = self.line_offset + i + 1;
            // Headers start with a lowercase field name; data rows never do.
            if line.as_bytes()[0].is_ascii_lowercase()
                && let Some(h) = parse_header(line)
            {
                if h.iter().any(|c| matches!(c.0, Col::Gpu(_))) {
                    self.out.gpu_fields = h.iter().map(|c| c.1.clone()).collect();
                }
                for c in &h {
                    if c.0 == Col::Ignored && !self.out.ignored_columns.contains(&c.1) {
                        self.out.ignored_columns.push(c.1.clone());
                    }
                }
                self.apps = is_apps(&h);
                self.header = Some(h);
                self.positional = 0;
                self.last_t = None;
                continue;
            }
            let bad = |why: String| Malformed { line: number, why };
            let Some(cols) = self.header.as_ref() else {
                self.out
                    .malformed
                    .push(bad("data before any header (give the field list for logs written with noheader)".into()));
                continue;
            };
            cells.clear();
            split_into(line, &mut cells);
            if cells.len() != cols.len() {
                self.out.malformed.push(bad(format!("{} cells where the header has {}", cells.len(), cols.len())));
                continue;
            }
            let row = if self.apps {
                app_row(cols, &cells, &mut self.tz, self.registry)
            } else {
                gpu_row(cols, &cells, &mut self.tz, self.registry, &mut self.positional, &mut self.last_t)
            };
            match row {
                Ok(r) => on_row(r),
                Err(why) => {
                    self.out.malformed.push(bad(why));
                    continue;
                }
            }
            self.out.rows += 1;
        }
        // The piece's last "line" is empty when it ends at a line break; it counts only once.
        self.line_offset += if piece.ends_with('\n') { lines - 1 } else { lines };
    }

    /// What the log held apart from its rows; an error when it held no rows at all.
    pub fn finish(self) -> Result<LogSummary, LogError> {
        let out = self.out;
        if out.rows == 0 {
            let why = if self.lines_seen == 0 {
                "the file is empty".to_owned()
            } else if self.header.is_none() {
                "no nvidia-smi header line, and no field list given".to_owned()
            } else {
                format!("none of its {} lines could be read", out.malformed.len())
            };
            return Err(LogError::NotALog(why));
        }
        Ok(out)
    }
}

fn is_apps(header: &[(Col, String)]) -> bool {
    header.iter().any(|c| matches!(c.0, Col::App(_)))
}

/// `bytes` cut into pieces of about `size` that end at line breaks, for [`LogParser::feed`].
pub fn pieces(bytes: &[u8], size: usize) -> impl Iterator<Item = &[u8]> {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let cut = if rest.len() <= size {
            rest.len()
        } else {
            rest[size..].iter().position(|&b| b == b'\n').map_or(rest.len(), |p| size + p + 1)
        };
        let (piece, tail) = rest.split_at(cut);
        rest = tail;
        Some(piece)
    })
}

/// The GPU a row names by UUID, bus id or index (in that order of preference), registering it.
fn device_for(reg: &mut Registry, key: String, info: DeviceInfo) -> u32 {
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

fn gpu_row(
    cols: &[(Col, String)],
    cells: &[&str],
    tz: &mut Option<(i64, i64)>,
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
            if let Some(m) = key.metric()
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
                .or_else(|| number(cell).map(|v| (v * MIB as f64).round() as u64))
                .ok_or_else(bad)
        };
        let mw = || milli(cell).or_else(|| number(cell).map(|v| (v * 1000.0).round() as u32)).ok_or_else(bad);
        match key {
            GpuKey::Timestamp => t = Some(crate::timestamp::parse_local(cell, tz).ok_or_else(bad)?),
            GpuKey::DriverVersion => driver_cell = Some(cell),
            GpuKey::Count => {}
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
            GpuKey::Pstate => s.pstate = Some(cell.strip_prefix('P').and_then(|p| p.parse().ok()).ok_or_else(bad)?),
            GpuKey::FanSpeed => s.fan_speed_pct = Some(u()?),
            GpuKey::UtilGpu => s.util_gpu_pct = Some(u()?),
            GpuKey::UtilMemory => s.util_mem_pct = Some(u()?),
            GpuKey::MemoryTotal => s.memory_total_bytes = Some(mib()?),
            GpuKey::MemoryUsed => s.memory_used_bytes = Some(mib()?),
            GpuKey::MemoryFree => s.memory_free_bytes = Some(mib()?),
            GpuKey::MemoryReserved => s.memory_reserved_bytes = Some(mib()?),
            GpuKey::TemperatureGpu => s.temperature_gpu_c = Some(u()?),
            GpuKey::TemperatureMemory => s.temperature_memory_c = Some(u()?),
            GpuKey::PowerDraw => s.power_draw_mw = Some(mw()?),
            GpuKey::PowerLimit => s.power_limit_mw = Some(mw()?),
            GpuKey::EnforcedPowerLimit => s.enforced_power_limit_mw = Some(mw()?),
            GpuKey::ClockGraphics => s.clock_graphics_mhz = Some(u()?),
            GpuKey::ClockSm => s.clock_sm_mhz = Some(u()?),
            GpuKey::ClockMemory => s.clock_mem_mhz = Some(u()?),
            GpuKey::ReasonsActive => {
                s.clocks_event_reasons =
                    Some(u64::from_str_radix(cell.trim_start_matches("0x"), 16).map_err(|_| bad())?)
            }
            GpuKey::Reason(bit) => {
                let on = match cell {
                    "Active" => true,
                    "Not Active" => false,
                    _ => return Err(bad()),
                };
                *reason_bits.get_or_insert(0) |= if on { bit } else { 0 };
            }
            GpuKey::PcieLinkGen => s.pcie_link_gen = Some(u()?),
            GpuKey::PcieLinkWidth => s.pcie_link_width = Some(u()?),
            GpuKey::EccUncorrectedVolatileTotal => s.ecc_uncorrected_volatile = Some(u64::from(u()?)),
            GpuKey::EccCorrectedVolatileTotal => s.ecc_corrected_volatile = Some(u64::from(u()?)),
            GpuKey::Gpm(k) => {
                let v = number(cell).ok_or_else(bad)?;
                let g = s.gpm.get_or_insert_with(Box::default);
                let rate = v * MIB as f64;
                match k {
                    GpmKey::SmActive => g.sm_util_pct = Some(v),
                    GpmKey::SmOccupancy => g.sm_occupancy_pct = Some(v),
                    GpmKey::TensorActive => g.any_tensor_util_pct = Some(v),
                    GpmKey::HmmaActive => g.hmma_tensor_util_pct = Some(v),
                    GpmKey::DramActive => g.dram_bw_util_pct = Some(v),
                    GpmKey::GraphicsActive => g.graphics_util_pct = Some(v),
                    GpmKey::Fp16Active => g.fp16_util_pct = Some(v),
                    GpmKey::Fp32Active => g.fp32_util_pct = Some(v),
                    GpmKey::Fp64Active => g.fp64_util_pct = Some(v),
                    GpmKey::PcieTx => g.pcie_tx_bytes_per_s = Some(rate),
                    GpmKey::PcieRx => g.pcie_rx_bytes_per_s = Some(rate),
                    GpmKey::NvlinkTx => g.nvlink_tx_bytes_per_s = Some(rate),
                    GpmKey::NvlinkRx => g.nvlink_rx_bytes_per_s = Some(rate),
                }
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
    info.index = index.or(known).unwrap_or(reg.devices.len() as u32);
    info.memory_total_bytes = s.memory_total_bytes;
    info.power_limit_mw = s.power_limit_mw;
    let g = device_for(reg, key.into_owned(), info);
    s.gpu_index = reg.devices[g as usize].index;
    Ok(LogRow::Gpu(t, s))
}

fn app_row(
    cols: &[(Col, String)],
    cells: &[&str],
    tz: &mut Option<(i64, i64)>,
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
            AppKey::Timestamp => t = Some(crate::timestamp::parse_local(cell, tz).ok_or_else(bad)?),
            AppKey::GpuName => info.name = cell.to_owned(),
            AppKey::GpuBusId => info.pci_bus_id = Some(cell.to_owned()),
            AppKey::GpuUuid => info.uuid = cell.to_owned(),
            AppKey::Pid => pid = Some(cell.parse::<u32>().map_err(|_| bad())?),
            AppKey::ProcessName => p.name = Some(cell.to_owned()),
            AppKey::UsedMemory => {
                p.used_memory_bytes = Some(number(cell).map(|v| (v * MIB as f64).round() as u64).ok_or_else(bad)?)
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
    info.index = known.unwrap_or(reg.devices.len() as u32);
    let g = device_for(reg, key, info);
    Ok(LogRow::App(t, reg.devices[g as usize].index, p))
}

#[cfg(test)]
mod tests {
    use gpulse_model::Metric;

    use super::*;

    fn utc() {
        // SAFETY: every test here wants UTC; no thread reads TZ differently.
        unsafe { std::env::set_var("TZ", "UTC") };
    }

    #[test]
    fn reads_units_absences_and_repeated_headers() {
        utc();
        let log = "timestamp, index, utilization.gpu [%], memory.used [MiB], power.draw [W], fan.speed [%], pstate, clocks_event_reasons.active\r\n\
            2026/11/29 14:43:16.706, 0, 9 %, 21099 MiB, 98.44 W, [N/A], P0, 0x0000000000000004\r\n\
            timestamp, index, utilization.gpu [%], memory.used [MiB], power.draw [W], fan.speed [%], pstate, clocks_event_reasons.active\r\n\
            2026/11/29 14:43:17.706, 0, [Not Supported], 21100 MiB, 99.00 W, 30 %, P2, 0x0000000000000000\r\n\
            2026/11/29 14:43:18.7";
        let r = parse(log, None).unwrap();
        assert_eq!(r.rows, 2);
        assert_eq!(r.malformed, [Malformed { line: 5, why: "1 cells where the header has 8".into() }]);
        let (t, s) = &r.samples[0];
        assert_eq!(*t, 1_795_963_396_706_000);
        assert_eq!((s.util_gpu_pct, s.memory_used_bytes, s.power_draw_mw), (Some(9), Some(21099 * MIB), Some(98_440)));
        assert_eq!(s.absence(Metric::FanSpeed), Some(Absence::NotAvailable));
        assert_eq!(s.clocks_event_reasons, Some(4));
        let s2 = &r.samples[1].1;
        assert_eq!(s2.absence(Metric::Utilization), Some(Absence::NotSupported));
        assert_eq!((s2.fan_speed_pct, s2.pstate), (Some(30), Some(2)));
        assert_eq!(r.devices.len(), 1);
    }

    #[test]
    fn interleaved_gpus_without_ids_and_without_units() {
        utc();
        let log = "timestamp, utilization.gpu [%], memory.used [MiB]\n\
            2026/11/29 00:00:00.000, 10, 100\n2026/11/29 00:00:00.004, 20, 200\n\
            2026/11/29 00:00:01.000, 11, 101\n2026/11/29 00:00:01.003, 21, 201\n";
        let r = parse(log, None).unwrap();
        let gpus: Vec<u32> = r.samples.iter().map(|s| s.1.gpu_index).collect();
        assert_eq!(gpus, [0, 1, 0, 1]);
        assert_eq!(r.devices.len(), 2);
        assert_eq!(r.samples[3].1.util_gpu_pct, Some(21));
    }

    #[test]
    fn headerless_logs_need_their_field_list() {
        utc();
        let log = "2026/11/29 00:00:00.000, 5 %, 1 MiB\n";
        assert!(matches!(parse(log, None), Err(LogError::NotALog(_))));
        let r = parse(log, Some("timestamp,utilization.gpu,memory.used")).unwrap();
        assert_eq!(r.samples[0].1.util_gpu_pct, Some(5));
    }

    #[test]
    fn compute_app_logs_become_process_polls() {
        utc();
        let log = "timestamp, gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n\
            2026/11/29 14:43:16.706, GPU-a, 1250, python3, 21090 MiB\n\
            2026/11/29 14:43:16.706, GPU-a, 1280, python3, [N/A]\n\
            2026/11/29 14:43:18.706, GPU-a, 1250, python3, 21090 MiB\n";
        let r = parse(log, None).unwrap();
        assert_eq!(r.process_polls.len(), 2);
        assert_eq!(r.process_polls[0].processes.len(), 2);
        assert_eq!(r.process_polls[0].processes[1].used_memory_bytes, None);
        assert_eq!(r.devices[0].uuid, "GPU-a");
    }

    #[test]
    fn refuses_what_is_not_a_log() {
        for text in ["", "\n\n", "hello, world\n1, 2\n", "{\"json\": true}"] {
            assert!(matches!(parse(text, None), Err(LogError::NotALog(_))), "{text:?}");
        }
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    const HEADER: &str = "timestamp, index, name, uuid, utilization.gpu [%], memory.used [MiB], power.draw [W], pstate, clocks_event_reasons.active, fan.speed [%]";

    proptest! {
        /// Any text is imported or refused; never a panic.
        #[test]
        fn never_panics(text in "\\PC*") {
            let _ = parse(&text, None);
        }

        /// Lines that look nearly like a log (real cells shuffled, cut and mixed with junk) never
        /// panic, and every line is either a row, a header or reported as malformed.
        #[test]
        fn every_line_is_accounted_for(lines in proptest::collection::vec(
            proptest::collection::vec(prop_oneof![
                Just("2026/11/29 14:43:16.706".to_owned()), Just("0".to_owned()), Just("NVIDIA H200".to_owned()),
                Just("GPU-dc089148".to_owned()), Just("9 %".to_owned()), Just("21099 MiB".to_owned()), Just("98.44 W".to_owned()),
                Just("P0".to_owned()), Just("0x0000000000000004".to_owned()), Just("[N/A]".to_owned()),
                Just("[Not Supported]".to_owned()), "[ -~]{0,12}",
            ], 0..12),
            0..30,
        )) {
            let body: Vec<String> = lines.iter().map(|l| l.join(", ")).collect();
            let text = format!("{HEADER}\n{}", body.join("\n"));
            if let Ok(r) = parse(&text, None) {
                let nonblank = body.iter().filter(|l| !l.trim().is_empty()).count();
                let headers = body.iter().filter(|l| parse_header(l).is_some()).count();
                prop_assert_eq!(r.rows + r.malformed.len() + headers, nonblank);
            }
        }

        /// Fed in pieces cut at any line breaks, a log reads exactly as it does whole: the same
        /// rows, the same malformed line numbers.
        #[test]
        fn pieces_read_as_the_whole(
            rows in proptest::collection::vec(prop_oneof![
                Just("2026/11/29 14:43:16.706, 0, NVIDIA H200, GPU-a, 9 %, 21099 MiB, 98.44 W, P0, 0x0000000000000004, [N/A]"),
                Just("2026/11/29 14:43:16.906, 1, NVIDIA H200, GPU-b, 97 %, 1 MiB, 600.00 W, P0, 0x0, 30 %"),
                Just("2026/11/29 14:43:17.106, 0, NVIDIA H200, GPU-a, 9 %, broken"),
                Just(""),
                Just(HEADER),
            ], 1..40),
            crlf in any::<bool>(),
            size in 1usize..300,
        ) {
            let eol = if crlf { "\r\n" } else { "\n" };
            let text = format!("{HEADER}{eol}{}", rows.join(eol));
            let mut whole_reg = Registry::default();
            let mut whole_rows = Vec::new();
            let whole = parse_each(&text, None, &mut whole_reg, &mut |r| whole_rows.push(r));
            let mut reg = Registry::default();
            let mut piece_rows = Vec::new();
            let mut parser = LogParser::new(None, &mut reg).unwrap();
            for piece in pieces(text.as_bytes(), size) {
                prop_assert!(piece.ends_with(b"\n") || text.as_bytes().ends_with(piece));
                parser.feed(std::str::from_utf8(piece).unwrap(), &mut |r| piece_rows.push(r));
            }
            prop_assert_eq!(parser.finish(), whole);
            prop_assert_eq!(piece_rows, whole_rows);
        }
    }
}
