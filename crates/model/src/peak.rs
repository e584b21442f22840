//! What each GPU can do at most: the roof a job's achieved rates are measured against. One row
//! per device, keyed by the name NVML gives (`nvmlDeviceGetName`), with its SM count, its
//! boost clock, NVIDIA's datasheet peaks (dense, without sparsity) and its memory bandwidth;
//! the work an SM does per clock comes from each architecture's whitepaper. A device or a data
//! type the datasheet does not list has no peak here: an estimate against it is absent, never
//! made up.
//!
//! A datasheet quotes its peaks at one clock (for H100 and H200 the tensor figures imply
//! 1830 MHz, the FP32 ones 1980 MHz), while the GPU runs at the clock NVML reports: the peak
//! that applies to a job is [`DevicePeak::peak_at`] its clock, per SM per clock times the SMs.

/// A data type a GPU computes in, and the unit that computes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    /// FP64 on the FP64 pipe.
    Fp64,
    /// FP64 on the tensor cores (DMMA; A100 and newer).
    Fp64Tensor,
    /// FP32 on the FP32 pipe (a matmul without TF32).
    Fp32,
    /// TF32 on the tensor cores.
    Tf32Tensor,
    /// BF16 or FP16 on the tensor cores (the same rate on every device here).
    Bf16Tensor,
    /// FP8 on the tensor cores (Ada and Hopper).
    Fp8Tensor,
    /// INT8 on the tensor cores.
    Int8Tensor,
}

impl Precision {
    pub const ALL: [Precision; 7] = [
        Self::Fp64,
        Self::Fp64Tensor,
        Self::Fp32,
        Self::Tf32Tensor,
        Self::Bf16Tensor,
        Self::Fp8Tensor,
        Self::Int8Tensor,
    ];

    /// As a reader names it.
    pub fn label(self) -> &'static str {
        match self {
            Self::Fp64 => "FP64",
            Self::Fp64Tensor => "FP64 tensor",
            Self::Fp32 => "FP32",
            Self::Tf32Tensor => "TF32 tensor",
            Self::Bf16Tensor => "BF16/FP16 tensor",
            Self::Fp8Tensor => "FP8 tensor",
            Self::Int8Tensor => "INT8 tensor",
        }
    }
}

/// A GPU architecture, as far as its work per SM per clock goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Arch {
    /// V100 (GV100).
    Volta,
    /// A100 (GA100).
    AmpereGa100,
    /// A10 (GA102).
    AmpereGa10x,
    /// L4, L40S (AD10x).
    Ada,
    /// H100, H200 (GH100).
    Hopper,
}

impl Arch {
    /// Dense floating-point operations (integer ones for INT8) per SM per clock: an FMA is two.
    /// From the whitepapers (Volta, Ampere GA100, GA102, Ada, Hopper: their per-SM tables);
    /// `None` where the architecture has no such unit or its datasheets give no peak.
    pub fn ops_per_sm_clock(self, p: Precision) -> Option<f64> {
        use Precision::*;
        let v = match (self, p) {
            (Self::Volta, Fp64) => 64,
            (Self::Volta, Fp32) => 128,
            (Self::Volta, Bf16Tensor) => 1024,
            (Self::AmpereGa100, Fp64) => 64,
            (Self::AmpereGa100, Fp64Tensor) => 128,
            (Self::AmpereGa100, Fp32) => 128,
            (Self::AmpereGa100, Tf32Tensor) => 1024,
            (Self::AmpereGa100, Bf16Tensor) => 2048,
            (Self::AmpereGa100, Int8Tensor) => 4096,
            (Self::AmpereGa10x | Self::Ada, Fp32) => 256,
            (Self::AmpereGa10x | Self::Ada, Tf32Tensor) => 512,
            (Self::AmpereGa10x | Self::Ada, Bf16Tensor) => 1024,
            (Self::AmpereGa10x | Self::Ada, Int8Tensor) => 2048,
            (Self::Ada, Fp8Tensor) => 2048,
            (Self::Hopper, Fp64) => 128,
            (Self::Hopper, Fp64Tensor | Fp32) => 256,
            (Self::Hopper, Tf32Tensor) => 2048,
            (Self::Hopper, Bf16Tensor) => 4096,
            (Self::Hopper, Fp8Tensor | Int8Tensor) => 8192,
            _ => return None,
        };
        Some(f64::from(v))
    }
}

/// One device's roof.
#[derive(Debug, Clone, Copy)]
pub struct DevicePeak {
    /// The product as NVIDIA names it.
    pub product: &'static str,
    pub arch: Arch,
    pub sms: u32,
    /// The datasheet's maximum boost clock, MHz: used when NVML gives no maximum SM clock.
    pub boost_clock_mhz: u32,
    /// Peak DRAM bandwidth, bytes per second.
    pub dram_bytes_per_s: f64,
    /// The datasheet's dense peaks, TFLOP/s (TOPS for INT8), in [`Precision::ALL`]'s order.
    pub datasheet_tflops: [Option<f64>; 7],
    /// Where the figures come from.
    pub source: &'static str,
}

impl DevicePeak {
    /// The datasheet's dense peak for `p`, operations per second.
    pub fn datasheet(&self, p: Precision) -> Option<f64> {
        let i = Precision::ALL.iter().position(|x| *x == p)?;
        self.datasheet_tflops[i].map(|t| t * 1e12)
    }

    /// The peak for `p` at an SM clock of `mhz`, operations per second: what the SMs can do
    /// per clock at that clock. `None` where the datasheet lists no peak for `p`.
    pub fn peak_at(&self, p: Precision, mhz: f64) -> Option<f64> {
        self.datasheet(p)?;
        Some(self.arch.ops_per_sm_clock(p)? * f64::from(self.sms) * mhz * 1e6)
    }

    /// The clock the datasheet's peak for `p` implies, MHz.
    pub fn datasheet_clock_mhz(&self, p: Precision) -> Option<f64> {
        Some(self.datasheet(p)? / (self.arch.ops_per_sm_clock(p)? * f64::from(self.sms) * 1e6))
    }
}

const T: f64 = 1e12;

const H100_SXM: DevicePeak = DevicePeak {
    product: "H100 SXM",
    arch: Arch::Hopper,
    sms: 132,
    boost_clock_mhz: 1980,
    dram_bytes_per_s: 3.35 * T,
    datasheet_tflops: [Some(34.0), Some(67.0), Some(67.0), Some(494.5), Some(989.5), Some(1979.0), Some(1979.0)],
    source: "NVIDIA H100 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/h100/ (sparse figures halved)",
};

const H100_PCIE: DevicePeak = DevicePeak {
    product: "H100 PCIe",
    arch: Arch::Hopper,
    sms: 114,
    boost_clock_mhz: 1755,
    dram_bytes_per_s: 2.0 * T,
    datasheet_tflops: [Some(26.0), Some(51.0), Some(51.0), Some(378.0), Some(756.5), Some(1513.0), Some(1513.0)],
    source: "NVIDIA H100 Tensor Core GPU datasheet (2022), https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet (sparse figures halved)",
};

const H200_SXM: DevicePeak = DevicePeak {
    product: "H200 SXM",
    arch: Arch::Hopper,
    sms: 132,
    boost_clock_mhz: 1980,
    dram_bytes_per_s: 4.8 * T,
    datasheet_tflops: [Some(34.0), Some(67.0), Some(67.0), Some(494.5), Some(989.5), Some(1979.0), Some(1979.0)],
    source: "NVIDIA H200 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/h200/ (sparse figures halved)",
};

/// The A100 datasheet lists one set of peaks for its four forms; only bandwidth differs.
const fn a100(product: &'static str, dram_bytes_per_s: f64) -> DevicePeak {
    DevicePeak {
        product,
        arch: Arch::AmpereGa100,
        sms: 108,
        boost_clock_mhz: 1410,
        dram_bytes_per_s,
        datasheet_tflops: [Some(9.7), Some(19.5), Some(19.5), Some(156.0), Some(312.0), None, Some(624.0)],
        source: "NVIDIA A100 Tensor Core GPU datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
    }
}

const L4: DevicePeak = DevicePeak {
    product: "L4",
    arch: Arch::Ada,
    sms: 58,
    boost_clock_mhz: 2040,
    dram_bytes_per_s: 0.3 * T,
    datasheet_tflops: [None, None, Some(30.3), Some(60.0), Some(121.0), Some(242.5), Some(242.5)],
    source: "NVIDIA L4 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/l4/ (sparse figures halved)",
};

const L40S: DevicePeak = DevicePeak {
    product: "L40S",
    arch: Arch::Ada,
    sms: 142,
    boost_clock_mhz: 2520,
    dram_bytes_per_s: 0.864 * T,
    datasheet_tflops: [None, None, Some(91.6), Some(183.0), Some(362.05), Some(733.0), Some(733.0)],
    source: "NVIDIA L40S GPU datasheet, https://www.nvidia.com/en-us/data-center/l40s/",
};

const A10: DevicePeak = DevicePeak {
    product: "A10",
    arch: Arch::AmpereGa10x,
    sms: 72,
    boost_clock_mhz: 1695,
    dram_bytes_per_s: 0.6 * T,
    datasheet_tflops: [None, None, Some(31.2), Some(62.5), Some(125.0), None, Some(250.0)],
    source: "NVIDIA A10 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/products/a10-gpu/",
};

/// V100's tensor cores do FP16 only: its "125 TFLOPS tensor performance" is the BF16/FP16 slot.
const fn v100(product: &'static str, boost_clock_mhz: u32, fp64: f64, fp32: f64, tensor: f64) -> DevicePeak {
    DevicePeak {
        product,
        arch: Arch::Volta,
        sms: 80,
        boost_clock_mhz,
        dram_bytes_per_s: 0.9 * T,
        datasheet_tflops: [Some(fp64), None, Some(fp32), None, Some(tensor), None, None],
        source: "NVIDIA V100 Tensor Core GPU datasheet, https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf",
    }
}

/// Every device with a roof, for the tests and the docs.
pub const DEVICES: [DevicePeak; 13] = [
    H100_SXM,
    H100_PCIE,
    H200_SXM,
    a100("A100 SXM4 40GB", 1.555 * T),
    a100("A100 SXM4 80GB", 2.039 * T),
    a100("A100 PCIe 40GB", 1.555 * T),
    a100("A100 PCIe 80GB", 1.935 * T),
    L4,
    L40S,
    A10,
    v100("V100 SXM2", 1530, 7.8, 15.7, 125.0),
    v100("V100 PCIe", 1380, 7.0, 14.0, 112.0),
    // The 32 GB V100s keep the 16 GB ones' peaks and bandwidth.
    v100("V100 SXM2 32GB", 1530, 7.8, 15.7, 125.0),
];

/// The roof of the device NVML names `name` (`"NVIDIA H200"`, `"NVIDIA A100-SXM4-80GB"`,
/// `"Tesla V100-PCIE-16GB"`). `None` for a device not in the table, and for the variants whose
/// peaks differ from their family's (H100 NVL, H200 NVL, GH200, A800, A10G, V100S, L40): a
/// wrong roof would be worse than none.
pub fn device_peak(name: &str) -> Option<&'static DevicePeak> {
    let n = name.to_ascii_uppercase().replace(['-', '_'], " ");
    let words: Vec<&str> = n.split_whitespace().filter(|w| *w != "NVIDIA" && *w != "TESLA").collect();
    let has = |w: &str| words.contains(&w);
    let by = |product: &str| DEVICES.iter().find(|d| d.product == product);
    match *words.first()? {
        _ if has("NVL") => None,
        "H200" => by("H200 SXM"),
        "H100" if has("PCIE") => by("H100 PCIe"),
        "H100" if has("HBM3") || has("SXM5") || has("SXM") => by("H100 SXM"),
        "A100" => match (has("PCIE"), has("80GB")) {
            (true, true) => by("A100 PCIe 80GB"),
            (true, false) => by("A100 PCIe 40GB"),
            (false, true) => by("A100 SXM4 80GB"),
            (false, false) => by("A100 SXM4 40GB"),
        },
        "L4" => by("L4"),
        "L40S" => by("L40S"),
        "A10" => by("A10"),
        "V100" if has("PCIE") => by("V100 PCIe"),
        "V100" if has("SXM2") && has("32GB") => by("V100 SXM2 32GB"),
        "V100" if has("SXM2") => by("V100 SXM2"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvml_names_find_their_roof_and_lookalikes_find_none() {
        for (name, product) in [
            ("NVIDIA H200", Some("H200 SXM")),
            ("NVIDIA H100 80GB HBM3", Some("H100 SXM")),
            ("NVIDIA H100 PCIe", Some("H100 PCIe")),
            ("NVIDIA A100-SXM4-80GB", Some("A100 SXM4 80GB")),
            ("NVIDIA A100-SXM4-40GB", Some("A100 SXM4 40GB")),
            ("NVIDIA A100-PCIE-40GB", Some("A100 PCIe 40GB")),
            ("NVIDIA A100 80GB PCIe", Some("A100 PCIe 80GB")),
            ("NVIDIA L4", Some("L4")),
            ("NVIDIA L40S", Some("L40S")),
            ("NVIDIA A10", Some("A10")),
            ("Tesla V100-SXM2-16GB", Some("V100 SXM2")),
            ("Tesla V100-SXM2-32GB", Some("V100 SXM2 32GB")),
            ("Tesla V100-PCIE-32GB", Some("V100 PCIe")),
            ("NVIDIA H100 NVL", None),
            ("NVIDIA H200 NVL", None),
            ("NVIDIA GH200 480GB", None),
            ("NVIDIA A10G", None),
            ("NVIDIA L40", None),
            ("Tesla V100S-PCIE-32GB", None),
            ("NVIDIA A800-SXM4-80GB", None),
            ("", None),
        ] {
            assert_eq!(device_peak(name).map(|d| d.product), product, "{name}");
        }
    }

    /// Each datasheet figure over the per-SM-per-clock work and the SMs gives the clock it was
    /// quoted at: between 80 % of the boost clock and the boost clock (a rounded figure may
    /// land 2 % over), or a figure, an SM count or a rate was copied wrong.
    #[test]
    fn every_datasheet_peak_is_the_sms_work_at_a_clock_the_device_runs() {
        for d in &DEVICES {
            for p in Precision::ALL {
                let (sheet, rate) = (d.datasheet(p), d.arch.ops_per_sm_clock(p));
                assert_eq!(sheet.is_some(), rate.is_some(), "{} {p:?}: a peak needs both", d.product);
                let Some(mhz) = d.datasheet_clock_mhz(p) else { continue };
                let boost = f64::from(d.boost_clock_mhz);
                assert!(mhz >= 0.8 * boost && mhz <= 1.02 * boost, "{} {p:?}: {mhz:.0} MHz of {boost}", d.product);
            }
        }
        let h200 = device_peak("NVIDIA H200").unwrap();
        // 132 SMs × 4096 dense BF16 FLOP per clock at 1830 MHz: the datasheet's 989.5 TFLOP/s.
        let at = h200.peak_at(Precision::Bf16Tensor, 1830.0).unwrap();
        assert!((at / 989.5e12 - 1.0).abs() < 0.001, "{at}");
        assert_eq!(h200.peak_at(Precision::Tf32Tensor, 1000.0), Some(132.0 * 2048.0 * 1e9));
        assert_eq!(device_peak("NVIDIA L4").unwrap().peak_at(Precision::Fp64, 2000.0), None, "not on its datasheet");
    }
}
