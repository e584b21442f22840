//! gpulse's recording file.
//!
//! A recording is one SQLite database in WAL mode: readers (Python's `sqlite3`, pandas) can open
//! it while gpulse writes, and a `kill -9` of the recorder loses at most the last second, because
//! the writer commits once a second. [`schema`] defines the tables; [`Writer`] fills them;
//! [`read`] turns a file back into the model's snapshots.

mod read;
pub mod schema;
mod units;
mod write;

use std::collections::BTreeMap;

pub use read::{Recording, read, read_each};
pub use write::Writer;

/// A recording that cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("{0} is not a gpulse recording")]
    NotARecording(String),
    #[error("{path} was written by a newer gpulse (schema {found}, this one reads {supported})")]
    TooNew { path: String, found: u32, supported: u32 },
    #[error("{0}")]
    Json(#[from] serde_json::Error),
}

/// Facts about the run a recording holds, stored in the `meta` table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunMeta {
    pub host: Option<String>,
    pub gpulse_version: String,
    /// The command gpulse watched or ran, if any.
    pub command: Option<String>,
    pub started_at_us: i64,
    /// Where the samples came from: `nvml`, or `nvidia-smi csv: <files>`.
    pub source: String,
    /// The sampling interval asked for, milliseconds.
    pub interval_ms: Option<u64>,
    /// Anything else worth keeping, such as the nvidia-smi fields an imported log had.
    pub extra: BTreeMap<String, String>,
}

/// Something that happened during the run: a marker, an OOM, an error.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Event {
    pub t_ms: i64,
    pub kind: String,
    pub payload: serde_json::Value,
}
