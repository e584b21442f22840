//! A live run's main threads, read as the diagnosis reads them: each sample classified, a stack
//! that runs with the GIL free told native by the same votes, and each block of samples
//! corrected by the thread's own clocks, so that `/metrics`, `/api` and `top` say what
//! `diagnose` says.

use std::collections::{BTreeMap, HashMap};

use gpulse_model::{Stacks, ThreadSample};

use super::{Classifier, NativeVotes, Point, ThreadState, clocks, site_text};

/// Samples held per process before their time is counted: the clocks' block (about half a
/// second at 50 Hz, two at 12 Hz). The counters are that late, not wrong by a sample's luck.
const BLOCK: usize = 25;
/// ... or this long (µs), for a process read slowly.
const BLOCK_US: i64 = 2_000_000;
/// A gap in sampling is not time in the state before it: a sample stands for at most this,
/// unless the thread's own clocks witness the pause.
const MAX_GAP_S: f64 = 0.5;

/// A live run's main threads: seconds in each state since the run began (what a counter
/// exports), and each process's latest sample.
#[derive(Debug, Default, Clone)]
pub struct Totals {
    classifier: Classifier,
    /// Each process's GIL votes so far, as the diagnosis counts them.
    votes: HashMap<u32, NativeVotes>,
    /// Each process's samples not yet counted, the last one counted first of them, each with
    /// whether it caught the thread running.
    pending: HashMap<u32, Vec<(ThreadSample, bool)>>,
    /// Each process's samples read across a change of letter so far, as the diagnosis pools them.
    across: HashMap<u32, clocks::Across>,
    /// (PID, state) → seconds: a sample stands for the time to its process's next (at most
    /// half a second, but a witnessed pause whole), rescaled by the thread's clocks where the sampler read them.
    pub seconds: BTreeMap<(u32, ThreadState), f64>,
    /// PID → (when, in µs since the epoch, its state, its site) of its latest sample.
    pub now: BTreeMap<u32, (i64, ThreadState, Option<String>)>,
    /// PID → its rank, for the processes of a distributed job.
    pub ranks: BTreeMap<u32, u32>,
}

impl Totals {
    /// Adds the samples of a batch whose frames and stacks `stacks` already holds.
    pub fn add(&mut self, stacks: &Stacks, samples: &[ThreadSample]) {
        // Each process's latest sample of the batch: its site is told once, not per sample.
        let mut latest: HashMap<u32, (i64, ThreadState, u32)> = HashMap::new();
        for s in samples {
            let mut class = self.classifier.classify(stacks, s);
            let votes = self.votes.entry(s.pid).or_insert_with(|| NativeVotes::of(stacks.process(s.pid)));
            votes.add(s);
            votes.refine(s, &mut class);
            latest.insert(s.pid, (s.t_us, class.state, s.stack));
            if let Some(r) = stacks.process(s.pid).and_then(|p| p.rank).filter(|_| !self.ranks.contains_key(&s.pid)) {
                self.ranks.insert(s.pid, r.rank);
            }
            let pending = self.pending.entry(s.pid).or_default();
            pending.push((s.clone(), clocks::running(s, &class)));
            let full = |n: usize, us: i64| pending.len() > n || s.t_us - pending[0].0.t_us >= us;
            // A block that caught one side of the thread its clocks saw on both waits for the
            // other, as the diagnosis grows it.
            let one_sided = || {
                let (n, ran) = (pending.len() - 1, pending[..pending.len() - 1].iter().filter(|p| p.1).count());
                clocks::one_sided(&pending[0].0, s, n, ran)
            };
            if full(BLOCK * clocks::GROW, BLOCK_US * clocks::GROW as i64) || (full(BLOCK, BLOCK_US) && !one_sided()) {
                self.count(stacks, s.pid);
            }
        }
        for (pid, (t_us, state, stack)) in latest {
            self.now.insert(pid, (t_us, state, site_text(stacks, stack)));
        }
    }

    /// Counts a process's pending samples but the last, which starts the next block.
    fn count(&mut self, stacks: &Stacks, pid: u32) {
        let Some(mine) = self.pending.get_mut(&pid) else { return };
        let last = mine.pop().expect("a block has samples");
        let mut block: Vec<ThreadSample> =
            std::mem::replace(mine, vec![last.clone()]).into_iter().map(|p| p.0).collect();
        block.push(last.0);
        let none = NativeVotes::default();
        let votes = self.votes.get(&pid).unwrap_or(&none);
        let refs: Vec<&ThreadSample> = block.iter().collect();
        // A pause in sampling counts up to its cap, or whole where the thread's clocks witness
        // it, as the diagnosis counts it.
        let times: Vec<f64> = block.iter().map(|s| s.t_us as f64 / 1e6).collect();
        let capped: Vec<f64> = times.windows(2).map(|w| (w[1] - w[0]).clamp(0.0, MAX_GAP_S)).collect();
        let mut dur_s = capped.clone();
        super::witnessed_pauses(&refs, &times, &capped, &mut dur_s);
        let pts: Vec<Point> = block
            .windows(2)
            .zip(dur_s)
            .map(|(w, dur_s)| {
                let mut class = self.classifier.classify(stacks, &w[0]);
                votes.refine(&w[0], &mut class);
                Point { t_s: w[0].t_us as f64 / 1e6, dur_s, stack: w[0].stack, gil_stack: None, class, split: false }
            })
            .collect();
        for p in clocks::apply(&refs, pts, self.across.entry(pid).or_default()) {
            *self.seconds.entry((pid, p.class.state)).or_default() += p.dur_s;
        }
    }

    /// Forgets the processes whose latest sample is more than `quiet_us` older than the newest.
    pub fn forget_quiet(&mut self, quiet_us: i64) {
        let Some(newest) = self.now.values().map(|n| n.0).max() else { return };
        let gone: Vec<u32> = self.now.iter().filter(|(_, n)| newest - n.0 > quiet_us).map(|(p, _)| *p).collect();
        for pid in gone {
            self.now.remove(&pid);
            self.ranks.remove(&pid);
            self.votes.remove(&pid);
            self.pending.remove(&pid);
            self.across.remove(&pid);
            self.seconds.retain(|(p, _), _| *p != pid);
        }
    }

    /// Each state's share of `pid`'s counted time so far, largest first.
    pub fn shares(&self, pid: u32) -> Vec<(ThreadState, f64)> {
        let mine: Vec<(ThreadState, f64)> =
            self.seconds.iter().filter(|((p, _), _)| *p == pid).map(|((_, s), v)| (*s, *v)).collect();
        let total: f64 = mine.iter().map(|x| x.1).sum();
        let mut out: Vec<(ThreadState, f64)> = mine.into_iter().map(|(s, v)| (s, v / total.max(1e-9))).collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1));
        out
    }
}
