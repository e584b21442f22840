//! Processes that hold GPU memory and do nothing, and processes outside the job.

use std::collections::HashMap;

use gpulse_model::GpuProcessClass;

use super::GIB;
use crate::{Finding, Run, Severity, round};

/// Memory worth reclaiming: smaller contexts are CUDA's own overhead.
const MIN_HELD_GIB: f64 = 1.0;

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
        let mut seen: HashMap<u32, Held> = HashMap::new();
        for l in &listings {
            for p in *l {
                let m = p.used_memory_bytes.map_or(0.0, |b| b as f64);
                let e =
                    seen.entry(p.pid).or_insert_with(|| Held { name: p.name.clone(), lo: f64::MAX, ..Held::default() });
                e.count += 1;
                e.lo = e.lo.min(m);
                e.hi = e.hi.max(m);
                e.sm = e.sm.max(p.sm_util_pct);
                e.class = e.class.or(p.class);
            }
        }
        for (pid, Held { count, lo, hi, sm, class, name }) in seen {
            if hi < MIN_HELD_GIB * GIB {
                continue;
            }
            let always = count as f64 >= 0.9 * n;
            let flat = hi - lo <= 0.02 * hi;
            let idle = sm.is_none_or(|s| s <= 1);
            let foreign = class == Some(GpuProcessClass::Foreign);
            if !(foreign || (always && flat && idle)) {
                continue;
            }
            let (id, what) = if foreign { ("foreign_process", "outside the job") } else { ("idle_holder", "idle") };
            let mut f = Finding::new(id, Severity::Warning, format!("GPU {}: process {pid} holds {:.1} GiB {what}", g.gpu, hi / GIB))
                .with("gpu", g.gpu)
                .with("pid", pid)
                .with("held_gib", round(hi / GIB, 2))
                .with("present_share", round(count as f64 / n, 3))
                .advise(&[
                    "a forgotten notebook kernel or an old run holds this memory: end it, or in a notebook free it with del and torch.cuda.empty_cache()",
                    "on a shared GPU, the memory it holds is memory your job cannot use",
                ]);
            if let Some(name) = name {
                f = f.with("name", name);
            }
            if sm.is_none() {
                f = f.limit("per-process SM use unknown: judged idle because its memory never changed");
            }
            if class.is_none() {
                f = f.limit("cannot tell whether it belongs to your job: record with `gpulse record --pid PID`");
            }
            out.push(f);
        }
    }
    out
}
