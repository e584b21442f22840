//! `startup`: the time from the job's start to its first training step.

use crate::run::context_before;
use crate::{Finding, FindingId, Run, Severity, round};

/// Below this, start-up is the interpreter, `import torch` and a CUDA context (a few seconds
/// each at most): nothing a script can cut.
const MIN_STARTUP_S: f64 = 5.0;
/// A tenth of the run before the first step is worth knowing. Start-up is a fixed cost, not a
/// bottleneck of the steady state, so it is a warning only where it is both a quarter of the run
/// and a minute or more: a cost paid again at every restart and by every job of a sweep.
const SHARE_INFO: f64 = 0.10;
const SHARE_WARNING: f64 = 0.25;
const WARNING_S: f64 = 60.0;
pub fn findings(run: &Run) -> Vec<Finding> {
    let Some(steps) = &run.steps else { return Vec::new() };
    let first_step_s = steps.window_s[0];
    let end_s = run.gpus.iter().filter_map(|g| g.t_s.last().copied()).fold(steps.window_s[1], f64::max);
    let share = first_step_s / end_s.max(1e-9);
    if first_step_s < MIN_STARTUP_S || share < SHARE_INFO {
        return Vec::new();
    }
    let severity = if share >= SHARE_WARNING && first_step_s >= WARNING_S { Severity::Warning } else { Severity::Info };
    let context = context_before(run, first_step_s);
    // What the main thread did before the first step, where it was sampled: the split says
    // what the generic advice can only list.
    let parts = crate::main_thread::startup::split(run, first_step_s);
    let mut f = Finding::new(
        FindingId::Startup,
        severity,
        format!("The first step ended {first_step_s:.1} s into the run: {{wall}} of it before training"),
    )
    .over([0.0, first_step_s])
    .with("first_step_s", round(first_step_s, 1))
    .with("run_s", round(end_s, 1))
    .costs(share, "time_before_first_step: seconds to the first step's end over the whole run");
    if let Some(top) = parts.first() {
        let at = top.site.as_deref().map(|s| format!(" at {s}")).unwrap_or_default();
        f.title += &format!("; mostly {} ({:.0}%{at})", top.doing(), 100.0 * top.share);
        f = f.with("startup_split", serde_json::to_value(&parts).unwrap_or_default());
        if let Some(c) = context {
            f = f
                .with("before_cuda_context_s", round(c, 1))
                .with("cuda_context_to_first_step_s", round(first_step_s - c, 1));
        }
        // Each activity of a quarter of the start-up or more, largest first.
        for p in parts.iter().filter(|p| p.share >= 0.25 || std::ptr::eq(*p, top)) {
            f = f.advise(&[p.activity.advice()]);
        }
        return vec![f];
    }
    match context {
        Some(c) => {
            f = f
                .with("before_cuda_context_s", round(c, 1))
                .with("cuda_context_to_first_step_s", round(first_step_s - c, 1));
            if c >= first_step_s - c {
                f = f.advise(&[
                    "most of it comes before the GPU is touched: process start, imports and building the dataset; `python -X importtime` shows slow imports",
                ]);
                // A dataset to load lazily only where the run built one.
                if super::feeding::dataloader_seen(run) {
                    f = f.advise(&[
                        "load or index the dataset lazily (in __getitem__, or memory-mapped) and cache preprocessing on disk instead of redoing it at each start",
                    ]);
                }
            } else {
                // Only what the recording saw: torch.compile's workers in the tree, DataLoader
                // workers starting before the first batch.
                let compiled = run.compile_workers_s.filter(|w| w[0] <= first_step_s);
                match compiled {
                    Some(w) => {
                        let seen_s = w[1].min(first_step_s) - w[0];
                        f.title += &format!(
                            "; torch.compile was compiling from {:.1} s to {:.1} s",
                            w[0],
                            w[1].min(first_step_s)
                        );
                        f = f.with("compile_workers_s", round(seen_s, 1)).advise(&[
                            "torch.compile compiled before the first step: keep its caches between runs (TORCHINDUCTOR_FX_GRAPH_CACHE=1, TORCHINDUCTOR_CACHE_DIR on persistent disk), compile only the hot module, or mode=\"default\" rather than max-autotune",
                        ]);
                    }
                    None => {
                        f = f.advise(&[
                            "most of it comes after the CUDA context, with no compiler seen: building or loading the model and moving it to the GPU, and the first batches",
                        ]);
                    }
                }
                if run.worker_count > 0 {
                    f = f.advise(&[
                        "DataLoader workers start before the first batch: a slow Dataset __init__ or worker_init_fn delays it",
                    ]);
                }
            }
        }
        None => {
            f = f
                .advise(&[
                    "time the start: imports (`python -X importtime`), dataset construction, model build, torch.compile and the first batch",
                ])
                .limit("when the job first touched the GPU is unknown: start-up is not split");
        }
    }
    vec![f]
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::testing::*;
    use super::*;

    /// A 100 s run sampled each second whose first step ends at `first_s`; the job holds a
    /// context from `context_s`.
    fn started(first_s: f64, context_s: Option<usize>) -> Run {
        let mut g = steady(0, 90.0, 101);
        if let Some(c) = context_s {
            g.processes = (0..101).map(|i| Arc::new(if i >= c { vec![holder(7, 2.0)] } else { Vec::new() })).collect();
        }
        let mut r = run(vec![g]);
        r.steps = Some(crate::rules::testing::steps(7, 10, [first_s, 100.0]));
        r
    }

    #[test]
    fn startup_from_5_s_and_a_tenth_of_the_run_a_warning_from_a_quarter_and_a_minute() {
        assert!(findings(&started(9.9, None)).is_empty(), "under a tenth");
        let f = findings(&started(10.0, None));
        assert_eq!((ids(&f), f[0].severity, f[0].own_share()), (vec!["startup"], Severity::Info, Some(0.1)));
        assert!(f[0].limits.iter().any(|l| l.contains("not split")));
        assert_eq!(findings(&started(30.0, None))[0].severity, Severity::Info, "a quarter, under a minute");
        let long = |first_s: f64, end_s: f64| {
            let mut r = started(first_s, None);
            r.gpus[0].t_s = (0..101).map(|i| f64::from(i) * end_s / 100.0).collect();
            r.steps.as_mut().unwrap().window_s[1] = end_s;
            findings(&r)[0].severity
        };
        assert_eq!(long(60.0, 240.0), Severity::Warning, "a quarter and a minute");
        assert_eq!(long(59.9, 239.6), Severity::Info);
        assert_eq!(long(60.0, 240.1), Severity::Info, "under a quarter");
        let mut short = started(4.9, None);
        short.gpus[0].t_s.truncate(20);
        short.steps.as_mut().unwrap().window_s[1] = 19.0;
        assert!(findings(&short).is_empty(), "4.9 s is a quarter of 19 s, and still the interpreter's own");
    }

    #[test]
    fn startup_is_split_at_the_first_cuda_context() {
        let f = &findings(&started(30.0, Some(20)))[0];
        assert_eq!(
            (&f.evidence["before_cuda_context_s"], &f.evidence["cuda_context_to_first_step_s"]),
            (&serde_json::json!(20.0), &serde_json::json!(10.0))
        );
        assert!(f.advice[0].contains("before the GPU is touched"), "{:?}", f.advice);
        // After the context, compiler advice only where its workers were seen.
        let f = &findings(&started(30.0, Some(5)))[0];
        assert!(!f.advice.iter().any(|a| a.contains("torch.compile")), "{:?}", f.advice);
        let mut compiled = started(30.0, Some(5));
        compiled.compile_workers_s = Some([8.0, 26.0]);
        let f = &findings(&compiled)[0];
        assert!(f.title.contains("torch.compile was compiling from 8.0 s to 26.0 s"), "{}", f.title);
        assert!(f.advice.iter().any(|a| a.contains("TORCHINDUCTOR_FX_GRAPH_CACHE")), "{:?}", f.advice);
    }
}
