//! A watch that also samples the Python main threads of the followed tree (`record --pid`),
//! handing the samples to the pipeline between polls as a job's watch does.

use std::io::Write as _;
use std::time::{Duration, Instant};

use gpulse_sample::SampleError;
use gpulse_sample::stacks::{StackOptions, StackSampler};

use crate::{Lost, Pipeline, Watch};

/// How often the samples go to the pipeline: a second's worth commits with the next poll.
const DRAIN_EVERY: Duration = Duration::from_millis(250);

/// `inner`, with a stack sampler on `root` drained into the pipeline between polls.
pub struct WithStacks<W> {
    pub inner: W,
    sampler: Option<StackSampler>,
    next: Instant,
}

impl<W> WithStacks<W> {
    /// Samples `root`'s tree with `options`; `None` samples nothing (`--no-stacks`).
    pub fn new(inner: W, root: u32, options: Option<StackOptions>) -> Self {
        let sampler = options.map(|o| StackSampler::spawn(root, o));
        Self { inner, sampler, next: Instant::now() + DRAIN_EVERY }
    }

    /// Stops the sampler and hands the rest of its samples to the pipeline.
    pub fn finish(mut self, pipeline: &mut Pipeline) -> W {
        if let Some(s) = self.sampler.take() {
            hand_over(pipeline, s.stop());
        }
        self.inner
    }
}

/// Gives the pipeline a batch, and says each refusal once on stderr (the sampler tells each
/// process's once).
fn hand_over(pipeline: &mut Pipeline, batch: gpulse_model::StackBatch) {
    for (_, why) in &batch.refusals {
        let _ = writeln!(std::io::stderr(), "gpulse: {why}");
    }
    pipeline.stacks(batch);
}

impl<W: Watch> Watch for WithStacks<W> {
    type End = W::End;

    fn between(&mut self, pipeline: &mut Pipeline) -> Option<W::End> {
        if let Some(s) = &self.sampler
            && Instant::now() >= self.next
        {
            self.next = Instant::now() + DRAIN_EVERY;
            hand_over(pipeline, s.drain());
        }
        self.inner.between(pipeline)
    }

    fn root_gone(&mut self) -> Option<W::End> {
        self.inner.root_gone()
    }

    fn sampling_failed(&mut self, error: SampleError) -> Option<W::End> {
        self.inner.sampling_failed(error)
    }

    fn schedule_over(&mut self) -> Option<W::End> {
        self.inner.schedule_over()
    }

    fn tick(&self) -> Duration {
        self.inner.tick()
    }

    fn closing_poll(&self) -> bool {
        self.inner.closing_poll()
    }

    fn recording_lost(&mut self, lost: &Lost) -> Option<W::End> {
        self.inner.recording_lost(lost)
    }
}
