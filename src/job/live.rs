//! The job as it runs: a rolling diagnosis over the last minutes, the findings worth writing
//! down as they appear (a memory forecast, before the OOM it forecasts), and the status text.

use std::collections::HashMap;

use gpulse_diagnose::{Finding, Run};
use gpulse_model::DeviceInfo;
use gpulse_record::{Event, Marker, Recording};

use gpulse_model::Poll;

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
    /// (finding id, GPU) → the time-to-OOM last written for it (`None` when it had none).
    written: HashMap<(&'static str, Option<u64>), Option<f64>>,
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
        let fresh = self.worth_writing(&findings);
        self.leading = findings.into_iter().find(|f| f.id != "healthy" || self.leading.is_none());
        fresh
    }

    /// The findings not written before, each GPU's on its own, and memory forecasts that moved by
    /// a quarter or more.
    fn worth_writing(&mut self, findings: &[Finding]) -> Vec<Finding> {
        let mut fresh = Vec::new();
        for f in findings {
            let oom_s = f.evidence.get("time_to_oom_s").and_then(serde_json::Value::as_f64);
            let key = (f.id, f.evidence.get("gpu").and_then(serde_json::Value::as_u64));
            let new = match self.written.get(&key) {
                None => true,
                Some(before) => match (before, oom_s) {
                    (Some(b), Some(now)) => (now - b).abs() >= 0.25 * b.abs().max(1.0),
                    (None, Some(_)) => true,
                    _ => false,
                },
            };
            if new {
                self.written.insert(key, oom_s);
                fresh.push(f.clone());
            }
        }
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
                    match self.memory_trend_gib_per_min(g.gpu_index) {
                        Some(slope) if slope.abs() >= 0.05 => {
                            s += &format!(" {}{:.1} GiB/min", if slope > 0.0 { "↑" } else { "↓" }, slope.abs());
                        }
                        Some(_) => s += " steady",
                        None => {}
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

    /// Memory's trend over the latest [`TREND_US`], GiB a minute: the median of the slopes
    /// between pairs of samples (Theil–Sen), which one step such as a start-up climb cannot move,
    /// and none where the latest third of the window does not share it (a climb that stopped).
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
        let slope = median_slope(&pts)?;
        let third = TREND_US as f64 / 3.0 / 60e6;
        let recent: Vec<(f64, f64)> = pts.iter().copied().filter(|p| p.0 >= -third).collect();
        match median_slope(&recent) {
            Some(r) if recent.len() >= 3 && (r.signum() != slope.signum() || r.abs() < slope.abs() / 3.0) => Some(0.0),
            _ => Some(slope),
        }
    }
}

/// The median of the slopes between every pair of points, over at most 120 of them evenly
/// spaced, so a 20 ms interval costs no more than a 250 ms one.
fn median_slope(pts: &[(f64, f64)]) -> Option<f64> {
    let stride = pts.len().div_ceil(120).max(1);
    let pts: Vec<&(f64, f64)> = pts.iter().step_by(stride).collect();
    let mut slopes = Vec::with_capacity(pts.len() * pts.len() / 2);
    for (i, a) in pts.iter().enumerate() {
        for b in &pts[i + 1..] {
            if b.0 > a.0 {
                slopes.push((b.1 - a.1) / (b.0 - a.0));
            }
        }
    }
    if slopes.is_empty() {
        return None;
    }
    let mid = slopes.len() / 2;
    Some(*slopes.select_nth_unstable_by(mid, f64::total_cmp).1)
}

const GIB: f64 = gpulse_model::GIB as f64;

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
            live.push_poll(Poll { snapshot: Some(snap.clone()), host, tree, ..Default::default() });
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

    /// A live view fed one GPU's memory in GiB, a sample a second.
    fn memory_status(gib: impl Iterator<Item = f64>) -> String {
        let mut live = Live::new(&[DeviceInfo::default()], false);
        for (i, g) in gib.enumerate() {
            let t = 1_000_000_000 + i as i64 * 1_000_000;
            let gpu = gpulse_model::GpuSample {
                memory_used_bytes: Some((g * GIB) as u64),
                memory_total_bytes: Some(141 << 30),
                ..Default::default()
            };
            let snapshot = gpulse_model::Snapshot { timestamp_us: t, gpus: vec![gpu] };
            let host = gpulse_model::HostSample { timestamp_us: t, ..Default::default() };
            live.push_poll(Poll { snapshot: Some(snapshot), host, ..Default::default() });
        }
        live.status_text()
    }

    #[test]
    fn each_gpus_finding_is_written_once() {
        let mut live = Live::new(&[], false);
        let on = |gpu: u32| Finding {
            id: "input_bound",
            severity: gpulse_diagnose::Severity::Warning,
            title: String::new(),
            evidence: [("gpu".to_owned(), serde_json::Value::from(gpu))].into_iter().collect(),
            advice: Vec::new(),
            limits: Vec::new(),
        };
        let ids = |f: Vec<Finding>| f.iter().map(|f| f.evidence["gpu"].as_u64().unwrap()).collect::<Vec<_>>();
        assert_eq!(ids(live.worth_writing(&[on(0)])), [0]);
        assert_eq!(ids(live.worth_writing(&[on(0), on(1)])), [1], "GPU 1's is news, GPU 0's is not");
        assert!(live.worth_writing(&[on(0), on(1)]).is_empty());
    }

    #[test]
    fn a_climb_that_stopped_is_no_trend_and_a_leak_is() {
        // 10 s at 0.5 GiB, a climb to 134.5 GiB, then 20 s flat there: the memory is steady.
        let climb = (0..40).map(|i| if i < 10 { 0.5 } else { 134.5 });
        let s = memory_status(climb);
        assert!(s.contains("134.5/141 GiB steady"), "{s}");
        // A leak of 2 GiB a minute over a minute, in MiB steps as NVML reports it.
        let leak = (0..60).map(|i| 10.0 + (2.0 * i as f64 / 60.0 * 1024.0).round() / 1024.0);
        let s = memory_status(leak);
        let slope: f64 = s.split('↑').nth(1).and_then(|r| r.split(' ').next()).and_then(|v| v.parse().ok()).unwrap();
        assert!((slope - 2.0).abs() <= 0.1, "{s}");
        assert!(s.contains(" GiB/min"), "{s}");
        // Too few samples: no claim either way.
        assert!(!memory_status((0..3).map(|_| 1.0)).contains("steady"));
    }

    #[test]
    fn start_up_is_not_a_finding() {
        // dl_tuned climbs to 7.3 GiB as it starts, then holds: no growth, and no input-bound
        // verdict while its workers fill their queues.
        let (written, rec, statuses) = replay("dl_tuned.db");
        let ids: Vec<&str> = written.iter().map(|(_, f)| f.id).collect();
        assert!(!ids.contains(&"memory_growth") && !ids.contains(&"input_bound"), "{ids:?}");
        // Once the recording's own memory holds still for the trend's window, no trend is shown.
        let used = |i: usize| rec.snapshots[i].gpus[0].memory_used_bytes.unwrap() as f64 / GIB;
        let t = |i: usize| rec.snapshots[i].timestamp_us;
        let flat_from =
            (0..rec.snapshots.len()).find(|&i| (i..rec.snapshots.len()).all(|j| (used(j) - used(i)).abs() < 0.01));
        let flat_from = flat_from.expect("dl_tuned holds its memory at the end");
        for (i, s) in statuses.iter().enumerate().filter(|&(i, _)| t(i) - t(flat_from) > TREND_US) {
            assert!(!s.contains('↑') && !s.contains('↓'), "poll {i}: {s}");
        }
        let (written, _, statuses) = replay("dl_bound.db");
        assert!(written.iter().any(|(_, f)| f.id == "input_bound"), "dl_bound is input-bound live too");
        // The pace shows as soon as the loop has marked a few steps, before any finding.
        let first_pace = statuses.iter().position(|s| s.contains("steps/s, data wait 8")).expect("the pace");
        let first_finding = statuses.iter().position(|s| s.contains("input_bound")).unwrap();
        assert!(first_pace <= first_finding, "{first_pace} vs {first_finding}");
    }
}
