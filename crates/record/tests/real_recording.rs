//! A recording made on an H200 by `gpulse record --pid` (tests/fixtures/h200-gpulse/README.md):
//! a ResNet-18 training with four DataLoader workers, beside an idle process holding 4 GiB.

use std::path::PathBuf;

use gpulse_model::GpuProcessClass;

fn fixture() -> PathBuf {
    gpulse_fixtures::path("h200-gpulse/training_workers.db")
}

#[test]
fn the_training_tree_holds_its_dataloader_workers() {
    let rec = gpulse_record::read(&fixture()).unwrap();
    assert!(["1", "2"].contains(&rec.meta["schema_version"].as_str()));
    let root: u32 = rec.meta["root_pid"].parse().unwrap();
    let widest = rec.trees.iter().map(|t| t.processes.len()).max().unwrap();
    assert_eq!(widest, 5, "the script and its four workers");
    let t = rec.trees.iter().find(|t| t.processes.len() == 5).unwrap();
    assert_eq!(t.processes[0].pid, root);
    assert!(t.processes[1..].iter().all(|p| p.ppid == root), "workers are children of the script");
    // Four workers doing augmentation keep several cores busy.
    assert!(rec.trees.iter().filter_map(|t| t.cpu_pct).fold(0.0, f32::max) > 200.0);
}

#[test]
fn the_idle_holder_is_foreign_and_the_trainer_is_in_the_tree() {
    let rec = gpulse_record::read(&fixture()).unwrap();
    let root: u32 = rec.meta["root_pid"].parse().unwrap();
    let procs: Vec<_> = rec.snapshots.iter().flat_map(|s| &s.gpus).flat_map(|g| &g.processes).collect();
    let trainer = procs.iter().find(|p| p.pid == root).expect("the trainer holds a context");
    assert_eq!(trainer.class, Some(GpuProcessClass::Tree));
    let holder = procs.iter().find(|p| p.pid != root).expect("the idle holder shows");
    assert_eq!(holder.class, Some(GpuProcessClass::Foreign));
    assert!(holder.used_memory_bytes.unwrap() >= 4 << 30);
    // GPU, GPM and host samples all came through.
    assert!(rec.snapshots.len() >= 60);
    assert!(rec.snapshots.iter().flat_map(|s| &s.gpus).any(|g| g.gpm.as_ref().and_then(|m| m.sm_util_pct).is_some()));
    assert_eq!(rec.host.len(), rec.snapshots.len());
    assert_eq!(rec.events.last().unwrap().kind.as_str(), "stop");
}

/// Schema 4 is what gpulse writes; 1 to 3 (with or without `markers.count`) and recordings from
/// before swap was kept stay readable, and a newer one is refused by name.
#[test]
fn schema_versions_read_and_refused() {
    let tmp = tempfile::Builder::new().prefix("gpulse-schema-").tempdir().unwrap();
    let dir = tmp.path();
    let p = dir.join("new.db");
    let meta = gpulse_record::RunMeta { gpulse_version: "test".into(), source: "test".into(), ..Default::default() };
    let mut w = gpulse_record::Writer::create(&p, &meta, &[]).unwrap();
    let swapping = gpulse_model::HostSample {
        timestamp_us: 1_000_000,
        swap_used_bytes: Some(3 << 30),
        swap_total_bytes: Some(8 << 30),
        ..Default::default()
    };
    let no_swap = gpulse_model::HostSample { timestamp_us: 2_000_000, ..Default::default() };
    w.host(&swapping).unwrap();
    w.host(&no_swap).unwrap();
    w.finish().unwrap();
    let rec = gpulse_record::read(&p).unwrap();
    assert_eq!(rec.meta["schema_version"], "5");
    assert_eq!(gpulse_record::schema::SCHEMA_VERSION, 5);
    assert_eq!(rec.host, [swapping, no_swap], "swap read back as written, an unread one absent");
    // The real dl_bound recording is schema 2 from before `count`: one mark a row.
    let v2 = gpulse_fixtures::path("h200-gpulse-run/dl_bound.db");
    let old = gpulse_record::read(&v2).unwrap();
    assert_eq!(old.meta["schema_version"], "2");
    assert!(!old.markers.is_empty() && old.markers.iter().all(|m| m.count == 1));
    assert!(!old.host.is_empty() && old.host.iter().all(|h| h.swap_total_bytes.is_none()), "no swap kept yet");
    // A schema 3 recording with stacks loads them, without the clocks it never had.
    let v4 = gpulse_record::read(&gpulse_fixtures::path("h200-main-thread/network.db")).unwrap();
    assert_eq!(v4.meta["schema_version"], "3");
    assert!(v4.stacks.samples.len() > 100 && v4.stacks.samples.iter().all(|s| s.clock.is_none()));
    // A schema from a later gpulse: refused, saying which.
    let conn = rusqlite::Connection::open(&p).unwrap();
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'", []).unwrap();
    drop(conn);
    let e = gpulse_record::read(&p).unwrap_err().to_string();
    assert!(e.contains("newer gpulse (schema 99, this one reads 5)"), "{e}");
}

/// From schema 4, `gpu_samples` is a view: a query of it still gets `t_ms` and `gpu` from each
/// row's key, as the generated columns of schema 3 gave them.
#[test]
fn gpu_samples_is_a_view_with_time_and_gpu() {
    let tmp = tempfile::Builder::new().prefix("gpulse-view-").tempdir().unwrap();
    let p = tmp.path().join("v.db");
    let meta = gpulse_record::RunMeta { gpulse_version: "test".into(), source: "test".into(), ..Default::default() };
    let mut w = gpulse_record::Writer::create(&p, &meta, &[]).unwrap();
    for (t_ms, util) in [(1_000, 10), (2_000, 20)] {
        let gpus = (0..2)
            .map(|gpu| gpulse_model::GpuSample { gpu_index: gpu, util_gpu_pct: Some(util + gpu), ..Default::default() })
            .collect();
        w.snapshot(&gpulse_model::Snapshot { timestamp_us: t_ms * 1000, gpus }).unwrap();
    }
    w.finish().unwrap();
    let conn = rusqlite::Connection::open(&p).unwrap();
    let kind: String =
        conn.query_row("SELECT type FROM sqlite_master WHERE name = 'gpu_samples'", [], |r| r.get(0)).unwrap();
    assert_eq!(kind, "view");
    let mut stmt = conn.prepare("SELECT t_ms, gpu, util_gpu_pct FROM gpu_samples ORDER BY t_ms, gpu").unwrap();
    let rows: Vec<(i64, i64, i64)> =
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect();
    assert_eq!(rows, [(1_000, 0, 10), (1_000, 1, 11), (2_000, 0, 20), (2_000, 1, 21)]);
}
