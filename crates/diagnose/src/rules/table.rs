//! The rules as data: each declares the run it reads and what else it consumes, and the order
//! they run in follows from that. The table's own order is the order their findings are listed
//! in before ranking (ties in rank keep it), so a rule's place in the table is its output place,
//! never its run order.

use crate::{AccountKind, Finding, Ledger, Run, Severity};

use super::{
    binding, ended, epoch, errors, health, host, memory, nvlink, phases, processes, stall, startup, steps, tensor,
    throttle, transfer, utilization, workers,
};

/// Which view of the run a rule reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum View {
    /// Every GPU, the loop's phases included: the processes, the ledger.
    Whole,
    /// The job's GPUs only (what a GPU did is the job's only where the job ran on it).
    Job,
    /// The job's GPUs without the loop's marked phases: the rules that read the GPU's idle
    /// time (the phases have findings of their own).
    Loop,
}

/// What a rule consumes besides its view of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Input {
    /// Another rule's findings.
    Findings(RuleId),
    /// The ledger's accounts of these kinds: drawn from the findings of every rule that reads no
    /// account, then amended by the rules listed before this one that amend them.
    Accounts(&'static [AccountKind]),
    /// Every other rule's findings, each priced by the ledger.
    Everything,
}

/// A rule's name in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RuleId {
    InputBound,
    Epoch,
    Utilization,
    Transfer,
    Host,
    Oversubscribed,
    Tensor,
    Startup,
    Memory,
    Workers,
    Stall,
    Throttle,
    Processes,
    Imbalance,
    Binding,
    GpuLost,
    HostOom,
    Errors,
    ResetPending,
    Nvlink,
    MainThread,
    ByElimination,
    Phases,
    Straggler,
    Healthy,
}

/// One rule: what it reads, what it makes besides its own findings, and how it runs.
pub(crate) struct Rule {
    pub id: RuleId,
    pub view: View,
    pub reads: &'static [Input],
    /// The ledger's accounts it changes (splits, or names the finding of).
    pub amends: &'static [AccountKind],
    run: fn(&mut Cx, &Run) -> Vec<Finding>,
}

impl Rule {
    /// Whether it runs once the ledger is drawn: it reads or amends accounts, or reads every
    /// finding.
    pub fn after_ledger(&self) -> bool {
        !self.amends.is_empty() || self.reads.iter().any(|i| matches!(i, Accounts(_) | Everything))
    }

    fn reads_accounts(&self) -> bool {
        self.reads.iter().any(|i| matches!(i, Accounts(_)))
    }

    const fn amending(mut self, accounts: &'static [AccountKind]) -> Self {
        self.amends = accounts;
        self
    }
}

const fn rule(id: RuleId, view: View, reads: &'static [Input], run: fn(&mut Cx, &Run) -> Vec<Finding>) -> Rule {
    Rule { id, view, reads, amends: &[], run }
}

use Input::{Accounts, Everything, Findings};
use View::{Job, Loop, Whole};

/// Every rule, in the order their findings are listed.
pub(crate) const TABLE: &[Rule] = &[
    rule(RuleId::InputBound, Job, &[Findings(RuleId::Stall), Findings(RuleId::Epoch)], |cx, run| {
        // A stall that carries the waits, or the workers' restarts, already names them.
        match stall_explains_waits(cx.of(RuleId::Stall)) || !cx.of(RuleId::Epoch).is_empty() {
            true => Vec::new(),
            false => steps::input_bound(run),
        }
    }),
    rule(RuleId::Epoch, Job, &[Findings(RuleId::Stall)], |cx, run| {
        if stall_explains_waits(cx.of(RuleId::Stall)) { Vec::new() } else { epoch::findings(run) }
    }),
    rule(RuleId::Utilization, Loop, &[Findings(RuleId::Stall)], |cx, run| {
        utilization::findings(run, cx.of(RuleId::Stall))
    }),
    rule(RuleId::Transfer, Loop, &[], |_, run| transfer::findings(run)),
    rule(RuleId::Host, Loop, &[], |_, run| host::findings(run)),
    rule(RuleId::Oversubscribed, Job, &[], |_, run| host::oversubscribed(run)),
    rule(RuleId::Tensor, Loop, &[], |_, run| tensor::findings(run)),
    rule(RuleId::Startup, Job, &[], |_, run| startup::findings(run)),
    rule(RuleId::Memory, Job, &[], |_, run| memory::findings(run)),
    rule(RuleId::Workers, Job, &[], |_, run| workers::findings(run)),
    rule(RuleId::Stall, Loop, &[], |_, run| stall::findings(run)),
    rule(RuleId::Throttle, Loop, &[], |_, run| throttle::findings(run)),
    rule(RuleId::Processes, Whole, &[], |_, run| processes::findings(run)),
    rule(RuleId::Imbalance, Loop, &[], |_, run| utilization::imbalance(run)),
    rule(RuleId::Binding, Job, &[], |_, run| binding::findings(run)),
    rule(RuleId::GpuLost, Whole, &[], |_, run| ended::gpu_lost(run)),
    rule(RuleId::HostOom, Job, &[], |_, run| ended::host_oom(run)),
    rule(RuleId::Errors, Whole, &[], |_, run| errors::findings(run)),
    rule(RuleId::ResetPending, Whole, &[], |_, run| health::reset_pending(run)),
    rule(RuleId::Nvlink, Loop, &[], |_, run| nvlink::unused(run)),
    // What the main thread did while the GPU idled names the host-side time by its mechanism:
    // it splits the ledger's accounts, and replaces the generic findings that explained them
    // (a saturated host stays, as a fact that claims no time). It adds the `main_thread_*`
    // accounts in their place.
    rule(RuleId::MainThread, Whole, &[Accounts(HOST_SIDE_IDLE)], |cx, run| {
        let ledger = std::mem::take(cx.ledger_mut());
        *cx.ledger_mut() = crate::main_thread::split(run, ledger, &mut cx.out);
        Vec::new()
    })
    .amending(HOST_SIDE_IDLE),
    // Host-side time by elimination that nothing named gets a finding.
    rule(RuleId::ByElimination, Whole, &[Accounts(&[AccountKind::HostSide])], |cx, run| {
        let loop_s = cx.loop_s;
        super::by_elimination(run, cx.ledger_mut(), loop_s).into_iter().collect()
    })
    .amending(&[AccountKind::HostSide]),
    rule(
        RuleId::Phases,
        Job,
        &[Accounts(&[AccountKind::Phase, AccountKind::StorageWrite, AccountKind::Unexplained])],
        |cx, run| phases::findings(run, cx.ledger()),
    ),
    // A distributed job's ranks side by side: the rank the others wait for in their collectives
    // takes the place of the finding of the time it costs (the waiter's wait, or what the
    // straggler did meanwhile).
    rule(RuleId::Straggler, Whole, &[Accounts(HOST_SIDE_IDLE), Findings(RuleId::Phases)], |cx, run| {
        let mut ledger = std::mem::take(cx.ledger_mut());
        crate::ranks::findings(run, &mut ledger, &mut cx.out);
        *cx.ledger_mut() = ledger;
        Vec::new()
    })
    .amending(&[AccountKind::MainThread(crate::main_thread::ThreadState::PeerWait)]),
    // Other processes' memory, and what the ledger alone says, say nothing of how well the job
    // itself runs.
    rule(RuleId::Healthy, Loop, &[Everything], |cx, run| {
        let troubled = cx.out.iter().any(|f| f.severity <= Severity::Warning && f.id.is_trouble());
        if troubled { Vec::new() } else { utilization::healthy(run) }
    }),
];

/// The accounts of the GPU's idle time that the main thread's samples can name.
const HOST_SIDE_IDLE: &[AccountKind] =
    &[AccountKind::HostSide, AccountKind::InputInferred, AccountKind::HostSaturated, AccountKind::Unexplained];

/// Whether the stalls already explain the loop's waits: they lie mostly in a stall's pauses
/// (the stall carries them), or a stall at each epoch start names the restarts, with their period.
fn stall_explains_waits(stalls: &[Finding]) -> bool {
    let carried = stalls.iter().any(|f| f.facts.data_wait_in_pauses_share.is_some_and(|s| s >= 0.5));
    let restart = super::stall::Cause::EpochRestart.as_str();
    carried || stalls.iter().any(|f| f.facts.stall_cause == Some(restart))
}

fn index(id: RuleId) -> usize {
    TABLE.iter().position(|r| r.id == id).expect("every rule is in the table")
}

/// The rules `i` waits for: those whose findings it reads; for accounts, every rule the ledger
/// is drawn from and every rule listed before it that amends them; for every finding, every
/// other rule.
pub(crate) fn waits_for(i: usize) -> Vec<usize> {
    let r = &TABLE[i];
    let mut out = Vec::new();
    for input in r.reads {
        match input {
            Findings(id) => out.push(index(*id)),
            Accounts(kinds) => {
                out.extend((0..TABLE.len()).filter(|j| !TABLE[*j].after_ledger()));
                out.extend((0..i).filter(|j| TABLE[*j].amends.iter().any(|k| kinds.contains(k))));
            }
            Everything => out.extend((0..TABLE.len()).filter(|j| *j != i && !TABLE[*j].reads.contains(&Everything))),
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The order the rules run in: each after what it reads, otherwise in table order (a stable
/// topological order). Panics on a cycle: a table that cannot run.
pub(crate) fn run_order() -> Vec<usize> {
    let deps: Vec<Vec<usize>> = (0..TABLE.len()).map(waits_for).collect();
    let mut done = vec![false; TABLE.len()];
    let mut order = Vec::with_capacity(TABLE.len());
    while order.len() < TABLE.len() {
        let next = (0..TABLE.len())
            .find(|i| !done[*i] && deps[*i].iter().all(|d| done[*d]))
            .unwrap_or_else(|| panic!("the rules' inputs form a cycle after {order:?}"));
        done[next] = true;
        order.push(next);
    }
    order
}

/// What the rules have made so far.
pub(crate) struct Cx {
    /// The rule running now: what it may read is what it declared.
    current: usize,
    /// Each rule's findings until the ledger is drawn.
    found: Vec<Option<Vec<Finding>>>,
    ledger: Option<Ledger>,
    /// Every finding in table order, from when the ledger is drawn.
    pub out: Vec<Finding>,
    /// The loop's length, seconds.
    pub loop_s: Option<f64>,
}

impl Cx {
    /// The findings of `id`, which the running rule must declare it reads.
    fn of(&self, id: RuleId) -> &[Finding] {
        debug_assert!(TABLE[self.current].reads.contains(&Findings(id)), "{:?} reads {id:?}", TABLE[self.current].id);
        self.found[index(id)].as_deref().expect("a rule runs after what it reads")
    }

    fn ledger(&self) -> &Ledger {
        debug_assert!(TABLE[self.current].reads_accounts(), "{:?} reads the ledger", TABLE[self.current].id);
        self.ledger.as_ref().expect("the ledger is drawn before the rules that read it")
    }

    fn ledger_mut(&mut self) -> &mut Ledger {
        let rule = &TABLE[self.current];
        debug_assert!(!rule.amends.is_empty(), "{:?} amends the ledger", rule.id);
        self.ledger.as_mut().expect("the ledger is drawn before the rules that read it")
    }
}

/// The three views of a run.
pub(crate) struct Views<'a> {
    pub whole: &'a Run,
    pub job: &'a Run,
    pub in_loop: &'a Run,
}

/// Runs every rule in [`run_order`]. The ledger is drawn before the first rule that reads it,
/// and `price` prices the findings by it before the first rule that reads every finding (or at
/// the end). Returns every finding in table order, and the ledger.
pub(crate) fn run_all(views: &Views, price: fn(&Run, &mut Cx, &Ledger)) -> (Vec<Finding>, Ledger) {
    let mut cx = Cx {
        current: 0,
        found: TABLE.iter().map(|_| None).collect(),
        ledger: None,
        out: Vec::new(),
        loop_s: crate::run::loop_window(views.whole).0.map(|w| w[1] - w[0]),
    };
    let price_now = |cx: &mut Cx| {
        let ledger = cx.ledger.take().expect("the ledger is drawn before the findings are priced");
        price(views.whole, cx, &ledger);
        cx.ledger = Some(ledger);
    };
    let mut priced = false;
    for i in run_order() {
        let rule = &TABLE[i];
        if rule.after_ledger() && cx.ledger.is_none() {
            cx.out = cx.found.iter_mut().filter_map(Option::take).flatten().collect();
            cx.ledger = Some(crate::ledger(views.whole, &cx.out));
        }
        if rule.reads.contains(&Everything) && !priced {
            price_now(&mut cx);
            priced = true;
        }
        cx.current = i;
        let run = match rule.view {
            Whole => views.whole,
            Job => views.job,
            Loop => views.in_loop,
        };
        let f = (rule.run)(&mut cx, run);
        match cx.ledger {
            None => cx.found[i] = Some(f),
            Some(_) => cx.out.extend(f),
        }
    }
    if !priced {
        price_now(&mut cx);
    }
    let ledger = cx.ledger.take().expect("the ledger is drawn before the rules that read it");
    (cx.out, ledger)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_rule_runs_before_what_it_consumes_and_every_rule_runs() {
        let order = run_order();
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..TABLE.len()).collect::<Vec<_>>(), "every rule runs once: {order:?}");
        let at = |i: usize| order.iter().position(|x| *x == i).unwrap();
        for (i, rule) in TABLE.iter().enumerate() {
            for d in waits_for(i) {
                assert!(at(d) < at(i), "{:?} runs before {:?}, which it reads", rule.id, TABLE[d].id);
            }
        }
        // What reads the ledger appends its findings as it runs: it must run in table order,
        // after every rule the ledger is drawn from.
        let after: Vec<usize> = order.iter().copied().filter(|i| TABLE[*i].after_ledger()).collect();
        assert!(after.is_sorted(), "{after:?}");
        let first_after = order.iter().position(|i| TABLE[*i].after_ledger()).unwrap();
        assert!(order[first_after..].iter().all(|i| TABLE[*i].after_ledger()), "{order:?}");
        assert!(after.iter().all(|i| *i > *order[..first_after].iter().max().unwrap()), "table order is output order");
        // Each rule's name once.
        for (i, r) in TABLE.iter().enumerate() {
            assert_eq!(index(r.id), i, "{:?} is in the table twice", r.id);
        }
    }

    #[test]
    fn the_stalls_run_first_and_the_rules_that_read_them_after() {
        let order: Vec<RuleId> = run_order().into_iter().map(|i| TABLE[i].id).collect();
        let at = |id: RuleId| order.iter().position(|x| *x == id).unwrap();
        assert_eq!(order[0], RuleId::Transfer, "the first rule that reads nothing else: {order:?}");
        assert!(at(RuleId::Stall) < at(RuleId::Epoch) && at(RuleId::Epoch) < at(RuleId::InputBound), "{order:?}");
        assert!(at(RuleId::MainThread) < at(RuleId::ByElimination) && at(RuleId::Phases) < at(RuleId::Healthy));
        assert_eq!(order.last(), Some(&RuleId::Healthy));
    }
}
