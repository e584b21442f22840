//! The live pipeline that every live or replayed view shares (`run`, `attach`, `record`,
//! `serve`, `top`, `watch`, `query -l`, `demo`): a [`Feed`] hands over
//! [`Poll`](gpulse_model::Poll)s (a [`Collector`] thread sampling on its schedule, the same
//! schedule kept [`Inline`] on the loop's thread, or a recording played back); a [`Pipeline`] takes them with the loop's marks and the job's events,
//! folds the marks, keeps the run in its [`Store`] when it has one (the binary's recording), runs
//! the live diagnosis, and hands a [`Frame`] to each [`Sink`], which only renders. [`drive`] is
//! the one loop that feeds it, for every watch: it drains each [`Input`] (the loop's marks, the
//! job's events, stack samples, a replay's recorded ones) into the pipeline between polls, and a
//! [`Control`] says what ends it.
//!
//! One policy for failures, here and nowhere else:
//! - a poll that fails ends sampling: the collector sends the error and stops; the watch decides
//!   whether that ends it (`record`, `serve`) or not (a job goes on), and the caller closes the
//!   recording with "sampling failed: …" as its reason;
//! - a store that cannot be written stops being written, once, with a notice to the sinks;
//!   sampling, the live diagnosis and the job go on, unless the watch needs the recording.
//!
//! One rule for time: schedules, durations and counts run on the monotonic clock, in the one
//! schedule (`paced.rs`) that the collector and [`Inline`] keep; timestamps on data are the wall
//! clock's, read once per poll.

mod collector;
mod drive;
mod feed;
pub mod fold;
pub mod jobs;
mod paced;
mod pipeline;
mod stacks;

pub use collector::{Collected, Collector, GpusOnly, Polling};
pub use drive::{Control, Stopped, Until, drive};
pub use feed::{Feed, Input};
/// The failure a [`Feed`] reports, for views that name no sampler.
pub use gpulse_sample::SampleError;
pub use paced::Inline;
pub use pipeline::{Frame, Lost, Pipeline, Sink, Store, StoreError};
pub use stacks::StackInput;
