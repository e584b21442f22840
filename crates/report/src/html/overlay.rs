//! What is drawn over the lines: each finding's window on the charts it concerns, and the
//! run's events as markers.

use gpulse_diagnose::{Finding, FindingId, Run};
use gpulse_model::EventKind;
use serde_json::Value;

use super::chart::{Band, Mark, MarkKind, Scope};
use crate::Analysis;

/// One colour per finding, so its window reads the same on every chart.
const PALETTE: [&str; 6] = ["#f5a623", "#7b61ff", "#00a0a0", "#e0457b", "#4a90e2", "#8bc34a"];

/// Phases are marked while a name has at most this many: per-step phases would bury the chart.
const MAX_PHASE_MARKS: usize = 50;

/// The bands and marks of every scope.
pub struct Overlay {
    bands: Vec<(Option<u32>, Band)>,
    /// A mark with a GPU shows on that GPU's charts and the run's; one without, on every chart.
    marks: Vec<(Option<u32>, Mark)>,
}

impl Overlay {
    pub fn new(a: &Analysis) -> Self {
        Self { bands: bands(&a.diagnosis.findings), marks: marks(a) }
    }

    /// A GPU's charts show its findings and the run-wide ones; the run's charts the run-wide only.
    pub fn bands(&self, scope: Scope) -> Vec<Band> {
        self.bands
            .iter()
            .filter(|(gpu, _)| match scope {
                Scope::Gpu(g) => gpu.is_none_or(|f| f == g),
                Scope::Run => gpu.is_none(),
            })
            .map(|b| b.1.clone())
            .collect()
    }

    pub fn marks(&self, scope: Scope) -> Vec<Mark> {
        self.marks
            .iter()
            .filter(|(gpu, _)| match scope {
                Scope::Gpu(g) => gpu.is_none_or(|m| m == g),
                Scope::Run => true,
            })
            .map(|m| m.1.clone())
            .collect()
    }

    /// The latest moment anything here is placed at, seconds since the start.
    pub fn end_s(&self) -> f64 {
        let bands = self.bands.iter().map(|b| b.1.to_s);
        bands.chain(self.marks.iter().map(|m| m.1.t_s)).fold(f64::NEG_INFINITY, f64::max)
    }
}

/// Each finding's window, labelled with its id, and a stall's pauses inside it.
fn bands(findings: &[Finding]) -> Vec<(Option<u32>, Band)> {
    let mut out = Vec::new();
    let placed = findings.iter().filter(|f| f.window_s.is_some() || !f.pauses_s.is_empty());
    for (i, f) in placed.enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        if let Some([a, b]) = f.window_s {
            let text = format!("{}: {} ({a:.1}–{b:.1} s)", f.id, f.title);
            out.push((f.gpu, Band { finding: f.id.as_str(), text, from_s: a, to_s: b, color, pause: false }));
        }
        for [a, b] in &f.pauses_s {
            let text = format!("{}: pause {a:.1}–{b:.1} s", f.id);
            out.push((f.gpu, Band { finding: f.id.as_str(), text, from_s: *a, to_s: *b, color, pause: true }));
        }
    }
    out
}

fn gpu_of(payload: &Value) -> Option<u32> {
    payload.get("gpu").and_then(Value::as_u64).and_then(|g| u32::try_from(g).ok())
}

/// The events as markers: OOM and a lost GPU labelled on the plot, the rest as thin lines; the
/// loop's phases (checkpoint, eval) too.
fn marks(a: &Analysis) -> Vec<(Option<u32>, Mark)> {
    let run: &Run = &a.run;
    let mut out = Vec::new();
    for (kind, t, payload) in run.events.iter().filter(|e| !matches!(e.0, EventKind::Stop | EventKind::Finding)) {
        let label = match kind {
            EventKind::Oom | EventKind::CudaOom => Some("OOM"),
            EventKind::GpuLost => Some("GPU lost"),
            _ => None,
        };
        let detail = super::page::event_text(payload);
        let text = format!("{kind} at {t:.1} s: {detail}");
        out.push((gpu_of(payload), Mark { t_s: *t, kind: MarkKind::Event(kind.clone()), text, label }));
    }
    // A GPU the samples found lost, and an OOM read from memory alone, have no event of their own.
    for g in &run.gpus {
        if let Some(t) = g.lost_at_s
            && !out.iter().any(|(gpu, m)| m.kind == MarkKind::Event(EventKind::GpuLost) && *gpu == Some(g.gpu))
        {
            let text = format!("GPU {} lost at {t:.1} s: it stopped answering NVML", g.gpu);
            out.push((
                Some(g.gpu),
                Mark { t_s: t, kind: MarkKind::Event(EventKind::GpuLost), text, label: Some("GPU lost") },
            ));
        }
    }
    for f in a.diagnosis.findings.iter().filter(|f| f.id == FindingId::Oom && !f.evidence.contains_key("message")) {
        if let Some(t) = f.evidence.get("at_s").and_then(Value::as_f64) {
            out.push((
                f.gpu,
                Mark { t_s: t, kind: MarkKind::Event(EventKind::Oom), text: f.title.clone(), label: Some("OOM") },
            ));
        }
    }
    for (name, t, dur) in &a.phases {
        if a.phases.iter().filter(|p| p.0 == *name).count() <= MAX_PHASE_MARKS {
            let text = format!("phase {name} at {t:.1} s, for {dur:.1} s");
            out.push((None, Mark { t_s: *t, kind: MarkKind::Phase, text, label: None }));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use gpulse_diagnose::{Diagnosis, Severity};

    use super::*;

    #[test]
    fn a_gpus_finding_shades_its_charts_and_a_run_wide_one_every_chart() {
        let findings = vec![
            Finding::new(FindingId::PeriodicStall, Severity::Warning, "stall".into()).on_gpu(1).over([2.0, 9.0]),
            Finding::new(FindingId::InputBound, Severity::Critical, "input".into()).over([1.0, 5.0]),
        ];
        let a = Analysis { diagnosis: Diagnosis { findings, ..Diagnosis::default() }, ..Analysis::default() };
        let o = Overlay::new(&a);
        let ids = |s: Scope| o.bands(s).iter().map(|b| b.finding).collect::<Vec<_>>();
        assert_eq!(ids(Scope::Gpu(0)), ["input_bound"]);
        assert_eq!(ids(Scope::Gpu(1)), ["periodic_stall", "input_bound"]);
        assert_eq!(ids(Scope::Run), ["input_bound"]);
    }

    #[test]
    fn an_oom_stands_out_on_its_gpu_and_the_runs_charts() {
        let run = Run {
            events: vec![
                (EventKind::CudaOom, 59.0, serde_json::json!({"gpu": 0, "text": "CUDA out of memory"})),
                (EventKind::NcclError, 30.0, serde_json::json!({"text": "NCCL WARN"})),
                (EventKind::Stop, 60.0, serde_json::json!({})),
            ],
            ..Run::default()
        };
        let a = Analysis { run, phases: vec![("checkpoint".into(), 40.0, 2.5)], ..Analysis::default() };
        let o = Overlay::new(&a);
        let kinds = |s: Scope| o.marks(s).iter().map(|m| m.kind.as_str().to_owned()).collect::<Vec<_>>();
        assert_eq!(kinds(Scope::Gpu(0)), ["cuda_oom", "nccl_error", "phase"]);
        assert_eq!(kinds(Scope::Gpu(1)), ["nccl_error", "phase"], "the OOM was GPU 0's");
        assert_eq!(kinds(Scope::Run), ["cuda_oom", "nccl_error", "phase"]);
        assert_eq!(o.marks(Scope::Gpu(0))[0].label, Some("OOM"));
        assert!(o.marks(Scope::Run)[1].text.contains("NCCL WARN"));
    }
}
