//! When a growing memory series reaches its limit: a least-squares line and its uncertainty.

use serde::Serialize;

/// A time-to-limit forecast from the end of the series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Forecast {
    /// Seconds from the last sample until the fitted line reaches the limit.
    pub seconds: f64,
    /// The same for the slope's 95 % interval (±2 standard errors); `None` above when the slope
    /// could be zero.
    pub low_s: f64,
    pub high_s: Option<f64>,
    /// Growth, bytes per second.
    pub slope_bytes_per_s: f64,
    /// How well a line fits (1 = perfectly).
    pub r2: f64,
}

/// Fits `y = a + b·t` and extrapolates to `limit`. `None` when the series does not grow.
pub fn time_to_full(t: &[f64], y: &[f64], limit: f64) -> Option<Forecast> {
    let n = t.len() as f64;
    if t.len() < 3 || t.len() != y.len() {
        return None;
    }
    let (mt, my) = (t.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let sxx: f64 = t.iter().map(|x| (x - mt).powi(2)).sum();
    let sxy: f64 = t.iter().zip(y).map(|(x, v)| (x - mt) * (v - my)).sum();
    let syy: f64 = y.iter().map(|v| (v - my).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let b = sxy / sxx;
    if b <= 0.0 {
        return None;
    }
    let a = my - b * mt;
    let resid: f64 = t.iter().zip(y).map(|(x, v)| (v - a - b * x).powi(2)).sum();
    let r2 = if syy > 0.0 { 1.0 - resid / syy } else { 0.0 };
    let se = (resid / (n - 2.0).max(1.0) / sxx).sqrt();
    let t_end = *t.last()?;
    let left = limit - (a + b * t_end);
    let at = |slope: f64| (left / slope).max(0.0);
    Some(Forecast {
        seconds: at(b),
        low_s: at(b + 2.0 * se),
        high_s: (b - 2.0 * se > 0.0).then(|| at(b - 2.0 * se)),
        slope_bytes_per_s: b,
        r2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_straight_line_reaches_its_limit_exactly() {
        let t: Vec<f64> = (0..10).map(f64::from).collect();
        let y: Vec<f64> = t.iter().map(|x| 100.0 + 10.0 * x).collect();
        let f = time_to_full(&t, &y, 290.0).unwrap();
        assert!((f.seconds - 10.0).abs() < 1e-9);
        assert!((f.r2 - 1.0).abs() < 1e-12);
        assert!((f.low_s - 10.0).abs() < 1e-6 && (f.high_s.unwrap() - 10.0).abs() < 1e-6);
        assert!(time_to_full(&t, &t.iter().map(|x| 5.0 - x).collect::<Vec<_>>(), 100.0).is_none());
    }
}
