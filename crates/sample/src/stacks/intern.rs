//! Frames and stacks under ids that hold for the whole run: a sample is a few integers, and a
//! frame's source line is read once, when the frame is first seen.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gpulse_model::{PyFrame, StackBatch};

/// A source file larger than this is not read for its lines (a generated file, a blob).
const MAX_SOURCE_BYTES: u64 = 4 << 20;
/// A source line is cut here: it names the call, not the whole expression.
const MAX_CODE_CHARS: usize = 200;
/// The cached files' lines are dropped past this, and read again if asked.
const MAX_CACHED_BYTES: usize = 32 << 20;

/// Where a process's files are, as this process can read them.
#[derive(Debug, Clone)]
pub(super) struct FileView {
    pub pid: u32,
    /// The process's root directory and mount namespace: processes that share them see the same
    /// files, so their files are read once.
    pub root_key: Arc<str>,
}

impl FileView {
    pub(super) fn of(pid: u32) -> Self {
        let name = |l: &str| crate::proc_info::link(pid, l).map(|p| p.display().to_string()).unwrap_or_default();
        Self { pid, root_key: format!("{} {}", name("ns/mnt"), name("root")).into() }
    }

    /// The path that opens `file` as the process names it; `None` for a file that is not one
    /// (`<frozen runpy>`, `<string>`).
    fn path(&self, file: &str) -> Option<PathBuf> {
        if file.is_empty() || file.starts_with('<') {
            return None;
        }
        let proc = PathBuf::from(format!("/proc/{}", self.pid));
        Some(match file.strip_prefix('/') {
            Some(abs) => proc.join("root").join(abs),
            None => proc.join("cwd").join(file),
        })
    }
}

/// The interned frames and stacks, and what is new since they were last taken.
#[derive(Debug, Default)]
pub(super) struct Interner {
    frames: HashMap<FrameKey, u32>,
    stacks: HashMap<Vec<u32>, u32>,
    new_frames: Vec<(u32, PyFrame)>,
    new_stacks: Vec<(u32, Vec<u32>)>,
    sources: Sources,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct FrameKey {
    file: String,
    line: u32,
    function: String,
}

impl Interner {
    /// The id of the stack of `frames` (innermost first, as py-spy gives them), interning each
    /// frame; a new frame's source line is read through `view`.
    pub(super) fn stack(&mut self, frames: Vec<py_spy::Frame>, view: &FileView) -> u32 {
        let ids: Vec<u32> = frames.into_iter().rev().map(|f| self.frame(f, view)).collect();
        self.stack_of(ids)
    }

    /// The id of the stack of the interned frames `ids`, outermost first.
    pub(super) fn stack_of(&mut self, mut ids: Vec<u32>) -> u32 {
        if let Some(id) = self.stacks.get(ids.as_slice()) {
            return *id;
        }
        let id = self.stacks.len() as u32;
        ids.shrink_to_fit();
        self.new_stacks.push((id, ids.clone()));
        self.stacks.insert(ids, id);
        id
    }

    fn frame(&mut self, f: py_spy::Frame, view: &FileView) -> u32 {
        let key = FrameKey { file: f.filename, line: u32::try_from(f.line).unwrap_or(0), function: f.name };
        if let Some(id) = self.frames.get(&key) {
            return *id;
        }
        self.new_frame(key, view)
    }

    /// The id of the frame at `file`:`line` in `function`, interning it if new.
    pub(super) fn frame_id(&mut self, file: &str, line: u32, function: &str, view: &FileView) -> u32 {
        let key = FrameKey { file: file.to_owned(), line, function: function.to_owned() };
        if let Some(id) = self.frames.get(&key) {
            return *id;
        }
        self.new_frame(key, view)
    }

    fn new_frame(&mut self, key: FrameKey, view: &FileView) -> u32 {
        let id = self.frames.len() as u32;
        let code = self.sources.line(view, &key.file, key.line);
        self.new_frames
            .push((id, PyFrame { file: key.file.clone(), line: key.line, function: key.function.clone(), code }));
        self.frames.insert(key, id);
        id
    }

    /// Moves the frames and stacks interned since the last call into `batch`, in id order.
    pub(super) fn take_new(&mut self, batch: &mut StackBatch) {
        batch.frames.append(&mut self.new_frames);
        batch.stacks.append(&mut self.new_stacks);
    }
}

type Lines = Option<Vec<Box<str>>>;

/// Source files' lines, read once per file and file view.
#[derive(Debug, Default)]
struct Sources {
    /// By file view and file name: the file's lines, `None` for one that cannot be read.
    files: HashMap<(Arc<str>, String), Lines>,
    bytes: usize,
}

impl Sources {
    /// Line `line` (from 1) of `file` as `view`'s process sees it, stripped and cut.
    fn line(&mut self, view: &FileView, file: &str, line: u32) -> Option<String> {
        let index = usize::try_from(line).ok()?.checked_sub(1)?;
        // A relative path is the process's own: its working directory is no one else's.
        let scope = if file.starts_with('/') { view.root_key.clone() } else { format!("pid {}", view.pid).into() };
        let key = (scope, file.to_owned());
        if !self.files.contains_key(&key) {
            if self.bytes > MAX_CACHED_BYTES {
                self.files.clear();
                self.bytes = 0;
            }
            let lines = view.path(file).and_then(|p| read_lines(&p));
            self.bytes += lines.as_ref().map_or(0, |ls| ls.iter().map(|l| l.len() + 16).sum());
            self.files.insert(key.clone(), lines);
        }
        let text = self.files.get(&key)?.as_ref()?.get(index)?;
        (!text.is_empty()).then(|| text.to_string())
    }
}

/// A file's lines, each stripped and cut; `None` if it cannot be read or is too large.
fn read_lines(path: &Path) -> Option<Vec<Box<str>>> {
    let file = std::fs::File::open(path).ok()?;
    if !file.metadata().ok()?.is_file() || file.metadata().ok()?.len() > MAX_SOURCE_BYTES {
        return None;
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_SOURCE_BYTES), &mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    Some(text.lines().map(|l| cut(l.trim(), MAX_CODE_CHARS).into()).collect())
}

/// `s`'s first `max` characters.
fn cut(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(file: &str, line: i32, name: &str) -> py_spy::Frame {
        py_spy::Frame {
            name: name.into(),
            filename: file.into(),
            module: None,
            short_filename: None,
            line,
            locals: None,
            is_entry: false,
            is_shim_entry: false,
        }
    }

    #[test]
    fn frames_and_stacks_keep_their_ids_and_are_sent_once() {
        let dir = std::env::temp_dir().join(format!("gpulse-intern-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("train.py");
        let long = "y".repeat(300);
        std::fs::write(&script, format!("import time\n    loss.item()  \n{long}\n")).unwrap();
        let file = script.to_str().unwrap();
        let view = FileView::of(std::process::id());
        let mut i = Interner::default();
        // Innermost first in, outermost first out.
        let a = i.stack(vec![frame(file, 2, "step"), frame(file, 1, "<module>")], &view);
        let b = i.stack(vec![frame(file, 3, "log"), frame(file, 1, "<module>")], &view);
        assert_eq!(i.stack(vec![frame(file, 2, "step"), frame(file, 1, "<module>")], &view), a);
        let mut batch = StackBatch::default();
        i.take_new(&mut batch);
        let (frames, stacks) = (batch.frames, batch.stacks);
        assert_eq!(stacks, [(a, vec![0, 1]), (b, vec![0, 2])]);
        assert_eq!(frames.len(), 3);
        assert_eq!(frames[0].1.function, "<module>");
        assert_eq!(frames[0].1.code.as_deref(), Some("import time"));
        assert_eq!(frames[1].1.code.as_deref(), Some("loss.item()"), "stripped");
        assert_eq!(frames[2].1.code.as_deref().map(str::len), Some(200), "cut");
        let mut batch = StackBatch::default();
        i.take_new(&mut batch);
        assert_eq!(batch, StackBatch::default(), "sent once");
        let c = i.stack(vec![frame("<frozen runpy>", 88, "_run_code"), frame(file, 9, "main")], &view);
        i.take_new(&mut batch);
        let frames = batch.frames;
        assert_eq!(c, 2);
        assert_eq!(frames.iter().map(|f| f.1.code.clone()).collect::<Vec<_>>(), [None, None], "beyond the end; frozen");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
