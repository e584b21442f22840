//! Clocks-event (throttle) reasons: NVML's bitmask and the names nvidia-smi gives its members.

use serde::{Deserialize, Serialize};

/// NVML's clocks-event reasons bitmask (`nvmlDeviceGetCurrentClocksThrottleReasons`, the older
/// name of `…EventReasons`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClocksEventReasons(pub u64);

/// NVML's reason bits (`nvmlClocksEventReason*`).
pub const GPU_IDLE: u64 = 0x1;
pub const APPLICATIONS_CLOCKS_SETTING: u64 = 0x2;
pub const SW_POWER_CAP: u64 = 0x4;
pub const HW_SLOWDOWN: u64 = 0x8;
pub const SYNC_BOOST: u64 = 0x10;
pub const SW_THERMAL_SLOWDOWN: u64 = 0x20;
pub const HW_THERMAL_SLOWDOWN: u64 = 0x40;
pub const HW_POWER_BRAKE_SLOWDOWN: u64 = 0x80;
pub const DISPLAY_CLOCK_SETTING: u64 = 0x100;

/// Each named reason: NVML bit, nvidia-smi member name, and whether it slows the GPU down.
pub const REASONS: &[(u64, &str, bool)] = &[
    (GPU_IDLE, "gpu_idle", false),
    (APPLICATIONS_CLOCKS_SETTING, "applications_clocks_setting", false),
    (SW_POWER_CAP, "sw_power_cap", true),
    (HW_SLOWDOWN, "hw_slowdown", true),
    (SYNC_BOOST, "sync_boost", false),
    (SW_THERMAL_SLOWDOWN, "sw_thermal_slowdown", true),
    (HW_THERMAL_SLOWDOWN, "hw_thermal_slowdown", true),
    (HW_POWER_BRAKE_SLOWDOWN, "hw_power_brake_slowdown", true),
    (DISPLAY_CLOCK_SETTING, "display_clock_setting", false),
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
