//! The metric table's readings in the recording (`gpu_fields`): a row per change of one
//! metric's reading, read back "as of" each sample's time.

use std::collections::HashMap;

use gpulse_model::{Absence, GpuSample, TableReadings, table_metric};
use rusqlite::{Connection, params};

use crate::RecordError;

/// Writes the readings of `g` at `t` (ms) that differ from `last`, the ones last written.
pub(crate) fn write(conn: &Connection, last: &mut TableReadings, t: i64, g: &GpuSample) -> Result<(), RecordError> {
    for &(key, reading) in &g.table.0 {
        if last.get(key) == Some(reading) {
            continue;
        }
        let absent = reading.err().map(serde_json::to_value).transpose()?;
        conn.prepare_cached("INSERT OR REPLACE INTO gpu_fields VALUES (?1, ?2, ?3, ?4, ?5)")?.execute(params![
            t,
            g.gpu_index,
            key,
            reading.ok(),
            absent.as_ref().and_then(serde_json::Value::as_str)
        ])?;
        last.set(key, reading);
    }
    Ok(())
}

/// One GPU's changes in time order, how many a reader has applied, and the readings they make.
type Line = (Vec<(i64, gpulse_model::TableReading)>, usize, TableReadings);

/// Every GPU's changes, read once and applied as the reader moves on in time.
pub(crate) struct Changes {
    by_gpu: HashMap<u32, Line>,
}

impl Changes {
    /// Reads the whole table; a recording made before it existed has no changes.
    pub(crate) fn read(conn: &Connection) -> Result<Self, RecordError> {
        let mut by_gpu: HashMap<u32, Line> = HashMap::new();
        let exists: bool = conn.query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'gpu_fields'",
            [],
            |r| r.get(0),
        )?;
        if !exists {
            return Ok(Self { by_gpu });
        }
        let mut stmt = conn.prepare("SELECT t_ms, gpu, key, value, absent FROM gpu_fields ORDER BY gpu, t_ms")?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let key: String = r.get(2)?;
            // A key a later gpulse added is skipped, not misread.
            let Some(m) = table_metric(&key) else { continue };
            let reading = match r.get::<_, Option<i64>>(3)? {
                Some(v) => Ok(v),
                None => Err(r
                    .get::<_, Option<String>>(4)?
                    .and_then(|a| serde_json::from_value::<Absence>(serde_json::Value::String(a)).ok())
                    .unwrap_or(Absence::NotAvailable)),
            };
            by_gpu.entry(r.get(1)?).or_default().0.push((r.get(0)?, (m.key, reading)));
        }
        Ok(Self { by_gpu })
    }

    /// The readings of `gpu` as of `t` (ms), applying the changes up to it.
    pub(crate) fn as_of(&mut self, gpu: u32, t: i64) -> TableReadings {
        let Some((line, pos, now)) = self.by_gpu.get_mut(&gpu) else { return TableReadings::default() };
        while let Some(&(_, (key, reading))) = line.get(*pos).filter(|c| c.0 <= t) {
            now.set(key, reading);
            *pos += 1;
        }
        now.clone()
    }
}
