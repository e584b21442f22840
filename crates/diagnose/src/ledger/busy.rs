//! How busy the GPU the ledger reads was over some stretches: the job's kernels, and others'.

use crate::run::total;

/// The GPU's kernel time over some stretches: the job's own, and other processes'.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Busy {
    /// Seconds in which the job's kernels ran.
    pub job_s: f64,
    /// Seconds in which another process's kernels ran, by its SM share.
    pub others_s: f64,
    /// Whether another process was listed computing beside the job where per-process SM use was
    /// not given: its kernels are counted as the job's.
    pub others_untold: bool,
}

/// How the GPU's time in `spans` (sorted, disjoint) went, by GPU-Util: a sample covers the
/// interval since the one before it. Where a process outside the job shares the GPU, the job's
/// part is its processes' SM share (NVML's per-process utilization). Time no sample covers goes
/// at the mean rate.
pub(crate) fn busy_seconds(g: &crate::GpuSeries, spans: &[[f64; 2]]) -> Option<Busy> {
    use gpulse_model::GpuProcessClass::{Foreign, Tree};
    let (mut b, mut known) = (Busy::default(), 0.0);
    let mut j = 0;
    for i in 1..g.t_s.len() {
        let (a, e) = (g.t_s[i - 1], g.t_s[i]);
        let Some(u) = fine_util(g, a, e).or(g.util_pct[i]) else { continue };
        while j < spans.len() && spans[j][1] <= a {
            j += 1;
        }
        let overlap: f64 =
            spans[j..].iter().take_while(|s| s[0] < e).map(|s| (s[1].min(e) - s[0].max(a)).max(0.0)).sum();
        let listing = g.processes.get(i).map_or(&[][..], |l| l.as_slice());
        let mut job = u;
        if listing.iter().any(|p| p.class == Some(Foreign)) {
            if listing.iter().all(|p| p.sm_util_pct.is_some()) {
                let sm = |class| listing.iter().filter(move |p| p.class == Some(class)).filter_map(|p| p.sm_util_pct);
                // GPU-Util split by the processes' SM figures: those read tiny kernels as 0–1 %,
                // so only their ratio says whose the time was; another process at that floor
                // took none of it.
                let (mine, theirs) = (sm(Tree).sum::<u32>() as f64, sm(Foreign).sum::<u32>() as f64);
                if theirs > 1.0 {
                    job = u * mine / (mine + theirs);
                    b.others_s += overlap * (u - job) / 100.0;
                }
            } else {
                b.others_untold = true;
            }
        }
        b.job_s += overlap * job / 100.0;
        known += overlap;
    }
    (known > 0.0).then(|| {
        let scale = total(spans) / known;
        Busy { job_s: b.job_s * scale, others_s: b.others_s * scale, ..b }
    })
}

/// GPU-Util over `(a, e]` by the driver's own samples (each over the time since the one before),
/// where they cover at least nine tenths of it: a poll's reading is only the latest of them, a
/// sixth of a second of its second on an H100, and a loop whose steps beat against it read 35 %
/// busier over a real tokenizer's run than its every sample said.
fn fine_util(g: &crate::GpuSeries, a: f64, e: f64) -> Option<f64> {
    let f = &g.util_fine;
    let from = f.partition_point(|x| x.0 <= a);
    let (mut covered, mut sum) = (0.0, 0.0);
    for k in from.max(1)..f.len() {
        if f[k - 1].0 >= e {
            break;
        }
        let Some([s0, s1]) = g.fine_span(k) else { continue };
        let here = (s1.min(e) - s0.max(a)).max(0.0);
        covered += here;
        sum += here * f[k].1;
    }
    (covered >= 0.9 * (e - a) && covered > 0.0).then(|| sum / covered)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::testing;

    /// A poll's GPU-Util is the driver's latest sample only: where the driver's own samples cover
    /// the poll's second, they say how busy it was; where they do not, the poll does.
    #[test]
    fn the_drivers_own_samples_say_how_busy_a_poll_was() {
        let mut g = testing::gpu(0, 1.0, &[0.0, 90.0, 90.0]);
        // Five samples over the first second, the last of them at 90 %, the second second bare.
        g.util_fine = vec![(0.0, 0.0), (0.2, 0.0), (0.4, 30.0), (0.6, 30.0), (0.8, 0.0), (1.0, 90.0)];
        let busy = busy_seconds(&g, &[[0.0, 1.0]]).unwrap();
        assert!((busy.job_s - 0.3).abs() < 1e-9, "{busy:?}");
        let busy = busy_seconds(&g, &[[1.0, 2.0]]).unwrap();
        assert!((busy.job_s - 0.9).abs() < 1e-9, "{busy:?}");
    }
}
