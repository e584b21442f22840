//! One NVML read that a `--query-gpu` field shows, for the fields outside the sampled metrics:
//! identity, settings, limits, error counters. The query asks the live source for just the
//! probes its fields name; rendering turns each [`Reading`] into nvidia-smi's text.

use crate::Absence;

/// Which counter of `nvmlDeviceGetMemoryErrorCounter` / `nvmlDeviceGetTotalEccErrors`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EccLocation {
    /// `device_memory` and `dram` (NVML_MEMORY_LOCATION_DRAM / DEVICE_MEMORY).
    DeviceMemory,
    Dram,
    RegisterFile,
    L1Cache,
    L2Cache,
    TextureMemory,
    Cbu,
    Sram,
    /// Every location (`nvmlDeviceGetTotalEccErrors`).
    Total,
}

/// A part of `nvmlDeviceGetSramEccErrorStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SramPart {
    VolatileParity,
    VolatileSecDed,
    AggregateParity,
    AggregateSecDed,
    ThresholdExceeded,
    L2,
    Sm,
    Mcu,
    Pcie,
    Other,
}

/// One NVML read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Probe {
    Serial,
    PciDomain,
    PciBus,
    PciDevice,
    PciDeviceId,
    PciSubSystemId,
    /// `nvmlDeviceGetPciInfoExt`: base and sub class codes.
    PciBaseClass,
    PciSubClass,
    /// `nvmlGetVgpuDriverCapabilities(cap)`.
    VgpuDriverCap(u32),
    /// `nvmlDeviceGetVgpuCapabilities(cap)`.
    VgpuDeviceCap(u32),
    PcieGenMax,
    PcieGenGpuMax,
    PcieWidthMax,
    DisplayAttached,
    DisplayActive,
    AddressingMode,
    AccountingMode,
    AccountingBufferSize,
    DriverModelCurrent,
    DriverModelPending,
    Vbios,
    InforomImage,
    InforomOem,
    InforomEcc,
    InforomPower,
    InforomChecksum,
    GomCurrent,
    GomPending,
    /// A field of `nvmlDeviceGetFieldValues`, by NVML field id.
    Field(u32),
    ComputeCap,
    UtilEncoder,
    UtilDecoder,
    UtilJpeg,
    UtilOfa,
    EncoderSessions,
    EncoderFps,
    EncoderLatency,
    DramEncryptionCurrent,
    DramEncryptionPending,
    EccPending,
    Ecc {
        corrected: bool,
        aggregate: bool,
        location: EccLocation,
    },
    Sram(SramPart),
    RetiredSingleBit,
    RetiredDoubleBit,
    RetiredPending,
    RemappedCorrectable,
    RemappedUncorrectable,
    RemappedPending,
    RemappedFailure,
    /// `nvmlDeviceGetRowRemapperHistogram`: 0 = max, 1 = high, 2 = partial, 3 = low, 4 = none.
    RemapHistogram(u8),
    /// `nvmlDeviceGetMarginTemperature`: degrees below the slowdown limit (`temperature.gpu.tlimit`).
    MarginTemperature,
    /// `nvmlDeviceGetPlatformInfo`: 0 = chassis serial, 1 = slot, 2 = tray, 3 = host id, 4 = module id.
    Platform(u8),
    /// `nvmlDeviceGetGpuFabricInfoV`: the fabric registration state (0 = not supported).
    FabricState,
    PowerManagement,
    PowerDefaultLimit,
    PowerMinLimit,
    PowerMaxLimit,
    ClockVideo,
    AppClockGraphics,
    AppClockMemory,
    DefaultAppClockGraphics,
    DefaultAppClockMemory,
    MaxClockGraphics,
    MigCurrent,
    MigPending,
    GspCurrent,
    GspDefault,
    C2cMode,
    ProtectedTotal,
    ProtectedUsed,
    ProtectedFree,
    /// NVLink data sent and received over every link, per second since the previous read, in
    /// DCGM's unit (KiB/s over 1,000): dcgm-exporter's `DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL`,
    /// which DCGM computes so from `NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX` + `_RX`. Absent at
    /// the first read: a rate needs two.
    NvlinkThroughput,
}

/// What a probe read.
#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    Num(i64),
    Text(String),
    Flag(bool),
}

/// A probe's outcome: the reading, or why there is none.
pub type ProbeResult = Result<Reading, Absence>;
