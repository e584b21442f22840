//! Keys from the terminal's bytes, read by `top` itself once poll(2) says there are some.
//! crossterm's reader is not used: on a terminal that is gone it retries forever, and a resize
//! that arrives with a key makes it drop the key until the next one (its edge-triggered wait
//! reports the terminal once, and the resize returns first).

use crate::app::Key;

/// The longest escape sequence kept across reads, waiting for its end.
const MAX_PENDING: usize = 32;

/// Turns bytes into keys, keeping a sequence cut by the end of a read for the next.
#[derive(Debug, Default)]
pub struct KeyParser {
    pending: Vec<u8>,
}

impl KeyParser {
    /// The keys in `bytes` (after any bytes kept from before).
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Key> {
        self.pending.extend_from_slice(bytes);
        let mut keys = Vec::new();
        let mut at = 0;
        while at < self.pending.len() {
            match parse(&self.pending[at..]) {
                Parsed::Key(k, n) => {
                    keys.extend(k);
                    at += n;
                }
                Parsed::Incomplete if self.pending.len() - at <= MAX_PENDING => break,
                // Not a sequence this view knows, or one that never ended: skip a byte.
                Parsed::Incomplete => at += 1,
            }
        }
        self.pending.drain(..at);
        // A read that ends with a lone Esc: terminals write a sequence whole, so it was the key.
        if self.pending == [0x1b] {
            self.pending.clear();
            keys.push(Key::Esc);
        }
        keys
    }
}

enum Parsed {
    /// A key (or nothing, for bytes that mean none here) and the bytes it took.
    Key(Option<Key>, usize),
    Incomplete,
}

fn parse(b: &[u8]) -> Parsed {
    use Parsed::{Incomplete, Key as K};
    match b[0] {
        0x1b => match b.get(1) {
            None => Incomplete,
            Some(b'[') => csi(b),
            Some(b'O') => match b.get(2) {
                None => Incomplete,
                Some(&c) => K(arrow(c), 3),
            },
            Some(0x1b) => K(Some(Key::Esc), 1),
            // Alt and a key: the key.
            Some(_) => match parse(&b[1..]) {
                K(k, n) => K(k, n + 1),
                Incomplete => Incomplete,
            },
        },
        0x03 => K(Some(Key::CtrlC), 1),
        b'\r' | b'\n' => K(Some(Key::Enter), 1),
        0x7f | 0x08 => K(Some(Key::Backspace), 1),
        c if c < 0x20 => K(None, 1),
        _ => utf8(b),
    }
}

/// Cursor keys and Home/End as `ESC [ c` and `ESC O c` end them.
fn arrow(c: u8) -> Option<Key> {
    Some(match c {
        b'A' => Key::Up,
        b'B' => Key::Down,
        b'C' => Key::Right,
        b'D' => Key::Left,
        b'H' => Key::Home,
        b'F' => Key::End,
        _ => return None,
    })
}

/// `ESC [` sequences: cursor keys, `N~` keys, and the mouse wheel (SGR `ESC [ < b;x;y M`, and
/// the legacy `ESC [ M b x y`).
fn csi(b: &[u8]) -> Parsed {
    use Parsed::{Incomplete, Key as K};
    if b.get(2) == Some(&b'M') {
        let Some(&button) = b.get(3) else { return Incomplete };
        if b.len() < 6 {
            return Incomplete;
        }
        return K(wheel(u32::from(button.saturating_sub(32))), 6);
    }
    // Parameters and intermediates, then one final byte in @..~.
    let Some(end) = b[2..].iter().position(|c| (0x40..=0x7e).contains(c)).map(|i| i + 2) else { return Incomplete };
    let params = &b[2..end];
    let key = match (b[end], params) {
        (b'M' | b'm', [b'<', rest @ ..]) => {
            let button = std::str::from_utf8(rest).ok().and_then(|s| s.split(';').next()?.parse().ok());
            if b[end] == b'M' { button.and_then(wheel) } else { None }
        }
        (b'~', b"1" | b"7") => Some(Key::Home),
        (b'~', b"4" | b"8") => Some(Key::End),
        (b'~', b"5") => Some(Key::PageUp),
        (b'~', b"6") => Some(Key::PageDown),
        (c, _) if params.iter().all(|p| p.is_ascii_digit() || *p == b';') => arrow(c),
        _ => None,
    };
    K(key, end + 1)
}

/// The wheel, as the mouse reports its button: 64 up, 65 down (plus modifier bits).
fn wheel(button: u32) -> Option<Key> {
    match button & !0b1_1100 {
        64 => Some(Key::Up),
        65 => Some(Key::Down),
        _ => None,
    }
}

fn utf8(b: &[u8]) -> Parsed {
    let len = match b[0] {
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        0x80..=0xbf | 0xf8..=0xff => return Parsed::Key(None, 1),
        _ => 1,
    };
    if b.len() < len {
        return Parsed::Incomplete;
    }
    match std::str::from_utf8(&b[..len]).ok().and_then(|s| s.chars().next()) {
        Some(c) => Parsed::Key(Some(Key::Char(c)), len),
        None => Parsed::Key(None, 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys of `chunks`, each one read.
    fn keys(chunks: &[&[u8]]) -> Vec<Key> {
        let mut p = KeyParser::default();
        chunks.iter().flat_map(|c| p.feed(c)).collect()
    }

    #[test]
    fn what_terminals_send_for_the_keys_top_knows() {
        use Key::*;
        assert_eq!(keys(&[b"q", b"oM", b"\x03"]), [Char('q'), Char('o'), Char('M'), CtrlC]);
        assert_eq!(keys(&[b"\r\n\x7f"]), [Enter, Enter, Backspace]);
        assert_eq!(keys(&[b"\x1b[A\x1b[B\x1b[C\x1b[D"]), [Up, Down, Right, Left]);
        assert_eq!(keys(&[b"\x1bOA\x1bOH\x1b[F"]), [Up, Home, End], "application cursor mode");
        assert_eq!(keys(&[b"\x1b[5~\x1b[6~\x1b[1~\x1b[4~"]), [PageUp, PageDown, Home, End]);
        assert_eq!(keys(&[b"\x1b[1;5A"]), [Up], "with a modifier");
        assert_eq!(keys(&[b"\x1b"]), [Esc], "a lone Esc");
        assert_eq!(keys(&[b"\x1b", b"q"]), [Esc, Char('q')], "Esc, then q");
        assert_eq!(keys(&[b"\x1bq"]), [Char('q')], "Alt-q");
        assert_eq!(keys(&["é/".as_bytes()]), [Char('é'), Char('/')]);
    }

    #[test]
    fn the_wheel_scrolls_and_clicks_do_nothing() {
        use Key::*;
        assert_eq!(keys(&[b"\x1b[<64;10;5M\x1b[<65;10;5M"]), [Up, Down], "SGR");
        assert_eq!(keys(&[b"\x1b[<0;10;5M\x1b[<0;10;5m"]), [], "a click and its release");
        assert_eq!(keys(&[&[0x1b, b'[', b'M', 96, 40, 40], &[0x1b, b'[', b'M', 97, 40, 40]]), [Up, Down], "legacy");
    }

    #[test]
    fn a_sequence_cut_by_a_read_is_finished_by_the_next() {
        use Key::*;
        assert_eq!(keys(&[b"\x1b[", b"A"]), [Up]);
        assert_eq!(keys(&[b"\x1b[<64;1", b"0;5Mq"]), [Up, Char('q')]);
        assert_eq!(keys(&[&"é".as_bytes()[..1], &"é".as_bytes()[1..]]), [Char('é')]);
        // An unknown sequence is skipped whole; garbage that never ends does not stall the keys.
        assert_eq!(keys(&[b"\x1b[200~x"]), [Char('x')]);
        let mut junk = b"\x1b[".to_vec();
        junk.extend([b'1'; 40]);
        let mut p = KeyParser::default();
        p.feed(&junk);
        assert_eq!(p.feed(b"q").last(), Some(&Char('q')));
    }
}
