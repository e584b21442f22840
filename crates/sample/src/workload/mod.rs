//! Which pod or Slurm job each GPU process belongs to: the owner from its cgroup (`cgroup.rs`),
//! the names from a [`Directory`] (the container runtime and the kubelet, asked off the poll's
//! thread by `gpulse-cluster`), a Slurm job's user and name from the process's environment.
//!
//! A process's owner is cached for as long as the PID names the same process: known through a
//! pidfd, one `poll` for them all, where the kernel has them, else by the PID's start time
//! (`/proc/PID/stat`, which the watched tree has read already for its own processes). A reused
//! PID is a new process, read afresh. The cgroup file is read again every [`RECHECK`], since a
//! process can be moved to another cgroup while it runs; a cgroup not seen before asks the
//! directory to refresh.

pub mod cgroup;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpulse_model::{GpuSample, Pod, SlurmJob, Workload};

pub use cgroup::Owner;

use crate::proc_info::{self, Handle};

/// How long a process's owner is believed before its cgroup is read again. A process can be
/// moved while it runs (a runtime placing it after exec, `cgexec`, systemd moving a unit's
/// processes, an admin writing `cgroup.procs`), so a moved process is re-attributed within
/// this and one poll (docs/cluster.md).
pub const RECHECK: Duration = Duration::from_secs(10);

/// The names the cgroup path does not carry. Implementations answer from a cache at once and
/// never block a poll: `gpulse-cluster` asks the sockets on a thread of its own.
pub trait Directory: Send + Sync {
    /// The pod and container a container ID belongs to, names filled in as far as known.
    fn container(&self, container_id: &str) -> Option<Pod>;
    /// The one container a GPU (by UUID) is assigned to, as the kubelet's pod-resources says.
    fn gpu(&self, uuid: &str) -> Option<Pod>;
    /// A container not seen before appeared: the answer may be stale.
    fn refresh(&self) {}
}

/// What tells that a PID still names the process it did.
enum Identity {
    /// Its pidfd, not yet exited.
    Held(Handle),
    /// Its start time: another start is another process.
    Started(u64),
}

/// What is known of one process: who owns it, as of when its cgroup was read.
struct Known {
    identity: Identity,
    owner: Option<Owner>,
    read_at: Instant,
    /// A Slurm job's user and name, read once from the environment, with the job they are of.
    slurm: Option<(u64, SlurmNames)>,
}

/// A Slurm job's user and name.
type SlurmNames = (Option<String>, Option<String>);

/// The pod or job of each GPU process, polled with the GPUs.
pub struct Attributor {
    /// `/proc/PID/cgroup`'s text → its owner: a process new to a known cgroup costs no parse.
    by_cgroup: HashMap<String, Option<Owner>>,
    /// The processes of the last poll.
    by_pid: HashMap<u32, Known>,
    directory: Option<Arc<dyn Directory>>,
    recheck: Duration,
    /// Reads a process's cgroup file; the live one reads `/proc`, tests hand in text.
    read_cgroup: fn(u32) -> Option<String>,
    read_environ: fn(u32) -> Option<Vec<u8>>,
    read_start: fn(u32) -> Option<u64>,
    open_handle: fn(u32) -> Option<Handle>,
}

/// At most this many cgroups are remembered; past it the cache starts again (a node that
/// churns through containers for months must not grow without end).
const MAX_CGROUPS: usize = 4096;
/// At most this many pidfds are held (one descriptor each); past it, start times.
const MAX_HANDLES: usize = 256;

impl Attributor {
    pub fn new(directory: Option<Arc<dyn Directory>>) -> Self {
        Self {
            by_cgroup: HashMap::new(),
            by_pid: HashMap::new(),
            directory,
            recheck: RECHECK,
            read_cgroup: proc_info::cgroup_file,
            read_environ: proc_info::environ,
            read_start: proc_info::start_ticks,
            open_handle: proc_info::handle,
        }
    }

    /// Reads each process's cgroup again once its owner is `every` old (`ZERO`: every poll).
    pub fn with_recheck(mut self, every: Duration) -> Self {
        self.recheck = every;
        self
    }

    /// Knows processes by their start times alone, as where the kernel gives no pidfds.
    pub fn without_pidfds(mut self) -> Self {
        self.open_handle = |_| None;
        self
    }

    /// Fills in every process's workload, and each GPU's assignment: the kubelet's answer for
    /// its UUID, else the one Slurm job all its processes run in. `known_start` gives a start
    /// time read already this poll (the tree's), so that no stat is read twice.
    pub fn attribute(&mut self, gpus: &mut [GpuSample], uuids: &[String], known_start: impl Fn(u32) -> Option<u64>) {
        self.attribute_at(gpus, uuids, &known_start, Instant::now());
    }

    fn attribute_at(
        &mut self,
        gpus: &mut [GpuSample],
        uuids: &[String],
        known_start: &dyn Fn(u32) -> Option<u64>,
        now: Instant,
    ) {
        let polled: HashSet<u32> = gpus.iter().flat_map(|g| &g.processes).map(|p| p.pid).collect();
        self.by_pid.retain(|pid, _| polled.contains(pid));
        self.forget_exited();
        for g in gpus.iter_mut() {
            for p in &mut g.processes {
                p.workload = self.workload_at(p.pid, known_start(p.pid), now);
            }
            let uuid = uuids.get(g.gpu_index as usize).filter(|u| !u.is_empty());
            let kubelet = uuid.and_then(|u| self.directory.as_ref()?.gpu(u)).map(Workload::Pod);
            g.assigned = kubelet.or_else(|| one_job(g));
        }
    }

    /// Forgets the held processes that have exited: their PIDs may name others now.
    fn forget_exited(&mut self) {
        let held: Vec<(u32, &Handle)> = self
            .by_pid
            .iter()
            .filter_map(|(pid, k)| match &k.identity {
                Identity::Held(h) => Some((*pid, h)),
                Identity::Started(_) => None,
            })
            .collect();
        if held.is_empty() {
            return;
        }
        let exited = proc_info::exited(&held.iter().map(|(_, h)| *h).collect::<Vec<_>>());
        let gone: Vec<u32> = held.iter().zip(exited).filter(|(_, e)| *e).map(|((pid, _), _)| *pid).collect();
        for pid in gone {
            self.by_pid.remove(&pid);
        }
    }

    /// The workload of one process, `None` outside any pod or job (or gone). `start` is its
    /// start time when already read.
    fn workload_at(&mut self, pid: u32, mut start: Option<u64>, now: Instant) -> Option<Workload> {
        let same = match self.by_pid.get(&pid).map(|k| &k.identity) {
            // Not exited: `forget_exited` asked this poll.
            Some(Identity::Held(_)) => true,
            Some(Identity::Started(known)) => {
                start = start.or_else(|| (self.read_start)(pid));
                start == Some(*known)
            }
            None => false,
        };
        if !same {
            self.by_pid.remove(&pid);
        }
        let due = self.by_pid.get(&pid).is_none_or(|k| now.saturating_duration_since(k.read_at) >= self.recheck);
        if due {
            let new = if same { None } else { Some(self.identify(pid, start)?) };
            let Some(text) = (self.read_cgroup)(pid) else {
                self.by_pid.remove(&pid);
                return None;
            };
            let owner = self.owner_of(text);
            match new {
                Some(identity) => {
                    self.by_pid.insert(pid, Known { identity, owner, read_at: now, slurm: None });
                }
                None => {
                    let k = self.by_pid.get_mut(&pid)?;
                    k.read_at = now;
                    // Moved: the Slurm names were of the job it left.
                    if k.owner != owner {
                        k.owner = owner;
                        k.slurm = None;
                    }
                }
            }
        }
        let known = self.by_pid.get_mut(&pid)?;
        Some(match known.owner.clone()? {
            Owner::Pod { uid, container_id } => {
                let named = container_id.as_deref().and_then(|c| self.directory.as_ref()?.container(c));
                let mut pod = named.unwrap_or_default();
                // The path's UID is the truth; a runtime that says otherwise is not believed.
                if pod.uid.as_deref().is_some_and(|u| u != uid) {
                    pod = Pod::default();
                }
                pod.uid = Some(uid);
                pod.container_id = container_id;
                Workload::Pod(pod)
            }
            Owner::Slurm { job_id, step } => {
                let read = self.read_environ;
                let (user, name) = match &known.slurm {
                    Some((job, names)) if *job == job_id => names.clone(),
                    _ => known.slurm.insert((job_id, slurm_names(read(pid), job_id))).1.clone(),
                };
                Workload::Slurm(SlurmJob { job_id, step, user, name })
            }
        })
    }

    /// What will tell that `pid` still names the process it names now: a pidfd while fewer
    /// than [`MAX_HANDLES`] are held, else its start time; `None` when it is gone.
    fn identify(&self, pid: u32, start: Option<u64>) -> Option<Identity> {
        let held = self.by_pid.values().filter(|k| matches!(k.identity, Identity::Held(_))).count();
        if held < MAX_HANDLES
            && let Some(h) = (self.open_handle)(pid)
        {
            return Some(Identity::Held(h));
        }
        start.or_else(|| (self.read_start)(pid)).map(Identity::Started)
    }

    /// The owner a cgroup file names, parsed once per text.
    fn owner_of(&mut self, text: String) -> Option<Owner> {
        if let Some(o) = self.by_cgroup.get(&text) {
            return o.clone();
        }
        let o = cgroup::owner_of_file(&text);
        if self.by_cgroup.len() >= MAX_CGROUPS {
            self.by_cgroup.clear();
        }
        if let (Some(Owner::Pod { .. }), Some(d)) = (&o, &self.directory) {
            d.refresh();
        }
        self.by_cgroup.insert(text, o.clone());
        o
    }
}

/// The Slurm job every process on the GPU runs in, when there is exactly one.
fn one_job(g: &GpuSample) -> Option<Workload> {
    let mut jobs = g.processes.iter().map(|p| match &p.workload {
        Some(Workload::Slurm(j)) => Some(j.job_id),
        _ => None,
    });
    let first = jobs.next()??;
    jobs.all(|j| j == Some(first)).then(|| Workload::Slurm(SlurmJob { job_id: first, ..SlurmJob::default() }))
}

/// `SLURM_JOB_USER` and `SLURM_JOB_NAME` from a process's environment (NUL-separated), when its
/// `SLURM_JOB_ID` is the cgroup's job: a process that inherited another job's variables is not
/// believed. Values longer than 256 bytes are cut.
pub fn slurm_names(environ: Option<Vec<u8>>, job_id: u64) -> SlurmNames {
    let Some(env) = environ else { return (None, None) };
    let mut vars = HashMap::new();
    for kv in env.split(|b| *b == 0) {
        let kv = String::from_utf8_lossy(kv);
        if let Some((k, v)) = kv.split_once('=')
            && matches!(k, "SLURM_JOB_ID" | "SLURM_JOB_USER" | "SLURM_JOB_NAME")
        {
            // Any user sets these: no control character reaches a recording or a terminal.
            let v = gpulse_model::health::clean(v, 256);
            vars.insert(k.to_owned(), v);
        }
    }
    if vars.get("SLURM_JOB_ID").and_then(|v| v.parse::<u64>().ok()) != Some(job_id) {
        return (None, None);
    }
    let get = |k: &str| vars.get(k).filter(|v| !v.is_empty()).cloned();
    (get("SLURM_JOB_USER"), get("SLURM_JOB_NAME"))
}

#[cfg(test)]
mod tests;
