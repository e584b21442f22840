//! The last minutes of each series the charts draw, in fixed-size rings: no Prometheus needed.

use std::collections::VecDeque;

/// The latest `cap` readings of one series; an absent reading stays absent (a gap, not a 0).
#[derive(Debug, Clone)]
pub struct Ring {
    values: VecDeque<Option<f64>>,
    cap: usize,
}

impl Ring {
    pub fn new(cap: usize) -> Self {
        Self { values: VecDeque::with_capacity(cap), cap }
    }

    pub fn push(&mut self, v: Option<f64>) {
        if self.values.len() == self.cap {
            self.values.pop_front();
        }
        self.values.push_back(v);
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The latest `n` readings, oldest first.
    pub fn last_n(&self, n: usize) -> impl Iterator<Item = Option<f64>> + '_ {
        self.values.iter().skip(self.values.len().saturating_sub(n)).copied()
    }

    /// The largest reading held, if any.
    pub fn max(&self) -> Option<f64> {
        self.values.iter().flatten().copied().reduce(f64::max)
    }
}

/// What the chart of a GPU shows; `H` switches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Chart {
    #[default]
    Util,
    Memory,
    Power,
}

impl Chart {
    pub fn next(self) -> Self {
        match self {
            Chart::Util => Chart::Memory,
            Chart::Memory => Chart::Power,
            Chart::Power => Chart::Util,
        }
    }

    /// The chart's name alone, where its title does not fit.
    pub fn name(self) -> &'static str {
        match self {
            Chart::Util => "GPU-Util",
            Chart::Memory => "memory",
            Chart::Power => "power",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Chart::Util => "GPU-Util (SM activity below)",
            Chart::Memory => "memory used, % of total",
            Chart::Power => "power, % of limit",
        }
    }
}

/// One GPU's series, as percentages so that every chart shares a 0–100 scale.
#[derive(Debug, Clone)]
pub struct GpuHistory {
    pub util_pct: Ring,
    pub sm_pct: Ring,
    pub mem_pct: Ring,
    pub power_pct: Ring,
}

impl GpuHistory {
    pub fn new(cap: usize) -> Self {
        Self { util_pct: Ring::new(cap), sm_pct: Ring::new(cap), mem_pct: Ring::new(cap), power_pct: Ring::new(cap) }
    }

    pub fn series(&self, chart: Chart) -> &Ring {
        match chart {
            Chart::Util => &self.util_pct,
            Chart::Memory => &self.mem_pct,
            Chart::Power => &self.power_pct,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_latest_and_the_gaps() {
        let mut r = Ring::new(3);
        for v in [Some(1.0), None, Some(3.0), Some(4.0)] {
            r.push(v);
        }
        assert_eq!(r.last_n(10).collect::<Vec<_>>(), [None, Some(3.0), Some(4.0)]);
        assert_eq!(r.last_n(1).collect::<Vec<_>>(), [Some(4.0)]);
        assert_eq!((r.len(), r.max()), (3, Some(4.0)));
        assert_eq!(Chart::Power.next(), Chart::Util);
    }
}
