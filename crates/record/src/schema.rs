//! The recording's SQLite schema. `docs/recording-format.md` documents it for readers.
//!
//! Units are in column names. Percentages of GPM and host CPU are stored in per-mille integers,
//! memory in KiB rounded up (so MiB rounded up, as nvidia-smi prints it, is exact), times in
//! milliseconds since the Unix epoch. `gpu_sample_rows`, the largest table, keys on one integer,
//! `t_ms << 8 | gpu`: appends then fill B-tree pages densely, and a GPU-sample of the base fields
//! stays under 48 bytes on disk. Readers query the view `gpu_samples`, which adds `t_ms` and
//! `gpu` (in schema 3 and before, a table with them as generated columns, which every insert
//! computed: a fifth of an import's SQLite time). The other tables that key on `(t_ms, gpu)`
//! are `WITHOUT ROWID`, so the key is their only index.

/// Bumped whenever a table or column changes meaning; a column added at the end of a table is
/// not a bump, since readers of the version before read past it (`host_samples.swap_*`,
/// `tree_samples.read_kib`, `write_kib`, `pss_kib`, `stack_processes.rank` and the three after it). 3: `markers.count` (a row may stand for
/// many marks). 2: `markers`. 4: `gpu_samples` is a view over `gpu_sample_rows`; a query of
/// `gpu_samples` reads the same columns from either. 5: `stack_samples.clocks`, the sampled
/// threads' own clocks, which change what a main-thread sample's time is split into. Every earlier
/// version stays readable.
pub const SCHEMA_VERSION: u32 = 5;

/// Added in schema 3 without a bump (older readers never open it): the metric table's rows
/// (`gpulse_model::TABLE`), one row per change of one metric's reading, keyed by the table's
/// key. `value` is the integer NVML gave, or NULL with `absent` saying why (`not_supported`…).
/// A recording without the table has no table metrics.
pub const CREATE_GPU_FIELDS: &str = r#"
CREATE TABLE gpu_fields (
    t_ms   INTEGER NOT NULL,
    gpu    INTEGER NOT NULL,
    key    TEXT NOT NULL,
    value  INTEGER,
    absent TEXT,
    PRIMARY KEY (gpu, key, t_ms)
) WITHOUT ROWID;
"#;

/// A core whose busy share could not be read (no ticks passed on it), in `cores_busy_pct`.
pub const CORE_UNKNOWN: u8 = 255;

pub const CREATE: &str = r#"
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE devices (
    gpu                INTEGER PRIMARY KEY,
    uuid               TEXT NOT NULL,
    name               TEXT NOT NULL,
    pci_bus_id         TEXT,
    cuda_index         INTEGER,
    memory_total_bytes INTEGER,
    power_limit_mw     INTEGER,
    clock_max_sm_mhz   INTEGER,
    clock_max_mem_mhz  INTEGER,
    gpm_supported      INTEGER,
    info_json          TEXT NOT NULL
);

CREATE TABLE gpu_sample_rows (
    id           INTEGER PRIMARY KEY,
    lost         INTEGER,
    util_gpu_pct INTEGER,
    util_mem_pct INTEGER,
    mem_used_kib INTEGER,
    temp_gpu_c   INTEGER,
    temp_mem_c   INTEGER,
    power_mw     INTEGER,
    sm_mhz       INTEGER,
    mem_mhz      INTEGER,
    pstate       INTEGER,
    reasons      INTEGER,
    fan_pct      INTEGER
);

CREATE VIEW gpu_samples AS
    SELECT id, id >> 8 AS t_ms, id & 255 AS gpu, lost, util_gpu_pct, util_mem_pct, mem_used_kib, temp_gpu_c,
           temp_mem_c, power_mw, sm_mhz, mem_mhz, pstate, reasons, fan_pct
    FROM gpu_sample_rows;

CREATE TABLE gpu_state (
    t_ms                    INTEGER NOT NULL,
    gpu                     INTEGER NOT NULL,
    mem_total_kib           INTEGER,
    mem_reserved_kib        INTEGER,
    power_limit_mw          INTEGER,
    enforced_power_limit_mw INTEGER,
    graphics_mhz            INTEGER,
    pcie_link_gen           INTEGER,
    pcie_link_width         INTEGER,
    pcie_tx_kib_s           INTEGER,
    pcie_rx_kib_s           INTEGER,
    ecc_uncorrected         INTEGER,
    ecc_corrected           INTEGER,
    energy_mj               INTEGER,
    absent_json             TEXT,
    PRIMARY KEY (t_ms, gpu)
) WITHOUT ROWID;

CREATE TABLE gpu_util_hires (
    t_ms     INTEGER NOT NULL,
    gpu      INTEGER NOT NULL,
    util_pct INTEGER NOT NULL,
    PRIMARY KEY (t_ms, gpu)
) WITHOUT ROWID;

CREATE TABLE process_polls (
    t_ms INTEGER NOT NULL,
    gpu  INTEGER NOT NULL,
    PRIMARY KEY (t_ms, gpu)
) WITHOUT ROWID;

CREATE TABLE gpu_processes (
    t_ms         INTEGER NOT NULL,
    gpu          INTEGER NOT NULL,
    pid          INTEGER NOT NULL,
    used_mem_kib INTEGER,
    sm_util_pct  INTEGER,
    mem_util_pct INTEGER,
    class        TEXT,
    PRIMARY KEY (t_ms, gpu, pid)
) WITHOUT ROWID;

CREATE TABLE processes (
    pid      INTEGER NOT NULL,
    first_ms INTEGER NOT NULL,
    name     TEXT,
    cmdline  TEXT,
    user     TEXT,
    PRIMARY KEY (pid, first_ms)
) WITHOUT ROWID;

CREATE TABLE host_samples (
    t_ms           INTEGER PRIMARY KEY,
    cpu_busy_pm    INTEGER,
    cpu_iowait_pm  INTEGER,
    cpu_steal_pm   INTEGER,
    cores_busy_pct BLOB,
    mem_used_kib   INTEGER,
    mem_total_kib  INTEGER,
    load_1m_centi  INTEGER,
    swap_used_kib  INTEGER,
    swap_total_kib INTEGER
);

CREATE TABLE tree_samples (
    t_ms    INTEGER NOT NULL,
    pid     INTEGER NOT NULL,
    ppid    INTEGER NOT NULL,
    cpu_pm  INTEGER,
    rss_kib INTEGER,
    threads INTEGER,
    state   TEXT,
    read_kib  INTEGER,
    write_kib INTEGER,
    pss_kib   INTEGER,
    PRIMARY KEY (t_ms, pid)
) WITHOUT ROWID;

CREATE TABLE events (
    t_ms    INTEGER NOT NULL,
    kind    TEXT NOT NULL,
    payload TEXT NOT NULL
);
"#;

/// `gpm_samples`, one row per completed GPM window: the key, then one column per row of
/// `gpulse_model::GPM_FIELDS` in its order (per-mille for a percentage, KiB/s for a rate). A
/// metric added to the table is a column added at the end, which is not a bump: readers name
/// the columns they read and take a column an older file lacks as an absent metric.
pub fn create_gpm_samples() -> String {
    let columns: String = gpulse_model::GPM_FIELDS.iter().map(|f| format!("    {} INTEGER,\n", f.column)).collect();
    format!(
        "CREATE TABLE gpm_samples (\n    t_ms INTEGER NOT NULL,\n    gpu INTEGER NOT NULL,\n    interval_ms INTEGER NOT NULL,\n{columns}    PRIMARY KEY (t_ms, gpu)\n) WITHOUT ROWID;\n"
    )
}

/// Added in schema 2: marks from inside the training loop (`gpulse.step()`, phases, the data
/// wait that `--instrument` times). Schema 1 files lack the table; readers treat it as empty.
pub const CREATE_MARKERS: &str = r#"
CREATE TABLE markers (
    t_us   INTEGER NOT NULL,
    pid    INTEGER NOT NULL,
    kind   TEXT NOT NULL,
    name   TEXT,
    dur_us INTEGER,
    count  INTEGER NOT NULL DEFAULT 1
);
"#;
