//! A recording or an nvidia-smi log, read and diagnosed: what `diagnose`, `report`, `compare`,
//! `serve`'s report and a finished job's summary all start from.

use gpulse_input::load_each;
use gpulse_model::MetaKey;
use gpulse_report::Analysis;

/// A recording already held whole (a replay's), as a run and its one analysis.
pub fn diagnose_recording(rec: &gpulse_model::RunData) -> (gpulse_diagnose::Run, gpulse_diagnose::Diagnosis) {
    let run = gpulse_diagnose::Run::from_recording(rec);
    let diagnosis = gpulse_diagnose::Diagnosis::of(&run);
    (run, diagnosis)
}

/// Reads `path` (snapshots stream into the per-GPU series: a day of 8 GPUs is never held whole)
/// and diagnoses it.
pub fn analyze(path: &std::path::Path) -> anyhow::Result<Analysis> {
    let mut builder = gpulse_diagnose::RunBuilder::default();
    let mut samples = 0usize;
    let mut recording = load_each(path, &mut |snap| {
        samples += 1;
        builder.push(&snap);
    })?;
    if samples == 0 && recording.host.is_empty() && recording.markers.is_empty() {
        // A compute-apps log lists processes, not GPU readings: say so, and what would do.
        if recording.meta_value(MetaKey::NvidiaSmiAppFields).is_some() {
            let logs = recording
                .meta_value(MetaKey::Source)
                .and_then(|s| s.strip_prefix("nvidia-smi csv: "))
                .unwrap_or("APPS.csv");
            anyhow::bail!(
                "{} holds no GPU samples to diagnose: it is a --query-compute-apps log, which lists processes only; \
                 import it with the run's --query-gpu log (gpulse import GPU.csv {logs} -o run.db) and diagnose that",
                path.display()
            );
        }
        anyhow::bail!("{} holds no samples", path.display());
    }
    let stacks = std::mem::take(&mut recording.stacks);
    let run = builder.finish_with(&recording, stacks);
    let diagnosis = gpulse_diagnose::Diagnosis::of(&run);
    let t = |us: i64| (us - run.start_us) as f64 / 1e6;
    let phases = recording
        .markers
        .iter()
        .filter(|m| m.kind == gpulse_model::MarkerKind::Phase && m.name.as_deref() != Some("data"))
        .map(|m| (m.name.clone().unwrap_or_default(), t(m.t_us), m.dur_us.unwrap_or(0) as f64 / 1e6))
        .collect();
    let command = recording.meta_value(MetaKey::Command).map(str::to_owned);
    Ok(Analysis { run, diagnosis, gpus: recording.devices.len(), samples, command, phases })
}
