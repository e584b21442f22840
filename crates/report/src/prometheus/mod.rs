//! The Prometheus text exposition (format 0.0.4) of one poll: dcgm-exporter's series under its
//! own names, types, help texts and labels, so its dashboards and alerts work unchanged, then
//! gpulse's own series under Prometheus's naming conventions. A value NVML did not give is left
//! out, never written as 0.

mod dcgm;
mod own;

use std::fmt::Write as _;

use gpulse_diagnose::RollingDiagnosis;
use gpulse_model::{DeviceInfo, Poll};

pub use dcgm::PROBES;

/// The content type of the exposition.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What one exposition is made from.
pub struct Exposition<'a> {
    pub devices: &'a [DeviceInfo],
    pub poll: &'a Poll,
    /// The machine's name, for dcgm-exporter's host label.
    pub hostname: &'a str,
    /// That label's name: `Hostname` in released dcgm-exporters, `hostname` in its newest code.
    pub host_label: &'a str,
    /// The rolling diagnosis: the findings, the forecast and the loop's pace.
    pub rolling: Option<&'a RollingDiagnosis>,
}

/// At most this many processes per GPU get their own series; the rest are summed.
pub const PROCESSES_PER_GPU: usize = 8;

/// Renders the whole exposition.
pub fn render(e: &Exposition) -> String {
    let mut out = String::with_capacity(8 * 1024);
    dcgm::render(e, &mut out);
    own::render(e, &mut out);
    out
}

/// One metric family being written: its `# HELP` and `# TYPE` lines come before its first
/// sample, and not at all when it has none.
struct Family<'o> {
    out: &'o mut String,
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    started: bool,
}

impl<'o> Family<'o> {
    fn new(out: &'o mut String, name: &'static str, kind: &'static str, help: &'static str) -> Self {
        Self { out, name, kind, help, started: false }
    }

    fn sample(&mut self, labels: &str, value: Value) {
        if !self.started {
            self.started = true;
            let _ = writeln!(self.out, "# HELP {} {}", self.name, self.help);
            let _ = writeln!(self.out, "# TYPE {} {}", self.name, self.kind);
        }
        let labels = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
        let _ = match value {
            Value::Int(v) => writeln!(self.out, "{}{labels} {v}", self.name),
            // dcgm-exporter prints doubles with Go's %f.
            Value::Float(v) => writeln!(self.out, "{}{labels} {v:.6}", self.name),
        };
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Value {
    Int(u64),
    Float(f64),
}

/// A workload's labels, escaped: dcgm-exporter's `pod`, `namespace`, `container` (in its
/// order) or `hpc_job`, and with `uid` the pod's UID (for gpulse's own series, where a pod the
/// runtime did not name is still told apart).
fn workload_labels(w: &gpulse_model::Workload, uid: bool) -> Vec<String> {
    let all = w.labels();
    ["pod", "namespace", "container", "hpc_job"]
        .into_iter()
        .chain(uid.then_some("uid"))
        .filter_map(|k| all.iter().find(|(n, _)| *n == k).map(|(n, v)| label(n, v)))
        .collect()
}

/// `name="value"` with the exposition format's escapes.
fn label(name: &str, value: &str) -> String {
    let mut v = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => v.push_str("\\\\"),
            '"' => v.push_str("\\\""),
            '\n' => v.push_str("\\n"),
            c => v.push(c),
        }
    }
    format!("{name}=\"{v}\"")
}

#[cfg(test)]
mod tests;
