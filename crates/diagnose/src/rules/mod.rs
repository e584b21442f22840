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

use crate::{AccountKind, Basis, Finding, Ledger, Run, Severity};

/// A cost below a twentieth of the wall time: fixing it would speed the run by 1.05× at most.
pub(crate) const MATERIAL: f64 = 0.05;
/// Windows shorter than this hold too few samples to judge a steady state.
pub(crate) const MIN_ACTIVE_S: f64 = 10.0;

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

/// Every finding's share of the wall time, from the ledger's account of what it costs.
fn price(whole: &Run, cx: &mut table::Cx, ledger: &Ledger) {
    let (out, loop_s) = (&mut cx.out, cx.loop_s);
    // An inferred cause's account in the ledger says what it costs the whole run, start-up and
    // marked phases included; below a twentieth of the wall time, fixing it gains too little to
    // warn. Its `lost_share` stays over its GPU's active window, the same in a view of the whole
    // machine, where one GPU's job is part of the window.
    for a in ledger.accounts.iter().filter(|a| a.finding.is_some()) {
        for f in
            out.iter_mut().filter(|f| Some(f.id) == a.finding && f.gpu == a.finding_gpu && f.basis == Basis::Inferred)
        {
            f.evidence.insert("wall_share".into(), a.share.into());
            if let Some(l) = loop_s.filter(|l| *l > 0.0) {
                f.evidence.insert("loop_share".into(), crate::round((a.seconds / l).min(1.0), 3).into());
            }
            if a.share < MATERIAL && f.severity == Severity::Warning {
                f.severity = Severity::Info;
            }
        }
    }
    // Measured causes with an account of their own carry its share of the wall time too, so
    // every finding ranks by the time the ledger gives it.
    // Only the findings of the GPU the ledger reads hold its seconds (a data-parallel job's ranks
    // stall alike, but the seconds are counted once); processes sharing it split theirs by
    // their SM time.
    let primary = crate::ledger::primary(whole).map(|g| g.gpu);
    let sm = |f: &Finding| f.evidence.get("sm_share_pct").and_then(serde_json::Value::as_f64).unwrap_or(0.0);
    let shared_sm: f64 = out.iter().filter(|f| f.id == crate::FindingId::GpuShared && f.gpu == primary).map(sm).sum();
    for f in out.iter_mut() {
        let Some(account) = f.id.own_account(f.basis) else { continue };
        if f.gpu.is_some() && f.gpu != primary {
            continue;
        }
        let part = if f.id == crate::FindingId::GpuShared { sm(f) / shared_sm.max(1e-9) } else { 1.0 };
        f.evidence.insert("wall_share".into(), crate::round(part * ledger.share(account), 4).into());
        if let Some(l) = loop_s.filter(|l| *l > 0.0) {
            let of_loop = (part * ledger.seconds(account) / l).min(1.0);
            f.evidence.insert("loop_share".into(), crate::round(of_loop, 3).into());
        }
    }
    // The workers' restarts are part of the loop's measured data wait: their own seconds.
    if let Some(l) = loop_s.filter(|l| *l > 0.0) {
        for f in out.iter_mut().filter(|f| f.id == crate::FindingId::EpochRestart) {
            let Some(own) = f.lost_share else { continue };
            let share = (own * l / ledger.wall_s.max(1e-9)).min(ledger.share(AccountKind::DataWait));
            f.evidence.insert("wall_share".into(), crate::round(share, 4).into());
        }
    }
    // Start-up is every start-up account of the ledger together.
    let startup: f64 = ledger.accounts.iter().filter(|a| a.account.is_startup()).map(|a| a.share).sum();
    for f in out.iter_mut().filter(|f| f.id == crate::FindingId::Startup) {
        f.evidence.insert("wall_share".into(), crate::round(startup, 4).into());
    }
}

/// How a finding's `lost_share` is counted once the ledger is drawn.
pub(crate) const LEDGER_SHARE: &str = "ledger: the seconds of the account it explains, over the wall time";

/// A finding's `lost_share` becomes the share of the ledger account it explains, so that the
/// findings' shares add up as the disjoint accounts do; what its rule measured on its own base
/// stays in the evidence as `own_share` with `own_share_basis`. A finding that explains no
/// account loses nothing the ledger can show.
fn on_the_ledger(f: &mut Finding) {
    if let Some(own) = f.lost_share.take() {
        f.evidence.insert("own_share".into(), own.into());
        if let Some(basis) = f.lost_share_basis.take() {
            f.evidence.insert("own_share_basis".into(), basis.into());
        }
    }
    if let Some(wall) = f.evidence.get("wall_share").and_then(serde_json::Value::as_f64) {
        f.lost_share = Some(wall);
        f.lost_share_basis = Some(LEDGER_SHARE);
    }
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
    a.finding_gpu = crate::ledger::primary(run).map(|g| g.gpu);
    let mut f = Finding::new(
        crate::FindingId::HostBound,
        Severity::Warning,
        format!(
            "Host-side work inside the steps: the GPU idle {:.0}% of the wall time between the loop's data waits",
            100.0 * a.share
        ),
    )
    .with("seconds", crate::round(a.seconds, 1))
    .with("wall_share", a.share)
    .advise(&[
        "gpulse run samples the job's main thread (unless --no-stacks) and names the line and the mechanism of this time",
        "remove per-step synchronizations: .item(), .cpu(), print(loss) and torch.cuda.synchronize() inside the loop",
        "cut launch overhead with torch.compile(mode=\"reduce-overhead\") or CUDA graphs; do more work per launch with a larger batch",
    ])
    .limit("by elimination: the steps' time less their measured waits, with the GPU idle; what the host did is not known");
    if let Some(l) = loop_s.filter(|l| *l > 0.0) {
        f = f.with("loop_share", crate::round((a.seconds / l).min(1.0), 3));
    }
    if let Some(g) = a.finding_gpu {
        f = f.on_gpu(g);
    }
    Some(f.inferred())
}

/// Mean of a slice; `None` when empty.
pub(crate) fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Population standard deviation.
pub(crate) fn stdev(v: &[f64]) -> Option<f64> {
    let m = mean(v)?;
    Some((v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len() as f64).sqrt())
}

const GIB: f64 = gpulse_model::GIB as f64;
