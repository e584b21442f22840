//! Where [`drive`](crate::drive)'s polls come from: the [`Collector`]'s thread (live, on its
//! schedule), or a recording played back at its own pace (`top --replay`). The loop, its failure
//! policy and the pipeline are the same for both.

use std::time::Duration;

use gpulse_model::{Marker, Poll, StackBatch};
use gpulse_sample::SampleError;

use crate::Collector;

/// One poll as a feed hands it over, with what a replay keeps beside it: the loop's marks and
/// the main thread's stack samples due by then. Live, both come through the watch instead.
#[derive(Default)]
pub struct Fed {
    pub poll: Poll,
    pub marks: Vec<Marker>,
    pub stacks: StackBatch,
}

impl From<Poll> for Fed {
    fn from(poll: Poll) -> Self {
        Self { poll, ..Self::default() }
    }
}

/// A feed's answer: a poll, or the failure that ended sampling (told once).
pub type Next = Result<Fed, SampleError>;

/// The polls of one watch.
pub trait Feed {
    /// The next poll, waiting at most `wait`; `None` when none came.
    fn next(&mut self, wait: Duration) -> Option<Next>;
    /// Whether no poll will come any more: the schedule or the recording is over, or sampling
    /// failed.
    fn is_finished(&self) -> bool;
    /// Ends the feed, and returns the polls taken and not yet handed over; with `closing`, one
    /// more taken at once, where the feed can (a job's end: what it left on the GPUs).
    fn end(self, closing: bool) -> Vec<Next>;
}

impl Feed for Collector {
    fn next(&mut self, wait: Duration) -> Option<Next> {
        Collector::next(self, wait).map(|c| c.map(Fed::from))
    }

    fn is_finished(&self) -> bool {
        Collector::is_finished(self)
    }

    fn end(self, closing: bool) -> Vec<Next> {
        let rest = if closing { self.finish() } else { self.stop() };
        rest.into_iter().map(|c| c.map(Fed::from)).collect()
    }
}
