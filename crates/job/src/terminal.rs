//! gpulse's stderr, shared by the job's own output and the live status so neither garbles the
//! other. On a terminal the status holds the bottom row, outside a scroll region that the job's
//! output scrolls in; elsewhere it is a plain line, written only between the job's lines.

use std::io::Write;
use std::sync::Mutex;

/// Where the status goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusStyle {
    /// The bottom row of a terminal.
    Row,
    /// A line now and then.
    Lines,
    Off,
}

pub struct Terminal {
    style: StatusStyle,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Whether the job's last byte left a line unfinished.
    mid_line: bool,
    /// The terminal's rows when the scroll region was set.
    region_rows: Option<u16>,
    /// What the status says instead of the figures while it holds (the job stopped).
    notice: Option<String>,
}

fn size() -> Option<(u16, u16)> {
    // SAFETY: winsize is plain data filled by the ioctl.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize into `ws`, a live local.
    let ok = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    (ok && ws.ws_row >= 3 && ws.ws_col >= 20).then_some((ws.ws_row, ws.ws_col))
}

impl Terminal {
    pub fn new(style: StatusStyle) -> Self {
        let style = if style == StatusStyle::Row && size().is_none() { StatusStyle::Lines } else { style };
        Self { style, state: Mutex::new(State::default()) }
    }

    pub fn style(&self) -> StatusStyle {
        self.style
    }

    /// Writes the job's bytes unchanged.
    pub fn pass_through(&self, bytes: &[u8]) {
        let Ok(mut st) = self.state.lock() else { return };
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(bytes);
        let _ = err.flush();
        // A progress bar's `\r` also ends a line here: it redraws from the line's start.
        if let Some(&last) = bytes.last() {
            st.mid_line = !matches!(last, b'\n' | b'\r');
        }
    }

    /// Puts `text` in place of the status until called with `None`; said at once, as a line
    /// where there is no status row (even with the status off: the job needs the user).
    pub fn notice(&self, text: Option<&str>) {
        let Ok(mut st) = self.state.lock() else { return };
        st.notice = text.map(str::to_owned);
        match (text, self.style) {
            (Some(t), StatusStyle::Row) => {
                let t = t.to_owned();
                drop(st);
                self.status(&t);
            }
            (Some(t), _) => {
                let lead = if st.mid_line { "\n" } else { "" };
                st.mid_line = false;
                let _ = writeln!(std::io::stderr().lock(), "{lead}gpulse: {t}");
            }
            (None, _) => {}
        }
    }

    /// Shows `text` as the status (or the notice that holds it).
    pub fn status(&self, text: &str) {
        let Ok(mut st) = self.state.lock() else { return };
        let notice = st.notice.clone();
        let text = notice.as_deref().unwrap_or(text);
        let mut err = std::io::stderr().lock();
        match self.style {
            StatusStyle::Off => {}
            StatusStyle::Lines => {
                if !st.mid_line {
                    let _ = writeln!(err, "gpulse: {text}");
                }
            }
            StatusStyle::Row => {
                let Some((rows, cols)) = size() else { return };
                let mut out = String::new();
                if st.region_rows != Some(rows) {
                    // Make room below the cursor, then keep the job's output above the last row.
                    if st.region_rows.is_none() {
                        out += "\n\x1b[1A";
                    }
                    out += &format!("\x1b7\x1b[1;{}r\x1b8", rows - 1);
                    st.region_rows = Some(rows);
                }
                let text = format!("gpulse │ {text}");
                let shown: String = text.chars().take(usize::from(cols).saturating_sub(1)).collect();
                out += &format!("\x1b7\x1b[{rows};1H\x1b[2K\x1b[7m{shown}\x1b[0m\x1b8");
                let _ = err.write_all(out.as_bytes());
                let _ = err.flush();
            }
        }
    }

    /// Removes the status row and gives the terminal back whole.
    pub fn clear(&self) {
        let Ok(mut st) = self.state.lock() else { return };
        if let Some(rows) = st.region_rows.take() {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\x1b7\x1b[{rows};1H\x1b[2K\x1b[r\x1b8");
            let _ = err.flush();
        }
        if st.mid_line {
            st.mid_line = false;
            let _ = writeln!(std::io::stderr());
        }
    }
}
