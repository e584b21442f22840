//! `gpulse top`'s cost per frame: 8 H200s of the stand-in NVML library (each replaying the real
//! training trace with its two processes) polled through the real sampler and pipeline into the
//! view, then drawn at 200×60 and 80×24 through the crossterm backend into memory, a new poll
//! before each frame so every frame has changes to write. Run: `cargo bench --bench top_frame`.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use gpulse_diagnose::RollingDiagnosis;
use gpulse_live::Pipeline;
use gpulse_sample::{Cadence, NvmlOptions, NvmlSource, Poller};
use gpulse_top::{App, TopSink};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};

/// A terminal that keeps nothing and counts the bytes written to it.
struct Counting(Rc<Cell<usize>>);

impl std::io::Write for Counting {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.set(self.0.get() + b.len());
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// CPU seconds this process has used (its threads together).
fn cpu_s() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: one valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// The training scenario with its one H200 made eight, each with its own identity and PIDs.
fn eight_gpus(root: &std::path::Path) -> std::path::PathBuf {
    let dir = root.join("tests/fixtures/scenarios");
    let text = std::fs::read_to_string(dir.join("h200_training.json")).unwrap();
    let mut s: serde_json::Value = serde_json::from_str(&text).unwrap();
    let one = s["devices"][0].clone();
    let trace = dir.join(one["trace"].as_str().unwrap());
    s["devices"] = (0..8)
        .map(|i| {
            let mut d = one.clone();
            d["uuid"] = format!("GPU-00000000-0000-0000-0000-00000000000{i}").into();
            d["pci_bus_id"] = format!("00000000:{:02X}:00.0", 0x19 + i).into();
            d["trace"] = trace.display().to_string().into();
            for p in d["processes"].as_array_mut().unwrap() {
                p["pid"] = (p["pid"].as_u64().unwrap() + 10 * i).into();
            }
            d
        })
        .collect();
    let path = std::env::temp_dir().join(format!("gpulse-top-frame-{}.json", std::process::id()));
    std::fs::write(&path, serde_json::to_vec(&s).unwrap()).unwrap();
    path
}

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let ok = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--quiet", "--release", "-p", "fake-nvml"])
        .current_dir(root)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "building the stand-in NVML library failed");
    let scenario = eight_gpus(root);
    // SAFETY: set before any other thread runs.
    unsafe { std::env::set_var("GPULSE_FAKE_NVML_SCENARIO", &scenario) };
    let options = NvmlOptions {
        lib_path: Some(root.join("target/release/libnvidia_ml.so")),
        process_util: true,
        cadence: Cadence::RECORDER,
        gpm_metrics: Some(gpulse_model::GPM_RECORDED.to_vec()),
        ..NvmlOptions::default()
    };
    let source = NvmlSource::open(options).expect("the stand-in library opens");
    let mut poller = Poller::new(Some(Box::new(source)), None);
    let devices = poller.devices().to_vec();
    assert_eq!(devices.len(), 8);
    let app = Arc::new(Mutex::new(App::new(devices.clone(), None)));
    let mut pipeline = Pipeline::new(None, Some(RollingDiagnosis::new(&devices, false)));
    pipeline.add_sink(Box::new(TopSink::new(app.clone(), true)));
    // Fill the history rings as minutes of polls would.
    for _ in 0..300 {
        pipeline.poll(poller.poll().unwrap());
    }
    println!("gpulse top, one frame of 8 stand-in H200s (CPU time; release build)");
    for (w, h) in [(200u16, 60u16), (80, 24)] {
        let written = Rc::new(Cell::new(0));
        let backend = CrosstermBackend::new(Counting(written.clone()));
        let viewport = Viewport::Fixed(Rect::new(0, 0, w, h));
        let mut term = Terminal::with_options(backend, TerminalOptions { viewport }).unwrap();
        let (mut draw_s, mut apply_s) = (0.0, 0.0);
        let n = 500u32;
        for _ in 0..n {
            let poll = poller.poll().unwrap();
            let t = cpu_s();
            pipeline.poll(poll);
            apply_s += cpu_s() - t;
            let a = app.lock().unwrap();
            let t = cpu_s();
            term.draw(|f| gpulse_top::draw(f, &a)).unwrap();
            draw_s += cpu_s() - t;
        }
        let per = |s: f64| s * 1e6 / f64::from(n);
        println!(
            "{w}×{h}: draw {:.0} µs a frame ({} bytes written), the frame's pipeline and state {:.0} µs; target < 2000 µs",
            per(draw_s),
            written.get() / n as usize,
            per(apply_s)
        );
    }
    let _ = std::fs::remove_file(scenario);
}
