//! What can be told of a recording before SQLite opens it, so that a damaged or incomplete copy
//! is named as such rather than as "not a recording", and so that reading one without its `-wal`
//! creates no side files.

use std::path::Path;

use rusqlite::OpenFlags;

use crate::RecordError;

/// A recording file as found on disk.
pub(crate) struct Found {
    path: String,
    /// In WAL mode (a recording being written, or one whose writer was killed) with no `-wal`
    /// file beside it: what was not yet checkpointed is elsewhere or gone.
    pub wal_missing: bool,
}

/// Checks `path`'s SQLite header: a recording at all, cut short, in WAL mode without its log.
pub(crate) fn inspect(path: &Path) -> Result<Found, RecordError> {
    let name = path.display().to_string();
    let bytes = std::fs::File::open(path)
        .and_then(|f| {
            let mut head = Vec::with_capacity(100);
            std::io::Read::read_to_end(&mut std::io::Read::take(f, 100), &mut head)?;
            Ok(head)
        })
        .map_err(|error| RecordError::Io { path: name.clone(), error })?;
    if !bytes.starts_with(crate::SQLITE_MAGIC) {
        return Err(RecordError::NotARecording(name));
    }
    if bytes.len() < 100 {
        return Err(RecordError::Damaged { path: name, why: "it ends inside its header".into() });
    }
    let be32 = |at: usize| u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let page_bytes = match u16::from_be_bytes([bytes[16], bytes[17]]) {
        1 => 65536,
        n => u64::from(n),
    };
    let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    // The header's page count is trusted only when its "valid for" counter matches (SQLite's rule).
    let pages = u64::from(be32(28));
    if be32(24) == be32(92) && pages > 0 && pages * page_bytes > len {
        return Err(RecordError::Damaged {
            path: name,
            why: format!("it was cut short: {len} of its {} bytes are there", pages * page_bytes),
        });
    }
    let wal_mode = bytes[18] == 2;
    let wal_missing = wal_mode && std::fs::symlink_metadata(crate::side_file(path, "-wal")).is_err();
    Ok(Found { path: name, wal_missing })
}

impl Found {
    /// The warning a readable file deserves, if any.
    pub fn warning(&self) -> Option<String> {
        self.wal_missing.then(|| {
            format!(
                "{0} has no end and no -wal file beside it: a copy made while it was written needs \
                 {0}-wal too; what came after its last checkpoint is not in it",
                self.path
            )
        })
    }

    /// A clearer error than SQLite's for a file that passed [`inspect`] and still failed.
    pub fn explain(&self, e: RecordError) -> RecordError {
        let corrupt = matches!(&e, RecordError::Sqlite(rusqlite::Error::SqliteFailure(f, _))
            if matches!(f.code, rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase));
        match e {
            RecordError::NotARecording(_) | RecordError::Sqlite(_) if self.wal_missing => RecordError::Damaged {
                path: self.path.clone(),
                why: format!("its -wal file is missing ({}-wal holds what was recorded)", self.path),
            },
            _ if corrupt => RecordError::Damaged { path: self.path.clone(), why: "its pages are corrupt".into() },
            e => e,
        }
    }
}

/// How to open a file that passed [`inspect`] read-only. A WAL-mode file without its `-wal` is
/// opened immutable: SQLite then makes no `-wal` or `-shm` beside it, so nothing of a writer that
/// might start meanwhile is ever removed afterwards.
pub(crate) fn open(path: &Path, found: &Found) -> rusqlite::Result<rusqlite::Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if !found.wal_missing {
        return rusqlite::Connection::open_with_flags(path, flags);
    }
    let mut uri = String::from("file:");
    for b in path.as_os_str().as_encoded_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => uri.push(char::from(*b)),
            _ => uri += &format!("%{b:02X}"),
        }
    }
    uri += "?immutable=1";
    rusqlite::Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI)
}
