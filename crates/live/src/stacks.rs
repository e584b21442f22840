//! The stack sampler as an [`Input`]: the Python main threads of the followed tree (`run`,
//! `attach`, `record --pid`) or of the node's GPU processes (`serve`, `record`, `top`), handed
//! to the pipeline between polls.

use std::io::Write as _;
use std::time::{Duration, Instant};

use gpulse_sample::stacks::{NodeRoots, Scope, StackOptions, StackSampler};

use crate::{Frame, Input, Pipeline, Sink};

/// How often the samples go to the pipeline: the live diagnosis is at most this late, and the
/// pipeline sees a few batches a second, not one a sample.
const DRAIN_EVERY: Duration = Duration::from_millis(250);

/// A stack sampler on its own thread, drained into the pipeline every [`DRAIN_EVERY`] at most,
/// and stopped with the loop.
pub struct StackInput {
    sampler: Option<StackSampler>,
    next: Instant,
    /// Says a refusal to the user: on stderr unless the caller draws there too.
    tell: Box<dyn FnMut(&str)>,
}

impl StackInput {
    /// Samples the scope with the options; `None` samples nothing (`--no-stacks`).
    pub fn new(sampled: Option<(Scope, StackOptions)>) -> Self {
        let sampler = sampled.map(|(scope, o)| StackSampler::spawn_in(scope, o));
        let tell = Box::new(|why: &str| {
            let _ = writeln!(std::io::stderr(), "gpulse: {why}");
        });
        Self { sampler, next: Instant::now() + DRAIN_EVERY, tell }
    }

    /// Samples the main thread of every GPU process of the node at `rate_hz` (within one budget
    /// for them all); also returns the sink that tells the sampler which processes hold a GPU
    /// and how much each one's GPU waits: add it to the pipeline.
    pub fn on_node(rate_hz: f64) -> (Self, Box<dyn Sink>) {
        let roots = NodeRoots::default();
        let options = StackOptions { rate_hz, ..StackOptions::default() };
        (Self::new(Some((Scope::Node(roots.clone()), options))), Box::new(GpuProcesses(roots)))
    }

    /// Says each refusal with `tell` (a job's watch clears its status row first).
    pub fn telling(mut self, tell: impl FnMut(&str) + 'static) -> Self {
        self.tell = Box::new(tell);
        self
    }

    /// Gives the pipeline a batch (which records it, refusals included), and says each refusal
    /// once (the sampler tells each process's once).
    fn hand_over(&mut self, pipeline: &mut Pipeline, batch: gpulse_model::StackBatch) {
        for (_, why) in &batch.refusals {
            (self.tell)(why);
        }
        pipeline.stacks(batch);
    }
}

impl Input for StackInput {
    /// Live: what was sampled by now, whatever poll comes next.
    fn drain(&mut self, pipeline: &mut Pipeline, _until_us: Option<i64>) {
        if let Some(batch) = self.sampler.as_ref().filter(|_| Instant::now() >= self.next).map(StackSampler::drain) {
            self.next = Instant::now() + DRAIN_EVERY;
            self.hand_over(pipeline, batch);
        }
    }

    /// Stops the sampler and hands the rest of its samples to the pipeline.
    fn finish(&mut self, pipeline: &mut Pipeline) {
        if let Some(s) = self.sampler.take() {
            let batch = s.stop();
            self.hand_over(pipeline, batch);
        }
    }
}

/// Sets the node's roots from each poll's process lists.
struct GpuProcesses(NodeRoots);

impl Sink for GpuProcesses {
    fn frame(&mut self, frame: &Frame) {
        let Some(snap) = &frame.poll.snapshot else { return };
        self.0.set(snap.gpus.iter().flat_map(|g| {
            let idle = g.util_gpu_pct.map(|u| 1.0 - f64::from(u.min(100)) / 100.0);
            g.processes.iter().map(move |p| (p.pid, idle))
        }));
    }
}
