//! Text and JSON renderings of a diagnosis: the loop's pace, and each finding with its evidence,
//! advice and limits.

use std::fmt::Write as _;

use gpulse_diagnose::{Finding, Severity};

/// The loop's own measurements, for `--format json`.
pub fn steps_json(s: &gpulse_diagnose::Steps) -> serde_json::Value {
    serde_json::json!({
        "pid": s.pid,
        "ranks": s.ranks,
        "steps": s.marked,
        "steps_timed": s.timed,
        "window_s": s.window_s,
        "steps_per_s": s.per_s(),
        "step_mean_ms": 1000.0 * s.mean_step_s(),
        "data_wait_share_pct": s.data_wait_share().map(|w| 100.0 * w),
    })
}

/// One line on the loop's own measurements, when it sent marks: the steps it marked, then the
/// rate and the wait over the steps after the first mark (which opens the window).
pub fn steps_line(run: &gpulse_diagnose::Run) -> String {
    let Some(s) = &run.steps else { return String::new() };
    // Steps marked within a blink (a test, a loop over nothing) have no rate worth printing.
    if s.span_s() < 0.5 {
        return format!("steps: {} marked within {:.0} ms, too brief for a rate\n\n", s.marked, 1000.0 * s.span_s());
    }
    let mut line = format!(
        "steps: {} marked, {:.2}/s over the {} after the first mark ({:.0} ms each)",
        s.marked,
        s.per_s(),
        s.timed,
        1000.0 * s.mean_step_s()
    );
    if let Some(w) = s.data_wait_share() {
        line += &format!(", waiting for data {:.0}% of that time", 100.0 * w);
    }
    if s.ranks > 1 {
        line += &format!(" (PID {}, one of {} processes marking steps)", s.pid, s.ranks);
    }
    line + "\n\n"
}

/// How far each GPU was from its roof, and the energy per step: one line each, then what could
/// not be estimated. Nothing for a run without GPM.
pub fn roofline_text(efficiency: &[gpulse_diagnose::Efficiency]) -> String {
    if efficiency.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "roofline:
",
    );
    for e in efficiency {
        let _ = writeln!(s, "  {}", e.line());
        if let Some(line) = e.energy_line() {
            let _ = writeln!(s, "  {line}");
        }
        for l in &e.limits {
            let _ = writeln!(s, "  ? {l}");
        }
    }
    s + "\n"
}

/// Where the wall time went: one line per account, largest first, each with its basis.
pub fn ledger_text(ledger: &gpulse_diagnose::Ledger) -> String {
    if ledger.wall_s <= 0.0 || ledger.accounts.is_empty() {
        return String::new();
    }
    // What rounds to nothing says nothing (a few milliseconds between the last sample and the end).
    let mut accounts: Vec<&gpulse_diagnose::Account> = ledger.accounts.iter().filter(|a| a.seconds >= 0.05).collect();
    if accounts.is_empty() {
        return String::new();
    }
    let mut s = format!("where the {:.1} s went:\n", ledger.wall_s);
    accounts.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    for a in accounts {
        let label = match a.account {
            "phase" => format!("phase '{}'", a.label),
            _ => a.label.clone(),
        };
        let basis = match a.basis {
            gpulse_diagnose::Basis::Measured => "measured",
            gpulse_diagnose::Basis::Inferred => "inferred",
        };
        let _ = writeln!(s, "  {:>8.1} s {:>4.0}%  {label}  ({basis})", a.seconds, 100.0 * a.seconds / ledger.wall_s);
    }
    s + "\n"
}

/// What each sampled process's main thread did: its states' shares, largest first, each with its
/// most sampled site; a process that could not be sampled says why.
pub fn main_thread_text(profiles: &[gpulse_diagnose::main_thread::Profile]) -> String {
    let mut s = String::new();
    for p in profiles.iter().take(4) {
        if let Some(why) = &p.refused {
            let _ = writeln!(s, "main thread of PID {}: not sampled: {why}\n", p.pid);
            continue;
        }
        if p.samples == 0 {
            continue;
        }
        let role = if p.role == "worker" { "DataLoader worker" } else { "main thread" };
        let _ = writeln!(s, "{role} of PID {} ({} samples at {:.0} Hz):", p.pid, p.samples, p.rate_hz);
        for st in p.states.iter().filter(|st| st.share >= 0.005) {
            let site = st.sites.first().map(|x| x.site.as_str()).unwrap_or("");
            let words = gpulse_diagnose::main_thread::ThreadState::words(st.state);
            let _ = writeln!(s, "  {:>8.1} s {:>4.0}%  {words:<36} {site}", st.seconds, 100.0 * st.share);
        }
        s.push('\n');
    }
    s
}

/// Findings for a terminal: the primary cause in one line, then a headline each with evidence,
/// advice and limits.
pub fn render_text(findings: &[Finding]) -> String {
    let mut s = String::new();
    if let Some(line) = gpulse_diagnose::summary(findings) {
        let _ = writeln!(s, "{line}\n");
    }
    if findings.is_empty() {
        s += "No findings: nothing points to a bottleneck (or the input is too short or too idle to judge).\n";
    }
    for f in findings {
        let tag = match f.severity {
            Severity::Critical => "CRITICAL",
            Severity::Warning => "WARNING",
            Severity::Info => "INFO",
        };
        let basis = match f.basis {
            gpulse_diagnose::Basis::Measured => "",
            gpulse_diagnose::Basis::Inferred => " (inferred)",
        };
        let _ = writeln!(s, "{tag:<8} {}  [{}]{basis}", f.title, f.id);
        let evidence: Vec<String> = f.all_evidence().iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(s, "         evidence: {}", evidence.join(", "));
        for a in &f.advice {
            let _ = writeln!(s, "         - {a}");
        }
        for l in &f.limits {
            let _ = writeln!(s, "         ? {l}");
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_steps(window_s: [f64; 2], count: usize) -> gpulse_diagnose::Run {
        let steps = gpulse_diagnose::Steps {
            pid: 1,
            ranks: 1,
            marked: count + 1,
            timed: count,
            window_s,
            step_s: Vec::new(),
            data_wait_s: Vec::new(),
            waited_s: None,
        };
        gpulse_diagnose::Run { steps: Some(steps), ..Default::default() }
    }

    /// Four steps 2 µs apart are no 500,000 steps/s; 77 steps over 27 s are 2.8 a second, and
    /// the loop that took them marked 78.
    #[test]
    fn a_rate_only_over_a_span_worth_timing() {
        assert_eq!(
            steps_line(&with_steps([1.0, 1.000008], 4)),
            "steps: 5 marked within 0 ms, too brief for a rate\n\n"
        );
        assert_eq!(
            steps_line(&with_steps([3.0, 30.0], 77)),
            "steps: 78 marked, 2.85/s over the 77 after the first mark (351 ms each)\n\n"
        );
    }
}
