//! Claiming a recording's name before anything is written to it.

use std::path::{Path, PathBuf};

use crate::RecordError;

/// A new, empty file this process created for a recording. `create_new` makes the claim atomic:
/// two recorders started at once in one directory can never share a file, and nothing that
/// exists is ever opened for writing. Dropped unused, the empty file is removed again.
#[derive(Debug)]
pub struct Claim {
    path: Option<PathBuf>,
}

/// Creates `path`, which must not exist (a dangling symlink counts as existing).
pub fn claim(path: &Path) -> Result<Claim, RecordError> {
    match std::fs::OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(_) => Ok(Claim { path: Some(path.to_path_buf()) }),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(RecordError::Exists(path.display().to_string())),
        Err(e) => Err(RecordError::Io { path: path.display().to_string(), error: e }),
    }
}

impl Claim {
    pub fn path(&self) -> &Path {
        self.path.as_deref().expect("a claim holds its path until taken")
    }

    /// The path, now owned by whoever writes it.
    pub(crate) fn take(mut self) -> PathBuf {
        self.path.take().expect("a claim holds its path until taken")
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(p) = &self.path
            && std::fs::metadata(p).is_ok_and(|m| m.len() == 0)
        {
            let _ = std::fs::remove_file(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_claimed_once_and_released_unused() {
        let tmp = tempfile::Builder::new().prefix("gpulse-claim-").tempdir().unwrap();
        let dir = tmp.path();
        let p = dir.join("a.db");
        let first = claim(&p).unwrap();
        assert!(matches!(claim(&p), Err(RecordError::Exists(_))));
        drop(first);
        assert!(!p.exists(), "an unused claim leaves nothing behind");
        std::os::unix::fs::symlink("nowhere", dir.join("link.db")).unwrap();
        assert!(matches!(claim(&dir.join("link.db")), Err(RecordError::Exists(_))));
    }
}
