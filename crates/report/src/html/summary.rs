//! The lines at the top of the report: what slowed the run and what it cost, the loop's pace, how
//! long it ran and what ran.

use super::axis::duration;
use crate::Analysis;

/// (label, text) pairs, in the order shown.
pub fn facts(input: &str, a: &Analysis, length_s: f64) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let cause = match a.diagnosis.findings.first() {
        Some(f) => {
            let cost =
                f.wall_share().map_or(String::new(), |l| format!("; it cost {} of the run", gpulse_diagnose::pct(l)));
            format!("{} ({}){cost}", f.title, f.id)
        }
        None => "none found".to_owned(),
    };
    out.push(("Primary cause", cause));
    if let Some(steps) = &a.run.steps {
        let mut s = format!(
            "{} steps marked; {:.2} steps/s over the {} after the first mark",
            steps.marked,
            steps.per_s(),
            steps.timed
        );
        if let Some(w) = steps.data_wait_share() {
            s += &format!("; waiting for data {:.0}% of that time", 100.0 * w);
        }
        out.push(("Training loop", s));
    }
    for e in &a.diagnosis.efficiency {
        out.push(("Roofline", e.line()));
        if let Some(line) = e.energy_line() {
            out.push(("Energy", line));
        }
    }
    let started = gpulse_base::clock::format_utc(a.run.start_us);
    let started = started.split('.').next().unwrap_or(&started).replace('/', "-");
    out.push((
        "Run",
        format!(
            "{} from {started} UTC; {} GPU{}, {} samples",
            duration(length_s),
            a.gpus,
            if a.gpus == 1 { "" } else { "s" },
            a.samples
        ),
    ));
    if let Some(cmd) = &a.command {
        out.push(("Command", cmd.clone()));
    }
    out.push(("Input", input.to_owned()));
    out
}

#[cfg(test)]
mod tests {
    use gpulse_diagnose::{Finding, Severity};

    use super::*;

    #[test]
    fn the_cost_is_stated_when_measured_and_never_invented() {
        let stall = Finding::new(gpulse_diagnose::FindingId::PeriodicStall, Severity::Warning, "GPU 0 stalls".into());
        let mut a = Analysis {
            diagnosis: gpulse_diagnose::Diagnosis { findings: vec![stall.clone()], ..Default::default() },
            gpus: 1,
            samples: 3,
            ..Analysis::default()
        };
        let cause = |a: &Analysis| facts("x.db", a, 75.0)[0].1.clone();
        assert_eq!(cause(&a), "GPU 0 stalls (periodic_stall)");
        a.diagnosis.findings[0].cost = Some(gpulse_diagnose::Cost::of_ledger(15.2, 75.0, None, vec!["stall"]));
        assert_eq!(cause(&a), "GPU 0 stalls (periodic_stall); it cost 20% of the run");
        let f = facts("x.db", &a, 75.0);
        assert_eq!(f[1], ("Run", "1 min 15 s from 1970-01-01 00:00:00 UTC; 1 GPU, 3 samples".to_owned()));
        assert!(!f.iter().any(|l| l.0 == "Training loop" || l.0 == "Command"), "not in the input: not shown");
    }
}
