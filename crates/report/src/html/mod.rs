//! The HTML report: one self-contained file with a summary, timelines, findings and processes.
//!
//! Charts are SVG drawn here, so the file needs no script and no network; the PNG is drawn from
//! the same SVG ([`composite_svg`]).

mod axis;
mod chart;
mod downsample;
mod icicle;
mod ledger;
mod overlay;
mod page;
mod ranks;
mod summary;

use std::borrow::Cow;
use std::fmt::Write as _;

use gpulse_diagnose::{GpuSeries, Run};

use crate::Analysis;
use axis::TimeAxis;
use chart::{Chart, Scope, Series, YRange};
use overlay::Overlay;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Memory drawn up to the total once the peak reaches this share of it.
const NEAR_TOTAL: f64 = 0.8;

/// A heading and the SVG of each chart under it.
struct Section {
    heading: String,
    /// Lines under the heading.
    notes: Vec<String>,
    charts: Vec<String>,
}

/// The report's parts, drawn once for the page and the PNG.
struct Layout {
    facts: Vec<(&'static str, String)>,
    /// The main thread's icicle, after the summary and the ledger.
    main_thread: Option<Section>,
    sections: Vec<Section>,
}

/// The one time axis: from the start (or the earliest mark before it) to the last thing shown.
fn time_axis(run: &Run, overlay: &Overlay) -> TimeAxis {
    let mut lo = 0.0f64;
    let mut hi = overlay.end_s();
    let mut see = |t: f64| {
        lo = lo.min(t);
        hi = hi.max(t);
    };
    for g in &run.gpus {
        g.t_s.first().into_iter().chain(g.t_s.last()).for_each(|t| see(*t));
    }
    for v in [&run.host_cpu, &run.tree_cpu, &run.host_mem_used_pct] {
        v.first().into_iter().chain(v.last()).for_each(|x| see(x.0));
    }
    if let Some(steps) = &run.steps {
        steps.step_s.first().into_iter().chain(steps.step_s.last()).for_each(|x| see(x.0));
    }
    if let Some((_, t, _)) = run.events.iter().rfind(|e| e.0 == gpulse_model::EventKind::Stop) {
        see(*t);
    }
    // A single sample still gets an axis a second long.
    TimeAxis::new(lo, if hi.is_finite() { hi.max(lo + 1.0) } else { lo + 1.0 })
}

fn gpu_charts(g: &GpuSeries) -> Vec<Chart<'_>> {
    let scope = Scope::Gpu(g.gpu);
    let line = |name, color, v: &[Option<f64>]| Series {
        name,
        color,
        t_s: &g.t_s,
        v: Cow::Owned(v.to_vec()),
        held_from_s: None,
    };
    let mut out = vec![Chart {
        title: "Utilization, %".into(),
        scope,
        series: vec![line("GPU-Util", "#1f77b4", &g.util_pct), line("SM active (GPM)", "#d62728", &g.sm_pct)],
        y: YRange::Fixed(0.0, 100.0),
        reference: None,
    }];
    let gib: Vec<Option<f64>> = g.mem_used_bytes.iter().map(|x| x.map(gpulse_model::to_gib)).collect();
    let peak = gib.iter().flatten().copied().fold(f64::NEG_INFINITY, f64::max);
    let total = g.mem_total_bytes.map(gpulse_model::to_gib);
    let (title, y, reference) = match total {
        Some(t) if peak >= NEAR_TOTAL * t => {
            ("Memory used, GiB".to_owned(), YRange::Fixed(0.0, t), Some((format!("total {t:.1} GiB"), t)))
        }
        Some(t) => (format!("Memory used, GiB (of {t:.1} GiB total)"), YRange::FromZero, None),
        None => ("Memory used, GiB".to_owned(), YRange::FromZero, None),
    };
    out.push(Chart {
        title,
        scope,
        series: vec![Series { name: "used", color: "#2ca02c", t_s: &g.t_s, v: gib.into(), held_from_s: None }],
        y,
        reference,
    });
    out.push(Chart {
        title: "Power, W".into(),
        scope,
        series: vec![line("power", "#ff7f0e", &g.power_w)],
        y: YRange::FromZero,
        reference: None,
    });
    out.push(Chart {
        title: "Temperature, °C".into(),
        scope,
        series: vec![line("GPU", "#17becf", &g.temp_c)],
        y: YRange::Data,
        reference: None,
    });
    out.push(Chart {
        title: "SM clock, MHz".into(),
        scope,
        series: vec![line("SM clock", "#9467bd", &g.sm_clock_mhz)],
        y: g.max_sm_clock_mhz.map_or(YRange::FromZero, |m| YRange::Fixed(0.0, m)),
        reference: None,
    });
    // NVLink beside PCIe, for a GPU with links up whose NVLink bytes GPM read: collectives
    // belong on the first. A lone GPU's idle links would only draw zeros.
    let links = g.nvlink_active_links.filter(|n| *n > 0);
    if let Some(n) = links.filter(|_| g.nvlink_bytes_per_s.iter().any(Option::is_some)) {
        // GiB/s, the unit NVML gives them in and every other view shows.
        let gb = |v: &[Option<f64>]| v.iter().map(|x| x.map(gpulse_model::to_gib)).collect::<Vec<_>>();
        out.push(Chart {
            title: format!("NVLink and PCIe traffic, GiB/s ({n} NVLink links up)"),
            scope,
            series: vec![
                line("NVLink tx+rx (GPM)", "#8c564b", &gb(&g.nvlink_bytes_per_s)),
                line("PCIe tx", "#e377c2", &gb(&g.pcie_tx_bytes_per_s)),
                line("PCIe rx", "#7f7f7f", &gb(&g.pcie_rx_bytes_per_s)),
            ],
            y: YRange::FromZero,
            reference: None,
        });
    }
    out
}

fn layout(input: &str, a: &Analysis) -> Layout {
    let run = &a.run;
    let overlay = Overlay::new(a);
    let time = time_axis(run, &overlay);
    let draw = |c: &Chart| c.svg(&time, &overlay.bands(c.scope), &overlay.marks(c.scope));
    let mut sections = Vec::new();
    if let Some(steps) = &run.steps {
        let (t, ms): (Vec<f64>, Vec<Option<f64>>) = steps.step_s.iter().map(|x| (x.0, Some(1000.0 * x.1))).unzip();
        let (tw, wait): (Vec<f64>, Vec<Option<f64>>) =
            steps.data_wait_s.iter().map(|x| (x.0, Some(1000.0 * x.1))).unzip();
        let chart = Chart {
            title: "Step time and data wait, ms".into(),
            scope: Scope::Run,
            series: vec![
                // Each mark's value is the mean of the steps since the previous mark: flat over them.
                Series {
                    name: "step time",
                    color: "#1f77b4",
                    t_s: &t,
                    v: ms.into(),
                    held_from_s: Some(steps.window_s[0]),
                },
                Series {
                    name: "waiting for data",
                    color: "#d62728",
                    t_s: &tw,
                    v: wait.into(),
                    held_from_s: Some(steps.window_s[0]),
                },
            ],
            y: YRange::FromZero,
            reference: None,
        };
        let note = format!(
            "{} steps marked, {:.2} steps/s over the {} after the first mark (PID {}{})",
            steps.marked,
            steps.per_s(),
            steps.timed,
            steps.pid,
            if steps.ranks > 1 { format!(", one of {} ranks", steps.ranks) } else { String::new() }
        );
        sections.push(Section { heading: "Training loop".into(), notes: vec![note], charts: vec![draw(&chart)] });
    }
    for g in &run.gpus {
        let charts = gpu_charts(g).iter().filter(|c| c.has_data()).map(draw).collect();
        sections.push(Section { heading: format!("GPU {}", g.gpu), notes: Vec::new(), charts });
    }
    let pairs = |v: &[(f64, f64)]| -> (Vec<f64>, Vec<Option<f64>>) { v.iter().map(|x| (x.0, Some(x.1))).unzip() };
    let (tc, cpu) = pairs(&run.host_cpu);
    let (tm, mem) = pairs(&run.host_mem_used_pct);
    let (tt, tree) = pairs(&run.tree_cpu);
    let host = [
        Chart {
            title: "Host, % of the machine".into(),
            scope: Scope::Run,
            series: vec![
                Series { name: "CPU busy", color: "#8c564b", t_s: &tc, v: cpu.into(), held_from_s: None },
                Series { name: "memory used", color: "#7f7f7f", t_s: &tm, v: mem.into(), held_from_s: None },
            ],
            y: YRange::Fixed(0.0, 100.0),
            reference: None,
        },
        Chart {
            title: "Training tree CPU, % of one core".into(),
            scope: Scope::Run,
            series: vec![Series { name: "tree", color: "#e377c2", t_s: &tt, v: tree.into(), held_from_s: None }],
            y: YRange::FromZero,
            reference: None,
        },
    ];
    let charts: Vec<String> = host.iter().filter(|c| c.has_data()).map(draw).collect();
    if !charts.is_empty() {
        sections.push(Section { heading: "Host".into(), notes: Vec::new(), charts });
    }
    let main_thread = icicle::section(run, &a.diagnosis.stacks).map(|(notes, charts)| Section {
        heading: "Main thread".into(),
        notes,
        charts,
    });
    Layout { facts: summary::facts(input, a, time_span_s(run, &overlay)), main_thread, sections }
}

/// How long the run lasted: its first to its last sample or event.
fn time_span_s(run: &Run, overlay: &Overlay) -> f64 {
    let mut hi = overlay.end_s().max(0.0);
    for g in &run.gpus {
        hi = hi.max(g.t_s.last().copied().unwrap_or(0.0));
    }
    for v in [&run.host_cpu, &run.tree_cpu] {
        hi = hi.max(v.last().map_or(0.0, |x| x.0));
    }
    if let Some(steps) = &run.steps {
        hi = hi.max(steps.window_s[1]);
    }
    hi
}

/// The whole report of `a`, read from `input`.
pub fn render(input: &str, a: &Analysis) -> String {
    let l = layout(input, a);
    let mut s = String::from(page::HEAD);
    s += "<h1>gpulse report</h1>";
    s += &page::summary(&l.facts);
    s += &page::findings(&a.diagnosis.findings);
    s += &ledger::section(&a.diagnosis.ledger);
    s += &ranks::section(&a.run, &a.diagnosis.ranks);
    if let Some(sec) = &l.main_thread {
        s += &section_html(sec);
    }
    let mut sections = l.sections.iter().peekable();
    // The loop's chart first, then the events it lines up with, then each GPU and the host.
    if let Some(sec) = sections.next_if(|sec| sec.heading == "Training loop") {
        s += &section_html(sec);
    }
    s += &page::events(&a.run);
    for sec in sections {
        s += &section_html(sec);
    }
    s += &page::processes(&a.run);
    s + "</body></html>\n"
}

fn section_html(sec: &Section) -> String {
    let attr = sec.heading.strip_prefix("GPU ").map_or(String::new(), |g| format!(" data-gpu=\"{g}\""));
    let mut s = format!("<section{attr}><h2>{}</h2>", esc(&sec.heading));
    for note in &sec.notes {
        let _ = write!(s, "<p>{}</p>", esc(note));
    }
    sec.charts.iter().for_each(|c| s += c);
    s + "</section>"
}

/// Where a chart's plot lies in [`composite_svg`]'s picture: x, y, width, height.
pub type PlotArea = [f64; 4];

/// Margin around the picture, and the room a heading takes.
const MARGIN: f64 = 20.0;
const HEADING_H: f64 = 26.0;
const LINE_H: f64 = 16.0;
/// Characters of a summary line before it wraps (about 6.5 px each at 12 px).
const WRAP: usize = 130;

/// The summary and every chart as one SVG picture (for the PNG), and each plot's area in it.
pub fn composite_svg(input: &str, a: &Analysis) -> (String, Vec<PlotArea>) {
    let l = layout(input, a);
    let mut body = String::new();
    let mut areas = Vec::new();
    let mut y = MARGIN;
    let _ = write!(
        body,
        r##"<text x="{MARGIN}" y="{:.1}" font-size="18" font-weight="bold" fill="#222">gpulse report</text>"##,
        y + 16.0
    );
    y += 30.0;
    for (label, text) in &l.facts {
        for (i, line) in wrap(text, WRAP).iter().enumerate() {
            let head =
                if i == 0 { format!(r#"<tspan font-weight="bold">{}: </tspan>"#, esc(label)) } else { "    ".into() };
            let _ = write!(
                body,
                r##"<text x="{MARGIN}" y="{:.1}" font-size="12" fill="#222">{head}{}</text>"##,
                y + 12.0,
                esc(line)
            );
            y += LINE_H;
        }
    }
    for sec in l.main_thread.iter().chain(&l.sections) {
        y += 8.0;
        let _ = write!(
            body,
            r##"<text x="{MARGIN}" y="{:.1}" font-size="15" font-weight="bold" fill="#222">{}</text>"##,
            y + 16.0,
            esc(&sec.heading)
        );
        y += HEADING_H;
        for line in sec.notes.iter().flat_map(|n| wrap(n, WRAP)) {
            let _ = write!(
                body,
                r##"<text x="{MARGIN}" y="{:.1}" font-size="12" fill="#222">{}</text>"##,
                y + 12.0,
                esc(&line)
            );
            y += LINE_H;
        }
        for c in &sec.charts {
            let h = svg_height(c);
            let _ = write!(body, r#"<g transform="translate({MARGIN} {y:.1})">{c}</g>"#);
            if let Some(top) = plot_top(c) {
                areas.push([MARGIN + chart::PLOT_X0, y + top, chart::PLOT_X1 - chart::PLOT_X0, chart::PLOT_H]);
            }
            y += h + 10.0;
        }
    }
    let (w, h) = (chart::W + 2.0 * MARGIN, y + MARGIN);
    let svg = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h:.0}" viewBox="0 0 {w} {h:.0}" font-family="DejaVu Sans, Arial, sans-serif"><rect width="100%" height="100%" fill="#ffffff"/>{body}</svg>"##
    );
    (svg, areas)
}

/// A chart's height, from its own `height` attribute.
fn svg_height(chart: &str) -> f64 {
    attr_f64(chart, "height=\"").unwrap_or(0.0)
}

/// The y of a chart's plot, from its `class="plot"` rectangle.
fn plot_top(chart: &str) -> Option<f64> {
    let plot = &chart[chart.find("class=\"plot\"")?..];
    attr_f64(plot, " y=\"")
}

fn attr_f64(s: &str, key: &str) -> Option<f64> {
    let rest = &s[s.find(key)? + key.len()..];
    rest[..rest.find('"')?].parse().ok()
}

/// `text` in lines of at most `width` characters, broken at spaces (a longer word stands alone).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split(' ') {
        let cur = lines.last_mut().unwrap();
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > width {
            lines.push(word.to_owned());
        } else {
            if !cur.is_empty() {
                cur.push(' ');
            }
            cur.push_str(word);
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use gpulse_diagnose::{Finding, FindingId, Severity};

    use super::*;

    /// The `<section>` of GPU `gpu` in `html`.
    fn gpu_html(html: &str, gpu: u32) -> &str {
        let start = html.find(&format!("<section data-gpu=\"{gpu}\">")).expect("the GPU has a section");
        &html[start..start + html[start..].find("</section>").unwrap()]
    }

    fn two_gpus(findings: Vec<Finding>) -> String {
        let series = |gpu: u32| GpuSeries {
            gpu,
            t_s: vec![0.0, 10.0, 20.0],
            util_pct: vec![Some(90.0), Some(5.0), Some(90.0)],
            ..Default::default()
        };
        let run = Run { gpus: vec![series(0), series(1)], ..Default::default() };
        render(
            "x.db",
            &Analysis {
                run,
                diagnosis: gpulse_diagnose::Diagnosis { findings, ..Default::default() },
                gpus: 2,
                samples: 6,
                ..Analysis::default()
            },
        )
    }

    #[test]
    fn a_stall_shades_only_its_own_gpus_charts() {
        let stall = Finding::new(FindingId::PeriodicStall, Severity::Warning, String::new())
            .on_gpu(1)
            .pauses(vec![[2.0, 4.0], [12.0, 14.0]]);
        let html = two_gpus(vec![stall]);
        assert_eq!(gpu_html(&html, 0).matches(r#"class="finding""#).count(), 0, "GPU 0 did not stall");
        assert!(gpu_html(&html, 1).matches(r#"class="finding""#).count() >= 2, "both pauses on GPU 1's charts");
    }

    #[test]
    fn a_run_wide_window_shades_every_gpu_labelled_with_its_id() {
        let input = Finding::new(FindingId::InputBound, Severity::Critical, "waits for data".into()).over([5.0, 15.0]);
        let html = two_gpus(vec![input]);
        for gpu in [0, 1] {
            let sec = gpu_html(&html, gpu);
            assert!(sec.contains(r#"data-finding="input_bound""#), "GPU {gpu}");
            assert!(sec.contains(r#"<text x="#) && sec.contains(">input_bound</text>"), "labelled on GPU {gpu}");
        }
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
        let html = render("x.db", &Analysis { run, gpus: 1, samples: 2, ..Analysis::default() });
        assert!(html.contains("<td>7</td><td>unknown</td>"), "never read: unknown");
        assert!(html.contains("<td>8</td><td>2.0 GiB</td>"), "read: its peak");
        assert_eq!(html.matches("<svg").count(), 1, "only utilization was read: no empty charts");
    }

    #[test]
    fn memory_far_from_the_total_is_scaled_to_the_data() {
        let gpu = |used_gib: f64| GpuSeries {
            t_s: vec![0.0, 1.0, 2.0],
            mem_used_bytes: vec![Some(used_gib * 1073741824.0); 3],
            mem_total_bytes: Some(140.0 * 1073741824.0),
            ..Default::default()
        };
        let memory = |used_gib| {
            let g = gpu(used_gib);
            let charts = gpu_charts(&g);
            let c = charts.iter().find(|c| c.title.starts_with("Memory")).unwrap();
            (c.title.clone(), c.reference.is_some(), c.y_ticks_for_tests())
        };
        let (title, line, ticks) = memory(7.0);
        assert_eq!((title.as_str(), line), ("Memory used, GiB (of 140.0 GiB total)", false));
        assert!(ticks.hi < 10.0, "7 GiB fills the chart: {ticks:?}");
        let (title, line, ticks) = memory(130.0);
        assert_eq!((title.as_str(), line), ("Memory used, GiB", true), "the total drawn as a line");
        assert!(ticks.hi >= 140.0);
    }

    #[test]
    fn long_summary_lines_wrap_at_spaces() {
        let text = "a ".repeat(100) + "https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage";
        let lines = wrap(&text, 40);
        assert!(lines.iter().all(|l| l.chars().count() <= 40 || !l.contains(' ')), "{lines:?}");
        assert_eq!(lines.join(" "), text, "nothing cut");
    }

    /// A drawn path (absolute M, L, H, V and a relative `l`) as its segments.
    fn segments(d: &str) -> Vec<[f64; 4]> {
        let (mut out, mut at) = (Vec::new(), (0.0, 0.0));
        let mut rest = d;
        while let Some(c) = rest.chars().next() {
            let end = rest[1..].find(|c: char| c.is_ascii_alphabetic()).map_or(rest.len(), |e| e + 1);
            let n: Vec<f64> = rest[1..end].split(',').map(|v| v.parse().unwrap()).collect();
            let to = match c {
                'M' | 'L' => (n[0], n[1]),
                'H' => (n[0], at.1),
                'V' => (at.0, n[0]),
                'l' => (at.0 + n[0], at.1 + n[1]),
                _ => panic!("{c} in {d}"),
            };
            if c != 'M' {
                out.push([at.0, at.1, to.0, to.1]);
            }
            (at, rest) = (to, &rest[end..]);
        }
        out
    }

    /// An axis's ticks in `svg` (`class="tick x"` or `"tick y"`): pixel and value, from the
    /// gridline before each label; a time label's unit turned into seconds.
    fn ticks(svg: &str, class: &str) -> Vec<(f64, f64)> {
        let key = format!(r#"class="{class}""#);
        svg.match_indices(&key)
            .map(|(i, _)| {
                let line = &svg[svg[..i].rfind("<line").unwrap()..i];
                let pixel = attr_f64(line, if class == "tick x" { " x1=\"" } else { " y1=\"" }).unwrap();
                let label = &svg[i + svg[i..].find('>').unwrap() + 1..];
                let label = &label[..label.find('<').unwrap()];
                let (v, unit) = label.split_once(' ').unwrap_or((label, ""));
                let scale = match unit {
                    "min" => 60.0,
                    "h" => 3600.0,
                    _ => 1.0,
                };
                (pixel, v.parse::<f64>().unwrap() * scale)
            })
            .collect()
    }

    /// The loop's chart draws each step's own duration over the time the step took: 56 ms steps
    /// and one 5 s step per pause, never a ramp between them that no step took.
    #[test]
    fn step_time_is_each_steps_own_duration_at_its_time() {
        use gpulse_model::{Marker, MarkerKind};
        for (between, pauses) in [(100, 3), (6000, 3)] {
            // The truth: (end, duration) of each step, seconds; a pause ends each stretch.
            let mut truth = Vec::new();
            let mut end_s = 2.0;
            for _ in 0..pauses {
                for dur_s in std::iter::repeat_n(0.056, between).chain([5.0]) {
                    end_s += dur_s;
                    truth.push((end_s, dur_s));
                }
            }
            let mark = |t_s: f64| Marker::one((t_s * 1e6).round() as i64, 7, MarkerKind::Step, None, None);
            let marks: Vec<Marker> = std::iter::once(2.0).chain(truth.iter().map(|s| s.0)).map(mark).collect();
            let steps = gpulse_diagnose::Steps::from_markers(&marks, 0, false).unwrap();
            let run = Run { steps: Some(steps), ..Default::default() };
            let html = render("x.db", &Analysis { run, ..Analysis::default() });
            let svg = html.split("<h2>Training loop</h2>").nth(1).unwrap();
            let svg = &svg[..svg.find("</svg>").unwrap()];
            let d = svg.split(r#"class="series" d=""#).nth(1).unwrap();
            let segs = segments(&d[..d.find('"').unwrap()]);
            let (xs, ys) = (ticks(svg, "tick x"), ticks(svg, "tick y"));
            let between_ticks = |t: &[(f64, f64)], p: f64| {
                let (a, b) = (t[0], t[t.len() - 1]);
                a.1 + (p - a.0) / (b.0 - a.0) * (b.1 - a.1)
            };
            let ms = |y: f64| between_ticks(&ys, y);
            let x_of = |t_s: f64| between_ticks(&xs.iter().map(|p| (p.1, p.0)).collect::<Vec<_>>(), t_s);
            // Half a tenth of a pixel, in ms: the path's rounding.
            let tol_ms = 0.06 * (ys[ys.len() - 1].1 - ys[0].1) / (ys[0].0 - ys[ys.len() - 1].0).abs();
            for s in &segs {
                for y in [s[1], s[3]] {
                    assert!(
                        [56.0, 5000.0].iter().any(|v| (ms(y) - v).abs() <= tol_ms),
                        "{} ms drawn: no step took it",
                        ms(y)
                    );
                }
            }
            // Mid-step, the line is at the step's duration: the pauses first, then (when every step
            // has its pixels) the others.
            let mut checked = 0;
            let mut order = truth.clone();
            order.sort_by(|a, b| b.1.total_cmp(&a.1));
            for &(end_s, dur_s) in order.iter().filter(|s| between < 1000 || s.1 > 1.0) {
                let px = x_of(end_s - dur_s / 2.0);
                let here: Vec<f64> = segs
                    .iter()
                    .filter(|s| s[0] != s[2] && s[0].min(s[2]) <= px && px <= s[0].max(s[2]))
                    .map(|s| ms(s[1] + (px - s[0]) / (s[2] - s[0]) * (s[3] - s[1])))
                    .collect();
                assert!(!here.is_empty(), "nothing drawn at {end_s} s");
                assert!(here.iter().all(|v| (v - 1000.0 * dur_s).abs() <= tol_ms), "{here:?} for a {dur_s} s step");
                checked += 1;
            }
            assert!(checked >= pauses, "{between} steps between pauses");
        }
    }
}
