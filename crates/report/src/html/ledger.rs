//! The ledger in the report: one stacked bar of the wall time, and a table of its accounts.

use std::fmt::Write as _;

use gpulse_diagnose::{AccountKind as K, Basis, Ledger};

use super::esc;

/// A colour per kind of account: the loop's own work greens, waits and stalls warm, start-up and
/// the end greys, what nothing explains a hatched grey.
fn color(account: K) -> &'static str {
    match account {
        K::GpuWork => "#2ca02c",
        K::DataWait | K::StartupDataWait | K::AfterLoopDataWait | K::InputInferred => "#d62728",
        K::Transfer => "#9467bd",
        K::GpuOthers => "#8c564b",
        K::HostSide => "#ff7f0e",
        K::Phase => "#1f77b4",
        K::Stall => "#e377c2",
        K::Startup | K::StartupBeforeCuda | K::StartupToFirstStep => "#7f7f7f",
        K::AfterLoop => "#bcbd22",
        K::NoGpu | K::HostSaturated | K::StorageWrite | K::Unexplained | K::MainThread(_) => "#c7c7c7",
    }
}

fn name(a: &gpulse_diagnose::Account) -> String {
    match a.account {
        K::Phase => format!("phase '{}'", a.label),
        _ => a.label.clone(),
    }
}

/// The section: nothing when the ledger is empty.
pub fn section(ledger: &Ledger) -> String {
    if ledger.wall_s <= 0.0 || ledger.accounts.is_empty() {
        return String::new();
    }
    let mut s = String::from("<section class=\"ledger\"><h2>Where the time went</h2>");
    let _ = write!(
        s,
        "<svg class=\"ledger-bar\" width=\"900\" height=\"28\" viewBox=\"0 0 900 28\" role=\"img\" aria-label=\"the wall time by account\">"
    );
    let mut x = 0.0;
    for a in &ledger.accounts {
        let w = 900.0 * a.seconds / ledger.wall_s;
        let _ = write!(
            s,
            "<rect x=\"{x:.2}\" y=\"0\" width=\"{w:.2}\" height=\"28\" fill=\"{}\"><title>{}: {:.1} s</title></rect>",
            color(a.account),
            esc(&name(a)),
            a.seconds
        );
        x += w;
    }
    s += "</svg><table><tr><th></th><th>account</th><th>seconds</th><th>share</th><th>basis</th><th>how</th></tr>";
    let mut rows: Vec<_> = ledger.accounts.iter().collect();
    rows.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    for a in rows {
        let basis = match a.basis {
            Basis::Measured => "measured",
            Basis::Inferred => "inferred",
        };
        let _ = write!(
            s,
            "<tr><td style=\"background:{}\"></td><td>{}</td><td>{:.1}</td><td>{}</td><td>{basis}</td><td>{}</td></tr>",
            color(a.account),
            esc(&name(a)),
            a.seconds,
            gpulse_diagnose::pct(a.share),
            esc(&a.evidence)
        );
    }
    s + "</table></section>"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_spans_the_wall_time_and_names_are_escaped() {
        let account = |account, label: &str, seconds| gpulse_diagnose::Account {
            account,
            label: label.into(),
            seconds,
            share: seconds / 10.0,
            basis: Basis::Measured,
            evidence: "marks".into(),
            finding: None,
            finding_gpu: None,
        };
        let l = Ledger {
            wall_s: 10.0,
            accounts: vec![account(K::Phase, "<eval>", 6.0), account(K::GpuWork, "kernels", 4.0)],
        };
        let html = section(&l);
        assert!(html.contains("phase '&lt;eval&gt;'") && !html.contains("<eval>"), "{html}");
        let widths: f64 = html.split("width=\"").skip(2).filter_map(|w| w.split('"').next()?.parse::<f64>().ok()).sum();
        assert!((widths - 900.0).abs() < 0.1, "the accounts fill the bar: {widths}");
        assert!(section(&Ledger::default()).is_empty());
    }
}
