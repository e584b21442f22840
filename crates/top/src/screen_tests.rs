//! What the main screen shows at every size: whole words, charts that use the rows, command
//! lines as one inert line, and per-process shares as the latest poll read them.

use std::collections::HashMap;

use gpulse_live::Frame;
use gpulse_model::{DeviceInfo, GIB, GpuSample, HostSample, Poll, ProcessSample, Snapshot};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use super::tests::{replay_run, replayed, screen, stall_log};
use super::{App, Key};

/// The words of `text` shown from `start` on, over the lines after it that begin with `indent`
/// blanks, must be the first words of `text`, each whole: the last may carry the `…` that says
/// more was left out.
fn assert_whole_words(s: &str, line: usize, start: usize, indent: usize, text: &str, what: &str) {
    let lines: Vec<&str> = s.lines().collect();
    let mut shown: Vec<String> = lines[line][start..].split_whitespace().map(str::to_owned).collect();
    for next in &lines[line + 1..] {
        let chars: Vec<char> = next.chars().collect();
        let cont = chars.len() > indent && chars[..indent].iter().all(|c| *c == ' ') && chars[indent] != ' ';
        if !cont {
            break;
        }
        shown.extend(next.split_whitespace().map(str::to_owned));
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    assert!(!shown.is_empty() && shown.len() <= words.len(), "{what}: {shown:?}\n{s}");
    for (i, w) in shown.iter().enumerate() {
        let clipped = w.strip_suffix('…');
        assert!(clipped.is_none() || i == shown.len() - 1, "{what}: `…` inside: {shown:?}");
        assert_eq!(clipped.unwrap_or(w), words[i], "{what}: word {i} cut or changed:\n{s}");
    }
    if shown.len() < words.len() {
        assert!(shown.last().is_some_and(|w| w.ends_with('…')), "{what}: words dropped silently:\n{s}");
    }
}

/// At every width from 80 to 200, the key line names whole keys and each finding's title and
/// advice are whole words, wrapped or ended with `…`.
#[test]
fn the_key_line_and_the_findings_never_cut_a_word_at_any_width() {
    let runs = [replayed("leak.db"), replayed("dl_bound.db"), replay_run(&stall_log(), |_| false)];
    let all_keys = {
        let a = runs[0].lock().unwrap();
        let wide = screen(&a, 400, 40);
        wide.lines().last().unwrap().split("  ").map(str::to_owned).collect::<Vec<_>>()
    };
    assert!(all_keys.len() > 5, "{all_keys:?}");
    for app in &runs {
        let a = app.lock().unwrap();
        assert!(a.findings.iter().any(|f| f.advice.is_some()), "{:?}", a.findings);
        for w in 80..=200u16 {
            for h in [24, 48] {
                let s = screen(&a, w, h);
                let keys = s.lines().last().unwrap();
                assert!(keys.split("  ").all(|k| all_keys.iter().any(|a| a == k)), "{w}x{h}: {keys}");
                let lines: Vec<&str> = s.lines().collect();
                for (n, f) in a.findings.iter().enumerate() {
                    let Some(i) = lines.iter().position(|l| l.starts_with(f.id.as_str())) else { continue };
                    let at = lines[i].find(" costs ").unwrap() + " costs ".len();
                    let cost_end = at + lines[i][at..].find(|c: char| c != ' ').unwrap();
                    let title_at = cost_end + lines[i][cost_end..].find(' ').unwrap();
                    let indent = lines[i][..title_at].chars().count() + 2;
                    assert_whole_words(&s, i, title_at, indent, &f.title, &format!("{w}x{h} {} title", f.id));
                    if n == 0
                        && let Some(advice) = &f.advice
                        && let Some(j) = lines.iter().position(|l| l.starts_with("  → "))
                    {
                        let at = lines[j].find("→ ").unwrap() + "→ ".len();
                        assert_whole_words(&s, j, at, 4, advice, &format!("{w}x{h} advice"));
                    }
                }
            }
        }
    }
}

/// The help screen wraps its descriptions between words at 80 columns and at 120.
#[test]
fn the_help_screen_wraps_between_words() {
    let mut a = App::new(vec![DeviceInfo::default()], None);
    a.key(Key::Char('?'));
    for w in [80, 120] {
        // The screen inside its border.
        let s: String = screen(&a, w, 40)
            .lines()
            .map(|l| l.strip_prefix('│').unwrap_or(l).trim_end_matches('│').to_owned() + "\n")
            .collect();
        let lines: Vec<&str> = s.lines().collect();
        for (key, desc) in crate::draw_table::HELP {
            let i =
                lines.iter().position(|l| l.starts_with(&format!("{key} "))).unwrap_or_else(|| panic!("{key}:\n{s}"));
            assert_whole_words(&s, i, key.len(), 20, desc, key);
        }
    }
}

/// The charts take the rows the table leaves, with value labels on the left and the time of the
/// readings along the bottom; a taller terminal gives taller charts.
#[test]
fn the_history_grows_with_the_terminal_and_labels_its_axes() {
    let app = replayed("dl_bound.db");
    let mut a = app.lock().unwrap();
    // Rows of bars: each has a value axis.
    let axis_rows = |s: &str| s.lines().filter(|l| l.contains('│')).count();
    let s48 = screen(&a, 160, 48);
    let used = s48.lines().filter(|l| !l.trim().is_empty()).count();
    assert!(used >= 40, "{used} of 48 rows used:\n{s48}");
    assert!(axis_rows(&s48) >= 24, "{s48}");
    let s60 = screen(&a, 160, 60);
    assert!(axis_rows(&s60) > axis_rows(&s48), "taller terminal, taller charts:\n{s60}");
    for s in [&s48, &s60] {
        assert!(s.contains("100%│") && s.contains("0%│"), "percent on the value axis:\n{s}");
        let time = s.lines().find(|l| l.trim_end().ends_with("now")).unwrap_or_else(|| panic!("{s}"));
        assert!(time.split_whitespace().filter(|w| w.starts_with('-') && w.ends_with('s')).count() >= 2, "{time}");
    }
    // The memory chart says GiB, up to the GPU's memory.
    a.key(Key::Char('H'));
    let s = screen(&a, 160, 48);
    let total = a.poll.as_ref().unwrap().snapshot.as_ref().unwrap().gpus[0].memory_total_bytes.unwrap();
    let top = format!("{:.0}GiB│", total as f64 / GIB as f64);
    assert!(s.contains(&top), "{top}:\n{s}");
}

fn one_process(t_s: i64, p: ProcessSample) -> Poll {
    let gpu = GpuSample { gpu_index: 0, util_gpu_pct: Some(50), processes: vec![p], ..Default::default() };
    Poll {
        snapshot: Some(Snapshot { timestamp_us: t_s * 1_000_000, gpus: vec![gpu] }),
        host: HostSample { timestamp_us: t_s * 1_000_000, ..Default::default() },
        ..Poll::default()
    }
}

/// The whole buffer: no cell may hold a character a terminal would act on.
fn buffer_is_inert(a: &App, w: u16, h: u16) {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| crate::draw(f, a)).unwrap();
    let buf = t.backend().buffer();
    assert!(buf.content().iter().all(|c| !c.symbol().contains(char::is_control)));
}

/// A command line with newlines, a tab and terminal sequences shows whole, on one row, with its
/// control characters escaped, in the table and on the process's screen.
#[test]
fn a_command_line_shows_whole_with_its_control_characters_escaped() {
    let raw = "python3 -c\nimport time\ttime.sleep(60)\x1b[2J\u{9b}31m";
    let escaped = r"python3 -c\nimport time\ttime.sleep(60)\x1b[2J\x9b31m";
    let mut a = App::new(vec![DeviceInfo::default()], None);
    let p = ProcessSample { pid: 4711, cmdline: Some(raw.into()), ..Default::default() };
    a.apply(&Frame { poll: &one_process(1, p), rolling: None, findings: &[] }, &HashMap::new());
    let s = screen(&a, 200, 40);
    let row = s.lines().find(|l| l.contains(" 4711 ")).unwrap_or_else(|| panic!("{s}"));
    assert!(row.ends_with(escaped), "{row}");
    buffer_is_inert(&a, 200, 40);
    a.key(Key::Enter);
    let s = screen(&a, 120, 30);
    assert!(s.contains(&format!("command  {escaped}")), "{s}");
    buffer_is_inert(&a, 120, 30);
    // A watched job's command, on its line.
    a.key(Key::Esc);
    a.jobs = vec![gpulse_live::jobs::JobStatus {
        gpulse_pid: 1,
        gpulse_start_ticks: 1,
        pid: 4711,
        command: raw.into(),
        recording: None,
        instrumented: false,
        updated_unix_ms: 0,
        steps_per_s: None,
        data_wait_share: None,
        leading: None,
        main_thread: None,
    }];
    let s = screen(&a, 200, 40);
    let line = s.lines().find(|l| l.contains("job 4711")).unwrap_or_else(|| panic!("{s}"));
    assert!(line.contains(r"time.sleep(60)\x1b[2J\x9b31m"), "{line}");
    buffer_is_inert(&a, 200, 40);
}

/// A per-process share that the latest poll did not read is `—`, at once: never the last one
/// read, and a read 0 is a 0.
#[test]
fn a_share_the_latest_poll_did_not_read_is_absent() {
    let mut a = App::new(vec![DeviceInfo::default()], None);
    let read = |sm, gmbw| ProcessSample { pid: 4711, sm_util_pct: sm, mem_util_pct: gmbw, ..Default::default() };
    let row = |a: &App| {
        let s = screen(a, 120, 30);
        let row = s.lines().find(|l| l.contains(" 4711 ")).unwrap_or_else(|| panic!("{s}")).to_owned();
        // GPU, PID, USER, GPU-MEM, %SM, %GMBW.
        row.split_whitespace().skip(4).take(2).map(str::to_owned).collect::<Vec<_>>()
    };
    a.apply(&Frame { poll: &one_process(1, read(Some(87), Some(33))), rolling: None, findings: &[] }, &HashMap::new());
    assert_eq!(row(&a), ["87", "33"]);
    a.apply(&Frame { poll: &one_process(2, read(None, None)), rolling: None, findings: &[] }, &HashMap::new());
    assert_eq!(row(&a), ["—", "—"], "not read in the latest poll");
    a.key(Key::Enter);
    let s = screen(&a, 120, 30);
    assert!(s.contains("%SM: — "), "the process's screen too:\n{s}");
    a.key(Key::Esc);
    a.apply(&Frame { poll: &one_process(3, read(Some(0), Some(0))), rolling: None, findings: &[] }, &HashMap::new());
    assert_eq!(row(&a), ["0", "0"], "read as 0");
}
