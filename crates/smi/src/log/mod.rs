//! Reading logs that nvidia-smi's CSV mode wrote: `--query-gpu` and `--query-compute-apps`,
//! any fields in any order, with or without header or units, appended across restarts (headers
//! repeat), several GPUs interleaved, CRLF, and a last line cut short by a crash.
//!
//! Lines that cannot be read are counted with their line numbers, never dropped silently.

mod cells;
mod parser;
mod rows;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use gpulse_model::{DeviceInfo, GpuSample, ProcessSample};

pub use parser::LogParser;

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
    /// How the `--query-gpu` rows were written.
    pub gpu: LogLayout,
    /// How the `--query-compute-apps` rows were written.
    pub apps: LogLayout,
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

/// How one kind of rows (`--query-gpu` or `--query-compute-apps`) was written, so that an
/// export can write them back the same way.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogLayout {
    /// Canonical field names of the last header, or of the field list given for a `noheader` log.
    pub fields: Vec<String>,
    /// For each header line, how many rows of this kind came before it: `[0]` for one header on
    /// top, `[0, 120]` for a log appended to after a restart, empty for `noheader`.
    pub header_rows: Vec<usize>,
    /// Whether values carry their units (`98.44 W`); `None` when no cell could tell.
    pub units: Option<bool>,
    /// Rows of this kind read.
    pub rows: usize,
}

impl LogLayout {
    /// Appends `next`, a later log of the same kind, as `cat` would: its headers keep their places.
    pub fn extend(&mut self, next: &LogLayout) {
        if !next.fields.is_empty() {
            self.fields.clone_from(&next.fields);
        }
        self.header_rows.extend(next.header_rows.iter().map(|r| r + self.rows));
        self.units = self.units.or(next.units);
        self.rows += next.rows;
    }

    /// The `--format` the rows were written with, as far as the log shows it.
    pub fn format(&self) -> crate::CsvFormat {
        crate::CsvFormat { header: !self.header_rows.is_empty(), units: self.units.unwrap_or(true) }
    }
}

/// What reading a log found, apart from its rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogSummary {
    pub gpu: LogLayout,
    pub apps: LogLayout,
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
        gpu: summary.gpu,
        apps: summary.apps,
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
