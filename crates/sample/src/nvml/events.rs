//! NVML's critical Xid events, on a thread of their own: `nvmlEventSetWait_v2` blocks until an
//! event comes or its timeout passes, so no poll ever waits on it. The thread hands each Xid
//! over a channel; the source takes what came at each sample.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gpulse_model::Xid;
use nvml_wrapper::Nvml;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;

use crate::kernel_log::{KernelLog, XidLine};

/// How long one wait blocks: the longest a watcher takes to stop. Each wakeup is one driver
/// call, 5 a second, whatever the number of GPUs (one set holds them all).
const WAIT_MS: u32 = 200;
/// How long the kernel's NVRM line may trail NVML's event.
const KERNEL_LINE_WAIT: Duration = Duration::from_millis(50);

/// How long a kernel line waits for the event it tells of, and how many wait at most.
const PENDING_FOR: Duration = Duration::from_secs(10);
const PENDING_MAX: usize = 256;

/// Watches every GPU that supports Xid events.
pub(super) struct XidWatcher {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    rx: Receiver<Xid>,
    /// Per GPU, in index order: whether its events are watched.
    pub watched: Vec<bool>,
}

impl XidWatcher {
    /// Registers each GPU (by index, with its bus id) for critical Xid events and starts the
    /// thread. A GPU whose events NVML does not support is left unwatched, not an error; `None`
    /// when none is watched or NVML cannot make an event set.
    pub(super) fn start(nvml: &'static Nvml, gpus: &[(u32, Option<String>)]) -> Option<Self> {
        let mut set = super::profile::timed("create_event_set", || nvml.create_event_set()).ok()?;
        let mut watched = vec![false; gpus.len()];
        for (i, (index, _)) in gpus.iter().enumerate() {
            let Ok(d) = nvml.device_by_index(*index) else { continue };
            let supported = d.supported_event_types().is_ok_and(|t| t.contains(EventTypes::CRITICAL_XID_ERROR));
            if !supported {
                continue;
            }
            // A failed registration frees the set, and with it the GPUs registered so far: a new
            // set for the GPUs after it, and those before it no longer watched (their Xid series
            // must be absent, not a 0 that nobody is watching for).
            set = match d.register_events(EventTypes::CRITICAL_XID_ERROR, set) {
                Ok(s) => {
                    watched[i] = true;
                    s
                }
                Err(_) => {
                    watched.iter_mut().for_each(|w| *w = false);
                    nvml.create_event_set().ok()?
                }
            };
        }
        if !watched.contains(&true) {
            return None;
        }
        let (tx, rx) = channel();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let buses: Vec<(u32, Option<String>)> = gpus.to_vec();
        let thread =
            std::thread::Builder::new().name("gpulse-xid".into()).spawn(move || watch(set, &flag, &tx, &buses)).ok()?;
        Some(Self { stop, thread: Some(thread), rx, watched })
    }

    /// The Xids that came since the last call.
    pub(super) fn take(&self) -> Vec<Xid> {
        self.rx.try_iter().collect()
    }
}

impl Drop for XidWatcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn watch(set: nvml_wrapper::EventSet<'static>, stop: &AtomicBool, tx: &Sender<Xid>, gpus: &[(u32, Option<String>)]) {
    let mut kernel = KernelLog::open();
    let mut pending: Vec<(Instant, XidLine)> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let data = match set.wait(WAIT_MS) {
            Ok(d) => d,
            Err(NvmlError::Timeout) => continue,
            // A lost GPU or a failing driver: wait as long as a timeout would, and try again.
            Err(_) => {
                std::thread::sleep(Duration::from_millis(u64::from(WAIT_MS)));
                continue;
            }
        };
        let timestamp_us = gpulse_base::clock::now_us();
        let Some(XidError::Value(code)) = data.event_data else { continue };
        let Ok(gpu) = data.device.index() else { continue };
        let bus = gpus.iter().find(|g| g.0 == gpu).and_then(|g| g.1.as_deref());
        let mut xid = Xid { gpu, xid: code, timestamp_us, pids: Vec::new(), text: None };
        if let Some(k) = kernel.as_mut() {
            // Lines read for one event may be another GPU's (an Xid 79 or 48 often hits several
            // GPUs within milliseconds, logged together): they wait here for their own event.
            let read_at = Instant::now();
            pending.retain(|(at, _)| read_at.duration_since(*at) < PENDING_FOR);
            pending.extend(k.xid_lines().into_iter().map(|l| (read_at, l)));
            if !pending.iter().any(|(_, l)| l.tells(code, bus)) {
                std::thread::sleep(KERNEL_LINE_WAIT);
                pending.extend(k.xid_lines().into_iter().map(|l| (Instant::now(), l)));
            }
            let excess = pending.len().saturating_sub(PENDING_MAX);
            pending.drain(..excess);
            pending.retain(|(_, l)| {
                let hit = l.tells(code, bus);
                if hit {
                    xid.pids.extend(l.pid.filter(|p| !xid.pids.contains(p)));
                    xid.text.get_or_insert_with(|| l.text.clone());
                }
                !hit
            });
        }
        if tx.send(xid).is_err() {
            break;
        }
    }
    let _ = set.release_events();
}
