//! Findings from the ledger: the loop's own marked phases, and time nothing explains.
//!
//! A phase the loop marks (`gpulse.phase("eval")`, the callbacks' validation and checkpoints) is
//! measured time spent on purpose. It is reported when it is a material share of the wall time,
//! and no other rule may blame it on anything else: those rules read the run without it.

use crate::{AccountKind, Cost, Finding, FindingId, Ledger, Run, Severity, round};

/// A tenth of the wall time in one phase is worth knowing; a quarter is a warning: the run
/// spends more time on it than most bottlenecks cost.
const PHASE_INFO: f64 = 0.10;
const PHASE_WARNING: f64 = 0.25;
/// More than a tenth of the wall time in no account is reported, so a ledger never hides it.
const UNEXPLAINED: f64 = 0.10;
/// GPU-Util under this through a phase: the GPU mostly waits on the host in it.
const HOST_LED_PCT: f64 = 30.0;

/// What kind of phase a name is, for its advice.
fn kind(name: &str) -> &'static str {
    match name.to_ascii_lowercase().as_str() {
        "eval" | "evaluate" | "evaluation" | "validation" | "validate" | "val" | "test" => "evaluation",
        "checkpoint" | "save" | "ckpt" => "checkpoint",
        "log" | "logging" => "logging",
        _ => "other",
    }
}

/// Mean GPU-Util of the busiest GPU over the phase's stretches.
fn util_in(run: &Run, spans: &[[f64; 2]]) -> Option<f64> {
    run.gpus
        .iter()
        .filter_map(|g| {
            let v: Vec<f64> = (0..g.t_s.len())
                .filter(|&i| spans.iter().any(|s| g.t_s[i] >= s[0] && g.t_s[i] < s[1]))
                .filter_map(|i| g.util_pct[i])
                .collect();
            crate::run::mean(&v)
        })
        .reduce(f64::max)
}

pub fn findings(run: &Run, ledger: &Ledger) -> Vec<Finding> {
    let mut out = Vec::new();
    let of = |kind: AccountKind| ledger.accounts.iter().filter(|a| a.account == kind).collect::<Vec<_>>();
    for a in ledger.accounts.iter().filter(|a| a.account == AccountKind::Phase) {
        let share = a.seconds / ledger.wall_s.max(1e-9);
        if share < PHASE_INFO {
            continue;
        }
        let spans: Vec<[f64; 2]> = run.phases_s.iter().filter(|p| p.0 == a.label).map(|p| p.1).collect();
        let mean_s = spans.iter().map(|s| s[1] - s[0]).sum::<f64>() / spans.len().max(1) as f64;
        let severity = if share >= PHASE_WARNING { Severity::Warning } else { Severity::Info };
        let util = util_in(run, &spans);
        let mut f = Finding::new(
            FindingId::MarkedPhase,
            severity,
            format!(
                "The loop's '{}' phase took {{wall}} of the wall time: {} {}, {} each on average (measured)",
                a.label,
                spans.len(),
                if spans.len() == 1 { "time" } else { "times" },
                if mean_s >= 1.0 { format!("{mean_s:.1} s") } else { format!("{:.0} ms", 1000.0 * mean_s) }
            ),
        )
        .phase(a.label.clone())
        .with("phase_s", round(a.seconds, 1))
        .with("count", spans.len() as u64)
        .with("mean_s", round(mean_s, 2))
        .priced(Cost::of_accounts(&[a], 1.0, None));
        if let (Some(first), Some(last)) = (spans.first(), spans.last()) {
            f = f.over([first[0], last[1]]);
        }
        if let Some(u) = util {
            f = f.with("util_gpu_mean_pct", round(u, 1));
        }
        let host_led = util.is_some_and(|u| u < HOST_LED_PCT);
        f = match kind(&a.label) {
            "evaluation" => {
                if host_led {
                    f = f.advise(&["the GPU idles through it: evaluation waits on its data or on Python, not on the GPU; give the validation DataLoader its own num_workers, pin_memory=True and persistent_workers=True, and a larger batch"]);
                }
                f.advise(&[
                    "evaluate less often or on fewer batches (Lightning: val_check_interval, limit_val_batches; Hugging Face: eval_steps, a smaller eval_dataset)",
                    "evaluate under torch.inference_mode() with a larger batch than training uses",
                ])
            }
            "checkpoint" => f.advise(&[
                "save asynchronously (torch.distributed.checkpoint.async_save, or a background thread writing a CPU copy of the state_dict)",
                "save less often, or only the model's weights between full checkpoints; write to fast local disk",
            ]),
            _ => f.advise(&[
                "find what runs in it: py-spy dump --pid PID during one, or the PyTorch profiler around it",
                "do it less often, or off the training thread",
            ]),
        };
        out.push(f);
    }
    // Bulk writes with the GPU idle and no phase marking them: checkpoints, by the I/O counters.
    // An inferred account of a twentieth of the run is named, as every inferred cause is.
    let writing = ledger.share(AccountKind::StorageWrite);
    if writing >= super::MATERIAL {
        let secs = ledger.seconds(AccountKind::StorageWrite);
        // The bytes of the same intervals the ledger counted: bulk writes with the GPU idle.
        let written: f64 = crate::run::primary(run)
            .map_or(0.0, |g| crate::run::bulk_writes_gpu_idle(run, g).iter().map(|w| w.1).sum());
        out.push(
            Finding::new(
                FindingId::CheckpointWrites,
                if writing >= PHASE_WARNING { Severity::Warning } else { Severity::Info },
                format!(
                    "The job wrote {:.1} GB to storage while the GPU stood idle, {{wall}} of the wall time: saving checkpoints, by its I/O counters",
                    written / 1e9
                ),
            )
            .with("written_gb", round(written / 1e9, 2))
            .with("seconds", round(secs, 1))
            .priced(Cost::of_accounts(&of(AccountKind::StorageWrite), 1.0, None))
            .advise(&[
                "save asynchronously (torch.distributed.checkpoint.async_save, or a background thread writing a CPU copy of the state_dict)",
                "save less often, or only the model's weights between full checkpoints; write to fast local disk",
                "gpulse run --instrument times each torch.save, so the time is measured rather than inferred",
            ])
            .inferred(),
        );
    }
    let unexplained = ledger.share(AccountKind::Unexplained);
    // A run too short to judge a steady state says nothing by what it leaves unexplained, nor
    // does a machine whose GPUs did no work and ran no job: there is no loop to mark.
    let idle_machine = !run.gpus.is_empty() && run.gpus.iter().all(|g| !g.busy() && !crate::run::has_a_job(run, g));
    if unexplained > UNEXPLAINED && ledger.wall_s >= super::MIN_ACTIVE_S && !idle_machine {
        let parts: Vec<String> = ledger
            .accounts
            .iter()
            .filter(|a| a.account == AccountKind::Unexplained)
            .map(|a| format!("{:.1} s {}", a.seconds, a.label.trim_start_matches("unexplained: ")))
            .collect();
        out.push(
            Finding::new(
                FindingId::UnexplainedTime,
                Severity::Info,
                format!("{{wall}} of the wall time is in no account: {}", parts.join(", ")),
            )
            .with("unexplained_s", round(ledger.seconds(AccountKind::Unexplained), 1))
            .priced(Cost::of_accounts(&of(AccountKind::Unexplained), 1.0, None))
            .advise(&[
                "mark the loop: gpulse run --instrument times steps and data waits; with gpulse.phase(\"name\") around evaluation, logging or anything else, its time gets an account of its own",
            ])
            .inferred(),
        );
    }
    out
}
