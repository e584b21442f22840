//! Text and JSON renderings of a diagnosis: the loop's pace, and each finding with its evidence,
//! advice and limits.

use std::fmt::Write as _;

use gpulse_diagnose::Severity;

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
            gpulse_diagnose::AccountKind::Phase => format!("phase '{}'", a.label),
            _ => a.label.clone(),
        };
        let basis = match a.basis {
            gpulse_diagnose::Basis::Measured => "measured",
            gpulse_diagnose::Basis::Inferred => "inferred",
        };
        let _ = writeln!(s, "  {:>8.1} s {:>5}  {label}  ({basis})", a.seconds, gpulse_diagnose::pct(a.share));
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
        let role = match (p.role, p.rank) {
            (gpulse_model::ProcessRole::Worker, _) => "worker process".to_owned(),
            (_, Some(r)) => format!("rank {} main thread", r.rank),
            (_, None) => "main thread".to_owned(),
        };
        // A slow first stretch (a start-up's imports, each new code object read once) is said
        // with the rate after it, rather than one mean rate that was never the sampler's.
        let rates = match p.slow_start.filter(|w| w.seconds < p.span_s) {
            Some(w) => {
                let after_hz = (p.samples as f64 - w.rate_hz * w.seconds).max(0.0) / (p.span_s - w.seconds);
                format!(": the first {:.0} s at {:.0} Hz, then {after_hz:.0} Hz", w.seconds, w.rate_hz)
            }
            None => format!(" at {:.0} Hz", p.rate_hz),
        };
        let _ = writeln!(s, "{role} of PID {} ({} samples over {:.1} s{rates}):", p.pid, p.samples, p.span_s);
        for st in p.states.iter().filter(|st| st.share >= 0.005) {
            let site = st.sites.first().map_or(String::new(), |x| match &x.doing {
                Some(d) => format!("{} ({d})", x.site),
                None => x.site.clone(),
            });
            let words = gpulse_diagnose::main_thread::ThreadState::words(st.state);
            let _ = writeln!(s, "  {:>8.1} s {:>4.0}%  {words:<36} {site}", st.seconds, 100.0 * st.share);
        }
        if let Some(idle) = &p.while_gpu_idle {
            let _ = writeln!(s, "  while its GPU {} waited ({:.1} s idle):", idle.gpu, idle.idle_s);
            for st in idle.states.iter().filter(|st| st.share >= 0.005) {
                let site = st.sites.first().map_or(String::new(), |x| match &x.doing {
                    Some(d) => format!("{} ({d})", x.site),
                    None => x.site.clone(),
                });
                let words = gpulse_diagnose::main_thread::ThreadState::words(st.state);
                let _ = writeln!(s, "  {:>8.1} s {:>4.0}%  {words:<36} {site}", st.seconds, 100.0 * st.share);
            }
        }
        s.push('\n');
    }
    s
}

/// A distributed job's ranks, one row each: steps, data wait, time in collectives, and what its
/// main thread did most besides; empty for a job of one process.
pub fn ranks_text(ranks: &[gpulse_diagnose::ranks::RankRow]) -> String {
    if ranks.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "ranks ({} of a world of {}):
",
        ranks.len(),
        ranks[0].world_size
    );
    let _ = writeln!(
        s,
        "  {:>4} {:>8} {:>4} {:>8} {:>9} {:>10} {:>10}  busiest",
        "rank", "pid", "gpu", "steps/s", "step (s)", "data wait", "collective"
    );
    let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or_else(|| "-".to_owned(), f);
    for r in ranks {
        let busiest = match (r.busiest, &r.busiest_site) {
            (Some(b), Some(site)) => format!("{:.0}% {} at {site}", 100.0 * r.busiest_share, b.words()),
            (Some(b), None) => format!("{:.0}% {}", 100.0 * r.busiest_share, b.words()),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "  {:>4} {:>8} {:>4} {:>8} {:>9} {:>10} {:>9.0}%  {busiest}",
            r.rank,
            r.pid,
            r.gpu.map_or_else(|| "-".to_owned(), |g| g.to_string()),
            opt(r.steps_per_s, &|v| format!("{v:.2}")),
            opt(r.step_s, &|v| format!("{v:.3}")),
            opt(r.data_wait_share, &|v| format!("{:.0}%", 100.0 * v)),
            100.0 * r.peer_wait_share,
        );
    }
    s + "\n"
}

/// Findings for a terminal: the primary cause in one line (the analysis's summary), then a
/// headline each with evidence, advice and limits.
pub fn render_text(d: &gpulse_diagnose::Diagnosis) -> String {
    let findings = &d.findings;
    let mut s = String::new();
    if let Some(line) = &d.summary {
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
        let evidence = evidence_words(&with_cost(f));
        if !evidence.is_empty() {
            let _ = writeln!(s, "         evidence: {evidence}");
        }
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

/// A finding's evidence with its cost's parts, for a reader: the shares of the wall time and of
/// the loop, and its rule's own estimate where that differs.
fn with_cost(f: &gpulse_diagnose::Finding) -> serde_json::Map<String, serde_json::Value> {
    let mut e = f.all_evidence();
    if let Some(s) = f.cost.as_ref().and_then(|c| c.seconds).filter(|_| !e.contains_key("seconds")) {
        e.insert("seconds".to_owned(), ((s * 10.0).round() / 10.0).into());
    }
    if let Some(c) = &f.cost {
        let mut put = |k: &str, v: Option<f64>| {
            if let Some(v) = v {
                e.insert(k.to_owned(), gpulse_diagnose::pct(v).into());
            }
        };
        put("wall_share", c.wall_share);
        let shown = |v: Option<f64>| v.map(gpulse_diagnose::pct);
        put("loop_share", c.loop_share.filter(|l| shown(Some(*l)) != shown(c.wall_share)));
        put(
            "own_share",
            c.own_share.filter(|o| shown(Some(*o)) != shown(c.loop_share) && shown(Some(*o)) != shown(c.wall_share)),
        );
    }
    e
}

/// A finding's evidence as a reader takes it in: short `name value` pairs in words, with units
/// (`SM active mean 88.4%`, `window 8.0–26.5 s`). What only a program reads stays in the JSON:
/// the basis of a share (`*_basis`), and the long texts a finding carries whole (a message, a
/// command line) are cut to their start.
pub fn evidence_words(evidence: &serde_json::Map<String, serde_json::Value>) -> String {
    evidence
        .iter()
        .filter(|(k, _)| !k.ends_with("_basis"))
        .filter_map(|(k, v)| {
            let (name, unit) = name_and_unit(k);
            let value = value_words(v, unit)?;
            // Held together by no-break spaces, which [`wrap`] never breaks at: a pair (and the
            // dot after it) stays on one line.
            Some(format!("{name} {value}").replace(' ', NBSP))
        })
        .collect::<Vec<_>>()
        .join(&format!("{NBSP}· "))
}

/// Joins what [`wrap`] keeps on one line; it is a space again in what `wrap` returns.
const NBSP: &str = "\u{a0}";

/// A key's words and its unit: `sm_active_mean_pct` is "SM active mean" in percent.
fn name_and_unit(key: &str) -> (String, Unit) {
    let units = [
        ("_gib_per_min", Unit::Suffix(" GiB/min")),
        ("_gb_per_s", Unit::Suffix(" GB/s")),
        ("_per_s", Unit::Suffix("/s")),
        ("_share_pct", Unit::Suffix("%")),
        ("_pct", Unit::Suffix("%")),
        ("_share", Unit::Share),
        ("_ms", Unit::Suffix(" ms")),
        ("_gib", Unit::Suffix(" GiB")),
        ("_mib", Unit::Suffix(" MiB")),
        ("_w", Unit::Suffix(" W")),
        ("_hz", Unit::Suffix(" Hz")),
        ("_s", Unit::Suffix(" s")),
    ];
    let (stem, unit) = units
        .iter()
        .find_map(|(suffix, unit)| key.strip_suffix(suffix).filter(|s| !s.is_empty()).map(|s| (s, *unit)))
        .unwrap_or((key, Unit::None));
    // A share is named one: `loop_share` is the loop's share, not the loop.
    let stem = if key.ends_with("_share") || key.ends_with("_share_pct") { key.trim_end_matches("_pct") } else { stem };
    let unit = match key {
        "pauses" => Unit::Suffix(" s"),
        k if k.starts_with("speedup") => Unit::Suffix("×"),
        _ => unit,
    };
    let stem = stem.replace("util_gpu", "gpu_util");
    let words: Vec<String> = stem
        .split('_')
        .map(|w| match w {
            "gpu" | "cpu" | "sm" | "oom" | "cuda" | "gpm" | "dram" | "pid" | "cv" | "nvlink" | "hbm" => {
                w.to_uppercase()
            }
            "pcie" => "PCIe".to_owned(),
            "util" => "utilization".to_owned(),
            _ => w.to_owned(),
        })
        .collect();
    (words.join(" "), unit)
}

#[derive(Clone, Copy)]
enum Unit {
    None,
    /// Written after the number.
    Suffix(&'static str),
    /// A fraction, written as a percentage.
    Share,
}

/// A value in words; `None` for what says nothing in text (an empty list, a null).
fn value_words(v: &serde_json::Value, unit: Unit) -> Option<String> {
    use serde_json::Value;
    let number = |x: f64| {
        let x = if matches!(unit, Unit::Share) { 100.0 * x } else { x };
        let text = if x == x.trunc() && x.abs() < 1e15 { format!("{x:.0}") } else { format!("{x:.1}") };
        match unit {
            Unit::None => text,
            Unit::Suffix(u) => format!("{text}{u}"),
            Unit::Share => format!("{text}%"),
        }
    };
    // A span as `8.0–26.5 s`; a list of spans, the first three and how many more.
    let span = |v: &Value| -> Option<String> {
        let pair = v.as_array().filter(|a| a.len() == 2)?;
        let (a, b) = (pair[0].as_f64()?, pair[1].as_f64()?);
        let u = if let Unit::Suffix(u) = unit { u } else { "" };
        Some(format!("{a:.1}–{b:.1}{u}"))
    };
    match v {
        Value::Null => None,
        Value::Bool(b) => Some(if *b { "yes" } else { "no" }.to_owned()),
        Value::Number(n) => n.as_f64().map(number),
        Value::String(t) => Some(clip_words(t, 36)),
        Value::Array(items) if items.is_empty() => None,
        Value::Array(items) => {
            if let Some(one) = span(v) {
                return Some(one);
            }
            let shown: Vec<String> = items
                .iter()
                .take(3)
                .filter_map(|i| {
                    span(i).or_else(|| i.as_f64().map(number)).or_else(|| i.as_str().map(|t| clip_words(t, 24)))
                })
                .collect();
            // A list of objects (a split's parts) has no words here: the title says its largest.
            if shown.is_empty() {
                return None;
            }
            let more = items.len().saturating_sub(3);
            Some(if more > 0 { format!("{} and {more} more", shown.join(", ")) } else { shown.join(", ") })
        }
        // An object (an error message with its facts): its text, cut short.
        Value::Object(o) => o.get("text").and_then(Value::as_str).map(|t| clip_words(t, 36)),
    }
}

/// `text` on one line, quoted when it has spaces, cut to `max` characters with an ellipsis.
fn clip_words(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut = if flat.chars().count() > max {
        format!("{}…", flat.chars().take(max - 1).collect::<String>())
    } else {
        flat
    };
    if cut.contains(' ') { format!("\"{cut}\"") } else { cut }
}

/// `text` for a terminal: every control character but the line breaks written as an escape
/// (`\x1b`, `\t`), so a file name or a source line from the job's files cannot move the cursor
/// or recolour the screen.
pub fn printable(text: &str) -> String {
    gpulse_base::text::escape_control(text, true)
}

/// `text` with each line longer than `width` columns wrapped at spaces. A wrapped line goes on
/// under where its text starts: past its indent, a list's `- ` or `? `, a finding's severity
/// column and an `evidence: ` label. A word longer than the width (a path) stays whole.
pub fn wrap(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, newline) = line.strip_suffix('\n').map_or((line, ""), |b| (b, "\n"));
        if body.chars().count() <= width {
            out += line;
            continue;
        }
        let hang = hanging_indent(body);
        let body = code_held_together(body);
        let mut col = 0;
        let mut first = true;
        for word in body.split(' ') {
            let w = word.chars().count();
            if first {
                out += word;
                col = w;
                first = false;
            } else if col + 1 + w > width && col > hang {
                // The spaces before a wrap (a double space before a tag) end no line.
                while out.ends_with(' ') {
                    out.pop();
                }
                out.push('\n');
                out.extend(std::iter::repeat_n(' ', hang));
                out += word;
                col = hang + w;
            } else {
                out.push(' ');
                out += word;
                col += 1 + w;
            }
        }
        out += newline;
    }
    out.replace(NBSP, " ")
}

/// `line` with the spaces inside each `code span` made no-break ones, so that a command to type
/// stays on one line.
fn code_held_together(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
        }
        if c == ' ' && in_code { out += NBSP } else { out.push(c) }
    }
    // An unclosed backtick holds nothing together.
    if in_code { line.to_owned() } else { out }
}

/// Where the continuation of a wrapped `line` starts.
fn hanging_indent(line: &str) -> usize {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = &line[indent..];
    // A ledger's line (`  23.7 s   45%  waiting for data`): under its label.
    if rest.starts_with(|c: char| c.is_ascii_digit())
        && let Some(at) = rest.find("%  ").filter(|at| *at < 16)
    {
        return indent + rest[..at].chars().count() + 3;
    }
    let marker = ["- ", "? ", "evidence: "].iter().find(|m| rest.starts_with(**m)).map_or(0, |m| m.len());
    // A finding's headline: `CRITICAL`, `WARNING ` or `INFO    ` and a space.
    let severity = ["CRITICAL ", "WARNING  ", "INFO     "].iter().any(|t| rest.starts_with(*t));
    if severity { indent + 9 } else { indent + marker }
}

#[cfg(test)]
mod printable_tests {
    /// A site from a file named with an escape sequence prints as text, the lines kept.
    #[test]
    fn control_characters_from_the_job_print_as_escapes() {
        let s = super::printable("main thread at w/x\x1b[2J.py:3 f\r\tg\nnext line\n");
        assert_eq!(s, "main thread at w/x\\x1b[2J.py:3 f\\r\\tg\nnext line\n");
        assert_eq!(super::printable("plain\n"), "plain\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A slow first stretch is said with the rate after it; a steady one with its one rate.
    #[test]
    fn a_slow_start_is_said_with_the_rate_after_it() {
        use gpulse_diagnose::main_thread::{Profile, SlowStart};
        let p = |slow_start| Profile {
            pid: 725,
            role: gpulse_model::ProcessRole::Main,
            rank: None,
            samples: 674,
            rate_hz: 26.96,
            span_s: 25.0,
            slow_start,
            states: Vec::new(),
            while_gpu_idle: None,
            refused: None,
        };
        let slow = main_thread_text(&[p(Some(SlowStart { seconds: 14.0, rate_hz: 9.0 }))]);
        // 674 samples less 14 s at 9 Hz over the 11 s after: 50 Hz.
        assert!(
            slow.starts_with("main thread of PID 725 (674 samples over 25.0 s: the first 14 s at 9 Hz, then 50 Hz):"),
            "{slow}"
        );
        let steady = main_thread_text(&[p(None)]);
        assert!(steady.starts_with("main thread of PID 725 (674 samples over 25.0 s at 27 Hz):"), "{steady}");
    }

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

    #[test]
    fn evidence_reads_as_words_with_units_and_leaves_the_basis_to_json() {
        let evidence = serde_json::json!({
            "sm_active_mean_pct": 88.4,
            "loop_share": 0.684,
            "window_s": [8.0, 26.5],
            "pauses": [[13.0, 16.0], [20.5, 23.5]],
            "lost_share_basis": "pauses: the seconds the GPU stood idle in them over the active window",
            "message": {"cut": true, "gpu": 0, "text": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 200.00 GiB"},
            "pcie_gb_per_s": 7.05,
            "steps": 538,
        });
        assert_eq!(
            evidence_words(evidence.as_object().unwrap()).replace(NBSP, " "),
            "loop share 68.4% · message \"torch.OutOfMemoryError: CUDA out of…\" · pauses 13.0–16.0 s, \
             20.5–23.5 s · PCIe 7.0 GB/s · SM active mean 88.4% · steps 538 · window 8.0–26.5 s"
        );
    }

    #[test]
    fn long_lines_wrap_under_where_their_text_starts() {
        let text = "WARNING  the data loader keeps the GPU waiting most of the time  [input_bound]\n\
                    \x20        - raise num_workers to the cores the job has left\nshort\n";
        assert_eq!(
            wrap(text, 40),
            "WARNING  the data loader keeps the GPU\n         waiting most of the time\n         [input_bound]\n\
             \x20        - raise num_workers to the\n           cores the job has left\nshort\n"
        );
        assert_eq!(wrap("a/very/long/path/that/does/not/fit here", 10), "a/very/long/path/that/does/not/fit\nhere");
        // A command to type stays whole; a ledger's label goes on under itself.
        assert_eq!(
            wrap("         ? record with `gpulse record --pid PID` to see it", 40),
            "         ? record with\n           `gpulse record --pid PID` to\n           see it"
        );
        assert_eq!(
            wrap("      11.0 s   21%  start-up before the CUDA context (imports)  (measured)", 60),
            "      11.0 s   21%  start-up before the CUDA context\n                    (imports)  (measured)"
        );
        // Evidence breaks between its pairs, never inside one.
        let evidence = serde_json::json!({"data_wait_mean_ms": 307.3, "lost_share": 0.869, "steps_per_s": 2.83});
        let line = format!("         evidence: {}", evidence_words(evidence.as_object().unwrap()));
        assert_eq!(
            wrap(&line, 50),
            "         evidence: data wait mean 307.3 ms ·\n                   lost share 86.9% · steps 2.8/s"
        );
    }
}
