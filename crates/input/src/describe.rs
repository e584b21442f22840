//! Errors said on one line.

/// An error and its causes on one line, each said once: libraries often repeat their cause's
/// words in their own message.
pub fn describe(e: &anyhow::Error) -> String {
    let mut text = String::new();
    let mut last = String::new();
    for cause in e.chain() {
        let full = cause.to_string();
        // "cannot create x" then "cannot create x: no space": only the new part is news.
        let words = full
            .strip_prefix(last.as_str())
            .filter(|_| !last.is_empty())
            .map_or(&*full, |r| r.trim_start_matches(": "));
        last = full.clone();
        let known = text.to_lowercase();
        // "Error code 11: The database disk image is malformed" repeats what was said.
        let core = words.split_once(": ").filter(|(head, _)| head.starts_with("Error code")).map_or(words, |p| p.1);
        if words.is_empty() || known.contains(&core.to_lowercase()) {
            continue;
        }
        if !text.is_empty() {
            text += ": ";
        }
        text += words;
    }
    text
}
