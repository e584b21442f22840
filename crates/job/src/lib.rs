//! Watching a training job, the heart of `gpulse run` and `gpulse attach`: the child and its
//! terminal, its stderr and the events in it, the marks socket the training loop writes to,
//! the `--instrument` bootstrap, the cgroup's OOM count, the signals gpulse forwards, and the
//! [`Session`] that runs them through the live pipeline to the end of the job. What the job is
//! recorded to, and what is said about it afterwards, is the caller's.

pub mod bootstrap;
pub mod cgroup;
pub mod child;
pub mod guardian;
pub mod marks;
pub mod pump;
mod session;
pub mod stderr_events;
pub mod terminal;

pub use session::{JobEnd, Options, Session};
