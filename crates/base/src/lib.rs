//! The few utilities every other crate may need and none owns: the clock, a timestamp in
//! nvidia-smi's words, a signal by name, text made safe for a terminal, and [`words!`], which
//! declares every fixed set of words. It depends on no gpulse crate, so no crate leans on a
//! sibling for a helper.

pub mod clock;
pub mod signal;
pub mod text;
mod words;
