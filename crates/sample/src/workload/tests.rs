use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use gpulse_model::ProcessSample;

use super::*;

const UID: &str = "9ac48755-3968-48e4-b9dc-6d4b69f3bb42";
const ID: &str = "3baf66ee56a52a8765c3deb2444315411a888fa3e2f8f7ddd75e9ded3c34425e";

/// PID 10 in a pod's container, 20 and 21 in Slurm job 7, 30 nowhere, 40 gone.
fn cgroup_of(pid: u32) -> Option<String> {
    match pid {
        10 => Some(format!("0::/kubepods/burstable/pod{UID}/{ID}\n")),
        20 | 21 => Some("4:memory:/slurm/uid_1000/job_7/step_0/task_0\n0::/\n".into()),
        30 => Some("0::/user.slice/session-1.scope\n".into()),
        _ => None,
    }
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
    Attributor { read_cgroup: cgroup_of, read_environ: environ_of, ..Attributor::new(directory) }
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
    let pod = a.workload(10).unwrap();
    assert_eq!(pod, Workload::Pod(Pod { uid: Some(UID.into()), container_id: Some(ID.into()), ..Pod::default() }));
    let job = a.workload(20).unwrap();
    assert_eq!(
        job,
        Workload::Slurm(SlurmJob {
            job_id: 7,
            step: Some("0".into()),
            user: Some("ada".into()),
            name: Some("train".into())
        })
    );
    let Some(Workload::Slurm(other)) = a.workload(21) else { panic!() };
    assert_eq!((other.user, other.name), (None, None), "another job's environment");
    assert_eq!(a.workload(30), None);
    assert_eq!(a.workload(40), None);
}

#[test]
fn the_directory_names_the_pod_and_is_asked_to_refresh_once_per_new_cgroup() {
    let d = Arc::new(Named { refreshed: AtomicUsize::new(0), gpus: Mutex::new(Vec::new()) });
    let mut a = attributor(Some(d.clone()));
    for _ in 0..3 {
        let Some(Workload::Pod(p)) = a.workload(10) else { panic!() };
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
    a.attribute(&mut gpus, &["GPU-a".into(), "GPU-b".into(), "GPU-c".into(), String::new()]);
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

/// The live reader on this very process: whatever its cgroup, it parses without panicking, and
/// this test's process runs in no pod or job (CI runs on a plain machine).
#[test]
fn this_process_reads() {
    let text = crate::proc_info::cgroup_file(std::process::id()).expect("our own cgroup file");
    assert!(text.lines().any(|l| l.starts_with("0::") || l.contains(':')), "{text}");
    let _ = cgroup::owner_of_file(&text);
}
