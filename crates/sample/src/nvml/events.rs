//! NVML's critical Xid events, on a thread of their own: `nvmlEventSetWait_v2` blocks until an
//! event comes or its timeout passes, so no poll ever waits on it. The thread hands each Xid
//! over a channel; the source takes what came at each sample.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::Duration;

use gpulse_model::Xid;
use nvml_wrapper::Nvml;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;

use crate::kernel_log::{KernelLog, matching};

/// How long one wait blocks: the longest a watcher takes to stop. Each wakeup is one driver
/// call, 5 a second, whatever the number of GPUs (one set holds them all).
const WAIT_MS: u32 = 200;
/// How long the kernel's NVRM line may trail NVML's event.
const KERNEL_LINE_WAIT: Duration = Duration::from_millis(50);

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
            // A failed registration frees the set: a new one for the GPUs after it.
            set = match d.register_events(EventTypes::CRITICAL_XID_ERROR, set) {
                Ok(s) => {
                    watched[i] = true;
                    s
                }
                Err(_) => nvml.create_event_set().ok()?,
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
        let timestamp_us = crate::now_us();
        let Some(XidError::Value(code)) = data.event_data else { continue };
        let Ok(gpu) = data.device.index() else { continue };
        let bus = gpus.iter().find(|g| g.0 == gpu).and_then(|g| g.1.as_deref());
        let mut xid = Xid { gpu, xid: code, timestamp_us, pids: Vec::new(), text: None };
        if let Some(k) = kernel.as_mut() {
            let mut lines = k.xid_lines();
            if matching(&lines, code, bus).next().is_none() {
                std::thread::sleep(KERNEL_LINE_WAIT);
                lines.extend(k.xid_lines());
            }
            for l in matching(&lines, code, bus) {
                xid.pids.extend(l.pid.filter(|p| !xid.pids.contains(p)));
                xid.text.get_or_insert_with(|| l.text.clone());
            }
        }
        if tx.send(xid).is_err() {
            break;
        }
    }
    let _ = set.release_events();
}
