//! Where command output goes: standard output or a file, written whole lines at a time.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// A line-oriented sink. A closed pipe ends the command quietly, as `head` expects.
pub struct Output {
    inner: Box<dyn Write>,
}

impl Output {
    /// Standard output, or `path` created afresh.
    pub fn open(path: Option<&Path>) -> anyhow::Result<Self> {
        let inner: Box<dyn Write> = match path {
            Some(p) => Box::new(BufWriter::new(
                File::create(p).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))?,
            )),
            None => Box::new(BufWriter::new(io::stdout().lock())),
        };
        Ok(Self { inner })
    }

    /// Writes `text` and flushes, so a reader of a loop sees each sample as it is taken.
    pub fn emit(&mut self, text: &str) -> io::Result<()> {
        self.inner.write_all(text.as_bytes())?;
        self.inner.flush()
    }
}

/// Whether an I/O error means the reader went away.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
}
