//! Text from outside (a job's files, a command line, an error) made safe for a terminal.

/// `text` with every control character written as an escape (`\t`, `\r`, `\x1b`; `\n` too
/// unless `keep_newlines`), so that a file name or a source line from the job's files cannot
/// move the cursor or recolour the screen. Every control character (C0, DEL, C1) is below
/// U+00A0, so two hex digits name it.
pub fn escape_control(text: &str, keep_newlines: bool) -> String {
    if !text.chars().any(|c| c.is_control() && !(keep_newlines && c == '\n')) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' if keep_newlines => out.push('\n'),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_are_escaped_and_newlines_kept_only_when_asked() {
        assert_eq!(super::escape_control("a\x1b[2J\tb\nc\u{9b}", false), r"a\x1b[2J\tb\nc\x9b");
        assert_eq!(super::escape_control("a\x1b\nb", true), "a\\x1b\nb");
        assert_eq!(super::escape_control("plain\n", true), "plain\n");
    }
}
