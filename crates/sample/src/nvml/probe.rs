//! The NVML call behind each [`Probe`]: through nvml-wrapper where it has the call, through its
//! sys crate where it does not. A symbol the loaded library lacks is an error, never a panic.

use gpulse_model::{EccLocation, Probe, Reading, SramPart};
use nvml_wrapper::enum_wrappers::device::{Clock, EccCounter, InfoRom, MemoryError, RetirementCause};
use nvml_wrapper::error::{NvmlError, nvml_try};
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::*;

/// Calls a sys function by name when the loaded library has it.
macro_rules! sys {
    ($nvml:expr, $f:ident($($arg:expr),*)) => {
        match $nvml.lib().$f.as_ref() {
            // SAFETY: the arguments are valid pointers to locals of the types NVML expects.
            Ok(f) => nvml_try(unsafe { f($($arg),*) }),
            Err(e) => Err(NvmlError::FailedToLoadSymbol(e.to_string())),
        }
    };
}

/// NVML's `NVML_STRUCT_VERSION(name, ver)`: the struct size with the version in the top byte.
const fn version<T>(v: u32) -> u32 {
    std::mem::size_of::<T>() as u32 | (v << 24)
}

fn num(v: impl Into<i64>) -> Reading {
    Reading::Num(v.into())
}

/// Reads one probe.
pub(super) fn read(nvml: &Nvml, d: &Device<'static>, p: Probe) -> Result<Reading, NvmlError> {
    // SAFETY: the handle stays valid while `d` lives.
    let h = unsafe { d.handle() };
    Ok(match p {
        Probe::Serial => Reading::Text(d.serial()?),
        Probe::NvlinkThroughput => {
            // The counters behind the rate (`read::nvlink_rate`): NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX
            // and _RX, KiB since the driver loaded; scope u32::MAX sums every link, as DCGM asks.
            // SAFETY: plain old data.
            let mut v: [nvmlFieldValue_t; 2] = unsafe { std::mem::zeroed() };
            for (f, id) in v.iter_mut().zip([138, 139]) {
                f.fieldId = id;
                f.scopeId = u32::MAX;
            }
            sys!(nvml, nvmlDeviceGetFieldValues(h, 2, v.as_mut_ptr()))?;
            let mut total = 0i64;
            for f in &v {
                nvml_try(f.nvmlReturn)?;
                // SAFETY: NVML answers these counters as unsigned long longs.
                total = total.saturating_add(i64::try_from(unsafe { f.value.ullVal }).map_err(|_| NvmlError::Unknown)?);
            }
            num(total)
        }
        Probe::PciDomain => num(d.pci_info()?.domain),
        Probe::PciBus => num(d.pci_info()?.bus),
        Probe::PciDevice => num(d.pci_info()?.device),
        Probe::PciDeviceId => num(d.pci_info()?.pci_device_id),
        Probe::PciSubSystemId => num(d.pci_info()?.pci_sub_system_id.ok_or(NvmlError::NotSupported)?),
        Probe::PciBaseClass | Probe::PciSubClass => {
            // SAFETY: plain old data.
            let mut x: nvmlPciInfoExt_t = unsafe { std::mem::zeroed() };
            x.version = version::<nvmlPciInfoExt_t>(1);
            sys!(nvml, nvmlDeviceGetPciInfoExt(h, &mut x))?;
            num(if p == Probe::PciBaseClass { x.baseClass } else { x.subClass })
        }
        Probe::VgpuDriverCap(cap) => {
            let mut v = 0;
            sys!(nvml, nvmlGetVgpuDriverCapabilities(cap, &mut v))?;
            Reading::Flag(v != 0)
        }
        Probe::VgpuDeviceCap(cap) => {
            let mut v = 0;
            sys!(nvml, nvmlDeviceGetVgpuCapabilities(h, cap, &mut v))?;
            Reading::Flag(v != 0)
        }
        Probe::PcieGenMax => num(d.max_pcie_link_gen()?),
        Probe::PcieGenGpuMax => {
            let mut v = 0;
            sys!(nvml, nvmlDeviceGetGpuMaxPcieLinkGeneration(h, &mut v))?;
            num(v)
        }
        Probe::PcieWidthMax => num(d.max_pcie_link_width()?),
        Probe::DisplayAttached => Reading::Flag(d.is_display_connected()?),
        Probe::DisplayActive => Reading::Flag(d.is_display_active()?),
        Probe::AddressingMode => {
            let mut x = nvmlDeviceAddressingMode_t { version: version::<nvmlDeviceAddressingMode_t>(1), value: 0 };
            sys!(nvml, nvmlDeviceGetAddressingMode(h, &mut x))?;
            Reading::Text(
                match x.value {
                    1 => "HMM",
                    2 => "ATS",
                    _ => "None",
                }
                .into(),
            )
        }
        Probe::AccountingMode => Reading::Flag(d.is_accounting_enabled()?),
        Probe::AccountingBufferSize => num(d.accounting_buffer_size()?),
        Probe::DriverModelCurrent | Probe::DriverModelPending => {
            let (mut cur, mut pend) = (0, 0);
            sys!(nvml, nvmlDeviceGetDriverModel_v2(h, &mut cur, &mut pend))?;
            let m = if p == Probe::DriverModelCurrent { cur } else { pend };
            Reading::Text(if m == 0 { "WDDM" } else { "TCC" }.into())
        }
        Probe::Vbios => Reading::Text(d.vbios_version()?),
        Probe::InforomImage => Reading::Text(d.info_rom_image_version()?),
        Probe::InforomOem => Reading::Text(d.info_rom_version(InfoRom::OEM)?),
        Probe::InforomEcc => Reading::Text(d.info_rom_version(InfoRom::ECC)?),
        Probe::InforomPower => Reading::Text(d.info_rom_version(InfoRom::Power)?),
        Probe::InforomChecksum => {
            d.validate_info_rom()?;
            Reading::Text("valid".into())
        }
        Probe::GomCurrent | Probe::GomPending => {
            let m = d.gpu_operation_mode()?;
            let m = if p == Probe::GomCurrent { m.current } else { m.pending };
            Reading::Text(format!("{m:?}"))
        }
        Probe::Field(id) => field(d, id)?,
        Probe::ComputeCap => {
            let c = d.cuda_compute_capability()?;
            Reading::Text(format!("{}.{}", c.major, c.minor))
        }
        Probe::UtilEncoder => num(d.encoder_utilization()?.utilization),
        Probe::UtilDecoder => num(d.decoder_utilization()?.utilization),
        Probe::UtilJpeg | Probe::UtilOfa => {
            let (mut v, mut period) = (0, 0);
            if p == Probe::UtilJpeg {
                sys!(nvml, nvmlDeviceGetJpgUtilization(h, &mut v, &mut period))?;
            } else {
                sys!(nvml, nvmlDeviceGetOfaUtilization(h, &mut v, &mut period))?;
            }
            num(v)
        }
        Probe::EncoderSessions => num(d.encoder_stats()?.session_count),
        Probe::EncoderFps => num(d.encoder_stats()?.average_fps),
        Probe::EncoderLatency => num(d.encoder_stats()?.average_latency),
        Probe::DramEncryptionCurrent | Probe::DramEncryptionPending => {
            let v = version::<nvmlDramEncryptionInfo_t>(1);
            let mut cur = nvmlDramEncryptionInfo_t { version: v, encryptionState: 0 };
            let mut pend = nvmlDramEncryptionInfo_t { version: v, encryptionState: 0 };
            sys!(nvml, nvmlDeviceGetDramEncryptionMode(h, &mut cur, &mut pend))?;
            let s = if p == Probe::DramEncryptionCurrent { cur } else { pend };
            Reading::Flag(s.encryptionState != 0)
        }
        Probe::EccPending => Reading::Flag(d.is_ecc_enabled()?.pending_enabled),
        Probe::Ecc { corrected, aggregate, location } => {
            let e = if corrected { MemoryError::Corrected } else { MemoryError::Uncorrected };
            let c = if aggregate { EccCounter::Aggregate } else { EccCounter::Volatile };
            // NVML_MEMORY_LOCATION_*: DRAM and DEVICE_MEMORY are one location.
            let loc = match location {
                EccLocation::Total => return Ok(num(d.total_ecc_errors(e, c)? as i64)),
                EccLocation::L1Cache => 0,
                EccLocation::L2Cache => 1,
                EccLocation::DeviceMemory | EccLocation::Dram => 2,
                EccLocation::RegisterFile => 3,
                EccLocation::TextureMemory => 4,
                EccLocation::Cbu => 6,
                EccLocation::Sram => 7,
            };
            let mut v = 0;
            sys!(nvml, nvmlDeviceGetMemoryErrorCounter(h, u32::from(!corrected), u32::from(aggregate), loc, &mut v))?;
            num(i64::try_from(v).map_err(|_| NvmlError::Unknown)?)
        }
        Probe::Sram(part) => {
            // SAFETY: plain old data.
            let mut x: nvmlEccSramErrorStatus_t = unsafe { std::mem::zeroed() };
            x.version = version::<nvmlEccSramErrorStatus_t>(1);
            sys!(nvml, nvmlDeviceGetSramEccErrorStatus(h, &mut x))?;
            let v = match part {
                SramPart::VolatileParity => x.volatileUncParity,
                SramPart::VolatileSecDed => x.volatileUncSecDed,
                SramPart::AggregateParity => x.aggregateUncParity,
                SramPart::AggregateSecDed => x.aggregateUncSecDed,
                SramPart::ThresholdExceeded => return Ok(Reading::Flag(x.bThresholdExceeded != 0)),
                SramPart::L2 => x.aggregateUncBucketL2,
                SramPart::Sm => x.aggregateUncBucketSm,
                SramPart::Mcu => x.aggregateUncBucketMcu,
                SramPart::Pcie => x.aggregateUncBucketPcie,
                SramPart::Other => x.aggregateUncBucketOther,
            };
            num(v as i64)
        }
        Probe::RetiredSingleBit => num(d.retired_pages(RetirementCause::MultipleSingleBitEccErrors)?.len() as i64),
        Probe::RetiredDoubleBit => num(d.retired_pages(RetirementCause::DoubleBitEccError)?.len() as i64),
        Probe::RetiredPending => Reading::Flag(d.are_pages_pending_retired()?),
        Probe::RemappedCorrectable | Probe::RemappedUncorrectable | Probe::RemappedPending | Probe::RemappedFailure => {
            let (mut cor, mut unc, mut pending, mut failed) = (0, 0, 0, 0);
            sys!(nvml, nvmlDeviceGetRemappedRows(h, &mut cor, &mut unc, &mut pending, &mut failed))?;
            match p {
                Probe::RemappedCorrectable => num(cor),
                Probe::RemappedUncorrectable => num(unc),
                Probe::RemappedPending => Reading::Flag(pending != 0),
                _ => Reading::Flag(failed != 0),
            }
        }
        Probe::RemapHistogram(bucket) => {
            let mut x = nvmlRowRemapperHistogramValues_t { max: 0, high: 0, partial: 0, low: 0, none: 0 };
            sys!(nvml, nvmlDeviceGetRowRemapperHistogram(h, &mut x))?;
            num([x.max, x.high, x.partial, x.low, x.none][usize::from(bucket.min(4))])
        }
        Probe::MarginTemperature => {
            let v = version::<nvmlMarginTemperature_t>(1);
            let mut x = nvmlMarginTemperature_t { version: v, marginTemperature: 0 };
            sys!(nvml, nvmlDeviceGetMarginTemperature(h, &mut x))?;
            num(x.marginTemperature)
        }
        Probe::Platform(part) => {
            // SAFETY: plain old data.
            let mut x: nvmlPlatformInfo_t = unsafe { std::mem::zeroed() };
            x.version = version::<nvmlPlatformInfo_t>(2);
            sys!(nvml, nvmlDeviceGetPlatformInfo(h, &mut x))?;
            match part {
                0 => {
                    let end = x.chassisSerialNumber.iter().position(|&b| b == 0).unwrap_or(16);
                    Reading::Text(String::from_utf8_lossy(&x.chassisSerialNumber[..end]).into_owned())
                }
                1 => num(x.slotNumber),
                2 => num(x.trayIndex),
                3 => num(x.hostId),
                _ => num(x.moduleId),
            }
        }
        Probe::FabricState => {
            // SAFETY: plain old data.
            let mut x: nvmlGpuFabricInfoV_t = unsafe { std::mem::zeroed() };
            x.version = version::<nvmlGpuFabricInfoV_t>(3);
            sys!(nvml, nvmlDeviceGetGpuFabricInfoV(h, &mut x))?;
            num(x.state)
        }
        Probe::PowerManagement => {
            let mut v = 0;
            sys!(nvml, nvmlDeviceGetPowerManagementMode(h, &mut v))?;
            Reading::Flag(v != 0)
        }
        Probe::PowerDefaultLimit => num(d.power_management_limit_default()?),
        Probe::PowerMinLimit => num(d.power_management_limit_constraints()?.min_limit),
        Probe::PowerMaxLimit => num(d.power_management_limit_constraints()?.max_limit),
        Probe::ClockVideo => num(d.clock_info(Clock::Video)?),
        Probe::AppClockGraphics => num(d.applications_clock(Clock::Graphics)?),
        Probe::AppClockMemory => num(d.applications_clock(Clock::Memory)?),
        Probe::DefaultAppClockGraphics => num(d.default_applications_clock(Clock::Graphics)?),
        Probe::DefaultAppClockMemory => num(d.default_applications_clock(Clock::Memory)?),
        Probe::MaxClockGraphics => num(d.max_clock_info(Clock::Graphics)?),
        Probe::MigCurrent => Reading::Flag(d.mig_mode()?.current != 0),
        Probe::MigPending => Reading::Flag(d.mig_mode()?.pending != 0),
        Probe::GspCurrent => Reading::Flag(d.gsp_firmware_mode()?.enabled),
        Probe::GspDefault => Reading::Flag(d.gsp_firmware_mode()?.default),
        Probe::C2cMode => {
            let mut x = nvmlC2cModeInfo_v1_t { isC2cEnabled: 0 };
            sys!(nvml, nvmlDeviceGetC2cModeInfoV(h, &mut x))?;
            Reading::Flag(x.isC2cEnabled != 0)
        }
        Probe::ProtectedTotal | Probe::ProtectedUsed | Probe::ProtectedFree => {
            let mut m = nvmlMemory_t { total: 0, free: 0, used: 0 };
            sys!(nvml, nvmlDeviceGetConfComputeProtectedMemoryUsage(h, &mut m))?;
            let b = match p {
                Probe::ProtectedTotal => m.total,
                Probe::ProtectedUsed => m.used,
                _ => m.free,
            };
            num(b as i64)
        }
    })
}

/// One `nvmlDeviceGetFieldValues` field.
fn field(d: &Device<'static>, id: u32) -> Result<Reading, NvmlError> {
    use nvml_wrapper::enums::device::SampleValue;
    use nvml_wrapper::structs::device::FieldId;
    let v = d.field_values_for(&[FieldId(id)])?.into_iter().next().ok_or(NvmlError::Unknown)??;
    Ok(match v.value? {
        SampleValue::U32(x) => num(x),
        SampleValue::U64(x) => num(i64::try_from(x).map_err(|_| NvmlError::Unknown)?),
        SampleValue::I64(x) => num(x),
        SampleValue::F64(x) => num(x as i64),
    })
}
