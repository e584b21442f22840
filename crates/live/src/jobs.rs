//! The jobs `gpulse run` and `gpulse attach` are watching on this machine, so `gpulse top` finds
//! them by itself. Each watch keeps one small JSON file in the user's runtime folder
//! (`$XDG_RUNTIME_DIR/gpulse/jobs/<gpulse PID>.json`, else `<tmp>/gpulse-<uid>/jobs`), rewritten
//! whole every [`EVERY`] with the loop's pace and the leading finding, and removed at the end. A
//! file whose writer is gone (killed) is ignored and cleared by the next reader.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gpulse_diagnose::LiveDiagnosis;
use serde::{Deserialize, Serialize};

use crate::{Frame, Sink};

/// How often a watch rewrites its file.
pub const EVERY: Duration = Duration::from_secs(2);

/// What a watch says of its job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobStatus {
    /// The watching gpulse, and when it started (clock ticks since boot): a PID reused by
    /// another process is not this watch.
    pub gpulse_pid: u32,
    pub gpulse_start_ticks: u64,
    /// The job's root process.
    pub pid: u32,
    pub command: String,
    pub recording: Option<PathBuf>,
    pub instrumented: bool,
    pub updated_unix_ms: i64,
    /// Over the latest marks; absent until the loop has marked steps.
    pub steps_per_s: Option<f64>,
    pub data_wait_share: Option<f64>,
    /// What costs the job the most wall time, once its diagnosis has run.
    pub leading: Option<JobFinding>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobFinding {
    pub id: String,
    pub title: String,
    pub gpu: Option<u32>,
    pub lost_share: Option<f64>,
    pub time_to_oom_s: Option<f64>,
}

/// The folder, from the environment: `GPULSE_JOBS_DIR`, else the runtime folder.
pub fn dir() -> PathBuf {
    if let Some(d) = std::env::var_os("GPULSE_JOBS_DIR") {
        return PathBuf::from(d);
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| Path::new(d).is_dir()) {
        Some(r) => Path::new(&r).join("gpulse").join("jobs"),
        // SAFETY: getuid cannot fail.
        None => std::env::temp_dir().join(format!("gpulse-{}", unsafe { libc::getuid() })).join("jobs"),
    }
}

/// Creates `dir` (mode 0700) and checks that it is this user's own folder, not a link, in a
/// folder of this user's or root's: in a shared temporary folder another user could have made
/// either first.
fn own_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    // SAFETY: getuid cannot fail.
    let me = unsafe { libc::getuid() };
    let owners: &[u32] = &[me, 0];
    for (d, allowed) in [(Some(dir), &owners[..1]), (dir.parent(), owners)] {
        let Some(d) = d.filter(|d| !d.as_os_str().is_empty()) else { continue };
        let m = std::fs::symlink_metadata(d)?;
        if !m.is_dir() || !allowed.contains(&m.uid()) {
            return Err(std::io::Error::other(format!("{} is not this user's folder", d.display())));
        }
    }
    Ok(())
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// One watch's file, removed when dropped.
pub struct Registration {
    path: PathBuf,
    status: JobStatus,
}

impl Registration {
    /// Registers the job `pid` watched by this process. `None` when the folder cannot be used:
    /// being found by `top` must never keep a job from running.
    pub fn new(dir: &Path, pid: u32, command: String, recording: Option<PathBuf>, instrumented: bool) -> Option<Self> {
        own_dir(dir).ok()?;
        let me = std::process::id();
        let status = JobStatus {
            gpulse_pid: me,
            gpulse_start_ticks: gpulse_sample::proc_info::start_ticks(me)?,
            pid,
            command,
            recording: recording.map(|r| std::path::absolute(&r).unwrap_or(r)),
            instrumented,
            updated_unix_ms: unix_ms(),
            steps_per_s: None,
            data_wait_share: None,
            leading: None,
        };
        let r = Self { path: dir.join(format!("{me}.json")), status };
        r.write().ok()?;
        Some(r)
    }

    /// Rewrites the file whole (a reader sees the old or the new one, never half).
    fn write(&self) -> std::io::Result<()> {
        let tmp = self.path.with_extension("json.tmp");
        let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
        f.write_all(&serde_json::to_vec(&self.status).map_err(std::io::Error::other)?)?;
        drop(f);
        std::fs::rename(&tmp, &self.path)
    }

    /// The latest pace and leading finding from the live diagnosis.
    pub fn update(&mut self, live: &LiveDiagnosis) {
        let steps = live.recent_steps();
        self.status.steps_per_s = steps.as_ref().map(|s| s.per_s()).filter(|v| v.is_finite());
        self.status.data_wait_share = steps.as_ref().and_then(|s| s.data_wait_share());
        self.status.leading = live.leading().map(|f| JobFinding {
            id: f.id.to_owned(),
            title: f.title.clone(),
            gpu: f.gpu,
            lost_share: f.lost_share,
            time_to_oom_s: f.time_to_oom_s,
        });
        self.status.updated_unix_ms = unix_ms();
        let _ = self.write();
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The jobs watched now, oldest watch first. A file whose watch is gone is removed.
pub fn list(dir: &Path) -> Vec<JobStatus> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut jobs: Vec<JobStatus> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| {
            let status: JobStatus = serde_json::from_slice(&std::fs::read(&p).ok()?).ok()?;
            if gpulse_sample::proc_info::start_ticks(status.gpulse_pid) != Some(status.gpulse_start_ticks) {
                let _ = std::fs::remove_file(&p);
                return None;
            }
            Some(status)
        })
        .collect();
    jobs.sort_by_key(|j| (j.gpulse_start_ticks, j.gpulse_pid));
    jobs
}

/// Keeps a watch's file current from the pipeline's frames.
pub struct JobSink {
    registration: Registration,
    next: Instant,
}

impl JobSink {
    pub fn new(registration: Registration) -> Self {
        Self { registration, next: Instant::now() + EVERY }
    }
}

impl Sink for JobSink {
    fn frame(&mut self, frame: &Frame) {
        if let Some(live) = frame.live
            && Instant::now() >= self.next
        {
            self.next = Instant::now() + EVERY;
            self.registration.update(live);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gpulse-jobs-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_watch_is_listed_while_it_lives_and_gone_after() {
        let dir = temp_dir("live");
        let r = Registration::new(&dir, 4242, "python3 train.py".into(), Some("run.db".into()), true).unwrap();
        let jobs = list(&dir);
        assert_eq!(jobs.len(), 1);
        assert_eq!((jobs[0].pid, jobs[0].command.as_str(), jobs[0].instrumented), (4242, "python3 train.py", true));
        assert!(jobs[0].recording.as_ref().unwrap().is_absolute(), "{:?}", jobs[0].recording);
        let mode = std::fs::metadata(&dir).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700, "the folder is the user's alone");
        drop(r);
        assert!(list(&dir).is_empty(), "removed at the end");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_left_by_a_killed_watch_is_ignored_and_cleared() {
        let dir = temp_dir("stale");
        own_dir(&dir).unwrap();
        // A watch that was killed: its PID now names another process (or none).
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let ticks = gpulse_sample::proc_info::start_ticks(child.id()).unwrap();
        let stale = JobStatus {
            gpulse_pid: child.id(),
            gpulse_start_ticks: ticks + 1,
            pid: 1,
            command: "x".into(),
            recording: None,
            instrumented: false,
            updated_unix_ms: 0,
            steps_per_s: Some(3.0),
            data_wait_share: None,
            leading: None,
        };
        let path = dir.join(format!("{}.json", child.id()));
        std::fs::write(&path, serde_json::to_vec(&stale).unwrap()).unwrap();
        std::fs::write(dir.join("junk.json"), b"{ not json").unwrap();
        assert!(list(&dir).is_empty(), "neither is a live watch");
        assert!(!path.exists(), "the stale file is cleared");
        let _ = (child.kill(), child.wait());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_folder_that_is_a_link_is_refused() {
        let dir = temp_dir("link");
        let target = temp_dir("link-target");
        std::fs::create_dir_all(&target).unwrap();
        std::os::unix::fs::symlink(&target, &dir).unwrap();
        assert!(own_dir(&dir).is_err(), "a link, perhaps another user's");
        assert!(Registration::new(&dir, 1, "x".into(), None, false).is_none());
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0, "nothing written through the link");
        let _ = (std::fs::remove_file(&dir), std::fs::remove_dir_all(&target));
    }
}
