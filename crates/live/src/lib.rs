//! The live pipeline that `run`, `attach`, `record`, `serve` and `top` share: a [`Collector`]
//! thread samples and sends [`Poll`](gpulse_model::Poll)s; a [`Pipeline`] takes them with the
//! loop's marks and the job's events, folds the marks, keeps the run in its [`Store`] when it
//! has one (the binary's recording), runs the live diagnosis, and hands a [`Frame`] to each
//! [`Sink`]. [`drive`] is the one loop that feeds it, for every watch; a [`Watch`] says what else
//! the loop looks after and what ends it.
//!
//! One policy for failures, here and nowhere else:
//! - a poll that fails ends sampling: the collector sends the error and stops; the watch decides
//!   whether that ends it (`record`, `serve`) or not (a job goes on), and the caller closes the
//!   recording with "sampling failed: …" as its reason;
//! - a store that cannot be written stops being written, once, with a notice to the sinks;
//!   sampling, the live diagnosis and the job go on, unless the watch needs the recording.
//!
//! One rule for time: schedules and durations run on the monotonic clock, in the collector;
//! timestamps on data are the wall clock's, read once per poll.

mod collector;
mod drive;
pub mod fold;
pub mod jobs;
mod pipeline;
mod stacks;

pub use collector::{Collected, Collector};
pub use drive::{Stopped, Until, Watch, drive};
pub use pipeline::{Frame, Lost, Pipeline, Sink, Store, StoreError};
pub use stacks::WithStacks;
