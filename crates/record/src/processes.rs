//! Every process listing a recording holds, row by row: what `--query-compute-apps` printed.

use std::path::Path;

use gpulse_model::ProcessRow;
use gpulse_model::ProcessSample;
use rusqlite::{Connection, OpenFlags};

use crate::RecordError;
use crate::units::bytes;

/// Every process of every stored listing, by time, then GPU, then PID. Listings are stored as
/// they were polled for an imported log, but only when they changed for a live recording.
pub fn read_process_rows(path: &Path) -> Result<Vec<ProcessRow>, RecordError> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    // A PID may be reused: the identity is the one first seen at or before the row.
    let mut stmt = conn.prepare(
        "SELECT g.t_ms, g.gpu, g.pid, g.used_mem_kib, g.sm_util_pct, g.mem_util_pct, \
         (SELECT p.name FROM processes p WHERE p.pid = g.pid AND p.first_ms <= g.t_ms ORDER BY p.first_ms DESC LIMIT 1) \
         FROM gpu_processes g ORDER BY g.t_ms, g.gpu, g.pid",
    )?;
    let rows = stmt
        .query_map([], |r| {
            Ok(ProcessRow {
                timestamp_us: crate::units::us(r.get::<_, i64>(0)?),
                gpu: r.get(1)?,
                process: ProcessSample {
                    pid: r.get(2)?,
                    used_memory_bytes: r.get::<_, Option<i64>>(3)?.map(bytes),
                    sm_util_pct: r.get(4)?,
                    mem_util_pct: r.get(5)?,
                    name: r.get(6)?,
                    ..ProcessSample::default()
                },
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}
