//! GPM performance counters: samples taken in pairs at least 100 ms apart, metrics computed
//! between them (`nvmlGpmSampleGet`, `nvmlGpmMetricsGet`).

use std::time::{Duration, Instant};

use gpulse_model::{GPM_FIELDS, GpmMetrics};
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::{GpmSample, gpm_metrics_get};
use nvml_wrapper::{Device, Nvml};

/// NVML needs this much time between two samples for meaningful metrics.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// The metrics gpulse asks for: the model's table, in its order.
static METRICS: std::sync::LazyLock<Vec<GpmMetricId>> = std::sync::LazyLock::new(|| {
    GPM_FIELDS.iter().map(|f| GpmMetricId::try_from(f.nvml_id).expect("the table holds NVML's ids")).collect()
});

/// The previous sample of one device, and the metrics of the last completed window.
#[derive(Default)]
pub(super) struct GpmPair {
    prev: Option<(GpmSample<'static>, Instant)>,
    last: Option<GpmMetrics>,
}

impl GpmPair {
    /// Returns the metrics of the latest completed window. A new window is closed (a sample
    /// taken and metrics computed between it and the previous one) once the previous sample is
    /// `every` old, and never sooner than [`MIN_INTERVAL`]; the first closes after
    /// [`MIN_INTERVAL`]. `Ok(None)` until then.
    pub(super) fn poll(
        &mut self,
        nvml: &'static Nvml,
        d: &Device<'static>,
        every: Duration,
    ) -> Result<Option<GpmMetrics>, NvmlError> {
        // The first window closes as soon as it can, so a view has SM activity at once.
        let span = if self.last.is_none() { MIN_INTERVAL } else { every.max(MIN_INTERVAL) };
        if self.prev.as_ref().is_some_and(|p| p.1.elapsed() < span) {
            return Ok(self.last.clone());
        }
        let now = Instant::now();
        let sample = super::profile::timed("gpm_sample", || d.gpm_sample())?;
        let Some((prev, at)) = self.prev.replace((sample, now)) else {
            return Ok(None);
        };
        let current = &self.prev.as_ref().expect("just stored").0;
        let values = super::profile::timed("gpm_metrics_get(13)", || gpm_metrics_get(nvml, &prev, current, &METRICS))?;
        super::profile::per_metric(|ids| gpm_metrics_get(nvml, &prev, current, ids).map(drop), &METRICS);
        let mut m = GpmMetrics { interval_ms: now.duration_since(at).as_secs_f64() * 1000.0, ..Default::default() };
        for (f, r) in GPM_FIELDS.iter().zip(&values) {
            let v = r.as_ref().ok().map(|r| r.value).filter(|x| x.is_finite());
            (f.set)(&mut m, v.map(|x| f.unit.from_nvml(x)));
        }
        self.last = Some(m);
        Ok(self.last.clone())
    }
}
