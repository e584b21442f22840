//! Which sampled process is what: the job's main processes as their samples show them, its ranks,
//! the process whose main thread the ledger reads, and when that thread trained.

use std::collections::HashMap;
use std::sync::Arc;

use gpulse_model::{ProcessRole, Rank, Stacks};

use crate::Run;
use crate::main_thread::Domain;

/// The sampled processes as their samples show them: the sampler tells a role from a first
/// stack, which may be still importing (`mp.spawn`'s parent before its `join`, multiprocessing's
/// resource tracker). A main process whose samples mostly run a helper's frames is no process of
/// the job: it and its samples go; one whose samples mostly run a worker's loop is a worker.
pub(crate) fn settled(mut st: Stacks) -> Stacks {
    let mut votes: HashMap<u32, [usize; 3]> = HashMap::new();
    let mut by_stack: HashMap<u32, Option<ProcessRole>> = HashMap::new();
    for s in &st.samples {
        let role = *by_stack.entry(s.stack).or_insert_with(|| {
            let frames: Vec<&gpulse_model::PyFrame> = st.frames_of(s.stack).collect();
            gpulse_model::role_of(frames.iter().map(|f| (f.file.as_str(), f.function.as_str())))
        });
        let v = votes.entry(s.pid).or_default();
        v[match role {
            Some(ProcessRole::Main) => 0,
            Some(ProcessRole::Worker) => 1,
            None => 2,
        }] += 1;
    }
    let mut gone = Vec::new();
    for p in st.processes.iter_mut().filter(|p| p.role == ProcessRole::Main) {
        let Some(&[main, worker, helper]) = votes.get(&p.pid) else { continue };
        if 2 * helper > main + worker + helper {
            gone.push(p.pid);
        } else if 2 * worker > main + worker + helper {
            p.role = ProcessRole::Worker;
        }
    }
    if !gone.is_empty() {
        st.processes.retain(|p| !gone.contains(&p.pid));
        st.samples.retain(|s| !gone.contains(&s.pid));
    }
    st
}

/// When the main thread trained, seconds: from the loop's entry (see below) to its last sample in
/// a backward pass or an optimizer step. An unmarked loop ran at least that long, whatever the GPU's polls say (a
/// second's poll finds the GPU's busy stretch up to a second late, and loses its end as well).
pub(crate) fn training_s(run: &Run) -> Option<[f64; 2]> {
    let pid = main_pid(run)?;
    run.memo.get(&run.stacks, u64::from(pid), || Training(training_of(run, pid))).0
}

/// A process's [`training_s`], kept in the run's memo.
struct Training(Option<[f64; 2]>);

fn training_of(run: &Run, pid: u32) -> Option<[f64; 2]> {
    let st = &run.stacks;
    let shared = crate::main_thread::classifier::shared(run);
    let mut classifier = shared.lock().unwrap_or_else(|e| e.into_inner());
    let mine: Vec<&gpulse_model::ThreadSample> =
        samples_of(run, pid).iter().map(|i| &st.samples[*i as usize]).collect();
    // Under the job's own line: a stack read short (a class body of torch's autograd run by an
    // import, its importer's frames missing) is no training.
    let training: Vec<bool> = mine
        .iter()
        .map(|s| {
            matches!(classifier.domain(st, s.stack), Some(Domain::Backward | Domain::Optimizer))
                && st.frames_of(s.stack).any(|f| crate::main_thread::classify::own_code(&f.file))
        })
        .collect();
    let first = training.iter().position(|t| *t)?;
    let last = training.iter().rposition(|t| *t).unwrap_or(first);
    // Its first steps ran before the GPU's first busy stretch too, while the first kernels loaded.
    let keys: Vec<_> = mine.iter().map(|s| loop_key(st, s.stack, classifier.place(st, s.stack).site)).collect();
    let entry = loop_entry(&keys, first);
    // And it ended at the last of the samples after its last backward pass whose frames it ran
    // (the `.item()` and `gc.collect()` of its last steps), not at shutdown's.
    let reversed: Vec<_> = keys[entry..].iter().rev().copied().collect();
    let exit = keys.len() - 1 - loop_entry(&reversed, keys.len() - 1 - last);
    let t = |us: i64| us.saturating_sub(run.start_us) as f64 / 1e6;
    Some([t(mine[entry].t_us), t(mine[exit].t_us)])
}

/// Where a loop began, given each sample's key in time order (its innermost frame and the job's
/// own line it is charged to; `None` where it has none) and its first sample of training work
/// (`first`): the earliest sample before it whose key comes again after it, passing at most
/// [`ENTRY_GAP`] samples in a row whose keys do not. A step mostly outside torch (a CPU op,
/// `gc.collect()`) shows its first backward pass late, the later the slower the sampler read it,
/// while setting up (imports, building the model) never comes again: the job's own line tells an
/// import in the loop from start-up's, whose innermost frames are the same.
pub(crate) fn loop_entry<K: Eq + std::hash::Hash>(keys: &[Option<K>], first: usize) -> usize {
    let again: std::collections::HashSet<&K> = keys[first..].iter().flatten().collect();
    let (mut entry, mut gap) = (first, 0);
    for i in (0..first).rev() {
        if keys[i].as_ref().is_some_and(|k| again.contains(k)) {
            (entry, gap) = (i, 0);
        } else if gap == ENTRY_GAP {
            break;
        } else {
            gap += 1;
        }
    }
    entry
}

/// A sample's key for [`loop_entry`]: its stack's innermost frame and the job's own line it is
/// charged to (`site`).
pub(crate) fn loop_key(st: &gpulse_model::Stacks, stack: u32, site: Option<u32>) -> Option<(u32, Option<u32>)> {
    Some((*st.stacks.get(stack as usize)?.last()?, site))
}

/// Samples in a row that a loop's first steps may hold without a frame seen again: the first
/// forward pass's lazy set-up (cuDNN's choice, autocast's cache).
const ENTRY_GAP: usize = 3;

/// The process whose main thread the ledger reads: a main process holding the GPU the ledger
/// reads (the loop's own, or the lowest rank, among several), else the loop's, else the lowest
/// rank, else the main process sampled most.
pub(crate) fn main_pid(run: &Run) -> Option<u32> {
    let st = &run.stacks;
    let mains: Vec<u32> = st.processes.iter().filter(|p| p.role == ProcessRole::Main).map(|p| p.pid).collect();
    let count = |pid: u32| samples_of(run, pid).len();
    let holders: Vec<u32> = super::primary(run).map_or_else(Vec::new, |g| {
        mains.iter().copied().filter(|pid| g.processes.iter().any(|l| l.iter().any(|p| p.pid == *pid))).collect()
    });
    let looped = run.steps.as_ref().filter(|s| s.ranks > 1).map(|s| s.pid).filter(|pid| mains.contains(pid));
    let ranks: Vec<u32> = ranked(run).into_iter().map(|(_, pid)| pid).collect();
    // Of the processes on the GPU the ledger reads: the one whose steps are the loop, else its
    // lowest rank, else the first; with none on it, the loop's, the lowest rank, the most sampled.
    let on_gpu = looped
        .filter(|p| holders.contains(p))
        .or_else(|| ranks.iter().copied().find(|p| holders.contains(p)))
        .or_else(|| holders.first().copied());
    on_gpu
        .or(looped)
        .or_else(|| ranks.first().copied())
        .or_else(|| mains.iter().copied().filter(|p| count(*p) > 0).max_by_key(|p| count(*p)))
}

/// The ranks of a run, worked out once.
pub(crate) fn ranked(run: &Run) -> Vec<(Rank, u32)> {
    run.ranks.get_or_init(|| ranked_in(&run.stacks)).clone()
}

/// The ranks among sampled processes: each main process that its environment names a rank, in
/// rank order; else the processes `torch.multiprocessing.spawn` started (its `_wrap` in their
/// stacks), which it starts in rank order, so in PID order barring a PID wrapping round. Where
/// two processes claim one rank (a restarted attempt, two jobs), the one sampled most is it.
pub(crate) fn ranked_in(st: &gpulse_model::Stacks) -> Vec<(Rank, u32)> {
    let mains = || st.processes.iter().filter(|p| p.role == ProcessRole::Main);
    let mut out: Vec<(Rank, u32)> = mains().filter_map(|p| Some((p.rank?, p.pid))).collect();
    if out.len() > 1 {
        let mut count: HashMap<u32, usize> = HashMap::new();
        for s in &st.samples {
            *count.entry(s.pid).or_default() += 1;
        }
        let n = |pid: &u32| count.get(pid).copied().unwrap_or(0);
        out.sort_by_key(|(r, pid)| (r.rank, std::cmp::Reverse(n(pid)), *pid));
        out.dedup_by_key(|(r, _)| r.rank);
        // One world: the size most ranks say.
        let world =
            out.iter().map(|r| r.0.world_size).max_by_key(|w| out.iter().filter(|r| r.0.world_size == *w).count());
        out.retain(|r| Some(r.0.world_size) == world);
    }
    // Lightning's shape: the script's own process is rank 0, and its environment says nothing
    // (Lightning sets it after the start); the others say ranks 1 to n − 1 of a world of n.
    let world = out.first().map(|r| r.0.world_size);
    let unranked: Vec<u32> = mains().filter(|p| p.rank.is_none()).map(|p| p.pid).collect();
    if let (Some(n), [pid]) = (world, unranked.as_slice())
        && out.len() + 1 == n as usize
        && out.iter().all(|r| r.0.world_size == n && r.0.rank != 0)
    {
        out.push((Rank { rank: 0, world_size: n, local_rank: Some(0), device: None }, *pid));
    }
    if out.len() < 2 {
        // The stacks through `_wrap` first (a few hundred), then the processes sampled in them.
        let wrapped: Vec<bool> = (0..st.stacks.len() as u32)
            .map(|id| {
                st.frames_of(id).any(|f| f.function == "_wrap" && f.file.ends_with("torch/multiprocessing/spawn.py"))
            })
            .collect();
        if !wrapped.contains(&true) {
            return out;
        }
        let spawned: std::collections::HashSet<u32> =
            st.samples.iter().filter(|s| wrapped.get(s.stack as usize) == Some(&true)).map(|s| s.pid).collect();
        let mut pids: Vec<u32> = mains().map(|p| p.pid).filter(|p| spawned.contains(p)).collect();
        pids.sort_unstable();
        let n = pids.len() as u32;
        if n >= 2 {
            out = (0..n)
                .zip(pids)
                .map(|(i, pid)| (Rank { rank: i, world_size: n, local_rank: Some(i), device: None }, pid))
                .collect();
        }
    }
    out.sort_by_key(|(r, pid)| (r.rank, *pid));
    out
}

/// Where each process's samples lie in [`Run::stacks`]'s, in time order: one pass over a day's
/// millions of samples, not one per process and question.
pub(crate) fn samples_of(run: &Run, pid: u32) -> Arc<Vec<u32>> {
    let all = run.memo.get(&run.stacks, 0, || {
        let mut by: HashMap<u32, Vec<u32>> = HashMap::new();
        for (i, s) in run.stacks.samples.iter().enumerate() {
            by.entry(s.pid).or_default().push(i as u32);
        }
        BySample(by.into_iter().map(|(pid, v)| (pid, Arc::new(v))).collect())
    });
    all.0.get(&pid).cloned().unwrap_or_default()
}

/// [`samples_of`] for every process, kept in the run's memo.
struct BySample(HashMap<u32, Arc<Vec<u32>>>);
