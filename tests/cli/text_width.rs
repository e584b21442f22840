//! Text for a reader fits the terminal (80 columns when not one), and its evidence is words;
//! the keys a program reads are in the JSON.

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::support::{KillOnDrop, fixture, gpulse, run};

const FIXTURES: [&str; 5] = [
    "h200-gpulse-run/dl_bound.db",
    "h200-main-thread/network.db",
    "h200-energy/energy_long.db",
    "h200-roofline/copy.db",
    "h200-ledger/checkpoint.db",
];

/// The lines of `text` wider than `width` columns.
fn too_wide(text: &str, width: usize) -> Vec<&str> {
    text.lines().filter(|l| l.chars().count() > width).collect()
}

#[test]
fn diagnose_wraps_at_80_columns_into_a_pipe_with_evidence_in_words() {
    for name in FIXTURES {
        let (code, out, err) = run(gpulse(None).arg("diagnose").arg(fixture(name)));
        assert_eq!(code, 0, "{name}: {err}");
        assert!(too_wide(&out, 80).is_empty(), "{name}: {:?}", too_wide(&out, 80));
        for line in out.lines().filter(|l| l.trim_start().starts_with("evidence: ")) {
            assert!(!line.contains('='), "{name}: a key=value in the text: {line}");
        }
        assert!(!out.contains("lost_share") && !out.contains("_basis"), "{name}: {out}");
        // Every key is still in the JSON.
        let (_, json, _) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(fixture(name)));
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert!(v["findings"].as_array().unwrap().iter().all(|f| f["evidence"].is_object()), "{name}");
    }
    let (_, json, _) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(fixture(FIXTURES[0])));
    assert!(json.contains("\"cost\": {") && json.contains("\"basis\": \"ledger"), "{json}");
    let (_, text, _) = run(gpulse(None).arg("diagnose").arg(fixture(FIXTURES[0])));
    assert!(text.contains("evidence: data wait mean 307.3 ms · data wait share 86.9% ·"), "{text}");
}

/// What `gpulse diagnose FILE` writes to a terminal `cols` columns wide.
fn on_a_terminal(cols: u16, file: &std::path::Path) -> String {
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize { ws_row: 50, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: openpty writes the two descriptors it opens and reads `size`; the name may be null.
    let rc = unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), &size) };
    assert_eq!(rc, 0, "a pty");
    // SAFETY: both descriptors were just opened and are owned here alone.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    // No `\r` before each `\n` on the way back.
    // SAFETY: a termios read and written back on a descriptor this test owns.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        libc::tcgetattr(slave.as_raw_fd(), &mut t);
        t.c_oflag &= !libc::OPOST;
        libc::tcsetattr(slave.as_raw_fd(), libc::TCSANOW, &t);
    }
    let mut child = KillOnDrop::spawn(gpulse(None).arg("diagnose").arg(file).stdout(slave));
    let mut out = Vec::new();
    // The pty reads EIO once the child and every copy of its end are gone.
    let _ = std::fs::File::from(master).read_to_end(&mut out);
    assert!(child.wait().unwrap().success());
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn diagnose_wraps_at_the_terminals_width() {
    let file = fixture("h200-main-thread/network.db");
    let narrow = on_a_terminal(60, &file);
    assert!(narrow.contains("evidence: "), "{narrow}");
    // Only a pair of evidence wider than the terminal stays whole, on a line of its own.
    for line in too_wide(&narrow, 60) {
        // The first pair may be the one: it follows "evidence: " on its line.
        let pair = line.trim_start().trim_start_matches("evidence: ").trim_end_matches(" ·");
        let own_line = line.starts_with("                   ") || line.starts_with("         evidence: ");
        assert!(own_line && !pair.contains(" · "), "{line}\n{narrow}");
    }
    let wide_terminal = on_a_terminal(200, &file);
    assert!(too_wide(&wide_terminal, 80).len() > 1, "a wide terminal takes longer lines:\n{wide_terminal}");
    assert!(too_wide(&wide_terminal, 200).is_empty(), "{wide_terminal}");
}
