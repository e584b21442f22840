//! One timeline as SVG: title and legend, gridlines and ticks, the findings' shaded windows with
//! their labels, event markers, and the lines. Styles are presentation attributes, not CSS, so
//! the PNG renderer draws the same picture as the browser.

use std::borrow::Cow;
use std::fmt::Write as _;

use super::axis::{self, Ticks, TimeAxis};
use super::downsample;
use super::esc;

/// Width of every chart, so the time axes line up down the page.
pub const W: f64 = 900.0;
/// The plot's left and right edges: room for the y labels, and for the last time label.
pub const PLOT_X0: f64 = 52.0;
pub const PLOT_X1: f64 = 880.0;
pub const PLOT_H: f64 = 110.0;
/// Height of one row of finding labels above the plot.
const LANE_H: f64 = 13.0;
/// Buckets across the plot when downsampling: about one per pixel.
const BUCKETS: f64 = 800.0;

/// What a chart belongs to: one GPU, or the run (the loop, the host).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Gpu(u32),
    Run,
}

impl Scope {
    fn attr(self) -> String {
        match self {
            Self::Gpu(g) => format!("gpu-{g}"),
            Self::Run => "run".to_owned(),
        }
    }
}

/// One line: its legend name, colour and readings (`None`: not read, drawn as a gap).
pub struct Series<'a> {
    pub name: &'static str,
    pub color: &'static str,
    pub t_s: &'a [f64],
    pub v: Cow<'a, [Option<f64>]>,
    /// `Some(from)`: each value held from the previous reading's time (the first: from `from`)
    /// to its own, as a step's duration does, so it is drawn flat there, never as a ramp from its
    /// neighbour. `None`: readings of a level, joined by straight lines.
    pub held_from_s: Option<f64>,
}

impl Series<'_> {
    pub fn has_data(&self) -> bool {
        self.v.iter().any(Option::is_some)
    }
}

/// How the value axis is chosen.
pub enum YRange {
    /// A known scale: 0–100 %, 0 to the maximum clock.
    Fixed(f64, f64),
    /// From 0 to the highest reading.
    FromZero,
    /// From the lowest to the highest reading (temperatures).
    Data,
}

/// A finding's window, or one of its pauses, shaded on the plot.
#[derive(Debug, Clone)]
pub struct Band {
    pub finding: &'static str,
    /// Tooltip: the finding's title and the window.
    pub text: String,
    pub from_s: f64,
    pub to_s: f64,
    pub color: &'static str,
    /// A pause inside a stall's window: darker, unlabelled.
    pub pause: bool,
}

gpulse_base::words! {
    /// What a mark stands for: the start of one of the loop's phases, or a recorded event.
    #[derive(Debug, Clone, PartialEq)]
    pub enum MarkKind {
        Phase => "phase",
    } else {
        Event(gpulse_model::EventKind),
    }
}

impl MarkKind {
    /// Its name in the drawing's `data-kind`: `phase`, or the event kind's.
    pub fn as_str(&self) -> &str {
        match self.known_str() {
            Ok(name) => name,
            Err(kind) => kind.as_str(),
        }
    }
}

/// An event at one moment, with its text as a tooltip.
#[derive(Debug, Clone)]
pub struct Mark {
    pub t_s: f64,
    pub kind: MarkKind,
    pub text: String,
    /// Shown on the plot ("OOM", "GPU lost") and in red: the events that end a run.
    pub label: Option<&'static str>,
}

/// A timeline ready to draw.
pub struct Chart<'a> {
    pub title: String,
    pub scope: Scope,
    pub series: Vec<Series<'a>>,
    pub y: YRange,
    /// A dashed level with its label (the memory total).
    pub reference: Option<(String, f64)>,
}

impl Chart<'_> {
    /// Whether any series has a reading: a chart of nothing is not drawn.
    pub fn has_data(&self) -> bool {
        self.series.iter().any(Series::has_data)
    }

    #[cfg(test)]
    pub fn y_ticks_for_tests(&self) -> Ticks {
        self.y_ticks()
    }

    fn y_ticks(&self) -> Ticks {
        let values = || self.series.iter().flat_map(|s| s.v.iter().flatten().copied());
        let hi = values().fold(f64::NEG_INFINITY, f64::max).max(self.reference.as_ref().map_or(f64::MIN, |r| r.1));
        match self.y {
            YRange::Fixed(lo, hi) => axis::nice(lo, hi),
            YRange::FromZero => axis::nice(0.0, hi.max(0.0)),
            YRange::Data => axis::nice(values().fold(f64::INFINITY, f64::min), hi),
        }
    }

    /// The SVG, on the shared time axis, with the bands and marks of this chart's scope.
    pub fn svg(&self, time: &TimeAxis, bands: &[Band], marks: &[Mark]) -> String {
        let (t0, t1) = (time.lo_s(), time.hi_s());
        let x = |t: f64| PLOT_X0 + (t.clamp(t0, t1) - t0) / (t1 - t0) * (PLOT_X1 - PLOT_X0);
        let lanes = lanes(bands, &x);
        let lane_count = lanes.iter().copied().max().map_or(0, |m| m + 1);
        let plot_y0 = 22.0 + lane_count as f64 * LANE_H + if lane_count > 0 { 3.0 } else { 0.0 };
        let plot_y1 = plot_y0 + PLOT_H;
        let h = plot_y1 + 18.0;
        let yt = self.y_ticks();
        let y = |v: f64| plot_y1 - (v.clamp(yt.lo, yt.hi) - yt.lo) / (yt.hi - yt.lo) * PLOT_H;
        let mut s = format!(
            r##"<svg class="chart" data-scope="{}" viewBox="0 0 {W} {h}" width="{W}" height="{h}" font-family="DejaVu Sans, Arial, sans-serif" font-size="10" role="img"><title>{}</title>"##,
            self.scope.attr(),
            esc(&self.title),
        );
        let _ = write!(
            s,
            r##"<text class="title" x="2" y="13" font-size="12" font-weight="bold" fill="#222">{}</text>"##,
            esc(&self.title)
        );
        s += &self.legend();
        let _ = write!(
            s,
            r##"<rect class="plot" x="{PLOT_X0}" y="{plot_y0:.1}" width="{:.1}" height="{PLOT_H}" fill="#fafafa" stroke="#d0d0d0"/>"##,
            PLOT_X1 - PLOT_X0
        );
        // Bands under the grid and lines; their labels in lanes above the plot.
        for (b, lane) in bands.iter().zip(&lanes) {
            let (a, z) = (x(b.from_s), x(b.to_s).max(x(b.from_s) + 1.5));
            let kind = if b.pause { "pause" } else { "window" };
            let _ = write!(
                s,
                r##"<rect class="finding" data-finding="{}" data-kind="{kind}" data-window="{} {}" x="{a:.1}" y="{plot_y0:.1}" width="{:.1}" height="{PLOT_H}" fill="{}" fill-opacity="{}"><title>{}</title></rect>"##,
                b.finding,
                b.from_s,
                b.to_s,
                z - a,
                b.color,
                if b.pause { 0.35 } else { 0.14 },
                esc(&b.text)
            );
            if !b.pause {
                let ly = 22.0 + *lane as f64 * LANE_H;
                let _ = write!(
                    s,
                    r##"<g class="band-label"><rect x="{a:.1}" y="{ly:.1}" width="{:.1}" height="{}" fill="{}" fill-opacity="0.75"/><text x="{:.1}" y="{:.1}" font-size="9" fill="#111">{}</text><title>{}</title></g>"##,
                    z - a,
                    LANE_H - 2.0,
                    b.color,
                    a + 3.0,
                    ly + 8.5,
                    b.finding,
                    esc(&b.text)
                );
            }
        }
        for v in yt.values() {
            let yy = y(v);
            let _ = write!(
                s,
                r##"<line class="grid" x1="{PLOT_X0}" x2="{PLOT_X1}" y1="{yy:.1}" y2="{yy:.1}" stroke="#e2e2e2"/><text class="tick y" x="{:.1}" y="{:.1}" text-anchor="end" fill="#555">{}</text>"##,
                PLOT_X0 - 4.0,
                yy + 3.5,
                yt.label(v)
            );
        }
        let ticks = time.labelled();
        for (i, (t, label)) in ticks.iter().enumerate() {
            let xx = x(*t);
            let anchor = if i + 1 == ticks.len() { "end" } else { "middle" };
            let _ = write!(
                s,
                r##"<line class="grid" x1="{xx:.1}" x2="{xx:.1}" y1="{plot_y0:.1}" y2="{plot_y1:.1}" stroke="#e2e2e2"/><text class="tick x" x="{xx:.1}" y="{:.1}" text-anchor="{anchor}" fill="#555">{label}</text>"##,
                plot_y1 + 13.0
            );
        }
        if let Some((label, v)) = &self.reference {
            let yy = y(*v);
            let _ = write!(
                s,
                r##"<line class="reference" x1="{PLOT_X0}" x2="{PLOT_X1}" y1="{yy:.1}" y2="{yy:.1}" stroke="#444" stroke-dasharray="5 3"/><text x="{:.1}" y="{:.1}" fill="#444">{}</text>"##,
                PLOT_X0 + 4.0,
                yy - 3.0,
                esc(label)
            );
        }
        let bucket_s = match self.series.first().map_or(0, |l| l.t_s.len()) {
            n if n as f64 > 2.0 * BUCKETS => (t1 - t0) / BUCKETS,
            _ => 0.0,
        };
        for line in self.series.iter().filter(|l| l.has_data()) {
            let mut d = String::new();
            let runs = downsample::min_max(line.t_s, &line.v, bucket_s);
            for run in &runs {
                let point = |i: usize| (x(line.t_s[i]), y(line.v[i].unwrap_or(yt.lo)));
                match line.held_from_s {
                    Some(from_s) => {
                        // Flat over each value's own interval; a vertical where one value ends and the next begins.
                        let start_s = run[0].checked_sub(1).map_or(from_s, |i| line.t_s[i]);
                        let _ = write!(d, "M{:.1},{:.1}", x(start_s), point(run[0]).1);
                        for (k, &i) in run.iter().enumerate() {
                            let (px, py) = point(i);
                            if k > 0 {
                                let _ = write!(d, "V{py:.1}");
                            }
                            let _ = write!(d, "H{px:.1}");
                        }
                    }
                    None => {
                        for (k, &i) in run.iter().enumerate() {
                            let (px, py) = point(i);
                            let _ = write!(d, "{}{px:.1},{py:.1}", if k == 0 { "M" } else { "L" });
                        }
                        if run.len() == 1 {
                            d += "l0.1,0";
                        }
                    }
                }
            }
            let _ = write!(
                s,
                r##"<path class="series" d="{d}" fill="none" stroke="{}" stroke-width="1.3" stroke-linejoin="round" stroke-linecap="round"><title>{}</title></path>"##,
                line.color,
                esc(line.name)
            );
        }
        for m in marks {
            let xx = x(m.t_s);
            let (color, width, dash) = match m.label {
                Some(_) => ("#a00000", 2.0, ""),
                None => ("#555", 1.0, r#" stroke-dasharray="3 2""#),
            };
            let _ = write!(
                s,
                r##"<g class="event" data-kind="{}"><line x1="{xx:.1}" x2="{xx:.1}" y1="{plot_y0:.1}" y2="{plot_y1:.1}" stroke="{color}" stroke-width="{width}"{dash}/><path d="M{xx:.1},{plot_y1:.1}l-4,6h8z" fill="{color}"/>"##,
                esc(m.kind.as_str())
            );
            if let Some(label) = m.label {
                // Left of the line near the plot's right edge, so it stays inside.
                let (lx, anchor) = if xx > PLOT_X1 - 50.0 { (xx - 3.0, "end") } else { (xx + 3.0, "start") };
                let _ = write!(
                    s,
                    r##"<text x="{lx:.1}" y="{:.1}" text-anchor="{anchor}" font-size="10" font-weight="bold" fill="{color}">{label}</text>"##,
                    plot_y0 + 11.0
                );
            }
            let _ = write!(s, "<title>{}</title></g>", esc(&m.text));
        }
        s + "</svg>"
    }

    /// Only the series the input has, right-aligned on the title's row.
    fn legend(&self) -> String {
        let mut s = String::from(r#"<g class="legend">"#);
        let mut right = PLOT_X1;
        for l in self.series.iter().filter(|l| l.has_data()).collect::<Vec<_>>().into_iter().rev() {
            // About 6 px a character at 10 px.
            let w = 6.0 * l.name.chars().count() as f64;
            let _ = write!(
                s,
                r##"<rect x="{:.1}" y="5" width="10" height="3" fill="{}"/><text class="legend-item" x="{:.1}" y="10" fill="#333">{}</text>"##,
                right - w - 14.0,
                l.color,
                right - w,
                esc(l.name)
            );
            right -= w + 26.0;
        }
        s + "</g>"
    }
}

/// A label lane for each band: windows whose labels would overlap go on separate rows; pauses
/// share their window's.
fn lanes(bands: &[Band], x: &impl Fn(f64) -> f64) -> Vec<usize> {
    let mut ends: Vec<f64> = Vec::new();
    let mut by_finding: Vec<(&str, usize)> = Vec::new();
    bands
        .iter()
        .map(|b| {
            if b.pause {
                return by_finding.iter().find(|f| f.0 == b.finding).map_or(0, |f| f.1);
            }
            let a = x(b.from_s);
            // The label is about 5.5 px a character at 9 px.
            let z = x(b.to_s).max(a + 6.0 + 5.5 * b.finding.len() as f64);
            let lane = ends.iter().position(|e| *e + 2.0 <= a).unwrap_or_else(|| {
                ends.push(f64::MIN);
                ends.len() - 1
            });
            ends[lane] = z;
            by_finding.push((b.finding, lane));
            lane
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn band(finding: &'static str, from_s: f64, to_s: f64) -> Band {
        Band { finding, text: String::new(), from_s, to_s, color: "#f5a623", pause: false }
    }

    #[test]
    fn overlapping_windows_get_their_own_label_rows() {
        let x = |t: f64| t * 10.0;
        let bands = [band("memory_growth", 0.0, 59.0), band("host_bound", 14.0, 59.0), band("oom", 60.0, 61.0)];
        assert_eq!(lanes(&bands, &x), [0, 1, 0], "the third starts after the first ends");
        let pause = Band { pause: true, ..band("host_bound", 20.0, 22.0) };
        assert_eq!(lanes(&[bands[0].clone(), bands[1].clone(), pause], &x)[2], 1, "with its window");
    }

    #[test]
    fn legend_lists_only_series_with_readings_and_gaps_are_not_zero() {
        let t = [0.0, 1.0, 2.0, 3.0];
        let chart = Chart {
            title: "Utilization, %".into(),
            scope: Scope::Gpu(0),
            series: vec![
                Series {
                    name: "GPU-Util",
                    color: "#1f77b4",
                    t_s: &t,
                    v: vec![Some(10.0), None, Some(30.0), Some(40.0)].into(),
                    held_from_s: None,
                },
                Series {
                    name: "SM active (GPM)",
                    color: "#d62728",
                    t_s: &t,
                    v: vec![None; 4].into(),
                    held_from_s: None,
                },
            ],
            y: YRange::Fixed(0.0, 100.0),
            reference: None,
        };
        let svg = chart.svg(&TimeAxis::new(0.0, 3.0), &[], &[]);
        assert!(svg.contains("GPU-Util") && !svg.contains("SM active"), "{svg}");
        assert_eq!(svg.matches("class=\"series\"").count(), 1);
        let d = svg.split("class=\"series\" d=\"").nth(1).unwrap().split('"').next().unwrap();
        assert_eq!(d.matches('M').count(), 2, "the unread sample breaks the line: {d}");
        assert!(svg.matches("class=\"tick x\"").count() >= 4 && svg.matches("class=\"tick y\"").count() >= 4);
    }
}
