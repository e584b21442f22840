//! The live pipeline that `run`, `attach`, `record` (and any live view) share: a [`Collector`]
//! thread samples and sends [`Poll`](gpulse_model::Poll)s; a [`Pipeline`] takes them with the
//! loop's marks and the job's events, folds the marks, writes the recording when it has one,
//! runs the live diagnosis, and hands a [`Frame`] to each [`Sink`].
//!
//! One policy for failures, here and nowhere else:
//! - a poll that fails ends sampling: the collector sends the error and stops, and the caller
//!   closes the recording with "sampling failed: …" as its reason;
//! - a recording that cannot be written stops being written, once, with a notice to the sinks;
//!   sampling, the live diagnosis and the job go on.

mod collector;
mod drive;
pub mod fold;
pub mod jobs;
mod pipeline;

pub use collector::{Collected, Collector};
pub use drive::{Stopped, drive};
pub use pipeline::{Frame, Lost, Pipeline, Sink};
