//! The HTML around the charts: the style, the summary, the findings, the events and processes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use gpulse_diagnose::{Finding, Run, Severity};
use serde_json::Value;

use super::esc;

/// Long texts (an OOM message with its URL, a command line) wrap anywhere rather than overflow.
pub const HEAD: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>gpulse report</title><style>\
     body{font:14px system-ui,sans-serif;margin:2em;color:#222;max-width:940px}h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.5em}\
     .chart{display:block;margin:.8em 0}li,dd,td:last-child{overflow-wrap:anywhere}td:not(:last-child){white-space:nowrap}\
     .summary{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1em;margin:0 0 1em}.summary dt{font-weight:600}.summary dd{margin:0}\
     .critical{color:#b00020}.warning{color:#b25e00}.info{color:#1565c0}table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.2em .6em;text-align:left;vertical-align:top}\
     </style></head><body>";

pub fn summary(facts: &[(&str, String)]) -> String {
    let mut s = String::from("<dl class=\"summary\">");
    for (label, text) in facts {
        let _ = write!(s, "<dt>{}</dt><dd>{}</dd>", esc(label), esc(text));
    }
    s + "</dl>"
}

pub fn findings(findings: &[Finding]) -> String {
    let mut s = String::from("<h2>Findings</h2><ul class=\"findings\">");
    if findings.is_empty() {
        s += "<li>No findings.</li>";
    }
    for f in findings {
        let class = match f.severity {
            Severity::Critical => "critical",
            Severity::Warning => "warning",
            Severity::Info => "info",
        };
        let _ = write!(s, "<li class=\"{class}\" id=\"{}\"><b>{}</b> <code>{}</code><ul>", f.id, esc(&f.title), f.id);
        for adv in &f.advice {
            let _ = write!(s, "<li>{}</li>", esc(adv));
        }
        for l in &f.limits {
            let _ = write!(s, "<li><i>{}</i></li>", esc(l));
        }
        s += "</ul></li>";
    }
    s + "</ul>"
}

/// An event's text as kept, saying so when the recording cut it.
pub(super) fn event_text(payload: &Value) -> String {
    let Some((text, cut)) = gpulse_model::run::event_text(payload) else { return payload.to_string() };
    if cut { format!("{text} … (cut when recorded)") } else { text }
}

/// What the job printed that gpulse recognised, and other events worth a line.
pub fn events(run: &Run) -> String {
    let shown: Vec<&(gpulse_model::EventKind, f64, Value)> = run
        .events
        .iter()
        .filter(|e| !matches!(e.0, gpulse_model::EventKind::Stop | gpulse_model::EventKind::Finding))
        .collect();
    if shown.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "<section><h2>Events</h2><table class=\"events\"><tr><th>time</th><th>kind</th><th>detail</th></tr>",
    );
    for (kind, t, payload) in shown {
        let _ = write!(
            s,
            "<tr><td>{t:.1} s</td><td>{}</td><td>{}</td></tr>",
            esc(kind.as_str()),
            esc(&event_text(payload))
        );
    }
    s + "</table></section>"
}

/// Every process seen on a GPU, with the most memory it held.
pub fn processes(run: &Run) -> String {
    // (gpu, pid) → (peak bytes, `None` while never read; name, command line, class)
    type Row = (Option<f64>, Option<String>, Option<String>, String);
    let mut procs: BTreeMap<(u32, u32), Row> = BTreeMap::new();
    for g in &run.gpus {
        let mut last: Option<&std::sync::Arc<Vec<gpulse_model::ProcessSample>>> = None;
        for listing in &g.processes {
            // Listings are shared while unchanged: each is read once.
            if last.is_some_and(|l| std::sync::Arc::ptr_eq(l, listing)) {
                continue;
            }
            last = Some(listing);
            for p in listing.iter() {
                let e = procs.entry((g.gpu, p.pid)).or_insert((
                    None,
                    p.name.clone(),
                    p.cmdline.clone(),
                    p.class.map_or(String::new(), |c| format!("{c:?}").to_lowercase()),
                ));
                if let Some(b) = p.used_memory_bytes {
                    e.0 = Some(e.0.map_or(b as f64, |m| m.max(b as f64)));
                }
            }
        }
    }
    if procs.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "<section><h2>Processes</h2><table class=\"processes\"><tr><th>GPU</th><th>PID</th><th>peak memory</th><th>class</th><th>command</th></tr>",
    );
    for ((gpu, pid), (mem, name, cmd, class)) in &procs {
        let cmd = cmd.as_deref().or(name.as_deref()).unwrap_or("");
        let mem = mem.map_or_else(|| "unknown".to_owned(), |m| format!("{:.1} GiB", gpulse_model::to_gib(m)));
        let _ = write!(
            s,
            "<tr><td>{gpu}</td><td>{pid}</td><td>{mem}</td><td>{}</td><td>{}</td></tr>",
            esc(class),
            esc(cmd)
        );
    }
    s + "</table></section>"
}

#[cfg(test)]
mod tests {
    use gpulse_model::run::OLD_EVENT_TEXT_MAX_CHARS as OLD_MAX_TEXT;

    use super::*;

    #[test]
    fn a_cut_text_says_so_and_a_whole_one_does_not() {
        let old = "x".repeat(OLD_MAX_TEXT);
        assert!(event_text(&serde_json::json!({ "text": old })).ends_with("… (cut when recorded)"));
        assert_eq!(event_text(&serde_json::json!({"text": "CUDA out of memory."})), "CUDA out of memory.");
        assert!(event_text(&serde_json::json!({"text": "abc", "cut": true})).ends_with("(cut when recorded)"));
        let whole = "y".repeat(OLD_MAX_TEXT);
        assert_eq!(event_text(&serde_json::json!({"text": whole, "cut": false})), whole);
    }
}
