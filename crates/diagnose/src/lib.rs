//! Findings: why a run is slow, with the evidence they rest on and advice in PyTorch terms.
//!
//! Each rule lives in `rules/` and reads a [`Run`]: per-GPU series cut to the window where the
//! job was active, plus processes, the host and events when the input has them. Rules state what
//! they could not tell when the input lacks a field. Thresholds are reasoned in
//! `docs/diagnosis.md`, not fitted to any trace.

pub mod compare;
mod forecast;
mod live;
mod rules;
mod series;
mod steps;

use serde::Serialize;
use serde_json::{Map, Value};

pub use forecast::{Forecast, time_to_full};
pub use live::LiveDiagnosis;
pub use series::{GpuSeries, Run, RunBuilder};
pub use steps::Steps;

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Critical,
    Warning,
    Info,
}

/// One diagnosis.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Stable identifier, such as `input_bound`.
    pub id: &'static str,
    pub severity: Severity,
    /// One line with the key number.
    pub title: String,
    /// The numbers, the time window and the GPUs it rests on.
    pub evidence: Map<String, Value>,
    /// What to do, in PyTorch terms.
    pub advice: Vec<String>,
    /// What the input could not tell, and what to record to be sure.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<String>,
}

impl Finding {
    fn new(id: &'static str, severity: Severity, title: String) -> Self {
        Self { id, severity, title, evidence: Map::new(), advice: Vec::new(), limits: Vec::new() }
    }

    fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.evidence.insert(key.to_owned(), value.into());
        self
    }

    fn advise(mut self, advice: &[&str]) -> Self {
        self.advice.extend(advice.iter().map(|a| (*a).to_owned()));
        self
    }

    fn limit(mut self, what: &str) -> Self {
        self.limits.push(what.to_owned());
        self
    }
}

/// Every finding for a recording held whole, worst first.
pub fn diagnose(rec: &gpulse_model::RunData) -> Vec<Finding> {
    diagnose_run(&Run::from_recording(rec))
}

/// Every finding for a run, worst first.
pub fn diagnose_run(run: &Run) -> Vec<Finding> {
    let mut out = rules::all(run);
    out.sort_by_key(|f| f.severity);
    out
}

/// Rounds for display in evidence.
fn round(v: f64, digits: i32) -> f64 {
    let p = 10f64.powi(digits);
    (v * p).round() / p
}
