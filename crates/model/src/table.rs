//! The metric tables: one row per GPU metric. A row is the whole metric: its key and unit, where
//! NVML gives it, how often it is read, its `--query-gpu` names and how they print it, and its
//! dcgm-exporter series.
//!
//! [`TABLE`] holds the metrics of `nvmlDeviceGetFieldValues`: the sampler, the recording,
//! `gpulse query`, `/metrics` and the stand-in all walk it, so adding a row adds the metric
//! everywhere. [`HAND_READ`] holds those NVML gives through calls of their own, each a field of
//! [`crate::GpuSample`] that the sampler reads by hand; `gpulse query` and `/metrics` walk it
//! (docs/architecture.md). GPM's metrics have their table in [`crate::gpm`].

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use smallvec::SmallVec;

use crate::{Absence, DeviceInfo, GpuSample, Metric};

mod hand;

pub use hand::{HAND_READ, hand_read};

/// How often the sampler reads a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Every {
    /// Every poll.
    Poll,
    /// With the settings (`Cadence::settings`: every poll in views, every 5 s in recorders):
    /// counters that move rarely.
    Settings,
    /// With the power limit (`Cadence::power_limit`).
    PowerLimit,
    /// With the energy counter (`Cadence::energy`), the costliest read.
    Energy,
    /// From GPM's window where GPM gives PCIe traffic; else the call, only on
    /// `NvmlOptions::pcie_every` (it blocks about 20 ms, so never by default).
    Pcie,
}

/// Where NVML gives a metric.
#[derive(Debug, Clone, Copy)]
pub enum Source {
    /// `NVML_FI_DEV_*`: the field of `nvmlDeviceGetFieldValues`; the reading is in
    /// [`GpuSample::table`].
    Field(u32),
    /// A call of its own (`nvmlDeviceGetPowerUsage`…) that fills a field of [`GpuSample`].
    Call(Call),
}

/// A hand-read metric's NVML call and the [`GpuSample`] field it fills.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    /// The C call, as nvml-wrapper's `doc(alias)` names it.
    pub name: &'static str,
    /// What an absence of the value is filed under.
    pub metric: Metric,
    /// The value, in the row's unit.
    pub read: fn(&GpuSample) -> Option<u64>,
    /// Stores a value in the row's unit (an nvidia-smi log's cell).
    pub write: fn(&mut GpuSample, u64),
    /// The device fact that stands for the value when a sample lacks it (`--query-gpu` only).
    pub device: Option<fn(&DeviceInfo) -> Option<u64>>,
    /// Where a recording keeps it; `None` for a second name of a field another row keeps, and
    /// for a value worked out from others when read (`memory_free_bytes`).
    pub column: Option<Column>,
}

/// A hand-read metric's column in a recording. The names are the recording's own and never
/// change: users' SQL and DataFrames read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    pub place: Place,
    pub scale: Scale,
}

/// Which table of the recording holds a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// `gpu_sample_rows`: a row every poll, the readings that move.
    Base,
    /// `gpu_state`: a row only when one of its readings changed.
    State,
}

/// How a value is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// As the row's unit gives it (a bitmask as its 64 bits, signed).
    One,
    /// Bytes (or bytes a second) as KiB, rounded up, so that MiB rounded up stays exact.
    Kib,
}

impl Scale {
    /// The stored integer of `v`.
    pub fn store(self, v: u64) -> i64 {
        match self {
            Self::One => v as i64,
            Self::Kib => v.div_ceil(1024) as i64,
        }
    }

    /// The value a stored integer stands for.
    pub fn load(self, v: i64) -> u64 {
        match self {
            Self::One => v as u64,
            Self::Kib => (v as u64).saturating_mul(1024),
        }
    }
}

/// The hand-read rows that `place` keeps, with their calls, in the table's order.
pub fn columns_in(place: Place) -> impl Iterator<Item = (&'static Call, Column)> {
    HAND_READ.iter().filter_map(move |m| {
        let call = m.call()?;
        call.column.filter(|c| c.place == place).map(|c| (call, c))
    })
}

/// How many hand-read rows `place` keeps.
pub const fn count_in(place: Place) -> usize {
    let (mut i, mut n) = (0, 0);
    while i < HAND_READ.len() {
        if kept_in(&HAND_READ[i], place).is_some() {
            n += 1;
        }
        i += 1;
    }
    n
}

/// The calls of the hand-read rows `place` keeps, in the table's order, as a constant: a
/// recording's writer reads them for every sample, and a constant's calls are inlined.
pub const fn calls_in<const N: usize>(place: Place) -> [Call; N] {
    let mut out = [UNKEPT; N];
    let (mut i, mut n) = (0, 0);
    while i < HAND_READ.len() {
        if let Some(c) = kept_in(&HAND_READ[i], place) {
            out[n] = c;
            n += 1;
        }
        i += 1;
    }
    assert!(n == N, "N is count_in(place)");
    out
}

const fn kept_in(m: &TableMetric, place: Place) -> Option<Call> {
    match m.source {
        Source::Call(c) => match c.column {
            Some(Column { place: p, .. }) if p as u8 == place as u8 => Some(c),
            _ => None,
        },
        Source::Field(_) => None,
    }
}

/// A placeholder for [`calls_in`]'s array before it is filled.
const UNKEPT: Call =
    Call { name: "", metric: Metric::Utilization, read: |_| None, write: |_, _| {}, device: None, column: None };

/// The unit a metric's value is kept in: the unit in its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    /// 1 or 0.
    Flag,
    Pct,
    Celsius,
    Milliwatt,
    Millijoule,
    Byte,
    BytePerS,
    /// Decimal megabytes per second (a link's speed).
    MbPerS,
    Mhz,
    /// A performance state, 0 (P0) to 15.
    Pstate,
    /// An NVML bitmask.
    Bitmask,
}

/// How `--query-gpu` prints a value, as nvidia-smi does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// A whole number.
    Int,
    /// Milliwatts as watts with two decimals.
    Watts,
    /// Bytes as MiB, rounded up.
    MibCeil,
    /// `P` and the state.
    Pstate,
    /// `0x` and 16 upper-case hex digits.
    Hex16,
}

gpulse_base::words! {
    /// A Prometheus metric type, as dcgm-exporter names it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Kind {
        Gauge => "gauge",
        Counter => "counter",
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
    /// A [`TABLE`] row's key names the recording's `gpu_fields` rows and a stand-in scenario's
    /// `fields` object, and never changes once recorded; a [`HAND_READ`] row's is its
    /// [`GpuSample`] field.
    pub key: &'static str,
    pub unit: Unit,
    pub source: Source,
    pub every: Every,
    /// `--query-gpu` names, canonical first: nvidia-smi's where it has one, else gpulse's own;
    /// empty when the query language has none.
    pub smi: &'static [&'static str],
    pub shown: Shown,
    /// The unit `--query-gpu` shows in the header and after the value.
    pub smi_unit: Option<&'static str>,
    /// The `/metrics` series under dcgm-exporter's name, when it has one.
    pub dcgm: Option<Dcgm>,
}

impl PartialEq for TableMetric {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for TableMetric {}

impl TableMetric {
    /// The `NVML_FI_DEV_*` field that gives it, for a [`TABLE`] row.
    pub fn nvml_field(&self) -> Option<u32> {
        match self.source {
            Source::Field(id) => Some(id),
            Source::Call(_) => None,
        }
    }

    /// The NVML call and sample field behind a [`HAND_READ`] row.
    pub fn call(&self) -> Option<&Call> {
        match &self.source {
            Source::Call(c) => Some(c),
            Source::Field(_) => None,
        }
    }
}

/// Every table metric. A row's key and names must be new (a test checks), and its value an
/// integer as NVML gives it: units are in the key.
pub const TABLE: &[TableMetric] = &[
    TableMetric {
        key: "pcie_replay_count",
        unit: Unit::Count,
        source: Source::Field(94), // NVML_FI_DEV_PCIE_REPLAY_COUNTER
        // A counter of link retries, which moves rarely: one field-values call costs 0.33 ms
        // on an H200's driver (BENCHMARKS.md), a third of a 100 ms recorder's poll.
        every: Every::Settings,
        smi: &["pcie.replay_counter"],
        shown: Shown::Int,
        smi_unit: None,
        dcgm: Some(Dcgm {
            name: "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
            kind: Kind::Counter,
            help: "Total number of PCIe retries.",
        }),
    },
    TableMetric {
        key: "nvlink_crc_flit_error_count",
        unit: Unit::Count,
        source: Source::Field(38), // NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL
        every: Every::Settings,
        smi: &["nvlink.errors.crc_flit.total"],
        shown: Shown::Int,
        smi_unit: None,
        dcgm: Some(Dcgm {
            name: "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
            kind: Kind::Counter,
            help: "Total number of NVLink flow-control CRC errors.",
        }),
    },
    TableMetric {
        key: "nvlink_crc_data_error_count",
        unit: Unit::Count,
        source: Source::Field(45), // NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL
        every: Every::Settings,
        smi: &["nvlink.errors.crc_data.total"],
        shown: Shown::Int,
        smi_unit: None,
        dcgm: Some(Dcgm {
            name: "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
            kind: Kind::Counter,
            help: "Total number of NVLink data CRC errors.",
        }),
    },
    TableMetric {
        key: "nvlink_replay_error_count",
        unit: Unit::Count,
        source: Source::Field(52), // NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL
        every: Every::Settings,
        smi: &["nvlink.errors.replay.total"],
        shown: Shown::Int,
        smi_unit: None,
        dcgm: Some(Dcgm {
            name: "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
            kind: Kind::Counter,
            help: "Total number of NVLink retries.",
        }),
    },
    TableMetric {
        key: "nvlink_recovery_error_count",
        unit: Unit::Count,
        source: Source::Field(59), // NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL
        every: Every::Settings,
        smi: &["nvlink.errors.recovery.total"],
        shown: Shown::Int,
        smi_unit: None,
        dcgm: Some(Dcgm {
            name: "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
            kind: Kind::Counter,
            help: "Total number of NVLink recovery errors.",
        }),
    },
    TableMetric {
        key: "nvlink_speed_mbps",
        unit: Unit::MbPerS,
        source: Source::Field(90), // NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON
        every: Every::Settings,
        smi: &["nvlink.speed.common"],
        shown: Shown::Int,
        smi_unit: Some("MB/s"),
        dcgm: None,
    },
    TableMetric {
        key: "retired_pages_sbe",
        unit: Unit::Count,
        source: Source::Field(29), // NVML_FI_DEV_RETIRED_SBE
        every: Every::Settings,
        smi: &["retired_pages.sbe.field"],
        shown: Shown::Int,
        smi_unit: None,
        dcgm: Some(Dcgm {
            name: "DCGM_FI_DEV_RETIRED_SBE",
            kind: Kind::Counter,
            help: "Total number of retired pages due to single-bit errors.",
        }),
    },
    TableMetric {
        key: "retired_pages_dbe",
        unit: Unit::Count,
        source: Source::Field(30), // NVML_FI_DEV_RETIRED_DBE
        every: Every::Settings,
        smi: &["retired_pages.dbe.field"],
        shown: Shown::Int,
        smi_unit: None,
        dcgm: Some(Dcgm {
            name: "DCGM_FI_DEV_RETIRED_DBE",
            kind: Kind::Counter,
            help: "Total number of retired pages due to double-bit errors.",
        }),
    },
    TableMetric {
        key: "retired_pages_pending",
        unit: Unit::Flag,
        source: Source::Field(31), // NVML_FI_DEV_RETIRED_PENDING: 1 when a page waits for a reset to retire
        every: Every::Settings,
        smi: &["retired_pages.pending.field"],
        shown: Shown::Int,
        smi_unit: None,
        dcgm: Some(Dcgm {
            name: "DCGM_FI_DEV_RETIRED_PENDING",
            kind: Kind::Counter,
            help: "Total number of pages pending retirement.",
        }),
    },
    TableMetric {
        key: "remapped_rows_pending",
        unit: Unit::Flag,
        source: Source::Field(144), // NVML_FI_DEV_REMAPPED_PENDING: 1 when a row remap waits for a reset
        every: Every::Settings,
        smi: &["remapped_rows.pending.field"],
        shown: Shown::Int,
        smi_unit: None,
        dcgm: None,
    },
];

/// The table metric stored under `key`.
pub fn table_metric(key: &str) -> Option<&'static TableMetric> {
    TABLE.iter().find(|m| m.key == key)
}

/// Every metric of both tables: the field values, then the hand-read ones.
pub fn metrics() -> impl Iterator<Item = &'static TableMetric> {
    TABLE.iter().chain(HAND_READ)
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

    /// Keys, NVML fields, `--query-gpu` names and dcgm names are each used once, across both
    /// tables.
    #[test]
    fn every_row_is_named_once() {
        fn once<T: Ord + std::fmt::Debug>(what: &str, mut v: Vec<T>) {
            let n = v.len();
            v.sort();
            v.dedup();
            assert_eq!(v.len(), n, "each {what} once: {v:?}");
        }
        once("key", metrics().map(|m| m.key).collect());
        once("NVML field", metrics().filter_map(TableMetric::nvml_field).collect());
        once("--query-gpu name", metrics().flat_map(|m| m.smi.iter().copied()).collect());
        once("dcgm name", metrics().filter_map(|m| m.dcgm.map(|d| d.name)).collect());
        for m in TABLE {
            assert!(!m.smi.is_empty(), "{} has a --query-gpu name", m.key);
            assert!(m.nvml_field().is_some() && m.shown == Shown::Int, "{}", m.key);
        }
        for m in metrics() {
            assert!(m.key.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'), "{}", m.key);
            assert!(m.dcgm.is_none_or(|d| d.name.starts_with("DCGM_FI_")), "{}", m.key);
            assert!(!m.smi.is_empty() || m.smi_unit.is_none(), "{}", m.key);
        }
        for m in HAND_READ {
            assert!(m.call().is_some(), "{} names its call", m.key);
        }
    }

    /// What a hand-read row writes, it reads back, in its unit.
    #[test]
    fn hand_read_rows_read_what_they_write() {
        for (i, m) in HAND_READ.iter().enumerate() {
            let c = m.call().unwrap();
            let mut s = GpuSample::default();
            assert_eq!((c.read)(&s), None, "{}", m.key);
            let v = 3 + i as u64;
            (c.write)(&mut s, v);
            assert_eq!((c.read)(&s), Some(v), "{}", m.key);
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
