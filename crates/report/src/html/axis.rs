//! Axis ticks people can read: 4–8 round values per axis, and elapsed time in the unit the run's
//! length suggests.

/// Ticks over `[lo, hi]`, which are widened to the first and last tick so every line fits.
#[derive(Debug, Clone, PartialEq)]
pub struct Ticks {
    pub lo: f64,
    pub hi: f64,
    pub step: f64,
}

impl Ticks {
    /// The tick values from `lo` to `hi`.
    pub fn values(&self) -> Vec<f64> {
        let n = ((self.hi - self.lo) / self.step).round() as usize;
        (0..=n).map(|i| self.lo + i as f64 * self.step).collect()
    }

    /// `v` with as many decimals as the step needs (2.5 needs one).
    pub fn label(&self, v: f64) -> String {
        let mut decimals = 0;
        while decimals < 6
            && ((self.step * 10f64.powi(decimals)).round() - self.step * 10f64.powi(decimals)).abs() > 1e-6
        {
            decimals += 1;
        }
        let v = if v.abs() < self.step * 1e-9 { 0.0 } else { v };
        format!("{v:.*}", decimals as usize)
    }
}

/// Most ticks an axis gets; the fewest is 4, which the steps' ratios (at most 2.5) guarantee.
const MAX_TICKS: usize = 8;

/// Round ticks covering `[lo, hi]` from `steps` (ascending, in the axis's unit, repeated at every
/// power of ten when `decades`).
fn ticks_from(lo: f64, hi: f64, steps: &[f64], decades: bool) -> Ticks {
    let (lo, hi) = if hi - lo > 1e-12 { (lo, hi) } else { (lo - 0.5, hi + 0.5) };
    let span = hi - lo;
    let scales: Vec<f64> = if decades {
        let e = (span / MAX_TICKS as f64).log10().floor() as i32;
        (e - 1..=e + 1).map(|k| 10f64.powi(k)).collect()
    } else {
        vec![1.0]
    };
    let mut candidates: Vec<f64> = scales.iter().flat_map(|s| steps.iter().map(move |m| m * s)).collect();
    candidates.sort_by(f64::total_cmp);
    for step in &candidates {
        // A bound a hair past a tick (rounding) stays on it.
        let a = (lo / step + 1e-9).floor() * step;
        let b = (hi / step - 1e-9).ceil() * step;
        let ticks = ((b - a) / step).round() as usize + 1;
        if ticks <= MAX_TICKS {
            return Ticks { lo: a, hi: b, step: *step };
        }
    }
    // Past the largest step (a very long run in hours): days of 24 h.
    let step = 24.0 * (span / 24.0 / (MAX_TICKS - 1) as f64).ceil();
    Ticks { lo: (lo / step).floor() * step, hi: (hi / step).ceil() * step, step }
}

/// 4–8 ticks of 1, 2, 2.5 or 5 × 10^k covering `[lo, hi]`.
pub fn nice(lo: f64, hi: f64) -> Ticks {
    ticks_from(lo, hi, &[1.0, 2.0, 2.5, 5.0], true)
}

/// The unit elapsed time is shown in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    S,
    Min,
    H,
}

impl TimeUnit {
    fn seconds(self) -> f64 {
        match self {
            Self::S => 1.0,
            Self::Min => 60.0,
            Self::H => 3600.0,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::S => "s",
            Self::Min => "min",
            Self::H => "h",
        }
    }
}

/// The one time axis every chart shares: seconds since the run started, labelled in `unit`.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeAxis {
    pub unit: TimeUnit,
    /// In `unit`.
    pub ticks: Ticks,
}

impl TimeAxis {
    /// Over `[lo_s, hi_s]`: seconds up to 3 minutes, minutes up to 3 hours, then hours, so ticks
    /// fall on round clock values (every 10 min, every 4 h).
    pub fn new(lo_s: f64, hi_s: f64) -> Self {
        let unit = match hi_s - lo_s {
            d if d <= 180.0 => TimeUnit::S,
            d if d <= 3.0 * 3600.0 => TimeUnit::Min,
            _ => TimeUnit::H,
        };
        let u = unit.seconds();
        let ticks = match unit {
            TimeUnit::S => nice(lo_s, hi_s),
            TimeUnit::Min => ticks_from(lo_s / u, hi_s / u, &[0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0], false),
            TimeUnit::H => ticks_from(lo_s / u, hi_s / u, &[1.0, 2.0, 3.0, 4.0, 6.0, 12.0, 24.0], false),
        };
        Self { unit, ticks }
    }

    pub fn lo_s(&self) -> f64 {
        self.ticks.lo * self.unit.seconds()
    }

    pub fn hi_s(&self) -> f64 {
        self.ticks.hi * self.unit.seconds()
    }

    /// (seconds, label) of every tick.
    pub fn labelled(&self) -> Vec<(f64, String)> {
        let u = self.unit.seconds();
        self.ticks
            .values()
            .into_iter()
            .map(|v| (v * u, format!("{} {}", self.ticks.label(v), self.unit.name())))
            .collect()
    }
}

/// A length of time as a person says it: "45 s", "12 min 5 s", "3 h 20 min".
pub fn duration(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_range_gets_four_to_eight_round_ticks_that_cover_it() {
        let ranges = [(0.0, 1.0), (0.0, 7.3), (0.0, 100.0), (0.0, 139.8), (31.0, 84.0), (0.0, 0.004), (0.0, 1980.0)];
        for (lo, hi) in ranges.into_iter().chain((1..400).map(|k| (0.0, k as f64 * 0.37))) {
            let t = nice(lo, hi);
            let n = t.values().len();
            assert!((4..=8).contains(&n), "{lo}..{hi}: {t:?} has {n}");
            assert!(t.lo <= lo && t.hi >= hi, "{lo}..{hi}: {t:?}");
        }
        assert_eq!(nice(0.0, 100.0).values(), [0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        assert_eq!(nice(0.0, 100.0).label(40.0), "40");
        assert_eq!(Ticks { lo: 0.0, hi: 10.0, step: 2.5 }.label(7.5), "7.5", "2.5 needs a decimal");
        assert_eq!(nice(0.0, 0.004).label(0.002), "0.002");
    }

    #[test]
    fn time_is_in_seconds_minutes_or_hours_by_the_runs_length() {
        let a = TimeAxis::new(0.0, 59.0);
        assert_eq!((a.unit, a.labelled()[1].1.as_str()), (TimeUnit::S, "10 s"));
        let a = TimeAxis::new(0.0, 45.0 * 60.0);
        assert_eq!(a.unit, TimeUnit::Min);
        assert_eq!(a.ticks.step, 10.0, "every 10 min");
        let a = TimeAxis::new(0.0, 86_400.0);
        assert_eq!((a.unit, a.ticks.step, a.hi_s()), (TimeUnit::H, 4.0, 86_400.0), "every 4 h over a day");
        for end in [1.0, 5.0, 150.0, 200.0, 3000.0, 11_000.0, 30_000.0, 86_400.0, 7.0 * 86_400.0] {
            let n = TimeAxis::new(0.0, end).labelled().len();
            assert!((4..=8).contains(&n), "{end} s: {n} ticks");
        }
        assert_eq!(duration(42.4), "42 s");
        assert_eq!(duration(725.0), "12 min 5 s");
        assert_eq!(duration(12_000.0), "3 h 20 min");
    }
}
