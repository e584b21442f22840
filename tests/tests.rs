//! End-to-end tests of the `gpulse` binary. NVML is the workspace's stand-in library, so these run
//! the real NVML code path on machines without a GPU.

mod cli;
