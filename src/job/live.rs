//! The job as it runs: a rolling diagnosis over the last minutes, the findings worth writing
//! down as they appear (a memory forecast, before the OOM it forecasts), and the status text.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use gpulse_diagnose::{Finding, Run};
use gpulse_model::DeviceInfo;
use gpulse_record::{Event, Marker, Recording};

use crate::recorder::Poll;

/// How much of the run the live diagnosis reads.
const WINDOW_US: i64 = 10 * 60 * 1_000_000;
/// How often it runs.
const DIAGNOSE_EVERY: Duration = Duration::from_secs(5);
/// Memory trend is the slope over this much of the latest samples.
const TREND_US: i64 = 30 * 1_000_000;

pub struct Live {
    window: Recording,
    last_diagnosis: Option<Instant>,
    leading: Option<Finding>,
    /// Finding id → the time-to-OOM last written for it (`None` when it had none).
    written: HashMap<&'static str, Option<f64>>,
    run: Option<Run>,
}

impl Live {
    pub fn new(devices: &[DeviceInfo]) -> Self {
        Self {
            window: Recording { devices: devices.to_vec(), ..Recording::default() },
            last_diagnosis: None,
            leading: None,
            written: HashMap::new(),
            run: None,
        }
    }

    pub fn push_poll(&mut self, poll: &Poll) {
        if let Some(s) = &poll.snapshot {
            self.window.snapshots.push(s.clone());
        }
        self.window.host.push(poll.host.clone());
        if let Some(t) = &poll.tree {
            self.window.trees.push(t.clone());
        }
        let now = poll.host.timestamp_us;
        let keep = |t_us: i64| now - t_us <= WINDOW_US;
        self.window.snapshots.retain(|s| keep(s.timestamp_us));
        self.window.host.retain(|h| keep(h.timestamp_us));
        self.window.trees.retain(|t| keep(t.timestamp_us));
        self.window.events.retain(|e| keep(e.t_ms * 1000));
        self.window.markers.retain(|m| keep(m.t_us));
    }

    pub fn push_markers(&mut self, marks: &[Marker]) {
        self.window.markers.extend_from_slice(marks);
    }

    pub fn push_event(&mut self, e: &Event) {
        self.window.events.push(e.clone());
    }

    /// Diagnoses when due; returns the findings to write down: those not seen before, and a
    /// memory forecast that moved by a quarter or more.
    pub fn update(&mut self) -> Vec<Finding> {
        if self.last_diagnosis.is_some_and(|t| t.elapsed() < DIAGNOSE_EVERY) {
            return Vec::new();
        }
        self.last_diagnosis = Some(Instant::now());
        let run = Run::from_recording(&self.window);
        let findings = gpulse_diagnose::diagnose_run(&run);
        self.run = Some(run);
        let mut fresh = Vec::new();
        for f in &findings {
            let oom_s = f.evidence.get("time_to_oom_s").and_then(serde_json::Value::as_f64);
            let new = match self.written.get(f.id) {
                None => true,
                Some(before) => match (before, oom_s) {
                    (Some(b), Some(now)) => (now - b).abs() >= 0.25 * b.abs().max(1.0),
                    (None, Some(_)) => true,
                    _ => false,
                },
            };
            if new {
                self.written.insert(f.id, oom_s);
                fresh.push(f.clone());
            }
        }
        self.leading = findings.into_iter().find(|f| f.id != "healthy" || self.leading.is_none());
        fresh
    }

    /// One line: each GPU's util, SM activity and memory with its trend; the tree's CPU; steps;
    /// the leading finding.
    pub fn status_text(&self) -> String {
        let mut parts = Vec::new();
        if let Some(snap) = self.window.snapshots.last() {
            for g in &snap.gpus {
                let mut s = format!("GPU{}", g.gpu_index);
                match g.util_gpu_pct {
                    Some(u) => s += &format!(" {u}%"),
                    None => s += " —",
                }
                if let Some(sm) = g.sm_active_pct() {
                    s += &format!(" SM {sm:.0}%");
                }
                if let Some(used) = g.memory_used_bytes {
                    s += &format!(" {:.1}", used as f64 / GIB);
                    if let Some(total) = g.memory_total_bytes {
                        s += &format!("/{:.0}", total as f64 / GIB);
                    }
                    s += " GiB";
                    if let Some(slope) = self.memory_trend_gib_per_min(g.gpu_index)
                        && slope.abs() >= 0.05
                    {
                        s += &format!(" {}{:.1}/min", if slope > 0.0 { "↑" } else { "↓" }, slope.abs());
                    }
                }
                parts.push(s);
            }
        }
        if let Some(t) = self.window.trees.last() {
            let n = t.processes.len();
            if let Some(cpu) = t.cpu_pct {
                parts.push(format!("tree {cpu:.0}% CPU, {n} proc{}", if n == 1 { "" } else { "s" }));
            }
        }
        if let Some(steps) = self.run.as_ref().and_then(|r| r.steps.as_ref()) {
            let mut s = format!("{:.2} steps/s", steps.per_s());
            if let Some(w) = steps.data_wait_share() {
                s += &format!(", data wait {:.0}%", 100.0 * w);
            }
            parts.push(s);
        }
        if let Some(f) = &self.leading {
            parts.push(format!("{}: {}", f.id, f.title));
        }
        if parts.is_empty() {
            return "watching".to_owned();
        }
        parts.join(" │ ")
    }

    /// Least-squares slope of memory used over the latest [`TREND_US`], GiB a minute.
    fn memory_trend_gib_per_min(&self, gpu: u32) -> Option<f64> {
        let last = self.window.snapshots.last()?.timestamp_us;
        let pts: Vec<(f64, f64)> = self
            .window
            .snapshots
            .iter()
            .filter(|s| last - s.timestamp_us <= TREND_US)
            .filter_map(|s| {
                let g = s.gpus.iter().find(|g| g.gpu_index == gpu)?;
                Some(((s.timestamp_us - last) as f64 / 60e6, g.memory_used_bytes? as f64 / GIB))
            })
            .collect();
        if pts.len() < 5 {
            return None;
        }
        let n = pts.len() as f64;
        let (mx, my) = (pts.iter().map(|p| p.0).sum::<f64>() / n, pts.iter().map(|p| p.1).sum::<f64>() / n);
        let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
        let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        (sxx > 0.0).then(|| sxy / sxx)
    }
}

const GIB: f64 = (1u64 << 30) as f64;
