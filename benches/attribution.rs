//! CPU of attributing every GPU process to its pod, per poll, on 8 GPUs of 8 processes each (64
//! real processes, in 8 real cgroups shaped as the kubelet and containerd make them when this
//! runs as root), against what users would otherwise run. Run: `cargo bench --bench attribution`.
//!
//! - gpulse: `Attributor::attribute`, what every poll does: one `poll` of the processes'
//!   pidfds (none has exited, so each PID still names its process), the owner from a cache by
//!   process, the names from a directory that answers from memory (here the real
//!   `gpulse-cluster` one, filled by its own thread).
//! - the same where the kernel gives no pidfds: one read of `/proc/PID/stat` per process, its
//!   start time the key.
//! - gpulse's poll that reads every process's cgroup again (each process's falls due every
//!   `workload::RECHECK`): the same with the period set to zero.
//! - the cgroup files read and parsed on every poll, as gpulse did before it cached by process.
//! - the start-time reads alone.
//! - dcgm-exporter's way: one `List` call to the kubelet's pod-resources socket on every scrape
//!   (its `PodMapper`), here against the pod-resources stand-in with the 8 pods, over the same
//!   gRPC client gpulse uses. Its CPU includes the stand-in server's (it runs in this process):
//!   the figure is the cost on the node, client and kubelet together.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpulse_cluster::testing::{Answers, container, pod_with_gpus, serve};
use gpulse_model::{GpuSample, ProcessSample};
use gpulse_sample::workload::{Attributor, Directory, RECHECK, cgroup};

const GPUS: usize = 8;
const PER_GPU: usize = 8;

/// This process's CPU time (user + system), all threads.
fn cpu_s() -> f64 {
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Runs `f` `n` times; CPU and wall per call, in microseconds.
fn measure(n: usize, mut f: impl FnMut()) -> (f64, f64) {
    f();
    let (c0, w0) = (cpu_s(), Instant::now());
    for _ in 0..n {
        f();
    }
    ((cpu_s() - c0) / n as f64 * 1e6, w0.elapsed().as_secs_f64() / n as f64 * 1e6)
}

fn uid(i: usize) -> String {
    format!("{i:08x}-b044-4fd5-9dd4-f137e30e2180")
}

fn cid(i: usize) -> String {
    format!("{i:064x}")
}

/// The v2 hierarchy, else a v1 one with the pids controller: where the cgroups go.
fn cgroup_root() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut v1 = None;
    for l in info.lines() {
        let f: Vec<&str> = l.split(' ').collect();
        let sep = f.iter().position(|x| *x == "-")?;
        match f.get(sep + 1).copied() {
            Some("cgroup2") => return Some(PathBuf::from(f[4])),
            Some("cgroup") if f.get(sep + 3).is_some_and(|o| o.split(',').any(|o| o == "pids")) => {
                v1.get_or_insert(PathBuf::from(f[4]));
            }
            _ => {}
        }
    }
    v1
}

struct Cleanup(Vec<Child>, Vec<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = (c.kill(), c.wait());
        }
        std::thread::sleep(Duration::from_millis(200));
        for d in self.1.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// 64 sleepers, in 8 pods' cgroups where this may make them.
fn processes() -> (Cleanup, bool) {
    let children: Vec<Child> =
        (0..GPUS * PER_GPU).map(|_| Command::new("sleep").arg("600").spawn().expect("sleep")).collect();
    let mut made = Vec::new();
    let mut in_pods = cgroup_root().is_some();
    if let Some(root) = cgroup_root() {
        let base = root.join(format!("kubepods-bench-{}", std::process::id()));
        for (i, c) in children.iter().enumerate() {
            let pod = base.join(format!("pod{}", uid(i / PER_GPU)));
            let leaf = pod.join(cid(i / PER_GPU));
            for d in [&base, &pod, &leaf] {
                if !d.exists() {
                    in_pods &= std::fs::create_dir(d).is_ok();
                    made.push(d.clone());
                }
            }
            in_pods &= std::fs::write(leaf.join("cgroup.procs"), c.id().to_string()).is_ok();
        }
    }
    (Cleanup(children, made), in_pods)
}

fn main() {
    let (procs, in_pods) = processes();
    let gpus: Vec<GpuSample> = (0..GPUS)
        .map(|g| GpuSample {
            gpu_index: g as u32,
            processes: (0..PER_GPU)
                .map(|i| ProcessSample { pid: procs.0[g * PER_GPU + i].id(), ..Default::default() })
                .collect(),
            ..Default::default()
        })
        .collect();
    let uuids: Vec<String> = (0..GPUS).map(|g| format!("GPU-{g}0000000-aaaa-4000-8000-000000000000")).collect();

    let dir = std::env::temp_dir().join(format!("gpulse-bench-attribution-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let containers = (0..GPUS).map(|i| container(&cid(i), &uid(i), "team", &format!("train-{i}"), "main")).collect();
    let pods = (0..GPUS).map(|i| pod_with_gpus("team", &format!("train-{i}"), "main", &[&uuids[i]])).collect();
    let cri = serve(&dir.join("cri.sock"), Answers { containers, ..Answers::default() });
    let kubelet = serve(&dir.join("kubelet.sock"), Answers { pods, ..Answers::default() });
    let cluster = gpulse_cluster::Cluster::start(gpulse_cluster::Sockets {
        cri: Some(cri.path.clone()),
        pod_resources: Some(kubelet.path.clone()),
    })
    .expect("the directory");
    while cluster.asked() == 0 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let directory: Arc<dyn Directory> = cluster.clone();
    let mut attributor = Attributor::new(Some(directory.clone()));
    let mut polled = gpus.clone();
    attributor.attribute(&mut polled, &uuids, |_| None);
    let named = polled.iter().flat_map(|g| &g.processes).filter(|p| p.workload.is_some()).count();

    let n = 2000;
    let (cached_cpu, cached_wall) = measure(n, || {
        let mut g = gpus.clone();
        attributor.attribute(&mut g, &uuids, |_| None);
        std::hint::black_box(&g);
    });
    let mut by_start = Attributor::new(Some(directory.clone())).without_pidfds();
    let (start_key_cpu, start_key_wall) = measure(n, || {
        let mut g = gpus.clone();
        by_start.attribute(&mut g, &uuids, |_| None);
        std::hint::black_box(&g);
    });
    let mut rechecking = Attributor::new(Some(directory)).with_recheck(Duration::ZERO);
    let (recheck_cpu, recheck_wall) = measure(n, || {
        let mut g = gpus.clone();
        rechecking.attribute(&mut g, &uuids, |_| None);
        std::hint::black_box(&g);
    });
    let (start_cpu, start_wall) = measure(n, || {
        for p in gpus.iter().flat_map(|g| &g.processes) {
            std::hint::black_box(gpulse_sample::proc_info::start_ticks(p.pid));
        }
    });
    let (parse_cpu, parse_wall) = measure(n, || {
        for p in gpus.iter().flat_map(|g| &g.processes) {
            let text = gpulse_sample::proc_info::cgroup_file(p.pid);
            std::hint::black_box(text.as_deref().map(cgroup::owner_of_file));
        }
    });
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let socket: &Path = &kubelet.path;
    let (list_cpu, list_wall) = measure(200, || {
        let answer = rt.block_on(gpulse_cluster::directory::list_gpus(socket)).expect("List");
        assert_eq!(answer.len(), GPUS);
    });
    println!(
        "{} processes on {GPUS} GPUs, {}; {named} attributed",
        GPUS * PER_GPU,
        if in_pods {
            "each in a pod's cgroup (8 pods)"
        } else {
            "not in pods (not root: the cgroup files are read and parsed all the same)"
        }
    );
    let row = |label: &str, cpu: f64, wall: f64, note: &str| {
        println!("{label:46} {cpu:7.1} µs CPU, {wall:7.1} µs wall{note}");
    };
    row("gpulse, per poll (pidfds):", cached_cpu, cached_wall, "");
    row("gpulse, per poll without pidfds (start times):", start_key_cpu, start_key_wall, "");
    let every = format!(" (each process's, every {} s)", RECHECK.as_secs());
    row("gpulse, a poll that reads every cgroup again:", recheck_cpu, recheck_wall, &every);
    row("every cgroup read and parsed every poll:", parse_cpu, parse_wall, " (reads and parse only)");
    row("the start times alone (/proc/PID/stat):", start_cpu, start_wall, "");
    println!("dcgm-exporter's way, one pod-resources List per scrape: {list_cpu:7.1} µs CPU, {list_wall:7.1} µs wall");
    println!("ratio, List per scrape / gpulse per poll: {:.1}× CPU", list_cpu / cached_cpu);
    drop(cluster);
    drop(procs);
    let _ = std::fs::remove_dir_all(&dir);
}
