//! How far a job is from the hardware's roof, with no FLOP count from the user: GPM's pipe
//! activities times the device's peaks (`gpulse_model::peak`) give the math rate, DRAM activity
//! times the peak bandwidth the memory traffic, and the energy counter over the loop's steps the
//! joules per step. A pipe's activity is the share of the window's cycles it ran at its full
//! rate, so the achieved rate is that share of the peak at the clock the GPU ran at. Pure: it
//! reads a [`Run`] and nothing else.

use gpulse_model::{DevicePeak, Precision, device_peak};
use serde::Serialize;

use crate::rules::tensor;
use crate::run::mean;
use crate::{Energy, GpuSeries, Run, round};

/// A resource at or above half of its roof over the job's window caps the speed-up at 2×
/// (1 / 0.5) while the other roof leaves more: that resource is the one the job is bound by.
/// Below half of both, more than half of the time neither is near its roof: it goes to
/// latency, kernel launches, synchronizations or waits.
const BOUND_SHARE: f64 = 0.5;

/// Which unit does the math.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pipe {
    /// The HMMA tensor cores: TF32, BF16, FP16 (GPM does not tell them apart).
    Hmma,
    /// Any tensor pipe, from a recording made before gpulse read HMMA, IMMA and DFMA apart.
    AnyTensor,
    /// The IMMA tensor cores: INT8.
    Imma,
    /// The DFMA tensor cores: FP64.
    Dfma,
    Fp64,
    Fp32,
    /// The FP16 pipe outside the tensor cores (elementwise half-precision math): no datasheet
    /// gives its peak, so its share is known and its rate is not.
    Fp16,
}

impl Pipe {
    /// The precisions it may be computing, fastest last.
    pub fn precisions(self) -> &'static [Precision] {
        match self {
            Self::Hmma | Self::AnyTensor => &[Precision::Tf32Tensor, Precision::Bf16Tensor],
            Self::Imma => &[Precision::Int8Tensor],
            Self::Dfma => &[Precision::Fp64Tensor],
            Self::Fp64 => &[Precision::Fp64],
            Self::Fp32 => &[Precision::Fp32],
            Self::Fp16 => &[],
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Self::Hmma => "tensor cores (HMMA)",
            Self::AnyTensor => "tensor cores",
            Self::Imma => "INT8 tensor cores (IMMA)",
            Self::Dfma => "FP64 tensor cores (DFMA)",
            Self::Fp64 => "FP64 pipe",
            Self::Fp32 => "FP32 pipe",
            Self::Fp16 => "FP16 pipe",
        }
    }
}

/// The math rate at one precision the pipe may be computing.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rate {
    pub precision: Precision,
    /// Operations per second over the window.
    pub achieved_per_s: f64,
    /// The datasheet's dense peak, operations per second: the peak used.
    pub datasheet_per_s: f64,
}

/// The math in use: the busiest pipe.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Math {
    pub pipe: Pipe,
    /// Its mean activity over the window, percent: its share of its peak at the clock it ran.
    pub active_pct: f64,
    /// One per precision it may be computing; empty without a roof for the device or the pipe.
    pub rates: Vec<Rate>,
}

impl Math {
    /// The achieved rate's share of the datasheet peak, `[lowest, highest]` over the
    /// precisions it may be computing (the model-FLOPs utilisation); `None` without a roof.
    pub fn utilization_ratio(&self) -> Option<[f64; 2]> {
        let r: Vec<f64> = self.rates.iter().map(|r| r.achieved_per_s / r.datasheet_per_s).collect();
        Some([r.iter().copied().reduce(f64::min)?, r.iter().copied().reduce(f64::max)?])
    }
}

/// Which roof a job sits under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    Math,
    Memory,
    /// Neither roof is near: latency, launches, synchronizations or waits.
    Neither,
}

/// One GPU's distance from its roof over the job's active window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Efficiency {
    pub gpu: u32,
    /// The roof used (`None`: a device not in the table).
    pub product: Option<&'static str>,
    pub window_s: [f64; 2],
    /// Mean SM clock over the window, and the most NVML says it can reach, MHz.
    pub sm_clock_mhz: Option<f64>,
    pub max_sm_clock_mhz: Option<f64>,
    pub math: Option<Math>,
    /// Mean DRAM activity, percent, and the bandwidth it stands for (bytes per second).
    pub dram_active_pct: Option<f64>,
    pub dram_bytes_per_s: Option<f64>,
    pub dram_peak_bytes_per_s: Option<f64>,
    pub bound: Option<Bound>,
    /// The `tensor_idle` finding's test holds on this GPU: the line says so too.
    pub tensor_idle: bool,
    pub energy: Option<Energy>,
    /// What could not be estimated, and why.
    pub limits: Vec<String>,
}

impl Efficiency {
    /// The DRAM bandwidth's share of its peak, 0 to 1.
    pub fn dram_ratio(&self) -> Option<f64> {
        Some(self.dram_bytes_per_s? / self.dram_peak_bytes_per_s?)
    }

    /// The most the job could speed up before it meets the roof it is nearest: 1 over the
    /// larger share of the math and DRAM roofs.
    pub fn headroom(&self) -> Option<f64> {
        let share =
            self.math.as_ref().map(|m| m.active_pct).into_iter().chain(self.dram_active_pct).reduce(f64::max)?;
        (share > 0.0).then(|| 100.0 / share)
    }
}

impl Efficiency {
    /// The roofline in one line: where the job sits, the math in use and its share of the
    /// peak (a range, and the peaks used, where the precision is unknown), DRAM, the headroom.
    pub fn line(&self) -> String {
        self.parts(false).join("; ")
    }

    /// The line for a narrow view (`top`): where the job sits, its share of the peak, and the
    /// headroom; the rates, peaks and bandwidth left to the full line.
    pub fn brief(&self) -> String {
        self.parts(true).join("; ")
    }

    fn parts(&self, brief: bool) -> Vec<String> {
        let mut parts = Vec::new();
        let math = self.math.as_ref();
        let clock = self.sm_clock_mhz.map(|c| format!(" at {c:.0} MHz")).unwrap_or_default();
        let lead = match (self.bound, math) {
            (Some(Bound::Math), Some(m)) => format!("math-bound: {} {:.0}% busy{clock}", m.pipe.label(), m.active_pct),
            (Some(Bound::Memory), _) => format!("memory-bound: DRAM {:.0}% busy", self.dram_active_pct.unwrap_or(0.0)),
            (Some(Bound::Neither), _) => {
                "bound by neither math nor memory: the time goes to latency, launches or waits".to_owned()
            }
            (None, Some(m)) => format!("{} {:.0}% busy{clock}", m.pipe.label(), m.active_pct),
            (_, None) => "no roofline: GPM gave no pipe activity".to_owned(),
        };
        parts.push(format!("GPU {} {lead}", self.gpu));
        // No pipe at 0 % (a copy's GPU): no math to put against a peak.
        if let Some(m) = math.filter(|m| m.active_pct >= 0.5) {
            if self.bound != Some(Bound::Math) {
                parts.push(format!("math: {} {:.0}%", m.pipe.label(), m.active_pct));
            }
            if let Some([lo, hi]) = m.utilization_ratio() {
                let share = if hi - lo < 0.005 {
                    format!("{:.0}%", 100.0 * hi)
                } else {
                    format!("{:.0}–{:.0}%", 100.0 * lo, 100.0 * hi)
                };
                let rates: Vec<String> = m
                    .rates
                    .iter()
                    .rev()
                    .map(|r| {
                        let unit = if r.precision == Precision::Int8Tensor { "TOPS" } else { "TFLOP/s" };
                        format!(
                            "{} {} of {} {unit}",
                            r.precision.label(),
                            tera(r.achieved_per_s),
                            tera(r.datasheet_per_s)
                        )
                    })
                    .collect();
                let or = if m.rates.len() > 1 { ", precision not told apart" } else { "" };
                parts.push(if brief {
                    format!("{share} of peak")
                } else {
                    format!("{share} of peak ({}{or})", rates.join(" or "))
                });
            }
        }
        if let Some(d) = self.dram_active_pct.filter(|_| self.bound != Some(Bound::Memory)) {
            parts.push(format!("DRAM {d:.0}%"));
        }
        if let (Some(b), Some(p), false) = (self.dram_bytes_per_s, self.dram_peak_bytes_per_s, brief) {
            parts.push(format!("{:.2} of {:.2} TB/s", b / 1e12, p / 1e12));
        }
        if self.tensor_idle && brief {
            parts.push("tensor cores idle (tensor_idle)".into());
        } else if self.tensor_idle {
            parts.push(format!(
                "tensor cores idle (tensor_idle): TF32 or BF16 would raise the math roof {:.0}× or more",
                tensor::TF32_OVER_FP32
            ));
        }
        if let Some(h) = self.headroom() {
            parts.push(format!("headroom ≤ {h:.1}× before a roof"));
        }
        parts
    }

    /// Energy in one line: joules per step, and per 1,000 samples where the loop said its batch.
    pub fn energy_line(&self) -> Option<String> {
        let e = self.energy.as_ref()?;
        let per_k = e.joules_per_1k_samples.map(|j| format!(", {j:.0} J per 1,000 samples")).unwrap_or_default();
        let how =
            if e.split_by_power { "; the counter's increase split by the power samples between its reads" } else { "" };
        Some(format!(
            "GPU {} energy: {:.1} J per step{per_k} (over {} steps{how})",
            self.gpu, e.joules_per_step, e.steps
        ))
    }
}

/// `x` operations per second in tera, as a reader reads it.
fn tera(x: f64) -> String {
    match x / 1e12 {
        t if t >= 100.0 => format!("{t:.0}"),
        t => format!("{t:.1}"),
    }
}

/// Every GPU's efficiency, over the samples the rules read (the loop's marked phases left
/// out); the energy over the whole run's steps. GPUs without GPM, and idle ones (no roof is near
/// a GPU that runs nothing, and "neither roof" would blame latency), are left out.
pub fn efficiency(full: &Run) -> Vec<Efficiency> {
    let masked = full.outside_phases();
    let run = masked.as_ref().unwrap_or(full);
    let samples = samples_per_step(full);
    let job = full.job_gpus();
    run.gpus
        .iter()
        // The job's GPUs only: another process's work is not the job's efficiency.
        .filter(|g| job.as_ref().is_none_or(|j| j.contains(&g.gpu)))
        .filter(|g| g.busy() && g.active_values(&g.sm_pct).len() + g.active_values(&g.tensor_pct).len() > 0)
        .map(|g| {
            let whole = full.gpus.iter().find(|w| w.gpu == g.gpu).unwrap_or(g);
            of_gpu(g, crate::energy::energy(whole, full.steps.as_ref(), samples))
        })
        .collect()
}

fn of_gpu(g: &GpuSeries, energy: Result<Energy, String>) -> Efficiency {
    let mut limits = Vec::new();
    let roof: Option<&'static DevicePeak> = g.name.as_deref().and_then(device_peak);
    if roof.is_none() {
        limits.push(format!(
            "no roof for {}: rates and shares of the peak need a device in gpulse's peak table",
            g.name.as_deref().unwrap_or("an unnamed device")
        ));
    }
    let clock = mean(&g.active_values(&g.sm_clock_mhz));
    let m = |v: &[Option<f64>]| mean(&g.active_values(v));
    let (hmma, any) = (m(&g.hmma_pct), m(&g.tensor_pct));
    let tensor = match (hmma, any) {
        (Some(h), _) => Some((Pipe::Hmma, h)),
        (None, Some(a)) => {
            limits.push("the recording has any-tensor activity only: taken as the HMMA pipe (TF32, BF16/FP16)".into());
            Some((Pipe::AnyTensor, a))
        }
        _ => None,
    };
    let pipes = [
        tensor,
        m(&g.imma_pct).map(|v| (Pipe::Imma, v)),
        m(&g.dfma_pct).map(|v| (Pipe::Dfma, v)),
        m(&g.fp64_pct).map(|v| (Pipe::Fp64, v)),
        m(&g.fp32_pct).map(|v| (Pipe::Fp32, v)),
        m(&g.fp16_pct).map(|v| (Pipe::Fp16, v)),
    ];
    // The busiest pipe is the precision in use: a job's math runs mostly on one unit.
    let busiest = pipes.into_iter().flatten().reduce(|a, b| if b.1 > a.1 { b } else { a });
    let math = busiest.map(|(pipe, active_pct)| Math { pipe, active_pct, rates: rates(g, roof, pipe, &mut limits) });
    let dram_active_pct = m(&g.dram_pct);
    let dram_peak = roof.map(|r| r.dram_bytes_per_s);
    let dram_bytes_per_s = dram_active_pct.zip(dram_peak).map(|(a, p)| a / 100.0 * p);
    let shares = (math.as_ref().map(|x| x.active_pct / 100.0), dram_active_pct.map(|d| d / 100.0));
    let bound = match shares {
        (Some(c), Some(d)) if c.max(d) >= BOUND_SHARE => Some(if c >= d { Bound::Math } else { Bound::Memory }),
        (Some(_), Some(_)) => Some(Bound::Neither),
        _ => None,
    };
    let tensor_idle = match (m(&g.sm_pct), m(&g.fp32_pct), any) {
        (Some(sm), Some(fp32), Some(t)) if g.active_s() >= crate::run::MIN_ACTIVE_S => tensor::idle(sm, fp32, t),
        _ => false,
    };
    let energy = energy.map_err(|why| limits.push(why)).ok();
    Efficiency {
        gpu: g.gpu,
        product: roof.map(|r| r.product),
        window_s: g.window(),
        sm_clock_mhz: clock.map(|c| round(c, 0)),
        max_sm_clock_mhz: g.max_sm_clock_mhz,
        math,
        dram_active_pct,
        dram_bytes_per_s,
        dram_peak_bytes_per_s: dram_peak,
        bound,
        tensor_idle,
        energy,
        limits,
    }
}

/// Each precision's achieved rate: the pipe's activity times the peak at the clock of each
/// sample, averaged over the window.
fn rates(g: &GpuSeries, roof: Option<&DevicePeak>, pipe: Pipe, limits: &mut Vec<String>) -> Vec<Rate> {
    let Some(roof) = roof else { return Vec::new() };
    let series = match pipe {
        Pipe::Hmma => &g.hmma_pct,
        Pipe::AnyTensor => &g.tensor_pct,
        Pipe::Imma => &g.imma_pct,
        Pipe::Dfma => &g.dfma_pct,
        Pipe::Fp64 => &g.fp64_pct,
        Pipe::Fp32 => &g.fp32_pct,
        Pipe::Fp16 => {
            limits.push("the FP16 pipe's peak is on no datasheet: its share is known, its rate is not".into());
            return Vec::new();
        }
    };
    let (a, b) = g.active;
    // Activity times clock, per sample that has both.
    let pairs: Vec<f64> =
        (a..b).filter_map(|i| Some(series.get(i).copied()?? / 100.0 * g.sm_clock_mhz.get(i).copied()??)).collect();
    let Some(active_mhz) = mean(&pairs) else {
        limits.push("no SM clock beside the pipe's activity: the rate needs the clock it ran at".into());
        return Vec::new();
    };
    pipe.precisions()
        .iter()
        .filter_map(|p| {
            Some(Rate {
                precision: *p,
                achieved_per_s: roof.peak_at(*p, active_mhz)?,
                datasheet_per_s: roof.datasheet(*p)?,
            })
        })
        .collect()
}

/// The samples one step of the job takes, as the loop said it (`gpulse.mark("batch",
/// samples_per_step=N)`): the last it said.
fn samples_per_step(run: &Run) -> Option<f64> {
    run.events
        .iter()
        .filter(|e| e.0 == gpulse_model::EventKind::Mark)
        .filter_map(|e| e.2.get("samples_per_step")?.as_f64())
        .rfind(|n| *n > 0.0)
}

#[cfg(test)]
#[path = "roofline_tests.rs"]
mod tests;
