//! The kernel's log (`/dev/kmsg`), read for the NVRM lines that name the process an Xid hit:
//! NVML's Xid event names the GPU and the code, never the process. Reading needs the right to
//! (root, or `kernel.dmesg_restrict=0`); without it the PIDs are absent, never guessed.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;

use gpulse_model::health::{clean, parse_nvrm_xid, same_bus};

/// Longest kernel line kept in an event.
const MAX_LINE: usize = 400;

/// The kernel log from the moment it was opened on.
pub struct KernelLog {
    file: File,
}

/// An NVRM Xid line read from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XidLine {
    pub bus: String,
    pub xid: u64,
    pub pid: Option<u32>,
    /// The line, cleaned of control characters and cut to 400 characters.
    pub text: String,
}

impl KernelLog {
    /// Opens `/dev/kmsg` at its end, without blocking; `None` when it cannot be read.
    pub fn open() -> Option<Self> {
        Self::open_path("/dev/kmsg")
    }

    fn open_path(path: &str) -> Option<Self> {
        let mut file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).ok()?;
        // Only what comes after: the log's old Xids belong to earlier jobs.
        file.seek(SeekFrom::End(0)).ok()?;
        Some(Self { file })
    }

    /// The NVRM Xid lines logged since the last call. `/dev/kmsg` gives one record per read;
    /// records overwritten before they were read (`EPIPE`) are skipped.
    pub fn xid_lines(&mut self) -> Vec<XidLine> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 8192];
        for _ in 0..10_000 {
            match self.file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.extend(xid_line(&String::from_utf8_lossy(&buf[..n]))),
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
                Err(_) => break,
            }
        }
        out
    }
}

/// One record (`prio,seq,time_us,flags;message`, or a plain `dmesg` line) as an Xid line.
pub fn xid_line(record: &str) -> Option<XidLine> {
    let message = record.split_once(';').map_or(record, |(_, m)| m);
    let message = message.lines().next().unwrap_or("");
    let x = parse_nvrm_xid(message)?;
    Some(XidLine { bus: x.bus, xid: x.xid, pid: x.pid, text: clean(message, MAX_LINE) })
}

impl XidLine {
    /// Whether the line tells of Xid `xid` on the GPU at `pci_bus_id`.
    pub fn tells(&self, xid: u64, pci_bus_id: Option<&str>) -> bool {
        self.xid == xid && pci_bus_id.is_some_and(|b| same_bus(&self.bus, b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kmsg_records_and_plain_lines() {
        let rec = "3,1234,5678901,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python\x1b[2J, GPU has fallen off the bus.\n SUBSYSTEM=pci";
        let l = xid_line(rec).unwrap();
        assert_eq!((l.bus.as_str(), l.xid, l.pid), ("0000:3b:00", 79, Some(1234)));
        assert!(!l.text.contains('\x1b') && l.text.ends_with("bus."), "{}", l.text);
        assert!(xid_line("6,1,2,-;usb 1-1: new device").is_none());
        let lines = [l];
        let matching = |xid, bus| lines.iter().filter(|l| l.tells(xid, bus)).count();
        assert_eq!(matching(79, Some("00000000:3B:00.0")), 1);
        assert_eq!(matching(48, Some("00000000:3B:00.0")), 0);
        assert_eq!(matching(79, None), 0);
    }

    #[test]
    fn an_unreadable_log_is_none() {
        assert!(KernelLog::open_path("/nonexistent/kmsg").is_none());
    }
}
