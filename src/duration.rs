//! Every duration a user types, parsed in one place: `1s`, `250ms`, `2m`, `1h`, or plain seconds.
//!
//! Each is finite, positive and at most [`MAX`], so no later `Instant + Duration` or
//! `Duration::from_secs_f64` can overflow or panic.

use std::time::Duration;

/// The longest duration gpulse accepts: a year is past any training run, and far from overflow.
pub const MAX: Duration = Duration::from_secs(365 * 24 * 3600);

/// A duration at least `min` long.
pub fn parse_at_least(s: &str, min: Duration) -> Result<Duration, String> {
    let text = s.trim();
    let (num, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = text.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (text, 1.0)
    };
    let num = num.trim();
    // Rust's float parser also takes `inf` and `NaN`; a duration is digits.
    let v: f64 = num
        .parse()
        .ok()
        .filter(|_| num.starts_with(|c: char| c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .ok_or_else(|| format!("{text:?} is not a duration (try 1s, 100ms, 2m)"))?;
    let secs = v * scale;
    if secs.is_nan() {
        return Err(format!("{text:?} is not a duration (try 1s, 100ms, 2m)"));
    }
    let too_short = || {
        if min.is_zero() {
            format!("{text:?} is too short")
        } else {
            format!("{text:?} is too short (at least {})", show(min))
        }
    };
    if secs <= 0.0 {
        return Err(format!("{text:?} is not a positive duration (try 1s, 100ms, 2m)"));
    }
    if secs > MAX.as_secs_f64() {
        return Err(format!("{text:?} is too long (at most 365 days)"));
    }
    let d = Duration::from_secs_f64(secs);
    if d.is_zero() || d < min {
        return Err(too_short());
    }
    Ok(d)
}

/// Any positive duration.
pub fn positive(s: &str) -> Result<Duration, String> {
    parse_at_least(s, Duration::ZERO)
}

/// A sampling interval: below 10 ms the poll itself is most of the interval.
pub fn interval(s: &str) -> Result<Duration, String> {
    parse_at_least(s, Duration::from_millis(10))
}

/// `watch`'s interval: a line per GPU faster than 20 a second is unreadable.
pub fn watch_interval(s: &str) -> Result<Duration, String> {
    parse_at_least(s, Duration::from_millis(50))
}

/// A GPM window: the driver needs 100 ms between its two samples.
pub fn gpm_window(s: &str) -> Result<Duration, String> {
    parse_at_least(s, Duration::from_millis(100))
}

/// `status --wait`: one GPM window at least, and a one-shot view should not take minutes.
pub fn status_wait(s: &str) -> Result<Duration, String> {
    let d = gpm_window(s)?;
    if d > Duration::from_secs(60) {
        return Err(format!("{:?} is too long for a one-shot view (at most 60 s)", s.trim()));
    }
    Ok(d)
}

/// A replay speed (trace seconds per second): finite, and within what a pace can be drawn at.
pub fn speed(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("{:?} is not a number", s.trim()))?;
    if !(v.is_finite() && (0.01..=10_000.0).contains(&v)) {
        return Err(format!("{:?} must be between 0.01 and 10000", s.trim()));
    }
    Ok(v)
}

/// A duration as gpulse prints it back: `250 ms`, `1 s`, `1.5 s`.
pub fn show(d: Duration) -> String {
    if d < Duration::from_secs(1) { format!("{} ms", d.as_millis()) } else { format!("{} s", d.as_secs_f64()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_units_and_plain_seconds() {
        assert_eq!(positive("100ms"), Ok(Duration::from_millis(100)));
        assert_eq!(positive("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(positive("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(positive("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(positive(" 3s "), Ok(Duration::from_secs(3)));
        assert_eq!(positive("365h"), Ok(Duration::from_secs(365 * 3600)));
    }

    #[test]
    fn refuses_what_is_not_a_usable_duration() {
        for bad in ["0s", "0", "-1", "-1s", "soon", "", "s", "nan", "NaN", "inf", "infinity", "-inf", "1e20", "1e20s"] {
            assert!(positive(bad).is_err(), "{bad:?} accepted");
        }
        assert!(positive("99999999999999999999s").unwrap_err().contains("too long"));
        assert!(positive("8761h").unwrap_err().contains("too long"));
        assert!(positive("1e-12").is_err(), "rounds to zero");
        assert!(interval("5ms").unwrap_err().contains("at least 10 ms"));
        assert_eq!(interval("10ms"), Ok(Duration::from_millis(10)));
        assert!(watch_interval("0.04").is_err());
        assert!(gpm_window("0.09").is_err());
        assert_eq!(gpm_window("0.1"), Ok(Duration::from_millis(100)));
        assert!(status_wait("61").is_err());
        assert!(speed("inf").is_err() && speed("0").is_err() && speed("1e-300").is_err());
        assert_eq!(speed("10"), Ok(10.0));
    }

    proptest! {
        /// Whatever is typed, the parser answers without panicking, and what it accepts can be
        /// added to an `Instant` and multiplied by a poll count.
        #[test]
        fn never_panics(s in "\\PC{0,24}", n in any::<f64>(), unit in prop::sample::select(vec!["", "ms", "s", "m", "h"])) {
            for text in [s, format!("{n}{unit}"), format!("{n:e}{unit}")] {
                if let Ok(d) = positive(&text) {
                    prop_assert!(!d.is_zero() && d <= MAX);
                    let _ = std::time::Instant::now() + d.saturating_mul(1000);
                }
            }
        }

        #[test]
        fn accepted_values_keep_their_size(ms in 10u64..=MAX.as_millis() as u64) {
            let d = interval(&format!("{ms}ms")).unwrap();
            prop_assert!((d.as_secs_f64() * 1e3 - ms as f64).abs() < 1e-3 * ms as f64);
        }
    }
}
