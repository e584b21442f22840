//! The rules. Each takes the run and returns its findings.

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
pub(crate) mod tensor;
#[cfg(test)]
pub(crate) mod testing;
mod throttle;
mod transfer;
mod utilization;
mod workers;

use crate::{Basis, Finding, Ledger, Run, Severity};

/// A cost below a twentieth of the wall time: fixing it would speed the run by 1.05× at most.
pub(crate) const MATERIAL: f64 = 0.05;
/// Windows shorter than this hold too few samples to judge a steady state.
pub(crate) const MIN_ACTIVE_S: f64 = 10.0;

/// Every rule's findings, and the ledger they are ranked by. Rules that read the GPU's idle time
/// see the run without the loop's marked phases; the phases have findings of their own.
pub fn all(full: &Run) -> (Vec<Finding>, Ledger) {
    let masked = full.outside_phases();
    let run = masked.as_ref().unwrap_or(full);
    let mut out = Vec::new();
    let stalls = stall::findings(run);
    // Waits that lie mostly in a stall's pauses are that stall's cause: it carries them.
    let carried = stalls
        .iter()
        .any(|f| f.evidence.get("data_wait_in_pauses_share").and_then(|v| v.as_f64()).is_some_and(|s| s >= 0.5));
    // A periodic stall at each epoch start already names the restarts, with their period.
    let restarting = stalls.iter().any(|f| f.evidence.get("cause").is_some_and(|c| c == "epoch_restart"));
    let restarts = if carried || restarting { Vec::new() } else { epoch::findings(full) };
    if !carried && !restarting && restarts.is_empty() {
        out.extend(steps::input_bound(full));
    }
    out.extend(restarts);
    out.extend(utilization::findings(run, &stalls));
    out.extend(transfer::findings(run));
    out.extend(host::findings(run));
    out.extend(host::oversubscribed(full));
    out.extend(tensor::findings(run));
    out.extend(startup::findings(full));
    out.extend(memory::findings(full));
    out.extend(workers::findings(full));
    out.extend(stalls);
    out.extend(throttle::findings(run));
    out.extend(processes::findings(full));
    out.extend(utilization::imbalance(run));
    out.extend(binding::findings(full));
    out.extend(ended::gpu_lost(full));
    out.extend(ended::host_oom(full));
    out.extend(errors::findings(full));
    out.extend(health::reset_pending(full));
    out.extend(nvlink::unused(run));
    let ledger = crate::ledger(full, &out);
    // What the main thread did while the GPU idled names the host-side time by its mechanism.
    let ledger = crate::main_thread::split(full, ledger, &mut out);
    let loop_s = crate::ledger::loop_window(full).0.map(|w| w[1] - w[0]);
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
    for f in &mut out {
        let Some(account) = f.id.own_account(f.basis) else { continue };
        f.evidence.insert("wall_share".into(), crate::round(ledger.share(account), 4).into());
    }
    out.extend(phases::findings(full, &ledger));
    // Other processes' memory, and what the ledger alone says, say nothing of how well the job
    // itself runs.
    let troubled = out.iter().any(|f| f.severity <= crate::Severity::Warning && f.id.is_trouble());
    if !troubled {
        out.extend(utilization::healthy(run));
    }
    (out, ledger)
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
