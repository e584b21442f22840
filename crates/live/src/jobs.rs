//! The jobs `gpulse run` and `gpulse attach` are watching on this machine, so `gpulse top` finds
//! them by itself. Each watch keeps one small JSON file in the user's runtime folder
//! (`$XDG_RUNTIME_DIR/gpulse/jobs/<gpulse PID>.json`, else `<tmp>/gpulse-<uid>/jobs`), rewritten
//! whole every [`EVERY`] with the loop's pace and the leading finding, and removed at the end. A
//! file whose writer is gone (killed) is ignored and cleared by the next reader.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gpulse_diagnose::RollingDiagnosis;
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
    /// What the job's main thread does now, sampled from outside; absent when not sampled.
    #[serde(default)]
    pub main_thread: Option<MainThreadNow>,
}

/// The main thread sampled most (the job's training process), or, in a distributed job, the
/// rank that waits least for the others (the one that sets their pace): what it does now, and
/// its states' shares so far; `None` before any sample.
pub fn main_thread_now(totals: &gpulse_diagnose::main_thread::Totals) -> Option<MainThreadNow> {
    use gpulse_diagnose::main_thread::ThreadState;
    let mut by_pid = std::collections::BTreeMap::<u32, (f64, f64)>::new();
    for ((pid, state), secs) in &totals.seconds {
        let e = by_pid.entry(*pid).or_default();
        e.0 += secs;
        if *state == ThreadState::PeerWait {
            e.1 += secs;
        }
    }
    let pid = if totals.ranks.len() >= 2 {
        let waits = |p: &u32| by_pid.get(p).map_or(f64::MAX, |(all, peer)| peer / all.max(1e-9));
        *totals.ranks.keys().filter(|p| by_pid.contains_key(p)).min_by(|a, b| waits(a).total_cmp(&waits(b)))?
    } else {
        by_pid.iter().max_by(|a, b| a.1.0.total_cmp(&b.1.0)).map(|(p, _)| *p)?
    };
    main_thread_of(totals, pid)
}

/// Every main thread sampled, the most sampled first: of a whole machine, each GPU process's.
pub fn every_main_thread(totals: &gpulse_diagnose::main_thread::Totals) -> Vec<MainThreadNow> {
    let mut by_pid = std::collections::BTreeMap::<u32, f64>::new();
    for ((pid, _), secs) in &totals.seconds {
        *by_pid.entry(*pid).or_default() += secs;
    }
    let mut pids: Vec<(u32, f64)> = by_pid.into_iter().collect();
    pids.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    pids.into_iter().filter_map(|(pid, _)| main_thread_of(totals, pid)).collect()
}

fn main_thread_of(totals: &gpulse_diagnose::main_thread::Totals, pid: u32) -> Option<MainThreadNow> {
    let (_, state, site) = totals.now.get(&pid)?;
    Some(MainThreadNow {
        rank: totals.ranks.get(&pid).copied(),
        pid,
        state: state.as_str().to_owned(),
        site: site.clone(),
        shares: totals.shares(pid).into_iter().map(|(s, v)| (s.as_str().to_owned(), v)).collect(),
    })
}

/// A main thread's latest sample and its states' shares so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MainThreadNow {
    pub pid: u32,
    /// Its rank, in a distributed job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// The state's name (`python`, `gpu_sync`...), as a newer gpulse may name one this one lacks.
    pub state: String,
    pub site: Option<String>,
    /// Each state's share of the sampled time, largest first.
    pub shares: Vec<(String, f64)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobFinding {
    /// The finding's name as the watch wrote it: a watch by a newer gpulse may name a finding
    /// this one does not know, and `top` still shows it (see [`JobFinding::finding_id`]).
    pub id: String,
    pub title: String,
    pub gpu: Option<u32>,
    pub lost_share: Option<f64>,
    pub time_to_oom_s: Option<f64>,
}

impl JobFinding {
    /// The finding, where this gpulse knows its name; `None` for one it does not, which is then
    /// shown by name and treated as no finding in particular.
    pub fn finding_id(&self) -> Option<gpulse_diagnose::FindingId> {
        self.id.parse().ok()
    }
}

/// Where this process lists its watch: `GPULSE_JOBS_DIR`, else the runtime folder, else a
/// folder of the user's in the temporary folder.
pub fn dir() -> PathBuf {
    dirs().swap_remove(0)
}

/// Every folder a watch of this user may list itself in, the one [`dir`] picks first: a batch
/// job, cron or `nohup` may lack the runtime folder that `top`'s session has.
pub fn dirs() -> Vec<PathBuf> {
    if let Some(d) = std::env::var_os("GPULSE_JOBS_DIR") {
        return vec![PathBuf::from(d)];
    }
    let runtime = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| Path::new(d).is_dir());
    // SAFETY: getuid cannot fail.
    let tmp = std::env::temp_dir().join(format!("gpulse-{}", unsafe { libc::getuid() })).join("jobs");
    runtime.map(|r| Path::new(&r).join("gpulse").join("jobs")).into_iter().chain([tmp]).collect()
}

/// Creates `dir` (mode 0700) and checks it as [`check_dir`] does.
fn own_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    check_dir(dir)
}

/// `dir` is this user's own folder, not a link, open to no one else, in a folder of this user's
/// or root's: in a shared temporary folder another user could have made either first.
fn check_dir(dir: &Path) -> std::io::Result<()> {
    // SAFETY: getuid cannot fail.
    let me = unsafe { libc::getuid() };
    let refuse = |why: &str| Err(std::io::Error::other(format!("{}: {why}", dir.display())));
    let m = std::fs::symlink_metadata(dir)?;
    if !m.is_dir() || m.uid() != me {
        return refuse("not a folder of this user's");
    }
    if m.mode() & 0o077 != 0 {
        return refuse("open to other users");
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        let p = std::fs::symlink_metadata(parent)?;
        if !p.is_dir() || ![me, 0].contains(&p.uid()) {
            return refuse("in a folder of another user's");
        }
    }
    Ok(())
}

/// A watch's file name: its PID and start time, so a later process with the same PID never
/// shares (or loses) the name.
fn file_name(pid: u32, start_ticks: u64) -> String {
    format!("{pid}-{start_ticks}.json")
}

/// The watch a file name stands for, and whether it is a file being written.
fn parse_name(name: &str) -> Option<(u32, u64, bool)> {
    let (stem, tmp) = match name.strip_suffix(".json.tmp") {
        Some(s) => (s, true),
        None => (name.strip_suffix(".json")?, false),
    };
    let (pid, ticks) = stem.split_once('-')?;
    Some((pid.parse().ok()?, ticks.parse().ok()?, tmp))
}

/// Reads a watch's file: a regular file (never through a link, never a FIFO that would block),
/// of a size a status has.
fn read_status(path: &Path) -> Option<JobStatus> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f =
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path).ok()?;
    let m = f.metadata().ok()?;
    if !m.is_file() || m.len() > 64 * 1024 {
        return None;
    }
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).ok()?;
    serde_json::from_slice(&bytes).ok()
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
    /// Registers the job `pid` watched by this process. An error says why the folder cannot be
    /// used; being found by `top` must never keep a job from running.
    pub fn new(
        dir: &Path,
        pid: u32,
        command: String,
        recording: Option<PathBuf>,
        instrumented: bool,
    ) -> std::io::Result<Self> {
        own_dir(dir)?;
        let me = std::process::id();
        let ticks = gpulse_sample::proc_info::start_ticks(me)
            .ok_or_else(|| std::io::Error::other("cannot read this process's start time"))?;
        let status = JobStatus {
            gpulse_pid: me,
            gpulse_start_ticks: ticks,
            pid,
            command,
            recording: recording.map(|r| std::path::absolute(&r).unwrap_or(r)),
            instrumented,
            updated_unix_ms: unix_ms(),
            steps_per_s: None,
            data_wait_share: None,
            leading: None,
            main_thread: None,
        };
        let r = Self { path: dir.join(file_name(me, ticks)), status };
        r.write()?;
        Ok(r)
    }

    /// Rewrites the file whole (a reader sees the old or the new one, never half).
    fn write(&self) -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let tmp = self.path.with_extension("json.tmp");
        // A fresh file, never through a link someone left under the name.
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(&serde_json::to_vec(&self.status).map_err(std::io::Error::other)?)?;
        drop(f);
        std::fs::rename(&tmp, &self.path)
    }

    /// The latest pace and leading finding from the live diagnosis.
    pub fn update(&mut self, live: &RollingDiagnosis) {
        let steps = live.recent_steps();
        self.status.steps_per_s = steps.as_ref().map(|s| s.per_s()).filter(|v| v.is_finite());
        self.status.data_wait_share = steps.as_ref().and_then(|s| s.data_wait_share());
        self.status.leading = live.leading().map(|f| JobFinding {
            id: f.id.as_str().to_owned(),
            title: f.title.clone(),
            gpu: f.gpu,
            lost_share: f.wall_share(),
            time_to_oom_s: f.time_to_oom_s,
        });
        self.status.main_thread = main_thread_now(live.main_thread());
        self.status.updated_unix_ms = unix_ms();
        let _ = self.write();
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The jobs watched now in `dirs`, oldest watch first. Files of watches that are gone are
/// removed; a folder that is not the user's own is not read.
pub fn list(dirs: &[PathBuf]) -> Vec<JobStatus> {
    let mut jobs: Vec<JobStatus> = Vec::new();
    for dir in dirs.iter().filter(|d| check_dir(d).is_ok()) {
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some((pid, ticks, tmp)) = name.to_str().and_then(parse_name) else { continue };
            let path = e.path();
            if gpulse_sample::proc_info::start_ticks(pid) != Some(ticks) {
                let _ = std::fs::remove_file(&path);
                continue;
            }
            if let Some(s) = read_status(&path).filter(|s| !tmp && (s.gpulse_pid, s.gpulse_start_ticks) == (pid, ticks))
                && !jobs.iter().any(|j| (j.gpulse_pid, j.gpulse_start_ticks) == (pid, ticks))
            {
                jobs.push(s);
            }
        }
    }
    jobs.sort_by_key(|j| (j.gpulse_start_ticks, j.gpulse_pid));
    jobs
}

/// Keeps a watch's file current from the pipeline's frames, and removes it when the job ends.
pub struct JobSink {
    registration: Option<Registration>,
    next: Instant,
}

impl JobSink {
    pub fn new(registration: Registration) -> Self {
        Self { registration: Some(registration), next: Instant::now() + EVERY }
    }
}

impl Sink for JobSink {
    fn frame(&mut self, frame: &Frame) {
        if let Some(live) = frame.rolling
            && let Some(r) = self.registration.as_mut()
            && Instant::now() >= self.next
        {
            self.next = Instant::now() + EVERY;
            r.update(live);
        }
    }

    fn watch_ended(&mut self) {
        self.registration = None;
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

    fn status(pid: u32, ticks: u64) -> JobStatus {
        JobStatus {
            gpulse_pid: pid,
            gpulse_start_ticks: ticks,
            pid: 1,
            command: "x".into(),
            recording: None,
            instrumented: false,
            updated_unix_ms: 0,
            steps_per_s: Some(3.0),
            data_wait_share: None,
            leading: None,
            main_thread: None,
        }
    }

    #[test]
    fn a_watch_is_listed_while_it_lives_and_gone_after() {
        let dir = temp_dir("live");
        let r = Registration::new(&dir, 4242, "python3 train.py".into(), Some("run.db".into()), true).unwrap();
        let jobs = list(std::slice::from_ref(&dir));
        assert_eq!(jobs.len(), 1);
        assert_eq!((jobs[0].pid, jobs[0].command.as_str(), jobs[0].instrumented), (4242, "python3 train.py", true));
        assert!(jobs[0].recording.as_ref().unwrap().is_absolute(), "{:?}", jobs[0].recording);
        let mode = std::fs::metadata(&dir).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700, "the folder is the user's alone");
        // Listed once even when two folders are the same one.
        assert_eq!(list(&[dir.clone(), dir.clone()]).len(), 1);
        drop(r);
        assert!(list(std::slice::from_ref(&dir)).is_empty(), "removed at the end");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "nothing left behind");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn files_left_by_a_killed_watch_are_ignored_and_cleared() {
        let dir = temp_dir("stale");
        own_dir(&dir).unwrap();
        // A watch that was killed: its PID now names another process (or none).
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let ticks = gpulse_sample::proc_info::start_ticks(child.id()).unwrap() + 1;
        let path = dir.join(file_name(child.id(), ticks));
        std::fs::write(&path, serde_json::to_vec(&status(child.id(), ticks)).unwrap()).unwrap();
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, b"{").unwrap();
        std::fs::write(dir.join("junk.json"), b"{ not json").unwrap();
        assert!(list(std::slice::from_ref(&dir)).is_empty(), "none is a live watch");
        assert!(!path.exists() && !tmp.exists(), "the stale files are cleared");
        assert!(dir.join("junk.json").exists(), "a file that is no watch's is left alone");
        let _ = (child.kill(), child.wait());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_fifo_a_link_or_a_lie_under_a_live_name_is_not_read() {
        let dir = temp_dir("odd");
        own_dir(&dir).unwrap();
        let me = std::process::id();
        let ticks = gpulse_sample::proc_info::start_ticks(me).unwrap();
        let name = dir.join(file_name(me, ticks));
        // A FIFO would block a plain open forever.
        let c = std::ffi::CString::new(name.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid path string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(list(std::slice::from_ref(&dir)).is_empty(), "the FIFO is skipped, not waited on");
        std::fs::remove_file(&name).unwrap();
        let elsewhere = dir.with_extension("target.json");
        std::fs::write(&elsewhere, serde_json::to_vec(&status(me, ticks)).unwrap()).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &name).unwrap();
        assert!(list(std::slice::from_ref(&dir)).is_empty(), "not read through a link");
        std::fs::remove_file(&name).unwrap();
        std::fs::write(&name, serde_json::to_vec(&status(me, ticks + 7)).unwrap()).unwrap();
        assert!(list(std::slice::from_ref(&dir)).is_empty(), "a status that is not the name's watch");
        let _ = (std::fs::remove_dir_all(&dir), std::fs::remove_file(&elsewhere));
    }

    #[test]
    fn a_folder_that_is_a_link_or_open_to_others_is_refused() {
        let dir = temp_dir("link");
        let target = temp_dir("link-target");
        std::fs::create_dir_all(&target).unwrap();
        std::os::unix::fs::symlink(&target, &dir).unwrap();
        assert!(own_dir(&dir).is_err(), "a link, perhaps another user's");
        assert!(Registration::new(&dir, 1, "x".into(), None, false).is_err());
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0, "nothing written through the link");
        let _ = (std::fs::remove_file(&dir), std::fs::remove_dir_all(&target));
        let open = temp_dir("open");
        std::fs::create_dir_all(&open).unwrap();
        std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        let e = Registration::new(&open, 1, "x".into(), None, false).err().unwrap();
        assert!(e.to_string().contains("open to other users"), "{e}");
        let _ = std::fs::remove_dir_all(&open);
    }

    #[test]
    fn names_say_which_watch_they_are() {
        assert_eq!(parse_name(&file_name(42, 7)), Some((42, 7, false)));
        assert_eq!(parse_name("42-7.json.tmp"), Some((42, 7, true)));
        assert_eq!(parse_name("42.json"), None);
        assert_eq!(parse_name("x-7.json"), None);
    }
}

#[cfg(test)]
mod main_thread_tests {
    use gpulse_diagnose::main_thread::{ThreadState, Totals};

    /// In a distributed job the rank shown is the one the others wait for: the least time in
    /// collectives, not the most sampled.
    #[test]
    fn the_rank_that_sets_the_pace_is_shown() {
        let mut t = Totals::default();
        for (pid, rank, peer, python) in [(10, 0, 6.0, 4.0), (11, 1, 0.5, 9.0), (12, 2, 7.0, 5.0)] {
            t.seconds.insert((pid, ThreadState::PeerWait), peer);
            t.seconds.insert((pid, ThreadState::Python), python);
            t.now.insert(pid, (0, ThreadState::Python, None));
            t.ranks.insert(pid, rank);
        }
        let m = super::main_thread_now(&t).unwrap();
        assert_eq!((m.pid, m.rank), (11, Some(1)));
        // Without ranks: the most sampled.
        t.ranks.clear();
        assert_eq!(super::main_thread_now(&t).unwrap().pid, 12);
    }
}
