//! The history panel: the host on the left, the picked GPU on the right. Short, a line a
//! series with its sparkline; given the rows, labelled charts that grow with the terminal.

use gpulse_model::GpuSample;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Sparkline};

use crate::app::App;
use crate::chart::{self, MIN_ROWS, Plot};
use crate::fmt::{self, NONE, cols, gpu_label};
use crate::history::{Chart, Ring};

const BOLD: Style = Style::new().add_modifier(Modifier::BOLD);

pub fn draw_host(f: &mut Frame, area: Rect, app: &App) {
    let [left, right] = Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(area);
    let host = app.poll.as_ref().map(|p| &p.host);
    let cpu = host.and_then(|h| h.cpu_busy_pct).map(f64::from);
    let (used, total) = (host.and_then(|h| h.memory_used_bytes), host.and_then(|h| h.memory_total_bytes));
    let mem = used.zip(total.filter(|t| *t > 0)).map(|(u, t)| u as f64 / t as f64 * 100.0);
    let load = host.and_then(|h| h.load_1m).map_or_else(|| NONE.into(), |l| format!("{l:.1}"));
    let block = Block::new().borders(Borders::TOP).title(Span::styled(" host ", BOLD));
    let inner = block.inner(left);
    f.render_widget(block, left);
    let swap_pct = fmt::pct(host.and_then(fmt::swap_pct), 1);
    let (swap, swap_short) = match host.map(|h| (h.swap_used_bytes, h.swap_total_bytes)) {
        Some((_, Some(0))) => ("SWP   none".to_owned(), "none".to_owned()),
        Some((u, t @ Some(_))) => (format!("SWP {swap_pct:>6} {}/{} GiB", fmt::gib(u), fmt::gib(t)), swap_pct),
        _ => (format!("SWP {NONE:>6}"), NONE.to_owned()),
    };
    let mem = format!("MEM {:>6} {}/{} GiB", fmt::pct(mem, 1), fmt::gib(used), fmt::gib(total));
    let cpu = format!("CPU {:>6} load {load}", fmt::pct(cpu, 1));
    // A line (or a chart) each; short of rows, swap joins memory.
    let mut lines = vec![(cpu, &app.host_cpu_pct, Color::Green), (mem, &app.host_mem_pct, Color::Blue)];
    if (inner.height >= 3 && inner.height < 2 * MIN_ROWS) || inner.height >= 3 * MIN_ROWS + 3 {
        lines.push((swap, &app.host_swap_pct, Color::Red));
    } else if let Some((m, _, _)) = lines.last_mut() {
        m.push_str(&format!(" SWP {swap_short}"));
    }
    if inner.height >= 2 * MIN_ROWS {
        let total_gib = total.filter(|t| *t > 0).map(|t| gpulse_model::to_gib(t as f64));
        let gib = move |v: f64| total_gib.map_or_else(|| chart::pct_label(v), |t| chart::gib_label(v / 100.0 * t));
        let labels: [&dyn Fn(f64) -> String; 3] = [&chart::pct_label, &gib, &chart::pct_label];
        let parts = Layout::vertical(vec![Constraint::Fill(1); lines.len()]).split(inner);
        for (((text, ring, color), label), part) in lines.into_iter().zip(labels).zip(parts.iter()) {
            let p = Plot { title: Some(Line::from(text)), ring, top: 100.0, label, color };
            chart::plot(f, *part, &p, &app.times_s);
        }
    } else {
        let label_w = lines.iter().map(|(s, _, _)| cols(s)).max().unwrap_or(0) as u16 + 1;
        // Rows placed by hand: a layout of more lines than fit shares the room out unevenly.
        for (i, (text, ring, color)) in lines.into_iter().enumerate().take(inner.height as usize) {
            let row = Rect { y: inner.y + i as u16, height: 1, ..inner };
            f.render_widget(Paragraph::new(text), row);
            spark(f, row, label_w, ring, color);
        }
    }
    draw_gpu(f, right, app);
}

/// The first of `titles` that fits in `width`, else the last clipped at a word.
fn fitting(titles: &[String], width: usize) -> String {
    let last = titles.last().map_or("", String::as_str);
    titles
        .iter()
        .find(|t| cols(t) <= width)
        .cloned()
        .unwrap_or_else(|| format!("{} ", fmt::clip(last, width.saturating_sub(1))))
}

fn draw_gpu(f: &mut Frame, area: Rect, app: &App) {
    let d = app.devices.get(app.gpu_pick);
    let title = match d {
        Some(d) => {
            let (label, what) = (gpu_label(d), app.chart.title());
            let titles = [
                format!(" GPU {label} {what} (H switches, ←/→ picks the GPU) "),
                format!(" GPU {label} {what} (H switches) "),
                format!(" GPU {label} {what} "),
                format!(" GPU {label} {} ", app.chart.name()),
            ];
            fitting(&titles, area.width.saturating_sub(2) as usize)
        }
        None => " no GPU ".into(),
    };
    let block = Block::new().borders(Borders::TOP).title(Span::styled(title, BOLD));
    let inner = block.inner(area);
    f.render_widget(block, area);
    let Some(h) = app.gpu_history.get(app.gpu_pick) else { return };
    if inner.height < 2 * MIN_ROWS {
        if app.chart == Chart::Util && inner.height >= 2 {
            let [a, b] = Layout::vertical([Constraint::Fill(1), Constraint::Fill(1)]).areas(inner);
            spark(f, a, 0, &h.util_pct, Color::Green);
            spark(f, b, 0, &h.sm_pct, Color::Magenta);
        } else {
            spark(f, inner, 0, h.series(app.chart), Color::Cyan);
        }
        return;
    }
    let g = app.poll.as_ref().and_then(|p| p.snapshot.as_ref()).and_then(|s| {
        let index = d.map(|d| d.index)?;
        s.gpus.iter().find(|g| g.gpu_index == index)
    });
    let latest = |r: &Ring| r.last_n(1).next().flatten();
    let total_gib = g
        .and_then(|g| g.memory_total_bytes)
        .or(d.and_then(|d| d.memory_total_bytes))
        .filter(|t| *t > 0)
        .map(|t| gpulse_model::to_gib(t as f64));
    let limit_w = g
        .and_then(GpuSample::power_cap_mw)
        .or(d.and_then(|d| d.power_limit_mw))
        .filter(|l| *l > 0)
        .map(gpulse_model::mw_to_w);
    let gib = move |v: f64| total_gib.map_or_else(|| chart::pct_label(v), |t| chart::gib_label(v / 100.0 * t));
    let watts = move |v: f64| limit_w.map_or_else(|| chart::pct_label(v), |l| format!("{:.0}W", v / 100.0 * l));
    let title = |name: &str, value: String| Line::from(vec![Span::styled(name.to_owned(), BOLD), Span::raw(value)]);
    let plots = match app.chart {
        Chart::Util => vec![
            Plot {
                title: Some(title("GPU-Util ", fmt::pct(latest(&h.util_pct), 0))),
                ring: &h.util_pct,
                top: 100.0,
                label: &chart::pct_label,
                color: Color::Green,
            },
            Plot {
                title: Some(title("SM activity ", fmt::pct(latest(&h.sm_pct), 1))),
                ring: &h.sm_pct,
                top: 100.0,
                label: &chart::pct_label,
                color: Color::Magenta,
            },
        ],
        Chart::Memory => vec![Plot {
            title: Some(title(
                "memory used ",
                latest(&h.mem_pct).map_or_else(|| NONE.into(), |v| format!("{} ({v:.0}%)", gib(v))),
            )),
            ring: &h.mem_pct,
            top: 100.0,
            label: &gib,
            color: Color::Cyan,
        }],
        Chart::Power => vec![Plot {
            title: Some(title(
                "power ",
                latest(&h.power_pct).map_or_else(|| NONE.into(), |v| format!("{} ({v:.0}% of the limit)", watts(v))),
            )),
            ring: &h.power_pct,
            top: 100.0,
            label: &watts,
            color: Color::Cyan,
        }],
    };
    let parts = Layout::vertical(vec![Constraint::Fill(1); plots.len()]).split(inner);
    for (p, part) in plots.iter().zip(parts.iter()) {
        chart::plot(f, *part, p, &app.times_s);
    }
}

/// The latest readings of `ring` as a 0–100 sparkline, `skip` cells into `area`.
fn spark(f: &mut Frame, area: Rect, skip: u16, ring: &Ring, color: Color) {
    if area.width <= skip {
        return;
    }
    let area = Rect { x: area.x + skip, width: area.width - skip, ..area };
    let data: Vec<Option<u64>> =
        ring.last_n(area.width as usize).map(|v| v.map(|v| v.clamp(0.0, 100.0).round() as u64)).collect();
    f.render_widget(
        Sparkline::default().data(data).max(100).style(Style::new().fg(color)).absent_value_symbol(" "),
        area,
    );
}
