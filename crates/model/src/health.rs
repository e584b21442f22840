//! GPU health beyond the sampled metrics: the Xid errors the driver raised, each NVLink link's
//! state and errors, and the kernel's NVRM lines, which alone name the process an Xid hit.

use serde::{Deserialize, Serialize};

/// One Xid the driver raised (NVML's critical Xid event, `nvmlEventTypeXidCriticalError`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Xid {
    /// NVML index of the GPU that raised it.
    pub gpu: u32,
    /// The Xid code (NVIDIA's Xid catalogue: 79 the GPU fell off the bus, 48 a double-bit ECC error…).
    pub xid: u64,
    /// When the event was taken off the queue, microseconds since the Unix epoch.
    pub timestamp_us: i64,
    /// The processes the kernel's NVRM line names (NVML's event names none); empty when the
    /// kernel log could not be read or named none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pids: Vec<u32>,
    /// The kernel's NVRM line, cleaned of control characters ([`clean`]), when one was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// One NVLink link of a GPU (`nvmlDeviceGetNvLink*`; `nvidia-smi nvlink -s` and `-e`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvLink {
    /// The link's number, 0 to 17.
    pub link: u32,
    /// Whether the link is up (`nvmlDeviceGetNvLinkState`).
    pub active: bool,
    /// NVLink version (`nvmlDeviceGetNvLinkVersion`): 4 on Hopper.
    pub version: Option<u32>,
    /// The PCI bus id of the device at the other end (`nvmlDeviceGetNvLinkRemotePciInfo_v2`).
    pub remote_pci_bus_id: Option<String>,
    /// Flow-control CRC errors received (`NVML_NVLINK_ERROR_DL_CRC_FLIT`).
    pub crc_flit_errors: Option<u64>,
    /// Data CRC errors received (`NVML_NVLINK_ERROR_DL_CRC_DATA`).
    pub crc_data_errors: Option<u64>,
    /// Transmissions replayed (`NVML_NVLINK_ERROR_DL_REPLAY`).
    pub replay_errors: Option<u64>,
    /// Link recoveries (`NVML_NVLINK_ERROR_DL_RECOVERY`).
    pub recovery_errors: Option<u64>,
}

/// What an NVRM Xid line of the kernel log says:
/// `NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvrmXid {
    /// The bus as the line writes it (`0000:3b:00`).
    pub bus: String,
    pub xid: u64,
    /// The process, when the line names one (`pid='<unknown>'` names none).
    pub pid: Option<u32>,
}

/// Reads an NVRM Xid line (from the kernel log, or a job that printed one); `None` for any
/// other line.
pub fn parse_nvrm_xid(line: &str) -> Option<NvrmXid> {
    let rest = &line[line.find("Xid (")? + 5..];
    let close = rest.find(')')?;
    let bus = rest[..close].trim_start_matches("PCI:").to_owned();
    let after = rest[close + 1..].trim_start_matches(':').trim_start();
    let xid = leading_u64(after)?;
    let pid = after.find("pid=").and_then(|i| leading_u64(&after[i + 4..])).and_then(|p| u32::try_from(p).ok());
    Some(NvrmXid { bus, xid, pid })
}

fn leading_u64(s: &str) -> Option<u64> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s[..end].parse().ok()
}

/// Whether an NVRM line's bus (`0000:3b:00`, domain:bus:device) is NVML's `pci_bus_id`
/// (`00000000:3B:00.0`).
pub fn same_bus(nvrm: &str, pci_bus_id: &str) -> bool {
    let parts = |s: &str| -> Option<(u64, u64, u64)> {
        let s = s.split('.').next()?;
        let mut it = s.rsplit(':');
        let dev = u64::from_str_radix(it.next()?, 16).ok()?;
        let bus = u64::from_str_radix(it.next()?, 16).ok()?;
        let domain = it.next().map_or(Some(0), |d| u64::from_str_radix(d, 16).ok())?;
        Some((domain, bus, dev))
    };
    matches!((parts(nvrm), parts(pci_bus_id)), (Some(a), Some(b)) if a == b)
}

/// `text` cut to `max` characters, with every control character (an escape sequence, a
/// newline) replaced by a space: a kernel line reaches terminals, pages and JSON.
pub fn clean(text: &str, max: usize) -> String {
    text.trim().chars().take(max).map(|c| if c.is_control() { ' ' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_kernels_xid_lines() {
        let l = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.";
        assert_eq!(parse_nvrm_xid(l), Some(NvrmXid { bus: "0000:3b:00".into(), xid: 79, pid: Some(1234) }));
        let l = "[ 966.5] NVRM: Xid (0000:01:00): 31, pid='<unknown>', name=<unknown>, Ch 0000000b";
        assert_eq!(parse_nvrm_xid(l), Some(NvrmXid { bus: "0000:01:00".into(), xid: 31, pid: None }));
        assert_eq!(parse_nvrm_xid("NVRM: loading NVIDIA UNIX x86_64 Kernel Module"), None);
        assert_eq!(parse_nvrm_xid("Xid (PCI:0000:3b:00): x"), None);
        assert!(same_bus("0000:3b:00", "00000000:3B:00.0"));
        assert!(!same_bus("0000:3b:00", "00000000:3C:00.0"));
        assert!(!same_bus("garbage", "00000000:3B:00.0"));
        assert_eq!(clean("a\x1b[31mb\nc", 100), "a [31mb c");
        assert_eq!(clean("abcdef", 3), "abc");
    }
}
