//! The rules. Each takes the run and returns its findings; `table.rs` lists them with what
//! they consume, which orders them.

mod binding;
mod ended;
mod epoch;
mod errors;
mod feeding;
mod health;
mod host;
mod memory;
mod nvlink;
mod phases;
mod processes;
mod stall;
pub(crate) mod startup;
pub(crate) mod steps;
pub(crate) mod table;
pub(crate) mod tensor;
#[cfg(test)]
pub(crate) mod testing;
mod throttle;
mod transfer;
mod utilization;
mod workers;

use crate::{AccountKind, Basis, Cost, Finding, FindingId, Ledger, Run, Severity};

/// A cost below a twentieth of the wall time: fixing it would speed the run by 1.05× at most.
pub(crate) const MATERIAL: f64 = 0.05;
pub(crate) use crate::run::MIN_ACTIVE_S;
pub(crate) use feeding::workers_wait_advice;

/// Every rule's findings, and the ledger they are ranked by. Rules that read the GPU's idle time
/// see the run without the loop's marked phases; the phases have findings of their own.
pub fn all(whole: &Run) -> (Vec<Finding>, Ledger) {
    // What a GPU did is the job's only where the job ran on it: the rules that read a GPU's
    // work see the job's GPUs; the processes and the ledger see them all.
    let job_only = whole.job_gpus().map(|job| {
        let mut r = whole.clone();
        r.gpus.retain(|g| job.contains(&g.gpu));
        r
    });
    let job = job_only.as_ref().unwrap_or(whole);
    let masked = job.outside_phases();
    let in_loop = masked.as_ref().unwrap_or(job);
    let (mut out, ledger) = table::run_all(&table::Views { whole, job, in_loop }, price);
    for f in &mut out {
        on_the_ledger(f);
    }
    (out, ledger)
}

/// Every finding's cost, from the ledger's accounts of what it explains: each finding instance
/// is priced once, by the accounts that name it, so two findings of one id keep their own.
fn price(whole: &Run, cx: &mut table::Cx, ledger: &Ledger) {
    let (out, loop_s) = (&mut cx.out, cx.loop_s);
    let wall = ledger.wall_s;
    // An inferred cause's accounts in the ledger say what it costs the whole run, start-up and
    // marked phases included; below a twentieth of the wall time, fixing it gains too little to
    // warn. A finding made with its account (the main thread's split) is priced already.
    for f in out.iter_mut().filter(|f| f.basis == Basis::Inferred && !f.priced_by_ledger()) {
        let mine: Vec<&crate::Account> =
            ledger.accounts.iter().filter(|a| a.finding == Some(f.id) && a.finding_gpu == f.gpu).collect();
        if mine.is_empty() {
            continue;
        }
        f.price(Cost::of_accounts(&mine, 1.0, loop_s));
        if f.wall_share().unwrap_or(0.0) < MATERIAL && f.severity == Severity::Warning {
            f.severity = Severity::Info;
        }
    }
    // Measured causes with an account of their own cost its seconds too, so every finding ranks
    // by the time the ledger gives it; a share of the loop its rule measured stays its own.
    // Only the findings of the GPU the ledger reads hold its seconds (a data-parallel job's ranks
    // stall alike, but the seconds are counted once); processes sharing it split theirs by
    // their SM time.
    let primary = crate::run::primary(whole).map(|g| g.gpu);
    let sm = |f: &Finding| f.facts.sm_share_pct.unwrap_or(0.0);
    let shared_sm: f64 = out.iter().filter(|f| f.id == FindingId::GpuShared && f.gpu == primary).map(sm).sum();
    for f in out.iter_mut() {
        let Some(account) = f.id.own_account(f.basis) else { continue };
        if f.gpu.is_some() && f.gpu != primary {
            continue;
        }
        let part = if f.id == FindingId::GpuShared { sm(f) / shared_sm.max(1e-9) } else { 1.0 };
        let mine: Vec<&crate::Account> = ledger.accounts.iter().filter(|a| a.account == account).collect();
        let mut cost = Cost::of_accounts(&mine, part, loop_s);
        if let Some(own) = f.cost.as_ref().and_then(|c| c.loop_share) {
            cost.loop_share = Some(own);
        }
        f.price(cost);
    }
    // The workers' restarts are part of the loop's measured data wait: their own seconds.
    if let Some(l) = loop_s.filter(|l| *l > 0.0) {
        for f in out.iter_mut().filter(|f| f.id == FindingId::EpochRestart) {
            let Some(own) = f.cost.as_ref().and_then(|c| c.loop_share) else { continue };
            let seconds = (own * l).min(ledger.seconds(AccountKind::DataWait));
            let mut cost = Cost::of_ledger(seconds, wall, loop_s, vec![AccountKind::DataWait.as_str()]);
            cost.loop_share = Some(own);
            f.price(cost);
        }
    }
    // Start-up is every start-up account of the ledger together.
    let startup: Vec<&crate::Account> = ledger.accounts.iter().filter(|a| a.account.is_startup()).collect();
    for f in out.iter_mut().filter(|f| f.id == FindingId::Startup) {
        f.price(Cost::of_accounts(&startup, 1.0, None));
    }
}

/// How a finding's cost is counted once the ledger is drawn.
pub(crate) const LEDGER_SHARE: &str = "ledger: the seconds of the accounts it explains, over the wall time";

/// A finding's rule's own estimate, over a base of its own, stays beside its cost for the reader
/// (`own_share`); a finding that explains no account costs nothing the ledger can show. Its title
/// then takes its cost's numbers.
fn on_the_ledger(f: &mut Finding) {
    f.settle();
}

/// `host_bound` for the host-side time the ledger books by elimination (the loop's timed steps
/// less their timed waits, with the GPU idle) when no rule and no stack sample named it: an
/// account of the run without a finding would be a cost nobody is told about.
fn by_elimination(run: &Run, ledger: &mut Ledger, loop_s: Option<f64>) -> Option<Finding> {
    let a = ledger.accounts.iter_mut().find(|a| a.account == AccountKind::HostSide && a.finding.is_none())?;
    if a.share < MATERIAL {
        return None;
    }
    a.finding = Some(crate::FindingId::HostBound);
    a.finding_gpu = crate::run::primary(run).map(|g| g.gpu);
    let cost = Cost::of_accounts(&[&*a], 1.0, loop_s);
    let f = Finding::new(
        crate::FindingId::HostBound,
        Severity::Warning,
        "Host-side work inside the steps: the GPU idle {wall} of the wall time between the loop's data waits".into(),
    )
    .priced(cost)
    .advise(&[
        "gpulse run samples the job's main thread (unless --no-stacks) and names the line and the mechanism of this time",
        "remove per-step synchronizations: .item(), .cpu(), print(loss) and torch.cuda.synchronize() inside the loop",
        "cut launch overhead with torch.compile(mode=\"reduce-overhead\") or CUDA graphs; do more work per launch with a larger batch",
    ])
    .limit("by elimination: the steps' time less their measured waits, with the GPU idle; what the host did is not known");
    let mut f = f;
    if let Some(g) = a.finding_gpu {
        f = f.on_gpu(g);
    }
    Some(f.inferred())
}

const GIB: f64 = gpulse_model::GIB as f64;
