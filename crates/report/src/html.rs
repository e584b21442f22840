//! The HTML report: one self-contained file with timelines, findings and processes.
//!
//! Charts are SVG drawn here, so the file needs no script and no network.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use gpulse_diagnose::{Finding, GpuSeries, Run, Severity};

use crate::Analysis;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

const W: f64 = 900.0;
const H: f64 = 120.0;

/// One timeline: lines over the run, shaded windows of findings, and a labelled y range.
fn chart(
    title: &str,
    t: &[f64],
    lines: &[(&str, &str, Vec<Option<f64>>)],
    y_max: Option<f64>,
    windows: &[(f64, f64, &str)],
) -> String {
    let t_end = t.last().copied().unwrap_or(1.0).max(1e-9);
    let top =
        y_max.unwrap_or_else(|| lines.iter().flat_map(|l| l.2.iter().flatten()).copied().fold(0.0, f64::max)).max(1e-9);
    let x = |v: f64| 40.0 + v / t_end * (W - 50.0);
    let y = |v: f64| 10.0 + (1.0 - v / top) * (H - 30.0);
    let mut s = format!(
        r#"<figure><figcaption>{}</figcaption><svg class="chart" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img">"#,
        esc(title)
    );
    for (a, b, id) in windows {
        let _ = write!(
            s,
            r#"<rect class="finding" x="{:.1}" y="10" width="{:.1}" height="{:.1}"><title>{}</title></rect>"#,
            x(*a),
            (x(*b) - x(*a)).max(1.0),
            H - 30.0,
            esc(id)
        );
    }
    let _ = write!(
        s,
        r#"<line class="axis" x1="40" y1="{0}" x2="{1}" y2="{0}"/><text x="2" y="16">{2:.0}</text><text x="2" y="{0}">0</text>"#,
        H - 20.0,
        W - 10.0,
        top
    );
    let _ = write!(
        s,
        r#"<text x="40" y="{}">0 s</text><text x="{}" y="{}" text-anchor="end">{:.0} s</text>"#,
        H - 4.0,
        W - 10.0,
        H - 4.0,
        t_end
    );
    for (name, color, v) in lines {
        let mut pts = String::new();
        for (ti, vi) in t.iter().zip(v) {
            if let Some(vi) = vi {
                let _ = write!(pts, "{:.1},{:.1} ", x(*ti), y(*vi));
            }
        }
        let _ = write!(
            s,
            r#"<polyline fill="none" stroke="{color}" stroke-width="1.2" points="{pts}"><title>{}</title></polyline>"#,
            esc(name)
        );
    }
    s += "</svg>";
    let legend: Vec<String> =
        lines.iter().map(|l| format!(r#"<span style="color:{}">■ {}</span>"#, l.1, esc(l.0))).collect();
    let _ = write!(s, "<div class=\"legend\">{}</div></figure>", legend.join(" "));
    s
}

fn gpu_section(g: &GpuSeries, findings: &[Finding]) -> String {
    // Only this GPU's findings shade its charts.
    let mine: Vec<&Finding> = findings.iter().filter(|f| f.gpu == Some(g.gpu)).collect();
    let windows: Vec<(f64, f64, &str)> = mine
        .iter()
        .filter_map(|f| f.window_s.map(|w| (w[0], w[1], f.id)))
        .chain(mine.iter().flat_map(|f| f.pauses_s.iter().map(|p| (p[0], p[1], "pause"))))
        .collect();
    let gib = |v: &[Option<f64>]| v.iter().map(|x| x.map(gpulse_model::to_gib)).collect::<Vec<_>>();
    let mut s = format!("<section><h2>GPU {}</h2>", g.gpu);
    s += &chart(
        "Utilization, %",
        &g.t_s,
        &[("GPU-Util", "#1f77b4", g.util_pct.clone()), ("SM active (GPM)", "#d62728", g.sm_pct.clone())],
        Some(100.0),
        &windows,
    );
    s += &chart(
        "Memory used, GiB",
        &g.t_s,
        &[("memory used", "#2ca02c", gib(&g.mem_used_bytes))],
        g.mem_total_bytes.map(gpulse_model::to_gib),
        &windows,
    );
    s += &chart("Power, W", &g.t_s, &[("power", "#ff7f0e", g.power_w.clone())], None, &windows);
    if g.temp_c.iter().any(Option::is_some) {
        s += &chart("Temperature, °C", &g.t_s, &[("GPU", "#17becf", g.temp_c.clone())], None, &windows);
    }
    s += &chart(
        "SM clock, MHz",
        &g.t_s,
        &[("SM clock", "#9467bd", g.sm_clock_mhz.clone())],
        g.max_sm_clock_mhz,
        &windows,
    );
    s + "</section>"
}

/// Step time and the wait for data, from the loop's marks.
fn steps_section(steps: &gpulse_diagnose::Steps) -> String {
    let t: Vec<f64> = steps.step_s.iter().map(|x| x.0).collect();
    let ms = |v: &[(f64, f64)]| v.iter().map(|x| Some(1000.0 * x.1)).collect::<Vec<_>>();
    let mut lines = vec![("step time", "#1f77b4", ms(&steps.step_s))];
    if !steps.data_wait_s.is_empty() {
        lines.push(("waiting for data", "#d62728", ms(&steps.data_wait_s)));
    }
    let mut s = format!(
        "<section><h2>Training loop</h2><p>{} steps at {:.2} steps/s (PID {}{})",
        steps.count,
        steps.per_s(),
        steps.pid,
        if steps.ranks > 1 { format!(", one of {} ranks", steps.ranks) } else { String::new() }
    );
    if let Some(w) = steps.data_wait_share() {
        let _ = write!(s, "; waiting for data {:.0}% of the time", 100.0 * w);
    }
    s += "</p>";
    s += &chart("Step time and data wait, ms", &t, &lines, None, &[]);
    s + "</section>"
}

/// What the job printed that gpulse recognised, and other events worth a line.
fn events_section(run: &Run) -> String {
    let shown: Vec<&(String, f64, serde_json::Value)> =
        run.events.iter().filter(|e| !matches!(e.0.as_str(), "stop" | "finding")).collect();
    if shown.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "<section><h2>Events</h2><table class=\"events\"><tr><th>time</th><th>kind</th><th>detail</th></tr>",
    );
    for (kind, t, payload) in shown {
        let detail = payload.get("text").and_then(|v| v.as_str()).map_or_else(|| payload.to_string(), str::to_owned);
        let _ = write!(s, "<tr><td>{t:.1} s</td><td>{}</td><td>{}</td></tr>", esc(kind), esc(&detail));
    }
    s + "</table></section>"
}

/// The whole report of `a`, read from `input`.
pub fn render(input: &str, a: &Analysis) -> String {
    let run: &Run = &a.run;
    let mut s = String::from(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>gpulse report</title><style>\
         body{font:14px system-ui,sans-serif;margin:2em;color:#222}h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.5em}\
         .chart{background:#fafafa;border:1px solid #ddd}.axis{stroke:#999}.chart text{font-size:10px;fill:#666}\
         .finding{fill:#f5c518;opacity:.25}.legend{font-size:12px;margin:.2em 0 1em}figure{margin:0}figcaption{font-weight:600;margin:.6em 0 .2em}\
         .critical{color:#b00020}.warning{color:#b25e00}.info{color:#1565c0}table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.2em .6em;text-align:left}\
         </style></head><body>",
    );
    let _ = write!(
        s,
        "<h1>gpulse report</h1><p>{} · {} GPU{} · {} samples</p>",
        esc(input),
        a.gpus,
        if a.gpus == 1 { "" } else { "s" },
        a.samples
    );
    s += "<h2>Findings</h2><ul class=\"findings\">";
    if a.findings.is_empty() {
        s += "<li>No findings.</li>";
    }
    for f in &a.findings {
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
    s += "</ul>";
    if let Some(steps) = &run.steps {
        s += &steps_section(steps);
    }
    s += &events_section(run);
    for g in &run.gpus {
        s += &gpu_section(g, &a.findings);
    }
    if !run.host_cpu.is_empty() || !run.tree_cpu.is_empty() {
        s += "<section><h2>Host</h2>";
        let t: Vec<f64> = run.host_cpu.iter().map(|x| x.0).collect();
        s += &chart(
            "Host CPU busy, % of the machine",
            &t,
            &[("machine", "#8c564b", run.host_cpu.iter().map(|x| Some(x.1)).collect())],
            Some(100.0),
            &[],
        );
        if !run.tree_cpu.is_empty() {
            let t: Vec<f64> = run.tree_cpu.iter().map(|x| x.0).collect();
            s += &chart(
                "Training tree CPU, % of one core",
                &t,
                &[("tree", "#e377c2", run.tree_cpu.iter().map(|x| Some(x.1)).collect())],
                None,
                &[],
            );
        }
        s += "</section>";
    }
    // Every process seen on a GPU, with the most memory it held.
    // (gpu, pid) → (peak bytes, `None` while never read; name, command line, class)
    type Row = (Option<f64>, Option<String>, Option<String>, String);
    let mut procs: BTreeMap<(u32, u32), Row> = BTreeMap::new();
    for g in &run.gpus {
        for listing in &g.processes {
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
    if !procs.is_empty() {
        s += "<section><h2>Processes</h2><table class=\"processes\"><tr><th>GPU</th><th>PID</th><th>peak memory</th><th>class</th><th>command</th></tr>";
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
        s += "</table></section>";
    }
    s + "</body></html>\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_shades_only_its_own_gpus_charts() {
        let series = |gpu: u32| GpuSeries { gpu, t_s: vec![0.0, 10.0, 20.0], ..Default::default() };
        let stall = Finding::new("periodic_stall", Severity::Warning, String::new())
            .on_gpu(1)
            .pauses(vec![[2.0, 4.0], [12.0, 14.0]]);
        let shaded =
            |gpu| gpu_section(&series(gpu), std::slice::from_ref(&stall)).matches(r#"class="finding""#).count();
        assert_eq!(shaded(0), 0, "GPU 0 did not stall");
        assert!(shaded(1) >= 2, "both pauses on GPU 1's charts");
    }

    #[test]
    fn process_memory_never_read_is_unknown_not_zero() {
        let listing = |pid: u32, used: Option<u64>| gpulse_model::ProcessSample {
            pid,
            used_memory_bytes: used,
            name: Some("python3".into()),
            ..Default::default()
        };
        let g = GpuSeries {
            t_s: vec![0.0, 1.0],
            util_pct: vec![Some(50.0); 2],
            sm_pct: vec![None; 2],
            mem_used_bytes: vec![None; 2],
            power_w: vec![None; 2],
            temp_c: vec![None; 2],
            sm_clock_mhz: vec![None; 2],
            reasons: vec![None; 2],
            processes: (0..2).map(|_| std::sync::Arc::new(vec![listing(7, None), listing(8, Some(2 << 30))])).collect(),
            active: (0, 2),
            ..Default::default()
        };
        let run = Run { gpus: vec![g], has_processes: true, ..Default::default() };
        let html = render("x.db", &Analysis { run, findings: Vec::new(), gpus: 1, samples: 2 });
        assert!(html.contains("<td>7</td><td>unknown</td>"), "never read: unknown");
        assert!(html.contains("<td>8</td><td>2.0 GiB</td>"), "read: its peak");
    }
}
