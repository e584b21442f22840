//! One run as a whole: the loop's marks, what happened during it, and every series, as a
//! recording holds them but with no storage behind them.

use std::collections::BTreeMap;

use crate::{DeviceInfo, HostSample, Snapshot, TreeSample};

/// What a [`Marker`] marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkerKind {
    /// A training step ended (`gpulse.step()`, or an optimizer step under `--instrument`).
    Step,
    /// The loop waited `dur_us` for its next batch (a DataLoader iterator's `__next__`).
    DataWait,
    /// A named phase (`with gpulse.phase("eval")`) lasted `dur_us`.
    Phase,
}

impl MarkerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Step => "step",
            Self::DataWait => "data_wait",
            Self::Phase => "phase",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "step" => Some(Self::Step),
            "data_wait" => Some(Self::DataWait),
            "phase" => Some(Self::Phase),
            _ => None,
        }
    }
}

/// A mark sent from inside the training loop.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Marker {
    /// When it began (a step: when it ended), microseconds since the Unix epoch.
    pub t_us: i64,
    /// The process that sent it (each torchrun rank sends its own).
    pub pid: u32,
    pub kind: MarkerKind,
    /// A phase's name.
    pub name: Option<String>,
    pub dur_us: Option<i64>,
    /// How many marks this row stands for: a fast loop's steps (and their waits) are folded into
    /// one row per tenth of a second; `dur_us` is then their total.
    pub count: u32,
}

impl Marker {
    /// One mark, standing for itself.
    pub fn one(t_us: i64, pid: u32, kind: MarkerKind, name: Option<String>, dur_us: Option<i64>) -> Self {
        Self { t_us, pid, kind, name, dur_us, count: 1 }
    }
}

/// Something that happened during the run: a marker, an OOM, an error.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Event {
    pub t_ms: i64,
    pub kind: String,
    pub payload: serde_json::Value,
}

/// Everything known of one run, in time order: what a recording holds, without SQLite.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunData {
    pub meta: BTreeMap<String, String>,
    pub devices: Vec<DeviceInfo>,
    pub snapshots: Vec<Snapshot>,
    pub host: Vec<HostSample>,
    pub trees: Vec<TreeSample>,
    pub events: Vec<Event>,
    /// Marks from inside the training loop, in time order.
    pub markers: Vec<Marker>,
    /// What a reader should be told, such as a recording's missing `-wal` file.
    pub warnings: Vec<String>,
}
