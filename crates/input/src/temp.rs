//! Files that exist only while gpulse writes them: an import in progress, a log imported on the fly.

use std::path::{Path, PathBuf};

/// A file that is removed, with any SQLite side files, when dropped.
pub struct TempPath(pub PathBuf);

impl TempPath {
    /// A fresh hidden path beside `target`, so that renaming it onto `target` is atomic.
    pub fn beside(target: &Path) -> Self {
        let dir = target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        Self(dir.join(Self::name(target)))
    }

    /// A fresh path in the system's temporary directory.
    pub fn in_temp_dir(like: &Path) -> Self {
        Self(std::env::temp_dir().join(Self::name(like)))
    }

    /// `e` with this temporary path said as `shown`: a name the user never chose must not
    /// reach them.
    pub fn hide(&self, e: anyhow::Error, shown: &str) -> anyhow::Error {
        anyhow::anyhow!(crate::describe(&e).replace(&*self.0.to_string_lossy(), shown))
    }

    fn name(like: &Path) -> String {
        let name = like.file_name().map_or_else(|| "gpulse".into(), |n| n.to_string_lossy().into_owned());
        let ns = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        format!(".{name}.{}.{ns}.tmp", std::process::id())
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        gpulse_record::remove_with_side_files(&self.0);
    }
}
