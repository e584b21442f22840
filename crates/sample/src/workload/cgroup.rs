//! Who owns a cgroup, from its path alone: a Kubernetes pod's container or a Slurm job's step.
//! Pure functions over `/proc/PID/cgroup`'s text, so every path shape is a table test.
//!
//! The shapes, and where each comes from:
//! - kubelet's cgroupfs driver: `/kubepods[/burstable|/besteffort]/pod<UID>/<container-id>`; its
//!   systemd driver escapes the UID's `-` as `_` and expands each name into nested slices,
//!   `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<UID_>.slice/<scope>`
//!   (kubelet `pkg/kubelet/cm/cgroup_manager_linux.go`, `ToSystemd` and `escapeSystemdCgroupName`;
//!   the pod's name prefix `pod` in `pod_container_manager_linux.go`).
//! - the container's own cgroup under the pod's: containerd's systemd scope
//!   `cri-containerd-<id>.scope`, CRI-O's `crio-<id>.scope` (its `conmon` beside it is
//!   `crio-conmon-<id>.scope`), cri-dockerd's `docker-<id>.scope`; with cgroupfs, the bare ID, or
//!   `crio-<id>` (cilium `pkg/cgroups/manager/provider.go` lists the four providers, kind's
//!   nested `/kubelet/kubepods/...` and `/kubelet.slice/kubelet-kubepods.slice/...` among them).
//! - Slurm's cgroup v1 plugin: `/slurm[_<node>]/uid_<UID>/job_<ID>/step_<N>/task_<T>` under each
//!   controller (`src/plugins/cgroup/v1/cgroup_v1.c`, `"%s/job_%u"`); its v2 plugin:
//!   `/system.slice/slurmstepd.scope/job_<ID>/step_<N>/user/task_<T>`
//!   (`src/plugins/cgroup/v2/cgroup_v2.c`). Steps are numbers or `batch`, `extern`,
//!   `interactive`.

/// What a cgroup path says about its owner.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Owner {
    /// A pod's cgroup, and its container's when the path goes that deep.
    Pod { uid: String, container_id: Option<String> },
    /// A Slurm job's cgroup, and its step's when the path goes that deep.
    Slurm { job_id: u64, step: Option<String> },
}

/// The owner named by a process's `/proc/PID/cgroup` text: the v2 line (`0::PATH`) first, then
/// the v1 hierarchies in the file's order; `None` when no line names a pod or a job.
pub fn owner_of_file(text: &str) -> Option<Owner> {
    let paths = text.lines().filter_map(|l| {
        let mut f = l.splitn(3, ':');
        let (id, _controllers, path) = (f.next()?, f.next()?, f.next()?);
        Some((id == "0", path))
    });
    let (v2, v1): (Vec<_>, Vec<_>) = paths.partition(|(is_v2, _)| *is_v2);
    v2.into_iter().chain(v1).find_map(|(_, p)| owner_of_path(p))
}

/// The owner named by one cgroup path, from its last pod or job component down.
pub fn owner_of_path(path: &str) -> Option<Owner> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    // A pod: the last component that is `pod<UID>` (cgroupfs) or `…-pod<UID_>.slice` (systemd).
    if parts.iter().any(|p| p.starts_with("kubepods") || p.contains("-kubepods"))
        && let Some(i) = parts.iter().rposition(|p| pod_uid(p).is_some())
    {
        let uid = pod_uid(parts[i])?;
        let container_id = parts.get(i + 1).and_then(|c| container_id(c));
        return Some(Owner::Pod { uid, container_id });
    }
    let i = parts.iter().rposition(|p| p.strip_prefix("job_").is_some_and(|n| n.parse::<u64>().is_ok()))?;
    // Slurm's own tree, not any path with a `job_` in it: slurmd's root, or the uid level.
    let slurm = parts[..i].iter().any(|p| p.starts_with("slurm") || p.starts_with("uid_"));
    if !slurm {
        return None;
    }
    let job_id = parts[i].strip_prefix("job_")?.parse().ok()?;
    let step = parts.get(i + 1).and_then(|s| s.strip_prefix("step_")).filter(|s| !s.is_empty()).map(str::to_owned);
    Some(Owner::Slurm { job_id, step })
}

/// `pod<UID>` or `<prefix>-pod<UID with _>.slice` → the UID as the API server writes it.
fn pod_uid(part: &str) -> Option<String> {
    let raw = match part.strip_suffix(".slice") {
        Some(slice) => slice.rsplit_once("-pod").map(|(_, u)| u.replace('_', "-"))?,
        None => part.strip_prefix("pod")?.to_owned(),
    };
    is_uid(&raw).then_some(raw)
}

/// A UID as Kubernetes makes them (RFC 4122 text), or a static pod's (a 32-digit hash).
fn is_uid(s: &str) -> bool {
    let hex = s.chars().filter(|c| *c != '-').count();
    (hex == 32 || s.len() == 36) && s.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
}

/// The container ID in a container's cgroup name: `cri-containerd-<id>.scope`,
/// `crio-<id>.scope`, `docker-<id>.scope`, `crio-<id>` or the bare ID; never CRI-O's conmon.
fn container_id(part: &str) -> Option<String> {
    let name = part.strip_suffix(".scope").unwrap_or(part);
    if name.starts_with("crio-conmon-") {
        return None;
    }
    let id = ["cri-containerd-", "crio-", "docker-"].iter().find_map(|p| name.strip_prefix(p)).unwrap_or(name);
    (id.len() == 64 && id.chars().all(|c| c.is_ascii_hexdigit())).then(|| id.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "9ac48755-3968-48e4-b9dc-6d4b69f3bb42";
    const ID: &str = "3baf66ee56a52a8765c3deb2444315411a888fa3e2f8f7ddd75e9ded3c34425e";

    fn pod(container: bool) -> Option<Owner> {
        Some(Owner::Pod { uid: UID.into(), container_id: container.then(|| ID.into()) })
    }

    fn job(id: u64, step: Option<&str>) -> Option<Owner> {
        Some(Owner::Slurm { job_id: id, step: step.map(Into::into) })
    }

    #[test]
    fn kubernetes_paths_as_kubelet_and_the_runtimes_make_them() {
        let u = UID.replace('-', "_");
        let table: Vec<(String, Option<Owner>)> = vec![
            // cgroupfs driver, containerd (cgroup v1 and v2 alike), each QoS class.
            (format!("/kubepods/burstable/pod{UID}/{ID}"), pod(true)),
            (format!("/kubepods/besteffort/pod{UID}/{ID}"), pod(true)),
            (format!("/kubepods/pod{UID}/{ID}"), pod(true)),
            // The pod's own cgroup: the pause process's parent, no container.
            (format!("/kubepods/burstable/pod{UID}"), pod(false)),
            // systemd driver, containerd.
            (
                format!(
                    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u}.slice/cri-containerd-{ID}.scope"
                ),
                pod(true),
            ),
            (format!("/kubepods.slice/kubepods-pod{u}.slice/cri-containerd-{ID}.scope"), pod(true)),
            // systemd driver, CRI-O; its conmon is no container.
            (
                format!("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{u}.slice/crio-{ID}.scope"),
                pod(true),
            ),
            (
                format!(
                    "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{u}.slice/crio-conmon-{ID}.scope"
                ),
                pod(false),
            ),
            // cgroupfs driver, CRI-O.
            (format!("/kubepods/burstable/pod{UID}/crio-{ID}"), pod(true)),
            // cri-dockerd.
            (format!("/kubepods.slice/kubepods-pod{u}.slice/docker-{ID}.scope"), pod(true)),
            // kind: the node is a container, its kubelet nested.
            (format!("/kubelet/kubepods/besteffort/pod{UID}/{ID}"), pod(true)),
            (
                format!(
                    "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod{u}.slice/cri-containerd-{ID}.scope"
                ),
                pod(true),
            ),
            // Seen from inside another cgroup namespace.
            (
                format!("/../../kubepods-burstable.slice/kubepods-burstable-pod{u}.slice/cri-containerd-{ID}.scope"),
                pod(true),
            ),
            // A process in a container's sub-cgroup (systemd in the container, say).
            (format!("/kubepods/burstable/pod{UID}/{ID}/init.scope"), pod(true)),
            // Not pods.
            ("/kubepods/burstable".into(), None),
            ("/kubepods.slice/kubepods-burstable.slice".into(), None),
            ("/user.slice/user-1000.slice/session-3.scope".into(), None),
            (format!("/system.slice/pod{UID}"), None),
            ("/kubepods/podnot-a-uid/x".into(), None),
            ("/".into(), None),
        ];
        for (path, want) in table {
            assert_eq!(owner_of_path(&path), want, "{path}");
        }
    }

    #[test]
    fn slurm_paths_as_its_cgroup_plugins_make_them() {
        let table = [
            // cgroup/v1: every controller, under slurm/uid_N.
            ("/slurm/uid_1000/job_4711/step_0/task_0", job(4711, Some("0"))),
            ("/slurm/uid_1000/job_4711/step_batch/task_0", job(4711, Some("batch"))),
            ("/slurm/uid_1000/job_4711/step_extern", job(4711, Some("extern"))),
            ("/slurm/uid_1000/job_4711", job(4711, None)),
            // Several slurmd on one host: slurm_<node>.
            ("/slurm_node07/uid_0/job_12/step_3/task_1", job(12, Some("3"))),
            // cgroup/v2: under slurmstepd's scope.
            ("/system.slice/slurmstepd.scope/job_4711/step_0/user/task_0", job(4711, Some("0"))),
            (
                "/system.slice/slurmstepd.scope/job_4711/step_interactive/user/task_special",
                job(4711, Some("interactive")),
            ),
            // Not jobs.
            ("/system.slice/slurmstepd.scope/system", None),
            ("/user.slice/job_12", None),
            ("/slurm/uid_1000/job_x/step_0", None),
        ];
        for (path, want) in table {
            assert_eq!(owner_of_path(path), want, "{path}");
        }
    }

    #[test]
    fn the_file_prefers_the_v2_line_then_the_v1_hierarchies() {
        // A hybrid host: v2 says the session, v1's memory says the job.
        let hybrid = "12:memory:/slurm/uid_1000/job_7/step_0/task_0\n1:name=systemd:/user.slice\n0::/user.slice\n";
        assert_eq!(owner_of_file(hybrid), job(7, Some("0")));
        let u = UID.replace('-', "_");
        let v2 = format!("0::/kubepods.slice/kubepods-pod{u}.slice/cri-containerd-{ID}.scope\n");
        assert_eq!(owner_of_file(&v2), pod(true));
        let both = format!("4:cpu,cpuacct:/kubepods/pod{UID}/{ID}\n0::/kubepods/pod{UID}/{ID}\n");
        assert_eq!(owner_of_file(&both), pod(true));
        assert_eq!(owner_of_file("0::/\n"), None);
        assert_eq!(owner_of_file(""), None);
        assert_eq!(owner_of_file("garbage without colons"), None);
    }
}
