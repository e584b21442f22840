//! Which processes the sampler reads: a job's tree, or every GPU process of the node.

use std::sync::{Arc, Mutex};

/// Where the sampler looks for Python processes, each second.
#[derive(Debug, Clone)]
pub enum Scope {
    /// The tree under one process, itself included: the job gpulse runs or follows.
    Tree(u32),
    /// The trees under the processes that hold a GPU, as the GPUs last listed them: `serve`,
    /// and `record` without `--pid`.
    Node(NodeRoots),
}

/// The node's GPU processes, set after each poll by whoever reads the GPUs (the sampler never
/// calls NVML), each with the share of its rate it is read at.
#[derive(Debug, Clone, Default)]
pub struct NodeRoots(Arc<Mutex<Vec<(u32, f64)>>>);

impl NodeRoots {
    /// Each GPU process with the share of the time its GPU waits, 0 (busy) to 1 (idle); `None`
    /// where that is not known. A process on several GPUs takes its idlest.
    pub fn set(&self, processes: impl IntoIterator<Item = (u32, Option<f64>)>) {
        let me = std::process::id();
        let mut roots: Vec<(u32, f64)> = Vec::new();
        for (pid, idle) in processes.into_iter().filter(|(pid, _)| *pid != me && *pid != 0) {
            let p = priority(idle);
            match roots.iter_mut().find(|r| r.0 == pid) {
                Some(r) => r.1 = r.1.max(p),
                None => roots.push((pid, p)),
            }
        }
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = roots;
    }

    fn get(&self) -> Vec<(u32, f64)> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Scope {
    /// The roots of the trees to read, each with its share of the rate.
    pub(super) fn roots(&self) -> Vec<(u32, f64)> {
        match self {
            Scope::Tree(root) => vec![(*root, 1.0)],
            Scope::Node(n) => n.get(),
        }
    }
}

/// The share of the rate a GPU process is read at: all of it while its GPU waits, a quarter
/// while the GPU is busy. The samples go where they tell what a GPU waited for, and a node of
/// busy GPUs costs less.
pub fn priority(idle: Option<f64>) -> f64 {
    idle.map_or(1.0, |i| 0.25 + 0.75 * i.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_gpus_process_is_read_at_the_full_rate_and_a_busy_ones_at_a_quarter() {
        let n = NodeRoots::default();
        n.set([(10, Some(1.0)), (11, Some(0.0)), (12, None), (11, Some(0.5)), (std::process::id(), Some(1.0))]);
        assert_eq!(n.get(), vec![(10, 1.0), (11, 0.625), (12, 1.0)], "gpulse itself is never a root");
        n.set([]);
        assert!(Scope::Node(n).roots().is_empty());
        assert_eq!(Scope::Tree(7).roots(), vec![(7, 1.0)]);
    }
}
