//! GPM performance counters: samples taken in pairs at least 100 ms apart, metrics computed
//! between them (`nvmlGpmSampleGet`, `nvmlGpmMetricsGet`).

use std::time::{Duration, Instant};

use gpulse_model::GpmMetrics;
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::{GpmSample, gpm_metrics_get};
use nvml_wrapper::{Device, Nvml};

/// NVML needs this much time between two samples for meaningful metrics.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// The metrics gpulse asks for, in the order they fill [`GpmMetrics`].
const METRICS: [GpmMetricId; 13] = [
    GpmMetricId::GraphicsUtil,
    GpmMetricId::SmUtil,
    GpmMetricId::SmOccupancy,
    GpmMetricId::AnyTensorUtil,
    GpmMetricId::HmmaTensorUtil,
    GpmMetricId::DramBwUtil,
    GpmMetricId::Fp64Util,
    GpmMetricId::Fp32Util,
    GpmMetricId::Fp16Util,
    GpmMetricId::PcieTxPerSec,
    GpmMetricId::PcieRxPerSec,
    GpmMetricId::NvlinkTotalTxPerSec,
    GpmMetricId::NvlinkTotalRxPerSec,
];

/// The previous sample of one device, kept until the next one is far enough away.
#[derive(Default)]
pub(super) struct GpmPair {
    prev: Option<(GpmSample<'static>, Instant)>,
}

impl GpmPair {
    /// Takes a sample and returns the metrics since the previous one; `Ok(None)` for the first
    /// sample, or when the previous one is less than [`MIN_INTERVAL`] old (it is kept).
    pub(super) fn poll(&mut self, nvml: &'static Nvml, d: &Device<'static>) -> Result<Option<GpmMetrics>, NvmlError> {
        if self.prev.as_ref().is_some_and(|p| p.1.elapsed() < MIN_INTERVAL) {
            return Ok(None);
        }
        let now = Instant::now();
        let sample = d.gpm_sample()?;
        let Some((prev, at)) = self.prev.replace((sample, now)) else {
            return Ok(None);
        };
        let current = &self.prev.as_ref().expect("just stored").0;
        let values = gpm_metrics_get(nvml, &prev, current, &METRICS)?;
        let v = |i: usize| values.get(i).and_then(|r| r.as_ref().ok()).map(|m| m.value).filter(|x| x.is_finite());
        const MIB: f64 = 1024.0 * 1024.0;
        Ok(Some(GpmMetrics {
            interval_ms: now.duration_since(at).as_secs_f64() * 1000.0,
            graphics_util_pct: v(0),
            sm_util_pct: v(1),
            sm_occupancy_pct: v(2),
            any_tensor_util_pct: v(3),
            hmma_tensor_util_pct: v(4),
            dram_bw_util_pct: v(5),
            fp64_util_pct: v(6),
            fp32_util_pct: v(7),
            fp16_util_pct: v(8),
            // NVML reports these in MiB/s.
            pcie_tx_bytes_per_s: v(9).map(|x| x * MIB),
            pcie_rx_bytes_per_s: v(10).map(|x| x * MIB),
            nvlink_tx_bytes_per_s: v(11).map(|x| x * MIB),
            nvlink_rx_bytes_per_s: v(12).map(|x| x * MIB),
        }))
    }
}
