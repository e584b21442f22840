//! Damaged recordings: cut short, bytes flipped, written in WAL mode and copied without the log.
//! Each gives a clear error or a readable recording, never a panic, and leaves no side files.

use std::path::{Path, PathBuf};

use gpulse_record::RecordError;
use proptest::prelude::*;

fn fixture() -> Vec<u8> {
    let p = gpulse_fixtures::path("h200-gpulse-run/dl_bound.db");
    std::fs::read(p).unwrap()
}

/// A directory of the test's own, removed with what is in it when dropped.
fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("gpulse-damaged-{name}-")).tempdir().unwrap()
}

fn side_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with("-wal") || n.ends_with("-shm"))
        .collect()
}

#[test]
fn a_recording_cut_short_is_damaged_not_foreign() {
    let dir_tmp = scratch("cut");
    let dir = dir_tmp.path();
    let bytes = fixture();
    let p = dir.join("half.db");
    std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
    let e = gpulse_record::read(&p).unwrap_err();
    assert!(matches!(e, RecordError::Damaged { .. }), "{e}");
    let text = e.to_string();
    assert!(text.contains("cut short") && text.contains(&(bytes.len() / 2).to_string()), "{text}");
    std::fs::write(&p, &bytes[..50]).unwrap();
    assert!(gpulse_record::read(&p).unwrap_err().to_string().contains("ends inside its header"));
    std::fs::write(&p, b"not a database at all").unwrap();
    assert!(matches!(gpulse_record::read(&p).unwrap_err(), RecordError::NotARecording(_)));
    assert!(side_files(dir).is_empty());
}

#[test]
fn corrupt_pages_are_said_once() {
    let dir_tmp = scratch("corrupt");
    let dir = dir_tmp.path();
    let mut bytes = fixture();
    // Every page after the first two (the schema's) overwritten.
    for b in &mut bytes[8192..] {
        *b = 0xA5;
    }
    let p = dir.join("c.db");
    std::fs::write(&p, &bytes).unwrap();
    let e = gpulse_record::read(&p).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, RecordError::Damaged { .. }), "{text}");
    assert!(std::error::Error::source(&e).is_none(), "no cause that repeats it: {text}");
}

/// A recording whose every page is still in its write-ahead log, as a killed recorder leaves it.
fn wal_recording(dir: &Path) -> PathBuf {
    let p = dir.join("live.db");
    let meta = gpulse_record::RunMeta { gpulse_version: "test".into(), source: "test".into(), ..Default::default() };
    let w = gpulse_record::Writer::create(&p, &meta, &[]).unwrap();
    // Copied while the writer still holds it: the log has everything, the main file nothing.
    std::fs::copy(&p, dir.join("copy.db")).unwrap();
    drop(w);
    dir.join("copy.db")
}

#[test]
fn a_copy_without_its_wal_says_so_and_leaves_nothing_behind() {
    let dir_tmp = scratch("wal");
    let dir = dir_tmp.path();
    let copy = wal_recording(dir);
    let before = side_files(dir);
    let e = gpulse_record::read(&copy).unwrap_err();
    assert!(e.to_string().contains("-wal file is missing"), "{e}");
    assert_eq!(side_files(dir), before, "no -wal or -shm made by reading");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn damage_never_panics(cut in 0usize..90_000, flips in prop::collection::vec((0usize..90_000, any::<u8>()), 0..40)) {
        let dir_tmp = scratch("prop");
        let dir = dir_tmp.path();
        let mut bytes = fixture();
        for (at, v) in flips {
            if let Some(b) = bytes.get_mut(at) {
                *b ^= v | 1;
            }
        }
        bytes.truncate(cut.min(bytes.len()));
        let p = dir.join("d.db");
        std::fs::write(&p, &bytes).unwrap();
        let _ = gpulse_record::read(&p).map(|r| r.snapshots.len());
        prop_assert!(side_files(dir).is_empty());
    }
}

#[test]
fn a_core_that_could_not_be_read_stays_unknown() {
    let dir_tmp = scratch("cores");
    let dir = dir_tmp.path();
    let p = dir.join("cores.db");
    let _ = std::fs::remove_file(&p);
    let meta = gpulse_record::RunMeta { gpulse_version: "test".into(), source: "test".into(), ..Default::default() };
    let mut w = gpulse_record::Writer::create(&p, &meta, &[]).unwrap();
    let h = gpulse_model::HostSample {
        timestamp_us: 1_000_000,
        cpu_core_busy_pct: vec![Some(42.0), None, Some(0.0)],
        ..Default::default()
    };
    w.host(&h).unwrap();
    w.finish().unwrap();
    let back = gpulse_record::read(&p).unwrap();
    assert_eq!(back.host[0].cpu_core_busy_pct, [Some(42.0), None, Some(0.0)], "unknown is not 0");
}
