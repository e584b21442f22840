//! The main screen: header, a panel per GPU, the host with the charts, why it is slow, the
//! processes and the key line. It reads the [`App`] and nothing else.

use gpulse_model::{DeviceInfo, DeviceStatus, GpuSample};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::app::{App, Prompt, Screen};
use crate::fmt::{self, NONE};

const DIM: Style = Style::new().fg(Color::DarkGray);
const BOLD: Style = Style::new().add_modifier(Modifier::BOLD);
const WARN: Style = Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD);
const BAD: Style = Style::new().fg(Color::Red).add_modifier(Modifier::BOLD);

/// The fewest columns the main screen is laid out in: the GPU line and the table's columns.
pub const MIN_WIDTH: u16 = 60;

/// The fewest rows the main screen is laid out in with `gpus` GPUs: the header, a line a GPU,
/// the host's three, why it is slow, a few processes and the key line.
pub fn min_height(gpus: usize) -> u16 {
    12 + gpus.clamp(1, 64) as u16
}

/// Draws the whole screen for `app`; on a terminal too small for it, one line that says so.
pub fn draw(f: &mut Frame, app: &App) {
    let area = f.area();
    let (w, h) = (MIN_WIDTH, min_height(app.devices.len()));
    if area.width < w || area.height < h {
        // Short, so that it fits the terminals it is for; what it says first matters most.
        let text = format!("gpulse top needs {w}×{h}; this is {}×{}", area.width, area.height);
        f.render_widget(Paragraph::new(Line::styled(text, WARN)), area);
        return;
    }
    match &app.screen {
        Screen::Help => return crate::draw_table::help(f, area, app),
        Screen::Process(pid) => return crate::draw_table::process(f, area, app, *pid),
        Screen::Main => {}
    }
    let gpus = app.devices.len().max(1) as u16;
    // Three lines a GPU when the terminal has room for them and a table, else one.
    let full = area.height >= 3 * gpus + 18;
    let gpu_h = if app.devices.is_empty() {
        1
    } else if full {
        3 * gpus
    } else {
        gpus
    };
    let big = area.height >= 40;
    let job_rows = app.jobs.len().min(if big { 4 } else { 2 });
    let why_rows = crate::draw_why::rows_wanted(app, area.width as usize, job_rows).clamp(2, if big { 9 } else { 4 });
    let footer = footer_lines(app, area.width as usize);
    let left = area.height.saturating_sub(1 + gpu_h + why_rows as u16 + 1 + footer.len() as u16);
    // The history takes what the table does not need, and half the room at least (a table
    // scrolls, a chart does not): charts grow with the terminal, as nvitop's do.
    let table_rows = app.shown().len() as u16 + 2;
    let host_h = if area.height >= 30 {
        left.saturating_sub(table_rows.max(5)).max(left / 2).max(5).min(left.saturating_sub(3))
    } else {
        3
    };
    let [header, devices, host, why, table, footer_area] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(gpu_h),
        Constraint::Length(host_h),
        Constraint::Length(why_rows as u16 + 1),
        Constraint::Min(3),
        Constraint::Length(footer.len() as u16),
    ])
    .areas(area);
    f.render_widget(Paragraph::new(header_line(app)), header);
    draw_devices(f, devices, app, full);
    crate::draw_host::draw_host(f, host, app);
    crate::draw_why::draw_why(f, why, app, job_rows);
    crate::draw_table::table(f, table, app);
    f.render_widget(Paragraph::new(footer), footer_area);
}

fn header_line(app: &App) -> Line<'static> {
    let mut spans = vec![Span::styled("gpulse top", BOLD)];
    let d = app.devices.first();
    if let Some(v) = d.and_then(|d| d.driver_version.as_deref()) {
        spans.push(Span::raw(format!("  driver {v}")));
    }
    if let Some(v) = d.and_then(|d| d.cuda_version.as_deref()) {
        spans.push(Span::raw(format!("  CUDA {v}")));
    }
    if let Some(r) = &app.replay {
        spans.push(Span::styled(format!("  {r}"), WARN));
    }
    if app.paused {
        spans.push(Span::styled("  PAUSED", WARN));
    }
    if let Some(e) = &app.failed {
        spans.push(Span::styled(format!("  GPU sampling failed: {e}"), BAD));
    }
    Line::from(spans)
}

/// The keys the footer names, in the order they are dropped from the end when the line is short.
const KEYS: [&str; 11] = [
    "q quit",
    "? help",
    "o sort",
    ",/. column",
    "t tree",
    "/ filter",
    "Enter process",
    "Space tag",
    "I/T/K signal",
    "p pause",
    "H chart",
];

/// The footer: as many of the keys as fit, whole (`?` lists them all), or the prompt or the
/// message wrapped between words.
fn footer_lines(app: &App, width: usize) -> Vec<Line<'static>> {
    let wrapped = |text: &str, style: Style| -> Vec<Line<'static>> {
        fmt::wrap_at_most(text, width, 3).into_iter().map(|l| Line::styled(l, style)).collect()
    };
    match &app.prompt {
        Prompt::SortKey => wrapped(
            "sort by: g GPU, p PID, u USER, m GPU-MEM, s %SM, b %GMBW, c %CPU, r %MEM, t TIME, n COMMAND; uppercase reverses",
            Style::new(),
        ),
        Prompt::Filter(typed) => {
            let mut lines = wrapped("filter (user:NAME pid:N gpu:N word; Enter applies, Esc cancels):", BOLD);
            let typed = format!(" {}▏", fmt::escape_control(typed));
            match lines.last_mut() {
                Some(last) if last.width() + fmt::cols(&typed) <= width => last.push_span(Span::raw(typed)),
                _ => lines.push(Line::raw(typed)),
            }
            lines
        }
        Prompt::Confirm(sig, targets) => {
            let who: Vec<String> = targets.iter().map(|t| format!("{} {}", t.pid, fmt::clip(&t.label, 24))).collect();
            wrapped(&format!("send {} to {}? y sends, any other key cancels", sig.name(), who.join(", ")), BAD)
        }
        Prompt::None => match &app.message {
            Some(m) => wrapped(m, WARN),
            None => {
                let mut line = String::new();
                for key in KEYS {
                    let gap = if line.is_empty() { "" } else { "  " };
                    if fmt::cols(&line) + gap.len() + fmt::cols(key) > width {
                        break;
                    }
                    line = format!("{line}{gap}{key}");
                }
                vec![Line::styled(line, DIM)]
            }
        },
    }
}

pub fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        format!("{}…", s.chars().take(n.saturating_sub(1)).collect::<String>())
    }
}

fn draw_devices(f: &mut Frame, area: Rect, app: &App, full: bool) {
    let snap = app.poll.as_ref().and_then(|p| p.snapshot.as_ref());
    let mut lines = Vec::new();
    if app.devices.is_empty() {
        lines.push(Line::styled("no GPU (host only)", DIM));
    }
    for (i, d) in app.devices.iter().enumerate() {
        let g = snap.and_then(|s| s.gpus.iter().find(|g| g.gpu_index == d.index));
        let oom_s = app.findings.iter().filter(|f| f.gpu == Some(d.index)).find_map(|f| f.time_to_oom_s);
        let trend = app.trend_gib_per_min.get(i).copied().flatten();
        let picked = i == app.gpu_pick && app.devices.len() > 1;
        lines.extend(device_lines(d, g, trend, oom_s, full, area.width as usize, picked));
    }
    f.render_widget(Paragraph::new(lines), area);
}

/// One GPU's lines: three in the full layout, one in the compact.
pub fn device_lines(
    d: &DeviceInfo,
    g: Option<&GpuSample>,
    trend_gib_per_min: Option<f64>,
    oom_s: Option<f64>,
    full: bool,
    width: usize,
    picked: bool,
) -> Vec<Line<'static>> {
    let name = d.name.strip_prefix("NVIDIA ").unwrap_or(&d.name).to_owned();
    let label = Span::styled(
        format!("{:<9}{:<11}", fmt::gpu_label(d), short(&name, 10)),
        if picked { BOLD.fg(Color::Cyan) } else { BOLD },
    );
    let Some(g) = g else { return vec![Line::from(vec![label, Span::styled("no reading yet", DIM)])] };
    if g.status == DeviceStatus::Lost {
        return vec![Line::from(vec![label, Span::styled("GPU is lost (fell off the bus); top goes on", BAD)])];
    }
    let gpm = g.gpm.as_deref();
    let util = g.util_gpu_pct.map(f64::from);
    let sm = g.sm_active_pct();
    let total = g.memory_total_bytes.or(d.memory_total_bytes);
    let mem_pct = g.memory_used_bytes.zip(total.filter(|t| *t > 0)).map(|(u, t)| u as f64 / t as f64 * 100.0);
    let limit = g.power_cap_w().or(d.power_limit_w());
    let watts = |w: Option<f64>| w.map_or_else(|| NONE.into(), |w| format!("{w:.0}"));
    let trend = trend_gib_per_min.map_or_else(|| format!("{NONE} GiB/min"), |t| format!("{t:+.2} GiB/min"));
    let oom = oom_s.map(|s| Span::styled(format!(" OOM in {}", fmt::duration(Some(s))), BAD));
    let temp = g.temperature_gpu_c.map_or_else(|| NONE.into(), |t| format!("{t}°C"));
    let throttle = fmt::throttle(g.clocks_event_reasons);
    let throttle_style = if g.clocks_event_reasons.is_some_and(|b| gpulse_model::ClocksEventReasons(b).is_throttling())
    {
        WARN
    } else {
        Style::new()
    };
    let pcie_tx = g.pcie_tx_bytes_per_s.map(|b| b as f64).or(gpm.and_then(|m| m.pcie_tx_bytes_per_s));
    let pcie_rx = g.pcie_rx_bytes_per_s.map(|b| b as f64).or(gpm.and_then(|m| m.pcie_rx_bytes_per_s));
    let nvl = gpm.map(|m| (m.nvlink_tx_bytes_per_s, m.nvlink_rx_bytes_per_s)).unwrap_or((None, None));
    let mhz = |v: Option<u32>| v.map_or_else(|| NONE.into(), |v| v.to_string());
    if !full {
        let mut spans = vec![
            label,
            Span::raw(format!("UTL {:>4} SM {:>5} ", fmt::pct(util, 0), fmt::pct(sm, 0))),
            Span::raw(format!(
                "MEM {}/{}G {} ",
                fmt::gib(g.memory_used_bytes),
                fmt::gib(total),
                trend.replace(" GiB/min", "/min")
            )),
            Span::raw(format!("PWR {}/{}W {temp}", watts(g.power_draw_w()), watts(limit))),
        ];
        spans.extend(oom);
        return vec![fit(Line::from(spans), width)];
    }
    // Bars give way first, so that power and temperature stay on the line.
    let bar_w = width.saturating_sub(100).clamp(4, 40);
    let indent = if width >= 100 { 20 } else { 2 };
    let l1 = Line::from(vec![
        label,
        Span::raw(format!("UTL {:>4} {} ", fmt::pct(util, 0), fmt::bar(util, bar_w))),
        Span::styled(format!("SM {:>5} ", fmt::pct(sm, 1)), BOLD),
        Span::raw(format!(
            "OCC {} TENSOR {} DRAM {}",
            fmt::pct(gpm.and_then(|m| m.sm_occupancy_pct), 1),
            fmt::pct(gpm.and_then(|m| m.any_tensor_util_pct), 1),
            fmt::pct(gpm.and_then(|m| m.dram_bw_util_pct), 1)
        )),
    ]);
    let mut l2 = vec![
        Span::raw(format!("{:indent$}MEM {:>4} {} ", "", fmt::pct(mem_pct, 0), fmt::bar(mem_pct, bar_w))),
        Span::raw(format!("{}/{} GiB {trend}", fmt::gib(g.memory_used_bytes), fmt::gib(total))),
    ];
    l2.extend(oom);
    l2.push(Span::raw(format!("  PWR {}/{} W  {temp}", watts(g.power_draw_w()), watts(limit))));
    let mut l3 = vec![
        Span::raw(format!("{:indent$}SM {} MHz MEM {} MHz  throttle: ", "", mhz(g.clock_sm_mhz), mhz(g.clock_mem_mhz))),
        Span::styled(throttle, throttle_style),
        Span::raw(format!("  PCIe ↑{} ↓{}", fmt::rate(pcie_tx), fmt::rate(pcie_rx))),
    ];
    // GPM answers 0 for NVLink on a GPU without links: shown only where links exist, or traffic.
    let carried = |v: Option<f64>| v.is_some_and(|b| b > 0.0);
    if !g.nvlinks.is_empty() || carried(nvl.0) || carried(nvl.1) {
        l3.push(Span::raw(format!("  NVLink ↑{} ↓{}", fmt::rate(nvl.0), fmt::rate(nvl.1))));
    }
    let l3 = Line::from(l3);
    vec![fit(l1, width), fit(Line::from(l2), width), fit(l3, width)]
}

/// `line` less the parts at its end that would not fit in `width`: a reading shows whole or not.
fn fit(mut line: Line<'static>, width: usize) -> Line<'static> {
    while line.width() > width && line.spans.len() > 1 {
        line.spans.pop();
    }
    line
}
