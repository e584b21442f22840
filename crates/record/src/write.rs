//! Writing a recording: one transaction a second, slow-changing fields only when they change.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use gpulse_model::{DeviceInfo, GpuProcessClass, GpuSample, HostSample, Place, ProcessSample, Snapshot, TreeSample};
use rusqlite::{Connection, params};

use crate::schema::{CREATE, CREATE_GPU_FIELDS, CREATE_MARKERS, SCHEMA_VERSION};
use crate::units::{kib, ms, pm, stored};
use crate::{Event, Marker, MetaKey, RecordError, RunMeta};

/// How often the writer commits: the most a crash can lose.
pub const COMMIT_EVERY: Duration = Duration::from_secs(1);

/// `gpu_sample_rows`' columns, in the order [`base_values`] gives them: the key, whether the
/// GPU was lost, then the metric table's base columns.
fn base_columns() -> &'static [&'static str] {
    static COLUMNS: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    COLUMNS.get_or_init(|| {
        let table = BASE_CALLS.iter().filter_map(|c| c.column.map(|c| c.name));
        ["id", "lost"].into_iter().chain(table).collect()
    })
}

/// The metric table's base columns' calls.
const BASE_CALLS: [gpulse_model::Call; gpulse_model::count_in(Place::Base)] = gpulse_model::calls_in(Place::Base);

/// The number of base columns: the key, the lost flag and the table's.
const BASE: usize = 2 + BASE_CALLS.len();

/// The insert of `rows` base rows.
fn insert_rows(rows: usize) -> String {
    let row = format!("({})", vec!["?"; BASE].join(","));
    format!(
        "INSERT OR REPLACE INTO gpu_sample_rows ({}) VALUES {}",
        base_columns().join(", "),
        vec![row; rows].join(",")
    )
}

/// The insert of one base row.
fn gpu_sample_sql() -> &'static str {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SQL.get_or_init(|| insert_rows(1))
}

/// Base rows an import inserts with one statement: one B-tree cursor stays open across them,
/// and SQLite runs one statement where it would run 256.
const GPU_SAMPLE_BATCH: usize = 256;

/// The insert of [`GPU_SAMPLE_BATCH`] base rows.
fn gpu_sample_batch_sql() -> &'static str {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SQL.get_or_init(|| insert_rows(GPU_SAMPLE_BATCH))
}

/// Binds the base row of `g` at `t` (ms) as parameters `first..first + BASE`, each only where it
/// differs from what `bound` says the parameter holds. SQLite keeps a statement's bindings across
/// executions, and most of a GPU's readings hold from one poll to the next.
fn bind_base(
    stmt: &mut rusqlite::Statement<'_>,
    bound: &mut [Option<i64>],
    first: usize,
    t: i64,
    g: &GpuSample,
) -> rusqlite::Result<()> {
    for (k, value) in base_values(t, g).into_iter().enumerate() {
        let slot = &mut bound[first - 1 + k];
        if *slot != value {
            stmt.raw_bind_parameter(first + k, value)?;
            *slot = value;
        }
    }
    Ok(())
}

/// The base row of a GPU sample taken at `t` (ms), in [`base_columns`]' order: its key, whether
/// the GPU was lost, and the fast-changing fields.
fn base_values(t: i64, g: &GpuSample) -> [Option<i64>; BASE] {
    let mut v = [None; BASE];
    v[0] = Some((t << 8) | i64::from(g.gpu_index & 0xff));
    v[1] = (g.status == gpulse_model::DeviceStatus::Lost).then_some(1);
    // One statement per column, each call a constant: they inline, as the hand-written row did
    // (a loop over the calls cost an import of 200 MB 7 %).
    macro_rules! fill {
        ($($i:literal)*) => { $( v[2 + $i] = stored(&BASE_CALLS[$i], g); )* };
    }
    fill!(0 1 2 3 4 5 6 7 8 9 10);
    v
}

/// Eleven base columns: [`base_values`]' `fill!` lists one index for each.
const _: () = assert!(BASE_CALLS.len() == 11, "list the new column's index in base_values' fill!");

/// A process listing reduced to what decides whether it changed: PIDs, KiB held, and the SM and
/// memory-controller shares.
type Listing = Vec<(u32, Option<u64>, Option<u32>, Option<u32>)>;

/// A share that moved this many points since the listing last written is a change: the driver's
/// shares jitter by a point or two from one read to the next.
const SHARE_MOVE_PCT: u32 = 5;

/// Whether a process's share moved enough to write the listing again: read or no longer read,
/// crossing the idle line (1 %, the idle-holder rule's), or by [`SHARE_MOVE_PCT`].
fn share_moved(before: Option<u32>, now: Option<u32>) -> bool {
    match (before, now) {
        (Some(b), Some(n)) => b.abs_diff(n) >= SHARE_MOVE_PCT || ((b <= 1) != (n <= 1)),
        (None, None) => false,
        _ => true,
    }
}

/// Whether `now` differs from the listing last written in what a reader would act on.
fn listing_changed(before: Option<&Listing>, now: &Listing) -> bool {
    let Some(before) = before else { return true };
    before.len() != now.len()
        || before
            .iter()
            .zip(now)
            .any(|(b, n)| b.0 != n.0 || b.1 != n.1 || share_moved(b.2, n.2) || share_moved(b.3, n.3))
}

/// What the `processes` table holds of a PID.
struct Identity {
    first_ms: i64,
    /// Whether NVML's name and the owner are written.
    on_gpu: bool,
    cmdline: Option<String>,
}

/// Appends samples to a new recording.
pub struct Writer {
    conn: Connection,
    last_commit: Instant,
    in_tx: bool,
    /// The slow fields, GPM and the metric table, as last written.
    rest: crate::rest::Rest,
    /// gpu → the process listing last written.
    processes: HashMap<u32, Listing>,
    identities: HashMap<u32, Identity>,
    workloads: crate::workloads::Written,
    stacks: crate::stacks::Written,
}

impl Writer {
    /// Creates `path` (which must not exist) with the schema, the run's facts and its devices.
    pub fn create(path: &Path, meta: &RunMeta, devices: &[DeviceInfo]) -> Result<Self, RecordError> {
        Self::create_claimed(crate::claim(path)?, meta, devices)
    }

    /// Like [`Writer::create`], in a file already claimed for it.
    pub fn create_claimed(claim: crate::Claim, meta: &RunMeta, devices: &[DeviceInfo]) -> Result<Self, RecordError> {
        Self::open(claim, meta, devices, false)
    }

    /// Like [`Writer::create`], for a file that is written in one go and renamed into place only
    /// when complete (an import): no crash safety, large pages, and no journal. Readers see an
    /// ordinary recording.
    pub fn create_bulk(path: &Path, meta: &RunMeta, devices: &[DeviceInfo]) -> Result<Self, RecordError> {
        Self::open(crate::claim(path)?, meta, devices, true)
    }

    /// Fills the claimed file; a file that could not be made whole is removed, since this
    /// process created it.
    fn open(claim: crate::Claim, meta: &RunMeta, devices: &[DeviceInfo], bulk: bool) -> Result<Self, RecordError> {
        let result = Self::fill(claim.path(), meta, devices, bulk);
        let path = claim.take();
        if result.is_err() {
            crate::remove_with_side_files(&path);
        }
        result
    }

    fn fill(path: &Path, meta: &RunMeta, devices: &[DeviceInfo], bulk: bool) -> Result<Self, RecordError> {
        let conn = Connection::open_with_flags(
            path,
            // One thread owns the connection: SQLite's own locking is not needed.
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
                | rusqlite::OpenFlags::SQLITE_OPEN_CREATE
                | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        if bulk {
            conn.pragma_update(None, "page_size", 65536)?;
            conn.pragma_update(None, "journal_mode", "OFF")?;
            conn.pragma_update(None, "synchronous", "OFF")?;
            conn.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
            conn.pragma_update(None, "cache_size", -8192)?;
        } else {
            conn.pragma_update(None, "journal_mode", "WAL")?;
            conn.pragma_update(None, "synchronous", "NORMAL")?;
        }
        // The schema and the run's facts in one transaction: each page goes to the log once (a
        // commit per table wrote the growing schema page again each time).
        conn.execute_batch("BEGIN")?;
        conn.execute_batch(CREATE)?;
        conn.execute_batch(&crate::schema::create_gpm_samples())?;
        conn.execute_batch(CREATE_MARKERS)?;
        conn.execute_batch(CREATE_GPU_FIELDS)?;
        conn.execute_batch(crate::workloads::CREATE_WORKLOADS)?;
        conn.execute_batch(crate::stacks::CREATE_STACKS)?;
        let mut w = Self {
            conn,
            last_commit: Instant::now(),
            in_tx: true,
            rest: crate::rest::Rest::default(),
            processes: HashMap::new(),
            identities: HashMap::new(),
            workloads: Default::default(),
            stacks: Default::default(),
        };
        w.begin()?;
        let put_str = |k: &str, v: &str| w.conn.execute("INSERT OR REPLACE INTO meta VALUES (?1, ?2)", params![k, v]);
        let put = |k: MetaKey, v: &str| put_str(k.as_str(), v);
        put(MetaKey::SchemaVersion, &SCHEMA_VERSION.to_string())?;
        put(MetaKey::GpulseVersion, &meta.gpulse_version)?;
        put(MetaKey::StartedAtUs, &meta.started_at_us.to_string())?;
        put(MetaKey::Source, &meta.source)?;
        if let Some(h) = &meta.host {
            put(MetaKey::Host, h)?;
        }
        if let Some(c) = &meta.command {
            put(MetaKey::Command, c)?;
        }
        if let Some(i) = meta.interval_ms {
            put(MetaKey::IntervalMs, &i.to_string())?;
        }
        if let Some(v) = devices.first().and_then(|d| d.cuda_version.as_ref()) {
            put(MetaKey::CudaVersion, v)?;
        }
        for (k, v) in &meta.extra {
            put_str(k, v)?;
        }
        w.set_devices(devices)?;
        w.commit()?;
        Ok(w)
    }

    fn begin(&mut self) -> Result<(), RecordError> {
        if !self.in_tx {
            self.conn.execute_batch("BEGIN")?;
            self.in_tx = true;
        }
        Ok(())
    }

    /// Commits what has been written so far.
    pub fn commit(&mut self) -> Result<(), RecordError> {
        if self.in_tx {
            self.conn.execute_batch("COMMIT")?;
            self.in_tx = false;
        }
        self.last_commit = Instant::now();
        Ok(())
    }

    /// Commits when the last commit is [`COMMIT_EVERY`] old.
    pub fn commit_if_due(&mut self) -> Result<(), RecordError> {
        if self.last_commit.elapsed() >= COMMIT_EVERY { self.commit() } else { Ok(()) }
    }

    /// Writes one snapshot of every GPU.
    pub fn snapshot(&mut self, snap: &Snapshot) -> Result<(), RecordError> {
        self.begin()?;
        let t = ms(snap.timestamp_us);
        for g in &snap.gpus {
            self.gpu(t, g)?;
        }
        self.commit_if_due()
    }

    /// Adds or replaces devices, for imports that learn them while reading.
    pub fn set_devices(&mut self, devices: &[DeviceInfo]) -> Result<(), RecordError> {
        self.begin()?;
        for d in devices {
            self.conn.execute(
                "INSERT OR REPLACE INTO devices VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![
                    d.index,
                    d.uuid,
                    d.name,
                    d.pci_bus_id,
                    d.cuda_index,
                    d.memory_total_bytes.map(|b| b as i64),
                    d.power_limit_mw,
                    d.clock_max_sm_mhz,
                    d.clock_max_mem_mhz,
                    d.gpm_supported,
                    serde_json::to_string(d)?
                ],
            )?;
        }
        if let Some(v) = devices.first().and_then(|d| d.driver_version.as_ref()) {
            self.conn
                .execute("INSERT OR REPLACE INTO meta VALUES (?1, ?2)", params![MetaKey::DriverVersion.as_str(), v])?;
        }
        Ok(())
    }

    /// Adds meta entries.
    pub fn set_meta(&mut self, key: MetaKey, value: &str) -> Result<(), RecordError> {
        self.begin()?;
        self.conn.execute("INSERT OR REPLACE INTO meta VALUES (?1, ?2)", params![key.as_str(), value])?;
        Ok(())
    }

    /// A live sample: its base row, the rest of it, and its process listing.
    fn gpu(&mut self, t: i64, g: &GpuSample) -> Result<(), RecordError> {
        self.conn.prepare_cached(gpu_sample_sql())?.execute(rusqlite::params_from_iter(base_values(t, g)))?;
        self.rest.write(&self.conn, t, g)?;
        self.gpu_processes(t, g)
    }

    /// Writes many GPUs' samples, each at its own time, with one prepared statement: the fast path
    /// for imports. These rows carry no process listing (a log lists processes separately, through
    /// [`Writer::process_poll`]), so their empty `processes` is not written as "none". Each
    /// statement's rows have the rest of them written right after, while they are still in cache.
    pub fn gpu_samples<'a, I>(&mut self, rows: I) -> Result<(), RecordError>
    where
        I: Iterator<Item = (i64, &'a GpuSample)>,
    {
        self.begin()?;
        let mut many = self.conn.prepare_cached(gpu_sample_batch_sql())?;
        let mut one = self.conn.prepare_cached(gpu_sample_sql())?;
        // What each parameter of `many` holds: NULL as the cache hands it over (it clears a
        // statement's bindings), then the value last bound.
        let mut bound = vec![None; BASE * GPU_SAMPLE_BATCH];
        let mut rows = rows.map(|(t, g)| (ms(t), g));
        let mut chunk = Vec::with_capacity(GPU_SAMPLE_BATCH);
        loop {
            chunk.clear();
            chunk.extend(rows.by_ref().take(GPU_SAMPLE_BATCH));
            if chunk.len() == GPU_SAMPLE_BATCH {
                for (i, &(t, g)) in chunk.iter().enumerate() {
                    bind_base(&mut many, &mut bound, 1 + BASE * i, t, g)?;
                }
                many.raw_execute()?;
            } else {
                for &(t, g) in &chunk {
                    one.execute(rusqlite::params_from_iter(base_values(t, g)))?;
                }
            }
            for &(t, g) in &chunk {
                self.rest.write(&self.conn, t, g)?;
            }
            if chunk.len() < GPU_SAMPLE_BATCH {
                break;
            }
        }
        drop((many, one));
        self.commit_if_due()
    }

    /// Process listings are written when they change (a process, its memory, or a share that
    /// moved); a reader carries the last one forward.
    fn gpu_processes(&mut self, t: i64, g: &GpuSample) -> Result<(), RecordError> {
        if g.absence(gpulse_model::Metric::Processes).is_some() {
            return Ok(());
        }
        // A pod's names may come a poll after its process: checked on every poll, not per listing.
        self.workloads.note(&self.conn, t, &g.processes)?;
        let key: Listing = g
            .processes
            .iter()
            .map(|p| (p.pid, p.used_memory_bytes.map(|b| b.div_ceil(1024)), p.sm_util_pct, p.mem_util_pct))
            .collect();
        if !listing_changed(self.processes.get(&g.gpu_index), &key) {
            return Ok(());
        }
        self.write_processes(t, g.gpu_index, &g.processes)?;
        self.processes.insert(g.gpu_index, key);
        Ok(())
    }

    /// Writes one process listing of one GPU, taken at `timestamp_us` (as a
    /// `--query-compute-apps` log has them, apart from GPU samples).
    pub fn process_poll(
        &mut self,
        timestamp_us: i64,
        gpu: u32,
        processes: &[ProcessSample],
    ) -> Result<(), RecordError> {
        self.begin()?;
        self.write_processes(ms(timestamp_us), gpu, processes)?;
        self.commit_if_due()
    }

    fn write_processes(&mut self, t: i64, gpu: u32, processes: &[ProcessSample]) -> Result<(), RecordError> {
        self.conn.prepare_cached("INSERT OR REPLACE INTO process_polls VALUES (?1, ?2)")?.execute(params![t, gpu])?;
        for p in processes {
            let class = p.class.map(GpuProcessClass::as_str);
            self.conn
                .prepare_cached("INSERT OR REPLACE INTO gpu_processes VALUES (?1,?2,?3,?4,?5,?6,?7)")?
                .execute(params![t, gpu, p.pid, p.used_memory_bytes.map(kib), p.sm_util_pct, p.mem_util_pct, class])?;
            self.identity(t, p.pid, p.name.as_deref(), p.cmdline.as_deref(), p.user.as_deref(), true)?;
        }
        Ok(())
    }

    /// Writes what a process is the first time it is seen, and completes it with NVML's name and
    /// the owner when it first shows up on a GPU.
    fn identity(
        &mut self,
        t: i64,
        pid: u32,
        name: Option<&str>,
        cmdline: Option<&str>,
        user: Option<&str>,
        gpu: bool,
    ) -> Result<(), RecordError> {
        let Some(known) = self.identities.get_mut(&pid) else {
            self.conn
                .prepare_cached("INSERT OR REPLACE INTO processes VALUES (?1, ?2, ?3, ?4, ?5)")?
                .execute(params![pid, t, name, cmdline, user])?;
            self.identities.insert(pid, Identity { first_ms: t, on_gpu: gpu, cmdline: cmdline.map(str::to_owned) });
            return Ok(());
        };
        if gpu && !known.on_gpu {
            self.conn
                .prepare_cached("UPDATE processes SET name = ?3, user = ?4 WHERE pid = ?1 AND first_ms = ?2")?
                .execute(params![pid, known.first_ms, name, user])?;
            known.on_gpu = true;
        }
        // The same process after an exec (a pyenv shim that became python): the line it runs now.
        // Only the tree's reading follows execs; the GPU listing's is read once per PID.
        if !gpu && cmdline.is_some() && cmdline != known.cmdline.as_deref() {
            self.conn
                .prepare_cached("UPDATE processes SET cmdline = ?3 WHERE pid = ?1 AND first_ms = ?2")?
                .execute(params![pid, known.first_ms, cmdline])?;
            known.cmdline = cmdline.map(str::to_owned);
        }
        Ok(())
    }

    /// Writes one reading of the machine.
    pub fn host(&mut self, h: &HostSample) -> Result<(), RecordError> {
        self.begin()?;
        let cores: Vec<u8> = h
            .cpu_core_busy_pct
            .iter()
            .map(|c| c.map_or(crate::schema::CORE_UNKNOWN, |c| c.round().clamp(0.0, 100.0) as u8))
            .collect();
        let f = |v: Option<f32>| v.map(|v| pm(f64::from(v)));
        self.conn
            .prepare_cached("INSERT OR REPLACE INTO host_samples VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)")?
            .execute(params![
                ms(h.timestamp_us),
                f(h.cpu_busy_pct),
                f(h.cpu_iowait_pct),
                f(h.cpu_steal_pct),
                (!cores.is_empty()).then_some(cores),
                h.memory_used_bytes.map(kib),
                h.memory_total_bytes.map(kib),
                h.load_1m.map(|l| (l * 100.0).round() as i64),
                h.swap_used_bytes.map(kib),
                h.swap_total_bytes.map(kib)
            ])?;
        self.commit_if_due()
    }

    /// Writes one reading of the watched process tree.
    pub fn tree(&mut self, tree: &TreeSample) -> Result<(), RecordError> {
        self.begin()?;
        let t = ms(tree.timestamp_us);
        for p in &tree.processes {
            self.conn
                .prepare_cached("INSERT OR REPLACE INTO tree_samples VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)")?
                .execute(params![
                    t,
                    p.pid,
                    p.ppid,
                    p.cpu_pct.map(|c| pm(f64::from(c))),
                    p.rss_bytes.map(kib),
                    p.threads,
                    p.state.map(String::from),
                    p.read_bytes.map(kib),
                    p.write_bytes.map(kib),
                    p.pss_bytes.map(kib)
                ])?;
            self.identity(t, p.pid, None, p.cmdline.as_deref(), None, false)?;
        }
        self.commit_if_due()
    }

    /// Records an event and commits at once: events are rare and worth keeping.
    pub fn event(&mut self, e: &Event) -> Result<(), RecordError> {
        self.begin()?;
        self.conn.execute(
            "INSERT INTO events VALUES (?1, ?2, ?3)",
            params![e.t_ms, e.kind.as_str(), e.payload.to_string()],
        )?;
        self.commit()
    }

    /// Appends marks from the training loop; they commit with the next second's samples.
    pub fn markers(&mut self, marks: &[Marker]) -> Result<(), RecordError> {
        self.begin()?;
        let mut stmt = self.conn.prepare_cached("INSERT INTO markers VALUES (?1, ?2, ?3, ?4, ?5, ?6)")?;
        for m in marks {
            stmt.execute(params![m.t_us, m.pid, m.kind.as_str(), m.name, m.dur_us, m.count])?;
        }
        drop(stmt);
        self.commit_if_due()
    }

    /// Appends samples of the job's Python threads. Frames, stacks and processes are written at
    /// once; samples a second per process, when a later second is heard (or at [`Writer::finish`]),
    /// so a crash loses at most the last second of them, as of the rest.
    pub fn stacks(&mut self, batch: &gpulse_model::StackBatch) -> Result<(), RecordError> {
        self.begin()?;
        self.stacks.write(&self.conn, batch)?;
        self.commit_if_due()
    }

    /// Commits and closes the file. A finished recording leaves WAL mode: it is one
    /// self-contained file, and readers open it without creating `-wal` and `-shm` beside it.
    pub fn finish(mut self) -> Result<(), RecordError> {
        self.begin()?;
        self.stacks.finish(&self.conn)?;
        self.commit()?;
        self.conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        let mode: String = self.conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
        if mode == "off" {
            self.conn.pragma_update(None, "locking_mode", "NORMAL")?;
        }
        self.conn.query_row("PRAGMA journal_mode = DELETE", [], |_| Ok(()))?;
        Ok(())
    }
}
