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
