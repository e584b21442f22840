//! GPM performance counters: samples taken in pairs at least 100 ms apart, metrics computed
//! between them (`nvmlGpmSampleGet`, `nvmlGpmMetricsGet`).

use std::time::{Duration, Instant};

use gpulse_model::{GPM_FIELDS, GpmField, GpmMetrics};
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::{GpmSample, gpm_metrics_get};
use nvml_wrapper::{Device, Nvml};

/// NVML needs this much time between two samples for meaningful metrics.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// The previous sample of one device, the metrics of the last completed window, and which
/// metrics to ask for.
pub(super) struct GpmPair {
    prev: Option<(GpmSample<'static>, Instant)>,
    last: Option<GpmMetrics>,
    fields: Vec<&'static GpmField>,
    ids: Vec<GpmMetricId>,
}

impl Default for GpmPair {
    fn default() -> Self {
        Self::new(None)
    }
}

impl GpmPair {
    /// Asks for the metrics of `wanted` (NVML ids, kept in the model's table order), or for the
    /// whole table.
    pub(super) fn new(wanted: Option<&[u32]>) -> Self {
        let fields: Vec<&'static GpmField> =
            GPM_FIELDS.iter().filter(|f| wanted.is_none_or(|w| w.contains(&f.nvml_id))).collect();
        let ids =
            fields.iter().map(|f| GpmMetricId::try_from(f.nvml_id).expect("the table holds NVML's ids")).collect();
        Self { prev: None, last: None, fields, ids }
    }

    /// Opens the first window now (a failure leaves it for the first poll to open).
    pub(super) fn prime(&mut self, d: &Device<'static>) {
        if let Ok(sample) = super::profile::timed("gpm_sample", || d.gpm_sample()) {
            self.prev = Some((sample, Instant::now()));
        }
    }

    /// Returns the metrics of the latest completed window. A new window is closed (a sample
    /// taken and metrics computed between it and the previous one) once the previous sample is
    /// `every` old, and never sooner than [`MIN_INTERVAL`]; the first closes after
    /// [`MIN_INTERVAL`]. `Ok(None)` until then, unless `wait_first`: then the first window is
    /// `every` long and this waits for it to close.
    pub(super) fn poll(
        &mut self,
        nvml: &'static Nvml,
        d: &Device<'static>,
        every: Duration,
        wait_first: bool,
    ) -> Result<Option<GpmMetrics>, NvmlError> {
        let every = every.max(MIN_INTERVAL);
        // The first window closes as soon as it can, so a view has SM activity at once.
        let span = if self.last.is_none() && !wait_first { MIN_INTERVAL } else { every };
        if let Some((_, at)) = &self.prev {
            let age = at.elapsed();
            if wait_first && self.last.is_none() && age < span {
                std::thread::sleep(span - age);
            } else if age < span {
                return Ok(self.last.clone());
            }
        }
        let now = Instant::now();
        let sample = super::profile::timed("gpm_sample", || d.gpm_sample())?;
        let Some((prev, at)) = self.prev.replace((sample, now)) else {
            return Ok(None);
        };
        let current = &self.prev.as_ref().expect("just stored").0;
        let label = if crate::profile::enabled() {
            format!("gpm_metrics_get({} metrics)", self.ids.len())
        } else {
            String::new()
        };
        let values = super::profile::timed(&label, || gpm_metrics_get(nvml, &prev, current, &self.ids))?;
        super::profile::per_metric(|ids| gpm_metrics_get(nvml, &prev, current, ids).map(drop), &self.ids);
        let mut m = GpmMetrics { interval_ms: now.duration_since(at).as_secs_f64() * 1000.0, ..Default::default() };
        for (f, r) in self.fields.iter().zip(&values) {
            let v = r.as_ref().ok().map(|r| r.value).filter(|x| x.is_finite());
            (f.set)(&mut m, v.map(|x| f.unit.from_nvml(x)));
        }
        self.last = Some(m);
        Ok(self.last.clone())
    }
}
