//! Replays a recorded NVML trace as if it were live: the demo's source.
//!
//! Each `sample()` advances the trace's own clock by one step and returns the last poll of each
//! GPU at or before that moment, stamped with the trace's time. Pacing is the caller's business,
//! so a replay runs as fast as a test wants.

use gpulse_model::trace::{self, TraceRow};
use gpulse_model::{DeviceInfo, GpuSample, MIB, ProcessSample, Snapshot};

use crate::{SampleError, Source};

/// Processes known to hold memory on a GPU during a stretch of the trace.
#[derive(Debug, Clone)]
pub struct ReplayProcess {
    pub gpu_index: u32,
    pub from_s: f64,
    pub until_s: f64,
    pub process: ProcessSample,
}

/// Steps of silence after which a replay jumps to the next row.
const GAP_STEPS: f64 = 100.0;

/// A trace replayed step by step.
pub struct TraceReplay {
    devices: Vec<DeviceInfo>,
    rows: Vec<TraceRow>,
    processes: Vec<ReplayProcess>,
    cursor_s: f64,
    step_s: f64,
    next_row: usize,
    last: Vec<Option<usize>>,
}

impl TraceReplay {
    /// Replays `text` (the trace format of [`gpulse_model::trace`]) for `devices`, advancing
    /// `step_s` seconds of trace time per sample.
    pub fn new(
        text: &str,
        devices: Vec<DeviceInfo>,
        processes: Vec<ReplayProcess>,
        step_s: f64,
    ) -> Result<Self, SampleError> {
        let rows = trace::parse(text).map_err(|e| SampleError::Replay(format!("bad trace: {e}")))?;
        let first = rows.first().ok_or_else(|| SampleError::Replay("trace has no rows".into()))?.t_s;
        if let Some(r) = rows.iter().find(|r| r.gpu as usize >= devices.len()) {
            return Err(SampleError::Replay(format!(
                "trace names GPU {} but only {} devices are known",
                r.gpu,
                devices.len()
            )));
        }
        let last = vec![None; devices.len()];
        Ok(Self { devices, rows, processes, cursor_s: first, step_s: step_s.max(1e-3), next_row: 0, last })
    }

    /// Whether every row has been replayed.
    pub fn finished(&self) -> bool {
        self.next_row >= self.rows.len()
    }

    fn sample_of(&self, d: &DeviceInfo, row: &TraceRow) -> GpuSample {
        let used = row.memory_used_mib.map(|m| m * MIB);
        GpuSample {
            gpu_index: d.index,
            util_gpu_pct: row.util_gpu_pct,
            util_mem_pct: row.util_mem_pct,
            memory_used_bytes: used,
            memory_total_bytes: d.memory_total_bytes,
            memory_free_bytes: d.memory_total_bytes.zip(used).map(|(t, u)| t.saturating_sub(u)),
            temperature_gpu_c: row.temperature_gpu_c,
            power_draw_mw: row.power_draw_w.map(gpulse_model::w_to_mw),
            power_limit_mw: d.power_limit_mw,
            enforced_power_limit_mw: d.power_limit_mw,
            clock_sm_mhz: row.clock_sm_mhz,
            clocks_event_reasons: row.clocks_event_reasons,
            gpm: row.gpm.clone().map(Box::new),
            pcie_tx_bytes_per_s: row.gpm.as_ref().and_then(|g| g.pcie_tx_bytes_per_s).map(|v| v as u64),
            pcie_rx_bytes_per_s: row.gpm.as_ref().and_then(|g| g.pcie_rx_bytes_per_s).map(|v| v as u64),
            processes: self
                .processes
                .iter()
                .filter(|p| p.gpu_index == d.index && p.from_s <= row.t_s && row.t_s < p.until_s)
                .map(|p| p.process.clone())
                .collect(),
            ..GpuSample::default()
        }
    }
}

impl Source for TraceReplay {
    fn devices(&self) -> &[DeviceInfo] {
        &self.devices
    }

    fn sample(&mut self) -> Result<Snapshot, SampleError> {
        if self.finished() {
            return Err(SampleError::Ended);
        }
        while self.next_row < self.rows.len() && self.rows[self.next_row].t_s <= self.cursor_s {
            self.last[self.rows[self.next_row].gpu as usize] = Some(self.next_row);
            self.next_row += 1;
        }
        let gpus = self
            .devices
            .iter()
            .zip(&self.last)
            .map(|(d, row)| match row {
                Some(i) => self.sample_of(d, &self.rows[*i]),
                None => GpuSample { gpu_index: d.index, ..GpuSample::default() },
            })
            .collect();
        let snapshot = Snapshot { timestamp_us: (self.cursor_s * 1e6) as i64, gpus };
        self.cursor_s += self.step_s;
        // Across a long gap nothing was read: jump to the next row rather than repeat the last
        // one thousands of times.
        if let Some(next) = self.rows.get(self.next_row)
            && next.t_s > self.cursor_s + GAP_STEPS * self.step_s
        {
            self.cursor_s = next.t_s;
        }
        Ok(snapshot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str =
        "t_s,gpu,util_gpu,mem_used_mib\n100.0,0,10,1000\n100.2,0,20,1000\n100.4,0,30,1024\n100.6,0,40,2048\n";

    fn device() -> DeviceInfo {
        DeviceInfo { index: 0, memory_total_bytes: Some(4096 * MIB), ..DeviceInfo::default() }
    }

    #[test]
    fn a_long_gap_is_jumped_not_repeated() {
        let text = "t_s,gpu,util_gpu\n0,0,10\n0.001,0,20\n1000000000,0,30\n";
        let mut r = TraceReplay::new(text, vec![device()], vec![], 0.001).unwrap();
        let mut n = 0;
        while crate::until_ended(r.sample()).unwrap().is_some() {
            n += 1;
            assert!(n < 1000, "the gap was replayed step by step");
        }
        assert!(n >= 3, "every row replayed: {n}");
    }

    #[test]
    fn steps_through_trace_time() {
        let mut r = TraceReplay::new(TRACE, vec![device()], vec![], 0.4).unwrap();
        let a = r.sample().unwrap();
        assert_eq!(a.timestamp_us, 100_000_000);
        assert_eq!(a.gpus[0].util_gpu_pct, Some(10));
        let b = r.sample().unwrap();
        assert_eq!(b.gpus[0].util_gpu_pct, Some(30));
        assert_eq!(b.gpus[0].memory_free_bytes, Some(3072 * MIB));
        let c = r.sample().unwrap();
        assert_eq!(c.gpus[0].util_gpu_pct, Some(40));
        assert!(r.finished());
        assert!(r.sample().is_err());
    }

    #[test]
    fn rejects_unknown_gpu() {
        let t = "t_s,gpu\n1,3\n";
        assert!(TraceReplay::new(t, vec![device()], vec![], 1.0).is_err());
    }
}
