//! Processes that hold GPU memory and do nothing, and processes outside the job.

use std::collections::BTreeMap;

use gpulse_model::GpuProcessClass;

use super::GIB;
use crate::{Finding, FindingId, Run, Severity, round};

/// Memory worth reclaiming: smaller contexts are CUDA's own overhead.
const MIN_HELD_GIB: f64 = 1.0;
/// A holder alone on a GPU that did nothing for this long, and the GPU's work only ever with
/// another process listed: the work was never its (as long as the diagnosis's shortest window).
const ALONE_IDLE_S: f64 = 10.0;

/// What one process held over the run.
#[derive(Default)]
struct Held {
    /// Listings it appeared in.
    count: usize,
    /// Least and most memory it held, bytes.
    lo: f64,
    hi: f64,
    sm: Option<u32>,
    class: Option<GpuProcessClass>,
    name: Option<String>,
}

pub fn findings(run: &Run) -> Vec<Finding> {
    let mut out = Vec::new();
    if !run.has_processes {
        return out;
    }
    for g in &run.gpus {
        let listings: Vec<&Vec<gpulse_model::ProcessSample>> = g.processes.iter().map(|p| &**p).collect();
        let n = listings.len() as f64;
        // By PID, so the findings come out in the same order every time.
        let mut seen: BTreeMap<u32, Held> = BTreeMap::new();
        for l in &listings {
            for p in *l {
                let e =
                    seen.entry(p.pid).or_insert_with(|| Held { name: p.name.clone(), lo: f64::MAX, ..Held::default() });
                e.count += 1;
                // A listing that cannot tell the memory says nothing of it.
                if let Some(m) = p.used_memory_bytes.map(|b| b as f64) {
                    e.lo = e.lo.min(m);
                    e.hi = e.hi.max(m);
                }
                e.sm = e.sm.max(p.sm_util_pct);
                e.class = e.class.or(p.class);
            }
        }
        let flat = |h: &Held| h.hi - h.lo <= 0.02 * h.hi;
        // Without per-process SM use, the GPU's own work must be someone else's: it did none, or
        // another process's memory moved while this one's stayed. A lone process with flat
        // memory on a busy GPU is a steady training, not an idle one.
        let gpu_idle = {
            let u: Vec<f64> = g.util_pct.iter().flatten().copied().collect();
            !u.is_empty() && u.iter().sum::<f64>() / u.len() as f64 <= 1.0
        };
        // A worker is listed through much of the window: a short probe's context growing from
        // nothing is not the GPU's work (a small training's may be under a GiB, and is).
        let moving: Vec<u32> =
            seen.iter().filter(|(_, h)| !flat(h) && h.count as f64 >= 0.5 * n).map(|(p, _)| *p).collect();
        // Each process's seconds alone on the GPU while it did nothing, and whether the GPU ever
        // worked with it alone (a sample covers the interval since the one before).
        let mut alone: BTreeMap<u32, (f64, bool)> = BTreeMap::new();
        for (i, l) in listings.iter().enumerate().skip(1) {
            let dt = g.t_s[i] - g.t_s[i - 1];
            let [p] = l.as_slice() else { continue };
            let Some(u) = g.util_pct[i] else { continue };
            let e = alone.entry(p.pid).or_default();
            if u <= 1.0 {
                e.0 += dt;
            } else {
                e.1 = true;
            }
        }
        for (&pid, h) in &seen {
            let Held { count, lo: _, hi, sm, class, ref name } = *h;
            if hi < MIN_HELD_GIB * GIB {
                continue;
            }
            let always = count as f64 >= 0.9 * n;
            let alone_idle = alone.get(&pid).is_some_and(|a| a.0 >= ALONE_IDLE_S && !a.1);
            let idle = match sm {
                Some(s) => s <= 1,
                None => gpu_idle || moving.iter().any(|&p| p != pid) || (alone_idle && seen.len() > 1),
            };
            let flat = flat(h);
            let foreign = class == Some(GpuProcessClass::Foreign);
            if !(foreign || (always && flat && idle)) {
                continue;
            }
            let (id, what) =
                if foreign { (FindingId::ForeignProcess, "outside the job") } else { (FindingId::IdleHolder, "idle") };
            let mut f = Finding::new(id, Severity::Warning, format!("GPU {}: process {pid} holds {:.1} GiB {what}", g.gpu, hi / GIB))
                .on_gpu(g.gpu)
                .with("pid", pid)
                .with("held_gib", round(hi / GIB, 2))
                .with("present_share", round(count as f64 / n, 3))
                .advise(&[
                    "a forgotten notebook kernel or an old run holds this memory: end it, or in a notebook free it with del and torch.cuda.empty_cache()",
                    "on a shared GPU, the memory it holds is memory your job cannot use",
                ]);
            if let Some(name) = name {
                f = f.with("name", name.clone());
            }
            match sm {
                Some(s) => f = f.with("sm_util_max_pct", s),
                None if gpu_idle => {
                    f = f.limit("per-process SM use unknown: judged idle because its memory never changed and the GPU did no work")
                }
                None if alone_idle && !moving.iter().any(|&p| p != pid) => {
                    f = f.limit(
                        "per-process SM use unknown: judged idle because the GPU did nothing while it was alone, and worked only beside another process",
                    )
                }
                None => {
                    f = f.limit(
                        "per-process SM use unknown: judged idle because its memory never changed while another process's moved with the GPU's work",
                    )
                }
            }
            if class.is_none() {
                f = f.limit("cannot tell whether it belongs to your job: record with `gpulse record --pid PID`");
            }
            out.push(f);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    /// 10 listings of GPU 0; process 9 holds `gib[i]` in listing i (absent where `None`), with SM
    /// use `sm` and class `class`.
    fn held(gib: &[Option<f64>], sm: Option<u32>, class: Option<GpuProcessClass>) -> Run {
        let mut g = steady(0, 90.0, gib.len());
        g.processes = gib
            .iter()
            .map(|m| {
                let mut l = vec![holder(1, 30.0)];
                if let Some(m) = m {
                    l.push(gpulse_model::ProcessSample { sm_util_pct: sm, class, ..holder(9, *m) });
                }
                std::sync::Arc::new(l)
            })
            .collect();
        run(vec![g])
    }

    fn flagged(r: &Run) -> Vec<&'static str> {
        findings(r).iter().filter(|f| f.evidence["pid"] == 9).map(|f| f.id.as_str()).collect()
    }

    #[test]
    fn an_idle_holder_holds_1_gib_in_nine_tenths_of_the_listings_without_changing() {
        assert_eq!(flagged(&held(&[Some(1.0); 10], Some(0), None)), ["idle_holder"], "1 GiB");
        assert!(flagged(&held(&[Some(0.999); 10], Some(0), None)).is_empty(), "under 1 GiB");
        let mut nine = [Some(4.0); 10];
        nine[0] = None;
        assert_eq!(flagged(&held(&nine, Some(0), None)), ["idle_holder"], "9 of 10");
        nine[1] = None;
        assert!(flagged(&held(&nine, Some(0), None)).is_empty(), "8 of 10");
    }

    #[test]
    fn idle_means_memory_within_2_percent_and_sm_at_most_1_percent() {
        let mut m = [Some(4.0); 10];
        m[3] = Some(4.0 * 0.98);
        assert_eq!(flagged(&held(&m, Some(1), None)), ["idle_holder"]);
        m[3] = Some(4.0 * 0.979);
        assert!(flagged(&held(&m, Some(1), None)).is_empty(), "its memory moved");
        assert!(flagged(&held(&[Some(4.0); 10], Some(2), None)).is_empty(), "it uses the SMs");
    }

    /// Without per-process SM use, a flat process is idle only where the GPU's work is someone
    /// else's: the GPU did none, or another process's memory moved.
    #[test]
    fn with_sm_use_unknown_the_gpus_work_must_be_anothers() {
        // Process 1 (30 GiB) and 9 (4 GiB) both flat on a GPU at 90 %: either could be the job.
        assert!(flagged(&held(&[Some(4.0); 10], None, None)).is_empty(), "a steady training is not idle");
        let lone = run(vec![with_processes(steady(0, 90.0, 10), vec![holder(9, 20.0)])]);
        assert!(flagged(&lone).is_empty(), "alone on a busy GPU");
        let quiet = run(vec![with_processes(steady(0, 0.0, 10), vec![holder(9, 20.0)])]);
        let f = findings(&quiet);
        assert!(f.iter().any(|f| f.evidence["pid"] == 9 && !f.limits.is_empty()), "an idle GPU, and said so: {f:?}");
        // Process 1 grows while 9 stays: the work is 1's.
        let mut r = held(&[Some(4.0); 10], None, None);
        for (i, l) in r.gpus[0].processes.iter_mut().enumerate() {
            let mut l2 = (**l).clone();
            l2[0] = holder(1, 10.0 + i as f64);
            *l = std::sync::Arc::new(l2);
        }
        assert_eq!(flagged(&r), ["idle_holder"]);
        // A probe's 500 MiB context, from nothing, in 2 listings of 10: the training stays busy.
        let mut r = run(vec![with_processes(steady(0, 90.0, 10), vec![holder(9, 20.0)])]);
        for (i, l) in r.gpus[0].processes.iter_mut().enumerate().take(2) {
            let mut l2 = (**l).clone();
            l2.push(holder(77, 0.25 * (i + 1) as f64));
            *l = std::sync::Arc::new(l2);
        }
        assert!(flagged(&r).is_empty(), "a probe is not the GPU's work");
        // A listing that could not tell a process's memory is no move of it.
        let mut r = held(&[Some(4.0); 10], None, None);
        let mut l2 = (*r.gpus[0].processes[3]).clone();
        l2[0].used_memory_bytes = None;
        r.gpus[0].processes[3] = std::sync::Arc::new(l2);
        assert!(flagged(&r).is_empty(), "process 1's unknown memory did not move");
    }

    /// From an nvidia-smi log: 30 GiB held with the GPU at 0 % for 26 s, then another process
    /// computing beside it for 14 s (under half the log), then idle again.
    #[test]
    fn a_holder_alone_on_an_idle_gpu_before_another_computes_is_idle() {
        let util: Vec<f64> = (0..60).map(|i| if (26..40).contains(&i) { 90.0 } else { 0.0 }).collect();
        let mut g = gpu(0, 1.0, &util);
        g.processes = (0..60)
            .map(|i| {
                let mut l = vec![holder(9, 30.0)];
                if (26..40).contains(&i) {
                    l.push(holder(10, 2.0 + 0.5 * f64::from(i - 26)));
                }
                std::sync::Arc::new(l)
            })
            .collect();
        let r = run(vec![g.clone()]);
        assert_eq!(flagged(&r), ["idle_holder"]);
        assert!(findings(&r)[0].limits[0].contains("while it was alone"), "{:?}", findings(&r)[0].limits);
        // The GPU worked once with the holder alone: the work may be its own.
        g.util_pct[50] = Some(60.0);
        assert!(flagged(&run(vec![g.clone()])).is_empty());
        // Alone and idle for under 10 s says nothing.
        g.util_pct[50] = Some(0.0);
        for i in 0..60 {
            if !(26..40).contains(&i) && i >= 9 {
                g.util_pct[i] = None;
            }
        }
        assert!(flagged(&run(vec![g])).is_empty());
    }

    #[test]
    fn holders_come_out_in_pid_order_every_time() {
        // Enough processes that a hash map's order would differ from run to run.
        let listing: Vec<_> = (0..40u32)
            .rev()
            .map(|i| gpulse_model::ProcessSample { sm_util_pct: Some(0), ..holder(1000 + i * 7919 % 977, 2.0) })
            .collect();
        let r = run(vec![with_processes(steady(0, 90.0, 10), listing)]);
        let pids: Vec<u64> = findings(&r).iter().map(|f| f.evidence["pid"].as_u64().unwrap()).collect();
        let mut sorted = pids.clone();
        sorted.sort_unstable();
        assert_eq!(pids.len(), 40);
        assert_eq!(pids, sorted);
    }

    #[test]
    fn a_foreign_process_holds_1_gib_outside_the_tree() {
        let mut m = [Some(1.0); 10];
        m[0] = Some(3.0);
        assert_eq!(
            flagged(&held(&m, Some(50), Some(GpuProcessClass::Foreign))),
            ["foreign_process"],
            "busy and growing, still foreign"
        );
        assert!(flagged(&held(&[Some(0.999); 10], Some(0), Some(GpuProcessClass::Foreign))).is_empty());
    }
}
