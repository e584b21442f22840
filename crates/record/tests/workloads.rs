//! Each process's pod or Slurm job goes into the recording and comes back as it was, a change
//! (the runtime naming a pod a poll late) as a new row; a recording from before the table reads
//! with no workloads.

use std::path::PathBuf;

use gpulse_model::{GpuSample, Pod, ProcessSample, SlurmJob, Snapshot, Workload};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gpulse-workloads-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn process(pid: u32, workload: Option<Workload>) -> ProcessSample {
    ProcessSample { pid, used_memory_bytes: Some(1 << 30), sm_util_pct: Some(40), workload, ..Default::default() }
}

fn snapshot(t_s: i64, processes: Vec<ProcessSample>) -> Snapshot {
    Snapshot { timestamp_us: t_s * 1_000_000, gpus: vec![GpuSample { gpu_index: 0, processes, ..Default::default() }] }
}

#[test]
fn workloads_round_trip_and_follow_changes() {
    let uid = "8f3c1b2a-5d6e-4f70-8a9b-0c1d2e3f4a5b".to_owned();
    let unnamed = Workload::Pod(Pod { uid: Some(uid.clone()), container_id: Some("ab".repeat(32)), ..Pod::default() });
    let named = Workload::Pod(Pod {
        uid: Some(uid),
        container_id: Some("ab".repeat(32)),
        namespace: Some("team-a".into()),
        name: Some("train-0".into()),
        container: Some("main".into()),
    });
    let job = Workload::Slurm(SlurmJob {
        job_id: 4711,
        step: Some("0".into()),
        user: Some("ada".into()),
        name: Some("it's \"quoted\"".into()),
    });
    let d = dir("trip");
    let path = d.join("run.db");
    let meta = gpulse_record::RunMeta { gpulse_version: "test".into(), source: "test".into(), ..Default::default() };
    let mut w = gpulse_record::Writer::create(&path, &meta, &[]).unwrap();
    // The listing (PIDs, memory, shares) stays the same; only the pod's names arrive at 2 s.
    w.snapshot(&snapshot(
        1,
        vec![process(10, Some(unnamed.clone())), process(20, Some(job.clone())), process(30, None)],
    ))
    .unwrap();
    w.snapshot(&snapshot(2, vec![process(10, Some(named.clone())), process(20, Some(job.clone())), process(30, None)]))
        .unwrap();
    w.snapshot(&snapshot(3, vec![process(10, Some(named.clone())), process(20, None), process(30, None)])).unwrap();
    w.finish().unwrap();

    let rec = gpulse_record::read(&path).unwrap();
    let at =
        |i: usize, pid: u32| rec.snapshots[i].gpus[0].processes.iter().find(|p| p.pid == pid).unwrap().workload.clone();
    assert_eq!(at(0, 10), Some(unnamed));
    assert_eq!(at(1, 10), Some(named.clone()));
    assert_eq!(at(2, 10), Some(named));
    assert_eq!(at(0, 20), Some(job.clone()));
    assert_eq!(at(1, 20), Some(job));
    assert_eq!(at(2, 20), None, "the job's process left it");
    assert!((0..3).all(|i| at(i, 30).is_none()), "a process outside any pod or job has none");

    let conn = rusqlite::Connection::open(&path).unwrap();
    let rows: i64 = conn.query_row("SELECT count(*) FROM workloads", [], |r| r.get(0)).unwrap();
    assert_eq!(rows, 4, "one row per process and change: pod unnamed, named; job; none");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_recording_without_the_table_reads_with_no_workloads() {
    let fixture = gpulse_fixtures::path("h200-gpulse/training_workers.db");
    let rec = gpulse_record::read(&fixture).unwrap();
    let procs: Vec<_> = rec.snapshots.iter().flat_map(|s| &s.gpus).flat_map(|g| &g.processes).collect();
    assert!(!procs.is_empty());
    assert!(procs.iter().all(|p| p.workload.is_none()));
}
