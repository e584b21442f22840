//! `gpulse top`: the live terminal view of every GPU, the host, the processes and why the
//! training is slow. A sink of the live pipeline ([`TopSink`], on the feed thread) turns each
//! frame into the [`App`] state; drawing reads that state only, so a replayed recording and live
//! NVML look the same.

pub mod app;
mod chart;
mod draw;
mod draw_host;
mod draw_table;
mod draw_why;
pub mod feed;
mod feeder;
pub mod fmt;
pub mod history;
mod keys;
pub mod procs;
pub mod rows;
mod tty;

use std::io::IsTerminal;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gpulse_model::DeviceInfo;
use ratatui::backend::Backend;
use ratatui::crossterm::{cursor, event, execute, terminal};

pub use app::{Action, App, Key};
pub use draw::draw;
pub use feed::{Origin, Replay};
pub use feeder::TopSink;
#[cfg(test)]
use feeder::rolling_diagnosis;

/// Why `top` cannot start here, if it cannot: it draws on a terminal only.
pub fn check_terminal() -> Result<(), String> {
    if !std::io::stdout().is_terminal() {
        return Err("gpulse top needs a terminal: standard output is not one (for lines, use `gpulse watch`)".into());
    }
    // A terminal that says it has no size (a serial console, a pty nobody sized) draws nothing.
    match terminal::size() {
        Ok((w, h)) if w > 0 && h > 0 => Ok(()),
        _ => {
            Err("gpulse top cannot draw: this terminal says it is 0×0; give it a size (`stty rows 24 cols 80`)".into())
        }
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

/// Runs the view until `q`, or until `stop` gives a reason (a stop signal). Returns the reason.
/// This thread draws and answers keys; the feed thread ([`feeder`]) collects and diagnoses.
pub fn run(feed: Origin, options: Options, mut stop: impl FnMut() -> Option<String>) -> std::io::Result<String> {
    let mut app = App::new(options.devices.clone(), options.no_signals);
    app.instrumented = options.instrumented;
    let app = Arc::new(Mutex::new(app));
    let shared = Arc::new(feeder::Shared::default());
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
    let setup = feeder::FeedSetup {
        devices: options.devices,
        instrumented: options.instrumented,
        follow_workloads: options.follow_workloads,
        jobs_dirs: options.jobs_dirs,
    };
    let mut feeding = Some(feeder::spawn(feed, setup, app.clone(), shared.clone()));
    let mut size = input.size().unwrap_or_default();
    let mut parser = keys::KeyParser::default();
    let mut buf = [0u8; 1024];
    let lock = || app.lock().unwrap_or_else(|e| e.into_inner());
    let mut dirty = true;
    let reason = 'outer: loop {
        if let Some(r) = stop() {
            break r;
        }
        // The feed thread ends only when told to, or by a panic, which ends the view too.
        if let Some(t) = feeding.take_if(|t| t.is_finished()) {
            if let Err(panic) = t.join() {
                std::panic::resume_unwind(panic);
            }
            break "the feed stopped".to_owned();
        }
        if shared.changed.swap(false, Ordering::AcqRel) {
            dirty = true;
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
                Action::Step => {
                    shared.steps.fetch_add(1, Ordering::AcqRel);
                }
                // Sent from here, at once: a confirmed key must not wait behind a diagnosis, and
                // the check is one reading of the start time per target.
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
    // The feed stops after the poll it may be diagnosing; quitting does not wait for it.
    shared.stop.store(true, Ordering::Release);
    term.backend_mut().flush()?;
    drop(term);
    Ok(reason)
}
