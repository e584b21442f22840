//! The last ten minutes of polls, so the dashboard's charts are full from the moment it opens.
//! Each poll keeps only what the charts plot, in a ring of a fixed number of frames: memory is
//! bounded whatever the interval (a fast one keeps less than ten minutes).

use std::collections::VecDeque;

use gpulse_model::Poll;
use serde_json::{Value, json};

/// How far back the dashboard's charts reach.
pub const WINDOW_US: i64 = 600_000_000;
/// The most frames kept: ten minutes at five polls a second.
pub const MAX_FRAMES: usize = 3000;

/// What the charts plot of one GPU at one poll; `None`: not read.
struct GpuPoint {
    index: u32,
    util_gpu_pct: Option<u32>,
    sm_active_pct: Option<f32>,
    memory_used_bytes: Option<u64>,
    power_mw: Option<u32>,
    temperature_c: Option<u32>,
}

struct Frame {
    timestamp_us: i64,
    gpus: Box<[GpuPoint]>,
}

/// Frames strictly ordered in time, at most `max_frames`, all less than [`WINDOW_US`] before the
/// newest.
pub struct History {
    frames: VecDeque<Frame>,
    max_frames: usize,
}

impl History {
    pub fn new(max_frames: usize) -> Self {
        Self { frames: VecDeque::with_capacity(max_frames.min(MAX_FRAMES)), max_frames: max_frames.max(1) }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn push(&mut self, poll: &Poll) {
        let t_us = poll.host.timestamp_us;
        match self.frames.back() {
            Some(last) if last.timestamp_us == t_us => return,
            // The clock went back: what came before would be drawn in the wrong place.
            Some(last) if last.timestamp_us > t_us => self.frames.clear(),
            _ => {}
        }
        let gpus = poll.snapshot.iter().flat_map(|s| &s.gpus).map(|g| GpuPoint {
            index: g.gpu_index,
            util_gpu_pct: g.util_gpu_pct,
            sm_active_pct: g.sm_active_pct().map(|v| v as f32),
            memory_used_bytes: g.memory_used_bytes,
            power_mw: g.power_draw_mw,
            temperature_c: g.temperature_gpu_c,
        });
        while self.frames.len() >= self.max_frames {
            self.frames.pop_front();
        }
        while self.frames.front().is_some_and(|f| f.timestamp_us <= t_us - WINDOW_US) {
            self.frames.pop_front();
        }
        self.frames.push_back(Frame { timestamp_us: t_us, gpus: gpus.collect() });
    }

    /// The frames, oldest first, under the snapshot's names and units.
    pub fn to_json(&self) -> Value {
        let frames: Vec<Value> = self
            .frames
            .iter()
            .map(|f| {
                let gpus: Vec<Value> = f
                    .gpus
                    .iter()
                    .map(|g| {
                        json!({
                            "index": g.index,
                            "util_gpu_pct": g.util_gpu_pct,
                            "sm_active_pct": g.sm_active_pct,
                            "memory_used_bytes": g.memory_used_bytes,
                            "power_w": g.power_mw.map(gpulse_model::mw_to_w),
                            "temperature_c": g.temperature_c,
                        })
                    })
                    .collect();
                json!({ "timestamp_us": f.timestamp_us, "gpus": gpus })
            })
            .collect();
        json!({ "window_s": WINDOW_US / 1_000_000, "max_frames": self.max_frames, "frames": frames })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use gpulse_model::{GpuSample, Snapshot};

    use super::*;

    pub(crate) fn poll(t_us: i64, util_gpu_pct: u32) -> Poll {
        let gpu = GpuSample { gpu_index: 0, util_gpu_pct: Some(util_gpu_pct), ..Default::default() };
        let mut p = Poll { snapshot: Some(Snapshot { timestamp_us: t_us, gpus: vec![gpu] }), ..Default::default() };
        p.host.timestamp_us = t_us;
        p
    }

    fn stamps(h: &History) -> Vec<i64> {
        h.to_json()["frames"].as_array().unwrap().iter().map(|f| f["timestamp_us"].as_i64().unwrap()).collect()
    }

    #[test]
    fn keeps_ten_minutes_at_most_and_never_more_than_the_cap() {
        let mut h = History::new(MAX_FRAMES);
        // Twenty minutes at one poll a second: the last ten minutes stay.
        for s in 0..1200 {
            h.push(&poll(s * 1_000_000, 50));
        }
        let t = stamps(&h);
        assert_eq!((t.first().copied(), t.last().copied()), (Some(600_000_000), Some(1_199_000_000)));
        // Ten polls a second: the cap holds, the newest stay.
        let mut h = History::new(MAX_FRAMES);
        for i in 0..10_000 {
            h.push(&poll(i * 100_000, 50));
        }
        assert_eq!(h.len(), MAX_FRAMES);
        assert_eq!(stamps(&h).last().copied(), Some(9_999 * 100_000));
    }

    #[test]
    fn frames_stay_strictly_ordered_when_the_clock_repeats_or_goes_back() {
        let mut h = History::new(16);
        for t in [1, 2, 2, 3] {
            h.push(&poll(t * 1_000_000, 50));
        }
        assert_eq!(stamps(&h), [1_000_000, 2_000_000, 3_000_000]);
        h.push(&poll(500_000, 50));
        assert_eq!(stamps(&h), [500_000], "the clock went back: history starts again");
    }

    #[test]
    fn unread_values_are_null_not_zero() {
        let mut h = History::new(4);
        let mut p = poll(1, 0);
        p.snapshot.as_mut().unwrap().gpus[0].util_gpu_pct = None;
        h.push(&p);
        let g = &h.to_json()["frames"][0]["gpus"][0];
        assert!(g["util_gpu_pct"].is_null() && g["power_w"].is_null() && g["memory_used_bytes"].is_null(), "{g}");
    }
}
