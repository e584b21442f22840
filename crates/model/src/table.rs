//! The metric table: one row per GPU metric that NVML gives through `nvmlDeviceGetFieldValues`.
//! A row is the whole metric: the NVML field the sampler asks for, how often, the key the
//! recording and the stand-in library store it under, its `--query-gpu` name and its
//! dcgm-exporter series. The sampler, the recording, `gpulse query`, `/metrics` and the stand-in
//! all walk this table, so adding a row adds the metric everywhere (docs/architecture.md).
//!
//! Metrics that NVML gives only through calls of their own (utilization, memory, clocks, GPM…)
//! stay hand-written fields of [`crate::GpuSample`].

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use smallvec::SmallVec;

use crate::Absence;

/// How often the sampler reads a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Every {
    /// Every poll.
    Poll,
    /// With the settings (`Cadence::settings`: every poll in views, every 5 s in recorders):
    /// counters that move rarely.
    Settings,
}

/// A Prometheus metric type, as dcgm-exporter names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gauge => "gauge",
            Self::Counter => "counter",
        }
    }
}

/// dcgm-exporter's series for a metric: its name, type and help text as its
/// `etc/default-counters.csv` writes them.
#[derive(Debug, Clone, Copy)]
pub struct Dcgm {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
}

/// One metric.
#[derive(Debug, Clone, Copy)]
pub struct TableMetric {
    /// The key of the recording's `gpu_fields` rows and of a stand-in scenario's `fields`
    /// object; never changes once recorded.
    pub key: &'static str,
    /// `NVML_FI_DEV_*`: the field of `nvmlDeviceGetFieldValues` that gives it.
    pub nvml_field: u32,
    pub every: Every,
    /// `--query-gpu` names, canonical first: nvidia-smi's where it has one, else gpulse's own.
    /// The value prints as an integer.
    pub smi: &'static [&'static str],
    /// The unit `--query-gpu` shows in the header and after the value.
    pub smi_unit: Option<&'static str>,
    /// The `/metrics` series under dcgm-exporter's name, when it has one.
    pub dcgm: Option<Dcgm>,
}

/// Every table metric. A row's key and names must be new (a test checks), and its value an
/// integer as NVML gives it: units are in the key.
pub const TABLE: &[TableMetric] = &[
    TableMetric {
        key: "pcie_replay_count",
        nvml_field: 94, // NVML_FI_DEV_PCIE_REPLAY_COUNTER
        // A counter of link retries, which moves rarely: one field-values call costs 0.33 ms
        // on an H200's driver (BENCHMARKS.md), a third of a 100 ms recorder's poll.
        every: Every::Settings,
        smi: &["pcie.replay_counter"],
        smi_unit: None,
        dcgm: Some(Dcgm {
            name: "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
            kind: Kind::Counter,
            help: "Total number of PCIe retries.",
        }),
    },
    TableMetric {
        key: "nvlink_crc_flit_error_count",
        nvml_field: 38, // NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL
        every: Every::Settings,
        smi: &["nvlink.errors.crc_flit.total"],
        smi_unit: None,
        dcgm: Some(Dcgm {
            name: "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
            kind: Kind::Counter,
            help: "Total number of NVLink flow-control CRC errors.",
        }),
    },
    TableMetric {
        key: "nvlink_crc_data_error_count",
        nvml_field: 45, // NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL
        every: Every::Settings,
        smi: &["nvlink.errors.crc_data.total"],
        smi_unit: None,
        dcgm: Some(Dcgm {
            name: "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
            kind: Kind::Counter,
            help: "Total number of NVLink data CRC errors.",
        }),
    },
    TableMetric {
        key: "nvlink_replay_error_count",
        nvml_field: 52, // NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL
        every: Every::Settings,
        smi: &["nvlink.errors.replay.total"],
        smi_unit: None,
        dcgm: Some(Dcgm {
            name: "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
            kind: Kind::Counter,
            help: "Total number of NVLink retries.",
        }),
    },
    TableMetric {
        key: "nvlink_recovery_error_count",
        nvml_field: 59, // NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL
        every: Every::Settings,
        smi: &["nvlink.errors.recovery.total"],
        smi_unit: None,
        dcgm: Some(Dcgm {
            name: "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
            kind: Kind::Counter,
            help: "Total number of NVLink recovery errors.",
        }),
    },
    TableMetric {
        key: "nvlink_speed_mbps",
        nvml_field: 90, // NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON
        every: Every::Settings,
        smi: &["nvlink.speed.common"],
        smi_unit: Some("MB/s"),
        dcgm: None,
    },
    TableMetric {
        key: "retired_pages_sbe",
        nvml_field: 29, // NVML_FI_DEV_RETIRED_SBE
        every: Every::Settings,
        smi: &["retired_pages.sbe.field"],
        smi_unit: None,
        dcgm: Some(Dcgm {
            name: "DCGM_FI_DEV_RETIRED_SBE",
            kind: Kind::Counter,
            help: "Total number of retired pages due to single-bit errors.",
        }),
    },
    TableMetric {
        key: "retired_pages_dbe",
        nvml_field: 30, // NVML_FI_DEV_RETIRED_DBE
        every: Every::Settings,
        smi: &["retired_pages.dbe.field"],
        smi_unit: None,
        dcgm: Some(Dcgm {
            name: "DCGM_FI_DEV_RETIRED_DBE",
            kind: Kind::Counter,
            help: "Total number of retired pages due to double-bit errors.",
        }),
    },
    TableMetric {
        key: "retired_pages_pending",
        nvml_field: 31, // NVML_FI_DEV_RETIRED_PENDING: 1 when a page waits for a reset to retire
        every: Every::Settings,
        smi: &["retired_pages.pending.field"],
        smi_unit: None,
        dcgm: Some(Dcgm {
            name: "DCGM_FI_DEV_RETIRED_PENDING",
            kind: Kind::Counter,
            help: "Total number of pages pending retirement.",
        }),
    },
    TableMetric {
        key: "remapped_rows_pending",
        nvml_field: 144, // NVML_FI_DEV_REMAPPED_PENDING: 1 when a row remap waits for a reset
        every: Every::Settings,
        smi: &["remapped_rows.pending.field"],
        smi_unit: None,
        dcgm: None,
    },
];

/// The table metric stored under `key`.
pub fn table_metric(key: &str) -> Option<&'static TableMetric> {
    TABLE.iter().find(|m| m.key == key)
}

/// One table metric's reading: its value, or why NVML gave none.
pub type TableReading = (&'static str, Result<i64, Absence>);

/// The table metrics read in one poll, by key. Serialized (the `status --json` document) as an
/// object of the values read; absences are not written there.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TableReadings(pub SmallVec<[TableReading; 10]>);

impl TableReadings {
    /// What was read for `key`: `None` when it was not asked for.
    pub fn get(&self, key: &str) -> Option<Result<i64, Absence>> {
        self.0.iter().find(|r| r.0 == key).map(|r| r.1)
    }

    /// The value of `key`, if NVML gave one.
    pub fn value(&self, key: &str) -> Option<i64> {
        self.get(key).and_then(Result::ok)
    }

    /// Sets `key`'s reading, in place of any earlier one.
    pub fn set(&mut self, key: &'static str, reading: Result<i64, Absence>) {
        match self.0.iter_mut().find(|r| r.0 == key) {
            Some(r) => r.1 = reading,
            None => self.0.push((key, reading)),
        }
    }

    /// Whether no value was read (only absences, or nothing).
    pub fn has_no_value(&self) -> bool {
        self.0.iter().all(|r| r.1.is_err())
    }
}

impl Serialize for TableReadings {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().filter_map(|(k, r)| r.ok().map(|v| (*k, v))))
    }
}

impl<'de> Deserialize<'de> for TableReadings {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = std::collections::BTreeMap::<String, i64>::deserialize(d)?;
        // A key a later gpulse added is skipped, not misread.
        Ok(Self(map.into_iter().filter_map(|(k, v)| Some((table_metric(&k)?.key, Ok(v)))).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys, NVML fields, `--query-gpu` names and dcgm names are each used once.
    #[test]
    fn every_row_is_named_once() {
        fn once<T: Ord + std::fmt::Debug>(what: &str, mut v: Vec<T>) {
            let n = v.len();
            v.sort();
            v.dedup();
            assert_eq!(v.len(), n, "each {what} once: {v:?}");
        }
        once("key", TABLE.iter().map(|m| m.key).collect());
        once("NVML field", TABLE.iter().map(|m| m.nvml_field).collect());
        once("--query-gpu name", TABLE.iter().flat_map(|m| m.smi.iter().copied()).collect());
        once("dcgm name", TABLE.iter().filter_map(|m| m.dcgm.map(|d| d.name)).collect());
        for m in TABLE {
            assert!(!m.smi.is_empty(), "{} has a --query-gpu name", m.key);
            assert!(m.key.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'), "{}", m.key);
            assert!(m.dcgm.is_none_or(|d| d.name.starts_with("DCGM_FI_")), "{}", m.key);
        }
    }

    #[test]
    fn readings_serialize_their_values_and_read_back() {
        let mut r = TableReadings::default();
        assert!(r.has_no_value());
        r.set(TABLE[0].key, Err(Absence::NotSupported));
        assert!(r.has_no_value());
        assert_eq!(serde_json::to_string(&r).unwrap(), "{}", "an absence is not a value");
        r.set(TABLE[0].key, Ok(7));
        assert_eq!(r.value(TABLE[0].key), Some(7));
        let json = serde_json::to_string(&r).unwrap();
        let back: TableReadings = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        let later: TableReadings = serde_json::from_str(r#"{"not_yet_a_metric": 3}"#).unwrap();
        assert_eq!(later, TableReadings::default(), "unknown keys are skipped");
    }
}
