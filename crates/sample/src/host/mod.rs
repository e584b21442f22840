//! The host through `/proc`: whole-machine CPU, memory and load, and the process tree of a
//! training job (its DataLoader workers, torchrun's ranks).

mod machine;
mod tree;

pub use machine::HostSampler;
pub use tree::{TreeSampler, classify};
