//! nvidia-smi CSV logs into a recording: one thread parses while the other writes.

use std::path::{Path, PathBuf};

use anyhow::Context;
use gpulse_record::{MetaKey, RunMeta, Writer};
use gpulse_smi::log::{LogLayout, LogRow, LogSummary, Registry};

/// The one line every command that reads a log prints per log with unreadable lines: how many,
/// and where the first ones are.
pub fn malformed_warning(path: &Path, lines: &[usize]) -> String {
    const SHOWN: usize = 5;
    let n = lines.len();
    let mut at: Vec<String> = lines.iter().take(SHOWN).map(ToString::to_string).collect();
    if n > SHOWN {
        at.push("…".into());
    }
    format!(
        "gpulse: warning: {n} malformed line{s} in {} skipped (line{s} {})",
        path.display(),
        at.join(", "),
        s = if n == 1 { "" } else { "s" }
    )
}

/// Prints [`malformed_warning`] for each log that had unreadable lines.
pub fn warn_malformed(malformed: &[(PathBuf, gpulse_smi::log::Malformed)]) {
    let mut by_log: Vec<(&Path, Vec<usize>)> = Vec::new();
    for (path, m) in malformed {
        match by_log.iter_mut().find(|(p, _)| p == path) {
            Some((_, lines)) => lines.push(m.line),
            None => by_log.push((path, vec![m.line])),
        }
    }
    for (path, lines) in by_log {
        eprintln!("{}", malformed_warning(path, &lines));
    }
}

/// What an import read, for the user.
pub struct ImportSummary {
    /// `--query-gpu` rows: one GPU sample each.
    pub gpu_rows: usize,
    /// `--query-compute-apps` rows: one process on one GPU at one poll each.
    pub app_rows: usize,
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
    // Each batch says whether it holds process rows, so the writer walks only those that do.
    let (tx, rx) = std::sync::mpsc::sync_channel::<(Vec<LogRow>, bool)>(4);
    // Written batches are emptied by the writing thread (the parsing one is the busier) and go
    // back to be refilled: their memory is allocated once, not faulted in and unmapped again for
    // every batch.
    let (back_tx, back_rx) = std::sync::mpsc::sync_channel::<Vec<LogRow>>(8);
    let fresh = move || back_rx.try_recv().unwrap_or_else(|_| Vec::with_capacity(BATCH));
    let fields = fields.map(str::to_owned);
    type Parsed = (Registry, Vec<(PathBuf, LogSummary)>, Option<i64>);
    let parser = std::thread::spawn(move || -> anyhow::Result<Parsed> {
        let mut registry = Registry::default();
        let mut summaries = Vec::new();
        // The first GPU sample's time, the recording's start.
        let mut first_t: Option<i64> = None;
        let mut apps = false;
        for (path, bytes) in &texts {
            let mut batch = fresh();
            let mut parser = gpulse_smi::log::LogParser::new(fields.as_deref(), &mut registry)
                .with_context(|| format!("{}", path.display()))?;
            // Pieces are checked for UTF-8 one at a time, so rows flow from the first one on.
            for piece in gpulse_smi::log::pieces(bytes.bytes(), PIECE_BYTES) {
                let text = std::str::from_utf8(piece)
                    .map_or_else(|_| String::from_utf8_lossy(piece), std::borrow::Cow::Borrowed);
                parser.feed(&text, &mut |row| {
                    match &row {
                        LogRow::Gpu(t, _) => first_t = Some(first_t.map_or(*t, |f| f.min(*t))),
                        LogRow::App(..) => apps = true,
                    }
                    batch.push(row);
                    if batch.len() == BATCH {
                        let _ = tx.send((std::mem::replace(&mut batch, fresh()), std::mem::take(&mut apps)));
                    }
                });
            }
            let _ = tx.send((batch, std::mem::take(&mut apps)));
            let summary = parser.finish().with_context(|| format!("{}", path.display()))?;
            summaries.push((path.clone(), summary));
        }
        Ok((registry, summaries, first_t))
    });
    for (mut batch, apps) in rx {
        if apps {
            for row in &batch {
                if let LogRow::App(t, gpu, p) = row {
                    writer.process_poll(*t, *gpu, std::slice::from_ref(p))?;
                }
            }
        }
        writer.gpu_samples(batch.iter().filter_map(|r| match r {
            LogRow::Gpu(t, s) => Some((*t, s)),
            LogRow::App(..) => None,
        }))?;
        batch.clear();
        let _ = back_tx.try_send(batch);
    }
    let (registry, summaries, first_t) = parser.join().map_err(|_| anyhow::anyhow!("the log parser failed"))??;
    writer.set_devices(&registry.devices)?;
    writer.set_meta(MetaKey::StartedAtUs, &first_t.unwrap_or(0).to_string())?;
    let (mut gpu, mut apps) = (LogLayout::default(), LogLayout::default());
    for (_, s) in &summaries {
        gpu.extend(&s.gpu);
        apps.extend(&s.apps);
    }
    use MetaKey::*;
    let keys = [
        (&gpu, [NvidiaSmiFields, NvidiaSmiFormat, NvidiaSmiHeaderRows]),
        (&apps, [NvidiaSmiAppFields, NvidiaSmiAppFormat, NvidiaSmiAppHeaderRows]),
    ];
    for (layout, keys) in keys {
        if layout.rows > 0 && !layout.fields.is_empty() {
            write_layout(&mut writer, keys, layout)?;
        }
    }
    writer.finish()?;
    let mut summary = ImportSummary {
        gpu_rows: gpu.rows,
        app_rows: apps.rows,
        gpus: registry.devices.len(),
        malformed: Vec::new(),
        ignored_columns: Vec::new(),
    };
    for (path, s) in summaries {
        summary.malformed.extend(s.malformed.into_iter().map(|m| (path.clone(), m)));
        summary.ignored_columns.extend(s.ignored_columns);
    }
    summary.ignored_columns.sort();
    summary.ignored_columns.dedup();
    Ok(summary)
}

/// Stores how a log was written (its fields, format and header rows, under `keys` in that
/// order), so that `gpulse export` writes it back the same way.
fn write_layout(writer: &mut Writer, keys: [MetaKey; 3], layout: &LogLayout) -> anyhow::Result<()> {
    let [fields, format, header_rows] = keys;
    writer.set_meta(fields, &layout.fields.join(","))?;
    writer.set_meta(format, &layout.format().spec())?;
    let rows: Vec<String> = layout.header_rows.iter().map(ToString::to_string).collect();
    writer.set_meta(header_rows, &rows.join(","))?;
    Ok(())
}
