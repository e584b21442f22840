//! gpulse's recording file.
//!
//! A recording is one SQLite database in WAL mode: readers (Python's `sqlite3`, pandas) can open
//! it while gpulse writes, and a `kill -9` of the recorder loses at most the last second, because
//! the writer commits once a second. [`schema`] defines the tables; [`Writer`] fills them;
//! [`read`] turns a file back into the model's snapshots.

mod check;
mod claim;
mod poll;
mod processes;
mod query;
mod read;
mod rest;
pub mod schema;
mod stacks;
mod table;
mod units;
mod workloads;
mod write;

use std::collections::BTreeMap;

pub use claim::{Claim, claim};
pub use gpulse_model::ProcessRow;
pub use gpulse_model::{Event, EventKind, Marker, MarkerKind, MetaKey, RunData};
pub use processes::read_process_rows;
pub use read::{Recording, read, read_each};
pub use stacks::CREATE_STACKS;
pub use workloads::CREATE_WORKLOADS;
pub use write::Writer;

/// The first bytes of every SQLite database, so of every recording.
pub const SQLITE_MAGIC: &[u8] = b"SQLite format 3\0";

/// The files SQLite keeps beside a recording: its write-ahead log, its shared memory and its
/// rollback journal, each the recording's name with this suffix.
pub const SIDE_FILES: [&str; 3] = ["-wal", "-shm", "-journal"];

/// `path` with `suffix` appended to its name (`run.db` → `run.db-wal`).
pub fn side_file(path: &std::path::Path, suffix: &str) -> std::path::PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    p.into()
}

/// Removes a recording this process made and the side files SQLite made beside it.
pub fn remove_with_side_files(path: &std::path::Path) {
    let _ = std::fs::remove_file(path);
    for suffix in SIDE_FILES {
        let _ = std::fs::remove_file(side_file(path, suffix));
    }
}

/// A recording that cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// SQLite's own words, once: its error's source repeats them.
    #[error("{}", sqlite_words(.0))]
    Sqlite(rusqlite::Error),
    #[error("{path} is damaged: {why}")]
    Damaged { path: String, why: String },
    #[error("{0} is not a gpulse recording")]
    NotARecording(String),
    #[error("{0} already exists; record to a new file")]
    Exists(String),
    #[error("cannot create {path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("{path} was written by a newer gpulse (schema {found}, this one reads {supported})")]
    TooNew { path: String, found: u32, supported: u32 },
    #[error("{0}")]
    Json(#[from] serde_json::Error),
}

impl From<rusqlite::Error> for RecordError {
    fn from(e: rusqlite::Error) -> Self {
        Self::Sqlite(e)
    }
}

/// SQLite's message, with a full disk said plainly (a file-size limit reads as an I/O error).
fn sqlite_words(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::DiskFull => "the disk is full".into(),
        rusqlite::Error::SqliteFailure(f, Some(m)) if f.code == rusqlite::ErrorCode::SystemIoFailure => {
            format!("{m} (a full disk, or a file-size limit)")
        }
        e => e.to_string(),
    }
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
