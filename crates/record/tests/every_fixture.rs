//! The recording's columns as the metric table names them, read back from every recording in
//! `tests/fixtures`, of every schema version: each GPU sample the reader gives holds what the
//! file's own columns hold, checked against a mapping written here from the schema's
//! documentation (`docs/recording-format.md`), not from the table.

use std::path::{Path, PathBuf};

use gpulse_model::GpuSample;

/// `gpu_samples`' columns and the sample fields they keep (KiB where the name says so).
type Field = fn(&GpuSample) -> Option<i64>;
const BASE: [(&str, Field); 11] = [
    ("util_gpu_pct", |g| g.util_gpu_pct.map(i64::from)),
    ("util_mem_pct", |g| g.util_mem_pct.map(i64::from)),
    ("mem_used_kib", |g| g.memory_used_bytes.map(|b| (b / 1024) as i64)),
    ("temp_gpu_c", |g| g.temperature_gpu_c.map(i64::from)),
    ("temp_mem_c", |g| g.temperature_memory_c.map(i64::from)),
    ("power_mw", |g| g.power_draw_mw.map(i64::from)),
    ("sm_mhz", |g| g.clock_sm_mhz.map(i64::from)),
    ("mem_mhz", |g| g.clock_mem_mhz.map(i64::from)),
    ("pstate", |g| g.pstate.map(i64::from)),
    ("reasons", |g| g.clocks_event_reasons.map(|r| r as i64)),
    ("fan_pct", |g| g.fan_speed_pct.map(i64::from)),
];

/// `gpu_state`'s columns: kept only when one of them changed.
const STATE: [(&str, Field); 12] = [
    ("mem_total_kib", |g| g.memory_total_bytes.map(|b| (b / 1024) as i64)),
    ("mem_reserved_kib", |g| g.memory_reserved_bytes.map(|b| (b / 1024) as i64)),
    ("power_limit_mw", |g| g.power_limit_mw.map(i64::from)),
    ("enforced_power_limit_mw", |g| g.enforced_power_limit_mw.map(i64::from)),
    ("graphics_mhz", |g| g.clock_graphics_mhz.map(i64::from)),
    ("pcie_link_gen", |g| g.pcie_link_gen.map(i64::from)),
    ("pcie_link_width", |g| g.pcie_link_width.map(i64::from)),
    ("pcie_tx_kib_s", |g| g.pcie_tx_bytes_per_s.map(|b| (b / 1024) as i64)),
    ("pcie_rx_kib_s", |g| g.pcie_rx_bytes_per_s.map(|b| (b / 1024) as i64)),
    ("ecc_uncorrected", |g| g.ecc_uncorrected_volatile.map(|v| v as i64)),
    ("ecc_corrected", |g| g.ecc_corrected_volatile.map(|v| v as i64)),
    ("energy_mj", |g| g.energy_mj.map(|v| v as i64)),
];

fn recordings(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            recordings(&p, out);
        } else if p.extension().is_some_and(|x| x == "db") {
            out.push(p);
        }
    }
}

/// A `gpu_state` row: when, and its values in [`STATE`]'s order.
type StateRow = (i64, Vec<Option<i64>>);

/// Each column's values in order, one list per GPU.
type Runs = std::collections::BTreeMap<(u32, &'static str), Vec<Option<i64>>>;

fn push(runs: &mut Runs, key: (u32, &'static str), v: Option<i64>) {
    runs.entry(key).or_default().push(v);
}

#[test]
fn every_fixture_reads_each_column_into_its_field() {
    let mut files = Vec::new();
    recordings(&gpulse_fixtures::root(), &mut files);
    assert!(files.len() >= 40, "{} recordings", files.len());
    let mut versions = std::collections::BTreeSet::new();
    let mut states_checked = 0;
    for path in files {
        let rec = gpulse_record::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        versions.insert(rec.meta.get("schema_version").cloned().unwrap_or_default());
        let db = rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        let (mut want, mut got) = (Runs::new(), Runs::new());
        // Every base row, in the file's order, is one sample of the reader's, in the same order.
        let cols: Vec<&str> = BASE.iter().map(|c| c.0).collect();
        let mut stmt = db.prepare(&format!("SELECT gpu, {} FROM gpu_samples ORDER BY id", cols.join(", "))).unwrap();
        let mut rows = stmt.query([]).unwrap();
        let mut n = 0usize;
        while let Some(r) = rows.next().unwrap() {
            let gpu: u32 = r.get(0).unwrap();
            for (i, (name, _)) in BASE.iter().enumerate() {
                push(&mut want, (gpu, name), r.get(1 + i).unwrap());
            }
            n += 1;
        }
        let samples: Vec<&GpuSample> = rec.snapshots.iter().flat_map(|s| &s.gpus).collect();
        assert_eq!(samples.len(), n, "{}", path.display());
        for g in &samples {
            for (name, field) in BASE {
                push(&mut got, (g.gpu_index, name), field(g));
            }
        }
        assert_eq!(got, want, "{}", path.display());
        // Each sample holds the state as of its time: the GPU's last `gpu_state` row at or before it.
        let cols: Vec<&str> = STATE.iter().map(|c| c.0).collect();
        let sql = format!("SELECT gpu, t_ms, {} FROM gpu_state ORDER BY t_ms", cols.join(", "));
        let mut stmt = db.prepare(&sql).unwrap();
        let mut rows = stmt.query([]).unwrap();
        let mut state: std::collections::HashMap<u32, Vec<StateRow>> = Default::default();
        while let Some(r) = rows.next().unwrap() {
            let values = (0..STATE.len()).map(|i| r.get(2 + i).unwrap()).collect();
            state.entry(r.get(0).unwrap()).or_default().push((r.get(1).unwrap(), values));
        }
        let mut checked = 0;
        for snap in &rec.snapshots {
            let t_ms = snap.timestamp_us.div_euclid(1000);
            for g in &snap.gpus {
                let rows = state.get(&g.gpu_index).map_or(&[][..], Vec::as_slice);
                let at = rows.partition_point(|(t, _)| *t <= t_ms);
                let file = rows.get(at.wrapping_sub(1)).map(|r| r.1.clone()).unwrap_or_else(|| vec![None; STATE.len()]);
                let read: Vec<Option<i64>> = STATE.iter().map(|(_, f)| f(g)).collect();
                assert_eq!(read, file, "{} GPU {} at {t_ms} ms: {cols:?}", path.display(), g.gpu_index);
                checked += usize::from(file.iter().any(Option::is_some));
            }
        }
        states_checked += checked;
    }
    assert!(versions.len() >= 3, "schema versions {versions:?}");
    assert!(states_checked > 1000, "{states_checked} samples with a state");
}

/// A fresh recording has a column for every hand-read metric the table says it keeps.
#[test]
fn a_new_recording_has_every_column_the_table_names() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let w = gpulse_record::Writer::create(&path, &gpulse_record::RunMeta::default(), &[]).unwrap();
    w.finish().unwrap();
    let db = rusqlite::Connection::open(&path).unwrap();
    for (table, place) in [("gpu_sample_rows", gpulse_model::Place::Base), ("gpu_state", gpulse_model::Place::State)] {
        let mut stmt = db.prepare(&format!("SELECT name FROM pragma_table_info('{table}')")).unwrap();
        let present: Vec<String> = stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
        let named: Vec<&str> = gpulse_model::columns_in(place).map(|(_, c)| c.name).collect();
        assert!(named.len() >= 11, "{named:?}");
        for c in named {
            assert!(present.iter().any(|p| p == c), "{table} has no {c}: {present:?}");
        }
    }
}
