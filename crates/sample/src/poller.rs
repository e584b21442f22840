//! One poll of every GPU, the host and a watched process tree, with GPU processes classified
//! against the tree. `record`, `run` and `attach` write its polls; a live view needs no file.

use std::collections::HashSet;

use gpulse_model::{DeviceInfo, DeviceStatus, Poll};

use crate::host::{HostSampler, TreeSampler, classify};
use crate::workload::{Attributor, Directory};
use crate::{SampleError, Source, profile};

/// The sources of one watch.
pub struct Poller {
    gpus: Option<Box<dyn Source + Send>>,
    host: HostSampler,
    tree: Option<TreeSampler>,
    lost: HashSet<u32>,
    devices: Vec<DeviceInfo>,
    /// Each GPU process's pod or Slurm job, from its cgroup.
    workloads: Attributor,
    uuids: Vec<String>,
}

impl Poller {
    /// `gpus` is `None` without a driver: the host and the tree are still worth watching.
    /// `root` is the tree to follow, if any.
    pub fn new(gpus: Option<Box<dyn Source + Send>>, root: Option<u32>) -> Self {
        let devices = gpus.as_ref().map(|s| s.devices().to_vec()).unwrap_or_default();
        let mut host = HostSampler::new();
        // The first reading opens the interval the first poll's CPU shares cover.
        host.sample();
        let uuids = devices.iter().map(|d| d.uuid.clone()).collect();
        let workloads = Attributor::new(None);
        Self { gpus, host, tree: root.map(TreeSampler::new), lost: HashSet::new(), devices, workloads, uuids }
    }

    /// Names pods through `directory` (the container runtime and the kubelet); without one a
    /// pod is its UID and container ID alone.
    pub fn with_directory(mut self, directory: std::sync::Arc<dyn Directory>) -> Self {
        self.workloads = Attributor::new(Some(directory));
        self
    }

    /// Follows the tree under `pid` from now on (a job started after the poller).
    pub fn follow(&mut self, pid: u32) {
        self.tree = Some(TreeSampler::new(pid));
    }

    pub fn devices(&self) -> &[DeviceInfo] {
        &self.devices
    }

    pub fn has_gpus(&self) -> bool {
        self.gpus.is_some()
    }

    /// Reads everything once. An error means the GPU source itself failed.
    pub fn poll(&mut self) -> Result<Poll, SampleError> {
        profile::timed("total poll (collector thread)", || self.poll_inner())
    }

    /// The watch's last poll: like [`poll`](Self::poll), with the counters held between reads
    /// read afresh, so the run's energy ends where the run did.
    pub fn closing_poll(&mut self) -> Result<Poll, SampleError> {
        if let Some(src) = self.gpus.as_mut() {
            src.reread_counters();
        }
        self.poll()
    }

    fn poll_inner(&mut self) -> Result<Poll, SampleError> {
        let (tree, root_gone) = match self.tree.as_mut() {
            Some(t) => match profile::timed("proc tree (/proc/PID/{task,stat})", || t.sample()) {
                Some(s) => (Some(s), false),
                None => (None, true),
            },
            None => (None, false),
        };
        let mut snapshot = None;
        let mut newly_lost = Vec::new();
        if let Some(src) = self.gpus.as_mut() {
            let mut snap = profile::timed("total nvml sample", || src.sample())?;
            if let Some(t) = &tree {
                let pids: HashSet<u32> = t.processes.iter().map(|p| p.pid).collect();
                for g in &mut snap.gpus {
                    for p in &mut g.processes {
                        p.class = Some(classify(p.pid, &pids));
                    }
                }
            }
            // The tree read this poll's stat of its processes; after the root is gone, nothing.
            let tree_read = self.tree.as_ref().filter(|_| tree.is_some());
            profile::timed("workloads (/proc/PID/stat, cgroup)", || {
                self.workloads.attribute(&mut snap.gpus, &self.uuids, |pid| tree_read?.start_ticks(pid))
            });
            for g in &snap.gpus {
                if g.status == DeviceStatus::Lost && self.lost.insert(g.gpu_index) {
                    newly_lost.push(g.gpu_index);
                }
            }
            snapshot = Some(snap);
        }
        let host = profile::timed("proc host (/proc/stat, meminfo, loadavg)", || self.host.sample());
        Ok(Poll { snapshot, host, tree, newly_lost, root_gone })
    }
}

#[cfg(test)]
mod tests {
    use gpulse_model::{GpuSample, Snapshot};

    use super::*;

    /// GPU 1 falls off the bus at the second sample and stays lost.
    struct Losing(Vec<DeviceInfo>, u32);

    impl Source for Losing {
        fn devices(&self) -> &[DeviceInfo] {
            &self.0
        }
        fn sample(&mut self) -> Result<Snapshot, SampleError> {
            self.1 += 1;
            let gpu = |i: u32| GpuSample {
                gpu_index: i,
                status: if i == 1 && self.1 >= 2 { DeviceStatus::Lost } else { DeviceStatus::Ok },
                ..Default::default()
            };
            Ok(Snapshot { timestamp_us: i64::from(self.1), gpus: vec![gpu(0), gpu(1)] })
        }
    }

    #[test]
    fn a_lost_gpu_is_news_once_and_a_gone_root_still_polls() {
        let devices = (0..2).map(|index| DeviceInfo { index, ..Default::default() }).collect();
        let mut root = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let mut p = Poller::new(Some(Box::new(Losing(devices, 0))), Some(root.id()));
        let first = p.poll().unwrap();
        assert!(first.newly_lost.is_empty() && !first.root_gone);
        assert_eq!(first.tree.as_ref().map(|t| t.root_pid), Some(root.id()));
        assert_eq!(p.poll().unwrap().newly_lost, [1]);
        let _ = (root.kill(), root.wait());
        let last = p.poll().unwrap();
        assert!(last.newly_lost.is_empty(), "lost once, said once");
        assert!(last.root_gone && last.snapshot.is_some(), "the GPUs are read after the root is gone");
        // Without a GPU source: the host alone.
        let host_only = Poller::new(None, None).poll().unwrap();
        assert!(host_only.snapshot.is_none() && host_only.host.memory_total_bytes.is_some());
    }
}
