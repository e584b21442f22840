//! Watching a training job: its process and stderr, the marks it sends from inside the loop,
//! and the live view. `cmd/run.rs` and `cmd/attach.rs` put these together with the recorder.

pub mod bootstrap;
pub mod cgroup;
pub mod child;
pub mod guardian;
pub mod marks;
pub mod pump;
pub mod session;
pub mod stderr_events;
pub mod summary;
pub mod terminal;
