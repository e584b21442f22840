//! The names of pods and the GPUs assigned to them, asked of the node's sockets on a thread of
//! its own and kept for the sampler to read at once: a slow or absent socket never holds up a
//! poll. It asks again every 30 s, and when the sampler meets a container it does not know (at
//! most once a second).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gpulse_model::Pod;
use gpulse_sample::workload::Directory;
use prost::Message;

use crate::grpc::{GrpcError, unary};
use crate::proto;

/// Each call's deadline, connect to answer.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// The largest answer read: a node's containers, or its pods' devices.
pub const MAX_ANSWER_BYTES: usize = 16 << 20;
/// How often the names are asked again without a reason.
pub const REFRESH_EVERY: Duration = Duration::from_secs(30);
/// The least time between two asks.
pub const MIN_GAP: Duration = Duration::from_secs(1);

/// The sockets to ask; either may be absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sockets {
    /// The container runtime's CRI socket (containerd's or CRI-O's).
    pub cri: Option<PathBuf>,
    /// The kubelet's pod-resources socket.
    pub pod_resources: Option<PathBuf>,
}

/// Where the runtimes and the kubelet put their sockets by default.
pub const CRI_SOCKETS: &[&str] =
    &["/run/containerd/containerd.sock", "/var/run/crio/crio.sock", "/run/k3s/containerd/containerd.sock"];
pub const POD_RESOURCES_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";

impl Sockets {
    /// `GPULSE_CRI_SOCKET` and `GPULSE_POD_RESOURCES_SOCKET` when set (empty turns one off),
    /// else the default paths that exist.
    pub fn from_env() -> Self {
        let pick = |var: &str, defaults: &[&str]| match std::env::var_os(var) {
            Some(v) if v.is_empty() => None,
            Some(v) => Some(PathBuf::from(v)),
            None => defaults.iter().map(PathBuf::from).find(|p| p.exists()),
        };
        Self {
            cri: pick("GPULSE_CRI_SOCKET", CRI_SOCKETS),
            pod_resources: pick("GPULSE_POD_RESOURCES_SOCKET", &[POD_RESOURCES_SOCKET]),
        }
    }
}

#[derive(Default)]
struct Names {
    containers: HashMap<String, Pod>,
    gpus: HashMap<String, Pod>,
    asked: usize,
}

/// The node's names, as a [`Directory`] for the sampler.
pub struct Cluster {
    names: Arc<Mutex<Names>>,
    wake: SyncSender<()>,
}

impl Cluster {
    /// Starts asking; `None` when neither socket is given.
    pub fn start(sockets: Sockets) -> Option<Arc<Cluster>> {
        if sockets.cri.is_none() && sockets.pod_resources.is_none() {
            return None;
        }
        let names = Arc::new(Mutex::new(Names::default()));
        let (wake, woken) = mpsc::sync_channel(1);
        let shared = names.clone();
        std::thread::Builder::new()
            .name("gpulse-cluster".into())
            .spawn(move || asker(&sockets, &shared, &woken))
            .ok()?;
        Some(Arc::new(Cluster { names, wake }))
    }

    /// How many times the sockets have been asked (tests wait on it).
    pub fn asked(&self) -> usize {
        self.names.lock().unwrap_or_else(|e| e.into_inner()).asked
    }
}

impl Directory for Cluster {
    fn container(&self, container_id: &str) -> Option<Pod> {
        self.names.lock().unwrap_or_else(|e| e.into_inner()).containers.get(container_id).cloned()
    }
    fn gpu(&self, uuid: &str) -> Option<Pod> {
        self.names.lock().unwrap_or_else(|e| e.into_inner()).gpus.get(uuid).cloned()
    }
    fn refresh(&self) {
        // A full channel means an ask is already due.
        let _ = self.wake.try_send(());
    }
}

/// The thread: ask, keep, wait for a reason or the period; ends when the `Cluster` is dropped.
fn asker(sockets: &Sockets, names: &Mutex<Names>, woken: &mpsc::Receiver<()>) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
    let mut failing = (false, false);
    loop {
        let started = Instant::now();
        let containers = sockets.cri.as_ref().map(|s| rt.block_on(list_containers(s)));
        let gpus = sockets.pod_resources.as_ref().map(|s| rt.block_on(list_gpus(s)));
        // Said once when a socket starts failing, not every 30 s; the path is no secret.
        failing.0 = report(failing.0, sockets.cri.as_ref(), containers.as_ref().and_then(|r| r.as_ref().err()));
        failing.1 = report(failing.1, sockets.pod_resources.as_ref(), gpus.as_ref().and_then(|r| r.as_ref().err()));
        {
            let mut n = names.lock().unwrap_or_else(|e| e.into_inner());
            // A failed ask keeps what the last one said: names do not vanish with a slow socket.
            if let Some(Ok(c)) = containers {
                n.containers = c;
            }
            if let Some(Ok(g)) = gpus {
                n.gpus = g;
            }
            n.asked += 1;
        }
        std::thread::sleep(MIN_GAP.saturating_sub(started.elapsed()));
        match woken.recv_timeout(REFRESH_EVERY) {
            Ok(()) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

fn report(was_failing: bool, socket: Option<&PathBuf>, error: Option<&GrpcError>) -> bool {
    if let (Some(s), Some(e), false) = (socket, error, was_failing) {
        eprintln!("gpulse: {}: {e}; pods keep the names asked before, or their UIDs", s.display());
    }
    error.is_some()
}

/// Every container the runtime knows, by ID, with its pod's names from the kubelet's labels.
pub async fn list_containers(socket: &std::path::Path) -> Result<HashMap<String, Pod>, GrpcError> {
    let req = proto::ListContainersRequest { filter: None }.encode_to_vec();
    let bytes = unary(socket, proto::LIST_CONTAINERS, &req, CALL_TIMEOUT, MAX_ANSWER_BYTES).await?;
    let answer = proto::ListContainersResponse::decode(bytes).map_err(|e| GrpcError::Malformed(e.to_string()))?;
    Ok(answer.containers.into_iter().map(|c| (c.id.clone(), pod_of(&c))).collect())
}

/// A container's pod as the kubelet labelled it (`io.kubernetes.*`); a label not there is `None`.
pub fn pod_of(c: &proto::Container) -> Pod {
    let get = |k: &str| c.labels.get(k).filter(|v| !v.is_empty()).map(|v| v.chars().take(253).collect::<String>());
    Pod {
        uid: get("io.kubernetes.pod.uid"),
        container_id: Some(c.id.clone()),
        namespace: get("io.kubernetes.pod.namespace"),
        name: get("io.kubernetes.pod.name"),
        container: get("io.kubernetes.container.name"),
    }
}

/// Each GPU (by UUID) assigned to exactly one container, as the kubelet's pod-resources lists
/// it. A time-sliced GPU's replicas (`GPU-…::2`, the device plugin's IDs) count as the GPU, so a
/// GPU shared by two containers is nobody's alone.
pub async fn list_gpus(socket: &std::path::Path) -> Result<HashMap<String, Pod>, GrpcError> {
    let req = proto::ListPodResourcesRequest {}.encode_to_vec();
    let bytes = unary(socket, proto::LIST_POD_RESOURCES, &req, CALL_TIMEOUT, MAX_ANSWER_BYTES).await?;
    let answer = proto::ListPodResourcesResponse::decode(bytes).map_err(|e| GrpcError::Malformed(e.to_string()))?;
    Ok(gpu_owners(&answer))
}

/// See [`list_gpus`].
pub fn gpu_owners(answer: &proto::ListPodResourcesResponse) -> HashMap<String, Pod> {
    let mut holders: HashMap<String, Vec<Pod>> = HashMap::new();
    for p in &answer.pod_resources {
        for c in &p.containers {
            for d in c.devices.iter().filter(|d| d.resource_name.starts_with("nvidia.com/")) {
                for id in &d.device_ids {
                    let uuid = id.split("::").next().unwrap_or(id);
                    if !uuid.starts_with("GPU-") {
                        continue;
                    }
                    let pod = Pod {
                        namespace: Some(p.namespace.clone()).filter(|s| !s.is_empty()),
                        name: Some(p.name.clone()).filter(|s| !s.is_empty()),
                        container: Some(c.name.clone()).filter(|s| !s.is_empty()),
                        ..Pod::default()
                    };
                    let h = holders.entry(uuid.to_owned()).or_default();
                    if !h.contains(&pod) {
                        h.push(pod);
                    }
                }
            }
        }
    }
    holders.into_iter().filter(|(_, h)| h.len() == 1).map(|(u, mut h)| (u, h.remove(0))).collect()
}
