//! Fewer points for long runs, keeping each bucket's lowest and highest so a one-sample spike
//! or drop still shows; a bucket without a reading stays a gap.

/// Runs of points to draw, as indices into the readings, each run unbroken: absent readings split
/// them, and are never drawn as 0.
pub type Runs = Vec<Vec<usize>>;

/// The readings `(t, v)` cut into unbroken runs, at most two points per bucket of `bucket_s`
/// seconds (none when `bucket_s` is 0: every point is kept).
pub fn min_max(t_s: &[f64], v: &[Option<f64>], bucket_s: f64) -> Runs {
    let mut runs = Vec::new();
    let mut cur: Vec<usize> = Vec::new();
    let mut i = 0;
    let n = t_s.len().min(v.len());
    while i < n {
        if bucket_s <= 0.0 {
            match v[i] {
                Some(_) => cur.push(i),
                None => flush(&mut runs, &mut cur),
            }
            i += 1;
            continue;
        }
        // One bucket: [start, start + bucket_s).
        let bucket = (t_s[i] / bucket_s).floor();
        let mut lo: Option<(usize, f64)> = None;
        let mut hi: Option<(usize, f64)> = None;
        while i < n && (t_s[i] / bucket_s).floor() == bucket {
            if let Some(y) = v[i] {
                if lo.is_none_or(|p| y < p.1) {
                    lo = Some((i, y));
                }
                if hi.is_none_or(|p| y > p.1) {
                    hi = Some((i, y));
                }
            }
            i += 1;
        }
        match (lo, hi) {
            (Some(a), Some(b)) if a.0 == b.0 => cur.push(a.0),
            (Some(a), Some(b)) => cur.extend([a.0.min(b.0), a.0.max(b.0)]),
            _ => flush(&mut runs, &mut cur),
        }
    }
    flush(&mut runs, &mut cur);
    runs
}

fn flush(runs: &mut Runs, cur: &mut Vec<usize>) {
    if !cur.is_empty() {
        runs.push(std::mem::take(cur));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runs as `(t, v)` points.
    fn points(t_s: &[f64], v: &[Option<f64>], bucket_s: f64) -> Vec<Vec<(f64, f64)>> {
        min_max(t_s, v, bucket_s)
            .into_iter()
            .map(|r| r.into_iter().map(|i| (t_s[i], v[i].unwrap())).collect())
            .collect()
    }

    #[test]
    fn a_spike_and_a_drop_survive_and_gaps_stay_gaps() {
        let t: Vec<f64> = (0..86_400).map(f64::from).collect();
        let mut v: Vec<Option<f64>> = vec![Some(50.0); t.len()];
        v[40_000] = Some(100.0);
        v[60_000] = Some(0.0);
        for x in &mut v[70_000..72_000] {
            *x = None;
        }
        let runs = points(&t, &v, 86_400.0 / 800.0);
        let points: usize = runs.iter().map(Vec::len).sum();
        assert!(points <= 1600, "{points} points");
        let all: Vec<f64> = runs.iter().flatten().map(|p| p.1).collect();
        assert!(all.contains(&100.0) && all.contains(&0.0), "the spike and the drop are kept");
        assert_eq!(runs.len(), 2, "the missing stretch splits the line");
        assert!(runs.iter().flatten().all(|p| !(70_000.0..72_000.0).contains(&p.0)), "nothing drawn in the gap");
    }

    #[test]
    fn short_runs_keep_every_point() {
        let runs = points(&[0.0, 1.0, 2.0, 3.0], &[Some(1.0), None, Some(2.0), Some(3.0)], 0.0);
        assert_eq!(runs, vec![vec![(0.0, 1.0)], vec![(2.0, 2.0), (3.0, 3.0)]]);
    }
}
