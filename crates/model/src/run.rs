//! One run as a whole: the loop's marks, what happened during it, and every series, as a
//! recording holds them but with no storage behind them.

use std::collections::BTreeMap;

use crate::{DeviceInfo, HostSample, Snapshot, TreeSample};

gpulse_base::words! {
    /// What a [`Marker`] marks.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum MarkerKind {
        /// A training step ended (`gpulse.step()`, or an optimizer step under `--instrument`).
        Step => "step",
        /// The loop waited `dur_us` for its next batch (a DataLoader iterator's `__next__`).
        DataWait => "data_wait",
        /// A named phase (`with gpulse.phase("eval")`) lasted `dur_us`.
        Phase => "phase",
    }
}

/// A mark sent from inside the training loop.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Marker {
    /// When it began (a step: when it ended), microseconds since the Unix epoch.
    pub t_us: i64,
    /// The process that sent it (each torchrun rank sends its own).
    pub pid: u32,
    pub kind: MarkerKind,
    /// A phase's name.
    pub name: Option<String>,
    pub dur_us: Option<i64>,
    /// How many marks this row stands for: a fast loop's steps (and their waits) are folded into
    /// one row per tenth of a second; `dur_us` is then their total.
    pub count: u32,
}

impl Marker {
    /// One mark, standing for itself.
    pub fn one(t_us: i64, pid: u32, kind: MarkerKind, name: Option<String>, dur_us: Option<i64>) -> Self {
        Self { t_us, pid, kind, name, dur_us, count: 1 }
    }
}

/// Something that happened during the run: a marker, an OOM, an error.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Event {
    pub t_ms: i64,
    pub kind: crate::EventKind,
    pub payload: serde_json::Value,
}

/// The longest text an event keeps: PyTorch's OOM message with its URL is about 700 characters,
/// kept whole; a longer line is cut and says so (`"cut": true`).
pub const EVENT_TEXT_MAX_CHARS: usize = 4000;
/// The limit of the first recordings, which cut there (mid-word, mid-URL) and said nothing.
pub const OLD_EVENT_TEXT_MAX_CHARS: usize = 600;

/// `text` trimmed, and past `max` characters cut at the last whitespace before the limit, so no
/// word or URL is left in pieces (one word longer than `max` alone is cut inside); whether it was
/// cut.
pub fn cut_text(text: &str, max: usize) -> (String, bool) {
    let text = text.trim();
    let Some((limit, _)) = text.char_indices().nth(max) else { return (text.to_owned(), false) };
    // The limit on a word's first character cuts no word: the space before it is the end.
    let end = match text[limit..].starts_with(char::is_whitespace) {
        true => limit,
        false => text[..limit].rfind(char::is_whitespace).unwrap_or(limit),
    };
    (text[..end].trim_end().to_owned(), true)
}

/// An event's `text` as it can be shown, and whether it was cut: as its payload says, else
/// (recordings from before `cut` was kept) when it is exactly as long as the old limit, and then
/// without the word the limit cut in two.
pub fn event_text(payload: &serde_json::Value) -> Option<(String, bool)> {
    let text = payload.get("text")?.as_str()?;
    Some(match payload.get("cut").and_then(serde_json::Value::as_bool) {
        Some(cut) => (text.to_owned(), cut),
        None if text.chars().count() == OLD_EVENT_TEXT_MAX_CHARS => {
            let end = text.rfind(char::is_whitespace).unwrap_or(text.len());
            (text[..end].trim_end().to_owned(), true)
        }
        None => (text.to_owned(), false),
    })
}

/// Everything known of one run, in time order: what a recording holds, without SQLite.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunData {
    pub meta: BTreeMap<String, String>,
    pub devices: Vec<DeviceInfo>,
    pub snapshots: Vec<Snapshot>,
    pub host: Vec<HostSample>,
    pub trees: Vec<TreeSample>,
    pub events: Vec<Event>,
    /// Marks from inside the training loop, in time order.
    pub markers: Vec<Marker>,
    /// What a reader should be told, such as a recording's missing `-wal` file.
    pub warnings: Vec<String>,
    /// The job's Python threads, sampled from outside; empty when none were.
    pub stacks: crate::Stacks,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PyTorch's real OOM message, as the H200's leak printed it: cut short of its URL, it ends
    /// on a whole word and says it was cut; whole, it is kept whole.
    #[test]
    fn a_text_is_cut_between_words_never_inside_one() {
        let oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 256.00 MiB. GPU 0 has a total capacity of 139.80 GiB of which 177.12 MiB is free. See documentation for Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)";
        let url = oom.find("(https://").unwrap();
        for max in [url + 1, url + 10, oom.len() - 1] {
            let (text, cut) = cut_text(oom, max);
            assert!(cut && text.ends_with("Memory Management"), "{max}: {text}");
        }
        let (text, cut) = cut_text(oom, url);
        assert!(cut && text.ends_with("Memory Management"), "the limit on the URL's start: {text}");
        assert_eq!(cut_text(oom, oom.len()), (oom.to_owned(), false));
        assert_eq!(cut_text("  whole  ", 5), ("whole".to_owned(), false));
        assert_eq!(cut_text("abcdefgh", 3), ("abc".to_owned(), true), "one word longer than the limit");
        assert_eq!(cut_text("ab cd", 4), ("ab".to_owned(), true));
        assert_eq!(cut_text("äb çd", 4), ("äb".to_owned(), true), "characters, not bytes");
    }

    #[test]
    fn a_stored_text_says_whether_it_was_cut() {
        let text = |p: serde_json::Value| event_text(&p).unwrap();
        // The first recordings' cut: 600 characters, the last word in pieces, and nothing said.
        let old = format!("{} (https://docs.pytorch.org/docs/stable/notes/cuda.html#optim", "x".repeat(540));
        assert_eq!(old.chars().count(), OLD_EVENT_TEXT_MAX_CHARS);
        assert_eq!(text(serde_json::json!({ "text": old.as_str() })), ("x".repeat(540), true), "no broken URL");
        assert_eq!(text(serde_json::json!({ "text": old.as_str(), "cut": false })), (old.clone(), false));
        assert_eq!(text(serde_json::json!({ "text": "ab", "cut": true })), ("ab".to_owned(), true));
        assert_eq!(text(serde_json::json!({ "text": "ab" })), ("ab".to_owned(), false));
        assert_eq!(event_text(&serde_json::json!({ "gpu": 0 })), None);
    }
}
