//! One `--query-gpu` or `--query-compute-apps` request: its fields, what NVML must read for them
//! and nothing more, its header and its rows.

use gpulse_model::{DeviceInfo, Metric, Probe, Snapshot};

use crate::fields::{AppKey, GpuKey};
use crate::{AppField, CsvFormat, GpuField, GpuRow, QueryError};

/// What the query prints.
pub enum Query {
    Gpu(Vec<GpuField>),
    Apps(Vec<AppField>),
}

/// The reads a query needs: a one-shot query then costs little more than NVML's start.
pub struct ReadPlan {
    pub gpm: bool,
    pub metrics: Vec<Metric>,
    pub device_facts: bool,
    /// Each extra read once, in the order the fields first name it.
    pub probes: Vec<Probe>,
}

impl Query {
    /// From `--query-gpu=` (which wins, as in nvidia-smi) or `--query-compute-apps=`.
    pub fn parse(gpu: Option<&str>, apps: Option<&str>) -> Option<Result<Self, QueryError>> {
        match (gpu, apps) {
            (Some(q), _) => Some(crate::parse_gpu_fields(q).map(Query::Gpu)),
            (None, Some(q)) => Some(crate::parse_app_fields(q).map(Query::Apps)),
            (None, None) => None,
        }
    }

    pub fn plan(&self) -> ReadPlan {
        let (gpm, metrics, device_facts, mut probes) = match self {
            Query::Gpu(f) => (
                f.iter().any(|f| matches!(f.key, GpuKey::Gpm(_))),
                f.iter().filter_map(|f| f.key.metric()).collect(),
                f.iter().any(|f| f.key.is_device_fact()),
                f.iter().filter_map(|f| f.key.probe()).collect::<Vec<_>>(),
            ),
            Query::Apps(f) => (
                false,
                vec![Metric::Processes],
                false,
                f.iter().any(|f| f.key == AppKey::GpuSerial).then_some(Probe::Serial).into_iter().collect(),
            ),
        };
        // A field named twice is read once.
        let mut seen = std::collections::HashSet::new();
        probes.retain(|p| seen.insert(*p));
        ReadPlan { gpm, metrics, device_facts, probes }
    }

    pub fn header(&self) -> String {
        match self {
            Query::Gpu(f) => crate::gpu_header(f),
            Query::Apps(f) => crate::app_header(f),
        }
    }

    /// Every row of one poll for the `chosen` devices, each ending in a newline.
    pub fn rows(&self, devices: &[DeviceInfo], chosen: &[usize], snap: &Snapshot, format: CsvFormat) -> String {
        let mut text = String::new();
        for &i in chosen {
            let (info, sample) = (&devices[i], &snap.gpus[i]);
            match self {
                Query::Gpu(f) => {
                    let row = GpuRow { info, sample, timestamp_us: snap.timestamp_us, device_count: devices.len() };
                    text += &crate::gpu_row(f, &row, format);
                    text.push('\n');
                }
                Query::Apps(f) => {
                    for p in &sample.processes {
                        text += &crate::app_row(f, info, &sample.probes, p, snap.timestamp_us, format);
                        text.push('\n');
                    }
                }
            }
        }
        text
    }
}
