//! Opening what a command reads: a recording, or an nvidia-smi CSV log imported on the fly.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::Context;
use gpulse_record::{Recording, RunMeta, Writer};
use gpulse_smi::log::{LogRow, LogSummary, Registry};

use crate::output::{SQLITE_MAGIC, TempPath};

/// Whether `path` is a SQLite file (a recording) rather than a text log.
pub fn is_recording(path: &Path) -> anyhow::Result<bool> {
    let mut head = [0u8; 16];
    let mut f = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let n = f.read(&mut head).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(n == 16 && head == SQLITE_MAGIC)
}

/// Reads a recording, an nvidia-smi log (imported into a temporary recording) or a trace, whole.
pub fn load(path: &Path) -> anyhow::Result<Recording> {
    let mut snapshots = Vec::new();
    let mut rec = load_each(path, &mut |s| snapshots.push(s))?;
    rec.snapshots = snapshots;
    Ok(rec)
}

/// Like [`load`], handing snapshots to `on_snapshot` one at a time instead of holding them.
/// Also reads gpulse's per-poll NVML trace format (`t_s,gpu,...`, the reference `gpm_*.csv`).
pub fn load_each(path: &Path, on_snapshot: &mut dyn FnMut(gpulse_model::Snapshot)) -> anyhow::Result<Recording> {
    if let Some(rec) = load_trace(path, on_snapshot)? {
        return Ok(rec);
    }
    if is_recording(path)? {
        let rec =
            gpulse_record::read_each(path, on_snapshot).with_context(|| format!("cannot read {}", path.display()))?;
        for w in &rec.warnings {
            eprintln!("gpulse: warning: {w}");
        }
        return Ok(rec);
    }
    let tmp = TempPath::in_temp_dir(path);
    let shown = format!("a temporary recording in {}", std::env::temp_dir().display());
    import_logs(&[path.to_path_buf()], None, &tmp.0).map_err(|e| tmp.hide(e, &shown))?;
    gpulse_record::read_each(&tmp.0, on_snapshot)
        .with_context(|| format!("cannot read the import of {}", path.display()))
        .map_err(|e| tmp.hide(e, &shown))
}

/// Replays a file in the trace format, if it is one.
fn load_trace(path: &Path, on_snapshot: &mut dyn FnMut(gpulse_model::Snapshot)) -> anyhow::Result<Option<Recording>> {
    let mut head = [0u8; 8];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .with_context(|| format!("cannot read {}", path.display()))?;
    if !head[..n].starts_with(b"t_s,gpu,") {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let rows = gpulse_model::trace::parse(&text).with_context(|| format!("{}", path.display()))?;
    let mut gpus: Vec<u32> = rows.iter().map(|r| r.gpu).collect();
    gpus.sort_unstable();
    gpus.dedup();
    // Step by the trace's own poll interval, so every poll is replayed once.
    let mut dts: Vec<f64> = rows
        .iter()
        .filter(|r| r.gpu == gpus[0])
        .map(|r| r.t_s)
        .collect::<Vec<_>>()
        .windows(2)
        .map(|w| w[1] - w[0])
        .collect();
    dts.sort_by(f64::total_cmp);
    let step = dts.get(dts.len() / 2).copied().unwrap_or(1.0);
    let devices: Vec<gpulse_model::DeviceInfo> =
        (0..=*gpus.last().unwrap_or(&0)).map(|i| gpulse_model::DeviceInfo { index: i, ..Default::default() }).collect();
    let mut replay = gpulse_sample::TraceReplay::new(&text, devices.clone(), Vec::new(), step)?;
    while let Ok(s) = gpulse_sample::Source::sample(&mut replay) {
        on_snapshot(s);
    }
    Ok(Some(Recording { devices, ..Default::default() }))
}

/// What an import read, for the user.
pub struct ImportSummary {
    pub rows: usize,
    pub gpus: usize,
    pub malformed: Vec<(PathBuf, gpulse_smi::log::Malformed)>,
    pub ignored_columns: Vec<String>,
}

/// Rows handed from the parsing thread to the writing one at a time.
const BATCH: usize = 8192;
/// Bytes of a log checked for UTF-8 and parsed at a time.
const PIECE_BYTES: usize = 4 << 20;

/// A log's bytes: mapped when it is a regular file (pages come in as the parser reaches them, with
/// no copy), read whole otherwise (a pipe).
enum LogBytes {
    Mapped(memmap2::Mmap),
    Read(Vec<u8>),
}

impl LogBytes {
    fn open(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::File::open(path)?;
        let meta = file.metadata()?;
        if meta.is_file() && meta.len() > 0 {
            // SAFETY: the map is only read. A log that is appended to while it is imported keeps
            // the length it had; one truncated meanwhile would fault, as it would for any reader
            // of a file cut under it.
            if let Ok(map) = unsafe { memmap2::MmapOptions::new().map(&file) } {
                let _ = map.advise(memmap2::Advice::Sequential);
                return Ok(Self::Mapped(map));
            }
        }
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut &file, &mut bytes)?;
        Ok(Self::Read(bytes))
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Self::Mapped(m) => m,
            Self::Read(v) => v,
        }
    }
}

/// Parses every log and writes one recording to `out` (which must not exist). One thread parses
/// while the other writes, and rows stream through in batches, so a log of any size imports in
/// bounded memory.
pub fn import_logs(logs: &[PathBuf], fields: Option<&str>, out: &Path) -> anyhow::Result<ImportSummary> {
    let texts: Vec<(PathBuf, LogBytes)> = logs
        .iter()
        .map(|p| LogBytes::open(p).map(|b| (p.clone(), b)).with_context(|| format!("cannot read {}", p.display())))
        .collect::<anyhow::Result<_>>()?;
    let meta = RunMeta {
        host: None,
        gpulse_version: env!("CARGO_PKG_VERSION").to_owned(),
        command: None,
        started_at_us: 0,
        source: format!(
            "nvidia-smi csv: {}",
            logs.iter().map(|l| l.display().to_string()).collect::<Vec<_>>().join(", ")
        ),
        interval_ms: None,
        extra: Default::default(),
    };
    let mut writer =
        Writer::create_bulk(out, &meta, &[]).with_context(|| format!("cannot create {}", out.display()))?;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<LogRow>>(4);
    let fields = fields.map(str::to_owned);
    let parser = std::thread::spawn(move || -> anyhow::Result<(Registry, Vec<(PathBuf, LogSummary)>)> {
        let mut registry = Registry::default();
        let mut summaries = Vec::new();
        for (path, bytes) in &texts {
            let mut batch = Vec::with_capacity(BATCH);
            let mut parser = gpulse_smi::log::LogParser::new(fields.as_deref(), &mut registry)
                .with_context(|| format!("{}", path.display()))?;
            // Pieces are checked for UTF-8 one at a time, so rows flow from the first one on.
            for piece in gpulse_smi::log::pieces(bytes.bytes(), PIECE_BYTES) {
                let text = std::str::from_utf8(piece)
                    .map_or_else(|_| String::from_utf8_lossy(piece), std::borrow::Cow::Borrowed);
                parser.feed(&text, &mut |row| {
                    batch.push(row);
                    if batch.len() == BATCH {
                        let _ = tx.send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)));
                    }
                });
            }
            let _ = tx.send(batch);
            let summary = parser.finish().with_context(|| format!("{}", path.display()))?;
            summaries.push((path.clone(), summary));
        }
        Ok((registry, summaries))
    });
    let mut first_t: Option<i64> = None;
    for batch in rx {
        for row in &batch {
            match row {
                LogRow::Gpu(t, _) => first_t = Some(first_t.map_or(*t, |f| f.min(*t))),
                LogRow::App(t, gpu, p) => writer.process_poll(*t, *gpu, std::slice::from_ref(p))?,
            }
        }
        writer.gpu_samples(batch.iter().filter_map(|r| match r {
            LogRow::Gpu(t, s) => Some((*t, s)),
            LogRow::App(..) => None,
        }))?;
    }
    let (registry, summaries) = parser.join().map_err(|_| anyhow::anyhow!("the log parser failed"))??;
    writer.set_devices(&registry.devices)?;
    writer.set_meta("started_at_us", &first_t.unwrap_or(0).to_string())?;
    let gpu_fields =
        summaries.iter().rev().map(|s| &s.1.gpu_fields).find(|f| !f.is_empty()).cloned().unwrap_or_default();
    if !gpu_fields.is_empty() {
        writer.set_meta("nvidia_smi_fields", &gpu_fields.join(","))?;
    }
    writer.finish()?;
    let mut summary =
        ImportSummary { rows: 0, gpus: registry.devices.len(), malformed: Vec::new(), ignored_columns: Vec::new() };
    for (path, s) in summaries {
        summary.rows += s.rows;
        summary.malformed.extend(s.malformed.into_iter().map(|m| (path.clone(), m)));
        summary.ignored_columns.extend(s.ignored_columns);
    }
    summary.ignored_columns.sort();
    summary.ignored_columns.dedup();
    Ok(summary)
}
