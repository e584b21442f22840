//! The rules. Each takes the run and returns its findings.

mod binding;
mod ended;
mod host;
mod memory;
mod processes;
mod stall;
mod startup;
pub(crate) mod steps;
mod tensor;
#[cfg(test)]
pub(crate) mod testing;
mod throttle;
mod transfer;
mod utilization;

use crate::{Finding, Run};

pub fn all(run: &Run) -> Vec<Finding> {
    let mut out = Vec::new();
    let stalls = stall::findings(run);
    // Waits that lie mostly in a stall's pauses are that stall's cause: it carries them.
    let carried = stalls
        .iter()
        .any(|f| f.evidence.get("data_wait_in_pauses_share").and_then(|v| v.as_f64()).is_some_and(|s| s >= 0.5));
    if !carried {
        out.extend(steps::input_bound(run));
    }
    out.extend(utilization::findings(run, &stalls));
    out.extend(transfer::findings(run));
    out.extend(host::findings(run));
    out.extend(tensor::findings(run));
    out.extend(startup::findings(run));
    out.extend(memory::findings(run));
    out.extend(stalls);
    out.extend(throttle::findings(run));
    out.extend(processes::findings(run));
    out.extend(utilization::imbalance(run));
    out.extend(binding::findings(run));
    out.extend(ended::gpu_lost(run));
    out.extend(ended::host_oom(run));
    // Other processes' memory says nothing about how well the job itself runs.
    let troubled = out
        .iter()
        .any(|f| f.severity <= crate::Severity::Warning && !matches!(f.id, "idle_holder" | "foreign_process"));
    if !troubled {
        out.extend(utilization::healthy(run));
    }
    out
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
