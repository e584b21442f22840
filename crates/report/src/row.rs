//! The live status row of a watched job: each GPU's util, SM activity and memory with its trend,
//! the tree's CPU, the loop's pace and the leading finding.

use gpulse_diagnose::RollingDiagnosis;

/// One line: each GPU's util, SM activity and memory with its trend; the tree's CPU; steps;
/// the leading finding.
pub fn status_row(live: &RollingDiagnosis) -> String {
    let mut parts = Vec::new();
    if let Some(snap) = live.window().snapshots.last() {
        for g in &snap.gpus {
            let mut s = format!("GPU{}", g.gpu_index);
            match g.util_gpu_pct {
                Some(u) => s += &format!(" {u}%"),
                None => s += " —",
            }
            if let Some(sm) = g.sm_active_pct() {
                s += &format!(" SM {sm:.0}%");
            }
            if let Some(used) = g.memory_used_gib() {
                s += &format!(" {used:.1}");
                if let Some(total) = g.memory_total_gib() {
                    s += &format!("/{total:.0}");
                }
                s += " GiB";
                match live.memory_trend_gib_per_min(g.gpu_index) {
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
    if let Some(t) = live.window().trees.last() {
        let n = t.processes.len();
        if let Some(cpu) = t.cpu_pct {
            parts.push(format!("tree {cpu:.0}% CPU, {n} proc{}", if n == 1 { "" } else { "s" }));
        }
    }
    // The loop's pace over its latest marks, from the first status on.
    if let Some(steps) = live.recent_steps() {
        let mut s = format!("{:.2} steps/s", steps.per_s());
        if let Some(w) = steps.data_wait_share() {
            s += &format!(", data wait {:.0}%", 100.0 * w);
        }
        parts.push(s);
    }
    if let Some(f) = live.leading() {
        parts.push(format!("{}: {}", f.id, f.title));
    }
    if parts.is_empty() {
        return "watching".to_owned();
    }
    parts.join(" │ ")
}

#[cfg(test)]
mod tests {
    use gpulse_diagnose::{Finding, FindingId, RollingDiagnosis};
    use gpulse_model::{DeviceInfo, Poll};
    use gpulse_record::Recording;

    use super::*;

    const GIB: f64 = gpulse_model::GIB as f64;

    /// The span the trend is taken over (the live diagnosis's own).
    const TREND_US: i64 = 30 * 1_000_000;

    /// Replays a real `gpulse run` recording through the live view, poll by poll, with its
    /// events and marks as they arrived. Returns each finding written, with its time.
    fn replay(name: &str) -> (Vec<(i64, Finding)>, Recording, Vec<String>) {
        let (written, rec, statuses, _) = replay_in("h200-gpulse-run", name);
        (written, rec, statuses)
    }

    /// As [`replay`], from any fixture folder, with the live view at the end.
    fn replay_in(dir: &str, name: &str) -> (Vec<(i64, Finding)>, Recording, Vec<String>, RollingDiagnosis) {
        let path = gpulse_fixtures::root().join(dir).join(name);
        let rec = gpulse_record::read(&path).unwrap();
        let mut live = RollingDiagnosis::new(&rec.devices, rec.instrumented());
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
                if rec.events[ev].kind != gpulse_model::EventKind::Finding {
                    live.push_event(&rec.events[ev]);
                }
                ev += 1;
            }
            written.extend(live.update().into_iter().map(|f| (t, f)));
            let status = status_row(&live);
            assert!(!status.is_empty(), "poll {i}");
            statuses.push(status);
        }
        (written, rec, statuses, live)
    }

    #[test]
    fn the_live_diagnosis_ends_where_diagnose_does() {
        let key = |f: &[Finding]| f.iter().map(|f| (f.id, f.gpu, f.basis)).collect::<Vec<_>>();
        // Every recording of a job the fixtures hold, each shorter than the live window.
        let root = gpulse_fixtures::root();
        let mut checked = 0;
        for dir in ["h200-diagnosis", "h200-gpulse-run", "h200-ledger", "h200-memio", "h200-gpulse", "h200x2-gpulse"] {
            let mut names: Vec<String> = std::fs::read_dir(root.join(dir))
                .unwrap()
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.ends_with(".db"))
                .collect();
            names.sort();
            for name in names {
                let (_, rec, _, live) = replay_in(dir, &name);
                let recorded = gpulse_diagnose::diagnose(&rec);
                assert_eq!(key(&live.findings_now()), key(&recorded), "{dir}/{name}");
                checked += 1;
            }
        }
        assert!(checked >= 25, "{checked} recordings");
    }

    #[test]
    fn a_leak_is_forecast_before_it_runs_out_of_memory() {
        let (written, rec, _) = replay("leak.db");
        let oom_us =
            rec.events.iter().find(|e| e.kind == gpulse_model::EventKind::CudaOom).expect("the OOM was caught").t_ms
                * 1000;
        let forecasts: Vec<(i64, f64)> = written
            .iter()
            .filter(|(_, f)| f.id == FindingId::MemoryGrowth)
            .filter_map(|(t, f)| Some((*t, f.time_to_oom_s?)))
            .collect();
        let (t, s) = *forecasts.first().expect("a forecast");
        assert!(oom_us - t >= 15_000_000, "the first forecast came {} s before the OOM", (oom_us - t) / 1_000_000);
        let predicted_us = t + (s * 1e6) as i64;
        assert!((predicted_us - oom_us).abs() <= 5_000_000, "predicted {predicted_us}, was {oom_us}");
    }

    /// A live view fed one GPU's memory in GiB, a sample a second.
    fn memory_status(gib: impl Iterator<Item = f64>) -> String {
        let mut live = RollingDiagnosis::new(&[DeviceInfo::default()], false);
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
        status_row(&live)
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
        let ids: Vec<FindingId> = written.iter().map(|(_, f)| f.id).collect();
        assert!(!ids.contains(&FindingId::MemoryGrowth) && !ids.contains(&FindingId::InputBound), "{ids:?}");
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
        assert!(written.iter().any(|(_, f)| f.id == FindingId::InputBound), "dl_bound is input-bound live too");
        // The pace shows as soon as the loop has marked a few steps, before any finding.
        let first_pace = statuses.iter().position(|s| s.contains("steps/s, data wait 8")).expect("the pace");
        let first_finding = statuses.iter().position(|s| s.contains("input_bound")).unwrap();
        assert!(first_pace <= first_finding, "{first_pace} vs {first_finding}");
    }
}
