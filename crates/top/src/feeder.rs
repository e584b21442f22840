//! The feed thread: everything `top` collects and works out, off the UI thread. It runs the
//! polls (live or a replay) through `gpulse_live::drive`, the loop of every view, into the
//! pipeline with its diagnosis; the sink reads this machine's processes around the GPU
//! processes, and the watch lists the watched jobs; each swaps its ready state into the [`App`]
//! under a short lock. The UI thread only draws and answers keys, so a slow diagnosis or a slow
//! `/proc` never holds up a keystroke.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gpulse_diagnose::{Finding, RollingDiagnosis, Steps};
use gpulse_live::{Collected, Control, Frame, Pipeline, SampleError, Sink, StackInput};
use gpulse_model::DeviceInfo;

use crate::app::{App, Update};
use crate::feed::{Origin, Replay};
use crate::procs;

/// How long the feed waits for a live poll, and sleeps when a replay has none due, before it
/// looks at pause, step and stop again.
const TICK: Duration = Duration::from_millis(50);

/// What the UI thread and the feed thread tell each other without the [`App`]'s lock.
#[derive(Default)]
pub struct Shared {
    /// The UI is done: the feed stops after what it is doing.
    pub stop: AtomicBool,
    /// Replay steps asked for (`n` while paused) and not taken yet.
    pub steps: AtomicU32,
    /// The App changed since the UI last drew it.
    pub changed: AtomicBool,
}

impl Shared {
    fn take_step(&self) -> bool {
        self.steps.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok()
    }
}

fn lock(app: &Mutex<App>) -> MutexGuard<'_, App> {
    app.lock().unwrap_or_else(|e| e.into_inner())
}

/// Fills the shared [`App`] from the pipeline's frames; live, with the sampler's view of the
/// processes around the GPU processes. Everything is worked out before the lock is taken.
pub struct TopSink {
    app: Arc<Mutex<App>>,
    procs: Option<procs::ProcView>,
    devices: Vec<DeviceInfo>,
    shared: Arc<Shared>,
    replay: Option<Progress>,
}

/// How far a replay has played, and the whole recording's analysis shown at its end.
struct Progress {
    played: usize,
    len: usize,
    final_findings: Vec<Finding>,
    final_steps: Option<Steps>,
}

impl TopSink {
    /// `this_machine`: the processes are this machine's, so they are read for each frame.
    pub fn new(app: Arc<Mutex<App>>, this_machine: bool) -> Self {
        let devices = lock(&app).devices.clone();
        Self { app, procs: this_machine.then(procs::ProcView::default), devices, shared: Arc::default(), replay: None }
    }

    fn telling(mut self, shared: Arc<Shared>) -> Self {
        self.shared = shared;
        self
    }

    /// Labels the view with `replay`'s progress (one frame a poll played) and, at its end, shows
    /// the whole recording's analysis in place of the live window's.
    fn replaying(mut self, replay: &mut Replay) -> Self {
        let (final_findings, final_steps) = replay.take_final();
        let progress = Progress { played: replay.played(), len: replay.len(), final_findings, final_steps };
        label(&mut lock(&self.app), &progress);
        self.replay = Some(progress);
        self
    }
}

/// The replay's label; at its end, the whole recording's analysis.
fn label(a: &mut App, r: &Progress) {
    let finished = r.played >= r.len;
    let state = if finished { "the end: q quits" } else { "playing" };
    a.replay = Some(format!("replay {}/{} polls, {state}", r.played, r.len));
    a.replay_ended = finished;
    if finished && !a.final_analysis {
        a.findings = crate::app::finding_views(&r.final_findings);
        if let Some(steps) = &r.final_steps {
            a.steps_per_s = Some(steps.per_s()).filter(|v| v.is_finite());
            a.data_wait_share = steps.data_wait_share();
        }
        a.final_analysis = true;
        a.diagnosed = true;
    }
}

impl Sink for TopSink {
    fn frame(&mut self, frame: &Frame) {
        // Live, pause holds the screen; a replay's pause stops the replay itself.
        let held = |a: &App| a.paused && a.replay.is_none();
        if held(&lock(&self.app)) {
            return;
        }
        let (procs, lineage) = match self.procs.as_mut() {
            Some(view) => {
                let pids: Vec<u32> = frame
                    .poll
                    .snapshot
                    .iter()
                    .flat_map(|s| &s.gpus)
                    .flat_map(|g| &g.processes)
                    .map(|p| p.pid)
                    .collect();
                let procs = view.around(&pids);
                let lineage = procs::lineage(pids.into_iter().chain(procs.keys().copied()), &procs);
                (procs, lineage)
            }
            None => (HashMap::new(), HashMap::new()),
        };
        let update = Update::new(frame, &procs, &self.devices);
        let mut app = lock(&self.app);
        // Paused while this frame was worked out: the screen holds from the key on.
        if held(&app) {
            return;
        }
        app.lineage = lineage;
        app.take(update);
        if let Some(r) = self.replay.as_mut() {
            r.played += 1;
            label(&mut app, r);
        }
        drop(app);
        self.shared.changed.store(true, Ordering::Release);
    }
}

/// What the feed thread needs of the view's options.
pub struct FeedSetup {
    pub devices: Vec<DeviceInfo>,
    pub instrumented: bool,
    pub follow_workloads: bool,
    pub jobs_dirs: Vec<std::path::PathBuf>,
}

/// The rolling diagnosis. Of the machine (`follow_workloads`), one job follows another on a GPU
/// and each is diagnosed on its own; of one job's recording, the whole job is, as `diagnose`
/// does.
pub fn rolling_diagnosis(devices: &[DeviceInfo], instrumented: bool, follow_workloads: bool) -> RollingDiagnosis {
    let rolling = RollingDiagnosis::new(devices, instrumented);
    if follow_workloads { rolling.following_workloads() } else { rolling }
}

/// Starts the feed thread; it runs until `shared.stop`. The pipeline is built on it, so that
/// nothing of the diagnosis ever runs on the UI thread.
pub fn spawn(mut feed: Origin, setup: FeedSetup, app: Arc<Mutex<App>>, shared: Arc<Shared>) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name("gpulse-top-feed".into())
        .spawn(move || {
            let this_machine = matches!(feed, Origin::Live(_));
            let diagnosis = rolling_diagnosis(&setup.devices, setup.instrumented, setup.follow_workloads);
            let mut pipeline = Pipeline::new(None, Some(diagnosis));
            let mut sink = TopSink::new(app.clone(), this_machine).telling(shared.clone());
            if let Origin::Replay(r) = &mut feed {
                sink = sink.replaying(r);
            }
            pipeline.add_sink(Box::new(sink));
            let mut control = TopControl {
                app: app.clone(),
                shared: shared.clone(),
                jobs_dirs: setup.jobs_dirs,
                jobs_due: Instant::now(),
            };
            match feed {
                Origin::Live(collector) => {
                    // Every GPU process's main thread, where the kernel lets gpulse read it; a
                    // refusal is said once per process on the view's message line.
                    let (stacks, roots) = StackInput::on_node(STACKS_HZ);
                    pipeline.add_sink(roots);
                    let told = app.clone();
                    let mut stacks = stacks.telling(move |why| lock(&told).message = Some(why.to_owned()));
                    gpulse_live::drive(collector, &mut pipeline, &mut control, &mut [&mut stacks]);
                }
                Origin::Replay(mut replay) => {
                    // The recording's marks and stack samples come in as a live view's do.
                    let mut recorded = replay.take_recorded();
                    let playing = Playing { replay, app, shared, was_paused: false };
                    gpulse_live::drive(playing, &mut pipeline, &mut control, &mut [&mut recorded]);
                }
            }
        })
        .expect("spawning a thread")
}

/// Samples a second of each GPU process's main thread, as `serve` by default.
const STACKS_HZ: f64 = 50.0;

/// What ends the view: the UI's stop; between polls it also lists the watched jobs (a view's own
/// state, not the pipeline's). A failed poll is shown, and the view goes on, as it does past a
/// replay's end.
struct TopControl {
    app: Arc<Mutex<App>>,
    shared: Arc<Shared>,
    jobs_dirs: Vec<std::path::PathBuf>,
    jobs_due: Instant,
}

impl Control for TopControl {
    type End = ();

    fn between(&mut self) -> Option<()> {
        if self.shared.stop.load(Ordering::Acquire) {
            return Some(());
        }
        let now = Instant::now();
        if !self.jobs_dirs.is_empty() && now >= self.jobs_due {
            self.jobs_due = now + gpulse_live::jobs::EVERY;
            let jobs = gpulse_live::jobs::list(&self.jobs_dirs);
            let mut a = lock(&self.app);
            if !a.paused && a.jobs != jobs {
                a.jobs = jobs;
                a.mark_jobs();
                self.shared.changed.store(true, Ordering::Release);
            }
        }
        None
    }

    fn root_gone(&mut self) -> Option<()> {
        None
    }

    fn sampling_failed(&mut self, error: SampleError) -> Option<()> {
        lock(&self.app).failed = Some(error.to_string());
        self.shared.changed.store(true, Ordering::Release);
        None
    }

    fn schedule_over(&mut self) -> Option<()> {
        None
    }

    fn tick(&self) -> Duration {
        TICK
    }
}

/// A replay as the loop's feed: held while the view is paused, one poll a step (`n`), and its
/// clock restarted from the poll shown when the view resumes.
struct Playing {
    replay: Replay,
    app: Arc<Mutex<App>>,
    shared: Arc<Shared>,
    was_paused: bool,
}

impl gpulse_live::Feed for Playing {
    fn next(&mut self, wait: Duration) -> Option<Collected> {
        let paused = lock(&self.app).paused;
        if self.was_paused && !paused {
            self.replay.resume(Instant::now());
        }
        self.was_paused = paused;
        let step = self.shared.take_step();
        let due = if paused && !step { None } else { self.replay.due(Instant::now(), step) };
        let Some(poll) = due else {
            // None due yet: wait out the tick, then look at pause, step and stop again.
            if !self.replay.finished() {
                std::thread::sleep(wait);
            }
            return None;
        };
        Some(Ok(poll))
    }

    fn is_finished(&self) -> bool {
        self.replay.finished()
    }

    /// A replay has nothing taken and not handed over, and no closing poll.
    fn end(self, _closing: bool) -> Vec<Collected> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Replay;

    /// Waits, however long a loaded machine takes, until `until` holds of the App.
    fn wait_for(app: &Mutex<App>, what: &str, until: impl Fn(&App) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !until(&lock(app)) {
            assert!(Instant::now() < deadline, "never: {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A replay played on the feed thread: held while paused, one poll a step, on to its end once
    /// resumed, and the thread ends when told.
    #[test]
    fn the_feed_thread_plays_steps_and_stops() {
        let p = gpulse_fixtures::path("h200-gpulse-run/dl_bound.db");
        let run = gpulse_record::read(&p).unwrap();
        let app = Arc::new(Mutex::new(App::new(run.devices.clone(), Some("a replay"))));
        lock(&app).paused = true;
        let shared = Arc::new(Shared::default());
        let setup = FeedSetup {
            devices: run.devices.clone(),
            instrumented: true,
            follow_workloads: false,
            jobs_dirs: Vec::new(),
        };
        let feed = Origin::Replay(Replay::analysed(&run, 1e6));
        let thread = spawn(feed, setup, app.clone(), shared.clone());
        wait_for(&app, "the replay is labelled", |a| a.replay.as_deref().is_some_and(|l| l.starts_with("replay 0/")));
        std::thread::sleep(TICK * 2);
        assert_eq!(lock(&app).polls, 0, "paused, nothing is played");
        shared.steps.fetch_add(1, Ordering::AcqRel);
        wait_for(&app, "one step", |a| a.polls == 1);
        assert!(shared.changed.swap(false, Ordering::AcqRel), "the UI is told to draw");
        std::thread::sleep(TICK * 2);
        assert_eq!(lock(&app).polls, 1, "one poll a step");
        lock(&app).paused = false;
        wait_for(&app, "the end", |a| a.replay.as_deref().is_some_and(|l| l.contains("the end")));
        assert_eq!(lock(&app).polls as usize, run.snapshots.len());
        assert!(!lock(&app).findings.is_empty(), "the diagnosis ran on the feed thread");
        // At the end, the whole recording's analysis, as `gpulse diagnose` gives it: the same
        // findings in the same order with the same shares.
        let whole = gpulse_diagnose::diagnose(&run);
        let a = lock(&app);
        assert!(a.final_analysis);
        let shown: Vec<_> = a.findings.iter().map(|f| (f.id, f.lost_share)).collect();
        assert_eq!(shown, whole.iter().map(|f| (f.id, f.wall_share())).collect::<Vec<_>>());
        let steps = gpulse_diagnose::Run::from_recording(&run).steps.unwrap();
        assert_eq!((a.steps_per_s, a.data_wait_share), (Some(steps.per_s()), steps.data_wait_share()));
        drop(a);
        shared.stop.store(true, Ordering::Release);
        thread.join().unwrap();
    }
}
