//! `tensor_idle`: the SMs are busy with FP32 arithmetic while the tensor cores sit idle.

use crate::run::mean;
use crate::{Finding, FindingId, Run, Severity, round};

/// The SMs busy at least half the time: the GPU, not its feeding, sets the pace.
const SM_BUSY_PCT: f64 = 50.0;
/// FP32 pipe activity at this level is dense arithmetic (matmuls, convolutions): memory-bound
/// kernels do about one FMA per 8 bytes moved, which keeps the pipe at a few percent of its
/// peak (H200: 4.8 TB/s of HBM against 67 TFLOP/s of FP32).
const FP32_DENSE_PCT: f64 = 20.0;
/// Tensor pipes at most this busy do a small share of the work: near zero, as in FP32
/// matmuls without TF32.
const TENSOR_IDLE_PCT: f64 = 5.0;

/// Busy SMs doing dense FP32 math with the tensor cores idle: the finding's test, which the
/// roofline line (`crate::roofline`) shares so the two never disagree.
pub(crate) fn idle(sm_pct: f64, fp32_pct: f64, tensor_pct: f64) -> bool {
    sm_pct >= SM_BUSY_PCT && fp32_pct >= FP32_DENSE_PCT && tensor_pct <= TENSOR_IDLE_PCT
}

pub fn findings(run: &Run) -> Vec<Finding> {
    let mut out = Vec::new();
    for g in &run.gpus {
        if g.active_s() < super::MIN_ACTIVE_S {
            continue;
        }
        let (Some(sm), Some(fp32), Some(tensor)) = (
            mean(&g.active_values(&g.sm_pct)),
            mean(&g.active_values(&g.fp32_pct)),
            mean(&g.active_values(&g.tensor_pct)),
        ) else {
            continue;
        };
        if !idle(sm, fp32, tensor) {
            continue;
        }
        out.push(
            Finding::new(
                FindingId::TensorIdle,
                Severity::Warning,
                format!("GPU {}: the SMs are {sm:.0}% busy with FP32 math ({fp32:.0}%) while the tensor cores do {tensor:.1}%", g.gpu),
            )
            .on_gpu(g.gpu)
            .over(g.window())
            .with("sm_active_mean_pct", round(sm, 1))
            .with("fp32_pipe_mean_pct", round(fp32, 1))
            .with("tensor_pipe_mean_pct", round(tensor, 1))
            // The FP32 pipe's active time, run on tensor cores at TF32 about 8× its peak (A100:
            // 156 against 19.5 TFLOP/s; H100 and H200: 495 against 67): at most 7/8 of it saved.
            .costs(fp32 / 100.0 * (1.0 - 1.0 / TF32_OVER_FP32), "fp32_pipe_time: the FP32 pipe's active share, times the share TF32 tensor cores (about 8× its peak) would save")
            .advise(&[
                "run the model under torch.autocast(\"cuda\", dtype=torch.bfloat16): matmuls and convolutions move to the tensor cores",
                "or keep FP32 weights and allow TF32 for FP32 matmuls: torch.set_float32_matmul_precision(\"high\") (and torch.backends.cudnn.allow_tf32 = True for convolutions)",
            ])
            .limit("the gain depends on how much of the step is matmuls and convolutions; GPM does not split the FP32 work by kernel"),
        );
    }
    out
}

/// Dense TF32 tensor-core peak over the FP32 pipe's peak, from A100 to H200.
pub(crate) const TF32_OVER_FP32: f64 = 8.0;

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    fn pipes(sm: f64, fp32: f64, tensor: f64) -> Vec<&'static str> {
        let mut g = steady(0, 95.0, 21);
        g.sm_pct = vec![Some(sm); 21];
        g.fp32_pct = vec![Some(fp32); 21];
        g.tensor_pct = vec![Some(tensor); 21];
        ids(&findings(&run(vec![g])))
    }

    #[test]
    fn tensor_idle_needs_busy_sms_dense_fp32_and_tensor_at_most_5_percent() {
        assert_eq!(pipes(50.0, 20.0, 5.0), ["tensor_idle"], "at every edge");
        let mut g = steady(0, 95.0, 21);
        (g.sm_pct, g.fp32_pct, g.tensor_pct) = (vec![Some(90.0); 21], vec![Some(72.0); 21], vec![Some(0.0); 21]);
        assert_eq!(findings(&run(vec![g]))[0].own_share(), Some(0.63), "72 % of the time, 7/8 of it saved");
        assert!(pipes(49.9, 60.0, 0.0).is_empty(), "the SMs wait: another finding's matter");
        assert!(pipes(90.0, 19.9, 0.0).is_empty(), "memory-bound FP32 work: no matmuls to move");
        assert!(pipes(90.0, 60.0, 5.1).is_empty(), "the tensor cores work");
        let mut g = steady(0, 95.0, 21);
        g.sm_pct = vec![Some(90.0); 21];
        assert!(findings(&run(vec![g])).is_empty(), "no pipe counters: nothing claimed");
    }
}
