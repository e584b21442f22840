//! Reading a recording back into the model: the inverse of [`crate::Writer`].

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use gpulse_model::{
    Call, Column, DeviceInfo, DeviceStatus, GpmMetrics, GpuProcessClass, GpuSample, HostSample, ProcessSample,
    Snapshot, TreeProcess, TreeSample, UtilSample,
};
use rusqlite::{Connection, Row};

use crate::query::rows;
use crate::schema::SCHEMA_VERSION;
use crate::units::{bytes, pct, us};
use crate::{Event, EventKind, Marker, MarkerKind, MetaKey, RecordError, RunData};

/// A recording read back: the run's data, and what its reader should be told.
pub type Recording = RunData;

/// Opens `path` read-only (also while it is being written) and reads it whole.
pub fn read(path: &Path) -> Result<Recording, RecordError> {
    let mut snapshots = Vec::new();
    let mut rec = read_each(path, &mut |s| snapshots.push(s))?;
    rec.snapshots = snapshots;
    Ok(rec)
}

/// Reads everything but the snapshots, which go to `on_snapshot` one at a time in time order:
/// a day of 8 GPUs need not be held in memory as snapshots. The returned recording's
/// `snapshots` is empty.
pub fn read_each(path: &Path, on_snapshot: &mut dyn FnMut(Snapshot)) -> Result<Recording, RecordError> {
    let found = crate::check::inspect(path)?;
    let result =
        crate::check::open(path, &found).map_err(RecordError::from).and_then(|conn| read_open(conn, path, on_snapshot));
    match result {
        Ok(mut rec) => {
            // A finished recording has its end; one in WAL mode without it and without its log
            // may lack what followed the last checkpoint.
            if !rec.events.iter().any(|e| e.kind == EventKind::Stop) {
                rec.warnings.extend(found.warning());
            }
            Ok(rec)
        }
        Err(e) => Err(found.explain(e)),
    }
}

fn read_open(conn: Connection, path: &Path, on_snapshot: &mut dyn FnMut(Snapshot)) -> Result<Recording, RecordError> {
    let name = path.display().to_string();
    let version: Option<String> = conn
        .query_row("SELECT value FROM meta WHERE key = ?1", [MetaKey::SchemaVersion.as_str()], |r| r.get(0))
        .map_err(|e| match e {
            // Another program's database, or no key: not ours. Anything else is damage.
            rusqlite::Error::QueryReturnedNoRows => RecordError::NotARecording(name.clone()),
            rusqlite::Error::SqliteFailure(_, Some(ref m)) if m.starts_with("no such table") => {
                RecordError::NotARecording(name.clone())
            }
            e => RecordError::Sqlite(e),
        })?;
    let found: u32 = version.and_then(|v| v.parse().ok()).ok_or_else(|| RecordError::NotARecording(name.clone()))?;
    if found > SCHEMA_VERSION {
        return Err(RecordError::TooNew { path: name, found, supported: SCHEMA_VERSION });
    }
    let meta: BTreeMap<String, String> =
        rows(&conn, "SELECT key, value FROM meta", |r| Ok((r.get(0)?, r.get(1)?)))?.into_iter().collect();
    let devices = rows(&conn, "SELECT info_json FROM devices ORDER BY gpu", |r| r.get::<_, String>(0))?
        .iter()
        .map(|j| serde_json::from_str(j))
        .collect::<Result<Vec<DeviceInfo>, _>>()?;
    snapshots(&conn, on_snapshot)?;
    let host = rows(&conn, "SELECT * FROM host_samples ORDER BY t_ms", |r| {
        let cores: Option<Vec<u8>> = r.get(4)?;
        // Swap came later than schema 3 (a column added at the end); an older recording has none.
        let swap = |i: usize| -> rusqlite::Result<Option<u64>> {
            Ok(if r.as_ref().column_count() > i { r.get::<_, Option<i64>>(i)?.map(bytes) } else { None })
        };
        Ok(HostSample {
            timestamp_us: us(r.get::<_, i64>(0)?),
            cpu_busy_pct: r.get::<_, Option<i64>>(1)?.map(|v| pct(v) as f32),
            cpu_iowait_pct: r.get::<_, Option<i64>>(2)?.map(|v| pct(v) as f32),
            cpu_steal_pct: r.get::<_, Option<i64>>(3)?.map(|v| pct(v) as f32),
            cpu_core_busy_pct: cores
                .unwrap_or_default()
                .into_iter()
                .map(|c| (c != crate::schema::CORE_UNKNOWN).then_some(f32::from(c)))
                .collect(),
            memory_used_bytes: r.get::<_, Option<i64>>(5)?.map(bytes),
            memory_total_bytes: r.get::<_, Option<i64>>(6)?.map(bytes),
            load_1m: r.get::<_, Option<i64>>(7)?.map(|v| v as f32 / 100.0),
            swap_used_bytes: swap(8)?,
            swap_total_bytes: swap(9)?,
        })
    })?;
    let root = meta.get(MetaKey::RootPid.as_str()).and_then(|p: &String| p.parse().ok());
    let trees = trees(&conn, root)?;
    let events = rows(&conn, "SELECT t_ms, kind, payload FROM events ORDER BY t_ms, rowid", |r| {
        let payload: String = r.get(2)?;
        Ok(Event {
            t_ms: r.get(0)?,
            kind: EventKind::parse(&r.get::<_, String>(1)?),
            payload: serde_json::from_str(&payload).unwrap_or(serde_json::Value::String(payload)),
        })
    })?;
    let has_markers: bool =
        conn.query_row("SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'markers'", [], |r| {
            r.get(0)
        })?;
    let markers = if has_markers {
        // Schema-2 files may lack `count` (added in schema 3): every row stood for one mark.
        let has_count: bool =
            conn.query_row("SELECT count(*) > 0 FROM pragma_table_info('markers') WHERE name = 'count'", [], |r| {
                r.get(0)
            })?;
        let sql = if has_count {
            "SELECT t_us, pid, kind, name, dur_us, count FROM markers ORDER BY t_us, rowid"
        } else {
            "SELECT t_us, pid, kind, name, dur_us, 1 FROM markers ORDER BY t_us, rowid"
        };
        rows(&conn, sql, |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, u32>(1)?, r.get::<_, String>(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
        })?
        .into_iter()
        // Kinds a later gpulse adds are skipped, not misread.
        .filter_map(|(t_us, pid, kind, name, dur_us, count)| {
            Some(Marker { t_us, pid, kind: MarkerKind::parse(&kind)?, name, dur_us, count })
        })
        .collect()
    } else {
        Vec::new()
    };
    let stacks = crate::stacks::read(&conn, &name)?;
    Ok(Recording { meta, devices, snapshots: Vec::new(), host, trees, events, markers, stacks, warnings: Vec::new() })
}

/// Rows keyed by `(t_ms, gpu)` in time order, for as-of joins.
type Timeline<T> = HashMap<u32, Vec<(i64, T)>>;

/// The latest entry at or before `t`, advancing `cursor`.
fn as_of<'a, T>(line: Option<&'a Vec<(i64, T)>>, cursor: &mut usize, t: i64) -> Option<&'a T> {
    let line = line?;
    while *cursor + 1 < line.len() && line[*cursor + 1].0 <= t {
        *cursor += 1;
    }
    line.get(*cursor).filter(|e| e.0 <= t).map(|e| &e.1)
}

fn timeline<T>(
    conn: &Connection,
    sql: &str,
    mut f: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Timeline<T>, RecordError> {
    let mut out: Timeline<T> = HashMap::new();
    for (t, gpu, v) in rows(conn, sql, |r| Ok((r.get::<_, i64>(0)?, r.get::<_, u32>(1)?, f(r)?)))? {
        out.entry(gpu).or_default().push((t, v));
    }
    Ok(out)
}

/// The metric table's columns of `place` that `table` has, with their calls: a column an older
/// file lacks reads as absent.
fn kept(
    conn: &Connection,
    table: &str,
    place: gpulse_model::Place,
) -> Result<Vec<(&'static Call, Column)>, RecordError> {
    let present: Vec<String> = rows(conn, &format!("SELECT name FROM pragma_table_info('{table}')"), |r| r.get(0))?;
    Ok(gpulse_model::columns_in(place).filter(|(_, c)| present.iter().any(|p| p == c.name)).collect())
}

/// Hands every snapshot to `emit` in time order, holding only one at a time.
fn snapshots(conn: &Connection, emit: &mut dyn FnMut(Snapshot)) -> Result<(), RecordError> {
    let opt_u32 = |r: &Row<'_>, i: usize| r.get::<_, Option<u32>>(i);
    // The metric table's columns, by name.
    let state_columns = kept(conn, "gpu_state", gpulse_model::Place::State)?;
    let named = |cols: &[(&Call, Column)]| cols.iter().map(|(_, c)| format!(", {}", c.name)).collect::<String>();
    let sql = format!("SELECT t_ms, gpu, absent_json{} FROM gpu_state ORDER BY t_ms", named(&state_columns));
    let state = timeline(conn, &sql, |r| {
        let values: Vec<Option<i64>> = (0..state_columns.len()).map(|i| r.get(3 + i)).collect::<Result<_, _>>()?;
        Ok((values, r.get::<_, Option<String>>(2)?))
    })?;
    // GPM windows stream beside the samples (both in time order): only the latest window of each
    // GPU is held.
    // Columns by name: a metric whose column an older file lacks is absent.
    let present: Vec<String> = rows(conn, "SELECT name FROM pragma_table_info('gpm_samples')", |r| r.get(0))?;
    let gpm_fields: Vec<&gpulse_model::GpmField> =
        gpulse_model::GPM_FIELDS.iter().filter(|f| present.iter().any(|c| c == f.column)).collect();
    let columns: String = gpm_fields.iter().map(|f| format!(", {}", f.column)).collect();
    let mut gpm_stmt =
        conn.prepare(&format!("SELECT t_ms, gpu, interval_ms{columns} FROM gpm_samples ORDER BY t_ms, gpu"))?;
    let mut gpm_rows = gpm_stmt.query([])?;
    let read_gpm = |r: &Row<'_>| -> rusqlite::Result<(i64, u32, GpmMetrics)> {
        let mut m = GpmMetrics { interval_ms: r.get::<_, i64>(2)? as f64, ..Default::default() };
        for (i, f) in gpm_fields.iter().enumerate() {
            let stored = r.get::<_, Option<i64>>(3 + i)?;
            (f.set)(
                &mut m,
                stored.map(|v| match f.unit {
                    gpulse_model::GpmUnit::Pct => pct(v),
                    gpulse_model::GpmUnit::MibPerS => v as f64 * 1024.0,
                }),
            );
        }
        Ok((r.get::<_, i64>(0).unwrap_or(0), r.get::<_, u32>(1).unwrap_or(0), m))
    };
    let mut latest_gpm: HashMap<u32, GpmMetrics> = HashMap::new();
    let mut pending_gpm: Option<(i64, u32, GpmMetrics)> = None;
    let polls = timeline(conn, "SELECT t_ms, gpu FROM process_polls ORDER BY t_ms", |_| Ok(()))?;
    // pid → (name, command line, user)
    type Identity = (Option<String>, Option<String>, Option<String>);
    let identities: HashMap<u32, Identity> =
        rows(conn, "SELECT pid, name, cmdline, user FROM processes ORDER BY first_ms", |r| {
            Ok((r.get::<_, u32>(0)?, (r.get(1)?, r.get(2)?, r.get(3)?)))
        })?
        .into_iter()
        .collect();
    let mut procs: HashMap<(i64, u32), Vec<ProcessSample>> = HashMap::new();
    for (t, gpu, p) in rows(conn, "SELECT * FROM gpu_processes ORDER BY t_ms, gpu, pid", |r| {
        let class: Option<String> = r.get(6)?;
        let pid: u32 = r.get(2)?;
        let id = identities.get(&pid).cloned().unwrap_or_default();
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, u32>(1)?,
            ProcessSample {
                pid,
                used_memory_bytes: r.get::<_, Option<i64>>(3)?.map(bytes),
                name: id.0,
                cmdline: id.1,
                user: id.2,
                sm_util_pct: opt_u32(r, 4)?,
                mem_util_pct: opt_u32(r, 5)?,
                class: class.as_deref().and_then(GpuProcessClass::parse),
                workload: None,
            },
        ))
    })? {
        procs.entry((t, gpu)).or_default().push(p);
    }
    let workloads = crate::workloads::Timelines::read(conn)?;
    let mut table = crate::table::Changes::read(conn)?;
    let hires = timeline(conn, "SELECT t_ms, gpu, util_pct FROM gpu_util_hires ORDER BY t_ms", |r| r.get::<_, u32>(2))?;
    let base_columns = kept(conn, "gpu_samples", gpulse_model::Place::Base)?;
    let sql = format!("SELECT t_ms, gpu, lost{} FROM gpu_samples ORDER BY id", named(&base_columns));
    let mut stmt = conn.prepare(&sql)?;
    let mut base = stmt.query([])?;
    let read_row = |r: &Row<'_>| -> rusqlite::Result<(i64, GpuSample)> {
        let t: i64 = r.get(0)?;
        let mut g = GpuSample {
            gpu_index: r.get(1)?,
            status: if r.get::<_, Option<i64>>(2)?.is_some() { DeviceStatus::Lost } else { DeviceStatus::Ok },
            ..GpuSample::default()
        };
        for (i, (call, column)) in base_columns.iter().enumerate() {
            if let Some(v) = r.get::<_, Option<i64>>(3 + i)? {
                (call.write)(&mut g, column.scale.load(v));
            }
        }
        Ok((t, g))
    };
    let (mut state_pos, mut poll_pos) = (HashMap::new(), HashMap::new());
    let mut hires_pos: HashMap<u32, usize> = HashMap::new();
    let mut current: Option<Snapshot> = None;
    while let Some(row) = base.next()? {
        let (t, mut g) = read_row(row)?;
        let gpu = g.gpu_index;
        if let Some((v, absent)) = as_of(state.get(&gpu), state_pos.entry(gpu).or_insert(0), t) {
            for ((call, column), value) in state_columns.iter().zip(v) {
                if let Some(value) = value {
                    (call.write)(&mut g, column.scale.load(*value));
                }
            }
            // Free memory is what the total leaves: worked out, not kept.
            g.memory_free_bytes = g
                .memory_total_bytes
                .zip(g.memory_used_bytes)
                .map(|(tot, used)| tot.saturating_sub(used).saturating_sub(g.memory_reserved_bytes.unwrap_or(0)));
            if let Some(a) = absent {
                g.absent = serde_json::from_str(a)?;
            }
        }
        loop {
            if pending_gpm.is_none() {
                pending_gpm = match gpm_rows.next()? {
                    Some(r) => Some(read_gpm(r)?),
                    None => break,
                };
            }
            match pending_gpm.take() {
                Some((gt, ggpu, m)) if gt <= t => {
                    latest_gpm.insert(ggpu, m);
                }
                other => {
                    pending_gpm = other;
                    break;
                }
            }
        }
        g.gpm = latest_gpm.get(&gpu).cloned().map(Box::new);
        g.table = table.as_of(gpu, t);
        let poll = poll_pos.entry(gpu).or_insert(0);
        if as_of(polls.get(&gpu), poll, t).is_some() {
            let poll_t = polls[&gpu][*poll].0;
            g.processes = procs.get(&(poll_t, gpu)).cloned().unwrap_or_default();
            for p in &mut g.processes {
                p.workload = workloads.at(p.pid, t);
            }
        }
        if let Some(line) = hires.get(&gpu) {
            let pos = hires_pos.entry(gpu).or_insert(0);
            while *pos < line.len() && line[*pos].0 <= t {
                g.util_gpu_samples.push(UtilSample { timestamp_us: us(line[*pos].0), util_pct: line[*pos].1 });
                *pos += 1;
            }
        }
        match current.as_mut() {
            Some(s) if s.timestamp_us == us(t) => s.gpus.push(g),
            _ => {
                if let Some(done) = current.replace(Snapshot { timestamp_us: us(t), gpus: vec![g] }) {
                    emit(done);
                }
            }
        }
    }
    if let Some(done) = current {
        emit(done);
    }
    Ok(())
}

fn trees(conn: &Connection, root: Option<u32>) -> Result<Vec<TreeSample>, RecordError> {
    let cmdlines: HashMap<u32, Option<String>> =
        rows(conn, "SELECT pid, cmdline FROM processes", |r| Ok((r.get::<_, u32>(0)?, r.get(1)?)))?
            .into_iter()
            .collect();
    let mut out: Vec<TreeSample> = Vec::new();
    for (t, p) in rows(conn, "SELECT * FROM tree_samples ORDER BY t_ms, pid", |r| {
        let state: Option<String> = r.get(6)?;
        let pid: u32 = r.get(1)?;
        // The I/O and PSS columns came later than schema 3 (added at the end).
        let later = |i: usize| -> rusqlite::Result<Option<u64>> {
            Ok(if r.as_ref().column_count() > i { r.get::<_, Option<i64>>(i)?.map(bytes) } else { None })
        };
        Ok((
            r.get::<_, i64>(0)?,
            TreeProcess {
                pid,
                ppid: r.get(2)?,
                cpu_pct: r.get::<_, Option<i64>>(3)?.map(|v| pct(v) as f32),
                rss_bytes: r.get::<_, Option<i64>>(4)?.map(bytes),
                threads: r.get(5)?,
                state: state.and_then(|s| s.chars().next()),
                cmdline: cmdlines.get(&pid).cloned().flatten(),
                read_bytes: later(7)?,
                write_bytes: later(8)?,
                pss_bytes: later(9)?,
            },
        ))
    })? {
        match out.last_mut() {
            Some(s) if s.timestamp_us == us(t) => s.processes.push(p),
            _ => out.push(TreeSample {
                timestamp_us: us(t),
                root_pid: root.unwrap_or(p.pid),
                processes: vec![p],
                ..TreeSample::default()
            }),
        }
    }
    for s in &mut out {
        // The root first, as the sampler lists it.
        s.processes.sort_by_key(|p| (p.pid != s.root_pid, p.pid));
        s.cpu_pct = s.processes.iter().map(|p| p.cpu_pct).sum();
        s.rss_bytes = s.processes.iter().map(|p| p.rss_bytes).sum();
    }
    Ok(out)
}
