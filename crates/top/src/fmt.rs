//! Numbers as the view prints them: an absent value is `—`, never 0.

use gpulse_model::{ClocksEventReasons, GIB};

pub const NONE: &str = "—";

pub fn pct(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| NONE.into(), |v| format!("{v:.decimals$}%"))
}

/// Swap in use, percent of the swap there is; 0 on a machine without swap, absent where unread.
pub fn swap_pct(h: &gpulse_model::HostSample) -> Option<f64> {
    match (h.swap_used_bytes, h.swap_total_bytes) {
        (_, Some(0)) => Some(0.0),
        (Some(u), Some(t)) => Some(u as f64 / t as f64 * 100.0),
        _ => None,
    }
}

pub fn gib(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| NONE.into(), |b| format!("{:.1}", b as f64 / GIB as f64))
}

/// GPU memory per process: MiB under a GiB, as nvitop does.
pub fn mem(bytes: Option<u64>) -> String {
    match bytes {
        None => NONE.into(),
        Some(b) if b < GIB => format!("{}MiB", b >> 20),
        Some(b) => format!("{:.1}GiB", b as f64 / GIB as f64),
    }
}

/// Bytes a second as GB/s (10⁹, as NVML's throughput counters and link speeds are given).
pub fn rate(bytes_per_s: Option<f64>) -> String {
    match bytes_per_s {
        None => NONE.into(),
        Some(b) if b < 1e9 => format!("{:.0} MB/s", b / 1e6),
        Some(b) => format!("{:.1} GB/s", b / 1e9),
    }
}

/// A duration in its two largest units: `4m12s`, `2h05m`, `37s`.
pub fn duration(s: Option<f64>) -> String {
    let Some(s) = s.filter(|s| s.is_finite() && *s >= 0.0) else { return NONE.into() };
    let s = s.round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// The clocks-event reasons in words; `none` when none is active.
pub fn throttle(reasons: Option<u64>) -> String {
    let Some(bits) = reasons else { return NONE.into() };
    let words: Vec<&str> = ClocksEventReasons(bits)
        .names()
        .into_iter()
        .map(|n| match n {
            "gpu_idle" => "idle",
            "applications_clocks_setting" => "application clocks",
            "sw_power_cap" => "power cap",
            "hw_slowdown" => "hardware slowdown",
            "sync_boost" => "sync boost",
            "sw_thermal_slowdown" => "too hot (software)",
            "hw_thermal_slowdown" => "too hot (hardware)",
            "hw_power_brake_slowdown" => "power brake",
            "display_clock_setting" => "display clock",
            other => other,
        })
        .collect();
    if words.is_empty() { "none".into() } else { words.join(", ") }
}

/// A bar of `width` cells filled to `pct` of 100; blank when the value is absent.
pub fn bar(pct: Option<f64>, width: usize) -> String {
    let Some(p) = pct else { return "·".repeat(width) };
    let filled = ((p.clamp(0.0, 100.0) / 100.0) * width as f64).round() as usize;
    format!("{}{}", "█".repeat(filled), "░".repeat(width - filled))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_is_a_dash_and_units_read_right() {
        assert_eq!(
            (pct(None, 0), gib(None), mem(None), rate(None), duration(None)),
            ("—".into(), "—".into(), "—".into(), "—".into(), "—".into())
        );
        assert_eq!(pct(Some(0.0), 1), "0.0%", "a real zero is a zero");
        assert_eq!(mem(Some(300 << 20)), "300MiB");
        assert_eq!(mem(Some(20 * GIB + GIB / 2)), "20.5GiB");
        assert_eq!(rate(Some(2.5e9)), "2.5 GB/s");
        assert_eq!(duration(Some(252.0)), "4m12s");
        assert_eq!(duration(Some(7500.0)), "2h05m");
        assert_eq!(throttle(Some(0x4 | 0x40)), "power cap, too hot (hardware)");
        assert_eq!(throttle(Some(0)), "none");
        assert_eq!(bar(Some(50.0), 4), "██░░");
        assert_eq!(bar(None, 3), "···");
    }
}
