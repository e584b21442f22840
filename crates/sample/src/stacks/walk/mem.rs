//! Reads of another process's memory: `process_vm_readv`, several pieces in one call.

use std::io;

/// A page of the target, as the walker reads frames: whole pages, so that a read that runs into
/// an unmapped page stops there without failing the pages before it.
pub(super) const PAGE: usize = 4096;

/// Reads each `(address, buffer)` of the process `pid` in one system call; returns the bytes read,
/// which is less than asked where a piece (and everything after it) could not be read.
pub(super) fn readv(pid: u32, parts: &mut [(usize, &mut [u8])]) -> io::Result<usize> {
    let mut local = Vec::with_capacity(parts.len());
    let mut remote = Vec::with_capacity(parts.len());
    for (addr, buf) in parts.iter_mut() {
        local.push(libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() });
        remote.push(libc::iovec { iov_base: *addr as *mut libc::c_void, iov_len: buf.len() });
    }
    let mut total = 0;
    // IOV_MAX (1024) pieces at most per call.
    for (l, r) in local.chunks(1024).zip(remote.chunks(1024)) {
        // SAFETY: each local iovec names a live, exclusively borrowed buffer of exactly its
        // length; the remote ones are addresses in the other process, which the kernel checks.
        let n = unsafe {
            libc::process_vm_readv(pid as libc::pid_t, l.as_ptr(), l.len() as _, r.as_ptr(), r.len() as _, 0)
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if total > 0 { Ok(total) } else { Err(e) };
        }
        let n = n as usize;
        total += n;
        if n < l.iter().map(|v| v.iov_len).sum::<usize>() {
            break;
        }
    }
    Ok(total)
}

/// Reads all of `buf` at `addr`, or fails.
pub(super) fn read(pid: u32, addr: usize, buf: &mut [u8]) -> io::Result<()> {
    let want = buf.len();
    if addr == 0 {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    match readv(pid, &mut [(addr, buf)])? {
        n if n == want => Ok(()),
        _ => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "a short read")),
    }
}

pub(super) fn usize_at(b: &[u8], off: usize) -> usize {
    usize::from_ne_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

pub(super) fn i32_at(b: &[u8], off: usize) -> i32 {
    i32::from_ne_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}

pub(super) fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}

pub(super) fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

/// A window of the target's memory read whole pages at a time, for the frames of one stack:
/// CPython 3.11+ keeps a thread's frames next to each other on its data stack, so a few pages
/// hold many frames, and one read serves them all.
#[derive(Debug, Default)]
pub(super) struct Window {
    base: usize,
    buf: Vec<u8>,
    len: usize,
    /// Reads made, for the tests and the measure.
    pub reads: u64,
}

impl Window {
    /// Forgets what was read: a new sample sees the memory anew.
    pub(super) fn clear(&mut self) {
        self.len = 0;
    }

    /// The `len` bytes at `addr`, from the window or from a fresh read of the `pages` pages that
    /// end with the one holding them (read top page first, so that an unmapped page below stops
    /// the read there).
    pub(super) fn get(&mut self, pid: u32, addr: usize, len: usize, pages: usize) -> io::Result<&[u8]> {
        let end = addr.checked_add(len).ok_or_else(|| io::Error::from_raw_os_error(libc::EFAULT))?;
        if !(addr >= self.base && end <= self.base + self.len) {
            if addr == 0 {
                return Err(io::Error::from_raw_os_error(libc::EFAULT));
            }
            // A torn pointer may lie anywhere, the last page of the address space included.
            let top = end.div_ceil(PAGE).checked_mul(PAGE).ok_or_else(|| io::Error::from_raw_os_error(libc::EFAULT))?;
            let need = (top - addr).div_ceil(PAGE);
            let pages = pages.max(need).min(top / PAGE);
            self.buf.resize(pages * PAGE, 0);
            let mut parts: Vec<(usize, &mut [u8])> = Vec::with_capacity(pages);
            // Page i of the buffer (from its start) holds the page at top - (pages - i) * PAGE;
            // the remote pieces go top first.
            let mut chunks: Vec<&mut [u8]> = self.buf.chunks_mut(PAGE).collect();
            for i in (0..pages).rev() {
                let chunk = std::mem::take(&mut chunks[i]);
                parts.push((top - (pages - i) * PAGE, chunk));
            }
            self.reads += 1;
            let n = readv(pid, &mut parts)?;
            let got = n / PAGE;
            if got < need {
                self.len = 0;
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "a frame that cannot be read"));
            }
            // The pages read are the top `got` ones: move them to the buffer's start.
            let start = (pages - got) * PAGE;
            self.buf.copy_within(start.., 0);
            self.base = top - got * PAGE;
            self.len = got * PAGE;
        }
        let at = addr - self.base;
        Ok(&self.buf[at..at + len])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A torn frame pointer in the last page of the address space is a failed read, not a panic.
    #[test]
    fn a_pointer_at_the_top_of_the_address_space_fails_the_read() {
        let mut w = Window::default();
        let pid = std::process::id();
        for addr in [usize::MAX - 100, usize::MAX - 4095, usize::MAX - 80, usize::MAX] {
            assert!(w.get(pid, addr, 80, 4).is_err(), "{addr:x}");
        }
        let here = [7u8; 64];
        assert_eq!(w.get(pid, here.as_ptr() as usize, 64, 4).unwrap(), &here);
    }
}
