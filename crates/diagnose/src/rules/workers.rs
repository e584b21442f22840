//! `worker_memory`: DataLoader workers that copy what they read, one copy each.
//!
//! A forked worker shares its parent's pages until it writes them. Reading a Python object writes
//! its reference count, so a worker that walks a Dataset held as Python lists or dicts dirties
//! the pages under them and gets a private copy of each: with `num_workers` workers, up to
//! `num_workers` copies of the dataset (copy-on-access). Proportional set size counts a shared
//! page once over its sharers, so the workers' summed PSS rises only as they copy.

use crate::{Finding, FindingId, Run, Severity, round};

/// Growth worth reclaiming, as for a GPU memory holder: a GiB.
const GROWTH_BYTES: f64 = 1024.0 * 1024.0 * 1024.0;
/// Growth over less than this is workers starting up (imports, their first batch), not copying.
const MIN_SPAN_S: f64 = 10.0;
/// Host memory gone within this at the workers' pace is critical, as a GPU's forecast is.
const CRITICAL_S: f64 = 600.0;

pub fn findings(run: &Run) -> Vec<Finding> {
    let with_workers: Vec<&Held> = run.tree_pss.iter().filter(|x| x.workers > 0).collect();
    let (Some(first), Some(last)) = (with_workers.first(), with_workers.last()) else { return Vec::new() };
    let span = last.t_s - first.t_s;
    let grown = last.workers_bytes - first.workers_bytes;
    // Still rising over the last quarter: a copy in progress, whose pace says when the host runs
    // out. Growth that stopped is still memory each worker took, and a fresh set of workers takes
    // it again at each epoch.
    let quarter = last.t_s - span / 4.0;
    let at_quarter = with_workers.iter().find(|x| x.t_s >= quarter).map_or(first.workers_bytes, |x| x.workers_bytes);
    if last.workers_bytes - at_quarter < grown / 10.0 {
        return leveled(run, &with_workers);
    }
    if span < MIN_SPAN_S || grown < GROWTH_BYTES {
        return Vec::new();
    }
    let rate = grown / span;
    let gib = |b: f64| round(b / GIB, 2);
    let beside = beside(last);
    let mut f = growth(first, last, [first.t_s, last.t_s], format!(
        "grew {:.1} GiB in {span:.0} s (to {beside}): each copies the Python objects it reads",
        grown / GIB
    ))
    .with("growth_gib_per_min", round(rate * 60.0 / GIB, 2))
    .advise(&[
        "hold the dataset in numpy arrays, torch tensors or a memory-mapped file rather than Python lists and dicts: reading them writes no reference counts, so the workers share one copy",
        "or read each item from storage in __getitem__ instead of keeping the whole dataset in the parent before the workers fork",
        "fewer workers hold fewer copies, if the loader keeps up",
    ]);
    // Each worker copies at most what the training process holds: the growth still to come is
    // bounded, and the host runs out only if that bound exceeds what it has available.
    let ceiling = last.workers as f64 * last.main_rss_bytes;
    let to_come = (ceiling - last.workers_bytes).max(0.0);
    f = f.with("copies_at_most_gib", gib(ceiling));
    let available =
        run.host_mem_total_bytes.zip(run.host_mem_used_pct.last()).map(|(total, used)| total * (1.0 - used.1 / 100.0));
    if let Some(avail) = available {
        f = f.with("host_available_gib", gib(avail));
        if to_come >= avail {
            let oom_s = avail / rate;
            f = f.with("host_oom_in_s", round(oom_s, 0));
            if oom_s <= CRITICAL_S {
                f.severity = Severity::Critical;
            }
            f.title += &format!("; the host runs out of memory in about {oom_s:.0} s at this pace");
        } else {
            f.title += &format!("; at most {:.1} GiB more, which the host has", to_come / GIB);
        }
    }
    vec![f]
}

/// Growth of a GiB or more over 10 s or more that then stopped: named with its stretch and what
/// the workers hold now, without a forecast.
fn leveled(run: &Run, with_workers: &[&Held]) -> Vec<Finding> {
    let (first, last) = (with_workers[0], with_workers[with_workers.len() - 1]);
    let Some(peak) = with_workers.iter().max_by(|a, b| a.workers_bytes.total_cmp(&b.workers_bytes)) else {
        return Vec::new();
    };
    let grown = peak.workers_bytes - first.workers_bytes;
    // Where it reached nine tenths of its rise: the growth's own span, not the flat after it.
    let Some(top) = with_workers.iter().find(|x| x.workers_bytes - first.workers_bytes >= 0.9 * grown) else {
        return Vec::new();
    };
    let span = top.t_s - first.t_s;
    // Still held at the end (within a tenth of the rise): workers that exited gave it back.
    let held = last.workers_bytes - first.workers_bytes >= 0.9 * grown;
    if span < MIN_SPAN_S || grown < GROWTH_BYTES || !held {
        return Vec::new();
    }
    let epochs = if run.phases_s.is_empty() && !crate::rules::feeding::dataloader_seen(run) {
        ""
    } else {
        "; without persistent_workers=True, each epoch's new workers take it again"
    };
    let beside = beside(last);
    let mut f = growth(first, last, [first.t_s, top.t_s], format!(
        "grew {:.1} GiB in {span:.0} s, then held it ({beside}){epochs}",
        grown / GIB
    ))
    .with("leveled_at_s", round(top.t_s, 1))
    .advise(&[
        "hold the dataset in numpy arrays, torch tensors or a memory-mapped file rather than Python lists and dicts: reading them writes no reference counts, so the workers share one copy",
        "persistent_workers=True keeps the workers, and what they hold, across epochs instead of building it again",
        "fewer workers hold fewer copies, if the loader keeps up",
    ]);
    if super::feeding::persistent(run) {
        f.advice.retain(|a| !a.starts_with("persistent_workers=True"));
    }
    vec![f]
}

/// A sample of the workers' memory.
type Held = crate::run::TreePss;

/// What the workers hold now beside the training process, for a title.
fn beside(last: &Held) -> String {
    format!("{:.1} GiB beside the training process's {:.1} GiB", last.workers_bytes / GIB, last.main_bytes / GIB)
}

/// The finding of the workers' growth from `first` to `last` over `window`: "N DataLoader
/// workers' memory " then `what`.
fn growth(first: &Held, last: &Held, window: [f64; 2], what: String) -> Finding {
    let gib = |b: f64| round(b / GIB, 2);
    Finding::new(
        FindingId::WorkerMemory,
        Severity::Warning,
        format!("{} DataLoader workers' memory {what}", last.workers),
    )
    .over(window)
    .with("workers", last.workers as u64)
    .with("workers_pss_gib", vec![gib(first.workers_bytes), gib(last.workers_bytes)])
    .with("main_pss_gib", gib(last.main_bytes))
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

#[cfg(test)]
mod tests {
    use super::*;

    /// 8 workers, PSS read every 5 s over `secs`: the main process at 3 GiB, the workers' sum
    /// rising by `gib_per_s`.
    fn copying(secs: usize, gib_per_s: f64) -> Run {
        Run {
            // The training process holds 20 GiB: up to 160 GiB of copies, more than the host has.
            tree_pss: (0..=secs / 5)
                .map(|k| Held {
                    t_s: (k * 5) as f64,
                    main_bytes: 3.0 * GIB,
                    workers_bytes: 0.5 * GIB + gib_per_s * (k * 5) as f64 * GIB,
                    workers: 8,
                    main_rss_bytes: 20.0 * GIB,
                })
                .collect(),
            host_mem_total_bytes: Some(128.0 * GIB),
            host_mem_used_pct: vec![(secs as f64, 50.0)],
            ..Run::default()
        }
    }

    #[test]
    fn workers_copying_a_gib_or_more_while_still_rising() {
        assert!(findings(&copying(20, 0.049)).is_empty(), "0.98 GiB in 20 s");
        let f = findings(&copying(20, 0.65));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Critical, "64 GiB available at 0.65 GiB/s: 98 s");
        assert!(f[0].title.ends_with("the host runs out of memory in about 98 s at this pace"), "{}", f[0].title);
        assert!(f[0].title.contains("8 DataLoader workers' memory grew 13.0 GiB in 20 s"), "{}", f[0].title);
    }

    #[test]
    fn the_host_running_out_at_their_pace_is_critical_and_growth_that_stops_is_still_named() {
        // 64 GiB available at 0.1 GiB/s: 640 s, not critical; at 0.11 GiB/s: 582 s.
        assert_eq!(findings(&copying(60, 0.1))[0].severity, Severity::Warning);
        assert_eq!(findings(&copying(60, 0.11))[0].severity, Severity::Critical);
        // Grew 3 GiB in its first 10 s, then flat for 50 s: memory taken, named with its stretch
        // and no forecast.
        let mut r = copying(60, 0.0);
        for x in &mut r.tree_pss {
            x.workers_bytes += if x.t_s >= 10.0 { 3.0 * GIB } else { 0.3 * x.t_s * GIB };
        }
        let f = findings(&r);
        assert_eq!(f.len(), 1);
        assert!(f[0].title.contains("grew 3.0 GiB in 10 s, then held it"), "{}", f[0].title);
        assert_eq!((f[0].window_s, f[0].severity), (Some([0.0, 10.0]), Severity::Warning));
        assert!(f[0].evidence.get("host_oom_in_s").is_none());
        // The same over 5 s is workers starting.
        let mut r = copying(60, 0.0);
        for x in &mut r.tree_pss {
            x.workers_bytes += if x.t_s >= 5.0 { 3.0 * GIB } else { 0.6 * x.t_s * GIB };
        }
        assert!(findings(&r).is_empty());
        assert!(findings(&copying(5, 1.0)).is_empty(), "5 s is workers starting");
        // A training process of 2 GiB: 8 workers copy 16 GiB at most, which 64 GiB holds.
        let mut r = copying(20, 0.65);
        for x in &mut r.tree_pss {
            x.main_rss_bytes = 2.0 * GIB;
        }
        let f = &findings(&r)[0];
        assert_eq!(f.severity, Severity::Warning);
        assert!(f.title.ends_with("at most 2.5 GiB more, which the host has"), "{}", f.title);
    }
}
