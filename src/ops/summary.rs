//! What `run` and `attach` print when the job ends: the diagnosis, which GPUs each of the job's
//! processes held, and where the recording and the report are.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;

use gpulse_model::GpuProcessClass;

use gpulse_report::text::{ledger_text, main_thread_text, ranks_text, render_text, roofline_text, steps_line};

use crate::ops::analyze::analyze;

/// Prints the summary of the finished recording at `path` on stderr (stdout is the job's), and
/// what the recording `lost`, if anything. Write errors are ignored: after SIGHUP the terminal
/// may be gone.
pub fn print(path: &Path, report: bool, lost: Option<&str>) {
    let analysis = match analyze(path) {
        Ok(a) => a,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "\ngpulse: recording: {} (no diagnosis: {})",
                path.display(),
                crate::ops::describe(&e)
            );
            return;
        }
    };
    let mut out = String::from("\n── gpulse ──\n");
    if let Some(lost) = lost {
        out += &format!("the recording lost {lost}; this covers what was written before\n");
    }
    out += &ended_line(&analysis.run);
    out += &steps_line(&analysis.run);
    let d = &analysis.diagnosis;
    out += &render_text(d);
    out += &ledger_text(&d.ledger);
    out += &ranks_text(&d.ranks);
    out += &main_thread_text(&d.stacks);
    out += &roofline_text(&d.efficiency);
    out += &gpu_holders(&analysis.run);
    out += &format!("recording: {}\n", path.display());
    if report {
        let html = path.with_extension("html");
        match crate::ops::report::write(path, &analysis, &html) {
            Ok(()) => out += &format!("report:    {}\n", html.display()),
            Err(e) => out += &format!("report:    not written: {}\n", crate::ops::describe(&e)),
        }
    }
    let out = gpulse_report::text::wrap(
        &gpulse_report::text::printable(&out),
        crate::output::text_width(libc::STDERR_FILENO),
    );
    let _ = std::io::stderr().write_all(out.as_bytes());
}

/// "command killed by SIGKILL, exit status 137", from the recording's stop event, when a signal
/// ended the job; nothing when it exited by itself (its status is gpulse's own).
fn ended_line(run: &gpulse_diagnose::Run) -> String {
    let Some((_, _, stop)) = run.events.iter().rev().find(|e| e.0 == gpulse_model::EventKind::Stop) else {
        return String::new();
    };
    let Some(sig) = stop.get("signal").and_then(serde_json::Value::as_str) else { return String::new() };
    let sig = gpulse_base::signal::signal_words(sig);
    match stop.get("exit_status").and_then(serde_json::Value::as_u64) {
        Some(code) => format!("command killed by {sig}, exit status {code}\n\n"),
        None => format!("command killed by {sig}\n\n"),
    }
}

/// One line per process of the job that held GPU memory: the GPUs and the most it held on each
/// (torchrun's ranks each get a line).
fn gpu_holders(run: &gpulse_diagnose::Run) -> String {
    // pid → (command, gpu → peak bytes, `None` while never read)
    let mut held: BTreeMap<u32, (String, BTreeMap<u32, Option<u64>>)> = BTreeMap::new();
    for g in &run.gpus {
        for listing in &g.processes {
            for p in listing.iter().filter(|p| p.class == Some(GpuProcessClass::Tree)) {
                let e = held.entry(p.pid).or_insert_with(|| {
                    (p.cmdline.clone().or_else(|| p.name.clone()).unwrap_or_default(), BTreeMap::new())
                });
                let peak = e.1.entry(g.gpu).or_default();
                *peak = (*peak).max(p.used_memory_bytes);
            }
        }
    }
    if held.is_empty() {
        return String::new();
    }
    let mut s = String::from("GPUs held by the job's processes:\n");
    for (pid, (cmd, gpus)) in held {
        let list: Vec<String> = gpus
            .iter()
            .map(|(g, b)| match b {
                Some(b) => format!("GPU {g} ({:.1} GiB)", gpulse_model::to_gib(*b as f64)),
                None => format!("GPU {g} (memory unknown)"),
            })
            .collect();
        let cmd = gpulse_report::status::one_line(&cmd, 60);
        s += &format!("  PID {pid:<8} {:<32} {cmd}\n", list.join(", "));
    }
    s + "\n"
}

#[cfg(test)]
mod tests {
    use gpulse_model::{GpuProcessClass, ProcessSample};

    use super::*;

    fn run_with(used: &[Option<u64>]) -> gpulse_diagnose::Run {
        let listing = |u: Option<u64>| {
            std::sync::Arc::new(vec![ProcessSample {
                pid: 42,
                used_memory_bytes: u,
                name: Some("python3".into()),
                class: Some(GpuProcessClass::Tree),
                ..ProcessSample::default()
            }])
        };
        let g =
            gpulse_diagnose::GpuSeries { processes: used.iter().map(|u| listing(*u)).collect(), ..Default::default() };
        gpulse_diagnose::Run { gpus: vec![g], ..Default::default() }
    }

    #[test]
    fn memory_never_read_is_unknown_not_zero() {
        let s = gpu_holders(&run_with(&[None, None]));
        assert!(s.contains("GPU 0 (memory unknown)") && !s.contains("0.0 GiB"), "{s}");
        // Read once: the reading stands, the unread listings do not pull it down.
        let s = gpu_holders(&run_with(&[None, Some(3 << 30), None]));
        assert!(s.contains("GPU 0 (3.0 GiB)"), "{s}");
    }

    #[test]
    fn a_signal_is_named_and_an_exit_says_nothing() {
        let stop = |p: serde_json::Value| gpulse_diagnose::Run {
            events: vec![(gpulse_model::EventKind::Stop, 1.0, p)],
            ..Default::default()
        };
        let killed =
            stop(serde_json::json!({"reason": "command killed by SIGKILL", "signal": "SIGKILL", "exit_status": 137}));
        assert_eq!(ended_line(&killed), "command killed by SIGKILL, exit status 137\n\n");
        assert_eq!(
            ended_line(&stop(serde_json::json!({"reason": "command exited with status 1", "exit_status": 1}))),
            ""
        );
    }
}
