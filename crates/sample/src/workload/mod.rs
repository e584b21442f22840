//! Which pod or Slurm job each GPU process belongs to: the owner from its cgroup (`cgroup.rs`),
//! the names from a [`Directory`] (the container runtime and the kubelet, asked off the poll's
//! thread by `gpulse-cluster`), a Slurm job's user and name from the process's environment.
//!
//! Parsing is cached by the cgroup file's text, so a poll costs one small read per process and
//! a map lookup; a cgroup not seen before asks the directory to refresh.

pub mod cgroup;

use std::collections::HashMap;
use std::sync::Arc;

use gpulse_model::{GpuSample, Pod, SlurmJob, Workload};

pub use cgroup::Owner;

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

/// The pod or job of each GPU process, polled with the GPUs.
pub struct Attributor {
    /// `/proc/PID/cgroup`'s text → its owner.
    by_cgroup: HashMap<String, Option<Owner>>,
    /// A Slurm job's user and name, by PID and job: read once from the environment.
    slurm_env: HashMap<(u32, u64), (Option<String>, Option<String>)>,
    directory: Option<Arc<dyn Directory>>,
    /// Reads a process's cgroup file; the live one reads `/proc`, tests hand in text.
    read_cgroup: fn(u32) -> Option<String>,
    read_environ: fn(u32) -> Option<Vec<u8>>,
}

/// At most this many cgroups are remembered; past it the cache starts again (a node that
/// churns through containers for months must not grow without end).
const MAX_CGROUPS: usize = 4096;

impl Attributor {
    pub fn new(directory: Option<Arc<dyn Directory>>) -> Self {
        Self {
            by_cgroup: HashMap::new(),
            slurm_env: HashMap::new(),
            directory,
            read_cgroup: crate::proc_info::cgroup_file,
            read_environ: crate::proc_info::environ,
        }
    }

    /// Fills in every process's workload, and each GPU's assignment: the kubelet's answer for
    /// its UUID, else the one Slurm job all its processes run in.
    pub fn attribute(&mut self, gpus: &mut [GpuSample], uuids: &[String]) {
        let mut seen = Vec::new();
        for g in gpus.iter_mut() {
            for p in &mut g.processes {
                p.workload = self.workload(p.pid);
                seen.push(p.pid);
            }
            let uuid = uuids.get(g.gpu_index as usize).filter(|u| !u.is_empty());
            let kubelet = uuid.and_then(|u| self.directory.as_ref()?.gpu(u)).map(Workload::Pod);
            g.assigned = kubelet.or_else(|| one_job(g));
        }
        self.slurm_env.retain(|(pid, _), _| seen.contains(pid));
    }

    /// The workload of one process, `None` outside any pod or job (or gone).
    pub fn workload(&mut self, pid: u32) -> Option<Workload> {
        let text = (self.read_cgroup)(pid)?;
        let owner = match self.by_cgroup.get(&text) {
            Some(o) => o.clone(),
            None => {
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
        }?;
        Some(match owner {
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
                let (user, name) =
                    self.slurm_env.entry((pid, job_id)).or_insert_with(|| slurm_names(read(pid), job_id)).clone();
                Workload::Slurm(SlurmJob { job_id, step, user, name })
            }
        })
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
pub fn slurm_names(environ: Option<Vec<u8>>, job_id: u64) -> (Option<String>, Option<String>) {
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
