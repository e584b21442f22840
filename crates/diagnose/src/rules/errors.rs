//! What the job said on stderr that ended it or will: NCCL timeouts and errors, a DataLoader
//! worker killed, an Xid from the driver. Each is the software's own word, so each is a finding
//! with what it means, whatever the samples show. (CUDA's out-of-memory is `oom`'s.)

use gpulse_model::EventKind;
use serde_json::Value;

use crate::{Finding, FindingId, Run, Severity, round};

/// What an Xid code means and whose it is, for the codes a training job meets, after NVIDIA's
/// Xid catalogue (docs.nvidia.com/deploy/xid-errors): its description and its resolution
/// (restart the application, or reset the GPU, or service the board).
pub fn xid_meaning(code: u64) -> (&'static str, &'static str) {
    match code {
        13 => (
            "a graphics engine exception: a kernel faulted (an illegal address or instruction)",
            "most often the job's own kernels (out-of-bounds indexing in custom CUDA or a Triton kernel); the GPU is fine: rerun with CUDA_LAUNCH_BLOCKING=1 and compute-sanitizer",
        ),
        31 => (
            "a GPU memory page fault (MMU fault): a kernel touched memory it does not own",
            "most often the job's own kernels (an illegal address, a use after free); the GPU is fine: rerun with CUDA_LAUNCH_BLOCKING=1 and compute-sanitizer",
        ),
        43 => (
            "the GPU stopped processing the job's channel: the job's context was killed after a fault",
            "the job's: it follows a fault in its own kernels (see the Xid before it) or the process being killed; the GPU is fine",
        ),
        48 => (
            "a double-bit (uncorrectable) ECC error in the GPU's memory",
            "the hardware's: the job's data may be corrupt; reset the GPU, and have the board checked if it repeats",
        ),
        94 => (
            "a contained uncorrectable ECC error: only the applications using that memory were stopped",
            "the hardware's: restart the job; reset the GPU when it is idle so the row is remapped",
        ),
        95 => (
            "an uncontained uncorrectable ECC error: every application on the GPU was stopped",
            "the hardware's: reset the GPU before any job runs on it again; have the board checked if it repeats",
        ),
        63 => (
            "a memory row was marked for remapping (ECC page retirement or row remapping recorded)",
            "the hardware's: the GPU needs a reset to apply the remap; jobs can run meanwhile",
        ),
        64 => (
            "a memory row could not be remapped (the remapping recording failed)",
            "the hardware's: reset the GPU; if the remap fails again the board needs service",
        ),
        79 => (
            "the GPU has fallen off the bus",
            "the hardware's (power, cooling, the board or its PCIe slot), or the driver's: reset the GPU or reboot the node, then check the system logs for PCIe errors",
        ),
        119 | 120 => (
            "the GPU's system processor (GSP) timed out or failed",
            "the driver's or the hardware's: reset the GPU; update the driver if it repeats",
        ),
        _ => ("a driver-reported GPU error", "look the code up in NVIDIA's Xid catalogue"),
    }
}

/// Whether an Xid is the job's own doing (a fault in its kernels) rather than the hardware's.
fn xid_is_the_jobs(code: u64) -> bool {
    matches!(code, 13 | 31 | 43)
}

pub fn findings(run: &Run) -> Vec<Finding> {
    let mut out = Vec::new();
    let of = |kind: EventKind| run.events.iter().filter(move |e| e.0 == kind).collect::<Vec<_>>();
    let text = |e: &(EventKind, f64, Value)| e.2.get("text").and_then(Value::as_str).unwrap_or("").to_owned();
    let timeouts = of(EventKind::NcclTimeout);
    if let Some(first) = timeouts.first() {
        out.push(
            Finding::new(
                FindingId::NcclTimeout,
                Severity::Critical,
                format!(
                    "NCCL's watchdog timed out a collective {:.0} s into the run: one rank waited for the others until it gave up",
                    first.1
                ),
            )
            .with("at_s", round(first.1, 1))
            .with("count", timeouts.len() as u64)
            .with("text", text(first))
            .advise(&[
                "a rank stopped reaching the collective: it crashed, hung (a deadlock, a rank-dependent code path, uneven data so one rank has an extra batch), or sat in slow I/O; the first rank to log an error, not this one, is the cause",
                "DistributedSampler(drop_last=True) so every rank runs the same number of steps; no collective inside a branch only some ranks take",
                "TORCH_NCCL_DUMP_ON_TIMEOUT=1 and NCCL_DEBUG=INFO show which rank and which collective; raise the timeout (init_process_group(timeout=...)) only for known long pauses such as checkpointing",
            ]),
        );
    }
    let errors = of(EventKind::NcclError);
    if let Some(first) = errors.first() {
        out.push(
            Finding::new(FindingId::NcclError, Severity::Critical, format!("NCCL failed {:.0} s into the run: {}", first.1, short(&text(first))))
                .with("at_s", round(first.1, 1))
                .with("count", errors.len() as u64)
                .advise(&[
                    "NCCL_DEBUG=INFO names the failing transport and peer; `unhandled cuda error` is a CUDA fault on one rank (see its own error), `remote error` a peer that went away",
                    "check that every rank sees its GPU (CUDA_VISIBLE_DEVICES, torch.cuda.set_device(local_rank)) and that the network interfaces NCCL picked are up (NCCL_SOCKET_IFNAME)",
                ]),
        );
    }
    let killed = of(EventKind::DataloaderKilled);
    if let Some(first) = killed.first() {
        let signal = first.2.get("signal").and_then(Value::as_str).unwrap_or("a signal").to_owned();
        let mut f = Finding::new(
            FindingId::DataloaderKilled,
            Severity::Critical,
            format!("A DataLoader worker was killed by {signal} {:.0} s into the run", first.1),
        )
        .with("at_s", round(first.1, 1))
        .with("count", killed.len() as u64)
        .with("text", text(first));
        if let Some(pid) = first.2.get("pid").and_then(Value::as_u64).and_then(|p| u32::try_from(p).ok()) {
            f = f.of_pid(pid);
        }
        f = if signal.contains("Killed") {
            f.advise(&[
                "SIGKILL to a worker is almost always the kernel's OOM killer: the workers' memory (see worker_memory) or the host's ran out; `dmesg` names it",
                "fewer workers, or a Dataset that holds its data in numpy arrays or memory-mapped files so the workers share it",
            ])
        } else {
            f.advise(&["a worker crashed: run with num_workers=0 to see the exception in the training process"])
        };
        if signal.contains("Bus error") {
            f = f.advise(&["a bus error in a worker is shared memory running out: the container's /dev/shm is too small (docker run --shm-size, or a larger emptyDir in Kubernetes)"]);
        }
        out.push(f);
    }
    // NVML's events and the job's stderr may tell of the same Xid: one finding per code and GPU.
    let mut seen: Vec<(u64, Option<u64>)> = Vec::new();
    for e in of(EventKind::Xid) {
        let Some(code) = e.2.get("xid").and_then(Value::as_u64) else { continue };
        let gpu = e.2.get("gpu").and_then(Value::as_u64);
        if seen.iter().any(|s| s.0 == code && (s.1 == gpu || s.1.is_none() || gpu.is_none())) {
            continue;
        }
        seen.push((code, gpu));
        let count = of(EventKind::Xid).iter().filter(|x| x.2.get("xid").and_then(Value::as_u64) == Some(code)).count();
        let (what, whose) = xid_meaning(code);
        let on = gpu.map_or_else(String::new, |g| format!(" on GPU {g}"));
        let mut f = Finding::new(
            FindingId::Xid,
            Severity::Critical,
            format!("Xid {code}{on} {:.0} s into the run: {what}", e.1),
        )
        .with("xid", code)
        .with("at_s", round(e.1, 1))
        .with("count", count as u64)
        .with("fault", if xid_is_the_jobs(code) { "job" } else { "hardware" })
        .with("text", text(e));
        if let Some(g) = gpu {
            f = f.on_gpu(g as u32);
        }
        if let Some(pids) = e.2.get("pids").filter(|p| p.as_array().is_some_and(|a| !a.is_empty())) {
            f = f.with("pids", pids.clone());
        }
        if let Some(source) = e.2.get("source").and_then(Value::as_str) {
            f = f.with("source", source);
        }
        out.push(f.advise(&[
            whose,
            "`nvidia-smi -q` shows the GPU's state; `dmesg` or `journalctl -k` the driver's whole message",
        ]));
    }
    out
}

/// A message cut to one readable clause, between words.
fn short(text: &str) -> String {
    match gpulse_model::run::cut_text(text, 160) {
        (t, true) => format!("{t}…"),
        (t, false) => t,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: EventKind, t: f64, payload: Value) -> (EventKind, f64, Value) {
        (kind, t, payload)
    }

    #[test]
    fn each_error_the_job_printed_is_named_with_what_it_means() {
        let mut r = Run::default();
        assert!(findings(&r).is_empty());
        r.events = vec![
            event(
                EventKind::NcclTimeout,
                612.0,
                serde_json::json!({"text": "Watchdog caught collective operation timeout"}),
            ),
            event(
                EventKind::NcclTimeout,
                612.5,
                serde_json::json!({"text": "Watchdog caught collective operation timeout"}),
            ),
            event(
                EventKind::DataloaderKilled,
                40.0,
                serde_json::json!({"text": "DataLoader worker (pid 42) is killed by signal: Killed.", "pid": 42, "signal": "Killed"}),
            ),
            event(EventKind::Xid, 5.0, serde_json::json!({"text": "NVRM: Xid (PCI:0000:3b:00): 79, pid=1", "xid": 79})),
        ];
        let f = findings(&r);
        let ids: Vec<&str> = f.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["nccl_timeout", "dataloader_killed", "xid"]);
        assert!(f.iter().all(|f| f.severity == Severity::Critical));
        assert_eq!(f[0].evidence["count"], 2);
        assert!(f[0].title.contains("612 s"), "{}", f[0].title);
        assert!(f[1].advice[0].contains("OOM killer"), "{:?}", f[1].advice);
        assert!(f[2].title.contains("fallen off the bus") && f[2].advice[0].contains("hardware"), "{f:?}");
    }

    #[test]
    fn a_job_that_died_of_an_nccl_timeout_says_so_first() {
        let timeout = serde_json::json!({"text": "Watchdog caught collective operation timeout"});
        let r = Run {
            gpus: vec![crate::rules::testing::steady(0, 95.0, 30)],
            events: vec![event(EventKind::NcclTimeout, 25.0, timeout)],
            ..Run::default()
        };
        let all = crate::diagnose_run(&r);
        assert_eq!(all[0].id, FindingId::NcclTimeout);
        assert!(crate::summary(&all).unwrap().contains("NCCL's watchdog timed out"), "{:?}", crate::summary(&all));
    }
}
