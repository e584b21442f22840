//! The streaming parser: lines in, rows and a summary out.

use super::cells::{Col, absence, parse_header, split_into};
use super::rows::{app_row, gpu_row};
use super::{LogError, LogLayout, LogRow, LogSummary, Malformed, Registry};
use crate::fields::{app_field, gpu_field};

/// A log read a piece at a time: each piece ends at a line break (or the log's end), so a large
/// log is parsed as it is read or mapped in, and the first rows go on while the rest arrive.
pub struct LogParser<'r> {
    registry: &'r mut Registry,
    out: LogSummary,
    header: Option<Vec<(Col, String)>>,
    /// Whether the header is a `--query-compute-apps` one.
    apps: bool,
    /// By column of the header: whether its field has a unit, to tell `nounits` logs.
    unit_cols: Vec<bool>,
    tz: crate::timestamp::LocalStamps,
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
        let mut parser = Self {
            registry,
            out: LogSummary::default(),
            header: None,
            apps: false,
            unit_cols: Vec::new(),
            tz: Default::default(),
            lines_seen: 0,
            line_offset: 0,
            positional: 0,
            last_t: None,
        };
        if let Some(h) = header {
            parser.set_header(h);
        }
        Ok(parser)
    }

    /// The layout of the rows under the current header.
    fn layout(&mut self) -> &mut LogLayout {
        if self.apps { &mut self.out.apps } else { &mut self.out.gpu }
    }

    /// Starts reading rows under `h`, from a header line or from the given field list.
    fn set_header(&mut self, h: Vec<(Col, String)>) {
        for c in &h {
            if c.0 == Col::Ignored && !self.out.ignored_columns.contains(&c.1) {
                self.out.ignored_columns.push(c.1.clone());
            }
        }
        self.apps = is_apps(&h);
        let described: Vec<(String, bool)> = h
            .iter()
            .map(|(col, name)| match col {
                Col::Gpu(_) => gpu_field(name).map(|f| (f.canonical.to_owned(), f.unit.is_some())),
                Col::App(_) => app_field(name).map(|f| (f.canonical.to_owned(), f.unit.is_some())),
                Col::Ignored => None,
            })
            .zip(&h)
            .map(|(d, (_, name))| d.unwrap_or_else(|| (name.clone(), false)))
            .collect();
        self.unit_cols = described.iter().map(|d| d.1).collect();
        if self.apps || h.iter().any(|c| matches!(c.0, Col::Gpu(_))) {
            self.layout().fields = described.into_iter().map(|d| d.0).collect();
        }
        self.header = Some(h);
        self.positional = 0;
        self.last_t = None;
    }

    /// Whether a row's cells carry units, from its first present cell of a field that has one.
    fn units_of(&self, cells: &[&str]) -> Option<bool> {
        cells.iter().zip(&self.unit_cols).find(|(c, unit)| **unit && absence(c).is_none()).map(|(c, _)| c.contains(' '))
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
                self.set_header(h);
                let layout = self.layout();
                layout.header_rows.push(layout.rows);
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
            if self.layout().units.is_none() {
                let units = self.units_of(&cells);
                self.layout().units = units;
            }
            self.layout().rows += 1;
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
            } else if out.malformed.is_empty() {
                "it has a header but no rows".to_owned()
            } else {
                format!("none of its {} lines could be read", out.malformed.len())
            };
            return Err(LogError::NotALog(why));
        }
        Ok(out)
    }
}

pub(super) fn is_apps(header: &[(Col, String)]) -> bool {
    header.iter().any(|c| matches!(c.0, Col::App(_)))
}
