//! How many processes of the job's cgroup the kernel's OOM killer took: the `oom_kill` count of
//! cgroup v2's `memory.events`, read when the job starts and when it ends. It counts kills by any
//! OOM killer (the host's or the cgroup's limit), so a rise is the kernel's own word.

use std::path::{Path, PathBuf};

use gpulse_sample::proc_info;

/// The `memory.events` file of the cgroup v2 path `cgroup` (as the sampler's `cgroup_v2` gives
/// it) under the cgroup v2 mount `root`. `None` when the file is absent.
pub fn memory_events(cgroup: &str, root: &Path) -> Option<PathBuf> {
    let rel = cgroup.trim().trim_start_matches('/');
    let path = if rel.is_empty() { root.join("memory.events") } else { root.join(rel).join("memory.events") };
    path.is_file().then_some(path)
}

/// The `oom_kill` count in a `memory.events` text.
pub fn oom_kills(events: &str) -> Option<u64> {
    events.lines().find_map(|l| l.strip_prefix("oom_kill ")?.trim().parse().ok())
}

/// The job's OOM-kill counter, as found when it started.
pub struct OomCounter {
    path: PathBuf,
    at_start: u64,
}

impl OomCounter {
    /// Reads the count for process `pid` (the job, just started: it is in gpulse's cgroup unless
    /// something moved it). `None` when it cannot be read: the count is then unknown, not 0.
    pub fn start(pid: u32) -> Option<Self> {
        // Without a v2 entry (a v1-only host) the count is unknown.
        let cgroup = proc_info::cgroup_v2(pid).or_else(|| proc_info::cgroup_v2(std::process::id()))?;
        let path = memory_events(&cgroup, Path::new("/sys/fs/cgroup"))?;
        let at_start = oom_kills(&std::fs::read_to_string(&path).ok()?)?;
        Some(Self { path, at_start })
    }

    /// Kills since the start; `None` when the file can no longer be read.
    pub fn since_start(&self) -> Option<u64> {
        let now = oom_kills(&std::fs::read_to_string(&self.path).ok()?)?;
        Some(now.saturating_sub(self.at_start))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sampler_gives_the_v2_entry_of_proc_cgroup() {
        let text = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let v2 = text.lines().find_map(|l| l.strip_prefix("0::")).map(|p| p.trim().to_owned());
        assert_eq!(proc_info::cgroup_v2(std::process::id()), v2, "{text}");
    }

    #[test]
    fn the_v2_entry_names_the_file_and_its_count_is_read() {
        let root = std::env::temp_dir().join(format!("gpulse-cgroup-{}", std::process::id()));
        let dir = root.join("user.slice/job.scope");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("memory.events"), "low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\noom_group_kill 0\n")
            .unwrap();
        let found = memory_events("/user.slice/job.scope", &root).unwrap();
        assert_eq!(found, dir.join("memory.events"));
        assert_eq!(oom_kills(&std::fs::read_to_string(found).unwrap()), Some(2), "oom_kill, not oom_group_kill");
        // A hybrid host's `/` names the unified root, which has no memory controller here:
        // unknown, not zero.
        assert_eq!(memory_events("/", &root), None);
        assert_eq!(memory_events("/elsewhere", &root), None);
        assert_eq!(oom_kills("low 0\nhigh 0\n"), None);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
