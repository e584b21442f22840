//! Where a loop's data loading spends its time: the line a measured data wait comes from.
//!
//! With workers, the wait is theirs: their most sampled line. Without (`num_workers=0`), the
//! main thread builds each batch itself under `next(it)`, inside `--instrument`'s timed wrapper:
//! the line below that wrapper where it spends most, the dataset's `__getitem__` or the collate.

use std::collections::HashMap;

use gpulse_model::{ProcessRole, Stacks};

use super::classify::{own_code, timed_by_gpulse};
use super::{Classifier, ThreadState, points, site_text};
use crate::Run;
use crate::run::covers;
use crate::run::main_pid;

/// Whose time the loader's line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Loader {
    /// The DataLoader's worker processes.
    Workers,
    /// The training process's main thread, loading in the loop (`num_workers=0`).
    MainThread,
}

/// The loader's most sampled line and what it was doing there.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LoaderSite {
    pub who: Loader,
    pub site: String,
    pub state: ThreadState,
    /// Of the loader's sampled time (the workers', or the main thread's inside the waits).
    pub share: f64,
}

impl LoaderSite {
    /// The evidence key its site goes under.
    pub fn evidence_key(&self) -> &'static str {
        match self.who {
            Loader::Workers => "worker_site",
            Loader::MainThread => "loader_site",
        }
    }

    /// The line to make faster, in words.
    pub fn advice(&self) -> String {
        let pct = (self.share * 100.0).round();
        match self.who {
            Loader::Workers => format!(
                "the DataLoader's workers spend {pct}% of their time {} at {}: that is the line to make faster",
                self.state.words(),
                self.site
            ),
            Loader::MainThread => format!(
                "the main thread builds each batch itself: {pct}% of the wait {} at {}: that is the line to make faster",
                self.state.words(),
                self.site
            ),
        }
    }
}

/// The workers' line where there are workers, else the main thread's own inside its data waits.
pub(crate) fn loader_site(run: &Run) -> Option<LoaderSite> {
    workers_site(run).or_else(|| main_thread_site(run))
}

/// The most sampled (site, state) of `counts`, and its share of their sum.
fn most(counts: HashMap<(String, ThreadState), f64>) -> Option<((String, ThreadState), f64)> {
    let total: f64 = counts.values().sum();
    let best = counts.into_iter().max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))?;
    (total > 0.0).then(|| (best.0, best.1 / total))
}

/// The DataLoader workers' most sampled site and its state, over all their samples.
pub(crate) fn workers_site(run: &Run) -> Option<LoaderSite> {
    let st = &run.stacks;
    let workers: Vec<u32> = st.processes.iter().filter(|p| p.role == ProcessRole::Worker).map(|p| p.pid).collect();
    let mut classifier = Classifier::default();
    let mut by: HashMap<(u32, ThreadState), f64> = HashMap::new();
    // Each worker's GIL votes, as its profile reads them: a worker in PIL or torch's CPU ops
    // with the GIL released runs native code, not Python.
    let mut of: HashMap<u32, Vec<&gpulse_model::ThreadSample>> = HashMap::new();
    for s in st.samples.iter().filter(|s| workers.contains(&s.pid)) {
        of.entry(s.pid).or_default().push(s);
    }
    for (pid, mine) in of {
        let mut votes = super::NativeVotes::of(st.process(pid));
        mine.iter().for_each(|s| votes.add(s));
        for s in mine {
            let mut class = classifier.classify(st, s);
            votes.refine(s, &mut class);
            *by.entry((s.stack, class.state)).or_default() += 1.0;
        }
    }
    // By site: stacks that end on the same line of the workers' code are one site.
    let mut sites: HashMap<(String, ThreadState), f64> = HashMap::new();
    for ((stack, state), n) in by {
        if let Some(site) = site_text(st, stack) {
            *sites.entry((site, state)).or_default() += n;
        }
    }
    let ((site, state), share) = most(sites)?;
    Some(LoaderSite { who: Loader::Workers, site, state, share })
}

/// The frame below `--instrument`'s timed wrapper that a sample is charged to: the innermost of
/// the job's own code under it, else the innermost frame; `None` outside the wrapper.
fn under_wrapper(st: &Stacks, stack: u32) -> Option<String> {
    let frames: Vec<_> = st.frames_of(stack).collect();
    let at = frames.iter().position(|f| timed_by_gpulse(f))?;
    let below = &frames[at + 1..];
    let f = below.iter().rev().find(|f| own_code(&f.file)).or(below.last())?;
    Some(f.site())
}

/// The main thread's most sampled line inside its measured data waits, loading the batch itself.
fn main_thread_site(run: &Run) -> Option<LoaderSite> {
    if run.data_waits_s.is_empty() {
        return None;
    }
    let pid = main_pid(run)?;
    let waits = crate::run::merged(run.data_waits_s.clone(), f64::NEG_INFINITY, f64::INFINITY);
    let mut sites: HashMap<(String, ThreadState), f64> = HashMap::new();
    let mut cache: HashMap<u32, Option<String>> = HashMap::new();
    // Waiting on workers' queues is not building the batch: that time is the workers' own.
    for p in points(run, pid).iter().filter(|p| covers(&waits, p.t_s) && p.class.state != ThreadState::Ipc) {
        let site = cache.entry(p.stack).or_insert_with(|| under_wrapper(&run.stacks, p.stack));
        if let Some(site) = site {
            *sites.entry((site.clone(), p.class.state)).or_default() += p.dur_s;
        }
    }
    let ((site, state), share) = most(sites)?;
    Some(LoaderSite { who: Loader::MainThread, site, state, share })
}
