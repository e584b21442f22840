//! A history chart with its axes: values on the left (percent, GiB, W), the time along the bottom
//! (`-120s` … `now`), so a chart of any height says how much and when.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Sparkline};

use crate::fmt::cols;
use crate::history::Ring;

const DIM: Style = Style::new().fg(Color::DarkGray);

/// Rows a chart needs for its title, two rows of bars and its time axis.
pub const MIN_ROWS: u16 = 4;

/// One series to chart.
pub struct Plot<'a> {
    /// The line above the chart (the series and its latest value); none where a border says it.
    pub title: Option<Line<'a>>,
    pub ring: &'a Ring,
    /// The value at the chart's top; bars run from 0 to it.
    pub top: f64,
    /// How a value of the series is written on the value axis.
    pub label: &'a dyn Fn(f64) -> String,
    pub color: Color,
}

/// Draws `p` in `area`: its title, the bars of the latest readings right-aligned (the newest at
/// the right edge), the value axis and, below, the time of the readings in `times_s` (one a
/// reading, as the series).
pub fn plot(f: &mut Frame, area: Rect, p: &Plot, times_s: &Ring) {
    let mut area = area;
    if let Some(title) = &p.title {
        if area.height == 0 {
            return;
        }
        f.render_widget(Paragraph::new(title.clone()), Rect { height: 1, ..area });
        area = Rect { y: area.y + 1, height: area.height - 1, ..area };
    }
    let axis = area.height >= 3;
    let bars_h = area.height - u16::from(axis);
    let top = if p.top.is_finite() && p.top > 0.0 { p.top } else { 1.0 };
    let values: Vec<(u16, String)> = match bars_h {
        0 => Vec::new(),
        1 => vec![(0, (p.label)(top))],
        h if h < 5 => vec![(0, (p.label)(top)), (h - 1, (p.label)(0.0))],
        h => vec![(0, (p.label)(top)), (h / 2, (p.label)(top / 2.0)), (h - 1, (p.label)(0.0))],
    };
    let label_w = values.iter().map(|(_, l)| cols(l)).max().unwrap_or(0) as u16;
    if area.width <= label_w + 2 || bars_h == 0 {
        return;
    }
    for row in 0..bars_h {
        let text = values.iter().find(|(r, _)| *r == row).map_or("", |(_, l)| l.as_str());
        let line = format!("{text:>w$}│", w = label_w as usize);
        f.render_widget(
            Paragraph::new(line).style(DIM),
            Rect { y: area.y + row, height: 1, width: label_w + 1, ..area },
        );
    }
    let bars = Rect { x: area.x + label_w + 1, width: area.width - label_w - 1, height: bars_h, ..area };
    let w = bars.width as usize;
    let scale = |v: f64| (v.clamp(0.0, top) / top * 1000.0).round() as u64;
    let shown: Vec<Option<u64>> = p.ring.last_n(w).map(|v| v.map(scale)).collect();
    let data: Vec<Option<u64>> = std::iter::repeat_n(None, w - shown.len()).chain(shown).collect();
    f.render_widget(
        Sparkline::default().data(data).max(1000).style(Style::new().fg(p.color)).absent_value_symbol(" "),
        bars,
    );
    if axis {
        let row = Rect { y: bars.y + bars_h, height: 1, ..bars };
        f.render_widget(Paragraph::new(time_axis(times_s, w)).style(DIM), row);
    }
}

/// Tick spacings, seconds: the first that leaves about ten columns between labels is used.
const STEPS_S: [f64; 11] = [5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0];

/// The time axis under `w` columns whose right one is the latest of `times_s`: `now` there, and
/// a label at each round time before it (`-60s`), placed at the reading nearest that time.
pub fn time_axis(times_s: &Ring, w: usize) -> String {
    let t: Vec<f64> = times_s.last_n(w).flatten().collect();
    let mut row = vec![' '; w];
    let put = |start: usize, text: &str, row: &mut Vec<char>| {
        let end = start + text.chars().count();
        // A label keeps a blank between it and the next.
        let free = end <= w && row[start.saturating_sub(1)..(end + 1).min(w)].iter().all(|c| *c == ' ');
        if free {
            row.splice(start..end, text.chars());
        }
    };
    put(w.saturating_sub(3), "now", &mut row);
    let Some(&now) = t.last() else { return row.into_iter().collect() };
    let pad = w - t.len();
    let spacing = if t.len() >= 2 { (now - t[0]) / (t.len() - 1) as f64 } else { 1.0 };
    let spacing = if spacing > 0.0 { spacing } else { 1.0 };
    // Columns before the first reading are where earlier readings will be, at the same spacing.
    let at = |c: usize| if c >= pad { t[c - pad] } else { t[0] - (pad - c) as f64 * spacing };
    let span = now - at(0);
    let step = STEPS_S.into_iter().find(|s| span / s <= (w / 10).max(1) as f64).unwrap_or(7200.0);
    let mut k = 1.0;
    while k * step <= span + spacing / 2.0 {
        let target = now - k * step;
        let c = (0..w).min_by(|&a, &b| (at(a) - target).abs().total_cmp(&(at(b) - target).abs())).unwrap_or(0);
        let ago = k * step;
        let text = if step >= 300.0 { format!("-{:.0}m", ago / 60.0) } else { format!("-{ago:.0}s") };
        let start = (c + 1).saturating_sub(text.chars().count().div_ceil(2));
        put(start, &text, &mut row);
        k += 1.0;
    }
    row.into_iter().collect()
}

/// A percentage as the value axis writes it.
pub fn pct_label(v: f64) -> String {
    format!("{v:.0}%")
}

/// GiB as the value axis writes it: a decimal under 10.
pub fn gib_label(v: f64) -> String {
    if v < 10.0 && v != 0.0 { format!("{v:.1}GiB") } else { format!("{v:.0}GiB") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every(n: usize, step_s: f64) -> Ring {
        let mut r = Ring::new(600);
        for i in 0..n {
            r.push(Some(1000.0 + i as f64 * step_s));
        }
        r
    }

    /// Each label sits under the reading of that age; the newest reading is `now`.
    #[test]
    fn time_labels_are_where_their_readings_are() {
        for (n, step_s, w) in [(300, 1.0, 150), (300, 2.0, 80), (10, 1.0, 100), (600, 0.5, 200)] {
            let times = every(n, step_s);
            let axis = time_axis(&times, w);
            assert_eq!(axis.chars().count(), w);
            assert!(axis.ends_with("now"), "{axis}");
            let labels: Vec<(usize, i64)> = axis
                .split(' ')
                .scan(0, |at, word| {
                    let start = *at;
                    *at += word.chars().count() + 1;
                    Some((start, word))
                })
                .filter_map(|(start, word)| {
                    let s = word.strip_prefix('-')?.strip_suffix('s')?.parse::<i64>().ok()?;
                    Some((start + word.chars().count() / 2, s))
                })
                .collect();
            assert!(labels.len() >= 2, "{n} readings every {step_s} s in {w} columns: {axis}");
            for (col, ago_s) in labels {
                // The column's reading, counting back from the newest at the right edge.
                let readings_ago = (w - 1 - col) as f64;
                assert!((readings_ago * step_s - ago_s as f64).abs() <= 2.0 * step_s, "{ago_s}s at {col}: {axis}");
            }
        }
    }
}
