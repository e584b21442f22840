//! What the live diagnosis costs a run: a recording replayed poll by poll through
//! `RollingDiagnosis`, as `run` and `serve` feed it (each poll, then the stack samples and marks
//! up to it, then `update`), timing each poll's whole work.
//!
//! `GPULSE_RANK_HOURS=0.25 cargo bench --bench ranks_stacks` writes a quarter hour of 8 ranks with
//! their stacks; then `cargo bench --bench rolling [-- FILE]` (default /tmp/gpulse-ranks.db), with
//! `GPULSE_POLL_MS=100` to poll ten times as often as the recording did.

use std::time::Instant;

use gpulse_diagnose::RollingDiagnosis;
use gpulse_model::{HostSample, Poll, StackBatch};

/// The live diagnosis's window.
const WINDOW_US: i64 = 600_000_000;

fn main() {
    let path = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map_or_else(|| std::path::PathBuf::from("/tmp/gpulse-ranks.db"), Into::into);
    let rec = gpulse_record::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut live = RollingDiagnosis::new(&rec.devices, rec.instrumented());
    let st = &rec.stacks;
    let mut first = Some(StackBatch {
        frames: st.frames.iter().cloned().enumerate().map(|(i, f)| (i as u32, f)).collect(),
        stacks: st.stacks.iter().cloned().enumerate().map(|(i, s)| (i as u32, s)).collect(),
        processes: st.processes.clone(),
        rate_hz: st.rate_hz.clone(),
        ..StackBatch::default()
    });
    let (mut next_sample, mut next_mark, mut next_host) = (0, 0, 0);
    let mut polls_ms: Vec<f64> = Vec::new();
    let mut updates_ms: Vec<f64> = Vec::new();
    let mut pushes_ms = 0.0;
    // The diagnoses of a full window (ten minutes), and the stack samples in it.
    let mut full_ms: Vec<f64> = Vec::new();
    // Each recorded poll, or, with GPULSE_POLL_MS, polls that often, each with the latest
    // recorded snapshot (its values, at the poll's time): what a run at that interval feeds.
    let poll_us = std::env::var("GPULSE_POLL_MS").ok().and_then(|v| v.parse::<i64>().ok()).map(|ms| ms * 1000);
    let mut times: Vec<(i64, &gpulse_model::Snapshot)> = Vec::new();
    for (i, snap) in rec.snapshots.iter().enumerate() {
        let t = snap.timestamp_us;
        match (poll_us, i.checked_sub(1).map(|j| rec.snapshots[j].timestamp_us)) {
            (Some(step), Some(before)) => {
                times.extend((1..=((t - before) / step).max(1)).map(|k| (before + k * step, snap)))
            }
            _ => times.push((t, snap)),
        }
    }
    for (t, snap) in times {
        let snap = gpulse_model::Snapshot { timestamp_us: t, ..snap.clone() };
        while next_host + 1 < rec.host.len() && rec.host[next_host + 1].timestamp_us <= t {
            next_host += 1;
        }
        let host = HostSample { timestamp_us: t, ..rec.host.get(next_host).cloned().unwrap_or_default() };
        let end = next_sample + st.samples[next_sample..].partition_point(|s| s.t_us <= t);
        let mut batch = first.take().unwrap_or_default();
        batch.samples = st.samples[next_sample..end].to_vec();
        next_sample = end;
        let marks_end = next_mark + rec.markers[next_mark..].partition_point(|m| m.t_us <= t);
        let poll = Poll { snapshot: Some(snap), host, tree: None, ..Default::default() };
        let started = Instant::now();
        live.push_poll(poll);
        live.push_stacks(batch);
        live.push_markers(&rec.markers[next_mark..marks_end]);
        let before_update = Instant::now();
        live.update();
        let done = Instant::now();
        next_mark = marks_end;
        polls_ms.push((done - started).as_secs_f64() * 1e3);
        pushes_ms += (before_update - started).as_secs_f64() * 1e3;
        if live.diagnosed() && (done - before_update).as_secs_f64() > 1e-4 {
            updates_ms.push((done - before_update).as_secs_f64() * 1e3);
            if t - rec.snapshots[0].timestamp_us >= WINDOW_US {
                full_ms.push((done - before_update).as_secs_f64() * 1e3);
            }
        }
    }
    let span_s = rec
        .snapshots
        .last()
        .zip(rec.snapshots.first())
        .map_or(0.0, |(l, f)| (l.timestamp_us - f.timestamp_us) as f64 / 1e6);
    let total_ms: f64 = polls_ms.iter().sum();
    updates_ms.sort_by(f64::total_cmp);
    full_ms.sort_by(f64::total_cmp);
    let median = |v: &[f64]| if v.is_empty() { f64::NAN } else { v[v.len() / 2] };
    println!(
        "{}: {} polls over {span_s:.0} s, {} stack samples; {total_ms:.0} ms in all, {:.3} ms a poll, {:.3} % of a core",
        path.display(),
        polls_ms.len(),
        st.samples.len(),
        total_ms / polls_ms.len().max(1) as f64,
        100.0 * total_ms / 1e3 / span_s.max(1e-9),
    );
    println!(
        "feeding the polls {pushes_ms:.0} ms; diagnoses: {} (median {:.1} ms, max {:.1} ms)",
        updates_ms.len(),
        median(&updates_ms),
        updates_ms.last().copied().unwrap_or(f64::NAN)
    );
    println!("of a full window: {} (median {:.1} ms)", full_ms.len(), median(&full_ms));
}
