//! Numbers and names as the view prints them: an absent value is `—`, never 0.

use gpulse_model::{ClocksEventReasons, GIB};
use ratatui::text::Span;

pub const NONE: &str = "—";

/// How the device is named: its index, and `cuda:N` as CUDA_VISIBLE_DEVICES makes it (nvitop's).
pub fn gpu_label(d: &gpulse_model::DeviceInfo) -> String {
    match d.cuda_index {
        Some(c) => format!("{} cuda:{c}", d.index),
        None => d.index.to_string(),
    }
}

pub fn pct(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| NONE.into(), |v| format!("{v:.decimals$}%"))
}

/// Swap in use, percent of the swap there is; 0 on a machine without swap, absent where unread.
pub fn swap_pct(h: &gpulse_model::HostSample) -> Option<f64> {
    match (h.swap_used_bytes, h.swap_total_bytes) {
        (_, Some(0)) => Some(0.0),
        (Some(u), Some(t)) => Some(u as f64 / t as f64 * 100.0),
        _ => None,
    }
}

pub fn gib(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| NONE.into(), |b| format!("{:.1}", b as f64 / GIB as f64))
}

/// GPU memory per process: MiB under a GiB, as nvitop does.
pub fn mem(bytes: Option<u64>) -> String {
    match bytes {
        None => NONE.into(),
        Some(b) if b < GIB => format!("{}MiB", b >> 20),
        Some(b) => format!("{:.1}GiB", b as f64 / GIB as f64),
    }
}

/// Bytes a second in NVML's binary units, as `gpulse status` writes them.
pub fn rate(bytes_per_s: Option<f64>) -> String {
    bytes_per_s.map_or_else(|| NONE.into(), gpulse_model::rate_text)
}

/// A duration in its two largest units: `4m12s`, `2h05m`, `37s`.
pub fn duration(s: Option<f64>) -> String {
    let Some(s) = s.filter(|s| s.is_finite() && *s >= 0.0) else { return NONE.into() };
    let s = s.round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// The clocks-event reasons in words; `none` when none is active.
pub fn throttle(reasons: Option<u64>) -> String {
    let Some(bits) = reasons else { return NONE.into() };
    let words: Vec<&str> = ClocksEventReasons(bits)
        .names()
        .into_iter()
        .map(|n| match n {
            "gpu_idle" => "idle",
            "applications_clocks_setting" => "application clocks",
            "sw_power_cap" => "power cap",
            "hw_slowdown" => "hardware slowdown",
            "sync_boost" => "sync boost",
            "sw_thermal_slowdown" => "too hot (software)",
            "hw_thermal_slowdown" => "too hot (hardware)",
            "hw_power_brake_slowdown" => "power brake",
            "display_clock_setting" => "display clock",
            other => other,
        })
        .collect();
    if words.is_empty() { "none".into() } else { words.join(", ") }
}

/// A bar of `width` cells filled to `pct` of 100; blank when the value is absent.
pub fn bar(pct: Option<f64>, width: usize) -> String {
    let Some(p) = pct else { return "·".repeat(width) };
    let filled = ((p.clamp(0.0, 100.0) / 100.0) * width as f64).round() as usize;
    format!("{}{}", "█".repeat(filled), "░".repeat(width - filled))
}

/// Text from outside (a command line, an error) as one printable line: every control character
/// is written as an escape (`\n`, `\t`, `\x1b`), so it neither breaks a row nor reaches the
/// terminal as a sequence.
pub fn escape_control(s: &str) -> String {
    gpulse_base::text::escape_control(s, false)
}

/// Terminal cells `s` takes.
pub fn cols(s: &str) -> usize {
    Span::raw(s).width()
}

/// `text` in lines of at most `width` cells, broken between words; a word wider than a whole
/// line is the only thing ever split.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let gap = usize::from(!line.is_empty());
        if cols(&line) + gap + cols(word) <= width {
            if gap == 1 {
                line.push(' ');
            }
            line.push_str(word);
            continue;
        }
        if !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        let mut rest = word;
        while cols(rest) > width {
            let cut = split_at_cols(rest, width);
            lines.push(rest[..cut].to_owned());
            rest = &rest[cut..];
        }
        line.push_str(rest);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// `text` in one line of at most `width` cells: whole words, then `…` where some were left out.
pub fn clip(text: &str, width: usize) -> String {
    let one = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if cols(&one) <= width {
        return one;
    }
    let room = width.saturating_sub(1);
    let mut out = String::new();
    for word in one.split(' ') {
        let gap = usize::from(!out.is_empty());
        if cols(&out) + gap + cols(word) > room {
            break;
        }
        if gap == 1 {
            out.push(' ');
        }
        out.push_str(word);
    }
    if out.is_empty() {
        // Not even the first word fits: it is cut, and says so.
        out = one[..split_at_cols(&one, room)].to_owned();
    }
    out + "…"
}

/// `text` wrapped to `width`, in `max_lines` lines at most: the last ends in `…` where words
/// were left out.
pub fn wrap_at_most(text: &str, width: usize, max_lines: usize) -> Vec<String> {
    let mut lines = wrap(text, width);
    if lines.len() > max_lines {
        let rest = lines.split_off(max_lines.saturating_sub(1)).join(" ");
        // More than a line's worth is left, so the clip always says so.
        lines.push(clip(&rest, width));
        if max_lines == 0 {
            lines.clear();
        }
    }
    lines
}

/// The byte index where the first `width` cells of `s` end (at least one character).
fn split_at_cols(s: &str, width: usize) -> usize {
    let mut used = 0;
    for (i, c) in s.char_indices() {
        used += cols(c.encode_utf8(&mut [0; 4]));
        if used > width {
            return if i == 0 { c.len_utf8() } else { i };
        }
    }
    s.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_is_a_dash_and_units_read_right() {
        assert_eq!(
            (pct(None, 0), gib(None), mem(None), rate(None), duration(None)),
            ("—".into(), "—".into(), "—".into(), "—".into(), "—".into())
        );
        assert_eq!(pct(Some(0.0), 1), "0.0%", "a real zero is a zero");
        assert_eq!(mem(Some(300 << 20)), "300MiB");
        assert_eq!(mem(Some(20 * GIB + GIB / 2)), "20.5GiB");
        // GPM's 4.39 MiB/s and 2.5 GiB/s, as NVML gives them.
        assert_eq!(rate(Some(4.39 * (1 << 20) as f64)), "4.4 MiB/s");
        assert_eq!(rate(Some(2.5 * GIB as f64)), "2.5 GiB/s");
        assert_eq!(duration(Some(252.0)), "4m12s");
        assert_eq!(duration(Some(7500.0)), "2h05m");
        assert_eq!(throttle(Some(0x4 | 0x40)), "power cap, too hot (hardware)");
        assert_eq!(throttle(Some(0)), "none");
        assert_eq!(bar(Some(50.0), 4), "██░░");
        assert_eq!(bar(None, 3), "···");
    }

    #[test]
    fn control_characters_are_escaped_and_nothing_else_changes() {
        assert_eq!(escape_control("python3 -c\nimport os\tx"), "python3 -c\\nimport os\\tx");
        assert_eq!(escape_control("a\x1b[2Jb\u{9b}31m"), "a\\x1b[2Jb\\x9b31m");
        assert_eq!(escape_control("héllo → wörld"), "héllo → wörld");
        // No character a terminal reads as control survives, whatever the input.
        let every: String = (0u32..0x200).filter_map(char::from_u32).collect();
        assert!(!escape_control(&every).contains(char::is_control));
    }

    #[test]
    fn wrapping_and_clipping_break_between_words() {
        let text = "do more work per launch: a larger batch, or gradient accumulation";
        let words: Vec<&str> = text.split(' ').collect();
        for width in 12..70 {
            let lines = wrap(text, width);
            assert!(lines.iter().all(|l| cols(l) <= width), "{width}: {lines:?}");
            assert_eq!(lines.join(" ").split(' ').collect::<Vec<_>>(), words, "{width}: every word, whole");
            let one = clip(text, width);
            assert!(cols(&one) <= width, "{width}: {one}");
            let shown: Vec<&str> = one.trim_end_matches('…').split(' ').collect();
            assert_eq!(shown, words[..shown.len()], "{width}: whole words from the start: {one}");
        }
        assert_eq!(clip(text, 200), text);
        assert_eq!(wrap("abcdefgh", 3), ["abc", "def", "gh"], "a word wider than a line is split");
        assert_eq!(clip("abcdefgh", 4), "abc…");
    }
}
