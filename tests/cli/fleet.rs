//! Every GPU second to its pod or Slurm job, without a cluster but with the real pieces: test
//! processes moved into real cgroups shaped as containerd, CRI-O and Slurm make them (cgroup v1
//! and v2, as this host has them), stand-ins speaking the CRI and pod-resources gRPC APIs over
//! Unix sockets, `gpulse serve` on the stand-in NVML, and a real Prometheus summing by pod.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use gpulse_cluster::proto::Container;
use gpulse_cluster::testing::{Answers, Node, container, pod_with_gpus, serve as serve_node};

use super::serve::{free_port, get, have_prometheus, prometheus, prometheus_query, scrape_config};
use super::support::{KillOnDrop, fresh_dir, skipped};

const UID_A: &str = "1858680e-b044-4fd5-9dd4-f137e30e2180";
const ID_A: &str = "e275d1a37782ab30008aa3ae6666cccefe53b3a14a2ab5a8dc459939107c8c01";
/// The recording test's pod: its own cgroup, so the two tests may run at once.
const UID_R: &str = "5d0c8e4a-7b1f-4c6a-9e2d-3f4a5b6c7d8e";
const ID_R: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90";
/// The moving test's two pods.
const UID_M: [&str; 2] = ["0c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5", "6e7f8091-a2b3-4c4d-9e5f-60718293a4b5"];
const ID_M: [&str; 2] = [
    "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00",
    "d00dfeedd00dfeedd00dfeedd00dfeedd00dfeedd00dfeedd00dfeedd00dfeed",
];
const UID_B: &str = "9ac48755-3968-48e4-b9dc-6d4b69f3bb42";
const ID_B: &str = "3baf66ee56a52a8765c3deb2444315411a888fa3e2f8f7ddd75e9ded3c34425e";

/// Where this host mounts a v1 hierarchy with `controller`, and its v2 hierarchy.
fn mounts() -> (Option<PathBuf>, Option<PathBuf>) {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let (mut v1, mut v2) = (None, None);
    for l in info.lines() {
        let f: Vec<&str> = l.split(' ').collect();
        let Some(sep) = f.iter().position(|x| *x == "-") else { continue };
        let (point, fstype, opts) = (f[4], f.get(sep + 1).copied(), f.get(sep + 3).copied().unwrap_or(""));
        match fstype {
            Some("cgroup2") if v2.is_none() => v2 = Some(PathBuf::from(point)),
            Some("cgroup") if v1.is_none() && opts.split(',').any(|o| o == "pids") => v1 = Some(PathBuf::from(point)),
            _ => {}
        }
    }
    (v1, v2)
}

/// A cgroup made for the test, the directories it made removed (leaf first) when dropped. The
/// leaf is kept apart: another run of the tests on this machine may have made it already.
struct Cgroup(Vec<PathBuf>, PathBuf);

impl Cgroup {
    fn make(root: &Path, rel: &str) -> std::io::Result<Cgroup> {
        let mut made = Vec::new();
        let mut p = root.to_owned();
        for part in rel.split('/').filter(|p| !p.is_empty()) {
            p.push(part);
            if !p.exists() {
                std::fs::create_dir(&p)?;
                made.push(p.clone());
            }
        }
        Ok(Cgroup(made, p))
    }
    fn enter(&self, pid: u32) -> std::io::Result<()> {
        std::fs::write(self.1.join("cgroup.procs"), pid.to_string())
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // A killed process leaves its cgroup a moment after `wait` returns: try for a while.
        for p in self.0.iter().rev() {
            for _ in 0..50 {
                if std::fs::remove_dir(p).is_ok() || !p.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// The cgroups at `rels` under this host's v2 hierarchy (else a v1 one); `None`, the test
/// skipped as `what`, where they cannot be made (no hierarchy, or not root) and
/// `GPULSE_REQUIRE_CGROUPS` does not require them.
fn made_or_skipped<const N: usize>(what: &str, rels: [String; N]) -> Option<[Cgroup; N]> {
    let required = std::env::var_os("GPULSE_REQUIRE_CGROUPS").is_some();
    let (v1, v2) = mounts();
    let Some(root) = v2.or(v1) else {
        assert!(!required, "no cgroup hierarchy to make cgroups in");
        skipped(&format!("{what} (no cgroup hierarchy)"));
        return None;
    };
    match rels.iter().map(|r| Cgroup::make(&root, r)).collect::<std::io::Result<Vec<_>>>() {
        Ok(made) => made.try_into().ok(),
        Err(e) => {
            assert!(!required, "cannot make cgroups: {e}");
            skipped(&format!("{what} (cannot make cgroups; needs root)"));
            None
        }
    }
}

/// The stand-in NVML's `scenario`, written into `dir`, and a CRI stand-in there naming
/// `containers`.
fn scenario_and_cri(dir: &Path, scenario: &str, containers: Vec<Container>) -> (PathBuf, Node) {
    let path = dir.join("scenario.json");
    std::fs::write(&path, scenario).unwrap();
    (path, serve_node(&dir.join("cri.sock"), Answers { containers, ..Answers::default() }))
}

fn sleeper(env: &[(&str, &str)]) -> KillOnDrop {
    KillOnDrop::spawn(Command::new("sleep").arg("600").envs(env.iter().copied()))
}

#[test]
fn prometheus_sums_a_shared_gpu_by_pod_and_by_slurm_job() {
    let required = std::env::var_os("GPULSE_REQUIRE_CGROUPS").is_some();
    let (v1, v2) = mounts();
    // Pod A as containerd makes it with the cgroupfs driver; pod B as CRI-O with systemd's; job
    // 4711 as Slurm's v1 plugin. Where the host lacks a hierarchy, its v2 or v1 stands in.
    let (Some(a_root), Some(b_root), Some(s_root)) =
        (v1.clone().or(v2.clone()), v2.clone().or(v1.clone()), v1.clone().or(v2.clone()))
    else {
        assert!(!required, "no cgroup hierarchy to make cgroups in");
        return skipped("cgroup attribution (no cgroup hierarchy)");
    };
    let n = std::process::id();
    let made = (|| -> std::io::Result<_> {
        Ok((
            Cgroup::make(&a_root, &format!("kubepods/burstable/pod{UID_A}/{ID_A}"))?,
            Cgroup::make(
                &b_root,
                &format!(
                    "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice/crio-{ID_B}.scope",
                    UID_B.replace('-', "_")
                ),
            )?,
            Cgroup::make(&s_root, &format!("slurm/uid_{n}/job_4711/step_0/task_0"))?,
        ))
    })();
    let Ok((cg_a, cg_b, cg_s)) = made else {
        assert!(!required, "cannot make cgroups: {:?}", made.err());
        return skipped("cgroup attribution (cannot make cgroups; needs root)");
    };
    let procs = [
        sleeper(&[]),
        sleeper(&[]),
        sleeper(&[]),
        sleeper(&[("SLURM_JOB_ID", "4711"), ("SLURM_JOB_USER", "ada"), ("SLURM_JOB_NAME", "train")]),
    ];
    let pids: Vec<u32> = procs.iter().map(|p| p.id()).collect();
    cg_a.enter(pids[0]).unwrap();
    cg_a.enter(pids[1]).unwrap();
    cg_b.enter(pids[2]).unwrap();
    cg_s.enter(pids[3]).unwrap();

    let dir = fresh_dir("fleet", "pods");
    // GPU 0 time-sliced by pod A (two processes: 30% and 10% of SM time, 10 + 2 GiB) and pod B
    // (25%, 6 GiB); GPU 1 held by the Slurm job (50%); GPU 2 assigned by the kubelet to pod C.
    let gpu = |i: u32, procs: &str| {
        format!(
            r#"{{"name": "NVIDIA H200", "uuid": "GPU-{i}0000000-aaaa-4000-8000-000000000000", "pci_bus_id": "00000000:1{i}:00.0",
               "base": {{"util_gpu_pct": 65, "util_mem_pct": 20, "memory_total_mib": 143771, "memory_used_mib": 18432}},
               "processes": [{procs}]}}"#
        )
    };
    let p = |pid: u32, mib: u32, sm: u32| {
        format!(
            r#"{{"pid": {pid}, "name": "python3", "used_memory_mib": {mib}, "sm_util_pct": {sm}, "mem_util_pct": 1}}"#
        )
    };
    let scenario = format!(
        r#"{{"driver_version": "580.159.04", "cuda_driver_version": 13000, "devices": [{}, {}, {}]}}"#,
        gpu(0, &[p(pids[0], 10240, 30), p(pids[1], 2048, 10), p(pids[2], 6144, 25)].join(",")),
        gpu(1, &p(pids[3], 4096, 50)),
        gpu(2, ""),
    );
    let containers = vec![
        container(ID_A, UID_A, "team-a", "train-a", "main"),
        container(ID_B, UID_B, "team-b", "train-b", "worker"),
    ];
    let (scenario_path, cri) = scenario_and_cri(&dir, &scenario, containers);
    let kubelet = serve_node(
        &dir.join("kubelet.sock"),
        Answers {
            pods: vec![pod_with_gpus("team-c", "infer-c", "server", &["GPU-20000000-aaaa-4000-8000-000000000000"])],
            ..Answers::default()
        },
    );
    let cri_path = cri.path.display().to_string();
    let kubelet_path = kubelet.path.display().to_string();
    let s = serve_with_sockets(scenario_path.to_str().unwrap(), &cri_path, &kubelet_path);
    // The names arrive off the poll's thread: wait for them in /metrics.
    let deadline = Instant::now() + Duration::from_secs(30);
    let metrics = loop {
        let (_, _, body) = get(&s.addr, "/metrics", &[]);
        if ["train-a", "train-b", "infer-c"].iter().all(|p| body.contains(&format!("pod=\"{p}\""))) {
            break body;
        }
        assert!(Instant::now() < deadline, "never named: {body}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let line = |prefix: &str, needle: &str| {
        metrics.lines().find(|l| l.starts_with(prefix) && l.contains(needle)).map(str::to_owned)
    };
    assert!(
        line("DCGM_FI_DEV_GPU_UTIL{", r#"gpu="2""#)
            .unwrap()
            .contains(r#",pod="infer-c",namespace="team-c",container="server"}"#),
        "{metrics}"
    );
    assert!(line("DCGM_FI_DEV_GPU_UTIL{", r#"gpu="1""#).unwrap().contains(r#"hpc_job="4711""#), "{metrics}");
    assert!(!line("DCGM_FI_DEV_GPU_UTIL{", r#"gpu="0""#).unwrap().contains("pod="), "a shared GPU is no one pod's");
    assert!(
        line("gpulse_process_sm_ratio{", &format!("pid=\"{}\"", pids[0]))
            .unwrap()
            .contains(&format!("uid=\"{UID_A}\""))
    );

    if !have_prometheus("Prometheus summing by pod") {
        return;
    }
    let port = free_port();
    scrape_config(&dir, &s.addr, false);
    let _prom = prometheus(&dir, port);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = Vec::new();
    let by_pod = loop {
        let r =
            std::panic::catch_unwind(|| prometheus_query(port, "sum by (namespace, pod) (gpulse_process_sm_ratio)"));
        if let Ok(r) = r {
            if r.len() >= 3 {
                break r;
            }
            last = r;
        }
        let log = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
        assert!(Instant::now() < deadline, "Prometheus never scraped gpulse: {last:?} {log}");
        std::thread::sleep(Duration::from_millis(500));
    };
    let share = |ns: &str, pod: &str| {
        by_pod
            .iter()
            .find(|(l, _)| {
                l.get("namespace").map(String::as_str) == Some(ns) && l.get("pod").map(String::as_str) == Some(pod)
            })
            .map(|(_, v)| *v)
    };
    assert_eq!(share("team-a", "train-a"), Some(0.40), "{by_pod:?}");
    assert_eq!(share("team-b", "train-b"), Some(0.25), "{by_pod:?}");
    let mem = prometheus_query(port, "sum by (pod) (gpulse_process_gpu_memory_bytes{gpu=\"0\"})");
    let gib = |pod: &str| {
        mem.iter().find(|(l, _)| l.get("pod").map(String::as_str) == Some(pod)).map(|(_, v)| *v / (1u64 << 30) as f64)
    };
    assert_eq!((gib("train-a"), gib("train-b")), (Some(12.0), Some(6.0)), "{mem:?}");
    let jobs = prometheus_query(port, "sum by (hpc_job) (gpulse_process_sm_ratio{hpc_job!=\"\"})");
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!((jobs[0].0.get("hpc_job").map(String::as_str), jobs[0].1), (Some("4711"), 0.5));
}

fn serve_with_sockets(scenario: &str, cri: &str, kubelet: &str) -> super::serve::Serving {
    // `serve_scenario` builds the command; the sockets go in through its environment.
    super::serve::serve_scenario_env(
        scenario,
        &[],
        &[("GPULSE_CRI_SOCKET", cri), ("GPULSE_POD_RESOURCES_SOCKET", kubelet)],
    )
}

/// `gpulse record` keeps each process's pod (named by the CRI stand-in) and Slurm job, and the
/// reader gives them back: the recording answers "whose GPU seconds" after the pod is gone.
#[test]
fn record_keeps_each_processs_pod_and_slurm_job() {
    let n = std::process::id();
    let rels = [format!("kubepods/burstable/pod{UID_R}/{ID_R}"), format!("slurm/uid_{n}/job_4712/step_batch/task_0")];
    let Some([cg_pod, cg_job]) = made_or_skipped("recorded attribution", rels) else { return };
    let procs = [sleeper(&[]), sleeper(&[("SLURM_JOB_ID", "4712"), ("SLURM_JOB_USER", "ada")])];
    let pids: Vec<u32> = procs.iter().map(|p| p.id()).collect();
    cg_pod.enter(pids[0]).unwrap();
    cg_job.enter(pids[1]).unwrap();
    let dir = fresh_dir("fleet", "record");
    let scenario = format!(
        r#"{{"driver_version": "580.159.04", "cuda_driver_version": 13000, "devices": [{{"name": "NVIDIA H200",
           "uuid": "GPU-00000000-aaaa-4000-8000-000000000000", "pci_bus_id": "00000000:10:00.0",
           "base": {{"util_gpu_pct": 65, "memory_total_mib": 143771, "memory_used_mib": 8192}},
           "processes": [{{"pid": {}, "name": "python3", "used_memory_mib": 4096, "sm_util_pct": 30}},
                         {{"pid": {}, "name": "python3", "used_memory_mib": 4096, "sm_util_pct": 20}}]}}]}}"#,
        pids[0], pids[1]
    );
    let (scenario_path, cri) =
        scenario_and_cri(&dir, &scenario, vec![container(ID_R, UID_R, "team-a", "train-a", "main")]);
    let db = dir.join("run.db");
    let (code, _, err) = super::support::run(
        super::support::gpulse(None)
            .env("GPULSE_FAKE_NVML_SCENARIO", &scenario_path)
            .env("GPULSE_CRI_SOCKET", &cri.path)
            .args(["record", "--interval", "100ms", "--duration", "3s", "-o"])
            .arg(&db),
    );
    assert_eq!(code, 0, "{err}");
    let rec = gpulse_record::read(&db).unwrap();
    let last = |pid: u32| {
        rec.snapshots.iter().rev().flat_map(|s| &s.gpus).flat_map(|g| &g.processes).find(|p| p.pid == pid).cloned()
    };
    let pod = last(pids[0]).and_then(|p| p.workload).expect("the pod's process has its workload");
    // The runtime answers off the poll's thread; within 3 s it has.
    assert_eq!(pod.short(), "team-a/train-a", "{pod:?}");
    assert!(pod.labels().contains(&("uid", UID_R.to_owned())));
    let job = last(pids[1]).and_then(|p| p.workload).expect("the job's process has its workload");
    assert_eq!(
        job,
        gpulse_model::Workload::Slurm(gpulse_model::SlurmJob {
            job_id: 4712,
            step: Some("batch".into()),
            user: Some("ada".into()),
            name: None,
        })
    );
    drop(procs);
}

/// A process moved into another pod's cgroup while it runs (as a runtime places a process after
/// its exec, or an admin writes `cgroup.procs`) carries the new pod in `/metrics` once gpulse
/// reads its cgroup again (every 10 s): a process's owner is cached, not fixed for its life.
#[test]
fn a_process_moved_to_another_pods_cgroup_is_relabelled_in_metrics() {
    let rels = [0, 1].map(|i| format!("kubepods/besteffort/pod{}/{}", UID_M[i], ID_M[i]));
    let Some([cg_from, cg_to]) = made_or_skipped("re-attribution of a moved process", rels) else { return };
    let procs = sleeper(&[]);
    let pid = procs.id();
    cg_from.enter(pid).unwrap();
    let dir = fresh_dir("fleet", "moved");
    let scenario = format!(
        r#"{{"driver_version": "580.159.04", "cuda_driver_version": 13000, "devices": [{{"name": "NVIDIA H200",
           "uuid": "GPU-00000000-aaaa-4000-8000-000000000000", "pci_bus_id": "00000000:10:00.0",
           "base": {{"util_gpu_pct": 65, "memory_total_mib": 143771, "memory_used_mib": 8192}},
           "processes": [{{"pid": {pid}, "name": "python3", "used_memory_mib": 4096, "sm_util_pct": 30}}]}}]}}"#
    );
    let containers = vec![
        container(ID_M[0], UID_M[0], "team-m", "before", "main"),
        container(ID_M[1], UID_M[1], "team-m", "after", "main"),
    ];
    let (scenario_path, cri) = scenario_and_cri(&dir, &scenario, containers);
    let s = super::serve::serve_scenario_env(
        scenario_path.to_str().unwrap(),
        &[],
        &[("GPULSE_CRI_SOCKET", cri.path.to_str().unwrap()), ("GPULSE_POD_RESOURCES_SOCKET", "")],
    );
    // The process's series, once it names `pod`.
    let labelled = |pod: &str| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (_, _, body) = get(&s.addr, "/metrics", &[]);
            let line = body
                .lines()
                .find(|l| l.starts_with("gpulse_process_gpu_memory_bytes{") && l.contains(&format!("pid=\"{pid}\"")));
            if line.is_some_and(|l| l.contains(&format!("pod=\"{pod}\""))) {
                return line.unwrap().to_owned();
            }
            assert!(Instant::now() < deadline, "never labelled {pod}: {line:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    assert!(labelled("before").contains(&format!("uid=\"{}\"", UID_M[0])));
    cg_to.enter(pid).unwrap();
    let after = labelled("after");
    assert!(after.contains(&format!("uid=\"{}\"", UID_M[1])) && !after.contains("before"), "{after}");
    drop(procs);
}
