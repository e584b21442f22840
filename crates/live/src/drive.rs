//! The loop of a watch that has no job to look after (`record`, `serve`): polls into the
//! pipeline until asked to stop, the root is gone, sampling fails, or the recording cannot be
//! written when the recording is the point.

use std::time::Duration;

use gpulse_sample::SampleError;

use crate::{Collector, Lost, Pipeline};

/// Why a drive ended.
#[derive(Debug)]
pub enum Stopped {
    /// `stop` said so, with this reason.
    Asked(String),
    /// The followed root exited.
    RootGone,
    SamplingFailed(SampleError),
    WriteFailed(Lost),
}

/// Feeds `collector`'s polls to `pipeline`, asking `stop` between them (every 50 ms at most).
/// Polls taken while stopping are kept, unless they came at or after `until_us`. With
/// `needs_recording`, a recording that stops being written ends the drive.
pub fn drive(
    collector: Collector,
    pipeline: &mut Pipeline,
    mut stop: impl FnMut() -> Option<String>,
    until_us: Option<i64>,
    needs_recording: bool,
) -> Stopped {
    let why = loop {
        if let Some(reason) = stop() {
            break Stopped::Asked(reason);
        }
        match collector.next(Duration::from_millis(50)) {
            // A poll taken at or after the end is not the run's (the clocks of `stop` and of the
            // collector's schedule differ by a moment).
            Some(Ok(p)) if until_us.is_some_and(|u| p.host.timestamp_us >= u) => {}
            // What the job left behind on the GPUs is the last sample.
            Some(Ok(p)) if p.root_gone => {
                pipeline.poll(p);
                break Stopped::RootGone;
            }
            Some(Ok(p)) => pipeline.poll(p),
            Some(Err(e)) => break Stopped::SamplingFailed(e),
            None => {}
        }
        if needs_recording && let Some(lost) = pipeline.lost() {
            break Stopped::WriteFailed(lost.clone());
        }
    };
    for p in collector.stop().into_iter().flatten() {
        if !p.root_gone && until_us.is_none_or(|u| p.host.timestamp_us < u) {
            pipeline.poll(p);
        }
    }
    why
}
