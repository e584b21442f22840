//! What `run` and `attach` print when the job ends: the diagnosis, which GPUs each of the job's
//! processes held, and where the recording and the report are.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;

use gpulse_model::GpuProcessClass;

use crate::cmd::diagnose::{analyze, render_text, steps_line};

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
                crate::cmd::describe(&e)
            );
            return;
        }
    };
    let mut out = String::from("\n── gpulse ──\n");
    if let Some(lost) = lost {
        out += &format!("the recording lost {lost}; this covers what was written before\n");
    }
    out += &steps_line(&analysis.run);
    out += &render_text(&analysis.findings);
    out += &gpu_holders(&analysis.run);
    out += &format!("recording: {}\n", path.display());
    if report {
        let html = path.with_extension("html");
        match crate::cmd::report::write(path, &analysis, &html) {
            Ok(()) => out += &format!("report:    {}\n", html.display()),
            Err(e) => out += &format!("report:    not written: {}\n", crate::cmd::describe(&e)),
        }
    }
    let _ = std::io::stderr().write_all(out.as_bytes());
}

/// One line per process of the job that held GPU memory: the GPUs and the most it held on each
/// (torchrun's ranks each get a line).
fn gpu_holders(run: &gpulse_diagnose::Run) -> String {
    // pid → (command, gpu → peak bytes)
    let mut held: BTreeMap<u32, (String, BTreeMap<u32, u64>)> = BTreeMap::new();
    for g in &run.gpus {
        for listing in &g.processes {
            for p in listing.iter().filter(|p| p.class == Some(GpuProcessClass::Tree)) {
                let e = held.entry(p.pid).or_insert_with(|| {
                    (p.cmdline.clone().or_else(|| p.name.clone()).unwrap_or_default(), BTreeMap::new())
                });
                let peak = e.1.entry(g.gpu).or_default();
                *peak = (*peak).max(p.used_memory_bytes.unwrap_or(0));
            }
        }
    }
    if held.is_empty() {
        return String::new();
    }
    let mut s = String::from("GPUs held by the job's processes:\n");
    for (pid, (cmd, gpus)) in held {
        let list: Vec<String> =
            gpus.iter().map(|(g, b)| format!("GPU {g} ({:.1} GiB)", *b as f64 / (1u64 << 30) as f64)).collect();
        let cmd = crate::cmd::status::one_line(&cmd, 60);
        s += &format!("  PID {pid:<8} {:<32} {cmd}\n", list.join(", "));
    }
    s + "\n"
}
