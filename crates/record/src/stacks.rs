//! The job's Python threads as the sampler saw them (`gpulse_model::Stacks`): interned frames
//! and stacks, interned observations (what the kernel and the interpreter said of a thread), and
//! the samples packed a second per process into one row, a few bytes each.
//!
//! Added within schema 3: new writers create the tables, and a recording without them reads as
//! one with no stack samples.

use std::collections::{HashMap, HashSet, VecDeque};

use gpulse_model::{
    Gil, KernelState, ProcessRole, PyFrame, Rank, SampledProcess, StackBatch, Stacks, ThreadClock, ThreadSample,
};
use rusqlite::{Connection, params};

use crate::RecordError;
use crate::query::rows;

/// The tables, documented in `docs/recording-format.md`.
///
/// - `stack_frames`: a frame by the sampler's id.
/// - `stacks`: a stack by the sampler's id: the first `base_len` frames of stack `base` (none
///   when `base` is NULL), then the frame ids in `frames`, LEB128 varints, outermost first.
/// - `stack_obs`: an observation by the writer's id: the thread's state letter, its syscall and
///   wchan, and the GIL (`held`, `free`, or `other` with the holder's stack in `gil_stack`);
///   then (added at the end, so no new version; NULL before) `across`, 1 where the letter
///   changed while the stack was read.
/// - `stack_processes`: a sampled process, in the order first sampled, as the program it ran
///   last (one told again after its `exec` takes the later telling), with its last rate and
///   (added at the end, so no new version) its place in a distributed job: `rank`, `world_size`, `local_rank` and the GPU
///   its environment gives it (`device`), NULL for a process that is no rank; then `gil_read`,
///   whether the reader saw who holds the GIL (NULL in recordings before it).
/// - `stack_refusals`: why a process could not be sampled.
/// - `stack_samples`: a run of one process's samples within one second (by `t_us`): the first
///   at `t_us`, each as three LEB128 varints: µs since the sample before (0 for the first),
///   stack id, observation id. `clocks` (schema 5; NULL before) holds each sample's thread
///   clocks in the same order: `0` where unread, else two varints, each a zigzag-coded change
///   plus one of `cpu_us` and `wait_us` since the row's sample before (since 0 for the first).
pub const CREATE_STACKS: &str = r#"
CREATE TABLE stack_frames (
    id       INTEGER PRIMARY KEY,
    file     TEXT NOT NULL,
    line     INTEGER NOT NULL,
    function TEXT NOT NULL,
    code     TEXT
);

CREATE TABLE stacks (
    id       INTEGER PRIMARY KEY,
    base     INTEGER,
    base_len INTEGER NOT NULL DEFAULT 0,
    frames   BLOB NOT NULL
);

CREATE TABLE stack_obs (
    id        INTEGER PRIMARY KEY,
    state     TEXT NOT NULL,
    syscall   INTEGER,
    wchan     TEXT,
    gil       TEXT NOT NULL,
    gil_stack INTEGER,
    across    INTEGER
);

CREATE TABLE stack_processes (
    pid     INTEGER NOT NULL UNIQUE,
    role    TEXT NOT NULL,
    python  TEXT NOT NULL,
    command TEXT NOT NULL,
    rate_hz REAL,
    rank       INTEGER,
    world_size INTEGER,
    local_rank INTEGER,
    device     INTEGER,
    gil_read   INTEGER
);

CREATE TABLE stack_refusals (
    pid  INTEGER NOT NULL,
    text TEXT NOT NULL
);

CREATE TABLE stack_samples (
    id      INTEGER PRIMARY KEY,
    pid     INTEGER NOT NULL,
    t_us    INTEGER NOT NULL,
    samples BLOB NOT NULL,
    clocks  BLOB
);
"#;

/// The tables a reader needs; a file that lacks any has no stack samples.
const TABLES: [&str; 6] = ["stack_frames", "stacks", "stack_obs", "stack_processes", "stack_refusals", "stack_samples"];

/// The most samples one row holds (a second at 1 kHz fills it): a row stays within a page.
const ROW_SAMPLES: usize = 1000;

/// How many of the stacks written last a new stack looks through for the longest shared prefix.
const BASES: usize = 256;

/// One observation: the kernel's words and the GIL.
type Obs = (KernelState, Gil);

/// One process's samples not yet written: they make one row.
struct Run {
    second: i64,
    first_us: i64,
    last_us: i64,
    count: usize,
    bytes: Vec<u8>,
    clocks: Vec<u8>,
    /// The clock of the row's last sample that had one.
    last_clock: ThreadClock,
}

/// What the writer holds between batches.
#[derive(Default)]
pub(crate) struct Written {
    obs: HashMap<Obs, u32>,
    /// The stacks written last, by id, as bases for the next ones.
    recent: VecDeque<(u32, Vec<u32>)>,
    processes: HashSet<u32>,
    /// Rates heard before their process: written with it.
    rates: HashMap<u32, f64>,
    runs: HashMap<u32, Run>,
}

fn second_of(t_us: i64) -> i64 {
    t_us.div_euclid(1_000_000)
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The next varint of `bytes` from `*pos`, or `None` at a cut or overlong one.
pub(crate) fn get_varint(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*pos)?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

impl Written {
    /// Writes a batch: frames, stacks, processes, refusals at once; samples a second per process,
    /// once a later second has been heard.
    pub(crate) fn write(&mut self, conn: &Connection, batch: &StackBatch) -> Result<(), RecordError> {
        for (id, f) in &batch.frames {
            conn.prepare_cached("INSERT OR REPLACE INTO stack_frames VALUES (?1, ?2, ?3, ?4, ?5)")?
                .execute(params![id, f.file, f.line, f.function, f.code])?;
        }
        for (id, frames) in &batch.stacks {
            self.stack(conn, *id, frames)?;
        }
        for p in &batch.processes {
            let r = p.rank;
            self.processes.insert(p.pid);
            // A process told again ran `exec` since it was first told (a child first seen as its
            // parent's fork): its row takes the program sampled since, keeping its place and rate.
            conn.prepare_cached(
                "INSERT INTO stack_processes (pid, role, python, command, rate_hz, rank, world_size, local_rank, device, gil_read) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) \
                 ON CONFLICT(pid) DO UPDATE SET role = excluded.role, python = excluded.python, command = excluded.command, \
                 rate_hz = COALESCE(excluded.rate_hz, rate_hz), rank = excluded.rank, world_size = excluded.world_size, \
                 local_rank = excluded.local_rank, device = excluded.device, gil_read = excluded.gil_read",
            )?
            .execute(params![
                p.pid,
                p.role.as_str(),
                p.python,
                p.command,
                self.rates.remove(&p.pid),
                r.map(|r| r.rank),
                r.map(|r| r.world_size),
                r.and_then(|r| r.local_rank),
                r.and_then(|r| r.device),
                p.gil_read
            ])?;
        }
        for &(pid, hz) in &batch.rate_hz {
            if self.processes.contains(&pid) {
                conn.prepare_cached("UPDATE stack_processes SET rate_hz = ?2 WHERE pid = ?1")?
                    .execute(params![pid, hz])?;
            } else {
                self.rates.insert(pid, hz);
            }
        }
        for (pid, text) in &batch.refusals {
            conn.prepare_cached("INSERT INTO stack_refusals VALUES (?1, ?2)")?.execute(params![pid, text])?;
        }
        let mut latest = None;
        for s in &batch.samples {
            self.sample(conn, s)?;
            latest = latest.max(Some(second_of(s.t_us)));
        }
        // A process no longer sampled (it ended) has its last second written once another is.
        if let Some(latest) = latest {
            let done: Vec<u32> = self.runs.iter().filter(|(_, r)| r.second < latest).map(|(pid, _)| *pid).collect();
            for pid in done {
                self.flush(conn, pid)?;
            }
        }
        Ok(())
    }

    /// Writes every sample still held.
    pub(crate) fn finish(&mut self, conn: &Connection) -> Result<(), RecordError> {
        let mut pids: Vec<u32> = self.runs.keys().copied().collect();
        pids.sort_unstable();
        for pid in pids {
            self.flush(conn, pid)?;
        }
        Ok(())
    }

    fn stack(&mut self, conn: &Connection, id: u32, frames: &[u32]) -> Result<(), RecordError> {
        // The recent stack sharing the longest prefix: a deep loop's stacks differ at the end.
        let (base, shared) = self
            .recent
            .iter()
            .map(|(b, fs)| (*b, fs.iter().zip(frames).take_while(|(x, y)| x == y).count()))
            .max_by_key(|&(_, n)| n)
            .filter(|&(_, n)| n > 0)
            .map_or((None, 0), |(b, n)| (Some(b), n));
        let mut blob = Vec::with_capacity(frames.len() - shared);
        for &f in &frames[shared..] {
            put_varint(&mut blob, u64::from(f));
        }
        conn.prepare_cached("INSERT OR REPLACE INTO stacks VALUES (?1, ?2, ?3, ?4)")?.execute(params![
            id,
            base,
            shared as i64,
            blob
        ])?;
        // A stack sent again under its id replaces the old one as a base.
        self.recent.retain(|(b, _)| *b != id);
        if self.recent.len() == BASES {
            self.recent.pop_front();
        }
        self.recent.push_back((id, frames.to_vec()));
        Ok(())
    }

    fn obs(&mut self, conn: &Connection, kernel: &KernelState, gil: Gil) -> Result<u32, RecordError> {
        if let Some(id) = self.obs.get(&(kernel.clone(), gil)) {
            return Ok(*id);
        }
        let id = self.obs.len() as u32;
        let (kind, stack) = match gil {
            Gil::Held => ("held", None),
            Gil::Free => ("free", None),
            Gil::Other { stack } => ("other", Some(stack)),
        };
        conn.prepare_cached("INSERT OR REPLACE INTO stack_obs VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")?.execute(
            params![
                id,
                kernel.state.to_string(),
                kernel.syscall,
                kernel.wchan.as_deref(),
                kind,
                stack,
                kernel.across.then_some(1)
            ],
        )?;
        self.obs.insert((kernel.clone(), gil), id);
        Ok(id)
    }

    fn sample(&mut self, conn: &Connection, s: &ThreadSample) -> Result<(), RecordError> {
        let obs = self.obs(conn, &s.kernel, s.gil)?;
        let second = second_of(s.t_us);
        // A run holds one second of one process, in time order: anything else starts a row.
        let fits =
            self.runs.get(&s.pid).is_some_and(|r| r.second == second && s.t_us >= r.last_us && r.count < ROW_SAMPLES);
        if !fits {
            self.flush(conn, s.pid)?;
        }
        let run = self.runs.entry(s.pid).or_insert_with(|| Run {
            second,
            first_us: s.t_us,
            last_us: s.t_us,
            count: 0,
            bytes: Vec::with_capacity(64 * 5),
            clocks: Vec::with_capacity(64 * 5),
            last_clock: ThreadClock { cpu_us: 0, wait_us: 0 },
        });
        put_varint(&mut run.bytes, (s.t_us - run.last_us) as u64);
        put_varint(&mut run.bytes, u64::from(s.stack));
        put_varint(&mut run.bytes, u64::from(obs));
        match s.clock {
            Some(c) => {
                put_varint(&mut run.clocks, zigzag(c.cpu_us as i64 - run.last_clock.cpu_us as i64) + 1);
                put_varint(&mut run.clocks, zigzag(c.wait_us as i64 - run.last_clock.wait_us as i64) + 1);
                run.last_clock = c;
            }
            None => put_varint(&mut run.clocks, 0),
        }
        run.last_us = s.t_us;
        run.count += 1;
        Ok(())
    }

    fn flush(&mut self, conn: &Connection, pid: u32) -> Result<(), RecordError> {
        if let Some(run) = self.runs.remove(&pid) {
            // A row without one clock stores none: NULL, as a recording made before them.
            let clocks = (run.clocks.len() > run.count).then_some(run.clocks);
            conn.prepare_cached("INSERT INTO stack_samples (pid, t_us, samples, clocks) VALUES (?1, ?2, ?3, ?4)")?
                .execute(params![pid, run.first_us, run.bytes, clocks])?;
        }
        Ok(())
    }
}

/// Reads the stack samples of a recording; one made before the tables existed has none.
pub(crate) fn read(conn: &Connection, name: &str) -> Result<Stacks, RecordError> {
    let present: Vec<String> =
        rows(conn, "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'stack%'", |r| r.get(0))?;
    if !TABLES.iter().all(|t| present.iter().any(|p| p == t)) {
        return Ok(Stacks::default());
    }
    let damaged = |why: String| RecordError::Damaged { path: name.to_owned(), why };
    let frames = rows(conn, "SELECT id, file, line, function, code FROM stack_frames ORDER BY id", |r| {
        Ok((r.get(0)?, PyFrame { file: r.get(1)?, line: r.get(2)?, function: r.get(3)?, code: r.get(4)? }))
    })?;
    let mut batch = StackBatch { frames, ..StackBatch::default() };
    type Row = (u32, Option<u32>, usize, Vec<u8>);
    let stored: Vec<Row> = rows(conn, "SELECT id, base, base_len, frames FROM stacks ORDER BY id", |r| {
        Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)?.max(0) as usize, r.get(3)?))
    })?;
    let index: HashMap<u32, usize> = stored.iter().enumerate().map(|(i, s)| (s.0, i)).collect();
    let mut full: Vec<Option<Vec<u32>>> = vec![None; stored.len()];
    for i in 0..stored.len() {
        resolve(i, &stored, &index, &mut full).map_err(|why| damaged(format!("stack {}: {why}", stored[i].0)))?;
    }
    batch.stacks = stored.iter().zip(full).map(|(s, f)| (s.0, f.unwrap_or_default())).collect();
    // Recordings before `across` read no change of letter.
    let query = if conn.prepare("SELECT across FROM stack_obs LIMIT 0").is_ok() {
        "SELECT id, state, syscall, wchan, gil, gil_stack, across FROM stack_obs"
    } else {
        "SELECT id, state, syscall, wchan, gil, gil_stack, NULL FROM stack_obs"
    };
    let obs: HashMap<u32, Obs> = rows(conn, query, |r| {
        let state: String = r.get(1)?;
        let gil: String = r.get(4)?;
        let gil = match (gil.as_str(), r.get::<_, Option<u32>>(5)?) {
            ("held", _) => Gil::Held,
            ("other", Some(stack)) => Gil::Other { stack },
            _ => Gil::Free,
        };
        let wchan = r.get::<_, Option<String>>(3)?.map(std::sync::Arc::from);
        let across = r.get::<_, Option<i64>>(6)?.is_some_and(|a| a != 0);
        let kernel = KernelState { state: state.chars().next().unwrap_or('?'), syscall: r.get(2)?, wchan, across };
        Ok((r.get(0)?, (kernel, gil)))
    })?
    .into_iter()
    .collect();
    // Schema 5 and before kept no ranks, and recordings before `gil_read` no word of the GIL.
    let query = if conn.prepare("SELECT gil_read FROM stack_processes LIMIT 0").is_ok() {
        "SELECT pid, role, python, command, rate_hz, rank, world_size, local_rank, device, gil_read FROM stack_processes ORDER BY rowid"
    } else if conn.prepare("SELECT rank FROM stack_processes LIMIT 0").is_ok() {
        "SELECT pid, role, python, command, rate_hz, rank, world_size, local_rank, device, NULL FROM stack_processes ORDER BY rowid"
    } else {
        "SELECT pid, role, python, command, rate_hz, NULL, NULL, NULL, NULL, NULL FROM stack_processes ORDER BY rowid"
    };
    let processes = rows(conn, query, |r| {
        let rank = match (r.get::<_, Option<u32>>(5)?, r.get::<_, Option<u32>>(6)?) {
            (Some(rank), Some(world_size)) => Some(Rank { rank, world_size, local_rank: r.get(7)?, device: r.get(8)? }),
            _ => None,
        };
        Ok((
            r.get::<_, u32>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
            r.get::<_, Option<f64>>(4)?,
            rank,
            r.get::<_, Option<bool>>(9)?,
        ))
    })?;
    for (pid, role, python, command, rate, rank, gil_read) in processes {
        // A role a later gpulse adds is read as the nearest one this gpulse knows.
        let role = ProcessRole::parse(&role).unwrap_or(ProcessRole::Worker);
        batch.processes.push(SampledProcess { pid, role, python, command, rank, gil_read });
        if let Some(hz) = rate {
            batch.rate_hz.push((pid, hz));
        }
    }
    batch.refusals = rows(conn, "SELECT pid, text FROM stack_refusals ORDER BY rowid", |r| Ok((r.get(0)?, r.get(1)?)))?;
    // Schema 4 and before kept no clocks.
    let has_clocks = conn.prepare("SELECT clocks FROM stack_samples LIMIT 0").is_ok();
    let query = if has_clocks {
        "SELECT pid, t_us, samples, clocks FROM stack_samples ORDER BY id"
    } else {
        "SELECT pid, t_us, samples, NULL FROM stack_samples ORDER BY id"
    };
    let mut stmt = conn.prepare(query)?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let (pid, mut t_us, bytes): (u32, i64, Vec<u8>) = (r.get(0)?, r.get(1)?, r.get(2)?);
        let clocks: Option<Vec<u8>> = r.get(3)?;
        let (mut cpos, mut last) = (0, ThreadClock { cpu_us: 0, wait_us: 0 });
        let mut pos = 0;
        while pos < bytes.len() {
            let mut next = || get_varint(&bytes, &mut pos);
            let (Some(dt), Some(stack), Some(o)) = (next(), next(), next()) else {
                return Err(damaged(format!("a row of stack_samples (pid {pid}) is cut")));
            };
            t_us = t_us.saturating_add(dt as i64);
            let Some((kernel, gil)) = obs.get(&(o as u32)) else {
                return Err(damaged(format!("stack_samples names observation {o}, which stack_obs lacks")));
            };
            let clock = match &clocks {
                Some(c) => {
                    let cut = || damaged(format!("the clocks of a row of stack_samples (pid {pid}) are cut"));
                    match get_varint(c, &mut cpos).ok_or_else(cut)? {
                        0 => None,
                        cpu => {
                            let wait = get_varint(c, &mut cpos).filter(|w| *w > 0).ok_or_else(cut)?;
                            let add = |base: u64, v: u64| base.saturating_add_signed(unzigzag(v - 1));
                            last = ThreadClock { cpu_us: add(last.cpu_us, cpu), wait_us: add(last.wait_us, wait) };
                            Some(last)
                        }
                    }
                }
                None => None,
            };
            batch.samples.push(ThreadSample {
                t_us,
                pid,
                stack: stack as u32,
                kernel: kernel.clone(),
                gil: *gil,
                clock,
            });
        }
    }
    // Rows are written a second per process as each completes: put back in time order.
    batch.samples.sort_by_key(|s| (s.t_us, s.pid));
    batch.samples.shrink_to_fit();
    let mut stacks = Stacks::default();
    stacks.add(batch);
    Ok(stacks)
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

/// Fills `full[i]` with stack `i`'s whole frame list, resolving its bases first (a chain may be
/// as long as the run has stacks: walked, not recursed).
fn resolve(
    i: usize,
    stored: &[(u32, Option<u32>, usize, Vec<u8>)],
    index: &HashMap<u32, usize>,
    full: &mut [Option<Vec<u32>>],
) -> Result<(), String> {
    let mut chain = vec![i];
    while let Some(&last) = chain.last() {
        let Some(b) = stored[last].1 else { break };
        let &j = index.get(&b).ok_or_else(|| format!("its base {b} is missing"))?;
        if full[j].is_some() {
            break;
        }
        if chain.len() > stored.len() {
            return Err("its bases form a loop".into());
        }
        chain.push(j);
    }
    for &k in chain.iter().rev() {
        if full[k].is_some() {
            continue;
        }
        let (_, base, base_len, blob) = &stored[k];
        let mut frames = match base {
            None => Vec::new(),
            Some(b) => {
                let of_base = full[index[b]].as_ref().ok_or("its bases form a loop")?;
                of_base
                    .get(..*base_len)
                    .ok_or_else(|| format!("its base {b} has fewer than {base_len} frames"))?
                    .to_vec()
            }
        };
        let mut pos = 0;
        while pos < blob.len() {
            frames.push(get_varint(blob, &mut pos).ok_or("its frames are cut")? as u32);
        }
        full[k] = Some(frames);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        let mut out = Vec::new();
        let values = [0, 1, 127, 128, 20_000, 16_383, 16_384, u64::from(u32::MAX), u64::MAX];
        for v in values {
            put_varint(&mut out, v);
        }
        let mut pos = 0;
        for v in values {
            assert_eq!(get_varint(&out, &mut pos), Some(v));
        }
        assert_eq!(pos, out.len());
        assert_eq!(get_varint(&[0x80], &mut 0), None);
        for v in [0, 1, -1, 63, -64, i64::MAX, i64::MIN] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }
}
