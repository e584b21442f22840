use std::cell::{Cell, RefCell};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gpulse_model::ProcessSample;

use super::*;

const UID: &str = "9ac48755-3968-48e4-b9dc-6d4b69f3bb42";
const ID: &str = "3baf66ee56a52a8765c3deb2444315411a888fa3e2f8f7ddd75e9ded3c34425e";

thread_local! {
    /// Processes a test starts, moves and ends (PID → start time and cgroup file), beside the
    /// fixed ones; each test runs on a thread of its own.
    static LIVE: RefCell<HashMap<u32, (u64, String)>> = RefCell::new(HashMap::new());
    /// Reads of `/proc/PID/cgroup` and of `/proc/PID/stat` so far.
    static READS: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

/// PID 10 in a pod's container, 20 and 21 in Slurm job 7, 30 nowhere, 40 gone; others as
/// [`LIVE`] says.
fn cgroup_of(pid: u32) -> Option<String> {
    READS.set((READS.get().0 + 1, READS.get().1));
    match pid {
        10 => Some(format!("0::/kubepods/burstable/pod{UID}/{ID}\n")),
        20 | 21 => Some("4:memory:/slurm/uid_1000/job_7/step_0/task_0\n0::/\n".into()),
        30 => Some("0::/user.slice/session-1.scope\n".into()),
        _ => LIVE.with_borrow(|l| l.get(&pid).map(|(_, text)| text.clone())),
    }
}

fn start_of(pid: u32) -> Option<u64> {
    READS.set((READS.get().0, READS.get().1 + 1));
    match pid {
        10 | 20 | 21 | 30 => Some(1),
        _ => LIVE.with_borrow(|l| l.get(&pid).map(|(start, _)| *start)),
    }
}

/// Process `pid` as it is now: started at the first, in the cgroup at the second (the v2
/// line's path); `None`: gone.
fn live(pid: u32, now: Option<(u64, &str)>) {
    LIVE.with_borrow_mut(|l| match now {
        Some((start, cgroup)) => l.insert(pid, (start, format!("0::{cgroup}\n"))),
        None => l.remove(&pid),
    });
}

fn pod_path(uid: &str) -> String {
    format!("/kubepods/besteffort/pod{uid}/{ID}")
}

/// The uid of the pod or the id of the job each process is attributed to.
fn owners(gpus: &[GpuSample]) -> Vec<Option<String>> {
    gpus.iter()
        .flat_map(|g| &g.processes)
        .map(|p| match p.workload.as_ref()? {
            Workload::Pod(pod) => pod.uid.clone(),
            Workload::Slurm(j) => Some(format!("job {}", j.job_id)),
        })
        .collect()
}

fn environ_of(pid: u32) -> Option<Vec<u8>> {
    match pid {
        20 => Some(b"HOME=/root\0SLURM_JOB_ID=7\0SLURM_JOB_USER=ada\0SLURM_JOB_NAME=train\0".to_vec()),
        // Another job's variables, inherited: not believed.
        21 => Some(b"SLURM_JOB_ID=6\0SLURM_JOB_USER=bob\0".to_vec()),
        _ => None,
    }
}

struct Named {
    refreshed: AtomicUsize,
    gpus: Mutex<Vec<(String, Pod)>>,
}

impl Directory for Named {
    fn container(&self, id: &str) -> Option<Pod> {
        (id == ID).then(|| Pod {
            uid: Some(UID.into()),
            namespace: Some("team-a".into()),
            name: Some("train-0".into()),
            container: Some("main".into()),
            container_id: Some(ID.into()),
        })
    }
    fn gpu(&self, uuid: &str) -> Option<Pod> {
        self.gpus.lock().unwrap().iter().find(|(u, _)| u == uuid).map(|(_, p)| p.clone())
    }
    fn refresh(&self) {
        self.refreshed.fetch_add(1, Ordering::Relaxed);
    }
}

fn attributor(directory: Option<Arc<dyn Directory>>) -> Attributor {
    // Known by start time: the PIDs here are made up, and a pidfd would hold a real one's.
    let a = Attributor::new(directory).without_pidfds();
    Attributor { read_cgroup: cgroup_of, read_environ: environ_of, read_start: start_of, ..a }
}

/// One process's workload now, its start time read.
fn one(a: &mut Attributor, pid: u32) -> Option<Workload> {
    a.workload_at(pid, None, Instant::now())
}

fn gpu(index: u32, pids: &[u32]) -> GpuSample {
    GpuSample {
        gpu_index: index,
        processes: pids.iter().map(|&pid| ProcessSample { pid, ..Default::default() }).collect(),
        ..Default::default()
    }
}

#[test]
fn without_a_directory_the_path_gives_the_uid_and_the_job() {
    let mut a = attributor(None);
    let pod = one(&mut a, 10).unwrap();
    assert_eq!(pod, Workload::Pod(Pod { uid: Some(UID.into()), container_id: Some(ID.into()), ..Pod::default() }));
    let job = one(&mut a, 20).unwrap();
    assert_eq!(
        job,
        Workload::Slurm(SlurmJob {
            job_id: 7,
            step: Some("0".into()),
            user: Some("ada".into()),
            name: Some("train".into())
        })
    );
    let Some(Workload::Slurm(other)) = one(&mut a, 21) else { panic!() };
    assert_eq!((other.user, other.name), (None, None), "another job's environment");
    assert_eq!(one(&mut a, 30), None);
    assert_eq!(one(&mut a, 40), None);
}

#[test]
fn the_directory_names_the_pod_and_is_asked_to_refresh_once_per_new_cgroup() {
    let d = Arc::new(Named { refreshed: AtomicUsize::new(0), gpus: Mutex::new(Vec::new()) });
    let mut a = attributor(Some(d.clone()));
    for _ in 0..3 {
        let Some(Workload::Pod(p)) = one(&mut a, 10) else { panic!() };
        assert_eq!(
            (p.namespace.as_deref(), p.name.as_deref(), p.container.as_deref()),
            (Some("team-a"), Some("train-0"), Some("main"))
        );
    }
    assert_eq!(d.refreshed.load(Ordering::Relaxed), 1, "a known cgroup asks nothing");
}

#[test]
fn a_gpu_is_assigned_by_the_kubelet_or_to_the_one_job_on_it() {
    let kubelet_pod =
        Pod { namespace: Some("ns".into()), name: Some("p".into()), container: Some("c".into()), ..Pod::default() };
    let d = Arc::new(Named {
        refreshed: AtomicUsize::new(0),
        gpus: Mutex::new(vec![("GPU-a".into(), kubelet_pod.clone())]),
    });
    let mut a = attributor(Some(d));
    let mut gpus = vec![gpu(0, &[]), gpu(1, &[20, 21]), gpu(2, &[20, 30]), gpu(3, &[])];
    a.attribute(&mut gpus, &["GPU-a".into(), "GPU-b".into(), "GPU-c".into(), String::new()], |_| None);
    assert_eq!(gpus[0].assigned, Some(Workload::Pod(kubelet_pod)), "an idle GPU assigned to a pod");
    assert_eq!(gpus[1].assigned, Some(Workload::Slurm(SlurmJob { job_id: 7, ..SlurmJob::default() })));
    assert_eq!(gpus[2].assigned, None, "a process outside the job shares it");
    assert_eq!(gpus[3].assigned, None);
    assert!(gpus[1].processes.iter().all(|p| p.workload.is_some()));
}

#[test]
fn slurm_names_are_bounded_and_empty_is_absent() {
    let long = format!("SLURM_JOB_ID=1\0SLURM_JOB_NAME={}\0SLURM_JOB_USER=\0", "x".repeat(1000));
    let (user, name) = slurm_names(Some(long.into_bytes()), 1);
    assert_eq!(user, None);
    assert_eq!(name.map(|n| n.len()), Some(256));
    assert_eq!(slurm_names(None, 1), (None, None));
    assert_eq!(slurm_names(Some(b"\0\0=\0SLURM_JOB_ID\0".to_vec()), 1), (None, None));
}

const UID_B: &str = "1858680e-b044-4fd5-9dd4-f137e30e2180";

#[test]
fn a_reused_pid_is_attributed_afresh_and_a_known_process_reads_no_cgroup() {
    let mut a = attributor(None);
    let t0 = Instant::now();
    let gpus = || vec![gpu(0, &[50, 51])];
    live(50, Some((100, &pod_path(UID))));
    live(51, Some((100, "/slurm/uid_1000/job_9/step_0/task_0")));
    let mut g = gpus();
    a.attribute_at(&mut g, &[], &|_| None, t0);
    assert_eq!(owners(&g), [Some(UID.into()), Some("job 9".into())]);
    let cgroup_reads = READS.get().0;
    let mut g = gpus();
    a.attribute_at(&mut g, &[], &|_| None, t0 + Duration::from_secs(1));
    assert_eq!(owners(&g), [Some(UID.into()), Some("job 9".into())]);
    assert_eq!(READS.get().0, cgroup_reads, "the same processes: no cgroup read");
    // Both end; their PIDs go to new processes in each other's places, within one poll.
    live(50, Some((250, "/slurm/uid_1000/job_9/step_0/task_0")));
    live(51, Some((260, &pod_path(UID_B))));
    let mut g = gpus();
    a.attribute_at(&mut g, &[], &|_| None, t0 + Duration::from_secs(2));
    assert_eq!(owners(&g), [Some("job 9".into()), Some(UID_B.into())], "never the old process's workload");
    // A start time the tree read is used, not read again; a different one is a new process.
    let stat_reads = READS.get().1;
    let mut g = vec![gpu(0, &[50])];
    live(50, Some((300, &pod_path(UID))));
    a.attribute_at(&mut g, &[], &|pid| (pid == 50).then_some(300), t0 + Duration::from_secs(3));
    assert_eq!(owners(&g), [Some(UID.into())]);
    assert_eq!(READS.get().1, stat_reads, "no stat read for a start time known");
    // A process not polled is forgotten; one that is gone has no workload.
    assert_eq!(a.by_pid.keys().collect::<Vec<_>>(), [&50]);
    live(50, None);
    let mut g = vec![gpu(0, &[50])];
    a.attribute_at(&mut g, &[], &|_| None, t0 + Duration::from_secs(4));
    assert_eq!(owners(&g), [None]);
    assert!(a.by_pid.is_empty());
}

#[test]
fn a_process_moved_to_another_cgroup_is_attributed_anew_after_the_recheck() {
    let mut a = attributor(None).with_recheck(Duration::from_secs(3));
    let t0 = Instant::now();
    let poll = |a: &mut Attributor, after_s: u64| {
        let mut g = vec![gpu(0, &[60])];
        a.attribute_at(&mut g, &[], &|_| None, t0 + Duration::from_secs(after_s));
        owners(&g).remove(0)
    };
    live(60, Some((100, &pod_path(UID))));
    assert_eq!(poll(&mut a, 0), Some(UID.into()));
    // Moved (same process, same start) into another pod's cgroup, then into a Slurm job's.
    live(60, Some((100, &pod_path(UID_B))));
    assert_eq!(poll(&mut a, 2), Some(UID.into()), "believed until the recheck");
    assert_eq!(poll(&mut a, 3), Some(UID_B.into()), "read again at the recheck");
    live(60, Some((100, "/slurm/uid_1000/job_9/step_0/task_0")));
    assert_eq!(poll(&mut a, 5), Some(UID_B.into()));
    assert_eq!(poll(&mut a, 6), Some("job 9".into()));
    // The default period is the documented one.
    assert_eq!(Attributor::new(None).recheck, RECHECK);
}

#[test]
fn a_process_held_by_its_pidfd_reads_no_stat_and_is_forgotten_once_it_exits() {
    let a = attributor(None);
    let mut a = Attributor { open_handle: proc_info::handle, ..a };
    let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id();
    live(pid, Some((100, &pod_path(UID))));
    let t0 = Instant::now();
    let poll = |a: &mut Attributor, after_s: u64| {
        let mut g = vec![gpu(0, &[pid])];
        a.attribute_at(&mut g, &[], &|_| None, t0 + Duration::from_secs(after_s));
        owners(&g).remove(0)
    };
    assert_eq!(poll(&mut a, 0), Some(UID.into()));
    assert!(matches!(a.by_pid[&pid].identity, Identity::Held(_)), "pidfds (Linux 5.3)");
    let reads = READS.get();
    assert_eq!(poll(&mut a, 1), Some(UID.into()));
    assert_eq!(READS.get(), reads, "neither its stat nor its cgroup read");
    // It ends, and (as far as the readers say) a new process has its PID: within the recheck,
    // the exit alone makes it read afresh.
    let _ = (child.kill(), child.wait());
    live(pid, Some((250, &pod_path(UID_B))));
    assert_eq!(poll(&mut a, 2), Some(UID_B.into()));
}

/// The live reader on this very process: whatever its cgroup, it parses without panicking, and
/// this test's process runs in no pod or job (CI runs on a plain machine).
#[test]
fn this_process_reads() {
    let text = crate::proc_info::cgroup_file(std::process::id()).expect("our own cgroup file");
    assert!(text.lines().any(|l| l.starts_with("0::") || l.contains(':')), "{text}");
    let _ = cgroup::owner_of_file(&text);
}
