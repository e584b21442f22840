//! Energy per step. NVML's energy counter is exact but costs milliseconds a read, so the
//! recorder reads it every 30 s, at a job's first poll and at its closing poll. Between two
//! reads the counter's increase is split by the power samples (read every poll): the loop's
//! energy is the counter's own where a read falls on the loop's edge, and the power's shape of
//! it only between reads.

use serde::Serialize;

use crate::{GpuSeries, Steps, round};

/// Energy over the loop's steps.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Energy {
    pub joules_per_step: f64,
    /// Per 1,000 samples, when the loop said how many samples a step takes.
    pub joules_per_1k_samples: Option<f64>,
    /// The loop's steps within the span.
    pub steps: usize,
    /// The span: the loop's steps between the counter's first and last reads (seconds since
    /// the run started).
    pub span_s: [f64; 2],
    /// An edge of the span fell between two reads of the counter, where the power samples
    /// split its increase.
    pub split_by_power: bool,
}

/// A reading of the counter: when, and millijoules.
type Reading = (f64, f64);

/// Joules per step over the loop's steps within the counter's reads.
pub(crate) fn energy(g: &GpuSeries, steps: Option<&Steps>, samples: Option<f64>) -> Result<Energy, String> {
    let steps = steps.ok_or("no energy per step: the loop sent no step marks")?;
    let readings = readings(g);
    let (Some(first), Some(last)) = (readings.first(), readings.last()) else {
        return Err("no energy per step: the energy counter was not read".into());
    };
    let [w0, w1] = steps.window_s;
    let (a, b) = (w0.max(first.0), w1.min(last.0));
    let count = steps_within(steps, a, b);
    if b <= a || count < 1.0 {
        return Err("no energy per step: the energy counter was not read before and after a step of the loop".into());
    }
    let unsplit = "no energy per step: the power samples between the energy counter's reads are missing";
    let (ea, split_a) = at(g, &readings, a).ok_or(unsplit)?;
    let (eb, split_b) = at(g, &readings, b).ok_or(unsplit)?;
    let per_step = (eb - ea) / 1000.0 / count;
    Ok(Energy {
        joules_per_step: per_step,
        joules_per_1k_samples: samples.map(|n| per_step / n * 1000.0),
        steps: count.round() as usize,
        span_s: [round(a, 1), round(b, 1)],
        split_by_power: split_a || split_b,
    })
}

/// The counter's reads: it is held between them, so a read is where its value changed. The
/// first value is a read too, unless it was held from before the series began. A counter that
/// went back (a driver reloaded) starts the reads again from there.
fn readings(g: &GpuSeries) -> Vec<Reading> {
    let mut out: Vec<Reading> = Vec::new();
    let mut held = if g.energy_first_held { g.energy_mj.iter().flatten().next().copied() } else { None };
    for (t, e) in g.t_s.iter().zip(&g.energy_mj) {
        let Some(e) = *e else { continue };
        if held.is_some_and(|h| h == e) {
            continue;
        }
        held = None;
        match out.last() {
            Some(r) if r.1 == e => {}
            Some(r) if e < r.1 => out = vec![(*t, e)],
            _ => out.push((*t, e)),
        }
    }
    out
}

/// The steps that ended within `(a, b]`: each mark stands for its span over its mean step
/// time, counted for the part of its span inside.
fn steps_within(steps: &Steps, a: f64, b: f64) -> f64 {
    let mut count = 0.0;
    let mut prev = steps.window_s[0];
    for &(t, mean_s) in &steps.step_s {
        if t > prev && mean_s > 0.0 {
            let n = ((t - prev) / mean_s).round().max(1.0);
            let inside = (t.min(b) - prev.max(a)).max(0.0) / (t - prev);
            count += n * inside;
        }
        prev = t;
    }
    count
}

/// The counter at `t` (millijoules), and whether it was split by power: exact at a read;
/// between two reads, the first plus the increase in the share of the power's integral
/// reached by `t`. `None` where the power is missing between the reads, or `t` is outside them.
fn at(g: &GpuSeries, readings: &[Reading], t: f64) -> Option<(f64, bool)> {
    if let Some(r) = readings.iter().find(|r| (r.0 - t).abs() < 1e-9) {
        return Some((r.1, false));
    }
    let i = readings.iter().position(|r| r.0 > t)?;
    let (lo, hi) = (readings.get(i.checked_sub(1)?)?, readings[i]);
    let whole = power_integral(g, lo.0, hi.0)?;
    let part = power_integral(g, lo.0, t)?;
    let share = if whole > 0.0 { (part / whole).clamp(0.0, 1.0) } else { (t - lo.0) / (hi.0 - lo.0) };
    Some((lo.1 + (hi.1 - lo.1) * share, true))
}

/// The power samples' integral over `[a, b]` by trapezoids, joules; `None` when a sample
/// over the span, or on either side of it, has no power.
fn power_integral(g: &GpuSeries, a: f64, b: f64) -> Option<f64> {
    let t = &g.t_s;
    let i0 = t.iter().rposition(|x| *x <= a)?;
    let i1 = t.iter().position(|x| *x >= b)?;
    let points: Vec<(f64, f64)> = (i0..=i1).map(|i| Some((t[i], (*g.power_w.get(i)?)?))).collect::<Option<_>>()?;
    let value = |x: f64| match points.iter().position(|p| p.0 >= x) {
        Some(0) | None => points[0].1,
        Some(i) => {
            let (lo, hi) = (points[i - 1], points[i]);
            lo.1 + (hi.1 - lo.1) * (x - lo.0) / (hi.0 - lo.0)
        }
    };
    let mut xs = vec![(a, value(a))];
    xs.extend(points.iter().copied().filter(|p| p.0 > a && p.0 < b));
    xs.push((b, value(b)));
    Some(xs.windows(2).map(|w| (w[1].0 - w[0].0) * (w[0].1 + w[1].1) / 2.0).sum())
}

#[cfg(test)]
#[path = "energy_tests.rs"]
mod tests;
