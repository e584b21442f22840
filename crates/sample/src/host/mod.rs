//! The host through `/proc`: whole-machine CPU, memory and load, and the process tree of a
//! training job (its DataLoader workers, torchrun's ranks).

mod cpu;
mod machine;
mod tree;

pub use cpu::CpuMeter;
pub use machine::HostSampler;
pub use tree::{TreeSampler, classify};

/// This machine's name, as the kernel holds it (`/proc/sys/kernel/hostname`, the UTS name of
/// gpulse's namespace); `None` where it cannot be read.
pub fn hostname() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    Some(name.trim().to_owned())
}
