//! The main screen: header, a panel per GPU, the host with the charts, why it is slow, the
//! processes and the key line. It reads the [`App`] and nothing else.

use gpulse_model::{DeviceInfo, DeviceStatus, GpuSample};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Sparkline};

use crate::app::{App, Prompt, Screen};
use crate::fmt::{self, NONE};
use crate::history::Chart;

const DIM: Style = Style::new().fg(Color::DarkGray);
const BOLD: Style = Style::new().add_modifier(Modifier::BOLD);
const WARN: Style = Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD);
const BAD: Style = Style::new().fg(Color::Red).add_modifier(Modifier::BOLD);

/// Draws the whole screen for `app`.
pub fn draw(f: &mut Frame, app: &App) {
    let area = f.area();
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
    let jobs = app.jobs.len().min(if area.height >= 40 { 4 } else { 2 });
    let findings_h = ((jobs + app.findings.len()).min(if area.height >= 40 { 8 } else { 3 }) as u16 + 2).max(3);
    let host_h = if area.height >= 30 { 5 } else { 3 };
    let [header, devices, host, why, table, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(gpu_h),
        Constraint::Length(host_h),
        Constraint::Length(findings_h),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);
    f.render_widget(Paragraph::new(header_line(app)), header);
    draw_devices(f, devices, app, full);
    draw_host(f, host, app);
    draw_why(f, why, app);
    crate::draw_table::table(f, table, app);
    f.render_widget(Paragraph::new(footer_line(app)), footer);
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

fn footer_line(app: &App) -> Line<'static> {
    match &app.prompt {
        Prompt::SortKey => Line::from(
            "sort by: g GPU  p PID  u USER  m GPU-MEM  s %SM  c %CPU  r %MEM  t TIME  n COMMAND (uppercase reverses)",
        ),
        Prompt::Filter(typed) => Line::from(vec![
            Span::styled("filter (user:NAME pid:N gpu:N word; Enter applies, Esc cancels): ", BOLD),
            Span::raw(format!("{typed}▏")),
        ]),
        Prompt::Confirm(sig, targets) => {
            let who: Vec<String> = targets.iter().map(|t| format!("{} {}", t.pid, short(&t.label, 24))).collect();
            Line::from(Span::styled(
                format!("send {} to {}? y sends, any other key cancels", sig.name(), who.join(", ")),
                BAD,
            ))
        }
        Prompt::None => match &app.message {
            Some(m) => Line::from(Span::styled(m.clone(), WARN)),
            None => Line::from(Span::styled(
                "q quit  ? help  o sort  ,/. column  t tree  / filter  Enter process  Space tag  I/T/K signal  p pause  H chart",
                DIM,
            )),
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

/// How the device is named: its index, and `cuda:N` as CUDA_VISIBLE_DEVICES makes it (nvitop's).
pub fn gpu_label(d: &DeviceInfo) -> String {
    match d.cuda_index {
        Some(c) => format!("{} cuda:{c}", d.index),
        None => d.index.to_string(),
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
        format!("{:<9}{:<11}", gpu_label(d), short(&name, 10)),
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
    let limit = g.enforced_power_limit_mw.or(g.power_limit_mw).or(d.power_limit_mw);
    let watts = |mw: Option<u32>| mw.map_or_else(|| NONE.into(), |m| format!("{:.0}", f64::from(m) / 1000.0));
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
            Span::raw(format!("PWR {}/{}W {temp}", watts(g.power_draw_mw), watts(limit))),
        ];
        spans.extend(oom);
        return vec![Line::from(spans)];
    }
    let bar_w = width.saturating_sub(80).clamp(4, 40);
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
    l2.push(Span::raw(format!("  PWR {}/{} W  {temp}", watts(g.power_draw_mw), watts(limit))));
    let l3 = Line::from(vec![
        Span::raw(format!("{:indent$}SM {} MHz MEM {} MHz  throttle: ", "", mhz(g.clock_sm_mhz), mhz(g.clock_mem_mhz))),
        Span::styled(throttle, throttle_style),
        Span::raw(format!(
            "  PCIe ↑{} ↓{}  NVLink ↑{} ↓{}",
            fmt::rate(pcie_tx),
            fmt::rate(pcie_rx),
            fmt::rate(nvl.0),
            fmt::rate(nvl.1)
        )),
    ]);
    vec![l1, Line::from(l2), l3]
}

fn draw_host(f: &mut Frame, area: Rect, app: &App) {
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
    // A line each, the history to the right of the words; with two lines, swap joins memory.
    let mut lines = vec![(cpu, &app.host_cpu_pct, Color::Green), (mem, &app.host_mem_pct, Color::Blue)];
    if inner.height >= 3 {
        lines.push((swap, &app.host_swap_pct, Color::Red));
    } else if let Some((m, _, _)) = lines.last_mut() {
        m.push_str(&format!(" SWP {swap_short}"));
    }
    let label_w = lines.iter().map(|(s, _, _)| s.chars().count()).max().unwrap_or(0) as u16 + 1;
    // Rows placed by hand: a layout of more lines than fit shares the room out unevenly.
    for (i, (text, ring, color)) in lines.into_iter().enumerate().take(inner.height as usize) {
        let row = Rect { y: inner.y + i as u16, height: 1, ..inner };
        f.render_widget(Paragraph::new(text), row);
        spark(f, row, label_w, ring, row.width as usize, color);
    }
    let d = app.devices.get(app.gpu_pick);
    let title = match d {
        Some(d) => format!(" GPU {} {} (H switches, ←/→ picks the GPU) ", gpu_label(d), app.chart.title()),
        None => " no GPU ".into(),
    };
    let block = Block::new().borders(Borders::TOP).title(Span::styled(title, BOLD));
    let inner = block.inner(right);
    f.render_widget(block, right);
    let Some(h) = app.gpu_history.get(app.gpu_pick) else { return };
    if app.chart == Chart::Util && inner.height >= 2 {
        let [a, b] = Layout::vertical([Constraint::Fill(1), Constraint::Fill(1)]).areas(inner);
        spark(f, a, 0, &h.util_pct, a.width as usize, Color::Green);
        spark(f, b, 0, &h.sm_pct, b.width as usize, Color::Magenta);
    } else {
        spark(f, inner, 0, h.series(app.chart), inner.width as usize, Color::Cyan);
    }
}

/// The latest readings of `ring` as a 0–100 sparkline, `skip` cells into `area`.
fn spark(f: &mut Frame, area: Rect, skip: u16, ring: &crate::history::Ring, width: usize, color: Color) {
    if area.width <= skip || width == 0 {
        return;
    }
    let area = Rect { x: area.x + skip, width: (area.width - skip).min(width as u16), ..area };
    let data: Vec<Option<u64>> =
        ring.last_n(area.width as usize).map(|v| v.map(|v| v.clamp(0.0, 100.0).round() as u64)).collect();
    f.render_widget(
        Sparkline::default().data(data).max(100).style(Style::new().fg(color)).absent_value_symbol(" "),
        area,
    );
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 { format!("1 {what}") } else { format!("{n} {what}s") }
}

/// A watched job: its pace, its data wait and what costs it the most, from its own diagnosis
/// (which has the loop's marks, where `top`'s own sees only the GPUs).
pub fn job_line(j: &gpulse_live::jobs::JobStatus, width: usize) -> Line<'static> {
    let pace = match j.steps_per_s {
        Some(s) => format!("{s:>7.2} steps/s · data wait {}", fmt::pct(j.data_wait_share.map(|w| w * 100.0), 0)),
        None if j.instrumented => "no steps yet".to_owned(),
        None => "no steps (--instrument marks them)".to_owned(),
    };
    let mut spans = vec![Span::styled(format!("job {:<7}", j.pid), BOLD), Span::raw(format!("{pace}  "))];
    match &j.leading {
        Some(f) => {
            let cost = f.lost_share.map_or_else(String::new, |s| format!(" {:.0}%", s * 100.0));
            let oom = f.time_to_oom_s.map_or_else(String::new, |s| format!(" (OOM in {})", fmt::duration(Some(s))));
            let style = if f.id == "healthy" { Style::new() } else { WARN };
            spans.push(Span::styled(format!("{}{cost}{oom}", f.id), style));
            spans.push(Span::raw(format!(": {}  ", f.title)));
        }
        None => spans.push(Span::styled("diagnosing after 30 s  ", DIM)),
    }
    let used: usize = spans.iter().map(|s| s.content.chars().count()).sum();
    let command = j.command.split_whitespace().collect::<Vec<_>>().join(" ");
    spans.push(Span::styled(short(&command, width.saturating_sub(used).max(12)), DIM));
    Line::from(spans)
}

fn draw_why(f: &mut Frame, area: Rect, app: &App) {
    let pace = match (app.steps_per_s, app.data_wait_share) {
        (Some(s), w) => format!(" loop {s:.2} steps/s · data wait {} ", fmt::pct(w.map(|w| w * 100.0), 0)),
        (None, _) if !app.jobs.is_empty() => format!(" {} watched by gpulse ", plural(app.jobs.len(), "job")),
        (None, _) if area.width >= 110 => " loop: no steps (run the job under `gpulse run --instrument`) ".into(),
        (None, _) => " no steps (gpulse run --instrument marks them) ".into(),
    };
    // Both titles fit on one border line at 80 columns.
    let title =
        if area.width >= 110 { " why it is slow (live diagnosis, by wall time lost) " } else { " why it is slow " };
    let block = Block::new()
        .borders(Borders::TOP)
        .title(Span::styled(title, BOLD))
        .title(Line::from(Span::styled(pace, WARN)).right_aligned());
    let inner = block.inner(area);
    f.render_widget(block, area);
    let room = inner.height as usize;
    let mut lines: Vec<Line> = app.jobs.iter().take(room.min(4)).map(|j| job_line(j, inner.width as usize)).collect();
    if app.findings.is_empty() && lines.len() < room {
        lines.push(Line::styled("the diagnosis starts after 30 s of samples and runs every 5 s", DIM));
    }
    for (n, fd) in app.findings.iter().enumerate() {
        if lines.len() >= room {
            break;
        }
        let cost = fd.lost_share.map_or_else(|| format!("{NONE:>4}"), |s| format!("{:>3.0}%", s * 100.0));
        let gpu = fd.gpu.map_or_else(|| "     ".into(), |g| format!("GPU {g}"));
        let style = if n == 0 && fd.id != "healthy" { WARN } else { Style::new() };
        lines.push(Line::from(vec![
            Span::styled(format!("{:<16}", fd.id), style),
            Span::raw(format!("{gpu} costs {cost}  {}", fd.title)),
        ]));
        if n == 0
            && let Some(a) = &fd.advice
            && lines.len() + 1 < room.max(2)
        {
            lines.push(Line::styled(format!("  → {a}"), DIM));
        }
    }
    f.render_widget(Paragraph::new(lines), inner);
}
