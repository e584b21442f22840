//! Each NVLink link's state, version, far end and error counters (`nvidia-smi nvlink -s`, `-e`).

use gpulse_model::NvLink;
use nvml_wrapper::Device;
use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
use nvml_wrapper::error::NvmlError;

/// NVML numbers links 0 to 17 (`NVML_NVLINK_MAX_LINKS`).
const MAX_LINKS: u32 = 18;

/// Every link the device has. A link NVML does not know (`INVALID_ARGUMENT`) ends the list;
/// a device without NVLink answers the first link's error, which the caller keeps as the absence.
/// An inactive link's counters are not asked for: a link that is down carries nothing.
pub(super) fn read(d: &Device<'static>) -> Result<Vec<NvLink>, NvmlError> {
    let mut out = Vec::new();
    for link in 0..MAX_LINKS {
        let l = d.link_wrapper_for(link);
        let active = match super::profile::timed("nvlink is_active", || l.is_active()) {
            Ok(a) => a,
            Err(NvmlError::InvalidArg) if link > 0 => break,
            Err(e) if link == 0 => return Err(e),
            Err(_) => continue,
        };
        let mut n = NvLink { link, active, ..NvLink::default() };
        if active {
            n.version = super::profile::timed("nvlink version", || l.version()).ok();
            n.remote_pci_bus_id =
                super::profile::timed("nvlink remote_pci_info", || l.remote_pci_info()).ok().map(|p| p.bus_id);
            let count = |c| super::profile::timed("nvlink error_counter", || l.error_counter(c)).ok();
            n.crc_flit_errors = count(ErrorCounter::DlCrcFlit);
            n.crc_data_errors = count(ErrorCounter::DlCrcData);
            n.replay_errors = count(ErrorCounter::DlReplay);
            n.recovery_errors = count(ErrorCounter::DlRecovery);
        }
        out.push(n);
    }
    Ok(out)
}
