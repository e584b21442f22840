//! Stretches of time: `[start, end]` seconds, sorted and disjoint once merged.

/// Sorted, disjoint `[start, end]` stretches.
pub(crate) type Spans = Vec<[f64; 2]>;

/// Sorts and merges overlapping stretches, each clipped to `[lo, hi]`.
pub(crate) fn merged(mut spans: Vec<[f64; 2]>, lo: f64, hi: f64) -> Spans {
    spans.retain_mut(|s| {
        *s = [s[0].max(lo), s[1].min(hi)];
        s[1] > s[0]
    });
    spans.sort_by(|a, b| a[0].total_cmp(&b[0]));
    let mut out: Spans = Vec::with_capacity(spans.len());
    for s in spans {
        match out.last_mut() {
            Some(last) if s[0] <= last[1] => last[1] = last[1].max(s[1]),
            _ => out.push(s),
        }
    }
    out
}

/// Whether `t` lies in one of `spans` (sorted, disjoint).
pub(crate) fn covers(spans: &[[f64; 2]], t: f64) -> bool {
    let i = spans.partition_point(|s| s[1] <= t);
    spans.get(i).is_some_and(|s| t >= s[0])
}

/// `spans` less `taken`, both sorted and disjoint.
pub(crate) fn minus(spans: &[[f64; 2]], taken: &[[f64; 2]]) -> Spans {
    let mut out = Vec::new();
    let mut j = 0;
    for s in spans {
        let mut start = s[0];
        while j < taken.len() && taken[j][1] <= start {
            j += 1;
        }
        let mut k = j;
        while k < taken.len() && taken[k][0] < s[1] {
            if taken[k][0] > start {
                out.push([start, taken[k][0]]);
            }
            start = start.max(taken[k][1]);
            k += 1;
        }
        if start < s[1] {
            out.push([start, s[1]]);
        }
    }
    out
}

/// Seconds the stretches cover.
pub(crate) fn total(spans: &[[f64; 2]]) -> f64 {
    spans.iter().map(|s| s[1] - s[0]).sum()
}
