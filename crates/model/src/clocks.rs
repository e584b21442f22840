//! Clocks-event (throttle) reasons: NVML's bitmask and the names nvidia-smi gives its members.

use serde::{Deserialize, Serialize};

/// NVML's clocks-event reasons bitmask (`nvmlDeviceGetCurrentClocksEventReasons`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClocksEventReasons(pub u64);

/// Each named reason: NVML bit, nvidia-smi member name, and whether it slows the GPU down.
pub const REASONS: &[(u64, &str, bool)] = &[
    (0x1, "gpu_idle", false),
    (0x2, "applications_clocks_setting", false),
    (0x4, "sw_power_cap", true),
    (0x8, "hw_slowdown", true),
    (0x10, "sync_boost", false),
    (0x20, "sw_thermal_slowdown", true),
    (0x40, "hw_thermal_slowdown", true),
    (0x80, "hw_power_brake_slowdown", true),
    (0x100, "display_clock_setting", false),
];

impl ClocksEventReasons {
    /// Bit of the reason nvidia-smi calls `name` (`sw_power_cap`, …), if there is one.
    pub fn bit(name: &str) -> Option<u64> {
        REASONS.iter().find(|r| r.1 == name).map(|r| r.0)
    }

    /// Whether any reason with this bit is active.
    pub fn contains(self, bit: u64) -> bool {
        self.0 & bit != 0
    }

    /// Names of the active reasons, in NVML's bit order.
    pub fn names(self) -> Vec<&'static str> {
        REASONS.iter().filter(|r| self.contains(r.0)).map(|r| r.1).collect()
    }

    /// Whether a reason that holds clocks below what the load asks for is active
    /// (power cap, thermal, hardware slowdown), as opposed to idle or a user setting.
    pub fn is_throttling(self) -> bool {
        REASONS.iter().any(|r| r.2 && self.contains(r.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_bits() {
        let r = ClocksEventReasons(0x4 | 0x40);
        assert_eq!(r.names(), ["sw_power_cap", "hw_thermal_slowdown"]);
        assert!(r.is_throttling());
        assert!(!ClocksEventReasons(0x1).is_throttling());
        assert_eq!(ClocksEventReasons::bit("sync_boost"), Some(0x10));
        assert_eq!(ClocksEventReasons::bit("nope"), None);
    }
}
