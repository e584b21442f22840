//! A distributed job seen whole: its ranks (the processes whose environment names them), each
//! rank's steps and main-thread states, and the rank the others wait for.
//!
//! Ranks meet in their collectives, so a slow rank shows as the others' time in them. The
//! samples of every rank are set side by side in time: at each moment the ranks inside a
//! collective wait for those outside it, and what a rank outside did while others waited is
//! what held them back. The time lost is the waiters' mean time in collectives less the
//! straggler's own, which is what every rank would gain per step if it matched them.

use std::collections::HashMap;

use serde::Serialize;

use crate::main_thread::{Domain, ThreadState, points, site_text};
use crate::run::ranked;
use crate::{Finding, FindingId, Run, Severity, round};

/// One rank as the run saw it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankRow {
    pub rank: u32,
    pub world_size: u32,
    pub pid: u32,
    /// The GPU it ran on: NVML's process list, else its environment's `LOCAL_RANK` (where any GPU
    /// was read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<u32>,
    /// From its own step marks (`gpulse.step()` or `--instrument`), where it sent them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_s: Option<f64>,
    /// Of its steps' time, waiting for its next batch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_wait_share: Option<f64>,
    /// Of its main thread's sampled time (within its steps, where it marked them), inside
    /// collectives: waiting for its peers, and for a core once they arrived.
    pub peer_wait_share: f64,
    /// Its main thread's largest state outside its collectives, with its share and site.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busiest: Option<ThreadState>,
    pub busiest_share: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busiest_site: Option<String>,
}

/// Every rank's row; empty for a job of fewer than two ranks seen.
pub fn rows(run: &Run) -> Vec<RankRow> {
    let ranks = ranked(run);
    if ranks.len() < 2 {
        return Vec::new();
    }
    ranks
        .iter()
        .map(|(r, pid)| {
            let steps =
                run.steps_by_pid.iter().find(|s| s.pid == *pid).or(run.steps.as_ref().filter(|s| s.pid == *pid));
            // Its steps where it marked them, else the run's loop: start-up's rendezvous is not
            // the loop's wait.
            let [lo, hi] = steps.or(run.steps.as_ref()).map_or([f64::MIN, f64::MAX], |s| s.window_s);
            let pts: Vec<_> = points(run, *pid).iter().copied().filter(|p| p.t_s >= lo && p.t_s <= hi).collect();
            let total: f64 = pts.iter().map(|p| p.dur_s).sum::<f64>().max(1e-9);
            let mut by: HashMap<ThreadState, (f64, HashMap<u32, f64>)> = HashMap::new();
            for p in pts.iter().filter(|p| !in_collective(&p.class)) {
                let e = by.entry(p.class.state).or_default();
                e.0 += p.dur_s;
                *e.1.entry(p.stack).or_default() += p.dur_s;
            }
            let peer: f64 = pts.iter().filter(|p| in_collective(&p.class)).map(|p| p.dur_s).sum();
            let busiest = by.iter().max_by(|a, b| a.1.0.total_cmp(&b.1.0).then(b.0.cmp(a.0)));
            let gpu = run
                .gpus
                .iter()
                .find(|g| g.processes.iter().any(|l| l.iter().any(|p| p.pid == *pid)))
                .map(|g| g.gpu)
                // The environment's guess only where GPUs were read at all.
                .or(r.device.filter(|_| !run.gpus.is_empty()));
            RankRow {
                rank: r.rank,
                world_size: r.world_size,
                pid: *pid,
                gpu,
                steps_per_s: steps.map(|s| round(s.per_s(), 2)),
                step_s: steps.map(|s| round(s.mean_step_s(), 4)),
                data_wait_share: steps.and_then(|s| s.data_wait_share()).map(|w| round(w, 3)),
                peer_wait_share: round(peer / total, 3),
                busiest: busiest.map(|b| *b.0),
                busiest_share: busiest.map_or(0.0, |b| round(b.1.0 / total, 3)),
                busiest_site: busiest.and_then(|b| top(&b.1.1)).and_then(|s| site_text(&run.stacks, s)),
            }
        })
        .collect()
}

/// Inside a collective: waiting for peers, and, on a loaded host, for a core once they arrived
/// (the wall time around the call, as the rank's own clock has it). The split-off wait for a
/// core grows with the host's load; leaving it out would shrink every rank's wait with it.
fn in_collective(c: &crate::main_thread::Class) -> bool {
    c.state == ThreadState::PeerWait || c.state == ThreadState::CoreWait && c.domain == Some(Domain::Collective)
}

fn top<K: Copy + Ord>(map: &HashMap<K, f64>) -> Option<K> {
    map.iter().max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(a.0))).map(|(k, _)| *k)
}

/// The rank the others wait for, and what it did meanwhile.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Straggler {
    pub rank: u32,
    pub pid: u32,
    /// The ranks that waited for it.
    pub waiters: Vec<u32>,
    /// Of the time other ranks spent in collectives, the part in which this rank was outside
    /// them.
    pub held_share: f64,
    /// What it did that the others did not: the state, its library and its line, and the
    /// seconds it spent there over the waiters' mean, over `window_s`.
    pub state: ThreadState,
    pub domain: Option<Domain>,
    pub site: Option<String>,
    pub extra_s: f64,
    /// The waiters' mean seconds in collectives, and the straggler's own, over `window_s`.
    pub waiters_wait_s: f64,
    pub own_wait_s: f64,
    pub window_s: [f64; 2],
}

impl Straggler {
    /// What every rank would gain over `window_s` if the straggler matched the others: the
    /// waiters' mean seconds in collectives less its own.
    pub fn lost_s(&self) -> f64 {
        (self.waiters_wait_s - self.own_wait_s).max(0.0)
    }
}

/// A rank's class at `t`: its last sample at or before `t` (its samples, not the parts the
/// clocks split off them, in time order; `i` of them lie at or before `t`), where the next
/// follows within half a second.
fn class_after(pts: &[crate::main_thread::Point], i: usize, t: f64) -> Option<crate::main_thread::Class> {
    let p = pts.get(i.checked_sub(1)?)?;
    let next = pts.get(i).map_or(p.t_s + p.dur_s, |n| n.t_s);
    (next - p.t_s <= MAX_GAP_S && t < next).then_some(p.class)
}

/// A gap in a rank's samples longer than this tells nothing of what it did between.
const MAX_GAP_S: f64 = 0.5;

/// Waits for peers under this share of every rank's time say nothing of a straggler.
const MIN_WAIT_SHARE: f64 = 0.05;
/// The straggler must be outside the collectives for most of the others' waits: else no one
/// rank holds them back.
const MIN_HELD_SHARE: f64 = 0.5;

/// The rank the others wait for in their collectives, where one does.
pub(crate) fn straggler(run: &Run) -> Option<Straggler> {
    let ranks = ranked(run);
    if ranks.len() < 2 {
        return None;
    }
    let all: Vec<(u32, u32, std::sync::Arc<Vec<crate::main_thread::Point>>)> =
        ranks.iter().map(|(r, pid)| (r.rank, *pid, points(run, *pid))).filter(|x| !x.2.is_empty()).collect();
    if all.len() < 2 {
        return None;
    }
    // Where every rank was sampled, within every rank's steps where they marked them.
    let steps = |pid: u32| run.steps_by_pid.iter().find(|s| s.pid == pid).or(run.steps.as_ref()).map(|s| s.window_s);
    let lo = all.iter().map(|x| steps(x.1).map_or(x.2[0].t_s, |w| w[0].max(x.2[0].t_s))).fold(f64::MIN, f64::max);
    let hi = all
        .iter()
        .map(|x| steps(x.1).map_or(x.2[x.2.len() - 1].t_s, |w| w[1].min(x.2[x.2.len() - 1].t_s)))
        .fold(f64::MAX, f64::min);
    if hi <= lo {
        return None;
    }
    let inside = |p: &&crate::main_thread::Point| p.t_s >= lo && p.t_s <= hi;
    let wait_s: Vec<f64> = all
        .iter()
        .map(|x| x.2.iter().filter(inside).filter(|p| in_collective(&p.class)).map(|p| p.dur_s).sum())
        .collect();
    let span = hi - lo;
    if wait_s.iter().all(|w| *w / span < MIN_WAIT_SHARE) {
        return None;
    }
    // Each rank's samples alone, to tell its state at a moment.
    let timelines: Vec<Vec<crate::main_thread::Point>> =
        all.iter().map(|x| x.2.iter().filter(|p| !p.split).copied().collect()).collect();
    // Each rank's time outside the collectives, weighed by the share of the others inside them
    // at that moment: the waits it held up.
    let mut held = vec![0.0; all.len()];
    for (i, (_, _, pts)) in all.iter().enumerate() {
        // Each other rank's place in its timeline, moved forward with `p` (the samples come in
        // time order; one that does not is looked up afresh).
        let mut at = vec![0usize; timelines.len()];
        let mut last_t = f64::MIN;
        for p in pts.iter().filter(inside).filter(|p| !in_collective(&p.class)) {
            for (j, q) in timelines.iter().enumerate() {
                if p.t_s < last_t {
                    at[j] = q.partition_point(|x| x.t_s <= p.t_s);
                } else {
                    while at[j] < q.len() && q[at[j]].t_s <= p.t_s {
                        at[j] += 1;
                    }
                }
            }
            last_t = p.t_s;
            let others = timelines.iter().enumerate().filter(|(j, _)| *j != i);
            let (waiting, seen) = others.fold((0usize, 0usize), |(w, n), (j, q)| match class_after(q, at[j], p.t_s) {
                Some(c) if in_collective(&c) => (w + 1, n + 1),
                Some(_) => (w, n + 1),
                None => (w, n),
            });
            if seen > 0 {
                held[i] += p.dur_s * waiting as f64 / seen as f64;
            }
        }
    }
    let sum: f64 = held.iter().sum();
    let (s, most) = held.iter().copied().enumerate().max_by(|a, b| a.1.total_cmp(&b.1))?;
    if sum <= 0.0 || most / sum < MIN_HELD_SHARE {
        return None;
    }
    // What it did that the others did not: the state, library and line where its time most
    // exceeds the waiters' mean. What it did at the moments they waited can be a part of the
    // step every rank runs (its GPU's work), begun late.
    let waiters: Vec<usize> = (0..all.len()).filter(|j| *j != s).collect();
    let mut sites: HashMap<u32, Option<String>> = HashMap::new();
    let mut profile = |i: usize| {
        let mut by_stack: HashMap<(ThreadState, Option<Domain>, u32), f64> = HashMap::new();
        for p in all[i].2.iter().filter(inside).filter(|p| !in_collective(&p.class)) {
            *by_stack.entry((p.class.state, p.class.domain, p.stack)).or_default() += p.dur_s;
        }
        // A site's text once per stack, not once per sample.
        let mut by: HashMap<(ThreadState, Option<Domain>, Option<String>), f64> = HashMap::new();
        for ((state, domain, stack), secs) in by_stack {
            let site = sites.entry(stack).or_insert_with(|| site_text(&run.stacks, stack)).clone();
            *by.entry((state, domain, site)).or_default() += secs;
        }
        by
    };
    let mut extra = profile(s);
    for j in &waiters {
        for (k, v) in profile(*j) {
            *extra.entry(k).or_default() -= v / waiters.len() as f64;
        }
    }
    let ((state, domain, site), extra_s) =
        extra.into_iter().max_by(|a, b| a.1.total_cmp(&b.1).then_with(|| b.0.cmp(&a.0)))?;
    let (rank, pid) = (&all[s].0, &all[s].1);
    Some(Straggler {
        rank: *rank,
        pid: *pid,
        waiters: waiters.iter().map(|j| all[*j].0).collect(),
        held_share: most / sum,
        state,
        domain,
        site,
        extra_s,
        waiters_wait_s: waiters.iter().map(|j| wait_s[*j]).sum::<f64>() / waiters.len() as f64,
        // Plus zero: a sum of nothing is -0.0, which would print as such.
        own_wait_s: wait_s[s].max(0.0) + 0.0,
        window_s: [lo, hi],
    })
}

/// Half the loop lost to one rank: fixing it would double every rank's steps/s.
const CRITICAL_LOOP_SHARE: f64 = 0.5;

/// The straggler's finding, in place of the findings of the time it explains: the waiting main
/// thread's `peer_wait` (the time it cost the others), or, where the ledger reads the
/// straggler itself, the finding of what it did meanwhile (the same time, seen from its side).
pub(crate) fn findings(run: &Run, ledger: &mut crate::Ledger, out: &mut Vec<Finding>) {
    let Some(s) = straggler(run) else { return };
    let lost_s = s.lost_s();
    let span = s.window_s[1] - s.window_s[0];
    if lost_s / span < MIN_WAIT_SHARE {
        return;
    }
    let main = crate::run::main_pid(run);
    // The findings whose time this is: the waiter's wait; or, where the ledger reads the
    // straggler, every state of its extra work (pickling runs Python, then native code, then
    // writes): those in its library, else at its line.
    let straggler_main = main == Some(s.pid);
    let explains = |f: &Finding| {
        let of_main = f.facts.pid == main;
        // What the loop's own marks measured of the same work (the straggler's checkpoint phase,
        // its measured wait for data), or, without marks, what the job's I/O counters said of
        // it: the checkpoint's writes with the GPU idle.
        let same_work = straggler_main
            && match (f.id, s.domain) {
                (FindingId::MarkedPhase, Some(Domain::Checkpoint)) => f.facts.phase.as_deref() == Some("checkpoint"),
                (FindingId::CheckpointWrites, Some(Domain::Checkpoint)) => true,
                (FindingId::InputBound, Some(Domain::DataLoader)) => f.basis == crate::Basis::Measured,
                _ => false,
            };
        f.priced_by_ledger() && same_work
            || of_main
                && f.priced_by_ledger()
                && if straggler_main {
                    ThreadState::ALL.iter().any(|st| *st != ThreadState::PeerWait && st.finding() == f.id)
                        && match s.domain {
                            Some(d) => f.facts.domain == Some(d.as_str()),
                            None => f.facts.site == s.site && s.site.is_some(),
                        }
                } else {
                    f.id == FindingId::PeerWait
                }
    };
    let explained: Vec<usize> = (0..out.len()).filter(|i| explains(&out[*i])).collect();
    let (loop_s, _) = crate::run::loop_window(run);
    let loop_len = loop_s.map(|w| w[1] - w[0]);
    // The waiter's time in collectives is the straggler's only past what a collective takes
    // with every rank there (the straggler's own time in them): the account splits in two, and
    // the rest stays the collectives' own, with its finding where it is material.
    if !straggler_main && !explained.is_empty() && s.waiters_wait_s > 0.0 {
        let part = ((s.waiters_wait_s - s.own_wait_s) / s.waiters_wait_s).clamp(0.0, 1.0);
        let rest = split_peer_wait(ledger, part, s.rank);
        let rest_cost = (!rest.is_empty()).then(|| {
            crate::Cost::of_accounts(&rest.iter().map(|i| &ledger.accounts[*i]).collect::<Vec<_>>(), 1.0, loop_len)
        });
        match rest_cost {
            Some(c) => {
                // What is left is judged by its own rule, on its own share of the loop: the
                // straggler's part no longer makes it critical, nor ranks it first.
                let severity = crate::main_thread::severity(c.loop_share.unwrap_or(0.0));
                for i in &explained {
                    out[*i].price(c.clone());
                    out[*i].severity = severity;
                    out[*i].title = out[*i].title.replace(" while the GPU waits", "");
                }
            }
            None => {
                for i in explained.iter().rev() {
                    out.remove(*i);
                }
            }
        }
        let mine: Vec<&crate::Account> =
            ledger.accounts.iter().filter(|a| a.finding == Some(FindingId::Straggler)).collect();
        let cost = crate::Cost::of_accounts(&mine, 1.0, loop_len);
        return finish(run, &s, cost, out, &[]);
    }
    let sum = |get: fn(&crate::Cost) -> Option<f64>| -> Option<f64> {
        explained.iter().map(|i| out[*i].cost.as_ref().and_then(get)).sum()
    };
    let account = (!explained.is_empty()).then(|| {
        let mut names: Vec<&'static str> = explained
            .iter()
            .flat_map(|i| out[*i].cost.as_ref().map(|c| c.accounts.clone()).unwrap_or_default())
            .collect();
        names.sort_unstable();
        names.dedup();
        crate::Cost {
            seconds: sum(|c| c.seconds).map(|v| round(v, 3)),
            wall_share: sum(|c| c.wall_share).map(|v| round(v.clamp(0.0, 1.0), 4)),
            loop_share: sum(|c| c.seconds)
                .zip(loop_len)
                .filter(|(_, l)| *l > 0.0)
                .map(|(s, l)| round((s / l).clamp(0.0, 1.0), 3)),
            own_share: None,
            basis: crate::rules::LEDGER_SHARE,
            accounts: names,
        }
    });
    let cost = account.unwrap_or_else(|| {
        let share = lost_s / span;
        crate::Cost {
            seconds: loop_len.map(|l| round(share * l, 3)),
            wall_share: loop_len.map(|l| round((share * l / ledger.wall_s.max(1e-9)).clamp(0.0, 1.0), 4)),
            loop_share: Some(round(share, 3)),
            own_share: None,
            basis: "the ranks' main threads sampled side by side: the waiters' time in collectives less the straggler's",
            accounts: Vec::new(),
        }
    });
    finish(run, &s, cost, out, &explained);
}

/// The straggler's finding at `cost`, in the place of the findings `explained` (indices into
/// `out`), or after them all where it explains none.
fn finish(run: &Run, s: &Straggler, cost: crate::Cost, out: &mut Vec<Finding>, explained: &[usize]) {
    // Running Python in a library is that library's work: "writing a checkpoint".
    let what = match (s.state, s.domain) {
        (ThreadState::Python, Some(Domain::Checkpoint)) => Domain::Checkpoint.words().to_owned(),
        (ThreadState::Python, Some(d)) => format!("running Python in {}", d.words()),
        (state, Some(d)) => format!("{} in {}", state.words(), d.words()),
        (state, None) => state.words().to_owned(),
    };
    let mechanism = match s.site.as_deref() {
        Some(site) => format!("{what} at {site}"),
        None => what,
    };
    let others = match s.waiters.len() {
        1 => format!("rank {}", s.waiters[0]),
        n => format!("the other {n} ranks"),
    };
    let title = format!(
        "Rank {} holds {others} back: they wait for it in their collectives, {{wall}} of the wall time, while it is {mechanism}",
        s.rank
    );
    let severity =
        if cost.loop_share.unwrap_or(0.0) >= CRITICAL_LOOP_SHARE { Severity::Critical } else { Severity::Warning };
    let mut f = Finding::new(FindingId::Straggler, severity, title)
        .with("rank", u64::from(s.rank))
        .of_pid(s.pid)
        .with("waiters", s.waiters.iter().map(u32::to_string).collect::<Vec<_>>().join(", "))
        .with("state", s.state.as_str())
        .mechanism(format!("Rank {} holding {others} back ({mechanism})", s.rank))
        .with("extra_s", round(s.extra_s, 2))
        .with("held_share", round(s.held_share, 3))
        .with("waiters_peer_wait_s", round(s.waiters_wait_s, 2))
        .with("own_peer_wait_s", round(s.own_wait_s, 2))
        .over(s.window_s)
        .priced(cost)
        .inferred();
    if let Some(d) = s.domain {
        f = f.with("domain", d.as_str());
    }
    if let Some(site) = &s.site {
        f = f.with("site", site.as_str());
    }
    let step_s = run.steps_by_pid.iter().find(|x| x.pid == s.pid).or(run.steps.as_ref()).map(|x| x.mean_step_s());
    f.advice = advice(s, step_s);
    f.limits.push(
        "the ranks are set side by side by their samples' times; a wait shorter than the sampling interval is seen only on average".into(),
    );
    match explained.first() {
        Some(first) => {
            out[*first] = f;
            let mut i = 0;
            out.retain(|_| {
                i += 1;
                !explained[1..].contains(&(i - 1))
            });
        }
        None => out.push(f),
    }
}

/// Splits each of the ledger's accounts of the waiter's time in collectives: `part` of it is
/// the straggler's (its finding), the rest the collectives' own. Returns the indices of the
/// rest's accounts that are material (they keep the `peer_wait` finding).
fn split_peer_wait(ledger: &mut crate::Ledger, part: f64, rank: u32) -> Vec<usize> {
    let kind = ThreadState::PeerWait.account();
    let mut rest = Vec::new();
    let n = ledger.accounts.len();
    for i in 0..n {
        let a = &ledger.accounts[i];
        if a.account != kind || a.finding != Some(FindingId::PeerWait) {
            continue;
        }
        let mut theirs = a.clone();
        theirs.label = format!("the main thread waiting for rank {rank} in collectives");
        theirs.seconds = round(a.seconds * part, 3);
        theirs.share = round(a.share * part, 4);
        theirs.finding = Some(FindingId::Straggler);
        let own = &mut ledger.accounts[i];
        own.label = "the main thread in collectives, every rank there (their own time)".to_owned();
        own.seconds = round(own.seconds * (1.0 - part), 3);
        own.share = round(own.share * (1.0 - part), 4);
        let material = own.share >= crate::rules::MATERIAL;
        if !material {
            own.finding = None;
            own.finding_gpu = None;
        } else {
            rest.push(i);
        }
        ledger.accounts.push(theirs);
    }
    rest
}

/// What to do about the straggler, from what it did while the others waited.
fn advice(s: &Straggler, step_s: Option<f64>) -> Vec<String> {
    let at = s.site.as_deref().map(|x| format!(" ({x})")).unwrap_or_default();
    let only = if s.rank == 0 { "rank 0 alone" } else { "this rank alone" };
    let mut out = match (s.state, s.domain) {
        (_, Some(Domain::Checkpoint)) | (ThreadState::Disk, _) => vec![format!(
            "{only} writes{at} while the others wait: save asynchronously (torch.distributed.checkpoint.async_save, or a thread writing a CPU copy of the state_dict), or less often"
        )],
        (_, Some(Domain::Logging)) => vec![format!(
            "{only} logs{at} while the others wait: log less often, or only values already on the host"
        )],
        (_, Some(Domain::DataLoader)) | (ThreadState::Ipc, _) => vec![format!(
            "this rank's input is slower{at}: give its DataLoader more workers, check its shard of the data (a larger or slower part), and that its workers are not starved of cores"
        )],
        (ThreadState::CoreWait, _) => vec![
            "this rank waits for a core: the node's cores are oversubscribed; fewer DataLoader workers per rank, or OMP_NUM_THREADS set per rank".into(),
        ],
        (ThreadState::GpuSync, _) => vec![format!(
            "this rank waits on its GPU{at}: compare its GPU's clocks and throttling with the others', and its batch with theirs"
        )],
        _ => vec![format!(
            "this rank does work the others do not{at}: give every rank the same work per step, or move it off the step's critical path"
        )],
    };
    if let Some(r) = step_s {
        out.push(format!(
            "every rank steps at the straggler's pace ({r:.3} s a step): the collectives make them wait for it"
        ));
    }
    out
}

#[cfg(test)]
#[path = "ranks_tests.rs"]
mod tests;
