//! Where an unmarked loop's training begins, and the main thread's idle time before it booked
//! as start-up.

use super::{Domain, Point, ThreadState};
use crate::ledger::{Account, AccountKind, Ledger};
use crate::{Basis, Run, round};

/// An unmarked loop begins at the job's CUDA context, but training begins at its first
/// backward pass, optimizer step or wait on the GPU: what the main thread did before that
/// (building the optimizer, importing what it imports) is start-up, not the loop's.
/// `window` is the loop's samples in order, `sites` each one's site, `lo` the loop window's start.
pub(super) fn training_begins_s(run: &Run, window: &[&Point], sites: &[Option<u32>], lo: f64, marked: bool) -> f64 {
    if marked {
        return lo;
    }
    let first = window.iter().position(|p| {
        p.class.state == ThreadState::GpuSync || matches!(p.class.domain, Some(Domain::Backward | Domain::Optimizer))
    });
    let keys: Vec<_> =
        window.iter().zip(sites).map(|(p, site)| crate::run::loop_key(&run.stacks, p.stack, *site)).collect();
    let entry = first.map_or(lo, |i| window[crate::run::loop_entry(&keys, i)].t_s);
    // The loop's window began at its training's entry where the polls found the GPU later.
    let entry = crate::run::training_s(run).map_or(entry, |[t, _]| entry.min(t)).max(lo);
    // `torch.compile` builds the first step, forward and backward, before its optimizer
    // step: compiling and importing until then is start-up, paid once, not the loop's. The
    // first step has ended at its optimizer step, or where the thread leaves its first backward
    // pass (an optimizer step between two samples is not seen; a loop that recompiles every
    // step compiles its next forward straight after).
    let mut seen: std::collections::HashMap<u32, bool> = std::collections::HashMap::new();
    let mut backward = |p: &Point| {
        *seen.entry(p.stack).or_insert_with(|| super::classify::step_backward(run.stacks.frames_of(p.stack)))
    };
    let optimizer = window.iter().position(|p| p.class.domain == Some(Domain::Optimizer));
    let left_backward = window.windows(2).position(|w| backward(w[0]) && !backward(w[1])).map(|i| i + 1);
    let first_step = optimizer.into_iter().chain(left_backward).min();
    let built = first_step.and_then(|i| {
        window[..i]
            .iter()
            .rev()
            .find(|p| matches!(p.class.domain, Some(Domain::Compile | Domain::Import)))
            .map(|p| p.t_s + p.dur_s)
    });
    built.map_or(entry, |b| entry.max(b))
}

/// Books the main thread's `seconds` of idle time before training began (`lo` to `first_work_s`)
/// as start-up: onto the account from the CUDA context to the first step (a run without a GPU
/// has one start-up account), labelled by what the thread did over the start-up as it now reaches.
pub(super) fn book(run: &Run, ledger: &mut Ledger, pid: u32, seconds: f64, [lo, first_work_s]: [f64; 2], marked: bool) {
    let end = ledger.wall_s;
    let g = crate::run::primary(run);
    // Without a GPU there is no CUDA context to split start-up at: it is one account.
    let (kind, label, from) = match g {
        Some(_) => (AccountKind::StartupToFirstStep, crate::ledger::TO_FIRST_STEP, "from the CUDA context"),
        None => (AccountKind::Startup, "start-up", "from its start"),
    };
    // What the main thread did, over the start-up as it now reaches.
    let from_s = match g {
        Some(_) => crate::run::startup_context_s(run, lo, marked).unwrap_or(0.0),
        None => 0.0,
    };
    let label = super::startup::labelled(run, label, [from_s, first_work_s]);
    match ledger.accounts.iter_mut().find(|a| a.account == kind) {
        Some(a) => {
            a.seconds = round(a.seconds + seconds, 3);
            a.share = round(a.seconds / end.max(1e-9), 4);
            a.label = label;
        }
        None => ledger.accounts.push(Account {
            account: kind,
            label,
            seconds: round(seconds, 3),
            share: round(seconds / end.max(1e-9), 4),
            basis: Basis::Inferred,
            evidence: format!(
                "the main thread's samples (PID {pid}) {from} to its first backward pass, optimizer step or wait on the GPU, or to the end of torch.compile's build of the first step, at {first_work_s:.1} s"
            ),
            finding: None,
            finding_gpu: None,
        }),
    }
}
