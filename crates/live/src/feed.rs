//! What [`drive`](crate::drive) takes in: polls from a [`Feed`] (the [`Collector`]'s thread, live,
//! on its schedule, or a recording played back at its own pace, `top --replay`), and side data
//! from [`Input`]s (the loop's marks, the job's stderr events, the main threads' stack samples,
//! or a replay's recorded ones). The loop, its failure policy and the pipeline are the same for
//! live and replayed views.

use std::time::Duration;

use crate::{Collected, Collector, Pipeline};

/// The polls of one watch.
pub trait Feed {
    /// The next poll, waiting at most `wait`; `None` when none came.
    fn next(&mut self, wait: Duration) -> Option<Collected>;
    /// Whether no poll will come any more: the schedule or the recording is over, or sampling
    /// failed.
    fn is_finished(&self) -> bool;
    /// Ends the feed, and returns the polls taken and not yet handed over; with `closing`, one
    /// more taken at once, where the feed can (a job's end: what it left on the GPUs).
    fn end(self, closing: bool) -> Vec<Collected>;
}

impl Feed for Collector {
    fn next(&mut self, wait: Duration) -> Option<Collected> {
        Collector::next(self, wait)
    }

    fn is_finished(&self) -> bool {
        Collector::is_finished(self)
    }

    fn end(self, closing: bool) -> Vec<Collected> {
        if closing { self.finish() } else { self.stop() }
    }
}

/// Side data that reaches the pipeline beside the polls, drained by [`drive`](crate::drive)
/// between polls and before each poll it hands over: one door for live and replayed views, so
/// that what ends the loop (its [`Control`](crate::Control)) never carries data.
pub trait Input {
    /// Hands the pipeline what is due. `until_us` is the time of the poll about to be handed
    /// over, `None` between polls: a replay hands what was recorded by that poll, so the view
    /// sees it as live; a live input hands whatever has arrived.
    fn drain(&mut self, pipeline: &mut Pipeline, until_us: Option<i64>);
    /// The loop is over and its last polls are in: hands over the rest (a sampler stopped).
    fn finish(&mut self, _pipeline: &mut Pipeline) {}
}
