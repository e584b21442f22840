//! What the job said on stderr that ended it or will: NCCL timeouts and errors, a DataLoader
//! worker killed, an Xid from the driver. Each is the software's own word, so each is a finding
//! with what it means, whatever the samples show. (CUDA's out-of-memory is `oom`'s.)

use serde_json::Value;

use crate::{Finding, FindingId, Run, Severity, round};

/// What an Xid code means and whose it is, for the codes a training job meets.
fn xid_meaning(code: u64) -> (&'static str, &'static str) {
    match code {
        13 | 31 | 43 => (
            "an engine or MMU fault in a kernel: an illegal address, or a kernel killed",
            "most often the job's own kernels (out-of-bounds indexing in custom CUDA or a Triton kernel); rerun with CUDA_LAUNCH_BLOCKING=1 and compute-sanitizer",
        ),
        48 | 94 | 95 => (
            "an uncorrectable ECC memory error",
            "the hardware's: the GPU needs a reset, and the board attention if it repeats",
        ),
        63 | 64 => (
            "a row remapping of the GPU memory (pending or failed)",
            "the hardware's: the GPU needs a reset to apply it",
        ),
        79 => (
            "the GPU has fallen off the bus",
            "the hardware's (power, cooling, the board or its slot): it needs a reset or a reboot",
        ),
        119 | 120 => (
            "the GPU's system processor (GSP) timed out or failed",
            "the driver's or the hardware's: reset the GPU; update the driver if it repeats",
        ),
        _ => ("a driver-reported GPU error", "look the code up in NVIDIA's Xid catalog"),
    }
}

pub fn findings(run: &Run) -> Vec<Finding> {
    let mut out = Vec::new();
    let of = |kind: &str| run.events.iter().filter(move |e| e.0 == kind).collect::<Vec<_>>();
    let text = |e: &(String, f64, Value)| e.2.get("text").and_then(Value::as_str).unwrap_or("").to_owned();
    let timeouts = of("nccl_timeout");
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
    let errors = of("nccl_error");
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
    let killed = of("dataloader_killed");
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
        if let Some(pid) = first.2.get("pid") {
            f = f.with("pid", pid.clone());
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
    for e in of("xid") {
        let Some(code) = e.2.get("xid").and_then(Value::as_u64) else { continue };
        let (what, whose) = xid_meaning(code);
        out.push(
            Finding::new(FindingId::Xid, Severity::Critical, format!("Xid {code} {:.0} s into the run: {what}", e.1))
                .with("xid", code)
                .with("at_s", round(e.1, 1))
                .with("text", text(e))
                .advise(&[
                    whose,
                    "`nvidia-smi -q` shows the GPU's state; `dmesg` or `journalctl -k` the driver's whole message",
                ]),
        );
    }
    out
}

/// A message cut to one readable clause.
fn short(text: &str) -> String {
    let t: String = text.chars().take(160).collect();
    if text.chars().count() > 160 { format!("{t}…") } else { t }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, t: f64, payload: Value) -> (String, f64, Value) {
        (kind.to_owned(), t, payload)
    }

    #[test]
    fn each_error_the_job_printed_is_named_with_what_it_means() {
        let mut r = Run::default();
        assert!(findings(&r).is_empty());
        r.events = vec![
            event("nccl_timeout", 612.0, serde_json::json!({"text": "Watchdog caught collective operation timeout"})),
            event("nccl_timeout", 612.5, serde_json::json!({"text": "Watchdog caught collective operation timeout"})),
            event(
                "dataloader_killed",
                40.0,
                serde_json::json!({"text": "DataLoader worker (pid 42) is killed by signal: Killed.", "pid": 42, "signal": "Killed"}),
            ),
            event("xid", 5.0, serde_json::json!({"text": "NVRM: Xid (PCI:0000:3b:00): 79, pid=1", "xid": 79})),
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
            events: vec![event("nccl_timeout", 25.0, timeout)],
            ..Run::default()
        };
        let all = crate::diagnose_run(&r);
        assert_eq!(all[0].id, FindingId::NcclTimeout);
        assert!(crate::summary(&all).unwrap().contains("NCCL's watchdog timed out"), "{:?}", crate::summary(&all));
    }
}
