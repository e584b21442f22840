//! Opening what a command reads: a recording, or an nvidia-smi CSV log imported on the fly.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::Context;
use gpulse_record::{Recording, RunMeta, Writer};
use gpulse_smi::log::LogImport;

/// The first bytes of every SQLite database.
const SQLITE_MAGIC: &[u8] = b"SQLite format 3\0";

/// Whether `path` is a SQLite file (a recording) rather than a text log.
pub fn is_recording(path: &Path) -> anyhow::Result<bool> {
    let mut head = [0u8; 16];
    let mut f = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let n = f.read(&mut head).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(n == 16 && head == SQLITE_MAGIC)
}

/// Reads a recording, or imports an nvidia-smi log into a temporary recording and reads that.
pub fn load(path: &Path) -> anyhow::Result<Recording> {
    if is_recording(path)? {
        return gpulse_record::read(path).with_context(|| format!("cannot read {}", path.display()));
    }
    let tmp = TempPath::in_temp_dir(path);
    import_logs(&[path.to_path_buf()], None, &tmp.0)?;
    gpulse_record::read(&tmp.0).with_context(|| format!("cannot read the import of {}", path.display()))
}

/// A file that is removed when dropped.
pub struct TempPath(pub PathBuf);

impl TempPath {
    /// A fresh path beside `target`, so that renaming it onto `target` is atomic.
    pub fn beside(target: &Path) -> Self {
        let dir = target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        Self(dir.join(Self::name(target)))
    }

    /// A fresh path in the system's temporary directory.
    pub fn in_temp_dir(like: &Path) -> Self {
        Self(std::env::temp_dir().join(Self::name(like)))
    }

    fn name(like: &Path) -> String {
        let name = like.file_name().map_or_else(|| "gpulse".into(), |n| n.to_string_lossy().into_owned());
        let ns = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        format!(".{name}.{}.{ns}.tmp", std::process::id())
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let mut p = self.0.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
    }
}

/// What an import read, for the user.
pub struct ImportSummary {
    pub rows: usize,
    pub gpus: usize,
    pub malformed: Vec<(PathBuf, gpulse_smi::log::Malformed)>,
    pub ignored_columns: Vec<String>,
}

/// Parses every log and writes one recording to `out` (which must not exist).
pub fn import_logs(logs: &[PathBuf], fields: Option<&str>, out: &Path) -> anyhow::Result<ImportSummary> {
    let mut parsed: Vec<(PathBuf, LogImport)> = Vec::new();
    for path in logs {
        let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let text = String::from_utf8_lossy(&bytes);
        let log = gpulse_smi::log::parse(&text, fields).with_context(|| format!("{}", path.display()))?;
        parsed.push((path.clone(), log));
    }
    // Devices are one set across files, matched by UUID, then bus id, then index.
    let mut devices: Vec<gpulse_model::DeviceInfo> = Vec::new();
    let mut remaps: Vec<Vec<u32>> = Vec::new();
    for (_, log) in &parsed {
        let mut remap = Vec::new();
        for d in &log.devices {
            let same = devices.iter().position(|e| {
                (!d.uuid.is_empty() && e.uuid == d.uuid)
                    || (d.uuid.is_empty() && d.pci_bus_id.is_some() && e.pci_bus_id == d.pci_bus_id)
                    || (d.uuid.is_empty() && d.pci_bus_id.is_none() && e.index == d.index)
            });
            let pos = same.unwrap_or_else(|| {
                devices.push(d.clone());
                devices.len() - 1
            });
            let e = &mut devices[pos];
            if e.uuid.is_empty() {
                e.uuid.clone_from(&d.uuid);
            }
            if e.name.is_empty() {
                e.name.clone_from(&d.name);
            }
            e.pci_bus_id = e.pci_bus_id.clone().or_else(|| d.pci_bus_id.clone());
            e.memory_total_bytes = e.memory_total_bytes.or(d.memory_total_bytes);
            e.power_limit_mw = e.power_limit_mw.or(d.power_limit_mw);
            remap.push(pos as u32);
        }
        remaps.push(remap);
    }
    // Keep the logs' own GPU indices unless two devices claim one.
    let mut seen = std::collections::HashSet::new();
    if !devices.iter().all(|d| seen.insert(d.index)) {
        for (i, d) in devices.iter_mut().enumerate() {
            d.index = i as u32;
        }
    }
    let remaps: Vec<Vec<u32>> =
        remaps.iter().map(|r| r.iter().map(|&pos| devices[pos as usize].index).collect()).collect();
    let gpu_fields = parsed.iter().rev().map(|p| &p.1.gpu_fields).find(|f| !f.is_empty()).cloned().unwrap_or_default();
    let meta = RunMeta {
        host: None,
        gpulse_version: env!("CARGO_PKG_VERSION").to_owned(),
        command: None,
        started_at_us: parsed.iter().flat_map(|p| p.1.samples.first().map(|s| s.0)).min().unwrap_or(0),
        source: format!(
            "nvidia-smi csv: {}",
            logs.iter().map(|l| l.display().to_string()).collect::<Vec<_>>().join(", ")
        ),
        interval_ms: None,
        extra: [("nvidia_smi_fields".to_owned(), gpu_fields.join(","))]
            .into_iter()
            .filter(|e| !e.1.is_empty())
            .collect(),
    };
    let mut writer =
        Writer::create(out, &meta, &devices).with_context(|| format!("cannot create {}", out.display()))?;
    // Samples in time order; a stable sort keeps each file's order for equal times.
    let mut samples: Vec<(i64, gpulse_model::GpuSample)> = Vec::new();
    let mut polls = Vec::new();
    let mut summary =
        ImportSummary { rows: 0, gpus: devices.len(), malformed: Vec::new(), ignored_columns: Vec::new() };
    for ((path, log), remap) in parsed.into_iter().zip(&remaps) {
        summary.rows += log.rows;
        summary.malformed.extend(log.malformed.into_iter().map(|m| (path.clone(), m)));
        summary.ignored_columns.extend(log.ignored_columns);
        let at = |g: u32| log.devices.iter().position(|d| d.index == g).map_or(g, |p| remap[p]);
        samples.extend(log.samples.into_iter().map(|(t, mut s)| {
            s.gpu_index = at(s.gpu_index);
            (t, s)
        }));
        polls.extend(log.process_polls.into_iter().map(|mut p| {
            p.gpu_index = at(p.gpu_index);
            p
        }));
    }
    samples.sort_by_key(|s| s.0);
    polls.sort_by_key(|p| p.timestamp_us);
    let mut i = 0;
    while i < samples.len() {
        let t = samples[i].0;
        let mut gpus = Vec::new();
        while i < samples.len() && samples[i].0 == t {
            gpus.push(samples[i].1.clone());
            i += 1;
        }
        writer.snapshot(&gpulse_model::Snapshot { timestamp_us: t, gpus })?;
    }
    for p in &polls {
        writer.process_poll(p.timestamp_us, p.gpu_index, &p.processes)?;
    }
    writer.finish()?;
    summary.ignored_columns.sort();
    summary.ignored_columns.dedup();
    Ok(summary)
}
