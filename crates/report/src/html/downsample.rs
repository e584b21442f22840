//! Fewer points for long runs, keeping each bucket's lowest and highest so a one-sample spike
//! or drop still shows; a bucket without a reading stays a gap.

/// Runs of points to draw, each unbroken: absent readings split them, and are never drawn as 0.
pub type Runs = Vec<Vec<(f64, f64)>>;

/// `(t, v)` cut into unbroken runs, at most two points per bucket of `bucket_s` seconds (none when
/// `bucket_s` is 0: every point is kept).
pub fn min_max(t_s: &[f64], v: &[Option<f64>], bucket_s: f64) -> Runs {
    let mut runs: Runs = Vec::new();
    let mut cur: Vec<(f64, f64)> = Vec::new();
    let mut i = 0;
    let n = t_s.len().min(v.len());
    while i < n {
        if bucket_s <= 0.0 {
            match v[i] {
                Some(y) => cur.push((t_s[i], y)),
                None => flush(&mut runs, &mut cur),
            }
            i += 1;
            continue;
        }
        // One bucket: [start, start + bucket_s).
        let bucket = (t_s[i] / bucket_s).floor();
        let mut lo: Option<(f64, f64)> = None;
        let mut hi: Option<(f64, f64)> = None;
        while i < n && (t_s[i] / bucket_s).floor() == bucket {
            if let Some(y) = v[i] {
                if lo.is_none_or(|p| y < p.1) {
                    lo = Some((t_s[i], y));
                }
                if hi.is_none_or(|p| y > p.1) {
                    hi = Some((t_s[i], y));
                }
            }
            i += 1;
        }
        match (lo, hi) {
            (Some(a), Some(b)) if a.0 == b.0 => cur.push(a),
            (Some(a), Some(b)) => {
                let (first, second) = if a.0 < b.0 { (a, b) } else { (b, a) };
                cur.extend([first, second]);
            }
            _ => flush(&mut runs, &mut cur),
        }
    }
    flush(&mut runs, &mut cur);
    runs
}

fn flush(runs: &mut Runs, cur: &mut Vec<(f64, f64)>) {
    if !cur.is_empty() {
        runs.push(std::mem::take(cur));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spike_and_a_drop_survive_and_gaps_stay_gaps() {
        let t: Vec<f64> = (0..86_400).map(f64::from).collect();
        let mut v: Vec<Option<f64>> = vec![Some(50.0); t.len()];
        v[40_000] = Some(100.0);
        v[60_000] = Some(0.0);
        for x in &mut v[70_000..72_000] {
            *x = None;
        }
        let runs = min_max(&t, &v, 86_400.0 / 800.0);
        let points: usize = runs.iter().map(Vec::len).sum();
        assert!(points <= 1600, "{points} points");
        let all: Vec<f64> = runs.iter().flatten().map(|p| p.1).collect();
        assert!(all.contains(&100.0) && all.contains(&0.0), "the spike and the drop are kept");
        assert_eq!(runs.len(), 2, "the missing stretch splits the line");
        assert!(runs.iter().flatten().all(|p| !(70_000.0..72_000.0).contains(&p.0)), "nothing drawn in the gap");
    }

    #[test]
    fn short_runs_keep_every_point() {
        let runs = min_max(&[0.0, 1.0, 2.0, 3.0], &[Some(1.0), None, Some(2.0), Some(3.0)], 0.0);
        assert_eq!(runs, vec![vec![(0.0, 1.0)], vec![(2.0, 2.0), (3.0, 3.0)]]);
    }
}
