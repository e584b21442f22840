//! The Python files `--instrument` puts first on the job's `PYTHONPATH`: a `sitecustomize` that
//! hooks PyTorch at import, and the `gpulse` package it uses (the same files the wheel ships).

use std::ffi::OsString;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

const FILES: &[(&str, &str)] = &[
    ("sitecustomize.py", include_str!("sitecustomize.py")),
    ("gpulse/__init__.py", include_str!("../../../python/gpulse/__init__.py")),
    ("gpulse/_events.py", include_str!("../../../python/gpulse/_events.py")),
    ("gpulse/_instrument.py", include_str!("../../../python/gpulse/_instrument.py")),
    ("gpulse/_load.py", include_str!("../../../python/gpulse/_load.py")),
    ("gpulse/lightning.py", include_str!("../../../python/gpulse/lightning.py")),
    ("gpulse/huggingface.py", include_str!("../../../python/gpulse/huggingface.py")),
];

/// The written files; removed on drop.
pub struct Bootstrap {
    dir: PathBuf,
}

impl Bootstrap {
    /// Writes the files into a new private directory beside `socket_dir`.
    pub fn write(socket_dir: &Path) -> std::io::Result<Self> {
        let dir = socket_dir.join("python");
        std::fs::DirBuilder::new().mode(0o700).recursive(true).create(dir.join("gpulse"))?;
        for (name, text) in FILES {
            std::fs::write(dir.join(name), text)?;
        }
        Ok(Self { dir })
    }

    /// The job's `PYTHONPATH`: this directory first, then what the caller had.
    pub fn python_path(&self) -> OsString {
        let mut p = self.dir.clone().into_os_string();
        if let Some(old) = std::env::var_os("PYTHONPATH").filter(|o| !o.is_empty()) {
            p.push(":");
            p.push(old);
        }
        p
    }
}

impl Drop for Bootstrap {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
