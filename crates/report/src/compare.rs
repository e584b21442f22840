//! The compare table: two runs' figures side by side, what came and went, and the verdict.

use std::fmt::Write as _;

use gpulse_diagnose::FindingId;
use gpulse_diagnose::compare::{Comparison, Figures};

/// The table and verdict of `c`.
pub fn render(c: &Comparison) -> String {
    let mut s = String::new();
    let row = |s: &mut String, name: &str, f: &dyn Fn(&Figures) -> Option<f64>, unit: &str| {
        let (b, a) = (f(&c.before), f(&c.after));
        let cell = |v: Option<f64>| v.map_or_else(|| "—".to_owned(), |v| format!("{v:.1}{unit}"));
        // A share changes by points (a ratio of 86.9 % to 0.5 % says nothing); an amount by a
        // factor, printed with enough digits that a large fall does not read "0.0×".
        let change = match (b, a) {
            (Some(b), Some(a)) if unit == "%" => format!("{:+.1} pts", a - b),
            (Some(b), Some(a)) if b.abs() > 1e-9 => format!("{}×", factor(a / b)),
            _ => String::new(),
        };
        let _ = writeln!(s, "  {name:<18} {:>12} → {:<12} {change}", cell(b), cell(a));
    };
    if c.before.steps_per_s.is_some() || c.after.steps_per_s.is_some() {
        row(&mut s, "steps/s", &|f| f.steps_per_s, "");
        row(&mut s, "data wait", &|f| f.data_wait_pct, "%");
    }
    row(&mut s, "GPU-Util", &|f| f.util_gpu_pct, "%");
    row(&mut s, "SM active", &|f| f.sm_active_pct, "%");
    row(&mut s, "memory peak", &|f| f.memory_peak_gib, " GiB");
    row(&mut s, "power", &|f| f.power_w, " W");
    row(&mut s, "tree CPU", &|f| f.tree_cpu_pct, "%");
    // The main thread's states, in either run: a state absent from one was not seen there (0 %),
    // where the thread was sampled at all.
    let sampled = |f: &Figures| !f.main_thread_pct.is_empty();
    let mut states: Vec<gpulse_diagnose::main_thread::ThreadState> =
        c.before.main_thread_pct.iter().chain(&c.after.main_thread_pct).map(|x| x.0).collect();
    states.sort();
    states.dedup();
    for st in states {
        let pct = |f: &Figures| sampled(f).then(|| f.main_thread_pct.iter().find(|x| x.0 == st).map_or(0.0, |x| x.1));
        row(&mut s, &format!("main: {}", st.as_str()), &pct, "%");
    }
    // Each rank's time in collectives, in either run: where the straggler went.
    let mut ranks: Vec<u32> =
        c.before.rank_collective_pct.iter().chain(&c.after.rank_collective_pct).map(|x| x.0).collect();
    ranks.sort_unstable();
    ranks.dedup();
    for r in ranks {
        let pct = |f: &Figures| f.rank_collective_pct.iter().find(|x| x.0 == r).map(|x| x.1);
        row(&mut s, &format!("rank {r} collectives"), &pct, "%");
    }
    let names = |ids: &[FindingId]| ids.iter().map(|id| id.as_str()).collect::<Vec<_>>().join(", ");
    if !c.gone.is_empty() {
        let _ = writeln!(s, "  gone:  {}", names(&c.gone));
    }
    if !c.new.is_empty() {
        let _ = writeln!(s, "  new:   {}", names(&c.new));
    }
    let _ = writeln!(s, "\n{}", c.verdict);
    s
}

/// A factor with two significant digits below 10 (0.012×, 0.5×, 7.3×), whole above.
fn factor(r: f64) -> String {
    if r >= 10.0 {
        format!("{r:.0}")
    } else if r >= 1.0 || r <= 0.0 {
        format!("{r:.1}")
    } else {
        let digits = (1 - r.log10().floor() as i32).max(1) as usize;
        format!("{r:.digits$}")
    }
}

#[cfg(test)]
mod tests {
    use gpulse_diagnose::main_thread::ThreadState;

    use super::*;

    /// The main thread's states side by side: a state seen in one run only reads 0 % in the
    /// other, and a run whose thread was not sampled has no figure.
    #[test]
    fn the_main_threads_states_before_and_after() {
        let figures = |states: Vec<(ThreadState, f64)>| Figures { main_thread_pct: states, ..Figures::default() };
        let c = Comparison {
            before: figures(vec![(ThreadState::Sleep, 40.0), (ThreadState::Python, 60.0)]),
            after: figures(vec![(ThreadState::Python, 100.0)]),
            gpu_work_ratio: None,
            gpu_work_basis: gpulse_diagnose::compare::WorkBasis::StepsPerS,
            gpu_work_noise: None,
            gone: Vec::new(),
            new: Vec::new(),
            verdict: String::new(),
        };
        let text = render(&c);
        let line = |name: &str| text.lines().find(|l| l.contains(name)).unwrap_or_else(|| panic!("{text}")).to_owned();
        assert!(line("main: sleep").contains("40.0% → 0.0%") && line("main: sleep").contains("-40.0 pts"), "{text}");
        assert!(line("main: python").contains("+40.0 pts"), "{text}");
        let unsampled = Comparison { after: Figures::default(), ..c };
        let text = render(&unsampled);
        assert!(text.lines().any(|l| l.contains("main: sleep") && l.contains("40.0% → —")), "{text}");
    }

    /// Each rank's time in collectives before and after: the straggler's fix shows as the
    /// others' waits falling.
    #[test]
    fn each_ranks_collectives_before_and_after() {
        let figures = |ranks: Vec<(u32, f64)>| Figures { rank_collective_pct: ranks, ..Figures::default() };
        let c = Comparison {
            before: figures(vec![(0, 41.0), (1, 1.0)]),
            after: figures(vec![(0, 6.0), (1, 5.0)]),
            gpu_work_ratio: None,
            gpu_work_basis: gpulse_diagnose::compare::WorkBasis::StepsPerS,
            gpu_work_noise: None,
            gone: vec![FindingId::Straggler],
            new: Vec::new(),
            verdict: String::new(),
        };
        let text = render(&c);
        let line = |name: &str| text.lines().find(|l| l.contains(name)).unwrap_or_else(|| panic!("{text}")).to_owned();
        assert!(
            line("rank 0 collectives").contains("41.0% → 6.0%") && line("rank 0 collectives").contains("-35.0 pts"),
            "{text}"
        );
        assert!(line("rank 1 collectives").contains("+4.0 pts"), "{text}");
        assert!(line("gone:").contains("rank_straggler"), "{text}");
    }
}
