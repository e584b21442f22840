//! What gpulse reads: a recording, an nvidia-smi CSV log (imported into a temporary recording on
//! the fly, or for good with [`import_logs`]) or a per-poll NVML trace, opened by what it holds
//! rather than by its name. What a reader must be told of its input (malformed lines, a missing
//! `-wal` file) goes to stderr, one line each, as every command prints it.

mod describe;
mod import;
mod temp;

use std::io::Read;
use std::path::Path;

use anyhow::Context;
use gpulse_record::Recording;

pub use describe::describe;
pub use import::{ImportSummary, import_logs, malformed_warning, warn_malformed};
pub use temp::TempPath;

pub use gpulse_record::SQLITE_MAGIC;

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
    let rec = with_recording(path, &mut |db| gpulse_record::read_each(db, on_snapshot).map_err(Into::into))?;
    for w in &rec.warnings {
        eprintln!("gpulse: warning: {w}");
    }
    Ok(rec)
}

/// Hands `read` the recording `path` is, or, for an nvidia-smi log, a temporary import of it
/// (removed afterwards). Lines of the log that cannot be read are warned about on stderr.
pub fn with_recording<T>(path: &Path, read: &mut dyn FnMut(&Path) -> anyhow::Result<T>) -> anyhow::Result<T> {
    if is_recording(path)? {
        return read(path).with_context(|| format!("cannot read {}", path.display()));
    }
    let tmp = TempPath::in_temp_dir(path);
    // The temporary file's name is never the user's business; where it was is.
    let shown = format!("a temporary recording in {}", std::env::temp_dir().display());
    let summary = import_logs(&[path.to_path_buf()], None, &tmp.0).map_err(|e| tmp.hide(e, &shown))?;
    warn_malformed(&summary.malformed);
    read(&tmp.0)
        .with_context(|| format!("cannot read the import of {}", path.display()))
        .map_err(|e| tmp.hide(e, &shown))
}

/// Whether `path` is in gpulse's per-poll NVML trace format (`t_s,gpu,...`).
pub fn is_trace(path: &Path) -> anyhow::Result<bool> {
    let mut head = [0u8; 8];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(head[..n].starts_with(b"t_s,gpu,"))
}

/// Replays a file in the trace format, if it is one.
fn load_trace(path: &Path, on_snapshot: &mut dyn FnMut(gpulse_model::Snapshot)) -> anyhow::Result<Option<Recording>> {
    if !is_trace(path)? {
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
    while let Some(s) = gpulse_sample::until_ended(gpulse_sample::Source::sample(&mut replay))? {
        on_snapshot(s);
    }
    Ok(Some(Recording { devices, ..Default::default() }))
}
