//! A distributed job's ranks in the report: one row each, and their main threads' states on one
//! time axis, so the rank the others wait for shows beside their waits.

use std::fmt::Write as _;

use gpulse_diagnose::Run;
use gpulse_diagnose::main_thread::{Classifier, ThreadState};
use gpulse_diagnose::ranks::RankRow;

use super::esc;
use super::icicle::color;

/// Width of the time strips, in px.
const WIDTH: f64 = 900.0;
/// Columns each strip is cut into: each shows its most sampled state.
const BINS: usize = 300;
const ROW_H: f64 = 18.0;
const LABEL_W: f64 = 60.0;

/// The section, or nothing for a job of one process.
pub fn section(run: &Run, rows: &[RankRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut s = String::from("<section class=\"ranks\"><h2>Ranks</h2>");
    s += "<table><tr><th>rank</th><th>PID</th><th>GPU</th><th>steps/s</th><th>step</th><th>data wait</th><th>in collectives</th><th>busiest besides</th></tr>";
    let opt = |v: Option<String>| v.unwrap_or_else(|| "–".to_owned());
    for r in rows {
        let busiest = match (r.busiest, &r.busiest_site) {
            (Some(b), Some(site)) => format!("{:.0}% {} at {site}", 100.0 * r.busiest_share, b.words()),
            (Some(b), None) => format!("{:.0}% {}", 100.0 * r.busiest_share, b.words()),
            _ => String::new(),
        };
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.0}%</td><td>{}</td></tr>",
            r.rank,
            r.pid,
            opt(r.gpu.map(|g| g.to_string())),
            opt(r.steps_per_s.map(|v| format!("{v:.2}"))),
            opt(r.step_s.map(|v| format!("{:.0} ms", 1000.0 * v))),
            opt(r.data_wait_share.map(|v| format!("{:.0}%", 100.0 * v))),
            100.0 * r.peer_wait_share,
            esc(&busiest),
        );
    }
    s += "</table>";
    s += &strips(run, rows);
    s + "</section>"
}

/// Each rank's main thread over the run, a column per bin coloured by its most sampled state.
fn strips(run: &Run, rows: &[RankRow]) -> String {
    let st = &run.stacks;
    let t = |us: i64| us.saturating_sub(run.start_us) as f64 / 1e6;
    let mine = |pid: u32| st.samples.iter().filter(move |x| x.pid == pid);
    let (lo, hi) = rows
        .iter()
        .flat_map(|r| mine(r.pid).map(|x| t(x.t_us)))
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if hi <= lo {
        return String::new();
    }
    let bin_s = (hi - lo) / BINS as f64;
    let height = ROW_H * rows.len() as f64 + 16.0;
    let mut s = format!(
        "<svg class=\"rank-strips\" width=\"{w:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {w:.0} {height:.0}\" role=\"img\" aria-label=\"each rank's main thread over time\">",
        w = LABEL_W + WIDTH
    );
    let mut classifier = Classifier::default();
    for (i, r) in rows.iter().enumerate() {
        let y = ROW_H * i as f64;
        let _ = write!(s, "<text x=\"0\" y=\"{:.1}\" font-size=\"11\">rank {}</text>", y + 13.0, r.rank);
        let mut counts = vec![[0u32; ThreadState::ALL.len()]; BINS];
        for x in mine(r.pid) {
            let b = (((t(x.t_us) - lo) / bin_s) as usize).min(BINS - 1);
            let state = classifier.classify(st, x).state;
            counts[b][ThreadState::ALL.iter().position(|s| *s == state).unwrap_or(0)] += 1;
        }
        for (b, c) in counts.iter().enumerate() {
            let Some((k, _)) = c.iter().enumerate().filter(|(_, n)| **n > 0).max_by_key(|(k, n)| (**n, usize::MAX - k))
            else {
                continue;
            };
            let state = ThreadState::ALL[k];
            let x = LABEL_W + WIDTH * b as f64 / BINS as f64;
            let _ = write!(
                s,
                "<rect x=\"{x:.2}\" y=\"{y:.1}\" width=\"{:.2}\" height=\"{:.1}\" fill=\"{}\"><title>rank {} at {:.1} s: {}</title></rect>",
                WIDTH / BINS as f64 + 0.05,
                ROW_H - 3.0,
                color(state).0,
                r.rank,
                lo + bin_s * b as f64,
                state.words()
            );
        }
    }
    let _ = write!(
        s,
        "<text x=\"{LABEL_W}\" y=\"{:.1}\" font-size=\"10\">{lo:.1} s</text><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"end\">{hi:.1} s</text>",
        height - 2.0,
        LABEL_W + WIDTH,
        height - 2.0
    );
    s + "</svg>"
}
