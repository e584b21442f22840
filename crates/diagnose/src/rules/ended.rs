//! How the job ended when it did not end by itself: a GPU that fell off the bus, or the kernel's
//! OOM killer taking the job for host memory.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::{Finding, FindingId, Run, Severity, round};

/// Host memory in use (total less `MemAvailable`) at or above this share just before a SIGKILL
/// reads as the OOM killer. The kernel kills only when reclaim cannot free enough, i.e. when
/// `MemAvailable` is near zero (its watermarks are well under 1 % of RAM on a training host).
/// The last sample is taken up to one interval before the kill, while the job still allocates,
/// so 5 % is left for that climb; a host that is merely busy keeps its page cache available and
/// stays below it.
const HOST_MEM_FULL_PCT: f64 = 95.0;
/// The kill frees the job's memory within milliseconds, so the peak is in the samples just
/// before the end; a sample after it already reads empty.
pub(super) const BEFORE_END_S: f64 = 5.0;

/// `gpu_lost`: a GPU stopped answering NVML (`GPU_IS_LOST`), from the samples that found it lost
/// or the recorder's `gpu_lost` event, whichever came first.
pub fn gpu_lost(run: &Run) -> Vec<Finding> {
    let mut lost: BTreeMap<u32, f64> = BTreeMap::new();
    let mut earliest = |gpu: u32, t: f64| {
        let e = lost.entry(gpu).or_insert(t);
        *e = e.min(t);
    };
    for g in &run.gpus {
        if let Some(t) = g.lost_at_s {
            earliest(g.gpu, t);
        }
    }
    for e in run.events.iter().filter(|e| e.0 == gpulse_model::EventKind::GpuLost) {
        if let Some(gpu) = e.2.get("gpu").and_then(Value::as_u64).and_then(|g| u32::try_from(g).ok()) {
            earliest(gpu, e.1);
        }
    }
    lost.into_iter()
        .map(|(gpu, at)| {
            let mut f = Finding::new(
                FindingId::GpuLost,
                Severity::Critical,
                format!("GPU {gpu}: fell off the bus {at:.0} s into the run; nothing it did after that was read"),
            )
            .on_gpu(gpu)
            .with("at_s", round(at, 1))
            .advise(&[
                "the GPU stopped answering the driver: any CUDA context on it is gone; `dmesg` or `journalctl -k` shows the Xid (79: fallen off the bus)",
                "it needs a reset (nvidia-smi -r) or a reboot; if it happens again, report the board to the cluster admins (power, cooling or a failing GPU)",
                "checkpoint often enough that a lost GPU costs minutes, not the run",
            ]);
            if let Some(last) = run
                .gpus
                .iter()
                .find(|g| g.gpu == gpu)
                .and_then(|g| g.t_s.iter().zip(&g.util_pct).rev().find(|(t, u)| **t < at && u.is_some()))
            {
                f = f.with("last_reading_s", round(*last.0, 1));
            }
            f
        })
        .collect()
}

/// `host_oom`: the kernel's OOM killer ended the job. The recording's `stop` event carries how the
/// job ended (`signal`) and, when the job's cgroup (v2) could be read at both ends, how many of
/// its processes the OOM killer took (`oom_kills`). That count covers every kind of OOM kill, so
/// when it was read and stayed 0, host memory alone does not say OOM.
pub fn host_oom(run: &Run) -> Vec<Finding> {
    let Some((_, end, stop)) = run.events.iter().rev().find(|e| e.0 == gpulse_model::EventKind::Stop) else {
        return Vec::new();
    };
    let signal = stop.get("signal").and_then(Value::as_str);
    let oom_kills = stop.get("oom_kills").and_then(Value::as_u64);
    let before_end: Vec<f64> =
        run.host_mem_used_pct.iter().filter(|x| x.0 <= *end && x.0 >= end - BEFORE_END_S).map(|x| x.1).collect();
    let mem_peak = before_end
        .into_iter()
        .reduce(f64::max)
        .or_else(|| run.host_mem_used_pct.iter().rfind(|x| x.0 <= *end).map(|x| x.1));
    let by_cgroup = oom_kills.is_some_and(|n| n > 0);
    let by_memory =
        oom_kills.is_none() && signal == Some("SIGKILL") && mem_peak.is_some_and(|m| m >= HOST_MEM_FULL_PCT);
    if !by_cgroup && !by_memory {
        return Vec::new();
    }
    let title = match (signal, oom_kills.filter(|n| *n > 0), mem_peak) {
        (Some(sig), Some(n), _) => format!(
            "Killed by {sig}: the kernel's OOM killer took {n} process(es) in the job's cgroup (host memory, not GPU memory)"
        ),
        (None, Some(n), _) => {
            format!("The kernel's OOM killer took {n} process(es) in the job's cgroup (host memory, not GPU memory)")
        }
        (_, None, Some(m)) => format!(
            "Killed by SIGKILL with host memory {m:.0}% full: the kernel's OOM killer (host memory, not GPU memory)"
        ),
        (_, None, None) => return Vec::new(),
    };
    let mut f = Finding::new(FindingId::HostOom, Severity::Critical, title)
        .with("at_s", round(*end, 1))
        .advise(&[
            "each DataLoader worker holds its own copy of what the Dataset keeps in Python objects: lower num_workers or prefetch_factor, or keep the data in numpy arrays or memory-mapped files",
            "load samples lazily in __getitem__ instead of the whole dataset up front; large CPU tensors and pinned buffers count too",
            "`dmesg` or `journalctl -k` shows the kernel's \"Out of memory: Killed process\" line with what each process held",
        ]);
    if let Some(sig) = signal {
        f = f.with("signal", sig);
    }
    if let Some(n) = oom_kills {
        f = f.with("oom_kills", n);
    }
    if let Some(m) = mem_peak {
        f = f.with("host_memory_used_pct", round(m, 1));
    }
    if oom_kills.is_none() {
        f = f.limit("the job's cgroup (v2 memory.events) could not be read: inferred from host memory nearly full when the job was killed");
    }
    vec![f]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::*;
    use super::*;

    /// A run that ended at 20 s with `stop` as its stop event, host memory `mem_pct` used at the
    /// samples of its last seconds (and 40 % earlier).
    fn ended(stop: Value, mem_pct: f64) -> Run {
        let mut host: Vec<(f64, f64)> = (0..17).map(|t| (f64::from(t), 40.0)).collect();
        host.extend([(17.0, mem_pct - 2.0), (18.0, mem_pct), (19.0, mem_pct - 1.0)]);
        Run { events: vec![(gpulse_model::EventKind::Stop, 20.0, stop)], host_mem_used_pct: host, ..run(Vec::new()) }
    }

    fn killed(extra: Value) -> Value {
        let mut v = json!({"reason": "command killed by SIGKILL", "signal": "SIGKILL", "exit_status": 137});
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        v
    }

    #[test]
    fn host_oom_from_the_cgroups_kill_count() {
        let f = host_oom(&ended(killed(json!({"oom_kills": 1})), 50.0));
        assert_eq!(ids(&f), ["host_oom"], "the kernel's own count, whatever host memory read");
        assert_eq!(
            (f[0].severity, &f[0].evidence["oom_kills"], &f[0].evidence["signal"]),
            (Severity::Critical, &json!(1), &json!("SIGKILL"))
        );
        assert!(f[0].limits.is_empty());
        // A worker taken while the job itself exited: still the OOM killer.
        let f =
            host_oom(&ended(json!({"reason": "command exited with status 1", "exit_status": 1, "oom_kills": 2}), 50.0));
        assert_eq!(ids(&f), ["host_oom"]);
        assert!(host_oom(&ended(killed(json!({"oom_kills": 0})), 50.0)).is_empty(), "no kill counted");
    }

    #[test]
    fn host_oom_from_a_sigkill_with_host_memory_95_percent_full() {
        assert!(host_oom(&ended(killed(json!({})), 94.9)).is_empty(), "just below");
        let f = host_oom(&ended(killed(json!({})), 95.0));
        assert_eq!(ids(&f), ["host_oom"], "at the threshold");
        assert_eq!(f[0].evidence["host_memory_used_pct"], 95.0, "the peak of the last seconds");
        assert!(f[0].limits.iter().any(|l| l.contains("memory.events")), "{:?}", f[0].limits);
        // The count was read and stayed 0: the kernel says no OOM kill, whatever memory read.
        assert!(host_oom(&ended(killed(json!({"oom_kills": 0})), 99.0)).is_empty());
        // Full memory without a SIGKILL is not a kill.
        assert!(host_oom(&ended(json!({"reason": "command exited with status 1", "exit_status": 1}), 99.0)).is_empty());
        // Memory full long before the end, freed since: not evidence at the end.
        let mut r = ended(killed(json!({})), 40.0);
        r.host_mem_used_pct[5].1 = 99.0;
        assert!(host_oom(&r).is_empty());
    }

    #[test]
    fn gpu_lost_from_the_samples_or_the_event_whichever_is_first() {
        let mut g = steady(1, 90.0, 10);
        g.lost_at_s = Some(6.0);
        for u in &mut g.util_pct[6..] {
            *u = None;
        }
        let f = gpu_lost(&run(vec![steady(0, 90.0, 10), g.clone()]));
        assert_eq!(ids(&f), ["gpu_lost"], "only the GPU that was lost");
        assert_eq!((f[0].severity, f[0].gpu, &f[0].evidence["at_s"]), (Severity::Critical, Some(1), &json!(6.0)));
        assert_eq!(f[0].evidence["last_reading_s"], 5.0);
        // The recorder's event, earlier than any sample that still held the GPU's listing.
        let r = Run { events: vec![(gpulse_model::EventKind::GpuLost, 5.5, json!({"gpu": 1}))], ..run(vec![g]) };
        assert_eq!(gpu_lost(&r)[0].evidence["at_s"], 5.5);
        assert!(gpu_lost(&run(vec![steady(0, 90.0, 10)])).is_empty(), "a GPU that answered throughout");
    }
}
