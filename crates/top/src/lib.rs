//! `gpulse top`: the live terminal view of every GPU, the host, the processes and why the
//! training is slow. A [`Sink`] of the live pipeline turns each frame into the [`App`] state;
//! drawing reads that state only, so a replayed recording and live NVML look the same.

pub mod app;
mod chart;
mod draw;
mod draw_host;
mod draw_table;
mod draw_why;
pub mod feed;
pub mod fmt;
pub mod history;
mod keys;
pub mod procs;
pub mod rows;
mod tty;

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gpulse_diagnose::LiveDiagnosis;
use gpulse_live::{Frame, Pipeline, Sink};
use gpulse_model::DeviceInfo;
use ratatui::backend::Backend;
use ratatui::crossterm::{cursor, event, execute, terminal};

pub use app::{Action, App, Key};
pub use draw::draw;
pub use feed::{Fed, Feed, Replay};

/// Fills the shared [`App`] from the pipeline's frames; live, with `/proc`'s view of the
/// processes around the GPU processes.
pub struct TopSink {
    app: Arc<Mutex<App>>,
    procs: Option<procs::ProcView>,
}

impl TopSink {
    /// `live`: the processes are this machine's, so `/proc` is read for them.
    pub fn new(app: Arc<Mutex<App>>, live: bool) -> Self {
        Self { app, procs: live.then(procs::ProcView::default) }
    }
}

impl Sink for TopSink {
    fn frame(&mut self, frame: &Frame) {
        let mut app = self.app.lock().unwrap_or_else(|e| e.into_inner());
        // Live, pause holds the screen; a replay's pause stops the replay itself.
        if app.paused && app.replay.is_none() {
            return;
        }
        let procs = match self.procs.as_mut() {
            Some(view) => {
                let pids: Vec<u32> = frame
                    .poll
                    .snapshot
                    .iter()
                    .flat_map(|s| &s.gpus)
                    .flat_map(|g| &g.processes)
                    .map(|p| p.pid)
                    .collect();
                view.around(&pids)
            }
            None => HashMap::new(),
        };
        app.apply(frame, &procs);
    }
}

/// Why `top` cannot start here, if it cannot: it draws on a terminal only.
pub fn check_terminal() -> Result<(), String> {
    if std::io::stdout().is_terminal() {
        Ok(())
    } else {
        Err("gpulse top needs a terminal: standard output is not one (for lines, use `gpulse watch`)".into())
    }
}

/// Puts the terminal back as it was: on return, on a panic, on a stop signal.
fn restore() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(std::io::stdout(), event::DisableMouseCapture, terminal::LeaveAlternateScreen, cursor::Show);
}

/// Restores the terminal when dropped, whichever way the loop ends.
struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// What the view is started with.
pub struct Options {
    pub devices: Vec<DeviceInfo>,
    /// The loop marks every DataLoader wait (a replayed `--instrument` run).
    pub instrumented: bool,
    /// Why signals cannot be sent, if they cannot (`--readonly`, a replay).
    pub no_signals: Option<&'static str>,
    /// Where the watched jobs of this machine are listed (live only; empty in a replay).
    pub jobs_dirs: Vec<std::path::PathBuf>,
    /// The feed is the machine's (live, or a recording of no one job): each GPU's diagnosis
    /// starts again when another job takes it.
    pub follow_workloads: bool,
}

/// The rolling diagnosis. Of the machine (`follow_workloads`), one job follows another on a GPU
/// and each is diagnosed on its own; of one job's recording, the whole job is, as `diagnose`
/// does.
fn live_diagnosis(devices: &[gpulse_model::DeviceInfo], instrumented: bool, follow_workloads: bool) -> LiveDiagnosis {
    let live = LiveDiagnosis::new(devices, instrumented);
    if follow_workloads { live.following_workloads() } else { live }
}

/// Runs the view until `q`, or until `stop` gives a reason (a stop signal). Returns the reason.
pub fn run(mut feed: Feed, options: Options, mut stop: impl FnMut() -> Option<String>) -> std::io::Result<String> {
    let live = matches!(feed, Feed::Live(_));
    let app = Arc::new(Mutex::new(App::new(options.devices.clone(), options.no_signals)));
    let mut pipeline =
        Pipeline::new(None, Some(live_diagnosis(&options.devices, options.instrumented, options.follow_workloads)));
    pipeline.add_sink(Box::new(TopSink::new(app.clone(), live)));
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        previous(info);
    }));
    terminal::enable_raw_mode()?;
    let _guard = TerminalGuard;
    execute!(std::io::stdout(), terminal::EnterAlternateScreen, event::EnableMouseCapture, cursor::Hide)?;
    let mut term = ratatui::Terminal::new(ratatui::backend::CrosstermBackend::new(std::io::stdout()))?;
    let input = tty::TtyInput::open()?;
    let mut size = input.size().unwrap_or_default();
    let mut parser = keys::KeyParser::default();
    let mut buf = [0u8; 1024];
    let lock = || app.lock().unwrap_or_else(|e| e.into_inner());
    let mut dirty = true;
    let mut step = false;
    let mut was_paused = false;
    let mut jobs_due = Instant::now();
    let reason = 'outer: loop {
        if let Some(r) = stop() {
            break r;
        }
        if !options.jobs_dirs.is_empty() && Instant::now() >= jobs_due {
            jobs_due = Instant::now() + gpulse_live::jobs::EVERY;
            let jobs = gpulse_live::jobs::list(&options.jobs_dirs);
            let mut a = lock();
            if !a.paused && a.jobs != jobs {
                a.jobs = jobs;
                a.mark_jobs();
                dirty = true;
            }
        }
        let paused = lock().paused;
        if let Feed::Replay(r) = &mut feed
            && was_paused
            && !paused
        {
            r.resume(Instant::now());
        }
        was_paused = paused;
        loop {
            match feed.next(Duration::ZERO, paused, std::mem::take(&mut step)) {
                Fed::Poll(p, marks) => {
                    pipeline.marks(marks);
                    pipeline.poll(*p);
                    dirty = true;
                }
                Fed::Failed(e) => {
                    lock().failed = Some(e);
                    dirty = true;
                    break;
                }
                Fed::Nothing => break,
            }
        }
        if let Feed::Replay(r) = &feed {
            let state = if r.finished() { "the end: q quits" } else { "playing" };
            let label = format!("replay {}/{} polls, {state}", r.played(), r.len());
            let mut a = lock();
            if a.replay.as_deref() != Some(label.as_str()) {
                a.replay = Some(label);
                dirty = true;
            }
        }
        if dirty {
            let a = lock();
            term.draw(|f| draw(f, &a))?;
            dirty = false;
        }
        // Keys wake the loop at once; a resize is seen by asking the size.
        let keys = match input.wait(Duration::from_millis(50)) {
            tty::Input::HungUp => break "the terminal is gone".to_owned(),
            tty::Input::Idle => Vec::new(),
            tty::Input::Ready => match input.read(&mut buf) {
                Some(n) => parser.feed(&buf[..n]),
                None => break "the terminal is gone".to_owned(),
            },
        };
        if let Some(now) = input.size()
            && now != size
        {
            size = now;
            term.autoresize()?;
            dirty = true;
        }
        for key in keys {
            dirty = true;
            let action = lock().key(key);
            match action {
                Action::None => {}
                Action::Quit => break 'outer "quit".to_owned(),
                Action::Step => step = true,
                Action::Signal(sig, targets) => {
                    let said: Vec<String> = targets
                        .iter()
                        .map(|t| match procs::send(t, sig) {
                            procs::Outcome::Sent => format!("{} sent to {}", sig.name(), t.pid),
                            procs::Outcome::Gone => format!("{} is gone: not signalled", t.pid),
                            procs::Outcome::Reused => format!("{} is another process now: not signalled", t.pid),
                            procs::Outcome::Failed(e) => format!("{}: {e}", t.pid),
                        })
                        .collect();
                    lock().message = Some(said.join("; "));
                }
            }
        }
    };
    term.backend_mut().flush()?;
    drop(term);
    Ok(reason)
}
