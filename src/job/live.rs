//! The job as it runs: a rolling diagnosis over the last minutes, the findings worth writing
//! down as they appear (a memory forecast, before the OOM it forecasts), and the status text.

use std::collections::HashMap;

use gpulse_diagnose::{Finding, Run};
use gpulse_model::DeviceInfo;
use gpulse_record::{Event, Marker, Recording};

use crate::recorder::Poll;

/// How much of the run the live diagnosis reads.
const WINDOW_US: i64 = 10 * 60 * 1_000_000;
/// How often it runs.
const DIAGNOSE_EVERY_US: i64 = 5_000_000;
/// Start-up (CUDA context, model build, cuDNN autotuning, the first batches) looks like every
/// problem at once; findings are held back this long.
const WARM_UP_US: i64 = 30_000_000;
/// Steps per second and the data wait shown are over this much of the latest marks.
const RECENT_STEPS_US: i64 = 30 * 1_000_000;
/// Memory trend is the slope over this much of the latest samples.
const TREND_US: i64 = 30 * 1_000_000;

/// Times are the samples' own, so a recording replays through it as it ran.
pub struct Live {
    started_us: Option<i64>,
    now_us: i64,
    window: Recording,
    last_diagnosis_us: Option<i64>,
    leading: Option<Finding>,
    /// Finding id → the time-to-OOM last written for it (`None` when it had none).
    written: HashMap<&'static str, Option<f64>>,
    run: Option<Run>,
}

impl Live {
    /// `instrumented`: the job runs under `--instrument`, so every DataLoader wait is marked.
    pub fn new(devices: &[DeviceInfo], instrumented: bool) -> Self {
        let mut window = Recording { devices: devices.to_vec(), ..Recording::default() };
        if instrumented {
            window.meta.insert("instrumented".into(), "true".into());
        }
        Self {
            started_us: None,
            now_us: 0,
            window,
            last_diagnosis_us: None,
            leading: None,
            written: HashMap::new(),
            run: None,
        }
    }

    pub fn push_poll(&mut self, poll: Poll) {
        let now = poll.host.timestamp_us;
        self.window.snapshots.extend(poll.snapshot);
        self.window.host.push(poll.host);
        self.window.trees.extend(poll.tree);
        self.started_us.get_or_insert(now);
        self.now_us = now;
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
        let Some(started) = self.started_us else { return Vec::new() };
        if self.now_us - started < WARM_UP_US
            || self.last_diagnosis_us.is_some_and(|t| self.now_us - t < DIAGNOSE_EVERY_US)
        {
            return Vec::new();
        }
        self.last_diagnosis_us = Some(self.now_us);
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
        // The loop's pace over its latest marks, from the first status on.
        let recent: Vec<Marker> =
            self.window.markers.iter().filter(|m| self.now_us - m.t_us <= RECENT_STEPS_US).cloned().collect();
        let instrumented = self.window.meta.contains_key("instrumented");
        if let Some(steps) = gpulse_diagnose::Steps::from_markers(&recent, self.now_us, instrumented) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Replays a real `gpulse run` recording through the live view, poll by poll, with its
    /// events and marks as they arrived. Returns each finding written, with its time.
    fn replay(name: &str) -> (Vec<(i64, Finding)>, Recording, Vec<String>) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/h200-gpulse-run").join(name);
        let rec = gpulse_record::read(&path).unwrap();
        let mut live = Live::new(&rec.devices, rec.meta.get("instrumented").is_some_and(|v| v == "true"));
        let mut written = Vec::new();
        let mut statuses = Vec::new();
        let (mut ev, mut mk) = (0, 0);
        for (i, snap) in rec.snapshots.iter().enumerate() {
            let t = snap.timestamp_us;
            let host = rec.host.iter().min_by_key(|h| (h.timestamp_us - t).abs()).cloned().unwrap_or_default();
            let host = gpulse_model::HostSample { timestamp_us: t, ..host };
            let tree = rec.trees.iter().min_by_key(|x| (x.timestamp_us - t).abs()).cloned();
            live.push_poll(Poll { snapshot: Some(snap.clone()), host, tree });
            while mk < rec.markers.len() && rec.markers[mk].t_us <= t {
                live.push_markers(&rec.markers[mk..=mk]);
                mk += 1;
            }
            while ev < rec.events.len() && rec.events[ev].t_ms * 1000 <= t {
                if rec.events[ev].kind != "finding" {
                    live.push_event(&rec.events[ev]);
                }
                ev += 1;
            }
            written.extend(live.update().into_iter().map(|f| (t, f)));
            let status = live.status_text();
            assert!(!status.is_empty(), "poll {i}");
            statuses.push(status);
        }
        (written, rec, statuses)
    }

    #[test]
    fn a_leak_is_forecast_before_it_runs_out_of_memory() {
        let (written, rec, _) = replay("leak.db");
        let oom_us = rec.events.iter().find(|e| e.kind == "cuda_oom").expect("the OOM was caught").t_ms * 1000;
        let forecasts: Vec<(i64, f64)> = written
            .iter()
            .filter(|(_, f)| f.id == "memory_growth")
            .filter_map(|(t, f)| Some((*t, f.evidence.get("time_to_oom_s")?.as_f64()?)))
            .collect();
        let (t, s) = *forecasts.first().expect("a forecast");
        assert!(oom_us - t >= 15_000_000, "the first forecast came {} s before the OOM", (oom_us - t) / 1_000_000);
        let predicted_us = t + (s * 1e6) as i64;
        assert!((predicted_us - oom_us).abs() <= 5_000_000, "predicted {predicted_us}, was {oom_us}");
    }

    #[test]
    fn start_up_is_not_a_finding() {
        // dl_tuned climbs to 7.3 GiB as it starts, then holds: no growth, and no input-bound
        // verdict while its workers fill their queues.
        let (written, _, _) = replay("dl_tuned.db");
        let ids: Vec<&str> = written.iter().map(|(_, f)| f.id).collect();
        assert!(!ids.contains(&"memory_growth") && !ids.contains(&"input_bound"), "{ids:?}");
        let (written, _, statuses) = replay("dl_bound.db");
        assert!(written.iter().any(|(_, f)| f.id == "input_bound"), "dl_bound is input-bound live too");
        // The pace shows as soon as the loop has marked a few steps, before any finding.
        let first_pace = statuses.iter().position(|s| s.contains("steps/s, data wait 8")).expect("the pace");
        let first_finding = statuses.iter().position(|s| s.contains("input_bound")).unwrap();
        assert!(first_pace <= first_finding, "{first_pace} vs {first_finding}");
    }
}
