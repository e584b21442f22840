//! The one loop of every watch (`record`, `serve`, `run`, `attach`): polls into the pipeline,
//! and between them whatever the watch looks after, until the watch says it is over.

use std::time::Duration;

use gpulse_sample::SampleError;

use crate::{Collector, Lost, Pipeline};

/// What a watch does besides feeding polls, and what ends it. Each answer `Some(end)` ends the
/// watch; `None` goes on.
pub trait Watch {
    type End;
    /// Between polls, every [`tick`](Self::tick) at most: takes in what arrived besides polls (the loop's
    /// marks, the job's events) and says whether the watch is over (a signal, the job exited).
    fn between(&mut self, pipeline: &mut Pipeline) -> Option<Self::End>;
    /// The followed root is gone; its last poll is in the pipeline.
    fn root_gone(&mut self) -> Option<Self::End>;
    /// Sampling failed and has stopped.
    fn sampling_failed(&mut self, error: SampleError) -> Option<Self::End>;
    /// The collector's schedule is over (its duration is reached).
    fn schedule_over(&mut self) -> Option<Self::End>;
    /// How long to wait for a poll before looking after the rest again: each look is a wake-up
    /// (a timed wait on the channel), so a watch with nothing urgent between polls waits longer.
    fn tick(&self) -> Duration {
        Duration::from_millis(50)
    }
    /// Whether the watch ends with one more poll, taken at once: a job's end, to keep what it
    /// left on the GPUs and the Xids its last kernels raised.
    fn closing_poll(&self) -> bool {
        false
    }
    /// The recording stopped being written (told once); the sinks were told already.
    fn recording_lost(&mut self, _lost: &Lost) -> Option<Self::End> {
        None
    }
}

/// Feeds `collector`'s polls to `pipeline` until `watch` ends it, then the polls taken while
/// stopping (and the closing poll, where the watch asks for one). After the root is gone, one
/// poll is kept (what the job left on the GPUs), no more, and the closing poll.
pub fn drive<W: Watch>(collector: Collector, pipeline: &mut Pipeline, watch: &mut W) -> W::End {
    let mut collector = Some(collector);
    let mut root_gone = false;
    let mut lost_told = false;
    let end = loop {
        if let Some(end) = watch.between(pipeline) {
            break end;
        }
        let Some(c) = collector.as_ref() else {
            // Sampling is over; the watch goes on (a job outlives its samples).
            std::thread::sleep(watch.tick());
            continue;
        };
        let ended = match c.next(watch.tick()) {
            Some(Ok(p)) => take(pipeline, &mut root_gone, p, false).then(|| watch.root_gone()).flatten(),
            Some(Err(e)) => {
                collector = None;
                watch.sampling_failed(e)
            }
            None if c.is_finished() => {
                // The last poll may have come between the wait and the look: it is the run's.
                for p in collector.take().map(Collector::stop).unwrap_or_default().into_iter().flatten() {
                    take(pipeline, &mut root_gone, p, false);
                }
                watch.schedule_over()
            }
            None => None,
        };
        if let Some(end) = ended {
            break end;
        }
        if !lost_told && let Some(lost) = pipeline.lost().cloned() {
            lost_told = true;
            if let Some(end) = watch.recording_lost(&lost) {
                break end;
            }
        }
    };
    let closing = watch.closing_poll();
    let rest: Vec<_> = match collector {
        Some(c) if closing => c.finish(),
        Some(c) => c.stop(),
        None => Vec::new(),
    };
    let last = rest.len();
    for (i, p) in rest.into_iter().enumerate() {
        if let Ok(p) = p {
            take(pipeline, &mut root_gone, p, closing && i + 1 == last);
        }
    }
    end
}

/// Hands `p` to the pipeline, but for a poll after the one that found the root gone (what the
/// job left on the GPUs is one poll, no more) unless `keep` (the closing poll). Whether `p` is
/// the first to find the root gone.
fn take(pipeline: &mut Pipeline, root_gone: &mut bool, p: gpulse_model::Poll, keep: bool) -> bool {
    if *root_gone && p.root_gone && !keep {
        return false;
    }
    let first = p.root_gone && !*root_gone;
    *root_gone |= p.root_gone;
    pipeline.poll(p);
    first
}

/// Why a watch without a job (`record`, `serve`) ended.
#[derive(Debug)]
pub enum Stopped {
    /// `stop` said so, with this reason.
    Asked(String),
    /// The collector's duration is reached.
    DurationReached,
    /// The followed root exited.
    RootGone,
    SamplingFailed(SampleError),
    WriteFailed(Lost),
}

/// A watch that ends when `stop` says so (asked between polls), or on the root gone, a failed
/// poll, the end of the schedule, or (with `needs_recording`) the recording lost.
pub struct Until<F> {
    pub stop: F,
    pub needs_recording: bool,
}

impl<F: FnMut() -> Option<String>> Watch for Until<F> {
    type End = Stopped;

    fn between(&mut self, _: &mut Pipeline) -> Option<Stopped> {
        (self.stop)().map(Stopped::Asked)
    }

    fn root_gone(&mut self) -> Option<Stopped> {
        Some(Stopped::RootGone)
    }

    fn sampling_failed(&mut self, error: SampleError) -> Option<Stopped> {
        Some(Stopped::SamplingFailed(error))
    }

    fn schedule_over(&mut self) -> Option<Stopped> {
        Some(Stopped::DurationReached)
    }

    fn recording_lost(&mut self, lost: &Lost) -> Option<Stopped> {
        self.needs_recording.then(|| Stopped::WriteFailed(lost.clone()))
    }

    /// A stop asked for (Ctrl-C, SIGTERM, the followed process gone) keeps one more poll, taken
    /// at once: the recording reaches the moment it stopped, not the poll an interval before.
    fn closing_poll(&self) -> bool {
        true
    }
}
