//! A GPU whose memory repair waits for a reset: a row remap (Ampere and newer) or a page
//! retirement (older boards) recorded by the driver takes effect only when the GPU is reset.

use crate::{Finding, FindingId, Run, Severity, round};

pub fn reset_pending(run: &Run) -> Vec<Finding> {
    run.gpus
        .iter()
        .filter_map(|g| {
            let (at_s, key) = g.reset_pending?;
            let what = if key == "remapped_rows_pending" { "a memory row remap" } else { "a memory page retirement" };
            Some(
                Finding::new(
                    FindingId::GpuResetPending,
                    Severity::Warning,
                    format!("GPU {}: {what} waits for a GPU reset (seen {:.0} s into the run)", g.gpu, at_s),
                )
                .on_gpu(g.gpu)
                .with("at_s", round(at_s, 1))
                .with("pending", key)
                .advise(&[
                    "the driver found failing memory cells and recorded their repair; until the GPU is reset they stay in use, and a second error in them may be uncorrectable (Xid 48, 94 or 95)",
                    "drain the GPU and reset it (`nvidia-smi -r -i N` with no process on it, or reboot the node); `nvidia-smi -q -d ROW_REMAPPER,PAGE_RETIREMENT` shows the pending state",
                ]),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::testing::steady;

    #[test]
    fn a_pending_remap_asks_for_a_reset() {
        let mut r = Run { gpus: vec![steady(0, 90.0, 20), steady(1, 90.0, 20)], ..Run::default() };
        assert!(reset_pending(&r).is_empty());
        r.gpus[1].reset_pending = Some((12.0, "remapped_rows_pending"));
        let f = reset_pending(&r);
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].id, f[0].gpu, f[0].severity), (FindingId::GpuResetPending, Some(1), Severity::Warning));
        assert!(f[0].title.contains("row remap") && f[0].advice[1].contains("nvidia-smi -r"), "{f:?}");
    }
}
