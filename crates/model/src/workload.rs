//! Who a GPU second belongs to on a cluster: a Kubernetes pod's container or a Slurm job, as the
//! process's cgroup names it. Fleet-wide views group by these, not by PID.

use serde::{Deserialize, Serialize};

/// The pod or batch job a process runs in, or a GPU is assigned to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Workload {
    Pod(Pod),
    Slurm(SlurmJob),
}

/// A container of a Kubernetes pod. The cgroup path gives the UID and the container ID; the names
/// come from the container runtime (CRI) or the kubelet (pod-resources), and are `None` until one
/// of them answered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Pod {
    /// `metadata.uid`, dashes and all (`/proc/PID/cgroup`'s `pod<UID>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// The runtime's container ID, 64 hex digits (the cgroup's last component).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The pod's name (dcgm-exporter's `pod` label).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The container's name in the pod spec (dcgm-exporter's `container` label).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
}

/// A Slurm job (and step), as slurmd's cgroup plugin makes its cgroups.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SlurmJob {
    /// `SLURM_JOB_ID` (dcgm-exporter's `hpc_job` label).
    pub job_id: u64,
    /// `step_0`, `step_batch`, `step_extern`, `step_interactive`: the part after `step_`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// `SLURM_JOB_USER` from the process's environment, when it could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// `SLURM_JOB_NAME` from the process's environment, when it could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Workload {
    /// The Prometheus labels that name it, dcgm-exporter's where it has them (`pod`, `namespace`,
    /// `container`, `hpc_job`); a name not known is left out, never guessed. The pod's UID is
    /// `uid` (dcgm-exporter's `--kubernetes-enable-pod-uid` label), so a pod whose names the
    /// runtime did not give is still told apart.
    pub fn labels(&self) -> Vec<(&'static str, String)> {
        let mut l = Vec::new();
        match self {
            Workload::Pod(p) => {
                for (k, v) in
                    [("namespace", &p.namespace), ("pod", &p.name), ("container", &p.container), ("uid", &p.uid)]
                {
                    if let Some(v) = v {
                        l.push((k, v.clone()));
                    }
                }
            }
            Workload::Slurm(j) => l.push(("hpc_job", j.job_id.to_string())),
        }
        l
    }

    /// One short name for a table cell or a group: `namespace/pod`, the UID's first 8 digits
    /// when the names are not known, or `job 1234`.
    pub fn short(&self) -> String {
        match self {
            Workload::Pod(p) => match (&p.namespace, &p.name) {
                (Some(ns), Some(n)) => format!("{ns}/{n}"),
                (None, Some(n)) => n.clone(),
                _ => match &p.uid {
                    Some(u) => format!("pod {}", u.get(..8).unwrap_or(u)),
                    None => "pod".to_owned(),
                },
            },
            Workload::Slurm(j) => format!("job {}", j.job_id),
        }
    }

    /// The same workload at the granularity a GPU is shared at: a pod (not its container) or a
    /// job (not its step).
    pub fn group(&self) -> Workload {
        match self {
            Workload::Pod(p) => Workload::Pod(Pod {
                uid: p.uid.clone(),
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                ..Pod::default()
            }),
            Workload::Slurm(j) => Workload::Slurm(SlurmJob { job_id: j.job_id, ..SlurmJob::default() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_leave_out_what_is_not_known() {
        let bare = Workload::Pod(Pod { uid: Some("0b0f".into()), ..Pod::default() });
        assert_eq!(bare.labels(), [("uid", "0b0f".to_owned())]);
        assert_eq!(bare.short(), "pod 0b0f");
        let named = Workload::Pod(Pod {
            uid: Some("8f3c1b2a-0000".into()),
            namespace: Some("team-a".into()),
            name: Some("train-0".into()),
            container: Some("main".into()),
            container_id: Some("ab".into()),
        });
        let keys: Vec<&str> = named.labels().iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, ["namespace", "pod", "container", "uid"]);
        assert_eq!(named.short(), "team-a/train-0");
        assert_eq!(named.group().labels().len(), 3, "a pod's group has no container");
        let job = Workload::Slurm(SlurmJob { job_id: 4711, step: Some("0".into()), ..SlurmJob::default() });
        assert_eq!(job.labels(), [("hpc_job", "4711".to_owned())]);
        assert_eq!(job.short(), "job 4711");
    }
}
