//! "Why it is slow": the watched jobs and the live findings, wrapped between words to the
//! panel's width and, where rows run out, shortened at a word with `…`, never cut mid-word.

use gpulse_diagnose::FindingId;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use crate::app::App;
use crate::fmt::{self, NONE, clip, escape_control};

const DIM: Style = Style::new().fg(Color::DarkGray);
const BOLD: Style = Style::new().add_modifier(Modifier::BOLD);
const WARN: Style = Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD);

fn plural(n: usize, what: &str) -> String {
    if n == 1 { format!("1 {what}") } else { format!("{n} {what}s") }
}

/// A watched job: its pace, its data wait and what costs it the most, from its own diagnosis
/// (which has the loop's marks, where `top`'s own sees only the GPUs). The title, then the
/// command, give way to `width`.
pub fn job_line(j: &gpulse_live::jobs::JobStatus, width: usize) -> Line<'static> {
    let pace = match j.steps_per_s {
        Some(s) => format!("{s:>7.2} steps/s · data wait {}", fmt::pct(j.data_wait_share.map(|w| w * 100.0), 0)),
        None if j.instrumented => "no steps yet".to_owned(),
        None => "no steps (--instrument marks them)".to_owned(),
    };
    let mut spans = vec![Span::styled(format!("job {:<7}", j.pid), BOLD), Span::raw(format!("{pace}  "))];
    let used = |spans: &[Span]| spans.iter().map(|s| s.width()).sum::<usize>();
    if let Some(m) = &j.main_thread {
        let room = width.saturating_sub(used(&spans) + 20).max(8);
        spans.push(Span::raw(clip(&format!("main {}  ", main_thread_text(m)), room)));
    }
    match &j.leading {
        Some(f) => {
            // Its basis said: a measured title may give the loop's share, which is another number.
            let cost = f.lost_share.map_or_else(String::new, |s| format!(" {} of the wall", gpulse_diagnose::pct(s)));
            let oom = f.time_to_oom_s.map_or_else(String::new, |s| format!(" (OOM in {})", fmt::duration(Some(s))));
            let style = if f.finding_id() == Some(FindingId::Healthy) { Style::new() } else { WARN };
            spans.push(Span::styled(format!("{}{cost}{oom}", escape_control(&f.id)), style));
            // The title keeps a dozen columns for the command where it can.
            let room = width.saturating_sub(used(&spans) + 4 + 12).max(8);
            spans.push(Span::raw(format!(": {}  ", clip(&escape_control(&f.title), room))));
        }
        None => spans.push(Span::styled("diagnosing after 30 s  ", DIM)),
    }
    // On one line: the command's whitespace (newlines too) as single spaces, the rest escaped.
    let command = escape_control(&j.command.split_whitespace().collect::<Vec<_>>().join(" "));
    let room = width.saturating_sub(used(&spans));
    if room >= 4 {
        spans.push(Span::styled(clip(&command, room), DIM));
    }
    Line::from(spans)
}

/// What a main thread does now, and where its time has gone: `sleep w/train.py:60 train (sleep
/// 62%, python 30%)`. The site came from the job's memory, so it is escaped.
fn main_thread_text(m: &gpulse_live::jobs::MainThreadNow) -> String {
    let shares: Vec<String> =
        m.shares.iter().take(2).map(|(s, v)| format!("{} {:.0}%", escape_control(s), 100.0 * v)).collect();
    let site = m.site.as_deref().map(|s| format!(" {}", escape_control(s))).unwrap_or_default();
    let rank = m.rank.map(|r| format!("rank {r}: ")).unwrap_or_default();
    format!("{rank}{}{site} ({})", escape_control(&m.state), shares.join(", "))
}

/// What the panel says without findings: the diagnosis has not begun, will not in a replay that
/// ended too soon, or found nothing.
fn waiting_text(app: &App) -> &'static str {
    match (app.diagnosed, app.replay_ended) {
        (true, _) => {
            "nothing found (diagnosed every 5 s over the last ten minutes; a GPU whose job just started waits 30 s)"
        }
        (false, true) => {
            "the recording ended before 30 s of samples, too short for the live diagnosis: `gpulse diagnose FILE` reads it whole"
        }
        (false, false) => "the diagnosis starts after 30 s of samples and runs every 5 s",
    }
}

/// The most main threads the panel lists: the rest of the node's are in `/metrics`.
const MAIN_THREAD_ROWS: usize = 4;

/// One thing the panel says, wrapped under a head that starts its first line.
struct Part {
    head: Vec<Span<'static>>,
    text: String,
    style: Style,
}

/// The panel's lines at `width` in `rows`: every part gets a line at least, while rows last, and
/// the first finding's title and advice wrap into what the others leave.
pub fn why_lines(app: &App, width: usize, rows: usize, job_rows: usize) -> Vec<Line<'static>> {
    let mut lines: Vec<Line> = app.jobs.iter().take(job_rows.min(rows)).map(|j| job_line(j, width)).collect();
    // The main threads the view's own pipeline samples (a replay's job, or live every GPU
    // process's), where no job line shows one.
    let gpu_pids: Vec<u32> = app.rows.iter().filter(|r| r.gpu.is_some()).map(|r| r.pid).collect();
    let own: Vec<&gpulse_live::jobs::MainThreadNow> = if app.main_threads.is_empty() {
        app.main_thread.iter().collect()
    } else {
        app.main_threads.iter().filter(|m| gpu_pids.contains(&m.pid)).collect()
    };
    if app.jobs.iter().all(|j| j.main_thread.is_none()) {
        for m in own.into_iter().take(rows.saturating_sub(lines.len()).min(MAIN_THREAD_ROWS)) {
            let head = format!("main thread {:<7} ", m.pid);
            let room = width.saturating_sub(head.chars().count());
            lines.push(Line::from(vec![Span::styled(head, BOLD), Span::raw(clip(&main_thread_text(m), room))]));
        }
    }
    let mut parts = Vec::new();
    if app.findings.is_empty() {
        parts.push(Part { head: Vec::new(), text: waiting_text(app).into(), style: DIM });
    }
    for (n, fd) in app.findings.iter().enumerate() {
        let cost = fd.lost_share.map_or_else(|| format!("{NONE:>4}"), |s| format!("{:>4}", gpulse_diagnose::pct(s)));
        let gpu = fd.gpu.map_or_else(|| "     ".into(), |g| format!("GPU {g}"));
        let style = if n == 0 && fd.id != FindingId::Healthy { WARN } else { Style::new() };
        let head = vec![Span::styled(format!("{:<16}", fd.id), style), Span::raw(format!("{gpu} costs {cost}  "))];
        parts.push(Part { head, text: fd.title.clone(), style: Style::new() });
        if n == 0
            && let Some(a) = &fd.advice
        {
            parts.push(Part { head: vec![Span::styled("  → ", DIM)], text: a.clone(), style: DIM });
        }
    }
    let count = parts.len();
    for (i, part) in parts.into_iter().enumerate() {
        let left = rows.saturating_sub(lines.len());
        // One row kept for each part after this one, while there are rows to keep.
        let most = left.saturating_sub((count - 1 - i).min(left.saturating_sub(1)));
        if most == 0 {
            break;
        }
        let indent = part.head.iter().map(|s| s.width()).sum::<usize>();
        let indent = if indent * 2 > width { 0 } else { indent };
        let text_w = width.saturating_sub(indent).max(1);
        for (k, text) in fmt::wrap_at_most(&part.text, text_w, most).into_iter().enumerate() {
            let mut spans = if k == 0 { part.head.clone() } else { vec![Span::raw(" ".repeat(indent))] };
            if k == 0 && indent == 0 && !spans.is_empty() {
                // A head wider than half the panel stands on its own line.
                lines.push(Line::from(std::mem::take(&mut spans)));
            }
            spans.push(Span::styled(text, part.style));
            lines.push(Line::from(spans));
        }
    }
    // The roofline takes only the rows the findings leave.
    for r in &app.roofline {
        if lines.len() >= rows {
            break;
        }
        let mut spans = vec![Span::styled("roofline  ", DIM)];
        spans.extend(fmt::wrap_at_most(r, width.saturating_sub(10).max(1), 1).into_iter().map(Span::raw));
        lines.push(Line::from(spans));
    }
    lines.truncate(rows);
    lines
}

/// Rows the panel's text takes at `width` with all of it shown.
pub fn rows_wanted(app: &App, width: usize, job_rows: usize) -> usize {
    why_lines(app, width, usize::MAX / 2, job_rows).len()
}

pub fn draw_why(f: &mut Frame, area: Rect, app: &App, job_rows: usize) {
    let pace = match (app.steps_per_s, app.data_wait_share) {
        (Some(s), w) => format!(" loop {s:.2} steps/s · data wait {} ", fmt::pct(w.map(|w| w * 100.0), 0)),
        (None, _) if !app.jobs.is_empty() => format!(" {} watched by gpulse ", plural(app.jobs.len(), "job")),
        (None, _) if app.instrumented => " loop: no steps yet ".into(),
        (None, _) if area.width >= 110 => " loop: no steps (run the job under `gpulse run --instrument`) ".into(),
        (None, _) => " no steps (gpulse run --instrument marks them) ".into(),
    };
    // Both titles fit on one border line at 80 columns.
    let title = match (app.final_analysis, area.width >= 110) {
        (true, true) => " why it is slow (whole recording, as gpulse diagnose reads it) ",
        (true, false) => " why it is slow (whole recording) ",
        (false, true) => " why it is slow (live, last ten minutes, by the time each costs) ",
        (false, false) => " why it is slow (live window) ",
    };
    let block = Block::new()
        .borders(Borders::TOP)
        .title(Span::styled(title, BOLD))
        .title(Line::from(Span::styled(pace, WARN)).right_aligned());
    let inner = block.inner(area);
    f.render_widget(block, area);
    let lines = why_lines(app, inner.width as usize, inner.height as usize, job_rows);
    f.render_widget(Paragraph::new(lines), inner);
}
