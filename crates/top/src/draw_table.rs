//! The process table, the per-process screen and the help screen.

use gpulse_model::GpuProcessClass;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Row as TableRow, Table, TableState};

use crate::app::App;
use crate::chart::Plot;
use crate::fmt::{self, NONE};
use crate::history::Ring;
use crate::rows::{Column, Row};

const BOLD: Style = Style::new().add_modifier(Modifier::BOLD);

/// A row's class: `idle` where the diagnosis found it so, else where it stands to the tree.
pub fn class_name(r: &Row) -> &'static str {
    if r.idle {
        return "idle";
    }
    r.class.map_or(NONE, GpuProcessClass::as_str)
}

/// The cells of one row, in [`Column::ALL`]'s order, then the class.
pub fn cells(r: &Row, depth: usize, tagged: bool) -> [String; 11] {
    let command = r.command.clone().unwrap_or_else(|| NONE.into());
    let indent = if depth == 0 { String::new() } else { format!("{}└ ", "  ".repeat(depth - 1)) };
    [
        format!("{}{}", if tagged { "*" } else { " " }, r.gpu.map_or_else(|| "cpu".into(), |g| g.to_string())),
        r.pid.to_string(),
        r.user.clone().unwrap_or_else(|| NONE.into()),
        fmt::mem(r.gpu_mem_bytes),
        r.sm_pct.map_or_else(|| NONE.into(), |v| v.to_string()),
        r.gmbw_pct.map_or_else(|| NONE.into(), |v| v.to_string()),
        r.cpu_pct.map_or_else(|| NONE.into(), |v| format!("{v:.1}")),
        r.host_mem_pct.map_or_else(|| NONE.into(), |v| format!("{v:.1}")),
        fmt::duration(r.age_s),
        format!("{indent}{command}"),
        class_name(r).to_owned(),
    ]
}

/// Where the pod or job column goes (after USER), and how wide: `namespace/pod` names run long,
/// the rest is cut.
const WORKLOAD_AT: usize = 3;
const WORKLOAD_COLS: u16 = 20;

pub fn table(f: &mut Frame, area: Rect, app: &App) {
    let shown = app.shown();
    let mut title = format!(" processes: {} ", shown.len());
    if app.tree && !app.group {
        title.push_str("· tree ");
    }
    if app.group {
        title.push_str("· by pod/job ");
    }
    if !app.filter.is_empty() {
        title.push_str(&format!("· filter {} (Esc clears) ", app.filter.describe()));
    }
    if !app.tagged.is_empty() {
        title.push_str(&format!("· {} tagged ", app.tagged.len()));
    }
    let arrow = if app.sort.reverse { "▲" } else { "▼" };
    let mut header: Vec<String> = Column::ALL
        .iter()
        .map(|c| if *c == app.sort.column { format!("{}{arrow}", c.as_str()) } else { c.as_str().to_owned() })
        .collect();
    header.insert(9, "CLASS".into());
    // The pod or job column only where some process has one: a workstation's table is unchanged.
    let workloads = app.rows.iter().any(|r| r.workload.is_some());
    if workloads {
        header.insert(WORKLOAD_AT, "POD/JOB".into());
    }
    let rows = shown.iter().map(|&(i, depth)| {
        let r = &app.rows[i];
        let mut c = cells(r, depth, app.tagged.contains(&r.pid)).to_vec();
        let class = c.pop().unwrap_or_default();
        c.insert(9, class);
        if workloads {
            c.insert(WORKLOAD_AT, r.workload.clone().unwrap_or_else(|| NONE.into()));
        }
        let style = match r.class {
            _ if r.idle => Style::new().fg(Color::Magenta),
            Some(GpuProcessClass::Foreign) => Style::new().fg(Color::Yellow),
            Some(GpuProcessClass::Gone) => Style::new().fg(Color::DarkGray),
            _ => Style::new(),
        };
        TableRow::new(c).style(style)
    });
    let mut widths = vec![
        Constraint::Length(4),
        Constraint::Length(7),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(4),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(5),
        Constraint::Length(6),
        Constraint::Length(7),
        Constraint::Fill(1),
    ];
    if workloads {
        widths.insert(WORKLOAD_AT, Constraint::Length(WORKLOAD_COLS));
    }
    let t = Table::new(rows, widths)
        .header(TableRow::new(header).style(BOLD.fg(Color::Cyan)))
        .block(Block::new().borders(Borders::TOP).title(Span::styled(title, BOLD)))
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED));
    let mut state = TableState::default().with_selected((!shown.is_empty()).then_some(app.selected));
    f.render_stateful_widget(t, area, &mut state);
}

/// How a chart writes a value on its axis.
type Label = dyn Fn(f64) -> String;

pub fn process(f: &mut Frame, area: Rect, app: &App, pid: u32) {
    let rows: Vec<&Row> = app.rows.iter().filter(|r| r.pid == pid).collect();
    let block =
        Block::new().borders(Borders::ALL).title(Span::styled(format!(" process {pid} (Esc goes back) "), BOLD));
    let inner = block.inner(area);
    f.render_widget(block, area);
    let Some(r) = rows.first() else {
        f.render_widget(Paragraph::new(format!("process {pid} is no longer listed")), inner);
        return;
    };
    let gpus: Vec<String> =
        rows.iter().filter_map(|r| r.gpu.map(|g| format!("GPU {g}: {}", fmt::mem(r.gpu_mem_bytes)))).collect();
    let info = vec![
        Line::from(format!("command  {}", r.command.as_deref().unwrap_or(NONE))),
        Line::from(format!(
            "user {}  parent {}  class {}  running {}",
            r.user.as_deref().unwrap_or(NONE),
            r.ppid.map_or_else(|| NONE.into(), |p| p.to_string()),
            class_name(r),
            fmt::duration(r.age_s)
        )),
        Line::from(format!(
            "CPU {}  host memory {} GiB  {}",
            r.cpu_pct.map_or_else(|| NONE.into(), |v| format!("{v:.1}%")),
            fmt::gib(r.rss_bytes),
            if gpus.is_empty() { "no GPU memory".into() } else { gpus.join("  ") }
        )),
    ];
    let [head, charts] = Layout::vertical([Constraint::Length(4), Constraint::Fill(1)]).areas(inner);
    f.render_widget(Paragraph::new(info), head);
    let Some(h) = app.proc_history.get(&pid) else { return };
    let parts = Layout::vertical([Constraint::Fill(1); 4]).split(charts);
    let gib = |v: f64| crate::chart::gib_label(v);
    let pct = |v: f64| crate::chart::pct_label(v);
    let series: [(&str, &Ring, Option<f64>, &Label); 4] = [
        ("CPU, % of one core", &h.cpu_pct, None, &pct),
        ("host memory, GiB", &h.rss_gib, None, &gib),
        ("GPU memory, GiB", &h.gpu_mem_gib, None, &gib),
        ("%SM", &h.sm_pct, Some(100.0), &pct),
    ];
    for ((title, ring, max, label), part) in series.into_iter().zip(parts.iter()) {
        let top = max.or(ring.max()).filter(|m| *m > 0.0);
        let latest = ring.last_n(1).next().flatten();
        let b = Block::new().borders(Borders::TOP).title(format!(
            " {title}: {} (top {}) ",
            latest.map_or_else(|| NONE.into(), |v| format!("{v:.1}")),
            top.map_or_else(|| NONE.into(), |v| format!("{v:.1}"))
        ));
        let area = b.inner(*part);
        f.render_widget(b, *part);
        let p = Plot { title: None, ring, top: top.unwrap_or(1.0), label, color: Color::Reset };
        crate::chart::plot(f, area, &p, &app.times_s);
    }
}

pub(crate) const HELP: &[(&str, &str)] = &[
    ("q, Ctrl-C", "quit"),
    ("? h", "this help (any of Esc, Enter, ? goes back)"),
    (
        "o + key",
        "sort by: g GPU, p PID, u USER, m GPU-MEM, s %SM, b %GMBW, c %CPU, r %MEM, t TIME, n COMMAND; uppercase reverses",
    ),
    (", .", "sort by the column to the left, to the right"),
    ("t", "tree view: DataLoader workers and ranks under their launcher"),
    ("g", "group by pod (namespace/pod) or Slurm job; the POD/JOB column shows where some process has one"),
    ("/", "filter: user:NAME pid:N gpu:N or words of the command; Esc clears"),
    ("↑ ↓ j k PgUp PgDn", "select a process"),
    ("Space", "tag the selected process"),
    ("Enter", "the process's screen: CPU, host memory, GPU memory and SM over time"),
    ("I T K", "SIGINT, SIGTERM, SIGKILL to the tagged (else the selected) processes, after y"),
    ("← → [ ]", "pick the GPU the charts show"),
    ("H", "switch the chart: util with SM, memory, power"),
    ("p", "pause (a replay stops; live, the screen holds)"),
    ("n", "replay: the next poll"),
];

/// The keys, each description wrapped between words beside its key (under it where the screen
/// is too narrow for both), and the notes wrapped to the screen.
pub fn help(f: &mut Frame, area: Rect, app: &App) {
    let block = Block::new().borders(Borders::ALL).title(Span::styled(" gpulse top: keys ", BOLD));
    let width = block.inner(area).width as usize;
    let key_w = if width >= 60 { 20 } else { 2 };
    let mut lines: Vec<Line> = Vec::new();
    for (k, v) in HELP {
        let mut text = fmt::wrap(v, width.saturating_sub(key_w)).into_iter();
        if key_w < fmt::cols(k) + 1 {
            lines.push(Line::styled(*k, BOLD));
        } else {
            let first = text.next().unwrap_or_default();
            lines.push(Line::from(vec![Span::styled(format!("{k:<key_w$}"), BOLD), Span::raw(first)]));
        }
        lines.extend(text.map(|t| Line::from(format!("{:key_w$}{t}", ""))));
    }
    lines.push(Line::from(""));
    let signals = match app.no_signals {
        Some(why) => format!("signals are off: {why}"),
        None => "a signal goes only to the process shown: a PID that is gone or reused is refused".into(),
    };
    let shares = format!(
        "%SM and %GMBW are NVML's per-process SM and memory-bandwidth shares, as the latest poll read them; SM beside UTL is GPM's SM activity; `{NONE}` is absent, never 0"
    );
    for note in [signals, shares] {
        lines.extend(fmt::wrap(&note, width).into_iter().map(Line::from));
    }
    f.render_widget(Paragraph::new(lines).block(block), area);
}
