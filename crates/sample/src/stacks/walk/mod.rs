//! The main thread's stack read directly, for the CPython versions that matter most (3.11, 3.12,
//! 3.13): py-spy finds the interpreter once; then each sample reads only the main thread's
//! frames and who holds the GIL, and a code object is read once, at its first sight.
//!
//! A sample reads, in order: the GIL's state and the main thread's state together (one system
//! call); 3.11 and 3.12, the thread's `_PyCFrame`; the frames, whole pages at a time (a thread's
//! frames lie next to each other on its data stack, so a few reads cover a deep stack); and the
//! headers of the stack's code objects, all in one call, each compared with what the cache
//! holds of it. Where the GIL is another thread's, that thread's frames too.

mod code;
mod layout;
mod mem;

use std::collections::HashMap;
use std::io;

use code::{Code, Identity};
use layout::{FramePtr, GilAt, Layout};
use mem::{Window, u64_at, usize_at};

use super::intern::{FileView, Interner};

/// Pages read at once for frames: 16 KiB, a data stack chunk's first size.
const FRAME_PAGES: usize = 4;
/// A stack deeper than this is taken for a torn read.
const MAX_FRAMES: usize = 4096;
/// `_PyInterpreterFrame.owner` of a generator's or coroutine's frame (3.11 to 3.13).
const OWNED_BY_GENERATOR: u8 = 1;
/// Walks again after a torn one, before the sample is given up.
const TORN_RETRIES: usize = 2;
/// Threads looked at for the main one, at most.
const MAX_THREADS: usize = 4096;
/// Code objects cached per process; past it the cache starts afresh.
const MAX_CODES: usize = 16384;

/// One frame of a walked stack: a cached code object (by address) and the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct WalkedFrame {
    pub code: usize,
    pub line: i32,
}

/// Who holds the GIL, as the walker found it.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum WalkedGil {
    Held,
    Free,
    /// Another thread, with its stack (innermost first).
    Other(Vec<WalkedFrame>),
}

/// One sample of a process: the main thread's frames (innermost first) and the GIL.
#[derive(Debug)]
pub(super) struct Walked {
    pub frames: Vec<WalkedFrame>,
    pub gil: WalkedGil,
}

/// The walker of one process.
#[derive(Debug)]
pub(super) struct Walker {
    pid: u32,
    layout: Layout,
    interpreter: usize,
    gil_address: usize,
    /// The main thread's `PyThreadState`, once found.
    main: Option<usize>,
    codes: HashMap<usize, Code>,
    window: Window,
    /// Reused between samples.
    pending: Vec<(usize, usize)>,
    headers: Vec<u8>,
}

impl Walker {
    /// A walker for the process `spy` opened, where its version is one the walker reads.
    /// Whether the reader knows the interpreter's layout: CPython 3.11 to 3.13.
    pub(super) fn knows(spy: &py_spy::PythonSpy) -> bool {
        Layout::of(spy.version.major, spy.version.minor).is_some()
    }

    pub(super) fn new(spy: &py_spy::PythonSpy) -> Option<Walker> {
        let layout = Layout::of(spy.version.major, spy.version.minor)?;
        if spy.addresses.interpreter_address == 0 {
            return None;
        }
        Some(Walker {
            pid: spy.pid as u32,
            layout,
            interpreter: spy.addresses.interpreter_address,
            gil_address: spy.addresses.threadstate_address,
            main: None,
            codes: HashMap::new(),
            window: Window::default(),
            pending: Vec::new(),
            headers: Vec::new(),
        })
    }

    /// Reads the main thread's stack and who holds the GIL.
    pub(super) fn sample(&mut self) -> io::Result<Walked> {
        let l = self.layout;
        let pid = self.pid;
        let main = match self.main {
            Some(m) => m,
            None => self.find_main()?,
        };
        // The GIL's state and the main thread's state in one call.
        let mut gil = [0u8; 24];
        let mut ts = [0u8; 168];
        let ts = &mut ts[..l.ts_len];
        let gil_len = match l.gil {
            GilAt::TstateCurrent => 8,
            GilAt::RuntimeState { locked, .. } => locked + 4,
        };
        let want = gil_len + l.ts_len;
        let got = if self.gil_address != 0 {
            mem::readv(pid, &mut [(main, &mut ts[..]), (self.gil_address, &mut gil[..gil_len])])?
        } else {
            mem::readv(pid, &mut [(main, &mut ts[..])])? + gil_len
        };
        let main = if got < want || u64_at(ts, l.ts_native_thread_id) != u64::from(pid) {
            // Gone or another thread's now: look again.
            self.main = None;
            let main = self.find_main()?;
            mem::read(pid, main, ts)?;
            if self.gil_address != 0 {
                mem::read(pid, self.gil_address, &mut gil[..gil_len])?;
            }
            main
        } else {
            main
        };
        let holder = match l.gil {
            _ if self.gil_address == 0 => 0,
            GilAt::TstateCurrent => usize_at(&gil, 0),
            GilAt::RuntimeState { last_holder, locked } => {
                if mem::i32_at(&gil, locked) != 0 {
                    usize_at(&gil, last_holder)
                } else {
                    0
                }
            }
        };
        self.window.clear();
        let mut frames = self.stack(ts);
        // A generator that yielded between the thread's frame pointer and the frame's own read
        // left its frame cut off from its caller: read the thread again, a moment later.
        for _ in 0..TORN_RETRIES {
            if !matches!(&frames, Err(e) if e.kind() == io::ErrorKind::Interrupted) {
                break;
            }
            mem::read(pid, main, ts)?;
            self.window.clear();
            frames = self.stack(ts);
        }
        let frames = frames?;
        let gil = match holder {
            0 => WalkedGil::Free,
            h if h == main => WalkedGil::Held,
            h => {
                mem::read(pid, h, ts)?;
                WalkedGil::Other(self.stack(ts)?)
            }
        };
        Ok(Walked { frames, gil })
    }

    /// The main thread's state: the one whose OS id is the PID.
    fn find_main(&mut self) -> io::Result<usize> {
        let l = self.layout;
        let mut head = [0u8; 8];
        mem::read(self.pid, self.interpreter + l.interp_threads_head, &mut head)?;
        let mut t = usize_at(&head, 0);
        let mut ts = [0u8; 168];
        let ts = &mut ts[..l.ts_len];
        for _ in 0..MAX_THREADS {
            if t == 0 {
                break;
            }
            mem::read(self.pid, t, ts)?;
            if u64_at(ts, l.ts_native_thread_id) == u64::from(self.pid) {
                self.main = Some(t);
                return Ok(t);
            }
            t = usize_at(ts, l.ts_next);
        }
        Err(io::Error::new(io::ErrorKind::NotFound, "no thread state for the main thread"))
    }

    /// The frames of the thread whose state is `ts` (its first `ts_len` bytes), innermost first.
    fn stack(&mut self, ts: &[u8]) -> io::Result<Vec<WalkedFrame>> {
        let l = self.layout;
        let pid = self.pid;
        let mut frame = match l.ts_frame {
            FramePtr::Direct { current_frame } => usize_at(ts, current_frame),
            FramePtr::ThroughCFrame { cframe, current_frame } => {
                let mut p = [0u8; 8];
                mem::read(pid, usize_at(ts, cframe) + current_frame, &mut p)?;
                usize_at(&p, 0)
            }
        };
        // (code object, instruction pointer) of each Python frame, innermost first.
        self.pending.clear();
        let mut visited = 0;
        while frame != 0 {
            visited += 1;
            if visited > MAX_FRAMES {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "a stack too deep"));
            }
            let f = self.window.get(pid, frame, l.fr_len, FRAME_PAGES)?;
            let code = usize_at(f, l.fr_code);
            let previous = usize_at(f, l.fr_previous);
            let cstack = l.owner_cstack.is_some_and(|c| f[l.fr_owner] == c);
            if !cstack && code != 0 {
                self.pending.push((code, usize_at(f, l.fr_instr)));
            }
            // A running generator always has a caller: one without is a generator that
            // yielded (and let go of its caller) while the walk read its way to it.
            if previous == 0 && f[l.fr_owner] == OWNED_BY_GENERATOR {
                return Err(io::Error::new(io::ErrorKind::Interrupted, "a generator's frame torn from its caller"));
            }
            frame = previous;
        }
        self.check_codes()?;
        let mut out = Vec::with_capacity(self.pending.len());
        for &(addr, instr) in &self.pending {
            let Some(code) = self.codes.get(&addr) else { continue };
            if code.shim {
                continue;
            }
            let lasti = instr.wrapping_sub(addr) as isize as i32;
            out.push(WalkedFrame { code: addr, line: code.line(&l, lasti) });
        }
        Ok(out)
    }

    /// Reads the header of each code object of `pending`, with, for one already cached, its
    /// file's, name's and line table's objects (one call for all), keeps the cached ones that
    /// read the same, and reads the others afresh. A header that cannot be read fails the sample
    /// (as in py-spy); a code object whose strings cannot be read (a torn read) is left out of
    /// the cache and its frame skipped, as py-spy does.
    fn check_codes(&mut self) -> io::Result<()> {
        let l = self.layout;
        let mut addrs: Vec<usize> = self.pending.iter().map(|p| p.0).collect();
        addrs.sort_unstable();
        addrs.dedup();
        if self.codes.len() > MAX_CODES {
            self.codes.clear();
        }
        // Each code object's pieces: its header, then its cached objects.
        let mut spans = Vec::with_capacity(addrs.len());
        let mut total = 0;
        for addr in &addrs {
            let cached: usize = self.codes.get(addr).map_or(0, |c| c.checked_raw().map(|r| r.1.len()).sum());
            spans.push((total, l.co_len + cached));
            total += l.co_len + cached;
        }
        let mut buf = std::mem::take(&mut self.headers);
        buf.resize(total, 0);
        let got = {
            let mut parts: Vec<(usize, &mut [u8])> = Vec::with_capacity(addrs.len() * 4);
            let mut rest = &mut buf[..];
            for addr in &addrs {
                let (head, tail) = rest.split_at_mut(l.co_len);
                parts.push((*addr, head));
                rest = tail;
                if let Some(c) = self.codes.get(addr) {
                    for (at, bytes) in c.checked_raw() {
                        let (piece, tail) = rest.split_at_mut(bytes.len());
                        parts.push((*at, piece));
                        rest = tail;
                    }
                }
            }
            mem::readv(self.pid, &mut parts).unwrap_or(0)
        };
        let mut failed = None;
        for (i, &addr) in addrs.iter().enumerate() {
            let (at, len) = spans[i];
            if at + len <= got {
                self.refresh(addr, &buf[at..at + len]);
                continue;
            }
            // A short read stops at the first piece that failed: the rest one by one.
            let mut one = vec![0u8; l.co_len];
            match mem::read(self.pid, addr, &mut one) {
                Ok(()) => {
                    self.codes.remove(&addr);
                    self.refresh(addr, &one);
                }
                Err(e) => {
                    self.codes.remove(&addr);
                    failed = Some(e);
                }
            }
        }
        self.headers = buf;
        failed.map_or(Ok(()), Err)
    }

    /// Keeps the cached code object at `addr` if `read` (its header, then its cached objects)
    /// is still its own; else reads it afresh.
    fn refresh(&mut self, addr: usize, read: &[u8]) {
        let l = self.layout;
        let header = &read[..l.co_len];
        let id = Identity::of(header, &l);
        if let Some(c) = self.codes.get(&addr) {
            let mut at = l.co_len;
            let same = c.identity == id
                && c.checked_raw().all(|(_, bytes)| {
                    let fresh = &read[at..at + bytes.len()];
                    at += bytes.len();
                    code::same(bytes, fresh)
                });
            if same {
                return;
            }
        }
        match Code::load(self.pid, &l, header) {
            Ok(c) => {
                self.codes.insert(addr, c);
            }
            Err(_) => {
                self.codes.remove(&addr);
            }
        }
    }

    /// The file and function of a walked frame's code object.
    pub(super) fn names(&self, f: &WalkedFrame) -> (&str, &str) {
        self.codes.get(&f.code).map_or(("", ""), |c| (c.filename.as_str(), c.name.as_str()))
    }

    /// The interned stack of `frames` (innermost first): a frame seen before costs a lookup in
    /// its code object's few lines.
    pub(super) fn intern(&mut self, frames: &[WalkedFrame], interner: &mut Interner, view: &FileView) -> u32 {
        let mut ids = Vec::with_capacity(frames.len());
        for f in frames.iter().rev() {
            let Some(code) = self.codes.get_mut(&f.code) else { continue };
            let id = match code.frame_ids.iter().find(|(line, _)| *line == f.line) {
                Some(&(_, id)) => id,
                None => {
                    let id = interner.frame_id(&code.filename, u32::try_from(f.line).unwrap_or(0), &code.name, view);
                    code.frame_ids.push((f.line, id));
                    id
                }
            };
            ids.push(id);
        }
        interner.stack_of(ids)
    }

    /// The frames as py-spy gives them (innermost first), for the tests.
    #[cfg(test)]
    pub(super) fn as_frames(&self, frames: &[WalkedFrame]) -> Vec<(String, i32, String)> {
        frames
            .iter()
            .map(|f| {
                let (file, name) = self.names(f);
                (file.to_owned(), f.line, name.to_owned())
            })
            .collect()
    }

    /// Reads of frame pages so far.
    #[allow(dead_code)]
    pub(super) fn window_reads(&self) -> u64 {
        self.window.reads
    }
}

#[cfg(test)]
mod tests;
